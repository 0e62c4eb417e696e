"""Tests for podkit.runtime.console: console socket, pty master, resize.

Unit tests pass a real pty over a real socket; integration tests let runc and crun send the
pty master of a ``terminal: true`` container (``create`` and ``exec -t``).
"""

from __future__ import annotations

import io
import json
import os
import select
import shutil
import socket
import subprocess
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from podkit.errors import InvalidArgumentError
from podkit.runtime.console import Console, ConsoleSocket, get_winsize
from podkit.runtime.errors import OCIRuntimeError, RuntimeTimeoutError
from podkit.runtime.logs import CRILogWriter, read_cri_log
from support import require_binary, require_isolated, require_root

from ._bundles import busybox_config
from ._fds import fds_past, open_fds

# -- unit: a real pty over a real socket -------------------------------------------------


def read_until(console: Console, needle: bytes, timeout: float = 30.0) -> bytes:
    """Output until ``needle`` shows up; an EIO while the runtime still sets up the exec's
    terminal (nobody holds the pty slave for a moment) is not the end yet."""
    out = b""
    deadline = time.monotonic() + timeout
    while needle not in out and time.monotonic() < deadline:
        ready, _, _ = select.select([console], [], [], 0.05)
        chunk = console.read() if ready else b""
        out += chunk
        if ready and not chunk:
            time.sleep(0.01)
    return out



def send_master(path: Path, fd: int, name: bytes = b"/dev/ptmx") -> None:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as client:
        client.connect(os.fspath(path))
        socket.send_fds(client, [name], [fd])


def test_receive_resize_and_read() -> None:
    master, slave = os.openpty()
    with ConsoleSocket() as cs:
        assert cs.path.exists()
        send_master(cs.path, master)
        os.close(master)
        console = cs.receive(timeout=10)
    with console:
        assert console.name == "/dev/ptmx"
        console.resize(37, 91)
        assert get_winsize(slave) == (37, 91)
        assert console.size() == (37, 91)
        os.write(slave, b"hello\n")
        os.close(slave)
        assert console.read_all() == b"hello\r\n"  # the line discipline adds CR (ONLCR)
        assert console.read() == b""  # EIO after hangup is the end, not an error
    assert not cs.path.exists()
    assert not cs.path.parent.exists()  # the private temp dir is gone too


def test_copy_to_cri_log_and_file(tmp_path: Path) -> None:
    for target_kind in ("log", "file"):
        master, slave = os.openpty()
        console = Console(master)
        log = tmp_path / f"{target_kind}.log"
        writer = CRILogWriter(log)
        sink = io.BytesIO()
        console.copy_to(writer if target_kind == "log" else sink)
        os.write(slave, b"line one\npartial")
        os.close(slave)
        assert console.join(timeout=30)
        writer.close()
        console.close()
        if target_kind == "log":
            lines = read_cri_log(log)
            assert [(ln.stream, ln.content, ln.complete) for ln in lines] == [
                ("stdout", b"line one\r", True),
                ("stdout", b"partial", False),
            ]
        else:
            assert sink.getvalue() == b"line one\r\npartial"


def test_receive_times_out_without_runtime() -> None:
    with ConsoleSocket() as cs, pytest.raises(RuntimeTimeoutError, match="no runtime"):
        cs.receive(timeout=0.05)


def test_receive_without_fd_is_an_error() -> None:
    with ConsoleSocket() as cs, socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as client:
        client.connect(os.fspath(cs.path))
        client.sendall(b"no fd here")
        with pytest.raises(OCIRuntimeError, match="no pty master"):
            cs.receive(timeout=10)


def test_path_too_long_is_refused(tmp_path: Path) -> None:
    with pytest.raises(InvalidArgumentError, match="sun_path"):
        ConsoleSocket(tmp_path / ("x" * 120))


def test_bad_window_size_is_refused() -> None:
    master, slave = os.openpty()
    try:
        with Console(master) as console, pytest.raises(InvalidArgumentError, match="rows 0"):
            console.resize(0, 80)
    finally:
        os.close(slave)


# -- integration: runc and crun send the master ------------------------------------------


class RawRuntime:
    """runc/crun driven directly (this file tests the console, not the adapter)."""

    def __init__(self, binary: str, root: Path) -> None:
        self.binary = binary
        self.root = root
        self.log = root / "runtime.log"

    def __call__(self, *args: str) -> None:
        cmd = [self.binary, "--root", os.fspath(self.root), "--log", os.fspath(self.log),
               "--log-format", "json", *args]
        # stdio to /dev/null: the container inherits it, a pipe would never reach EOF
        rc = subprocess.call(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL, timeout=60)
        if rc != 0:
            raise AssertionError(f"{cmd} failed: {self.log.read_text()[-2000:]}")


@pytest.fixture(params=["runc", "crun"])
def runtime(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[RawRuntime]:
    require_root()
    if request.param == "crun":
        require_isolated()  # crun refuses hybrid cgroups outside scripts/isolated
    binary = require_binary(request.param)
    root = tmp_path / "state"
    root.mkdir()
    yield RawRuntime(binary, root)
    shutil.rmtree(root, ignore_errors=True)


def cgroup_leftovers(name: str) -> list[Path]:
    """Cgroup dirs of ``name`` left in any hierarchy (after the runtime deleted the container).

    Inside scripts/isolated a bare tmpfs hides ``/sys/fs/cgroup/unified`` and crun still writes
    a ``<name>/cgroup.procs`` there: not a cgroup, removed here.
    """
    unified = Path("/sys/fs/cgroup/unified")
    if unified.is_dir() and not (unified / "cgroup.controllers").exists():
        shutil.rmtree(unified / name, ignore_errors=True)
    return [p for p in Path("/sys/fs/cgroup").glob(f"*/{name}") if p.exists()]


@pytest.mark.integration
def test_tty_create_resize_visible_to_stty(
    runtime: RawRuntime, busybox_rootfs: Path, tmp_path: Path
) -> None:
    cid = f"pk-cm-tty-{uuid.uuid4().hex[:8]}"
    bundle = tmp_path / "bundle"
    bundle.mkdir()
    config = busybox_config(busybox_rootfs, ["sh", "-c", "stty size; tty; echo TTYOK"],
                            f"/{cid}", terminal=True)
    (bundle / "config.json").write_text(json.dumps(config))
    try:
        with ConsoleSocket() as cs:
            runtime("create", "--bundle", os.fspath(bundle), "--console-socket",
                    os.fspath(cs.path), cid)
            console = cs.receive(timeout=30)
        with console:
            console.resize(33, 77)
            runtime("start", cid)
            out = console.read_all()
        assert b"33 77\r\n" in out
        assert b"/dev/pts/" in out
        assert b"TTYOK\r\n" in out
    finally:
        runtime("delete", "--force", cid)
    assert cgroup_leftovers(cid) == []


@pytest.mark.integration
def test_tty_exec_through_console_socket(
    runtime: RawRuntime, busybox_rootfs: Path, tmp_path: Path
) -> None:
    cid = f"pk-cm-ttx-{uuid.uuid4().hex[:8]}"
    bundle = tmp_path / "bundle"
    bundle.mkdir()
    config = busybox_config(busybox_rootfs, ["sleep", "600"], f"/{cid}", terminal=False)
    (bundle / "config.json").write_text(json.dumps(config))
    try:
        runtime("run", "--detach", "--bundle", os.fspath(bundle), cid)
        with ConsoleSocket() as cs:
            process = tmp_path / "process.json"
            process.write_text(json.dumps({
                "terminal": True, "user": {"uid": 0, "gid": 0}, "cwd": "/",
                "env": ["PATH=/bin"], "args": ["sh", "-c", "read go; stty size"],
            }))
            runtime("exec", "--detach", "--console-socket", os.fspath(cs.path),
                    "--process", os.fspath(process), cid)
            with cs.receive(timeout=30) as console:
                console.resize(12, 34)
                console.write(b"go\n")
                out = read_until(console, b"12 34\r\n")
        assert b"12 34\r\n" in out
    finally:
        runtime("delete", "--force", cid)
    assert cgroup_leftovers(cid) == []


def test_receive_with_fds_past_1024() -> None:
    with fds_past(), ConsoleSocket() as cs, \
            socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as client:
        assert cs._sock.fileno() > 1024
        client.connect(os.fspath(cs.path))
        r, w = os.pipe()
        try:
            socket.send_fds(client, [b"/dev/ptmx"], [r])
            with cs.receive(timeout=10) as console:
                assert console.fd > 1024
                os.write(w, b"ok")
                assert console.read() == b"ok"
        finally:
            os.close(r)
            os.close(w)


def test_copy_to_that_cannot_start_its_thread_closes_its_dup(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    r, w = os.pipe()
    console = Console(r)
    try:
        before = open_fds()

        def no_threads(self: threading.Thread) -> None:
            raise RuntimeError("can't start new thread")

        monkeypatch.setattr(threading.Thread, "start", no_threads)
        with pytest.raises(RuntimeError, match="new thread"):
            console.copy_to(io.BytesIO())
        monkeypatch.undo()
        assert open_fds() == before
    finally:
        console.close()
        os.close(w)
