"""podkit.procfs.PidWatches over real child processes: a pidfd says "exited" once the process
is gone (or a zombie), one epoll call answers for every watch, and fds are closed on forget,
retain and close."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator

import pytest

from podkit import procfs


def open_fds() -> set[int]:
    return {int(n) for n in os.listdir("/proc/self/fd")}


@pytest.fixture
def sleepers() -> Iterator[list[subprocess.Popen[bytes]]]:
    procs = [subprocess.Popen(["sleep", "600"]) for _ in range(3)]
    yield procs
    for p in procs:
        p.kill()
        p.wait()


def test_exits_show_on_the_pidfd(sleepers: list[subprocess.Popen[bytes]]) -> None:
    before = open_fds()
    w = procfs.PidWatches()
    for i, p in enumerate(sleepers):
        assert w.watch(f"k{i}", p.pid)
    assert [w.exited(f"k{i}", p.pid) for i, p in enumerate(sleepers)] == [False] * 3
    assert w.exited_keys() == set()
    sleepers[1].kill()
    sleepers[1].wait()
    assert w.exited("k1", sleepers[1].pid) is True
    assert w.exited_keys() == {"k1"}
    assert w.exited("k1", sleepers[1].pid + 100000) is None  # another pid: not watched
    assert w.exited("nope", 1) is None
    assert w.watching("k0", sleepers[0].pid) and not w.watching("k0", 1)
    w.forget("k1")
    w.retain({"k0"})
    assert len(w) == 1 and "k0" in w and "k2" not in w
    w.close()
    assert len(w) == 0 and open_fds() == before


def test_a_zombie_counts_as_exited() -> None:
    p = subprocess.Popen(["sh", "-c", "read x"], stdin=subprocess.PIPE)
    w = procfs.PidWatches()
    try:
        assert w.watch("z", p.pid)
        assert p.stdin is not None
        p.stdin.close()  # it exits; nobody has reaped it yet
        os.waitid(os.P_PID, p.pid, os.WEXITED | os.WNOWAIT)
        assert w.exited("z", p.pid) is True and w.exited_keys() == {"z"}
    finally:
        p.wait()
        w.close()


def test_nothing_is_kept_for_a_gone_pid_or_past_the_limit(
        sleepers: list[subprocess.Popen[bytes]]) -> None:
    gone = subprocess.Popen(["true"])
    gone.wait()
    w = procfs.PidWatches(limit=2)
    assert not w.watch("gone", gone.pid) and not w.watch("zero", 0)
    assert w.watch("a", sleepers[0].pid) and w.watch("b", sleepers[1].pid)
    assert not w.watch("c", sleepers[2].pid) and len(w) == 2
    assert w.watch("a", sleepers[2].pid)  # a new pid under a key replaces the watch
    assert w.watching("a", sleepers[2].pid) and len(w) == 2
    w.close()

