"""Exec timeouts that fire after the exec'd process has started, on fast hosts and in the slow
cgroup-v2 guest alike (``runc exec`` takes 0.3 to 0.7 s to start a process there)."""

from __future__ import annotations

import time
from collections.abc import Callable

FLOOR = 0.5  # the timeout these tests used on this machine kind
FACTOR = 4.0  # margin over one measured exec start


def timeout_past_start(run_true: Callable[[], object]) -> float:
    """A timeout for an exec of a long-running process: ``FACTOR`` times the time one exec
    of ``true`` takes here (``run_true`` runs it), never under ``FLOOR``."""
    start = time.monotonic()
    run_true()
    return max(FLOOR, FACTOR * (time.monotonic() - start))
