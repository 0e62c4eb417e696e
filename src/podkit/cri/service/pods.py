"""The seam between the CRI service and the pods layer: the pod API the service calls.

:class:`PodAPI` lists exactly what :class:`~podkit.cri.service.CRIService` uses of a
:class:`~podkit.sandbox.SandboxManager`, so a test hands it an in-memory
:class:`podkit.pods.testing.FakePodManager` instead, and the service cannot grow a dependency
on the manager's internals unnoticed. The service never changes a manager's settings: it is
given a manager configured for it (images, rootfs mode, network loader).
"""

from __future__ import annotations

import builtins
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

from podkit import oci
from podkit.container import ContainerConfig
from podkit.image import ImageStore
from podkit.runtime import ExecResult
from podkit.sandbox import (
    Container,
    ContainerFilter,
    ContainerStats,
    LinuxContainerResources,
    PauseConfig,
    Sandbox,
    SandboxConfig,
    SandboxFilter,
    SandboxStats,
)

__all__ = ["NetworkStatus", "PodAPI", "RuntimeProbe"]


class RuntimeProbe(Protocol):
    """The part of the OCI runtime the service asks for RuntimeReady: does it answer."""

    def list(self) -> builtins.list[Any]:
        """The runtime's containers (only whether the call succeeds matters)."""
        ...


class NetworkStatus(Protocol):
    """The part of the pod networks the service asks for NetworkReady (CNI STATUS)."""

    def status(self) -> None:
        """Raise when a network is not ready."""
        ...


class PodAPI(Protocol):
    """What the CRI service needs of the pods layer (``SandboxManager`` satisfies it).

    Lookups raise ``NotFoundError``, bad configs ``InvalidArgumentError``, reused names
    ``AlreadyExistsError``, operations in the wrong state ``ConflictError``: the service maps
    them to gRPC codes unchanged.
    """

    @property
    def root_dir(self) -> Path:
        """Per-pod files and bundles (``containers/<id>/bundle/config.json``)."""
        ...

    @property
    def state_dir(self) -> Path:
        """Where the manager keeps its records (reported by verbose Status)."""
        ...

    @property
    def runtime(self) -> RuntimeProbe:
        """The OCI runtime (RuntimeReady)."""
        ...

    @property
    def networks(self) -> NetworkStatus | None:
        """The pod networks; ``None`` until configured (host-network pods only)."""
        ...

    @property
    def pause(self) -> PauseConfig | None:
        """The pause program (its image is reported by verbose PodSandboxStatus)."""
        ...

    @property
    def images(self) -> ImageStore | None:
        """The image store container images are resolved in."""
        ...

    @property
    def cgroup_driver(self) -> str:
        """Who makes the cgroups: ``cgroupfs`` or ``systemd`` (the RuntimeConfig answer)."""
        ...

    @property
    def rootfs_mode(self) -> str:
        """How container root filesystems are made: ``auto``, ``overlay`` or ``copy``."""
        ...

    def load_networks(self) -> str:
        """Load the pod networks if they came late; "" or why they could not be loaded."""
        ...

    def user_namespaces(self) -> str:
        """Why pods with a user namespace of their own cannot run here ("" when they can)."""
        ...

    def run_sandbox(self, config: SandboxConfig) -> Sandbox:
        """Create and start a pod (READY); undone on any failure."""
        ...

    def stop_sandbox(self, id: str) -> None:
        """Stop the pod's containers and pause, tear its network down (NOTREADY)."""
        ...

    def remove_sandbox(self, id: str) -> None:
        """Remove the pod and its containers."""
        ...

    def sandbox_status(self, id: str) -> Sandbox:
        """The pod's record, its state checked."""
        ...

    def list_sandboxes(self, filter: SandboxFilter | None = None) -> builtins.list[Sandbox]:
        """Pods matching ``filter``, oldest first."""
        ...

    def create_container(self, sandbox_id: str, config: ContainerConfig, *,
                         meta: Mapping[str, str] | None = None) -> str:
        """Build a container (CREATED) in the pod; its ID."""
        ...

    def start_container(self, id: str) -> None:
        """Start a CREATED container (RUNNING)."""
        ...

    def stop_container(self, id: str, timeout: float = 0) -> None:
        """Stop signal, ``timeout`` seconds, SIGKILL (EXITED)."""
        ...

    def remove_container(self, id: str) -> None:
        """Force-stop and remove the container."""
        ...

    def container_status(self, id: str) -> Container:
        """The container's record, its state checked."""
        ...

    def container_user(self, id: str) -> oci.User | None:
        """The resolved user of the container's process (``None`` if unknown)."""
        ...

    def list_containers(self, filter: ContainerFilter | None = None,
                        ) -> builtins.list[Container]:
        """Containers matching ``filter``, oldest first."""
        ...

    def update_container_resources(self, id: str, resources: LinuxContainerResources) -> None:
        """New cgroup limits for a running container."""
        ...

    def reopen_container_log(self, id: str) -> None:
        """Continue a running container's log in a fresh file."""
        ...

    def exec_sync(self, id: str, cmd: Sequence[str], timeout: float | None = None,
                  ) -> ExecResult:
        """Run ``cmd`` in a running container; its exit code and output."""
        ...

    def container_stats(self, id: str) -> ContainerStats:
        """The container's CPU, memory and process usage."""
        ...

    def sandbox_stats(self, id: str) -> SandboxStats:
        """The pod's usage, pause and containers summed."""
        ...
