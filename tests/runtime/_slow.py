"""Exec timeouts that fire after the exec'd process has started, on fast hosts and in the slow
cgroup-v2 guest alike (``runc exec`` takes 0.3 to 0.7 s to start a process there)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")

FLOOR = 0.5  # the timeout these tests used on this machine kind
FACTOR = 4.0  # margin over one measured exec start


def timeout_past_start(run_true: Callable[[], object]) -> float:
    """A timeout for an exec of a long-running process: ``FACTOR`` times the time one exec
    of ``true`` takes here (``run_true`` runs it), never under ``FLOOR``."""
    start = time.monotonic()
    run_true()
    return max(FLOOR, FACTOR * (time.monotonic() - start))


def settled(probe: Callable[[], T], seconds: float = 5.0, step: float = 0.1) -> T:
    """``probe()`` once two samples ``step`` s apart agree (closes and thread exits of the work
    just done have landed; the slow guest lags behind), or the last sample after ``seconds``."""
    deadline = time.monotonic() + seconds
    last = probe()
    while time.monotonic() < deadline:
        time.sleep(step)
        now = probe()
        if now == last:
            return now
        last = now
    return last
