"""Test helpers for file descriptors: count this process's, and push new ones past 1024."""

from __future__ import annotations

import contextlib
import fcntl
import os
import resource
from collections.abc import Iterator

import pytest

FD_SETSIZE = 1024


def open_fds() -> int:
    """How many descriptors this process has open."""
    return len(os.listdir("/proc/self/fd"))


@contextlib.contextmanager
def fds_past(limit: int = FD_SETSIZE) -> Iterator[None]:
    """Hold descriptors until every new one is numbered above ``limit`` (soft limit raised).

    The held ones are close-on-exec copies of ``/dev/null``; all are closed on exit and the
    soft ``RLIMIT_NOFILE`` is put back.
    """
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = limit + 1024
    if hard != resource.RLIM_INFINITY and hard < want:
        pytest.skip(f"RLIMIT_NOFILE hard limit {hard} < {want}")
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, want), hard))
    held: list[int] = []
    try:
        null = os.open(os.devnull, os.O_RDONLY | os.O_CLOEXEC)
        held.append(null)
        while held[-1] <= limit:
            held.append(fcntl.fcntl(null, fcntl.F_DUPFD_CLOEXEC, 0))
        probe = os.dup(null)
        os.close(probe)
        assert probe > limit
        yield
    finally:
        for fd in held:
            os.close(fd)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
