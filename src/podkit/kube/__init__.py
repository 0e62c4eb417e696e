"""Kubernetes manifests to CRI configs, the way the kubelet maps them (``kube play``'s input).

The plan models are in ``plan``; loading, validating and mapping modules build them.
"""

from __future__ import annotations

from podkit.kube.plan import (
    POD_IP_PLACEHOLDER,
    ContainerPlan,
    PodPlan,
    ProbeSpec,
    VolumePlan,
)

__all__ = [
    "POD_IP_PLACEHOLDER",
    "ContainerPlan",
    "PodPlan",
    "ProbeSpec",
    "VolumePlan",
]
