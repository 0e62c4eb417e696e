"""One cgroup's CPU, memory, pids and pressure numbers, in one shape for cgroup v1 and v2.

A controller that is not enabled for the cgroup (v1: not mounted; v2: not in its
``cgroup.controllers``) is ``None``; a missing file of an enabled one is ``CgroupFileError``; a
cgroup that is gone is ``NotFoundError``.
"""

from __future__ import annotations

import os
from pathlib import Path

import attrs

from podkit.cgroups.files import PsiStats, read_int, read_keyed, read_psi, read_text
from podkit.cgroups.mounts import Mode
from podkit.cgroups.paths import Location
from podkit.errors import NotFoundError

__all__ = ["CgroupStats", "CpuStats", "MemoryStats", "PidsStats", "Pressure", "read_stats"]

# v1 reports "no limit" as the largest page-aligned int64; anything this big is unlimited
V1_UNLIMITED = 1 << 62


@attrs.frozen(kw_only=True)
class CpuStats:
    """CPU time in nanoseconds and CFS throttling (0 when no quota was ever set)."""

    usage_ns: int
    user_ns: int
    system_ns: int
    nr_periods: int = 0
    nr_throttled: int = 0
    throttled_ns: int = 0


@attrs.frozen(kw_only=True)
class MemoryStats:
    """Memory in bytes; working set is usage minus inactive file, as kubelet computes it."""

    usage: int
    working_set: int
    rss: int
    cache: int
    page_faults: int
    major_page_faults: int
    limit: int | None  # None: unlimited
    oom_events: int  # times the cgroup hit its limit and the OOM killer ran (v1: failcnt)
    oom_kills: int  # processes the OOM killer killed in it
    stat: dict[str, int] = attrs.field(factory=dict)

    @property
    def available(self) -> int | None:
        """Limit minus working set (``None`` when unlimited), as the CRI reports it."""
        return None if self.limit is None else max(0, self.limit - self.working_set)


@attrs.frozen(kw_only=True)
class PidsStats:
    """Tasks in the cgroup and its limit (``None``: unlimited)."""

    current: int
    limit: int | None


@attrs.frozen(kw_only=True)
class Pressure:
    """v2 PSI of the cgroup (each ``None`` when the kernel has no such file)."""

    cpu: PsiStats | None = None
    memory: PsiStats | None = None
    io: PsiStats | None = None


@attrs.frozen(kw_only=True)
class CgroupStats:
    """One sample of a cgroup; ``None`` sections are controllers not enabled for it."""

    mode: Mode
    cpu: CpuStats | None
    memory: MemoryStats | None
    pids: PidsStats | None
    pressure: Pressure | None = None


def read_stats(loc: Location) -> CgroupStats:
    """Sample the cgroup at ``loc``; ``NotFoundError`` when its directories are gone."""
    if not loc.exists():
        where = loc.controller_dir("memory") or loc.unified or next(iter(loc.v1.values()), "")
        raise NotFoundError(f"cgroup {where} does not exist")
    if loc.mode is Mode.UNIFIED:
        assert loc.unified is not None
        return _v2(loc.unified)
    return _v1(loc)


def _int(path: Path) -> int:
    value = read_int(path)
    return 0 if value is None else value


# -- v2 ---------------------------------------------------------------------------------------


def _v2(d: Path) -> CgroupStats:
    enabled = set(read_text(d / "cgroup.controllers").split())
    cpu = read_keyed(d / "cpu.stat")  # core file: present with or without the cpu controller
    return CgroupStats(
        mode=Mode.UNIFIED,
        cpu=CpuStats(usage_ns=cpu["usage_usec"] * 1000, user_ns=cpu["user_usec"] * 1000,
                     system_ns=cpu["system_usec"] * 1000,
                     nr_periods=cpu.get("nr_periods", 0),
                     nr_throttled=cpu.get("nr_throttled", 0),
                     throttled_ns=cpu.get("throttled_usec", 0) * 1000),
        memory=_v2_memory(d) if "memory" in enabled else None,
        pids=(PidsStats(current=_int(d / "pids.current"), limit=read_int(d / "pids.max"))
              if "pids" in enabled else None),
        pressure=Pressure(cpu=read_psi(d / "cpu.pressure"),
                          memory=read_psi(d / "memory.pressure"),
                          io=read_psi(d / "io.pressure")),
    )


def _v2_memory(d: Path) -> MemoryStats:
    usage = _int(d / "memory.current")
    stat = read_keyed(d / "memory.stat")
    events = read_keyed(d / "memory.events")
    return MemoryStats(
        usage=usage, working_set=max(0, usage - stat.get("inactive_file", 0)),
        rss=stat.get("anon", 0), cache=stat.get("file", 0),
        page_faults=stat.get("pgfault", 0), major_page_faults=stat.get("pgmajfault", 0),
        limit=read_int(d / "memory.max"), oom_events=events.get("oom", 0),
        oom_kills=events.get("oom_kill", 0), stat=stat,
    )


# -- v1 ---------------------------------------------------------------------------------------


def _present(loc: Location, controller: str) -> Path | None:
    """The v1 directory of ``controller`` when it is mounted and holds this cgroup."""
    d = loc.controller_dir(controller)
    return d if d is not None and d.is_dir() else None


def _v1(loc: Location) -> CgroupStats:
    acct, cpu_dir = _present(loc, "cpuacct"), _present(loc, "cpu")
    mem, pids = _present(loc, "memory"), _present(loc, "pids")
    return CgroupStats(
        mode=loc.mode,
        cpu=_v1_cpu(acct, cpu_dir) if acct is not None else None,
        memory=_v1_memory(mem) if mem is not None else None,
        pids=(PidsStats(current=_int(pids / "pids.current"), limit=read_int(pids / "pids.max"))
              if pids is not None else None),
    )


def _v1_cpu(acct: Path, cpu_dir: Path | None) -> CpuStats:
    tick = 10**9 // os.sysconf("SC_CLK_TCK")
    times = read_keyed(acct / "cpuacct.stat")
    throttle = read_keyed(cpu_dir / "cpu.stat") if cpu_dir is not None else {}
    return CpuStats(usage_ns=_int(acct / "cpuacct.usage"), user_ns=times.get("user", 0) * tick,
                    system_ns=times.get("system", 0) * tick,
                    nr_periods=throttle.get("nr_periods", 0),
                    nr_throttled=throttle.get("nr_throttled", 0),
                    throttled_ns=throttle.get("throttled_time", 0))


def _v1_memory(d: Path) -> MemoryStats:
    usage = _int(d / "memory.usage_in_bytes")
    stat = read_keyed(d / "memory.stat")
    oom = read_keyed(d / "memory.oom_control")  # oom_kill since Linux 4.13
    return MemoryStats(
        usage=usage, working_set=max(0, usage - stat.get("total_inactive_file", 0)),
        rss=stat.get("total_rss", 0), cache=stat.get("total_cache", 0),
        page_faults=stat.get("total_pgfault", 0),
        major_page_faults=stat.get("total_pgmajfault", 0),
        limit=read_int(d / "memory.limit_in_bytes", V1_UNLIMITED),
        oom_events=_int(d / "memory.failcnt"), oom_kills=oom.get("oom_kill", 0), stat=stat,
    )
