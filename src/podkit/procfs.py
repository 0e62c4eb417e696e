"""Reading ``/proc``: a process's state, start time, argv and network counters.

One home for the few ``/proc`` files podkit reads, so frontends and supervisors do not parse
them each in their own way. Stdlib only; every function answers "gone" (``None``, ``False``,
empty) instead of raising when the process or the file is not there.
"""

from __future__ import annotations

import os
from typing import NamedTuple

__all__ = [
    "PROC",
    "InterfaceCounters",
    "alive",
    "cmdline",
    "net_dev",
    "parse_net_dev",
    "parse_stat",
    "start_time",
    "state",
]

PROC = "/proc"
"""Where procfs is mounted."""


def _read(pid: int, name: str, proc: str) -> bytes | None:
    if pid <= 0:
        return None
    try:
        with open(os.path.join(proc, str(pid), name), "rb") as f:
            return f.read()
    except OSError:
        return None


def parse_stat(data: bytes) -> list[bytes]:
    """The fields of a ``/proc/<pid>/stat`` line after the command name (field 3, the state,
    first); the command may hold spaces and parentheses, so it is cut at the last ``)``."""
    head, sep, rest = data.rpartition(b")")
    if not sep or not head:
        raise ValueError("not a /proc/<pid>/stat line")
    return rest.split()


def state(pid: int, *, proc: str = PROC) -> str | None:
    """The one-letter state of ``pid`` (``R``, ``S``, ``Z``, ...); ``None`` when it is gone."""
    data = _read(pid, "stat", proc)
    if data is None:
        return None
    try:
        return parse_stat(data)[0].decode("ascii", "replace")
    except (ValueError, IndexError):
        return None


def alive(pid: int, *, proc: str = PROC) -> bool:
    """Whether ``pid`` is a live process (present and neither a zombie nor dead)."""
    return state(pid, proc=proc) not in (None, "Z", "X")


def start_time(pid: int, *, proc: str = PROC) -> int | None:
    """When ``pid`` started, in clock ticks since boot (field 22 of ``stat``): with the pid
    it names one process even after the pid is reused. ``None`` when it is gone."""
    data = _read(pid, "stat", proc)
    if data is None:
        return None
    try:
        return int(parse_stat(data)[19])
    except (ValueError, IndexError):
        return None


def cmdline(pid: int, *, proc: str = PROC) -> list[bytes]:
    """The argv of ``pid`` (empty once it is gone, or for a kernel thread)."""
    data = _read(pid, "cmdline", proc)
    if not data:
        return []
    return data.rstrip(b"\0").split(b"\0")


class InterfaceCounters(NamedTuple):
    """One line of ``/proc/<pid>/net/dev``: an interface's byte and error counters."""

    name: str
    rx_bytes: int
    rx_errors: int
    tx_bytes: int
    tx_errors: int


def parse_net_dev(text: str) -> list[InterfaceCounters]:
    """The interfaces of a ``/proc/net/dev`` table (two header lines; bad lines skipped)."""
    out = []
    for line in text.splitlines()[2:]:
        name, _, counters = line.partition(":")
        fields = counters.split()
        if len(fields) < 11:
            continue
        try:
            out.append(InterfaceCounters(name.strip(), int(fields[0]), int(fields[2]),
                                         int(fields[8]), int(fields[10])))
        except ValueError:
            continue
    return out


def net_dev(pid: int, *, proc: str = PROC) -> list[InterfaceCounters] | None:
    """The interface counters of the network namespace ``pid`` is in; ``None`` when the
    process is gone."""
    data = _read(pid, "net/dev", proc)
    if data is None:
        return None
    return parse_net_dev(data.decode("utf-8", "replace"))
