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
    """The first ID of the range on the host."""
    container_id: int
    """The first ID of the range inside the user namespace."""
    length: int
    """How many consecutive IDs the range maps."""


@attrs.frozen(kw_only=True)
class UserNamespace:
    """User namespace mode and mappings (POD mode needs exactly one mapping each)."""

    mode: NamespaceMode = NamespaceMode.NODE
    """``NODE``: the host's user namespace; ``POD``: one of the pod's own (``uids``/``gids``)."""
    uids: Sequence[IDMapping] = ()
    """The UID mappings of a ``POD`` user namespace (exactly one)."""
    gids: Sequence[IDMapping] = ()
    """The GID mappings of a ``POD`` user namespace (exactly one)."""


@attrs.frozen(kw_only=True)
class NamespaceOption:
    """Namespace modes: network/ipc are POD or NODE; pid may also be CONTAINER or TARGET."""

    network: NamespaceMode = NamespaceMode.POD
    """``POD``: the pod's own network namespace; ``NODE``: the host's."""
    pid: NamespaceMode = NamespaceMode.POD
    """``POD``: shared by the pod's containers; ``CONTAINER``: its own; ``NODE``: the host's;
    ``TARGET``: ``target_id``'s."""
    ipc: NamespaceMode = NamespaceMode.POD
    """``POD``: the pod's own IPC namespace; ``NODE``: the host's."""
    target_id: str = ""
    """The container whose PID namespace a ``TARGET`` pid mode joins."""
    userns_options: UserNamespace | None = None
    """The user namespace; ``None``: the host's."""


@attrs.frozen(kw_only=True)
class SELinuxOption:
    """SELinux label parts."""

    user: str = ""
    """The SELinux user of the label."""
    role: str = ""
    """The SELinux role of the label."""
    type: str = ""
    """The SELinux type of the label."""
    level: str = ""
    """The SELinux level (MLS/MCS range) of the label."""


@attrs.frozen(kw_only=True)
class SecurityProfile:
    """A seccomp or AppArmor profile choice."""

    profile_type: ProfileType = ProfileType.RUNTIME_DEFAULT
    """``RUNTIME_DEFAULT``, ``UNCONFINED``, or ``LOCALHOST`` (a profile on the host)."""
    localhost_ref: str = ""
    """A ``LOCALHOST`` profile: a seccomp JSON file path or an AppArmor profile name."""


@attrs.frozen(kw_only=True)
class DNSConfig:
    """DNS settings written to the sandbox's resolv.conf."""

    servers: Sequence[str] = ()
    """Name server addresses (``nameserver`` lines)."""
    searches: Sequence[str] = ()
    """Search domains (the ``search`` line)."""
    options: Sequence[str] = ()
    """Resolver options (the ``options`` line: ``ndots:5``)."""


@attrs.frozen(kw_only=True)
class PortMapping:
    """A pod port published on the host (CNI ``portMappings`` capability)."""

    container_port: int
    """The port inside the pod."""
    host_port: int = 0
    """The port on the host; 0: not published."""
    protocol: Protocol = Protocol.TCP
    """``TCP``, ``UDP`` or ``SCTP``."""
    host_ip: str = ""
    """The host address to publish on; "": every address."""


@attrs.frozen(kw_only=True)
class HugepageLimit:
    """Hugetlb limit for one page size (``"2MB"``)."""

    page_size: str
    """The hugepage size, as the hugetlb controller names it (``2MB``, ``1GB``)."""
    limit: int
    """The limit in bytes of pages of that size."""


@attrs.frozen(kw_only=True)
class LinuxContainerResources:
    """CRI cgroup resources; zero means unset, as in the CRI."""

    cpu_period: int = 0
    """CFS period in microseconds (``cpu.cfs_period_us``); 0: unset."""
    cpu_quota: int = 0
    """CFS quota in microseconds per period (``cpu.cfs_quota_us``); 0: unset."""
    cpu_shares: int = 0
    """Relative CPU weight (``cpu.shares``; ``cpu.weight`` on cgroup v2); 0: unset."""
    memory_limit_in_bytes: int = 0
    """Memory limit in bytes; 0: unset."""
    oom_score_adj: int = 0
    """The OOM killer score adjustment of the processes (-1000 to 1000)."""
    cpuset_cpus: str = ""
    """The CPUs the processes may run on (``0-3,7``); "": unset."""
    cpuset_mems: str = ""
    """The memory nodes the processes may use (``0-1``); "": unset."""
    hugepage_limits: Sequence[HugepageLimit] = ()
    """Hugetlb limits, one per page size."""
    unified: dict[str, str] = attrs.field(factory=dict, converter=_frozen_map)
    """cgroup v2 files and values to write (``{"memory.high": "100M"}``)."""
    memory_swap_limit_in_bytes: int = 0
    """Memory plus swap limit in bytes; 0: unset."""


# --- sandbox ------------------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class PodSandboxMetadata:
    """Identity of a pod: its unique name is ``<name>_<namespace>_<uid>_<attempt>``."""

    name: str
    """The pod's name (a Kubernetes Pod's ``metadata.name``)."""
    uid: str = ""
    """The pod's UID; with the name, namespace and attempt it makes the pod unique."""
    namespace: str = "default"
    """The pod's Kubernetes namespace."""
    attempt: int = 0
    """How many times a pod of this name, namespace and UID was made before (0 first)."""


@attrs.frozen(kw_only=True)
class LinuxSandboxSecurityContext:
    """Pod-wide Linux security settings."""

    namespace_options: NamespaceOption = attrs.field(factory=NamespaceOption)
    """Which network, PID, IPC and user namespaces the pod uses."""
    selinux_options: SELinuxOption | None = None
    """The SELinux label of the pod's processes; ``None``: the host's default."""
    run_as_user: int | None = None
    """The UID the pause process runs as; ``None``: the image's."""
    run_as_group: int | None = None
    """The GID the pause process runs as; ``None``: the image's (needs ``run_as_user``)."""
    readonly_rootfs: bool = False
    """Mount the pause container's rootfs read-only."""
    supplemental_groups: Sequence[int] = ()
    """Extra GIDs of the pod's first process, besides its primary group."""
    supplemental_groups_policy: SupplementalGroupsPolicy = SupplementalGroupsPolicy.MERGE
    """``MERGE``: with the image's /etc/group; ``STRICT``: these alone."""
    privileged: bool = False
    """Let containers of the pod be privileged (all capabilities, devices, no confinement)."""
    seccomp: SecurityProfile | None = None
    """The pause container's seccomp profile; ``None``: unconfined."""
    apparmor: SecurityProfile | None = None
    """The pause container's AppArmor profile; ``None``: the runtime default."""


@attrs.frozen(kw_only=True)
class LinuxPodSandboxConfig:
    """Linux part of a pod config: cgroup parent, security, sysctls, resources."""

    cgroup_parent: str = ""
    """The cgroup the pod's cgroup goes under; "": the node's (``cgroups.parent``)."""
    security_context: LinuxSandboxSecurityContext = attrs.field(
        factory=LinuxSandboxSecurityContext
    )
    """Pod-wide security: namespaces, SELinux, user, seccomp, AppArmor."""
    sysctls: dict[str, str] = attrs.field(factory=dict, converter=_frozen_map)
    """Namespaced sysctls set in the pod (``net.ipv4.ip_forward``)."""
    overhead: LinuxContainerResources | None = None
    """Resources the pod's own machinery uses, beyond its containers' (pod overhead)."""
    resources: LinuxContainerResources | None = None
    """The pod's total resources (the sum of its containers'), for the pod cgroup."""


@attrs.frozen(kw_only=True)
class SandboxConfig:
    """What a pod needs (CRI ``PodSandboxConfig``)."""

    metadata: PodSandboxMetadata
    """The pod's name, UID, namespace and attempt: its identity."""
    hostname: str = ""
    """The pod's hostname; "": the host's (a host-network pod must leave it empty)."""
    log_directory: str = ""
    """The directory container logs go under (``ContainerConfig.log_path`` is relative to it); "":
    none."""
    dns_config: DNSConfig | None = None
    """The pod's resolv.conf; ``None``: the host's."""
    port_mappings: Sequence[PortMapping] = ()
    """Pod ports published on the host (through the CNI portmap plugin)."""
    labels: dict[str, str] = attrs.field(factory=dict, converter=_frozen_map)
    """Key-value pairs to select pods by (``pod ls --label``); kept, not interpreted."""
    annotations: dict[str, str] = attrs.field(factory=dict, converter=_frozen_map)
    """Key-value data for the runtime and plugins (CDI devices, CNI capabilities)."""
    linux: LinuxPodSandboxConfig = attrs.field(factory=LinuxPodSandboxConfig)
    """The Linux part: cgroup parent, security context, sysctls, resources."""


# --- container ----------------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class ContainerMetadata:
    """Identity of a container inside its pod."""

    name: str
    """The container's name, unique in its pod."""
    attempt: int = 0
    """How many times a container of this name was made in the pod before (0 first)."""


@attrs.frozen(kw_only=True)
class KeyValue:
    """An environment variable."""

    key: str
    """The variable's name."""
    value: str
    """The variable's value."""


@attrs.frozen(kw_only=True)
class Mount:
    """A host path mounted into a container (CRI ``Mount``)."""

    container_path: str
    """Where the mount appears in the container."""
    host_path: str
    """The host file or directory mounted."""
    readonly: bool = False
    """Mount it read-only."""
    selinux_relabel: bool = False
    """Relabel the host path for the container's SELinux label."""
    propagation: MountPropagation = MountPropagation.PROPAGATION_PRIVATE
    """Mount propagation: private, host to container (rslave) or bidirectional (rshared)."""
    uid_mappings: Sequence[IDMapping] = ()
    """UID mappings of an ID-mapped mount (pods in their own user namespace)."""
    gid_mappings: Sequence[IDMapping] = ()
    """GID mappings of an ID-mapped mount (pods in their own user namespace)."""
    recursive_read_only: bool = False
    """Make submounts read-only too (``rro``; needs ``readonly``)."""


@attrs.frozen(kw_only=True)
class Device:
    """A host device exposed to a container with cgroup ``permissions`` (``rwm``)."""

    container_path: str
    """Where the device node appears in the container."""
    host_path: str
    """The host device node."""
    permissions: str = "rwm"
    """The cgroup device permissions: ``r`` read, ``w`` write, ``m`` mknod."""


@attrs.frozen(kw_only=True)
class Capability:
    """Capability changes; names without ``CAP_``; ``ALL`` adds or drops every capability."""

    add_capabilities: Sequence[str] = ()
    """Capabilities added to the runtime's default set (``NET_ADMIN``, ``ALL``)."""
    drop_capabilities: Sequence[str] = ()
    """Capabilities dropped from the default set (``ALL``: every one)."""
    add_ambient_capabilities: Sequence[str] = ()
    """Capabilities added to the ambient set too (kept across exec)."""


@attrs.frozen(kw_only=True)
class LinuxContainerSecurityContext:
    """Container Linux security settings."""

    capabilities: Capability | None = None
    """Capabilities added and dropped; ``None``: the runtime's default set."""
    privileged: bool = False
    """Every capability, every host device, no seccomp, AppArmor or masked paths."""
    namespace_options: NamespaceOption = attrs.field(factory=NamespaceOption)
    """Which network, PID, IPC and user namespaces the container uses."""
    selinux_options: SELinuxOption | None = None
    """The container's SELinux label; ``None``: the pod's."""
    run_as_user: int | None = None
    """The UID the process runs as; ``None``: the image's user."""
    run_as_group: int | None = None
    """The GID the process runs as; ``None``: the user's (needs a user)."""
    run_as_username: str = ""
    """A user name looked up in the image's /etc/passwd (when no ``run_as_user``)."""
    readonly_rootfs: bool = False
    """Mount the container's rootfs read-only."""
    supplemental_groups: Sequence[int] = ()
    """Extra GIDs of the process, besides its primary group."""
    supplemental_groups_policy: SupplementalGroupsPolicy = SupplementalGroupsPolicy.MERGE
    """``MERGE``: with the image's /etc/group; ``STRICT``: these alone."""
    no_new_privs: bool = False
    """Set ``no_new_privs``: setuid binaries and file capabilities gain nothing."""
    masked_paths: Sequence[str] | None = None
    """Paths masked in the container; ``None``: the runtime default, ``()``: none."""
    readonly_paths: Sequence[str] | None = None
    """Paths made read-only; ``None``: the runtime default, ``()``: none."""
    seccomp: SecurityProfile | None = None
    """The seccomp profile; ``None``: unconfined."""
    apparmor: SecurityProfile | None = None
    """The AppArmor profile; ``None``: the runtime default."""


@attrs.frozen(kw_only=True)
class LinuxContainerConfig:
    """Linux part of a container config."""

    resources: LinuxContainerResources | None = None
    """The container's cgroup resources; ``None``: no limits."""
    security_context: LinuxContainerSecurityContext = attrs.field(
        factory=LinuxContainerSecurityContext
    )
    """Capabilities, user, namespaces, seccomp, AppArmor, SELinux."""


@attrs.frozen(kw_only=True)
class ContainerConfig:
    """What a container needs (CRI ``ContainerConfig``); ``image``: rootfs dir or reference."""

    metadata: ContainerMetadata
    """The container's name and attempt: its identity in the pod."""
    image: str
    """An image reference in the store (``localhost/busybox:1``) or a rootfs directory."""
    command: Sequence[str] = ()
    """The entrypoint; ``()``: the image's Entrypoint."""
    args: Sequence[str] = ()
    """The arguments to the entrypoint; ``()``: the image's Cmd (when no command is given)."""
    working_dir: str = ""
    """The working directory; "": the image's WorkingDir, else ``/``."""
    envs: Sequence[KeyValue] = ()
    """Environment variables, added to the image's Env (the same name replaces it)."""
    mounts: Sequence[Mount] = ()
    """Host paths mounted into the container."""
    devices: Sequence[Device] = ()
    """Host devices exposed to the container."""
    labels: dict[str, str] = attrs.field(factory=dict, converter=_frozen_map)
    """Key-value pairs to select containers by; kept, not interpreted."""
    annotations: dict[str, str] = attrs.field(factory=dict, converter=_frozen_map)
    """Key-value data for the runtime and hooks (CDI devices among them)."""
    log_path: str = ""
    """The container's log file, relative to the pod's ``log_directory``; "": none."""
    stdin: bool = False
    """Keep a stdin open for the container (attach, ``exec -i``)."""
    stdin_once: bool = False
    """Close stdin after the first attach ends."""
    tty: bool = False
    """Give the container a terminal."""
    linux: LinuxContainerConfig = attrs.field(factory=LinuxContainerConfig)
    """The Linux part: resources and security context."""
    cdi_devices: Sequence[str] = ()
    """Fully qualified CDI device names (``vendor.com/gpu=0``) to inject."""
    stop_signal: int = 0
    """The Linux signal number that stops the container (``signal.SIGTERM``, not the CRI
    ``Signal`` enum: ``podkit.cri.convert`` maps between them); 0 = unset: the image's
    ``StopSignal``, else ``SIGTERM``."""
