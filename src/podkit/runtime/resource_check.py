"""A spec's ``linux.resources`` against the cgroup controllers its cgroup can have here.

runc and crun fail late (or, for some fields, not at all) when a spec asks for a controller the
host does not give the container: ``cannot set hugetlb limit`` after the cgroup was made, or
an ``open .../memory.max: no such file``. ``resource_problems`` is the pure check (one
``oci.Problem`` per field, naming the controller and the cgroup version); ``check_resources``
runs it against this host before ``create`` and raises ``UnavailableResourceError``.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

from podkit import cgroups, oci
from podkit.cgroups.controllers import Controllers, available_controllers
from podkit.errors import InvalidArgumentError
from podkit.runtime.bundle import Bundle

__all__ = ["V2_FILES", "UnavailableResourceError", "check_bundle_resources", "check_resources",
           "resource_problems"]

# The interface files of a non-root cgroup v2 by prefix (the kernel's cgroup-v2 documentation,
# Linux 6.1 to 6.12), what a ``unified`` key may name; ``hugetlb`` is checked by page size.
V2_FILES: dict[str, frozenset[str]] = {
    "cgroup": frozenset({"type", "procs", "threads", "controllers", "subtree_control",
                         "events", "max.descendants", "max.depth", "stat", "freeze", "kill",
                         "pressure"}),
    "cpu": frozenset({"stat", "weight", "weight.nice", "max", "max.burst", "pressure",
                      "uclamp.min", "uclamp.max", "idle"}),
    "cpuset": frozenset({"cpus", "cpus.effective", "mems", "mems.effective",
                         "cpus.partition", "cpus.exclusive", "cpus.exclusive.effective"}),
    "memory": frozenset({"current", "min", "low", "high", "max", "reclaim", "peak",
                         "oom.group", "events", "events.local", "stat", "numa_stat",
                         "swap.current", "swap.high", "swap.max", "swap.peak", "swap.events",
                         "zswap.current", "zswap.max", "zswap.writeback", "pressure"}),
    "io": frozenset({"stat", "weight", "max", "latency", "pressure", "bfq.weight"}),
    "pids": frozenset({"current", "max", "peak", "events", "events.local"}),
    "rdma": frozenset({"max", "current"}),
    "misc": frozenset({"max", "current", "events", "events.local", "peak"}),
}
_HUGETLB_FILES = frozenset({"max", "current", "events", "events.local", "rsvd.max",
                            "rsvd.current", "numa_stat"})
_CORE = frozenset({"cgroup"})
_PRESSURE_FILES = frozenset({"cpu.pressure", "memory.pressure", "io.pressure", "irq.pressure"})


class UnavailableResourceError(InvalidArgumentError):
    """The spec's resources need cgroup controllers (or files) the container cannot have here;
    ``problems`` names each field, as ``oci.Problem`` (JSON path + why)."""

    def __init__(self, message: str, problems: list[oci.Problem]) -> None:
        super().__init__(message)
        self.problems = problems


def _need(path: str, field: str, controller: str, have: Controllers) -> Iterator[oci.Problem]:
    if controller not in have.names:
        offered = " ".join(sorted(have.names)) or "none"
        why = f"; {have.why}" if have.why else ""
        yield oci.Problem(f"{path}.{field}", f"needs the {controller} cgroup controller, which "
                          f"cgroup {have.cgroup} cannot have on this host's {have.version} "
                          f"(available: {offered}){why}")


def _memory(mem: oci.LinuxMemory, have: Controllers, p: str) -> Iterator[oci.Problem]:
    for field, wire in (("limit", "limit"), ("reservation", "reservation"), ("swap", "swap"),
                        ("kernel", "kernel"), ("kernel_tcp", "kernelTCP"),
                        ("swappiness", "swappiness"), ("disable_oom_killer", "disableOOMKiller")):
        if getattr(mem, field) is not None:
            yield from _need(f"{p}.memory", wire, "memory", have)
    swap = mem.swap
    # runc and crun skip a swap limit of -1 or equal to the memory limit where swap is not
    # accounted; any other value then fails
    if swap is not None and swap not in (-1, 0, mem.limit) and not have.swap \
            and "memory" in have.names:
        yield oci.Problem(f"{p}.memory.swap", f"{swap}: swap cannot be limited on this host "
                          f"(no swap accounting: memory.swap.max / memory.memsw.*)")


def _cpu(cpu: oci.LinuxCPU, have: Controllers, p: str) -> Iterator[oci.Problem]:
    for field, wire in (("shares", "shares"), ("quota", "quota"), ("period", "period"),
                        ("burst", "burst"), ("idle", "idle"),
                        ("realtime_runtime", "realtimeRuntime"),
                        ("realtime_period", "realtimePeriod")):
        if getattr(cpu, field) is not None:
            yield from _need(f"{p}.cpu", wire, "cpu", have)
    for field in ("cpus", "mems"):
        if getattr(cpu, field):
            yield from _need(f"{p}.cpu", field, "cpuset", have)


def _hugepages(limits: list[oci.LinuxHugepageLimit], have: Controllers,
               p: str) -> Iterator[oci.Problem]:
    for i, limit in enumerate(limits):
        where = f"{p}.hugepageLimits[{i}]"
        if "hugetlb" not in have.names:
            yield from _need(where, "pageSize", "hugetlb", have)
        elif limit.page_size not in have.hugepage_sizes:
            sizes = " ".join(sorted(have.hugepage_sizes)) or "none"
            yield oci.Problem(f"{where}.pageSize", f"{limit.page_size!r}: the kernel has no "
                              f"such hugepage size (sizes: {sizes})")


def _unified_key(key: str, have: Controllers) -> str | None:
    """Why ``key`` cannot be written on this v2 host, or None."""
    prefix, dot, rest = key.partition(".")
    if not dot or not rest or "/" in key:
        return "not a cgroup v2 file name such as 'memory.high'"
    if key in _PRESSURE_FILES:
        return None
    if prefix == "hugetlb":
        size, _, name = rest.partition(".")
        if size not in have.hugepage_sizes or name not in _HUGETLB_FILES:
            return (f"no such hugetlb file (sizes: {' '.join(sorted(have.hugepage_sizes))})")
    elif prefix not in V2_FILES:
        return f"no cgroup v2 controller {prefix!r}"
    elif rest not in V2_FILES[prefix]:
        return f"no such {prefix} file on cgroup v2"
    if prefix not in _CORE and prefix not in have.names:
        offered = " ".join(sorted(have.names)) or "none"
        why = f"; {have.why}" if have.why else ""
        return (f"needs the {prefix} cgroup controller, which cgroup {have.cgroup} cannot "
                f"have on this host's {have.version} (available: {offered}){why}")
    return None


def _unified(unified: dict[str, str], have: Controllers, p: str) -> Iterator[oci.Problem]:
    for key in sorted(unified):
        if have.mode is not cgroups.Mode.UNIFIED:
            yield oci.Problem(f"{p}.unified[{key!r}]", f"unified settings need cgroup v2; "
                              f"this host runs {have.version}")
            continue
        why = _unified_key(key, have)
        if why is not None:
            yield oci.Problem(f"{p}.unified[{key!r}]", why)


def resource_problems(resources: oci.LinuxResources | None,
                      have: Controllers) -> list[oci.Problem]:
    """What in ``resources`` the container cannot get given ``have`` (pure)."""
    if resources is None:
        return []
    p = "$.linux.resources"
    v1 = have.mode is not cgroups.Mode.UNIFIED
    out: list[oci.Problem] = []
    if resources.memory is not None:
        out += _memory(resources.memory, have, p)
    if resources.cpu is not None:
        out += _cpu(resources.cpu, have, p)
    if resources.pids is not None and resources.pids.limit is not None:
        out += _need(f"{p}.pids", "limit", "pids", have)
    if resources.block_io is not None:
        out += _need(p, "blockIO", "blkio" if v1 else "io", have)
    if resources.hugepage_limits:
        out += _hugepages(resources.hugepage_limits, have, p)
    if resources.rdma:
        out += _need(p, "rdma", "rdma", have)
    if v1 and resources.network is not None:
        if resources.network.class_id is not None:
            out += _need(f"{p}.network", "classID", "net_cls", have)
        if resources.network.priorities:
            out += _need(f"{p}.network", "priorities", "net_prio", have)
    if resources.unified:
        out += _unified(resources.unified, have, p)
    return out


def check_resources(resources: oci.LinuxResources | None, cgroups_path: str | None,
                    have: Controllers | None = None) -> None:
    """``UnavailableResourceError`` naming each of ``resources`` a cgroup at ``cgroups_path``
    cannot get on this host (``have``: default read from the host for that path)."""
    if resources is None:
        return
    if have is None:
        have = available_controllers(cgroups_path)
    problems = resource_problems(resources, have)
    if problems:
        raise UnavailableResourceError(
            "resources the container cannot have on this host: "
            + "; ".join(map(str, problems)), problems)


def check_bundle_resources(spec: oci.Spec | str | os.PathLike[str]) -> None:
    """``check_resources`` of a bundle's ``linux.resources`` for its ``linux.cgroupsPath``;
    ``spec`` or the bundle directory (a config that does not load is left to the runtime)."""
    if not isinstance(spec, oci.Spec):
        try:
            spec = Bundle.load(spec).spec
        except (OSError, ValueError, LookupError):  # (SpecError, NotFoundError among them)
            return
    if spec.linux is not None:
        check_resources(spec.linux.resources, spec.linux.cgroups_path)
