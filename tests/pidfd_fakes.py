"""A stand-in for ``os.pidfd_open`` that tests drive: the list-cache tests of the manager and
of the CRI service watch made-up pids through it (``procfs.PidWatches(pidfd_open=...)``)."""

from __future__ import annotations

import os


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
