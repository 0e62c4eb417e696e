"""pidfds for the list-cache tests of the manager and of the CRI service: a stand-in for
``os.pidfd_open`` the tests drive (they watch made-up pids through it with
``procfs.PidWatches(pidfd_open=...)``), and a kill that waits for a real process to go."""

from __future__ import annotations

import os
import select
import signal


class PipeFds:
    """A pipe per made-up pid; its read end (the "pidfd") turns readable once the test calls
    :meth:`exit`, as a pidfd does when its process exits."""

    def __init__(self) -> None:
        self.writers: dict[int, int] = {}
        self.opened = 0

    def __call__(self, pid: int) -> int:
        r, w = os.pipe()
        self.writers[pid] = w
        self.opened += 1
        return r

    def exit(self, pid: int) -> None:
        """The process ``pid`` "exits": its watch turns readable."""
        os.write(self.writers[pid], b"x")

    def closed(self, pid: int) -> bool:
        """Whether the watch's end was closed (a write then finds no reader)."""
        try:
            os.write(self.writers[pid], b"x")
        except BrokenPipeError:
            return True
        return False

    def close(self) -> None:
        """Close the test's ends."""
        for w in self.writers.values():
            os.close(w)


def kill_and_wait(pid: int) -> None:
    """SIGKILL ``pid`` and block until it has exited, without asking the manager (the pidfd
    is opened first: its reaper may reap it at once)."""
    fd = os.pidfd_open(pid)
    try:
        signal.pidfd_send_signal(fd, signal.SIGKILL)
        select.select([fd], [], [], 60)
    finally:
        os.close(fd)
