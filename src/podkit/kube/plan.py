"""The plans ``podkit.kube`` makes from manifests: what to create on the host and in the CRI.

Pure data: the mapping modules build them, ``kube play`` runs them and ``kube down`` removes
what they name. Every model is frozen so a plan can be compared, hashed and printed.
"""

from __future__ import annotations

import attrs

from podkit.container import ContainerConfig
from podkit.sandbox import SandboxConfig

__all__ = [
    "POD_IP_PLACEHOLDER",
    "ContainerPlan",
    "PodPlan",
    "ProbeSpec",
    "VolumePlan",
]

POD_IP_PLACEHOLDER = "$(podkit.status.podIP)"
"""An env value only known after ``run_sandbox``: ``kube play`` puts the pod IP in its place."""


@attrs.frozen
class ProbeSpec:
    """One probe as Kubernetes defines it (readiness, liveness or startup)."""

    kind: str  # "exec" | "httpGet" | "tcpSocket"
    command: tuple[str, ...] = ()
    host: str = ""
    port: int = 0
    path: str = "/"
    scheme: str = "HTTP"
    http_headers: tuple[tuple[str, str], ...] = ()
    initial_delay_seconds: int = 0
    period_seconds: int = 10
    timeout_seconds: int = 1
    success_threshold: int = 1
    failure_threshold: int = 3


@attrs.frozen
class VolumePlan:
    """A pod volume ``kube play`` must create on the host before the containers start."""

    name: str
    kind: str  # "emptyDir" | "hostPath" | "configMap" | "secret" | "downwardAPI"
    host_path: str
    medium: str = ""
    size_limit: int | None = None
    host_path_type: str = ""
    files: tuple[tuple[str, bytes, int], ...] = ()  # (relative path, content, mode)
    fs_group: int | None = None


@attrs.frozen
class ContainerPlan:
    """One container: its CRI config plus what the kubelet does around it (pull, probes, hooks).

    ``run_as_non_root`` is kubelet's check against the image user, which the CRI cannot carry:
    ``kube play`` refuses to start the container when the resolved user is root (uid 0).
    """

    name: str
    config: ContainerConfig
    image_pull_policy: str  # "Always" | "IfNotPresent" | "Never"
    readiness: ProbeSpec | None = None
    liveness: ProbeSpec | None = None
    startup: ProbeSpec | None = None
    post_start: tuple[str, ...] = ()
    pre_stop: tuple[str, ...] = ()
    run_as_non_root: bool = False


@attrs.frozen
class PodPlan:
    """One pod: the sandbox, its containers in start order, its volumes and kubelet policies."""

    name: str
    namespace: str
    uid: str
    sandbox: SandboxConfig
    init_containers: tuple[ContainerPlan, ...]
    containers: tuple[ContainerPlan, ...]
    volumes: tuple[VolumePlan, ...]
    restart_policy: str  # "Always" | "OnFailure" | "Never"
    termination_grace_period_seconds: int
    source: str  # "file.yaml#doc-index (Kind/name)"
    warnings: tuple[str, ...]
