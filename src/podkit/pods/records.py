"""What the manager records and reports: pod and container records, their CRI states, filters,
stats and the recovery report. Plain attrs models, stored as JSON under the manager's state dir."""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from typing import Any

import attrs

from podkit import cgroups
from podkit.pods.config import ContainerConfig, NamespaceMode, SandboxConfig

__all__ = [
    "INFRALESS_STEPS",
    "SANDBOX_STEPS",
    "USERNS_STEPS",
    "Container",
    "ContainerFilter",
    "ContainerState",
    "ContainerStats",
    "PauseConfig",
    "RecoveryReport",
    "Sandbox",
    "SandboxFilter",
    "SandboxState",
    "SandboxStats",
]

SANDBOX_STEPS = ("netns", "network", "files", "pause")
"""run_sandbox's steps after reserving the name, in order (undone in reverse)."""

USERNS_STEPS = ("netns", "network", "files", "userns", "pause")
"""The steps of a pod with its own user namespace: its pin (``userns``) before the pause."""

INFRALESS_STEPS = ("netns", "network", "files", "namespaces")
"""The steps of an infra-less pod (``pause=None``): IPC and UTS pinned instead of a pause."""


class SandboxState(enum.IntEnum):
    """CRI ``PodSandboxState``."""

    SANDBOX_READY = 0
    SANDBOX_NOTREADY = 1


class ContainerState(enum.IntEnum):
    """CRI ``ContainerState``."""

    CONTAINER_CREATED = 0
    CONTAINER_RUNNING = 1
    CONTAINER_EXITED = 2
    CONTAINER_UNKNOWN = 3


@attrs.frozen(kw_only=True)
class PauseConfig:
    """The pause program: a rootfs directory or an image, and the command that sleeps in it.

    ``PauseConfig(rootfs="/srv/busybox")`` runs ``sleep 2147483647`` there (busybox has it);
    ``PauseConfig(image="localhost/pause:1")`` names an image in the manager's ``images``
    store instead and runs its Entrypoint + Cmd with its Env (see :func:`pause_config`);
    ``builtin_pause(store)`` gives podkit's own. ``args`` and ``env``, when given, replace
    the command and the environment either way.
    """

    rootfs: str = ""
    args: tuple[str, ...] = ()
    env: tuple[str, ...] = ()
    image: str = ""


@attrs.define(kw_only=True)
class Sandbox:
    """A pod as the manager records it (CRI ``PodSandboxStatus`` plus progress).

    ``phase`` is ``creating``, ``created`` or ``removing`` (also a pod whose undo failed: it is
    listed NOTREADY until removed); ``steps`` lists the run_sandbox steps whose effects exist
    and must be undone on removal.
    """

    id: str
    name: str
    config: SandboxConfig
    state: SandboxState = SandboxState.SANDBOX_NOTREADY
    created_at: int = 0
    netns_path: str = ""
    ips: tuple[str, ...] = ()
    pid: int = 0
    cgroups_path: str = ""
    phase: str = "creating"
    steps: tuple[str, ...] = ()

    @property
    def ip(self) -> str:
        """The pod IP (first IPv4 of eth0), ``""`` for host-network pods."""
        return self.ips[0] if self.ips else ""

    @property
    def host_network(self) -> bool:
        """Whether the pod uses the host's network namespace."""
        ns = self.config.linux.security_context.namespace_options
        return ns.network == NamespaceMode.NODE


@attrs.define(kw_only=True)
class Container:
    """A container as the manager records it (CRI ``ContainerStatus`` plus progress).

    ``image_ref`` is the store image its rootfs was made from (its name), ``image_id`` its
    config digest, ``image_digest`` its manifest digest and ``rootfs_key`` that rootfs' ID in
    the store (all ``""`` when ``config.image`` is a rootfs directory). ``meta`` holds what the
    caller asked to keep with the record (the CRI server: the image name the user specified).
    """

    id: str
    sandbox_id: str
    name: str
    config: ContainerConfig
    state: ContainerState = ContainerState.CONTAINER_CREATED
    created_at: int = 0
    started_at: int = 0
    finished_at: int = 0
    exit_code: int = 0
    reason: str = ""
    message: str = ""
    log_path: str = ""
    pid: int = 0
    cgroups_path: str = ""
    phase: str = "creating"
    steps: tuple[str, ...] = ()
    pid_namespace_owner: bool = False
    image_ref: str = ""
    rootfs_key: str = ""
    image_id: str = ""
    image_digest: str = ""
    meta: dict[str, str] = attrs.field(factory=dict)

    @property
    def mounts(self) -> Sequence[Any]:
        """The CRI mounts of the container."""
        return self.config.mounts


@attrs.frozen(kw_only=True)
class SandboxFilter:
    """CRI ``PodSandboxFilter``: id prefix, state, labels that must all match."""

    id: str = ""
    state: SandboxState | None = None
    label_selector: Mapping[str, str] = attrs.field(factory=dict)


@attrs.frozen(kw_only=True)
class ContainerFilter:
    """CRI ``ContainerFilter``: id prefix, state, sandbox, labels that must all match."""

    id: str = ""
    state: ContainerState | None = None
    pod_sandbox_id: str = ""
    label_selector: Mapping[str, str] = attrs.field(factory=dict)


@attrs.frozen(kw_only=True)
class ContainerStats:
    """cgroup usage of one container (v1 or v2; the CRI ``ContainerStats`` numbers).

    ``memory_available_bytes`` is ``None`` without a memory limit; the PSI fields are ``None``
    on cgroup v1 or a kernel without PSI.
    """

    id: str
    timestamp: int
    cpu_usage_core_nano_seconds: int
    memory_usage_bytes: int
    memory_working_set_bytes: int
    memory_rss_bytes: int
    process_count: int
    memory_available_bytes: int | None = None
    memory_page_faults: int = 0
    memory_major_page_faults: int = 0
    cpu_psi: cgroups.PsiStats | None = None
    memory_psi: cgroups.PsiStats | None = None
    io_psi: cgroups.PsiStats | None = None

    @classmethod
    def of(cls, id: str, usage: cgroups.CgroupUsage | cgroups.CgroupStats,
           timestamp: int) -> ContainerStats:
        """The stats of ``id`` from its cgroup sample (``podkit.cgroups.stats``; the short
        ``CgroupUsage`` of ``podkit.cgroups.usage`` is accepted too)."""
        if isinstance(usage, cgroups.CgroupUsage):
            return cls(id=id, timestamp=timestamp,
                       cpu_usage_core_nano_seconds=usage.cpu_usage_core_nano_seconds,
                       memory_usage_bytes=usage.memory_usage_bytes,
                       memory_working_set_bytes=usage.memory_working_set_bytes,
                       memory_rss_bytes=usage.memory_rss_bytes,
                       process_count=usage.process_count)
        short = cgroups.CgroupUsage.of(usage)
        mem, psi = usage.memory, usage.pressure or cgroups.Pressure()
        return cls(id=id, timestamp=timestamp,
                   cpu_usage_core_nano_seconds=short.cpu_usage_core_nano_seconds,
                   memory_usage_bytes=short.memory_usage_bytes,
                   memory_working_set_bytes=short.memory_working_set_bytes,
                   memory_rss_bytes=short.memory_rss_bytes, process_count=short.process_count,
                   memory_available_bytes=mem.available if mem else None,
                   memory_page_faults=mem.page_faults if mem else 0,
                   memory_major_page_faults=mem.major_page_faults if mem else 0,
                   cpu_psi=psi.cpu, memory_psi=psi.memory, io_psi=psi.io)


@attrs.frozen(kw_only=True)
class SandboxStats:
    """Usage of a pod: its pause plus every container (sums), and each container's own."""

    id: str
    timestamp: int
    cpu_usage_core_nano_seconds: int
    memory_working_set_bytes: int
    process_count: int
    containers: tuple[ContainerStats, ...] = ()
    memory_usage_bytes: int = 0
    memory_rss_bytes: int = 0
    memory_page_faults: int = 0
    memory_major_page_faults: int = 0

    @classmethod
    def total(cls, id: str, timestamp: int, every: tuple[ContainerStats, ...],
              containers: tuple[ContainerStats, ...]) -> SandboxStats:
        """The pod's sums over ``every`` cgroup sample (pause and containers)."""
        return cls(id=id, timestamp=timestamp, containers=containers,
                   cpu_usage_core_nano_seconds=sum(s.cpu_usage_core_nano_seconds for s in every),
                   memory_working_set_bytes=sum(s.memory_working_set_bytes for s in every),
                   process_count=sum(s.process_count for s in every),
                   memory_usage_bytes=sum(s.memory_usage_bytes for s in every),
                   memory_rss_bytes=sum(s.memory_rss_bytes for s in every),
                   memory_page_faults=sum(s.memory_page_faults for s in every),
                   memory_major_page_faults=sum(s.memory_major_page_faults for s in every))


@attrs.frozen(kw_only=True)
class RecoveryReport:
    """What ``recover()`` found: adopted pods and containers, and what it undid."""

    sandboxes: tuple[str, ...] = ()
    containers: tuple[str, ...] = ()
    rolled_back: tuple[str, ...] = ()
    errors: tuple[str, ...] = ()
