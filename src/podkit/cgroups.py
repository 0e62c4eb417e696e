"""A container's cgroup usage, read from the cgroup files of its ``linux.cgroupsPath``.

cgroup v1 today (cgroupfs and systemd path forms); the one home of cgroup reading, so the
manager, the CRI server and the runtime adapter share it.
"""

from __future__ import annotations

import contextlib
from pathlib import Path

import attrs

__all__ = ["CgroupUsage", "cgroup_dir", "usage"]

CGROUP_ROOT = Path("/sys/fs/cgroup")


@attrs.frozen(kw_only=True)
class CgroupUsage:
    """CPU, memory and process counts of one cgroup (kubelet's working set: usage minus
    inactive file)."""

    cpu_usage_core_nano_seconds: int
    memory_usage_bytes: int
    memory_working_set_bytes: int
    memory_rss_bytes: int
    process_count: int


def cgroup_dir(controller: str, cgroups_path: str) -> Path:
    """The cgroup v1 directory of a ``linux.cgroupsPath`` (cgroupfs or systemd form)."""
    path = cgroups_path
    if ":" in path:
        slice_, prefix, name = path.split(":", 2)
        parts = []
        acc = ""
        for piece in slice_.removesuffix(".slice").split("-"):
            acc = f"{acc}-{piece}" if acc else piece
            parts.append(acc + ".slice")
        path = "/".join(parts) + f"/{prefix}-{name}.scope"
    return CGROUP_ROOT / controller / path.lstrip("/")


def _read_int(path: Path) -> int:
    try:
        return int(path.read_text().strip() or 0)
    except (OSError, ValueError):
        return 0


def _memory_stat(path: Path) -> dict[str, int]:
    out: dict[str, int] = {}
    with contextlib.suppress(OSError):
        for line in path.read_text().splitlines():
            key, _, value = line.partition(" ")
            with contextlib.suppress(ValueError):
                out[key] = int(value)
    return out


def usage(cgroups_path: str) -> CgroupUsage:
    """The usage of the cgroup at ``cgroups_path``; an unreadable file counts as 0."""
    mem_dir = cgroup_dir("memory", cgroups_path)
    used = _read_int(mem_dir / "memory.usage_in_bytes")
    stat = _memory_stat(mem_dir / "memory.stat")
    return CgroupUsage(
        cpu_usage_core_nano_seconds=_read_int(
            cgroup_dir("cpuacct", cgroups_path) / "cpuacct.usage"),
        memory_usage_bytes=used,
        memory_working_set_bytes=max(0, used - stat.get("total_inactive_file", 0)),
        memory_rss_bytes=stat.get("total_rss", 0),
        process_count=_read_int(cgroup_dir("pids", cgroups_path) / "pids.current"),
    )
