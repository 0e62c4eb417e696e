"""Options on cgroup resources: memory, CPU, pids, block I/O, hugepages, unified, the cgroup
path and Intel RDT.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Mapping

from podkit.oci.opts.core import (
    _INT64,
    _UINT64,
    SpecOpt,
    SpecOptError,
    _cpu,
    _int,
    _linux,
    _memory,
    _resources,
    _str,
    _str_map,
)
from podkit.oci.spec import (
    LinuxBlockIO,
    LinuxHugepageLimit,
    LinuxIntelRdt,
    LinuxPids,
    LinuxResources,
    Spec,
)

__all__ = [
    "with_blockio",
    "with_cgroup",
    "with_cpu_burst",
    "with_cpu_cfs",
    "with_cpu_period",
    "with_cpu_quota",
    "with_cpu_rt",
    "with_cpu_shares",
    "with_cpus",
    "with_cpus_mems",
    "with_hugepage_limits",
    "with_memory_and_swap",
    "with_memory_limit",
    "with_memory_swap",
    "with_pids_limit",
    "with_rdt",
    "with_resources",
    "with_unified",
]

_CPU_LIST = re.compile(r"\d+(-\d+)?(,\d+(-\d+)?)*\Z")
_PAGE_SIZE = re.compile(r"[1-9][0-9]*[KMG]B\Z")


def with_memory_limit(limit: int) -> SpecOpt:
    """Set the memory limit in bytes (-1: unlimited)."""
    value = _int(limit, "memory limit", -1, _INT64[1])

    def opt(s: Spec) -> None:
        _memory(s).limit = value

    return opt


def with_memory_swap(swap: int) -> SpecOpt:
    """Set the memory+swap limit in bytes (-1: unlimited)."""
    value = _int(swap, "memory swap", -1, _INT64[1])

    def opt(s: Spec) -> None:
        _memory(s).swap = value

    return opt


def with_memory_and_swap(limit: int, swap: int = 0, *, swap_accounting: bool = True
                         ) -> SpecOpt:
    """containerd's CRI memory rule: ``limit`` in bytes and ``swap`` (memory+swap) in bytes,
    0 meaning unset. With swap accounting on the host, an unset ``swap`` next to a set
    ``limit`` becomes ``limit``, so the container does not swap by default (on cgroup v2 the
    runtime writes ``memory.swap.max`` = swap - limit); without it no swap limit is set."""
    mem = _int(limit, "memory limit", -1, _INT64[1])
    total = _int(swap, "memory swap", -1, _INT64[1])
    if not swap_accounting:
        total = 0
    elif total == 0 and mem:
        total = mem

    def opt(s: Spec) -> None:
        if mem:
            _memory(s).limit = mem
        if total:
            _memory(s).swap = total

    return opt


def with_cpu_shares(shares: int) -> SpecOpt:
    """Set the relative CPU weight (cgroup v1 ``cpu.shares``)."""
    value = _int(shares, "cpu shares", *_UINT64)

    def opt(s: Spec) -> None:
        _cpu(s).shares = value

    return opt


def _cpu_list(value: object, what: str) -> str:
    text = _str(value, what)
    if not _CPU_LIST.match(text):
        raise SpecOptError(f"invalid {what} {text!r}: expected a list like '0-2,4'")
    return text


def with_cpus(cpus: str) -> SpecOpt:
    """Pin to CPUs (cpuset list, e.g. ``"0-1,3"``)."""
    value = _cpu_list(cpus, "cpuset cpus")

    def opt(s: Spec) -> None:
        _cpu(s).cpus = value

    return opt


def with_cpus_mems(mems: str) -> SpecOpt:
    """Restrict to memory nodes (cpuset list, e.g. ``"0"``)."""
    value = _cpu_list(mems, "cpuset mems")

    def opt(s: Spec) -> None:
        _cpu(s).mems = value

    return opt


def with_cpu_cfs(quota: int, period: int) -> SpecOpt:
    """Set the CFS quota and period in microseconds (quota -1: unlimited)."""
    q = _int(quota, "cpu quota", -1, _INT64[1])
    p = _int(period, "cpu period", *_UINT64)

    def opt(s: Spec) -> None:
        cpu = _cpu(s)
        cpu.quota, cpu.period = q, p

    return opt


def with_cpu_quota(quota: int) -> SpecOpt:
    """Set the CFS quota in microseconds per period (-1: unlimited), leaving the period."""
    value = _int(quota, "cpu quota", -1, _INT64[1])

    def opt(s: Spec) -> None:
        _cpu(s).quota = value

    return opt


def with_cpu_period(period: int) -> SpecOpt:
    """Set the CFS period in microseconds, leaving the quota."""
    value = _int(period, "cpu period", *_UINT64)

    def opt(s: Spec) -> None:
        _cpu(s).period = value

    return opt


def with_cpu_burst(burst: int) -> SpecOpt:
    """Set the CFS burst in microseconds (runtime-spec 1.1.0)."""
    value = _int(burst, "cpu burst", *_UINT64)

    def opt(s: Spec) -> None:
        _cpu(s).burst = value

    return opt


def with_cpu_rt(runtime: int, period: int) -> SpecOpt:
    """Set the realtime runtime and period in microseconds."""
    r = _int(runtime, "cpu realtime runtime", *_INT64)
    p = _int(period, "cpu realtime period", *_UINT64)

    def opt(s: Spec) -> None:
        cpu = _cpu(s)
        cpu.realtime_runtime, cpu.realtime_period = r, p

    return opt


def with_pids_limit(limit: int) -> SpecOpt:
    """Set the maximum number of processes (-1: unlimited)."""
    value = _int(limit, "pids limit", -1, _INT64[1])

    def opt(s: Spec) -> None:
        _resources(s).pids = LinuxPids(limit=value)

    return opt


def with_blockio(blockio: LinuxBlockIO | None) -> SpecOpt:
    """Set (or with ``None`` remove) ``linux.resources.blockIO``."""
    if blockio is not None and not isinstance(blockio, LinuxBlockIO):
        raise SpecOptError(f"invalid blockIO {blockio!r}: expected an oci.LinuxBlockIO")
    value = copy.deepcopy(blockio)

    def opt(s: Spec) -> None:
        _resources(s).block_io = copy.deepcopy(value)

    return opt


def with_hugepage_limits(limits: Mapping[str, int]) -> SpecOpt:
    """Set hugetlb limits in bytes per page size (``{"2MB": 1 << 30}``), replacing by size."""
    if not isinstance(limits, Mapping):
        raise SpecOptError(f"invalid hugepage limits {limits!r}: expected a mapping")
    items = []
    for size, limit in limits.items():
        if not isinstance(size, str) or not _PAGE_SIZE.match(size):
            raise SpecOptError(f"invalid hugepage size {size!r}: expected e.g. '2MB' or '1GB'")
        items.append(LinuxHugepageLimit(page_size=size,
                                        limit=_int(limit, f"{size} hugepage limit", *_UINT64)))

    def opt(s: Spec) -> None:
        res = _resources(s)
        sizes = {h.page_size for h in items}
        kept = [h for h in res.hugepage_limits or [] if h.page_size not in sizes]
        res.hugepage_limits = [*kept, *copy.deepcopy(items)]

    return opt


def with_unified(unified: Mapping[str, str]) -> SpecOpt:
    """Merge cgroup v2 ``unified`` settings (file name -> value; runtime-spec 1.1.0)."""
    values = _str_map(unified, "unified cgroup setting")
    for key in values:
        if "/" in key or "." not in key:
            raise SpecOptError(f"invalid unified cgroup key {key!r}: expected e.g. 'memory.high'")

    def opt(s: Spec) -> None:
        res = _resources(s)
        res.unified = {**(res.unified or {}), **values}

    return opt


def with_resources(resources: LinuxResources) -> SpecOpt:
    """Set every field of ``resources`` that is not ``None`` on ``linux.resources``."""
    if not isinstance(resources, LinuxResources):
        raise SpecOptError(f"invalid resources {resources!r}: expected an oci.LinuxResources")
    value = copy.deepcopy(resources)

    def opt(s: Spec) -> None:
        res = _resources(s)
        for name in ("devices", "memory", "cpu", "pids", "block_io", "hugepage_limits",
                     "network", "rdma", "unified"):
            v = getattr(value, name)
            if v is not None:
                setattr(res, name, copy.deepcopy(v))
        res.extra.update(copy.deepcopy(value.extra))

    return opt


def with_cgroup(path: str) -> SpecOpt:
    """Set ``linux.cgroupsPath`` (``/parent/name``, relative, or systemd ``slice:prefix:name``)."""
    value = _str(path, "cgroups path")
    if ".." in value.replace(":", "/").split("/"):
        raise SpecOptError(f"invalid cgroups path {value!r}: must not contain '..'")

    def opt(s: Spec) -> None:
        _linux(s).cgroups_path = value

    return opt


def with_rdt(clos_id: str = "", l3_cache_schema: str = "", mem_bw_schema: str = "") -> SpecOpt:
    """Set Intel RDT class of service and schemata (empty strings are left out)."""
    c = _str(clos_id, "intelRdt closID", empty=True)
    l3 = _str(l3_cache_schema, "intelRdt l3CacheSchema", empty=True)
    mb = _str(mem_bw_schema, "intelRdt memBwSchema", empty=True)
    if mb and not mb.startswith("MB:"):
        raise SpecOptError(f"invalid intelRdt memBwSchema {mb!r}: must start with 'MB:'")

    def opt(s: Spec) -> None:
        _linux(s).intel_rdt = LinuxIntelRdt(
            clos_id=c or None, l3_cache_schema=l3 or None, mem_bw_schema=mb or None
        )

    return opt
