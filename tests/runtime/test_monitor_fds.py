"""The in-process monitor's descriptors across a fork (issue 11: no descriptor leaks)."""

from __future__ import annotations

import os
import subprocess
import threading

from podkit.runtime.monitor import Monitor, Subscription

from ._fds import open_fds


def test_start_after_fork_closes_the_parents_pipe_and_pidfds() -> None:
    proc = subprocess.Popen(["sleep", "30"])
    try:
        m = Monitor(orphan_interval=1e6)
        # the state a started monitor has (without its thread, so the fork holds no lock)
        m._thread = threading.Thread(target=lambda: None)
        m._owner_pid = os.getpid()
        m._wake_r, m._wake_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        m._subs = {proc.pid: (Subscription(proc.pid), os.pidfd_open(proc.pid))}
        inherited = [m._wake_r, m._wake_w, m._subs[proc.pid][1]]
        child = os.fork()
        if child == 0:  # pragma: no cover - runs in the child
            before = open_fds()
            m.start()  # a new pipe (2 fds) instead of the parent's 3
            os._exit(0 if open_fds() == before - 1 else 1)
        _, status = os.waitpid(child, 0)
        assert os.waitstatus_to_exitcode(status) == 0
        for fd in inherited:
            os.close(fd)
    finally:
        proc.kill()
        proc.wait()
