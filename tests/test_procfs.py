"""podkit.procfs: the /proc readers, over this process and over a fake /proc tree."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from podkit import procfs

NET_DEV = "\n".join([
    "Inter-|   Receive                            |  Transmit",
    " face |bytes packets errs drop fifo frame compressed multicast|bytes packets errs drop ...",
    "    lo: 100 1 0 0 0 0 0 0 100 1 0 0 0 0 0 0",
    "  eth0: 5000 40 2 0 0 0 0 0 7000 50 3 0 0 0 0 0",
    "broken: 1 2 3",
    "",
])


def _fake_proc(tmp_path: Path, pid: int, stat: bytes) -> str:
    d = tmp_path / str(pid)
    d.mkdir()
    (d / "stat").write_bytes(stat)
    return str(tmp_path)


def test_this_process_is_alive_and_has_a_start_time() -> None:
    me = os.getpid()
    assert procfs.alive(me)
    assert procfs.state(me) in ("R", "S")
    assert procfs.name_and_state(me) == (Path(f"/proc/{me}/comm").read_text().strip(), "R")
    started = procfs.start_time(me)
    assert started is not None and started > 0
    assert procfs.start_time(me) == started  # stable for the process
    assert procfs.cmdline(me)  # python's argv


def test_a_reaped_process_is_gone() -> None:
    p = subprocess.Popen(["true"])
    p.wait()
    assert not procfs.alive(p.pid)
    assert procfs.start_time(p.pid) is None
    assert procfs.net_dev(p.pid) is None
    assert procfs.cmdline(p.pid) == []


def test_a_zombie_is_not_alive() -> None:
    p = subprocess.Popen(["true"])
    try:
        os.waitid(os.P_PID, p.pid, os.WEXITED | os.WNOWAIT)  # exited, not reaped
        assert procfs.state(p.pid) == "Z"
        assert not procfs.alive(p.pid)
    finally:
        p.wait()


@pytest.mark.parametrize("pid", [0, -1])
def test_no_pid_is_never_alive(pid: int) -> None:
    assert not procfs.alive(pid)
    assert procfs.state(pid) is None


def test_a_command_name_with_parentheses_and_spaces(tmp_path: Path) -> None:
    fields = ["S"] + [str(n) for n in range(4, 22)] + ["987654"] + ["0"] * 10
    proc = _fake_proc(tmp_path, 42, b"42 (a) b (c) " + " ".join(fields).encode() + b"\n")
    assert procfs.state(42, proc=proc) == "S"
    assert procfs.name_and_state(42, proc=proc) == ("a) b (c", "S")
    assert procfs.start_time(42, proc=proc) == 987654
    assert procfs.alive(42, proc=proc)


@pytest.mark.parametrize("stat", [b"", b"garbage", b"42 (x)", b"42 (x) S 1"])
def test_a_broken_stat_line_reads_as_gone(tmp_path: Path, stat: bytes) -> None:
    proc = _fake_proc(tmp_path, 42, stat)
    assert procfs.start_time(42, proc=proc) is None
    if stat in (b"", b"garbage", b"42 (x)"):
        assert procfs.state(42, proc=proc) is None
        assert procfs.name_and_state(42, proc=proc) is None
        assert not procfs.alive(42, proc=proc)


def test_parse_net_dev() -> None:
    got = procfs.parse_net_dev(NET_DEV)
    assert got == [procfs.InterfaceCounters("lo", 100, 0, 100, 0),
                   procfs.InterfaceCounters("eth0", 5000, 2, 7000, 3)]


def test_net_dev_of_a_fake_process(tmp_path: Path) -> None:
    (tmp_path / "7" / "net").mkdir(parents=True)
    (tmp_path / "7" / "net" / "dev").write_text(NET_DEV)
    got = procfs.net_dev(7, proc=str(tmp_path))
    assert got is not None and [i.name for i in got] == ["lo", "eth0"]


def test_net_dev_of_this_process_lists_loopback() -> None:
    got = procfs.net_dev(os.getpid())
    assert got is not None and "lo" in {i.name for i in got}


def test_cmdline_of_a_fake_process(tmp_path: Path) -> None:
    (tmp_path / "9").mkdir()
    (tmp_path / "9" / "cmdline").write_bytes(b"conmon\0--cid\0abc\0")
    assert procfs.cmdline(9, proc=str(tmp_path)) == [b"conmon", b"--cid", b"abc"]
