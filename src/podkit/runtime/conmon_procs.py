"""conmon's processes: the launcher that forks the monitor, and liveness checks by pidfd.

A conmon outlives the process that started it, so it is found again by pid (from its pid
file) and checked by pidfd, with its argv (``podkit.procfs``) as a guard against a recycled pid.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time

from podkit import _proc, procfs
from podkit.runtime.errors import RuntimeTimeoutError
from podkit.runtime.io import wait_readable

__all__ = ["Launcher", "open_pidfd", "reap_if_child"]


def open_pidfd(pid: int, marker: bytes) -> int | None:
    """A pidfd of ``pid`` if it is alive and ``marker`` is one of its argv elements.

    The argv check guards against a recycled pid after the conmon exited.
    """
    if pid <= 0:
        return None
    try:
        pidfd = os.pidfd_open(pid)
    except ProcessLookupError:
        return None
    try:
        ours = marker in procfs.cmdline(pid) and procfs.alive(pid)
    except BaseException:
        os.close(pidfd)
        raise
    if not ours:
        os.close(pidfd)
        reap_if_child(pid)
        return None
    return pidfd


class Launcher:
    """The first conmon process (it forks the monitor and exits): a pidfd to wait on, no
    polling, and a deadline for it to exit."""

    def __init__(self, proc: _proc.Child, argv: list[str], limit: float) -> None:
        self.proc = proc
        self.argv = argv
        self.deadline = time.monotonic() + limit
        pidfd = _proc.open_pidfd(proc.pid)  # None: gone already (a zombie reaped below)
        self.pidfd = -1 if pidfd is None else pidfd

    def left(self) -> float:
        """Seconds until the deadline (0 once passed)."""
        return max(0.0, self.deadline - time.monotonic())

    def reap(self) -> None:
        """Wait for the launcher's exit (by the deadline) and collect it."""
        if self.pidfd >= 0:
            try:
                ready = wait_readable([self.pidfd], self.left())
            finally:
                os.close(self.pidfd)
                self.pidfd = -1
            if not ready:
                self.kill()
                raise RuntimeTimeoutError("conmon did not daemonize in time", self.argv)
        self.proc.wait()

    def kill(self) -> None:
        """SIGKILL and collect the launcher if it still runs (after a failure)."""
        if self.pidfd >= 0:
            os.close(self.pidfd)
            self.pidfd = -1
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait()


def reap_if_child(pid: int) -> None:
    """Collect ``pid`` if it is our zombie child (we may be a subreaper); ignore otherwise."""
    with contextlib.suppress(ChildProcessError, OSError):
        os.waitpid(pid, os.WNOHANG)
