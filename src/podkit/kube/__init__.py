"""Kubernetes manifests to CRI configs, the way the kubelet maps them (``kube play``'s input).

``load_manifests`` reads YAML files, ``plan_pods`` turns them into ``PodPlan`` objects (the
sandbox, containers, volumes and policies ``kube play`` runs), ``pod_to_cri`` is the library
face for one manifest, ``validate_pod`` refuses what the API server refuses, ``play`` and
``down`` run and remove plans on a pods manager (``kube play``'s library face). Fields
podkit does not map are listed in ``PodPlan.warnings`` (errors with ``strict=True``), never
dropped silently.
"""

from __future__ import annotations

from podkit.kube.dns import parse_resolv_conf
from podkit.kube.fields import POD_FIELDS, UNSUPPORTED, unsupported_fields
from podkit.kube.manifests import (
    ConfigData,
    Document,
    ManifestError,
    Manifests,
    load_manifests,
    parse_manifests,
)
from podkit.kube.plan import (
    POD_IP_PLACEHOLDER,
    ContainerPlan,
    PodPlan,
    ProbeSpec,
    VolumePlan,
)
from podkit.kube.planner import DEFAULT_VOLUMES_ROOT, plan_pods, pod_to_cri
from podkit.kube.resources import qos_class
from podkit.kube.runner import (
    DownResult,
    PlayResult,
    PlayTimeoutError,
    PodFailedError,
    PodResult,
    down,
    play,
)
from podkit.kube.validate import PodValidationError, validate_pod
from podkit.kube.workloads import default_uid

__all__ = [
    "DEFAULT_VOLUMES_ROOT",
    "POD_FIELDS",
    "POD_IP_PLACEHOLDER",
    "UNSUPPORTED",
    "ConfigData",
    "ContainerPlan",
    "Document",
    "DownResult",
    "ManifestError",
    "Manifests",
    "PlayResult",
    "PlayTimeoutError",
    "PodFailedError",
    "PodPlan",
    "PodResult",
    "PodValidationError",
    "ProbeSpec",
    "VolumePlan",
    "default_uid",
    "down",
    "load_manifests",
    "parse_manifests",
    "parse_resolv_conf",
    "plan_pods",
    "play",
    "pod_to_cri",
    "qos_class",
    "unsupported_fields",
    "validate_pod",
]
