"""Linux container resources (cgroup limits) both ways."""

from __future__ import annotations

from typing import Any

from podkit.container import HugepageLimit
from podkit.cri import api_pb2 as pb
from podkit.cri.convert.fields import fill_fields
from podkit.sandbox import LinuxContainerResources

__all__ = [
    "linux_resources_from_cri",
    "linux_resources_to_cri",
    "optional_resources_from",
    "set_optional_resources",
]


def linux_resources_from_cri(
    msg: pb.LinuxContainerResources, *, path: str = "linux"
) -> LinuxContainerResources:
    """CRI ``LinuxContainerResources`` to the podkit model (zero still means unset)."""
    return LinuxContainerResources(
        cpu_period=msg.cpu_period,
        cpu_quota=msg.cpu_quota,
        cpu_shares=msg.cpu_shares,
        memory_limit_in_bytes=msg.memory_limit_in_bytes,
        oom_score_adj=msg.oom_score_adj,
        cpuset_cpus=msg.cpuset_cpus,
        cpuset_mems=msg.cpuset_mems,
        hugepage_limits=tuple(
            HugepageLimit(page_size=h.page_size, limit=h.limit) for h in msg.hugepage_limits
        ),
        unified=dict(msg.unified),
        memory_swap_limit_in_bytes=msg.memory_swap_limit_in_bytes,
    )


def linux_resources_to_cri(
    res: LinuxContainerResources, *, path: str = "linux"
) -> pb.LinuxContainerResources:
    """The podkit resources model to CRI ``LinuxContainerResources``."""
    out = pb.LinuxContainerResources()
    fill_fields(out, path, {
        "cpu_period": res.cpu_period,
        "cpu_quota": res.cpu_quota,
        "cpu_shares": res.cpu_shares,
        "memory_limit_in_bytes": res.memory_limit_in_bytes,
        "oom_score_adj": res.oom_score_adj,
        "cpuset_cpus": res.cpuset_cpus,
        "cpuset_mems": res.cpuset_mems,
        "unified": dict(res.unified),
        "memory_swap_limit_in_bytes": res.memory_swap_limit_in_bytes,
    })
    for i, h in enumerate(res.hugepage_limits):
        fill_fields(out.hugepage_limits.add(), f"{path}.hugepage_limits[{i}]",
              {"page_size": h.page_size, "limit": h.limit})
    return out


def optional_resources_from(msg: Any, field: str, path: str) -> LinuxContainerResources | None:
    if not msg.HasField(field):
        return None
    return linux_resources_from_cri(getattr(msg, field), path=f"{path}.{field}")


def set_optional_resources(
    out: Any, field: str, res: LinuxContainerResources | None, path: str
) -> None:
    if res is not None:
        getattr(out, field).CopyFrom(linux_resources_to_cri(res, path=f"{path}.{field}"))
