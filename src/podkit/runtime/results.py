"""What the runtime CLI reports, as models, and the pure parsers of its output.

``state``/``list`` (runc and crun shapes), ``ps`` (JSON and table), ``events`` and ``--stats``,
``--version``; plus what ``Runc`` returns itself (``StopResult``, ``ExecProcess``). No I/O here.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

import attrs

from podkit.cgroups import CgroupStats
from podkit.runtime.base import ExitStatus, RuntimeState
from podkit.runtime.errors import OCIRuntimeError, UnsupportedOperationError
from podkit.runtime.monitor import Subscription

__all__ = [
    "CpuStats",
    "Event",
    "ExecProcess",
    "MemoryEntry",
    "MemoryStats",
    "RuntimeVersion",
    "Stats",
    "StopResult",
    "TopResults",
    "parse_event",
    "parse_list",
    "parse_ps",
    "parse_state",
    "parse_stats",
    "parse_top",
    "parse_version",
]


# --- result models ---------------------------------------------------------------------------


@attrs.define(slots=True, kw_only=True)
class RuntimeVersion:
    """``<runtime> --version``: name, version, commit and the runtime-spec version it reports."""

    name: str
    version: str
    commit: str = ""
    spec: str = ""


@attrs.define(slots=True, kw_only=True)
class TopResults:
    """``ps --format table`` parsed: column headers and one row per process (go-runc Top)."""

    headers: list[str]
    processes: list[list[str]]


@attrs.define(slots=True, kw_only=True)
class StopResult:
    """What ``stop`` did: signals sent, whether it escalated to SIGKILL, the exit status."""

    id: str
    signals: list[int] = attrs.field(factory=list)
    escalated: bool = False
    already_stopped: bool = False
    exit_status: ExitStatus | None = None


@attrs.define(slots=True, kw_only=True)
class ExecProcess:
    """A detached exec'd process: its host PID and its pending exit status."""

    id: str
    pid: int
    subscription: Subscription | None = None

    def wait(self, timeout: float | None = None) -> ExitStatus:
        """Block until the process exits (needs the in-process monitor)."""
        if self.subscription is None:
            raise UnsupportedOperationError(
                f"exec pid {self.pid} in {self.id} is not supervised by this process"
            )
        return self.subscription.wait(timeout)


@attrs.define(slots=True, kw_only=True)
class CpuStats:
    """``data.cpu``: usage in nanoseconds and CFS throttling counters."""

    total: int = 0
    percpu: list[int] = attrs.field(factory=list)
    kernel: int = 0
    user: int = 0
    throttling_periods: int = 0
    throttled_periods: int = 0
    throttled_time: int = 0


@attrs.define(slots=True, kw_only=True)
class MemoryEntry:
    """One memory counter group (``usage``, ``swap``, ``kernel``, ``kernelTCP``)."""

    limit: int = 0
    usage: int = 0
    max: int = 0
    failcnt: int = 0


@attrs.define(slots=True, kw_only=True)
class MemoryStats:
    """``data.memory``: cache, counter groups and the raw ``memory.stat`` map."""

    cache: int = 0
    usage: MemoryEntry = attrs.field(factory=MemoryEntry)
    swap: MemoryEntry = attrs.field(factory=MemoryEntry)
    kernel: MemoryEntry = attrs.field(factory=MemoryEntry)
    kernel_tcp: MemoryEntry = attrs.field(factory=MemoryEntry)
    raw: dict[str, int] = attrs.field(factory=dict)


@attrs.define(slots=True, kw_only=True)
class Stats:
    """``runc events --stats`` ``data``; sections podkit does not model stay in ``raw``.

    ``Runc.stats`` fills it from the container's cgroup and keeps the whole sample (v1 or v2,
    PSI, OOM counts) in ``cgroup``; ``Runc.events_stats`` is runc's own view.
    """

    cpu: CpuStats = attrs.field(factory=CpuStats)
    memory: MemoryStats = attrs.field(factory=MemoryStats)
    pids_current: int = 0
    pids_limit: int = 0
    raw: dict[str, Any] = attrs.field(factory=dict)
    cgroup: CgroupStats | None = None


@attrs.define(slots=True, kw_only=True)
class Event:
    """One ``runc events`` record: ``type`` is ``stats``, ``oom``, ``error``..."""

    type: str
    id: str
    stats: Stats | None = None
    raw: dict[str, Any] = attrs.field(factory=dict)


# --- pure parsers ----------------------------------------------------------------------------


def _json(text: bytes | str, what: str) -> Any:
    try:
        return json.loads(text)
    except ValueError as e:
        shown = text[:200] if isinstance(text, str) else text[:200].decode(errors="replace")
        raise OCIRuntimeError(f"cannot parse {what} output as JSON: {e}: {shown!r}") from e


def parse_state(text: bytes | str) -> RuntimeState:
    """Parse ``state <id>`` output (runc or crun shape)."""
    return RuntimeState.from_dict(_json(text, "state"), source="runtime state")


def parse_list(text: bytes | str) -> list[RuntimeState]:
    """Parse ``list --format json``: runc prints ``null`` when empty, crun ``[]``."""
    data = _json(text, "list") if text.strip() else None
    if data is None:
        return []
    if not isinstance(data, list):
        raise OCIRuntimeError(f"list output is not a JSON array: {str(data)[:200]}")
    return [RuntimeState.from_dict(d, source="runtime list") for d in data]


def parse_ps(text: bytes | str) -> list[int]:
    """Parse ``ps --format json``: an array of host PIDs (``null`` for none)."""
    data = _json(text, "ps") if text.strip() else None
    if data is None:
        return []
    if not isinstance(data, list) or not all(
        isinstance(p, int) and not isinstance(p, bool) for p in data
    ):
        raise OCIRuntimeError(f"ps output is not an array of PIDs: {str(data)[:200]}")
    return list(data)


def parse_top(text: str) -> TopResults:
    """Parse ``ps --format table``: header, then rows; the last column keeps its spaces."""
    lines = [ln for ln in text.splitlines() if ln.strip()]
    if not lines:
        return TopResults(headers=[], processes=[])
    headers = lines[0].split()
    n = len(headers)
    pid_col = headers.index("PID") if "PID" in headers else -1
    rows: list[list[str]] = []
    for line in lines[1:]:
        fields = line.split(None, n - 1) if n > 1 else [line.strip()]
        if pid_col >= 0 and pid_col < len(fields) and fields[pid_col] == "-":
            continue
        rows.append(fields)
    return TopResults(headers=headers, processes=rows)


def _int(v: Any) -> int:
    return v if isinstance(v, int) and not isinstance(v, bool) else 0


def _entry(d: Any) -> MemoryEntry:
    d = d if isinstance(d, dict) else {}
    return MemoryEntry(limit=_int(d.get("limit")), usage=_int(d.get("usage")),
                       max=_int(d.get("max")), failcnt=_int(d.get("failcnt")))


def parse_stats(data: Mapping[str, Any]) -> Stats:
    """Build ``Stats`` from the ``data`` object of a ``stats`` event."""
    cpu = data.get("cpu") or {}
    usage = cpu.get("usage") or {}
    thr = cpu.get("throttling") or {}
    mem = data.get("memory") or {}
    pids = data.get("pids") or {}
    return Stats(
        cpu=CpuStats(
            total=_int(usage.get("total")),
            percpu=[_int(x) for x in usage.get("percpu") or []],
            kernel=_int(usage.get("kernel")),
            user=_int(usage.get("user")),
            throttling_periods=_int(thr.get("periods")),
            throttled_periods=_int(thr.get("throttledPeriods")),
            throttled_time=_int(thr.get("throttledTime")),
        ),
        memory=MemoryStats(
            cache=_int(mem.get("cache")),
            usage=_entry(mem.get("usage")),
            swap=_entry(mem.get("swap")),
            kernel=_entry(mem.get("kernel")),
            kernel_tcp=_entry(mem.get("kernelTCP")),
            raw={str(k): _int(v) for k, v in (mem.get("raw") or {}).items()},
        ),
        pids_current=_int(pids.get("current")),
        pids_limit=_int(pids.get("limit")),
        raw=dict(data),
    )


def parse_event(line: bytes | str) -> Event:
    """Parse one ``runc events`` JSON line."""
    data = _json(line, "events")
    if not isinstance(data, dict):
        raise OCIRuntimeError(f"event is not a JSON object: {str(data)[:200]}")
    stats = None
    if data.get("type") == "stats" and isinstance(data.get("data"), dict):
        stats = parse_stats(data["data"])
    return Event(type=str(data.get("type", "")), id=str(data.get("id", "")), stats=stats, raw=data)


def parse_version(text: str) -> RuntimeVersion:
    """Parse ``--version`` of runc (``runc version X``) or crun (``crun version X``)."""
    name = version = commit = spec = ""
    for line in text.splitlines():
        m = re.match(r"^(\S+) version (\S+)", line)
        if m and not name:
            name, version = m.group(1), m.group(2)
        elif line.startswith("commit:"):
            commit = line.split(":", 1)[1].strip()
        elif line.startswith("spec:"):
            spec = line.split(":", 1)[1].strip()
    if not name:
        raise OCIRuntimeError(f"cannot parse runtime version output {text[:200]!r}")
    return RuntimeVersion(name=name, version=version, commit=commit, spec=spec)
