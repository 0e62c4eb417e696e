"""Hardening of conmon supervision (issue 11): descriptors, fds past 1024, crash leftovers,
socket path lengths, file modes. Real conmon with runc and crun (crun inside
``scripts/isolated``); the ``env`` fixture and its leak check come from ``conftest``.
"""

from __future__ import annotations

import errno
import os
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

import pytest

from podkit.runtime import Conmon
from podkit.runtime.conmon_files import attach_link_name
from podkit.runtime.errors import NotFoundError, RuntimeTimeoutError
from podkit.runtime.supervise import ConmonSupervisor

from ._conmon_env import Env, conmon_pids_for
from ._fds import fds_past, open_fds

ECHO = ["sh", "-c", "while read l; do echo \"got $l\"; done"]


def wait_until(check: object, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():  # type: ignore[operator]
        assert time.monotonic() < deadline, f"timed out waiting for {check}"
        time.sleep(0.02)


# -- unit: attach link names -----------------------------------------------------------


@pytest.mark.parametrize("id_len", [1, 20, 31, 32, 33, 64, 128])
def test_attach_link_never_has_the_length_conmon_cuts(id_len: int) -> None:
    ident = ("a" * id_len)[:-1] + "b"
    for dir_len in range(1, 200):
        socket_dir = Path("/" + "d" * (dir_len - 1))
        name = attach_link_name(socket_dir, ident)
        assert len(str(socket_dir)) + 1 + len(name) != 107
        if len(str(socket_dir)) + 1 + id_len != 107:
            assert name == ident
        else:  # a name no ID can have, not shared with an ID differing at the end
            assert name.startswith("_")
            assert name != attach_link_name(socket_dir, ident[:-1] + "c")


# -- integration: descriptors ------------------------------------------------------------


@pytest.mark.integration
def test_liveness_and_wait_paths_keep_open_fds_flat(env: Env) -> None:
    cid = env.new_id("fds")
    env.conmon.run(cid, env.bundle(cid, ECHO), stdin=True)
    sup = ConmonSupervisor(env.conmon)

    def round_trip() -> None:
        assert env.conmon.monitor_alive(cid)
        assert env.conmon.exit_status(cid) is None
        assert [r.id for r in env.conmon.list()] == [cid]
        with pytest.raises(RuntimeTimeoutError):
            sup.wait(cid, timeout=0)
        with env.conmon.attach(cid) as att, pytest.raises(RuntimeTimeoutError):
            att.recv(timeout=0)
        env.conmon.resize(cid, 30, 90)

    round_trip()  # warm up: lazily opened things (logging, the monitor) are open now
    before = open_fds()
    for _ in range(300):
        round_trip()
    assert open_fds() == before
    with env.conmon.attach(cid) as att:  # still fully working
        att.send(b"x\n")
        assert att.recv(timeout=30) == ("stdout", b"got x\n")
    assert env.conmon.stop(cid, timeout=0.5).exit_code == 137
    for _ in range(100):  # the exited paths too
        assert not env.conmon.monitor_alive(cid)
        assert env.conmon.wait(cid, timeout=0).exit_code == 137
    assert open_fds() == before
    env.conmon.delete(cid)


@pytest.mark.integration
def test_start_attach_wait_stop_delete_with_fds_past_1024(env: Env) -> None:
    cid = env.new_id("hifd")
    with fds_past():
        env.conmon.run(cid, env.bundle(cid, ECHO), stdin=True)  # sync pipe + launcher pidfd
        with env.conmon.attach(cid) as att:
            assert att.fileno() > 1024
            with pytest.raises(RuntimeTimeoutError):
                att.recv(timeout=0.05)
            att.send(b"high\n")
            assert att.recv(timeout=30) == ("stdout", b"got high\n")
            r, w = os.pipe()
            os.write(w, b"copied\n")
            thread = threading.Thread(target=lambda: (time.sleep(0.5), os.write(w, b"\x10\x11")))
            thread.start()
            with os.fdopen(r, "rb", buffering=0) as stdin, open(os.devnull, "wb") as sink:
                assert att.copy(stdout=sink, stdin=stdin) == "detached"
            thread.join()
            os.close(w)
        with pytest.raises(RuntimeTimeoutError):
            env.conmon.wait(cid, timeout=0.05)
        log = Path(env.conmon.get(cid).log_path)
        log.rename(f"{log}.1")
        env.conmon.reopen_log(cid)
        assert env.conmon.stop(cid, timeout=0.5).exit_code == 137
        env.conmon.delete(cid)
        assert conmon_pids_for(cid) == []


# -- integration: a start cut short by a crash -------------------------------------------

CRASH = r"""
import os, signal, sys
from podkit.runtime import conmon as cm
from podkit.runtime.runc import Runc
binary, root, state, cid, bundle, point = sys.argv[1:]

def crash(*args, **kwargs):
    os.kill(os.getpid(), signal.SIGKILL)

if point == "before-record":  # conmon reported the pid; the record is written next
    cm.atomic_write = crash
else:  # conmon runs; nothing read from its sync pipe yet
    cm.Conmon._read_sync = crash
cm.Conmon(Runc(binary=binary, root=root), state_dir=state).create(cid, bundle, stdin=True)
"""


@pytest.mark.integration
@pytest.mark.parametrize("point", ["before-pid", "before-record"])
def test_delete_removes_what_a_crashed_start_left(env: Env, point: str) -> None:
    cid = env.new_id("crash")
    bundle = env.bundle(cid, ECHO)
    proc = subprocess.run(
        [sys.executable, "-c", CRASH, env.binary, os.fspath(env.tmp / "rt"),
         os.fspath(env.state_dir), cid, os.fspath(bundle), point],
        stdin=subprocess.DEVNULL, capture_output=True, timeout=120,
    )
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    cdir = env.conmon.container_dir(cid)
    link = env.conmon.socket_dir / cid  # the attach link (named by the ID at this length)
    # what the crash left: conmon's dir and link, a runtime container, no record
    wait_until(lambda: (cdir / "conmon.pid").exists() and link.is_symlink())
    wait_until(lambda: env.runc.state(cid).pid > 0 if _known(env, cid) else False)
    if point == "before-pid":  # conmon ends when it cannot report to its dead parent
        wait_until(lambda: conmon_pids_for(os.fspath(cdir)) == [])
    else:
        assert conmon_pids_for(os.fspath(cdir)) != []
    with pytest.raises(NotFoundError):
        env.conmon.get(cid)
    assert env.conmon.list() == []

    fresh = Conmon(env.runc, state_dir=env.state_dir)  # as a new process would
    ConmonSupervisor(fresh).delete(cid, force=True)
    assert not cdir.exists()
    assert not link.is_symlink()
    assert list(env.conmon.socket_dir.iterdir()) == []
    assert list(env.conmon.exit_dir.iterdir()) == []
    assert sorted(p.name for p in bundle.iterdir()) == ["config.json"]
    assert conmon_pids_for(os.fspath(cdir)) == []
    assert not _known(env, cid)
    # idempotent: nothing left to remove
    assert fresh.remove_leftovers(cid) is False
    with pytest.raises(NotFoundError):
        fresh.delete(cid, force=True)


def _known(env: Env, cid: str) -> bool:
    try:
        env.runc.state(cid)
    except NotFoundError:
        return False
    return True


@pytest.mark.integration
def test_remove_leftovers_also_removes_a_recorded_container(env: Env) -> None:
    cid = env.new_id("left")
    env.conmon.run(cid, env.bundle(cid, ECHO), stdin=True)
    assert env.conmon.remove_leftovers(cid) is True
    assert not env.conmon.container_dir(cid).exists()
    assert list(env.conmon.socket_dir.iterdir()) == []
    assert conmon_pids_for(cid) == []
    assert not _known(env, cid)


# -- integration: socket dir lengths ------------------------------------------------------


@pytest.mark.integration
@pytest.mark.parametrize(("id_len", "socket_dir_len"), [
    (64, 41), (64, 42), (64, 43),  # 42 + 1 + 64 == 107: conmon cut the link name
    (20, 85), (20, 86), (20, 87),
])
def test_attach_and_delete_at_socket_dir_lengths(env: Env, id_len: int,
                                                 socket_dir_len: int) -> None:
    base = tempfile.mkdtemp(prefix="pk", dir="/tmp")
    pad = socket_dir_len - len(base) - 1 - len("/sockets")
    assert pad > 0
    state = Path(base) / ("s" * pad)
    conmon = Conmon(env.runc, state_dir=state)
    assert len(os.fspath(conmon.socket_dir)) == socket_dir_len
    prefix = f"pk-cm-len-{uuid.uuid4().hex[:8]}-"
    cid = prefix + "x" * (id_len - len(prefix))
    env.ids.append(cid)
    try:
        conmon.run(cid, env.bundle(cid, ECHO), stdin=True)
        with conmon.attach(cid) as att:
            att.send(b"hi\n")
            assert att.recv(timeout=30) == ("stdout", b"got hi\n")
        assert conmon.stop(cid, timeout=0.5).exit_code == 137
        conmon.delete(cid)
        assert list(conmon.socket_dir.iterdir()) == []
        assert list((state / "containers").iterdir()) == []
    finally:
        if conmon.container_dir(cid).exists():
            conmon.delete(cid, force=True)
        shutil.rmtree(base, ignore_errors=True)


# -- integration: file modes --------------------------------------------------------------


@pytest.mark.integration
def test_state_dirs_are_0700_and_podkit_files_0600(env: Env) -> None:
    cid = env.new_id("modes")
    old = os.umask(0o022)
    try:
        env.conmon.run(cid, env.bundle(cid, ["sleep", "600"]))
    finally:
        os.umask(old)
    cdir = env.conmon.container_dir(cid)
    for d in (env.state_dir, cdir.parent, cdir, env.conmon.exit_dir, env.conmon.socket_dir):
        assert (d, oct(d.stat().st_mode & 0o777)) == (d, oct(0o700))
    for f in (cdir / "conmon.json", cdir / "conmon.stderr"):
        assert (f, oct(f.stat().st_mode & 0o777)) == (f, oct(0o600))
    env.conmon.delete(cid, force=True)


@pytest.mark.integration
def test_attach_that_runs_out_of_fds_closes_what_it_opened(env: Env) -> None:
    cid = env.new_id("emfile")
    env.conmon.run(cid, env.bundle(cid, ECHO), stdin=True)
    env.conmon.attach(cid).close()  # warm up
    before = open_fds()
    first, second = os.dup(0), os.dup(0)
    os.close(first)
    os.close(second)
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (second, hard))  # one more fd, not two
    try:
        with pytest.raises(OSError) as info:
            env.conmon.attach(cid)
        assert info.value.errno == errno.EMFILE
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    assert open_fds() == before
    env.conmon.delete(cid, force=True)
