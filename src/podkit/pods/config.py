"""The CRI configuration shapes shared by sandboxes and containers, as Python models.

Mirrors ``runtime.v1`` (cri-api v0.36.3) field for field in snake_case, with Python defaults
for proto3 zero values: ``None`` for an unset message, ``()`` for an empty repeated field.
``podkit.sandbox`` and ``podkit.container`` re-export what they use.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence

import attrs

__all__ = [
    "Capability",
    "ContainerConfig",
    "ContainerMetadata",
    "DNSConfig",
    "Device",
    "HugepageLimit",
    "IDMapping",
    "KeyValue",
    "LinuxContainerConfig",
    "LinuxContainerResources",
    "LinuxContainerSecurityContext",
    "LinuxPodSandboxConfig",
    "LinuxSandboxSecurityContext",
    "Mount",
    "MountPropagation",
    "NamespaceMode",
    "NamespaceOption",
    "PodSandboxMetadata",
    "PortMapping",
    "ProfileType",
    "Protocol",
    "SELinuxOption",
    "SandboxConfig",
    "SecurityProfile",
    "SupplementalGroupsPolicy",
    "UserNamespace",
]


class Protocol(enum.IntEnum):
    """Port mapping protocol (CRI ``Protocol``)."""

    TCP = 0
    UDP = 1
    SCTP = 2


class MountPropagation(enum.IntEnum):
    """Mount propagation (CRI ``MountPropagation``)."""

    PROPAGATION_PRIVATE = 0
    PROPAGATION_HOST_TO_CONTAINER = 1
    PROPAGATION_BIDIRECTIONAL = 2


class NamespaceMode(enum.IntEnum):
    """Which namespace a sandbox or container uses (CRI ``NamespaceMode``)."""

    POD = 0
    CONTAINER = 1
    NODE = 2
    TARGET = 3


class SupplementalGroupsPolicy(enum.IntEnum):
    """How supplemental groups combine with the image's /etc/group (CRI)."""

    MERGE = 0
    STRICT = 1


class ProfileType(enum.IntEnum):
    """Seccomp/AppArmor profile kind (CRI ``SecurityProfile.ProfileType``)."""

    RUNTIME_DEFAULT = 0
    UNCONFINED = 1
    LOCALHOST = 2


def _frozen_map(value: Mapping[str, str] | None) -> dict[str, str]:
    return dict(value or {})


@attrs.frozen(kw_only=True)
class IDMapping:
    """A user-namespace ID range: ``length`` IDs from ``container_id`` map to ``host_id``."""

    host_id: int
    container_id: int
    length: int


@attrs.frozen(kw_only=True)
class UserNamespace:
    """User namespace mode and mappings (POD mode needs exactly one mapping each)."""

    mode: NamespaceMode = NamespaceMode.NODE
    uids: Sequence[IDMapping] = ()
    gids: Sequence[IDMapping] = ()


@attrs.frozen(kw_only=True)
class NamespaceOption:
    """Namespace modes: network/ipc are POD or NODE; pid may also be CONTAINER or TARGET."""

    network: NamespaceMode = NamespaceMode.POD
    pid: NamespaceMode = NamespaceMode.POD
    ipc: NamespaceMode = NamespaceMode.POD
    target_id: str = ""
    userns_options: UserNamespace | None = None


@attrs.frozen(kw_only=True)
class SELinuxOption:
    """SELinux label parts."""

    user: str = ""
    role: str = ""
    type: str = ""
    level: str = ""


@attrs.frozen(kw_only=True)
class SecurityProfile:
    """A seccomp or AppArmor profile choice."""

    profile_type: ProfileType = ProfileType.RUNTIME_DEFAULT
    localhost_ref: str = ""


@attrs.frozen(kw_only=True)
class DNSConfig:
    """DNS settings written to the sandbox's resolv.conf."""

    servers: Sequence[str] = ()
    searches: Sequence[str] = ()
    options: Sequence[str] = ()


@attrs.frozen(kw_only=True)
class PortMapping:
    """A pod port published on the host (CNI ``portMappings`` capability)."""

    container_port: int
    host_port: int = 0
    protocol: Protocol = Protocol.TCP
    host_ip: str = ""


@attrs.frozen(kw_only=True)
class HugepageLimit:
    """Hugetlb limit for one page size (``"2MB"``)."""

    page_size: str
    limit: int


@attrs.frozen(kw_only=True)
class LinuxContainerResources:
    """CRI cgroup resources; zero means unset, as in the CRI."""

    cpu_period: int = 0
    cpu_quota: int = 0
    cpu_shares: int = 0
    memory_limit_in_bytes: int = 0
    oom_score_adj: int = 0
    cpuset_cpus: str = ""
    cpuset_mems: str = ""
    hugepage_limits: Sequence[HugepageLimit] = ()
    unified: dict[str, str] = attrs.field(factory=dict, converter=_frozen_map)
    memory_swap_limit_in_bytes: int = 0


# --- sandbox ------------------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class PodSandboxMetadata:
    """Identity of a pod: its unique name is ``<name>_<namespace>_<uid>_<attempt>``."""

    name: str
    uid: str = ""
    namespace: str = "default"
    attempt: int = 0


@attrs.frozen(kw_only=True)
class LinuxSandboxSecurityContext:
    """Pod-wide Linux security settings."""

    namespace_options: NamespaceOption = attrs.field(factory=NamespaceOption)
    selinux_options: SELinuxOption | None = None
    run_as_user: int | None = None
    run_as_group: int | None = None
    readonly_rootfs: bool = False
    supplemental_groups: Sequence[int] = ()
    supplemental_groups_policy: SupplementalGroupsPolicy = SupplementalGroupsPolicy.MERGE
    privileged: bool = False
    seccomp: SecurityProfile | None = None
    apparmor: SecurityProfile | None = None


@attrs.frozen(kw_only=True)
class LinuxPodSandboxConfig:
    """Linux part of a pod config: cgroup parent, security, sysctls, resources."""

    cgroup_parent: str = ""
    security_context: LinuxSandboxSecurityContext = attrs.field(
        factory=LinuxSandboxSecurityContext
    )
    sysctls: dict[str, str] = attrs.field(factory=dict, converter=_frozen_map)
    overhead: LinuxContainerResources | None = None
    resources: LinuxContainerResources | None = None


@attrs.frozen(kw_only=True)
class SandboxConfig:
    """What a pod needs (CRI ``PodSandboxConfig``)."""

    metadata: PodSandboxMetadata
    hostname: str = ""
    log_directory: str = ""
    dns_config: DNSConfig | None = None
    port_mappings: Sequence[PortMapping] = ()
    labels: dict[str, str] = attrs.field(factory=dict, converter=_frozen_map)
    annotations: dict[str, str] = attrs.field(factory=dict, converter=_frozen_map)
    linux: LinuxPodSandboxConfig = attrs.field(factory=LinuxPodSandboxConfig)


# --- container ----------------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class ContainerMetadata:
    """Identity of a container inside its pod."""

    name: str
    attempt: int = 0


@attrs.frozen(kw_only=True)
class KeyValue:
    """An environment variable."""

    key: str
    value: str


@attrs.frozen(kw_only=True)
class Mount:
    """A host path mounted into a container (CRI ``Mount``)."""

    container_path: str
    host_path: str
    readonly: bool = False
    selinux_relabel: bool = False
    propagation: MountPropagation = MountPropagation.PROPAGATION_PRIVATE
    uid_mappings: Sequence[IDMapping] = ()
    gid_mappings: Sequence[IDMapping] = ()
    recursive_read_only: bool = False


@attrs.frozen(kw_only=True)
class Device:
    """A host device exposed to a container with cgroup ``permissions`` (``rwm``)."""

    container_path: str
    host_path: str
    permissions: str = "rwm"


@attrs.frozen(kw_only=True)
class Capability:
    """Capability changes; names without ``CAP_``; ``ALL`` adds or drops every capability."""

    add_capabilities: Sequence[str] = ()
    drop_capabilities: Sequence[str] = ()
    add_ambient_capabilities: Sequence[str] = ()


@attrs.frozen(kw_only=True)
class LinuxContainerSecurityContext:
    """Container Linux security settings."""

    capabilities: Capability | None = None
    privileged: bool = False
    namespace_options: NamespaceOption = attrs.field(factory=NamespaceOption)
    selinux_options: SELinuxOption | None = None
    run_as_user: int | None = None
    run_as_group: int | None = None
    run_as_username: str = ""
    readonly_rootfs: bool = False
    supplemental_groups: Sequence[int] = ()
    supplemental_groups_policy: SupplementalGroupsPolicy = SupplementalGroupsPolicy.MERGE
    no_new_privs: bool = False
    masked_paths: Sequence[str] | None = None
    readonly_paths: Sequence[str] | None = None
    seccomp: SecurityProfile | None = None
    apparmor: SecurityProfile | None = None


@attrs.frozen(kw_only=True)
class LinuxContainerConfig:
    """Linux part of a container config."""

    resources: LinuxContainerResources | None = None
    security_context: LinuxContainerSecurityContext = attrs.field(
        factory=LinuxContainerSecurityContext
    )


@attrs.frozen(kw_only=True)
class ContainerConfig:
    """What a container needs (CRI ``ContainerConfig``); ``image``: rootfs dir or reference."""

    metadata: ContainerMetadata
    image: str
    command: Sequence[str] = ()
    args: Sequence[str] = ()
    working_dir: str = ""
    envs: Sequence[KeyValue] = ()
    mounts: Sequence[Mount] = ()
    devices: Sequence[Device] = ()
    labels: dict[str, str] = attrs.field(factory=dict, converter=_frozen_map)
    annotations: dict[str, str] = attrs.field(factory=dict, converter=_frozen_map)
    log_path: str = ""
    stdin: bool = False
    stdin_once: bool = False
    tty: bool = False
    linux: LinuxContainerConfig = attrs.field(factory=LinuxContainerConfig)
    cdi_devices: Sequence[str] = ()
    stop_signal: int = 0
    """The Linux signal number that stops the container (``signal.SIGTERM``, not the CRI
    ``Signal`` enum: ``podkit.cri.convert`` maps between them); 0 = unset: the image's
    ``StopSignal``, else ``SIGTERM``."""
