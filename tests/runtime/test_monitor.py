"""Monitor: subreaper, per-PID subscribers, orphans from nested PID namespaces, no stealing."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from podkit.errors import ConflictError, NotFoundError
from podkit.runtime.errors import RuntimeTimeoutError
from podkit.runtime.monitor import (
    Monitor,
    PidFileProcess,
    default_monitor,
    is_subreaper,
    kill_process_group,
    set_subreaper,
    wait_gone,
)
from support import require_binary, require_root


@pytest.fixture
def monitor() -> Iterator[Monitor]:
    was = is_subreaper()
    m = default_monitor()  # one reaper per process, as the rules say
    interval = m.orphan_interval
    m.orphan_interval = 0.05
    m.start()
    yield m
    m.orphan_interval = interval
    set_subreaper(was)


def spawn(*argv: str) -> int:
    """A child this test owns (not a Popen, which would reap it itself)."""
    return os.posix_spawnp(argv[0], list(argv), dict(os.environ))


def test_start_makes_subreaper(monitor: Monitor) -> None:
    assert is_subreaper()
    assert monitor.running


def test_exit_code_and_signal(monitor: Monitor) -> None:
    sub = monitor.subscribe(spawn("sh", "-c", "exit 5"))
    st = sub.wait(10)
    assert (st.exit_code, st.signal) == (5, None)
    assert st.exited_at is not None
    pid = spawn("sleep", "30")
    sub = monitor.subscribe(pid)
    assert not sub.done() and sub.status is None
    os.kill(pid, signal.SIGKILL)
    st = sub.wait(10)
    assert (st.exit_code, st.signal) == (137, 9)


def test_zombie_subscribed_late_still_reported(monitor: Monitor) -> None:
    pid = spawn("sh", "-c", "exit 4")
    os.waitid(os.P_PID, pid, os.WEXITED | os.WNOWAIT)  # it is a zombie now
    assert monitor.wait(pid, 10).exit_code == 4


def test_subscribe_twice_same_subscription_and_callback(monitor: Monitor) -> None:
    pid = spawn("sleep", "30")
    a, b = monitor.subscribe(pid), monitor.subscribe(pid)
    assert a is b  # one subscription per live PID
    seen: list[int] = []
    a.add_done_callback(lambda s: seen.append(s.exit_code))
    os.kill(pid, signal.SIGKILL)
    a.wait(10)
    a.add_done_callback(lambda s: seen.append(s.exit_code + 100))  # after exit: called at once
    assert seen == [137, 237]
    late = monitor.subscribe(pid)  # after the reap: the remembered status
    assert late.done() and late.status == a.status


def test_timeout(monitor: Monitor) -> None:
    pid = spawn("sleep", "30")
    sub = monitor.subscribe(pid)
    with pytest.raises(RuntimeTimeoutError, match=str(pid)):
        sub.wait(0.05)
    os.kill(pid, signal.SIGKILL)
    assert sub.wait(10).signal == 9


def test_not_a_child(monitor: Monitor) -> None:
    with pytest.raises(NotFoundError, match="not a child"):
        monitor.subscribe(1)
    with pytest.raises(ConflictError):
        monitor.subscribe(0)


def test_popen_children_are_left_to_popen(monitor: Monitor) -> None:
    procs = [subprocess.Popen(["sh", "-c", f"exit {n}"]) for n in (7, 8, 9)]
    time.sleep(0.3)  # several orphan scans while the Popen children are zombies
    assert [p.wait(10) for p in procs] == [7, 8, 9]


def test_forget(monitor: Monitor) -> None:
    pid = spawn("sleep", "30")
    monitor.subscribe(pid)
    monitor.forget(pid)
    os.kill(pid, signal.SIGKILL)
    _, status = os.waitpid(pid, 0)  # still ours to reap
    assert os.WTERMSIG(status) == 9


@pytest.mark.integration
def test_orphan_from_nested_pid_namespace_is_reaped(monitor: Monitor) -> None:
    require_root()
    require_binary("unshare")
    # unshare forks the namespace init (our grandchild); killing unshare re-parents it to us
    p = subprocess.Popen(["unshare", "--pid", "--fork", "sh", "-c", "sleep 0.5; exit 3"])
    time.sleep(0.2)
    kids_before = _children()
    p.kill()
    p.wait()
    orphan = next(pid for pid in _wait_children(kids_before, p.pid))
    deadline = time.monotonic() + 10
    while os.path.exists(f"/proc/{orphan}") and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not os.path.exists(f"/proc/{orphan}"), "orphan zombie was not reaped"
    assert monitor.wait(orphan, 1).exit_code == 3  # remembered for a late subscriber


def _children() -> set[int]:
    out: set[int] = set()
    for tid in os.listdir(f"/proc/{os.getpid()}/task"):
        with open(f"/proc/{os.getpid()}/task/{tid}/children") as f:
            out.update(int(x) for x in f.read().split())
    return out


def _wait_children(before: set[int], exclude: int) -> Iterator[int]:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        new = _children() - before - {exclude}
        if new:
            yield from new
            return
        time.sleep(0.02)
    raise AssertionError("the namespace init was not re-parented to this process")


# -- kill_process_group / wait_gone / PidFileProcess (exec_sync on timeout) ---------------------


def _state(pid: int) -> str | None:
    """The /proc state letter of ``pid``, None once it is reaped."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            return fh.read().rsplit(b")", 1)[1].split()[0].decode()
    except FileNotFoundError:
        return None


def test_pid_file_process_kills_the_group_and_returns_once_reaped(
    monitor: Monitor, tmp_path: Path
) -> None:
    kids = tmp_path / "kids"
    leader = os.posix_spawnp("sh", ["sh", "-c", f"sleep 100 & echo $! > {kids}; sleep 100"],
                             dict(os.environ), setsid=True)
    deadline = time.monotonic() + 10
    while not kids.exists() or not kids.read_text().strip():
        assert time.monotonic() < deadline
        time.sleep(0.01)
    (tmp_path / "pid").write_text(f"{leader}\n")
    proc = PidFileProcess(tmp_path / "pid")
    try:
        proc.kill()
        proc.wait_gone(10)
        assert _state(leader) is None  # reaped before wait_gone returned, not a zombie
    finally:
        proc.close()
    try:  # the group member was SIGKILLed too: gone already, or soon (our orphan zombie)
        fd = os.pidfd_open(int(kids.read_text()))
    except ProcessLookupError:
        return
    try:
        assert wait_gone(fd, 10)
    finally:
        os.close(fd)


def test_pid_file_process_without_a_pid_file_does_nothing(tmp_path: Path) -> None:
    proc = PidFileProcess(tmp_path / "never-written")
    proc.kill()
    proc.wait_gone(1)
    proc.close()


def test_kill_process_group_spares_our_own_group(monitor: Monitor) -> None:
    pid = spawn("sleep", "100")  # in this process's group
    assert os.getpgid(pid) == os.getpgrp()
    fd = os.pidfd_open(pid)
    try:
        kill_process_group(fd, pid)  # must not killpg(our group): we are still here
        assert wait_gone(fd, 10)
        assert _state(pid) is None
    finally:
        os.close(fd)


def test_wait_gone_times_out_on_a_live_process(monitor: Monitor) -> None:
    pid = spawn("sleep", "100")
    fd = os.pidfd_open(pid)
    try:
        assert not wait_gone(fd, 0.1)
        os.kill(pid, signal.SIGKILL)
        assert wait_gone(fd, 10)
    finally:
        os.close(fd)
