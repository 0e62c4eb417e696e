"""What a timed-out runtime command started is killed with it (podkit.runtime.children).

A stand-in "runtime" (a Python child) starts a process in a new session, as ``runc exec`` and
``crun exec`` do before they write ``--pid-file``; the real runtimes are in test_exec_sync.py.
"""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from podkit import procfs
from podkit.runtime.children import KilledChildren, child_pids, kill_children
from podkit.runtime.command import Command
from podkit.runtime.errors import RuntimeTimeoutError

# The stand-in: fork a child that starts its own session, forks a grandchild into the same
# group, writes "<child> <grandchild>" to argv[1] and sleeps; the parent sleeps too.
RUNTIME = """
import os, sys, time
path = sys.argv[1]
if os.fork() == 0:
    os.setsid()
    grandchild = os.fork()
    if grandchild == 0:
        time.sleep(1000)
        os._exit(0)
    with open(path + ".tmp", "w") as f:
        f.write(f"{os.getpid()} {grandchild}")
    os.rename(path + ".tmp", path)
    time.sleep(1000)
    os._exit(0)
time.sleep(1000)
"""


def write_stat(proc: Path, pid: int, comm: str, state: str, ppid: int) -> None:
    (proc / str(pid)).mkdir(parents=True)
    (proc / str(pid) / "stat").write_text(f"{pid} ({comm}) {state} {ppid} {pid} {pid} 0 -1\n")


def test_child_pids_reads_the_parent_field_past_odd_command_names(tmp_path: Path) -> None:
    write_stat(tmp_path, 10, "runc", "S", 1)
    write_stat(tmp_path, 11, "runc:[2:INIT]", "R", 10)
    write_stat(tmp_path, 12, "a) 10 (b", "Z", 10)  # a name holding ") 10 ("
    write_stat(tmp_path, 13, "sh", "S", 11)  # a grandchild is not a child
    (tmp_path / "self").mkdir()
    (tmp_path / "14").mkdir()  # gone between listdir and open: skipped
    assert child_pids(10, proc=os.fspath(tmp_path)) == {11: "R", 12: "Z"}
    assert child_pids(13, proc=os.fspath(tmp_path)) == {}
    assert child_pids(10, proc=os.fspath(tmp_path / "missing")) == {}


def pids_from(path: Path) -> list[int]:
    """The child and grandchild pids the stand-in wrote (waiting on the file's arrival via its
    parent's rename, without a time limit: the stand-in always writes it)."""
    while not path.exists():
        os.sched_yield()
    return [int(p) for p in path.read_text().split()]


@pytest.fixture
def marker(tmp_path: Path) -> Iterator[Path]:
    path = tmp_path / f"started-{uuid.uuid4().hex[:8]}"
    yield path
    if path.exists():  # never leave the stand-in's processes behind a failed assertion
        for pid in pids_from(path):
            if procfs.alive(pid):
                os.kill(pid, 9)


def test_kill_children_kills_a_child_in_its_own_session_and_its_group(marker: Path) -> None:
    runtime = subprocess.Popen([sys.executable, "-c", RUNTIME, os.fspath(marker)],
                               start_new_session=True)
    try:
        child, grandchild = pids_from(marker)
        assert os.getsid(child) == child != os.getsid(runtime.pid)
        with KilledChildren() as killed:
            kill_children(runtime.pid, killed)
            assert procfs.state(runtime.pid) == "T"  # stopped, not killed: the caller kills it
            assert list(killed.pidfds) == [child]
            assert procfs.state(child) == "Z"  # the stopped runtime has not reaped it
            runtime.kill()
            runtime.wait()
            assert killed.wait_gone() == []
        assert not procfs.alive(child) and not procfs.alive(grandchild)
    finally:
        if runtime.poll() is None:
            runtime.kill()
            runtime.wait()


def test_kill_children_of_a_process_gone_already_does_nothing() -> None:
    done = subprocess.Popen(["true"])
    done.wait()
    with KilledChildren() as killed:
        kill_children(done.pid, killed)
        assert killed.pidfds == {}


def test_a_timed_out_command_kills_and_reaps_what_it_started(marker: Path) -> None:
    argv = [sys.executable, "-c", RUNTIME, os.fspath(marker)]
    call = Command(lambda _log: argv, name="stand-in", env=dict(os.environ), log=None,
                   timeout=30.0)
    # the stand-in never exits by itself; the timeout doubles until it fires after the
    # stand-in's child has started
    timeout = 0.01
    while not marker.exists():
        call.timeout = timeout
        with pytest.raises(RuntimeTimeoutError) as err:
            call.run(capture=False)
        timeout *= 2
    child, grandchild = pids_from(marker)
    assert not procfs.alive(child) and not procfs.alive(grandchild)
    assert procfs.state(child) is None  # reaped before run() raised
    assert "its process group was killed, and 1 processes it started" in str(err.value)
