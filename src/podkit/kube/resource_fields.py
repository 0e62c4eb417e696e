"""Downward API ``resourceFieldRef``: a container's CPU or memory request or limit as text,
divided and rounded up as kubelet's ExtractContainerResourceValue; an unset limit is the
node's allocatable amount (kubelet's defaultPodLimitsForDownwardAPI)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from podkit.errors import InvalidArgumentError, quote
from podkit.kube.quantity import milli_value, parse_quantity, value
from podkit.kube.resources import effective_requests

__all__ = ["RESOURCE_FIELDS", "resource_field_value"]

RESOURCE_FIELDS = ("limits.cpu", "limits.memory", "requests.cpu", "requests.memory")


def resource_field_value(ref: Mapping[str, Any], container: Mapping[str, Any] | None,
                         containers: Mapping[str, Mapping[str, Any]], node_cpu_milli: int,
                         node_memory: int, where: str) -> str:
    """The value of one resourceFieldRef; ``container`` is the one whose env it is (None in a
    volume, where ``containerName`` is required)."""
    name = ref.get("containerName")
    if name:
        if name not in containers:
            raise InvalidArgumentError(f"{where}.containerName: no container named {quote(name)}")
        container = containers[name]
    if container is None:
        raise InvalidArgumentError(f"{where}.containerName: required in a downwardAPI volume")
    resource = ref.get("resource")
    if resource not in RESOURCE_FIELDS:
        raise InvalidArgumentError(f"{where}.resource: {quote(resource)} is not one of "
                                   f"{', '.join(RESOURCE_FIELDS)}")
    divisor = parse_quantity(ref.get("divisor") or "1", f"{where}.divisor") or 1
    part, kind = str(resource).split(".")
    resources = container.get("resources") or {}
    table = effective_requests(resources) if part == "requests" else dict(
        resources.get("limits") or {})
    raw = table.get(kind)
    if kind == "cpu":
        amount = milli_value(raw) if raw is not None else (
            node_cpu_milli if part == "limits" else 0)
        return str(math.ceil(amount / (divisor * 1000)))
    amount = value(raw) if raw is not None else (node_memory if part == "limits" else 0)
    return str(math.ceil(amount / divisor))
