"""Container resources as the kubelet computes them: CPU shares and quota, memory limit, QoS
class and OOM score adjustment (``pkg/kubelet/cm`` and ``pkg/kubelet/qos``)."""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from typing import Any

from podkit.container import LinuxContainerResources
from podkit.kube.quantity import milli_value, value

__all__ = [
    "BEST_EFFORT",
    "BURSTABLE",
    "GUARANTEED",
    "MAX_SHARES",
    "MIN_QUOTA",
    "MIN_SHARES",
    "QUOTA_PERIOD",
    "container_resources",
    "effective_requests",
    "milli_cpu_to_quota",
    "milli_cpu_to_shares",
    "node_memory_bytes",
    "oom_score_adj",
    "qos_class",
]

MIN_SHARES = 2
MAX_SHARES = 262144
SHARES_PER_CPU = 1024
MILLI_PER_CPU = 1000
QUOTA_PERIOD = 100000  # microseconds, 100 ms
MIN_QUOTA = 1000

GUARANTEED = "Guaranteed"
BURSTABLE = "Burstable"
BEST_EFFORT = "BestEffort"
GUARANTEED_OOM_SCORE_ADJ = -997
BEST_EFFORT_OOM_SCORE_ADJ = 1000
_QOS_RESOURCES = ("cpu", "memory")


def milli_cpu_to_shares(milli_cpu: int) -> int:
    """kubelet's MilliCPUToShares: milliCPU * 1024 / 1000, within [2, 262144]."""
    if milli_cpu == 0:
        return MIN_SHARES
    shares = milli_cpu * SHARES_PER_CPU // MILLI_PER_CPU
    return min(max(shares, MIN_SHARES), MAX_SHARES)


def milli_cpu_to_quota(milli_cpu: int, period: int = QUOTA_PERIOD) -> int:
    """kubelet's MilliCPUToQuota: 0 without a limit, else limit * period / 1000, at least 1000."""
    if milli_cpu == 0:
        return 0
    return max(milli_cpu * period // MILLI_PER_CPU, MIN_QUOTA)


def node_memory_bytes() -> int:
    """The machine's physical memory, the denominator of a Burstable container's OOM score."""
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


def _section(resources: Mapping[str, Any] | None, name: str) -> dict[str, Any]:
    got = (resources or {}).get(name) or {}
    return dict(got) if isinstance(got, dict) else {}


def effective_requests(resources: Mapping[str, Any] | None) -> dict[str, Any]:
    """Requests after the API server's defaulting: a limit without a request is the request."""
    requests = _section(resources, "requests")
    for name, limit in _section(resources, "limits").items():
        requests.setdefault(name, limit)
    return requests


def qos_class(containers: Iterable[Mapping[str, Any]]) -> str:
    """The pod's QoS class from all its containers (init ones included), as GetPodQOS."""
    requests: dict[str, int] = {}
    limits: dict[str, int] = {}
    guaranteed = True
    for ctr in containers:
        res = ctr.get("resources")
        for name, qty in effective_requests(res).items():
            if name in _QOS_RESOURCES and (n := milli_value(qty)) != 0:
                requests[name] = requests.get(name, 0) + n
        found = set()
        for name, qty in _section(res, "limits").items():
            if name in _QOS_RESOURCES and (n := milli_value(qty)) != 0:
                found.add(name)
                limits[name] = limits.get(name, 0) + n
        if found != set(_QOS_RESOURCES):
            guaranteed = False
    if not requests and not limits:
        return BEST_EFFORT
    if guaranteed and all(limits.get(name) == req for name, req in requests.items()):
        return GUARANTEED
    return BURSTABLE


def oom_score_adj(qos: str, memory_request: int, node_memory: int) -> int:
    """GetContainerOOMScoreAdjust: -997 / 1000, and for Burstable 1000 - 1000*request/memory
    raised to 3 and kept below 1000."""
    if qos == GUARANTEED:
        return GUARANTEED_OOM_SCORE_ADJ
    if qos == BEST_EFFORT:
        return BEST_EFFORT_OOM_SCORE_ADJ
    adj = 1000 - (1000 * memory_request) // node_memory
    if adj < 1000 + GUARANTEED_OOM_SCORE_ADJ:
        return 1000 + GUARANTEED_OOM_SCORE_ADJ
    if adj == BEST_EFFORT_OOM_SCORE_ADJ:
        return BEST_EFFORT_OOM_SCORE_ADJ - 1
    return adj


def container_resources(
    resources: Mapping[str, Any] | None, qos: str, node_memory: int, where: str = "resources",
) -> LinuxContainerResources:
    """The CRI resources kubelet sends for one container of a pod in class ``qos``."""
    requests = effective_requests(resources)
    limits = _section(resources, "limits")
    cpu_request = milli_value(requests.get("cpu", 0), f"{where}.requests.cpu")
    cpu_limit = milli_value(limits.get("cpu", 0), f"{where}.limits.cpu")
    memory_limit = value(limits.get("memory", 0), f"{where}.limits.memory")
    memory_request = value(requests.get("memory", 0), f"{where}.requests.memory")
    return LinuxContainerResources(
        cpu_period=QUOTA_PERIOD,
        cpu_quota=milli_cpu_to_quota(cpu_limit),
        cpu_shares=milli_cpu_to_shares(cpu_request),
        memory_limit_in_bytes=memory_limit,
        oom_score_adj=oom_score_adj(qos, memory_request, node_memory),
    )
