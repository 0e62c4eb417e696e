"""IO kinds: which descriptors a child gets and what is closed after start."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from podkit.runtime import IO, FileIO, InheritIO, NullIO, PipeIO


def spawn(io: IO, *argv: str) -> subprocess.Popen[bytes]:
    i, o, e = io.child_fds()
    p = subprocess.Popen(list(argv), stdin=i, stdout=o, stderr=e)
    io.close_after_start()
    return p


def test_all_are_io() -> None:
    for io in (NullIO(), InheritIO(), PipeIO(), FileIO("/dev/null")):
        assert isinstance(io, IO)
        io.close()


def test_pipe_io_eof_after_close_after_start() -> None:
    io = PipeIO()
    p = spawn(io, "sh", "-c", "read x; echo out:$x; echo err >&2")
    assert io.stdin is not None and io.stdout is not None and io.stderr is not None
    io.stdin.write(b"hello\n")
    io.stdin.close()
    assert io.stdout.read() == b"out:hello\n"  # EOF: the parent holds no write end
    assert io.stderr.read() == b"err\n"
    assert p.wait(10) == 0
    io.close()


def test_pipe_io_ownership(tmp_path: Path) -> None:
    uid = 1000 if os.geteuid() == 0 else os.geteuid()  # only root may give pipes away
    gid = 1000 if os.geteuid() == 0 else os.getegid()
    io = PipeIO(uid=uid, gid=gid)
    for fd in io.child_fds():
        assert fd is not None
        st = os.fstat(fd)
        assert (st.st_uid, st.st_gid) == (uid, gid)
    io.close()
    assert io.child_fds() == (None, None, None)


def test_pipe_io_partial() -> None:
    io = PipeIO(stdin=False, stderr=False)
    i, o, e = io.child_fds()
    assert i is None and e is None and o is not None
    assert io.stdin is None and io.stderr is None
    io.close()


def test_file_io(tmp_path: Path) -> None:
    io = FileIO(tmp_path / "out", tmp_path / "err")
    spawn(io, "sh", "-c", "echo o; echo e >&2").wait(10)
    io2 = FileIO(tmp_path / "out")  # appends, stderr to the same file
    spawn(io2, "sh", "-c", "echo o2; echo e2 >&2").wait(10)
    assert (tmp_path / "out").read_text() == "o\no2\ne2\n"
    assert (tmp_path / "err").read_text() == "e\n"


def test_file_io_stdin(tmp_path: Path) -> None:
    (tmp_path / "in").write_text("data\n")
    io = FileIO(tmp_path / "out", stdin_path=tmp_path / "in")
    spawn(io, "cat").wait(10)
    assert (tmp_path / "out").read_text() == "data\n"


def test_file_io_bad_path_leaks_nothing(tmp_path: Path) -> None:
    before = set(os.listdir("/proc/self/fd"))
    io = FileIO(tmp_path / "out", tmp_path / "missing-dir" / "err")
    with pytest.raises(FileNotFoundError):
        io.child_fds()
    assert set(os.listdir("/proc/self/fd")) == before


def test_null_io() -> None:
    io = NullIO()
    p = spawn(io, "sh", "-c", "echo x")
    assert p.wait(10) == 0
    assert io._fd is None
