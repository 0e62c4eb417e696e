"""A container's cgroup: the host's cgroup version, where the cgroup is, and its numbers.

The one home of cgroup reading, so the manager, the CRI server and the runtime adapter share
it. ``mounts`` detects v1 / hybrid / unified (v2) from the mount table, ``paths`` finds a
cgroup from a ``linux.cgroupsPath`` (cgroupfs or systemd form) or a pid, ``stats`` reads CPU,
memory, pids and PSI in one shape for both versions, ``files`` the file formats; ``driver``
the cgroup drivers (cgroupfs, systemd: the host's default, cgroups paths, kubelet's parents),
``cleanup`` what a deleted container may leave (a systemd scope, an empty directory);
``controllers`` which controllers a new container's cgroup can have (checked at create).
"""

from __future__ import annotations

from pathlib import Path

import attrs

from podkit.cgroups.cleanup import remove_leftovers
from podkit.cgroups.controllers import (
    Controllers,
    available_controllers,
    hugepage_sizes,
    swap_available,
)
from podkit.cgroups.driver import (
    DEFAULT_CGROUPFS_PARENT,
    DEFAULT_SYSTEMD_PARENT,
    SCOPE_PREFIX,
    Driver,
    cgroups_path_for,
    default_driver,
    detect_driver,
    parent_for,
    parse_driver,
    resolve_driver,
    scope_unit,
    slice_name,
    slice_path,
    systemd_running,
)
from podkit.cgroups.files import CgroupFileError, PsiData, PsiStats
from podkit.cgroups.mounts import Hierarchy, Mode, Mount, host
from podkit.cgroups.paths import (
    Location,
    cgroup_of_path,
    cgroup_of_pid,
    locate,
    locate_pid,
    systemd_path,
)
from podkit.cgroups.stats import (
    CgroupStats,
    CpuStats,
    MemoryStats,
    PidsStats,
    Pressure,
    read_stats,
)
from podkit.errors import NotFoundError

__all__ = [
    "DEFAULT_CGROUPFS_PARENT",
    "DEFAULT_SYSTEMD_PARENT",
    "SCOPE_PREFIX",
    "CgroupFileError",
    "CgroupStats",
    "CgroupUsage",
    "Controllers",
    "CpuStats",
    "Driver",
    "Hierarchy",
    "Location",
    "MemoryStats",
    "Mode",
    "Mount",
    "PidsStats",
    "Pressure",
    "PsiData",
    "PsiStats",
    "available_controllers",
    "cgroup_dir",
    "cgroup_of_path",
    "cgroup_of_pid",
    "cgroups_path_for",
    "default_driver",
    "detect_driver",
    "host",
    "hugepage_sizes",
    "locate",
    "locate_pid",
    "oom_kills",
    "parent_for",
    "parse_driver",
    "read_stats",
    "remove_leftovers",
    "resolve_driver",
    "scope_unit",
    "slice_name",
    "slice_path",
    "stats",
    "stats_of_pid",
    "swap_available",
    "systemd_path",
    "systemd_running",
    "usage",
]

CGROUP_ROOT = Path("/sys/fs/cgroup")


@attrs.frozen(kw_only=True)
class CgroupUsage:
    """CPU, memory and process counts of one cgroup (kubelet's working set: usage minus
    inactive file); the short form of ``CgroupStats``, 0 for a controller not enabled."""

    cpu_usage_core_nano_seconds: int
    memory_usage_bytes: int
    memory_working_set_bytes: int
    memory_rss_bytes: int
    process_count: int

    @classmethod
    def of(cls, s: CgroupStats) -> CgroupUsage:
        """The short form of a full sample."""
        return cls(cpu_usage_core_nano_seconds=s.cpu.usage_ns if s.cpu else 0,
                   memory_usage_bytes=s.memory.usage if s.memory else 0,
                   memory_working_set_bytes=s.memory.working_set if s.memory else 0,
                   memory_rss_bytes=s.memory.rss if s.memory else 0,
                   process_count=s.pids.current if s.pids else 0)


def cgroup_dir(controller: str, cgroups_path: str, hierarchy: Hierarchy | None = None,
               ) -> Path:
    """The directory holding ``controller``'s files for a ``linux.cgroupsPath`` (v2: the one
    unified directory; v1: that controller's; ``NotFoundError`` when it is not mounted)."""
    loc = locate(cgroups_path, hierarchy)
    d = loc.controller_dir(controller)
    if d is None:
        raise NotFoundError(f"cgroup controller {controller!r} is not mounted ({loc.mode.value})")
    return d


def stats(cgroups_path: str, hierarchy: Hierarchy | None = None) -> CgroupStats:
    """One sample of the cgroup of a ``linux.cgroupsPath``."""
    return read_stats(locate(cgroups_path, hierarchy))


def stats_of_pid(pid: int, hierarchy: Hierarchy | None = None) -> CgroupStats:
    """One sample of the cgroup ``pid`` is in."""
    return read_stats(locate_pid(pid, hierarchy))


def usage(cgroups_path: str) -> CgroupUsage:
    """The usage of the cgroup at ``cgroups_path`` (``NotFoundError`` once it is gone)."""
    return CgroupUsage.of(stats(cgroups_path))


def oom_kills(cgroups_path: str, hierarchy: Hierarchy | None = None) -> int | None:
    """Processes the OOM killer killed in the cgroup (v2 ``memory.events oom_kill``, v1
    ``memory.oom_control oom_kill``); ``None`` without a memory controller."""
    mem = stats(cgroups_path, hierarchy).memory
    return None if mem is None else mem.oom_kills
