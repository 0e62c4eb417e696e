"""``ExecSession.pump`` (what ``pod exec -i/-t`` runs) over local processes instead of runc: the
stdin copy and its EOF, separate streams, the timeout kill, output held by a background
process, and a terminal's end of input."""

from __future__ import annotations

import os
import pty
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from podkit.runtime import ExecProcess, PipeIO, RuntimeTimeoutError, default_monitor
from podkit.runtime.console import Console
from podkit.runtime.interactive import ExecSession


def spawn(script: str, fds: tuple[int | None, int | None, int | None]) -> ExecProcess:
    """``sh -c script`` with its stdio on ``fds``, watched by the monitor as runc's are."""
    actions = [(os.POSIX_SPAWN_DUP2, fd, i) for i, fd in enumerate(fds) if fd is not None]
    pid = os.posix_spawn("/bin/sh", ["sh", "-c", script], os.environ, file_actions=actions,
                         setsid=True)
    return ExecProcess(id="local", pid=pid, subscription=default_monitor().subscribe(pid))


@pytest.fixture
def outputs(tmp_path: Path) -> Iterator[tuple[int, int, Path, Path]]:
    out, err = tmp_path / "out", tmp_path / "err"
    fds = [os.open(p, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC) for p in (out, err)]
    yield fds[0], fds[1], out, err
    for fd in fds:
        os.close(fd)


def piped(script: str, stdin: bool = True) -> ExecSession:
    io = PipeIO(stdin=stdin)
    process = spawn(script, io.child_fds())
    io.close_after_start()
    return ExecSession(process, io=io)


def test_stdin_copied_until_eof_and_streams_apart(
        outputs: tuple[int, int, Path, Path]) -> None:
    out_fd, err_fd, out, err = outputs
    r, w = os.pipe()
    os.write(w, b"hello\n" * 1000)
    os.close(w)  # EOF after the input: the process's stdin is closed then
    try:
        with piped("cat; echo oops >&2; exit 3") as session:
            status = session.pump(r, out_fd, err_fd)
    finally:
        os.close(r)
    assert status.exit_code == 3
    assert out.read_bytes() == b"hello\n" * 1000 and err.read_bytes() == b"oops\n"


def test_timeout_kills_and_raises(outputs: tuple[int, int, Path, Path]) -> None:
    out_fd, err_fd, out, _ = outputs
    with piped("echo started; exec sleep 60", stdin=False) as session:
        with pytest.raises(RuntimeTimeoutError, match=r"after 0\.3s: killed"):
            session.pump(None, out_fd, err_fd, timeout=0.3)
        sub = session.process.subscription
        assert sub is not None and sub.done()
        assert sub.status is not None and sub.status.signal_name == "SIGKILL"
    assert out.read_bytes() == b"started\n"


def test_output_held_by_a_background_process_does_not_hang(
        outputs: tuple[int, int, Path, Path]) -> None:
    out_fd, err_fd, out, _ = outputs
    with piped("sleep 60 & echo $!; exit 5", stdin=False) as session:
        status = session.pump(None, out_fd, err_fd)
    background = int(out.read_bytes().split()[0])
    try:
        assert status.exit_code == 5
    finally:
        os.kill(background, signal.SIGKILL)


def test_a_terminal_gets_end_of_input_at_eof(outputs: tuple[int, int, Path, Path]) -> None:
    out_fd, err_fd, out, _ = outputs
    master, slave = pty.openpty()
    process = spawn("read x; echo got $x; read y || echo eof; exit 4", (slave, slave, slave))
    os.close(slave)
    r, w = os.pipe()
    os.write(w, b"abc\n")
    os.close(w)
    try:
        with ExecSession(process, console=Console(master)) as session:
            session.resize(30, 100)
            assert session.console is not None and session.console.size() == (30, 100)
            status = session.pump(r, out_fd, err_fd)
    finally:
        os.close(r)
    assert status.exit_code == 4
    text = out.read_bytes().replace(b"\r\n", b"\n")
    assert b"got abc\n" in text and text.endswith(b"eof\n")  # one stream on a tty
