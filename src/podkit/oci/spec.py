"""attrs models of the OCI runtime-spec 1.3 ``config.json`` (Linux), ``state.json`` and features.

Class names follow ``specs-go``; attribute names are the snake_case form of the JSON keys.
Every optional field defaults to ``None``, which means *absent*: ``0``, ``""``, ``[]`` and ``{}``
are kept apart from it. Unknown keys land in ``extra`` and are written back unchanged.

Loading checks JSON types, integer ranges and REQUIRED keys only. Enumerated strings (namespace
types, seccomp actions, capability names, ...) are kept as they are, known or not, so documents
from newer spec versions stay lossless; ``podkit.oci.validate(spec)`` reports unknown values.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from podkit.oci import codec
from podkit.oci._fields import extra, model, opt, req
from podkit.oci.enums import unknown_values

__all__ = [
    "VERSION",
    "Box",
    "CPUAffinity",
    "ContainerProcessState",
    "Hook",
    "Hooks",
    "IOPriority",
    "Linux",
    "LinuxBlockIO",
    "LinuxCPU",
    "LinuxCapabilities",
    "LinuxDevice",
    "LinuxDeviceCgroup",
    "LinuxHugepageLimit",
    "LinuxIDMapping",
    "LinuxIntelRdt",
    "LinuxInterfacePriority",
    "LinuxMemory",
    "LinuxMemoryPolicy",
    "LinuxNamespace",
    "LinuxNetDevice",
    "LinuxNetwork",
    "LinuxPersonality",
    "LinuxPids",
    "LinuxRdma",
    "LinuxResources",
    "LinuxSeccomp",
    "LinuxSeccompArg",
    "LinuxSyscall",
    "LinuxThrottleDevice",
    "LinuxTimeOffset",
    "LinuxWeightDevice",
    "Mount",
    "POSIXRlimit",
    "Process",
    "Root",
    "Scheduler",
    "Spec",
    "State",
    "User",
]

VERSION = "1.3.0"
"""The runtime-spec version podkit models and writes by default."""



# --- process -------------------------------------------------------------------------------


@model
class Box:
    """``process.consoleSize``: terminal size in characters."""

    height: int = req("uint")
    width: int = req("uint")
    extra: dict[str, Any] = extra()


@model
class User:
    """``process.user``: numeric IDs the process runs as."""

    uid: int | None = opt("uint32")
    gid: int | None = opt("uint32")
    umask: int | None = opt("uint32")
    additional_gids: list[int] | None = opt("uint32")
    username: str | None = opt()
    extra: dict[str, Any] = extra()


@model
class LinuxCapabilities:
    """``process.capabilities``: the five capability sets (``CAP_*`` names)."""

    bounding: list[str] | None = opt()
    effective: list[str] | None = opt()
    inheritable: list[str] | None = opt()
    permitted: list[str] | None = opt()
    ambient: list[str] | None = opt()
    extra: dict[str, Any] = extra()


@model
class POSIXRlimit:
    """One ``process.rlimits`` entry."""

    type: str = req()
    hard: int = req("uint64")
    soft: int = req("uint64")
    extra: dict[str, Any] = extra()


@model
class Scheduler:
    """``process.scheduler`` (1.1.0): arguments of ``sched_setattr(2)``."""

    policy: str = req()
    nice: int | None = opt("int32")
    priority: int | None = opt("int32")
    flags: list[str] | None = opt()
    runtime: int | None = opt("uint64")
    deadline: int | None = opt("uint64")
    period: int | None = opt("uint64")
    extra: dict[str, Any] = extra()


@model
class IOPriority:
    """``process.ioPriority`` (1.1.0)."""

    class_: str = req(wire="class")
    priority: int | None = opt("int32")  # Go int; the schema bounds it to int32
    extra: dict[str, Any] = extra()


@model
class CPUAffinity:
    """``process.execCPUAffinity`` (1.2.1): CPU lists for exec'd processes."""

    initial: str | None = opt()
    final: str | None = opt()
    extra: dict[str, Any] = extra()


@model
class Process:
    """``process``: what runs in the container and with which privileges."""

    terminal: bool | None = opt()
    console_size: Box | None = opt()
    user: User | None = opt()
    args: list[str] | None = opt()
    command_line: str | None = opt()
    env: list[str] | None = opt()
    cwd: str = req(default="/")
    capabilities: LinuxCapabilities | None = opt()
    rlimits: list[POSIXRlimit] | None = opt()
    no_new_privileges: bool | None = opt()
    apparmor_profile: str | None = opt()
    oom_score_adj: int | None = opt("int")
    scheduler: Scheduler | None = opt()
    selinux_label: str | None = opt()
    io_priority: IOPriority | None = opt()
    exec_cpu_affinity: CPUAffinity | None = opt(wire="execCPUAffinity")
    extra: dict[str, Any] = extra()


# --- root, mounts, hooks -------------------------------------------------------------------


@model
class Root:
    """``root``: the container's root filesystem."""

    path: str = req()
    readonly: bool | None = opt()
    extra: dict[str, Any] = extra()


@model
class LinuxIDMapping:
    """A uid/gid mapping range (user namespace or idmapped mount)."""

    container_id: int = req("uint32", wire="containerID")
    host_id: int = req("uint32", wire="hostID")
    size: int = req("uint32")
    extra: dict[str, Any] = extra()


@model
class Mount:
    """One ``mounts`` entry, mounted in list order."""

    destination: str = req()
    type: str | None = opt()
    source: str | None = opt()
    options: list[str] | None = opt()
    uid_mappings: list[LinuxIDMapping] | None = opt()
    gid_mappings: list[LinuxIDMapping] | None = opt()
    extra: dict[str, Any] = extra()


@model
class Hook:
    """A hook command; it reads the container state JSON on stdin."""

    path: str = req()
    args: list[str] | None = opt()
    env: list[str] | None = opt()
    timeout: int | None = opt("int")
    extra: dict[str, Any] = extra()


@model
class Hooks:
    """``hooks``: commands run at points of the container lifecycle."""

    prestart: list[Hook] | None = opt()
    create_runtime: list[Hook] | None = opt()
    create_container: list[Hook] | None = opt()
    start_container: list[Hook] | None = opt()
    poststart: list[Hook] | None = opt()
    poststop: list[Hook] | None = opt()
    extra: dict[str, Any] = extra()


# --- linux ---------------------------------------------------------------------------------


@model
class LinuxNamespace:
    """A namespace to create (no ``path``) or join (``path`` to a ns file)."""

    type: str = req()
    path: str | None = opt()
    extra: dict[str, Any] = extra()


@model
class LinuxTimeOffset:
    """``linux.timeOffsets`` value (1.1.0)."""

    secs: int | None = opt("int64")
    nanosecs: int | None = opt("uint32")
    extra: dict[str, Any] = extra()


@model
class LinuxDevice:
    """A device node to create in the container."""

    path: str = req()
    type: str = req()
    major: int | None = opt("int64")
    minor: int | None = opt("int64")
    file_mode: int | None = opt("uint32")
    uid: int | None = opt("uint32")
    gid: int | None = opt("uint32")
    extra: dict[str, Any] = extra()


@model
class LinuxNetDevice:
    """``linux.netDevices`` value (1.3.0): the name inside the container."""

    name: str | None = opt()
    extra: dict[str, Any] = extra()


@model
class LinuxDeviceCgroup:
    """A device cgroup rule; ``major``/``minor`` ``None`` mean any (``*``)."""

    allow: bool = req()
    type: str | None = opt()
    major: int | None = opt("int64")
    minor: int | None = opt("int64")
    access: str | None = opt()
    extra: dict[str, Any] = extra()


@model
class LinuxMemory:
    """``linux.resources.memory`` (bytes)."""

    limit: int | None = opt("int64")
    reservation: int | None = opt("int64")
    swap: int | None = opt("int64")
    kernel: int | None = opt("int64")
    kernel_tcp: int | None = opt("int64", wire="kernelTCP")
    swappiness: int | None = opt("uint64")
    disable_oom_killer: bool | None = opt(wire="disableOOMKiller")
    use_hierarchy: bool | None = opt()
    check_before_update: bool | None = opt()
    extra: dict[str, Any] = extra()


@model
class LinuxCPU:
    """``linux.resources.cpu``."""

    shares: int | None = opt("uint64")
    quota: int | None = opt("int64")
    burst: int | None = opt("uint64")
    period: int | None = opt("uint64")
    realtime_runtime: int | None = opt("int64")
    realtime_period: int | None = opt("uint64")
    cpus: str | None = opt()
    mems: str | None = opt()
    idle: int | None = opt("int64")
    extra: dict[str, Any] = extra()


@model
class LinuxPids:
    """``linux.resources.pids``; ``limit`` -1 means unlimited (optional since 1.3.0)."""

    limit: int | None = opt("int64")
    extra: dict[str, Any] = extra()


@model
class LinuxWeightDevice:
    """Per-device blkio weight."""

    major: int = req("int64")
    minor: int = req("int64")
    weight: int | None = opt("uint16")
    leaf_weight: int | None = opt("uint16")
    extra: dict[str, Any] = extra()


@model
class LinuxThrottleDevice:
    """Per-device blkio throttle rate."""

    major: int = req("int64")
    minor: int = req("int64")
    rate: int = req("uint64")
    extra: dict[str, Any] = extra()


@model
class LinuxBlockIO:
    """``linux.resources.blockIO``."""

    weight: int | None = opt("uint16")
    leaf_weight: int | None = opt("uint16")
    weight_device: list[LinuxWeightDevice] | None = opt()
    throttle_read_bps_device: list[LinuxThrottleDevice] | None = opt()
    throttle_write_bps_device: list[LinuxThrottleDevice] | None = opt()
    throttle_read_iops_device: list[LinuxThrottleDevice] | None = opt(
        wire="throttleReadIOPSDevice"
    )
    throttle_write_iops_device: list[LinuxThrottleDevice] | None = opt(
        wire="throttleWriteIOPSDevice"
    )
    extra: dict[str, Any] = extra()


@model
class LinuxHugepageLimit:
    """A hugetlb limit for one page size (``"2MB"``)."""

    page_size: str = req()
    limit: int = req("uint64")
    extra: dict[str, Any] = extra()


@model
class LinuxInterfacePriority:
    """net_prio priority of one interface."""

    name: str = req()
    priority: int = req("uint32")
    extra: dict[str, Any] = extra()


@model
class LinuxNetwork:
    """``linux.resources.network`` (net_cls / net_prio)."""

    class_id: int | None = opt("uint32", wire="classID")
    priorities: list[LinuxInterfacePriority] | None = opt()
    extra: dict[str, Any] = extra()


@model
class LinuxRdma:
    """``linux.resources.rdma`` value (1.0.2)."""

    hca_handles: int | None = opt("uint32")
    hca_objects: int | None = opt("uint32")
    extra: dict[str, Any] = extra()


@model
class LinuxResources:
    """``linux.resources``: cgroup settings."""

    devices: list[LinuxDeviceCgroup] | None = opt()
    memory: LinuxMemory | None = opt()
    cpu: LinuxCPU | None = opt()
    pids: LinuxPids | None = opt()
    block_io: LinuxBlockIO | None = opt(wire="blockIO")
    hugepage_limits: list[LinuxHugepageLimit] | None = opt()
    network: LinuxNetwork | None = opt()
    rdma: dict[str, LinuxRdma] | None = opt()
    unified: dict[str, str] | None = opt()
    extra: dict[str, Any] = extra()


@model
class LinuxIntelRdt:
    """``linux.intelRdt``: resctrl class of service and schemata."""

    clos_id: str | None = opt(wire="closID")
    schemata: list[str] | None = opt()
    l3_cache_schema: str | None = opt()
    mem_bw_schema: str | None = opt()
    enable_monitoring: bool | None = opt()
    enable_cmt: bool | None = opt(wire="enableCMT")
    enable_mbm: bool | None = opt(wire="enableMBM")
    extra: dict[str, Any] = extra()


@model
class LinuxMemoryPolicy:
    """``linux.memoryPolicy`` (1.3.0): arguments of ``set_mempolicy(2)``."""

    mode: str = req()
    nodes: str | None = opt()
    flags: list[str] | None = opt()
    extra: dict[str, Any] = extra()


@model
class LinuxSeccompArg:
    """A syscall argument comparison."""

    index: int = req("uint32")  # Go uint; the schema bounds it to uint32
    value: int = req("uint64")
    value_two: int | None = opt("uint64")
    op: str = req()
    extra: dict[str, Any] = extra()


@model
class LinuxSyscall:
    """A seccomp rule for a set of syscall names."""

    names: list[str] = req()
    action: str = req()
    errno_ret: int | None = opt("uint32")  # Go *uint; the schema bounds it to uint32
    args: list[LinuxSeccompArg] | None = opt()
    extra: dict[str, Any] = extra()


@model
class LinuxSeccomp:
    """``linux.seccomp``: the seccomp filter."""

    default_action: str = req()
    default_errno_ret: int | None = opt("uint32")  # Go *uint; schema: uint32
    architectures: list[str] | None = opt()
    flags: list[str] | None = opt()
    listener_path: str | None = opt()
    listener_metadata: str | None = opt()
    syscalls: list[LinuxSyscall] | None = opt()
    extra: dict[str, Any] = extra()


@model
class LinuxPersonality:
    """``linux.personality`` (1.0.2)."""

    domain: str | None = opt()
    flags: list[str] | None = opt()
    extra: dict[str, Any] = extra()


@model
class Linux:
    """``linux``: everything Linux-specific."""

    uid_mappings: list[LinuxIDMapping] | None = opt()
    gid_mappings: list[LinuxIDMapping] | None = opt()
    sysctl: dict[str, str] | None = opt()
    resources: LinuxResources | None = opt()
    cgroups_path: str | None = opt()
    namespaces: list[LinuxNamespace] | None = opt()
    devices: list[LinuxDevice] | None = opt()
    net_devices: dict[str, LinuxNetDevice] | None = opt()
    seccomp: LinuxSeccomp | None = opt()
    rootfs_propagation: str | None = opt()
    masked_paths: list[str] | None = opt()
    readonly_paths: list[str] | None = opt()
    mount_label: str | None = opt()
    intel_rdt: LinuxIntelRdt | None = opt()
    memory_policy: LinuxMemoryPolicy | None = opt()
    personality: LinuxPersonality | None = opt()
    time_offsets: dict[str, LinuxTimeOffset] | None = opt()
    extra: dict[str, Any] = extra()


# --- top level -----------------------------------------------------------------------------


@model
class Spec:
    """A container's ``config.json``.

    >>> spec = Spec.from_json('{"ociVersion": "1.3.0", "process": {"cwd": "/", "oomScoreAdj": 0}}')
    >>> spec.process.oom_score_adj
    0
    """

    oci_version: str = req(default=VERSION)
    process: Process | None = opt()
    root: Root | None = opt()
    hostname: str | None = opt()
    domainname: str | None = opt()
    mounts: list[Mount] | None = opt()
    hooks: Hooks | None = opt()
    annotations: dict[str, str] | None = opt()
    linux: Linux | None = opt()
    extra: dict[str, Any] = extra()

    @classmethod
    def from_dict(cls, data: Any, *, strict: bool = True) -> Spec:
        """Build a spec from decoded JSON; raise ``SpecError`` naming the JSON path on bad input.

        With ``strict`` (the default) an unknown enum value (namespace type, seccomp action,
        capability, ...) is an error too; ``strict=False`` keeps it, so documents from newer
        spec versions round-trip losslessly (``oci.validate`` reports such values).
        """
        return _known_values(codec.structure(data, cls), strict, None)

    @classmethod
    def from_json(cls, text: str | bytes, *, strict: bool = True) -> Spec:
        """Parse ``config.json`` text (``strict`` as in ``from_dict``)."""
        return _known_values(codec.loads(text, cls), strict, None)

    @classmethod
    def load(cls, path: str | Path, *, strict: bool = True) -> Spec:
        """Read and parse a ``config.json`` file (``strict`` as in ``from_dict``)."""
        return _known_values(codec.load(path, cls), strict, str(path))

    def to_dict(self) -> dict[str, Any]:
        """The JSON document as plain dicts/lists (camelCase keys, absent fields left out)."""
        return codec.unstructure(self)

    def to_json(self, *, indent: int | None = None) -> str:
        """Serialise to JSON text."""
        return codec.dumps(self, indent=indent)

    def dump(self, path: str | Path, *, mode: int = 0o600) -> None:
        """Write ``config.json`` atomically, private by default (it holds the environment)."""
        codec.dump(self, path, mode=mode)

    def copy(self) -> Spec:
        """A deep copy, for building variants without touching the original."""
        return codec.deep_copy(self)


def _known_values(spec: Spec, strict: bool, source: str | None) -> Spec:
    """Raise ``SpecError`` for the first unknown enum value when ``strict``."""
    if strict:
        problems = unknown_values(spec)
        if problems:
            more = "".join(f"; {p}" for p in problems[1:])
            raise codec.SpecError(problems[0].path, problems[0].message + more, source)
    return spec


@model
class State:
    """The runtime's view of a container (``runc state`` output, hook stdin)."""

    oci_version: str = req()
    id: str = req()
    status: str = req()
    pid: int | None = opt("int")
    bundle: str = req()
    annotations: dict[str, str] | None = opt()
    extra: dict[str, Any] = extra()

    @classmethod
    def from_dict(cls, data: Any) -> State:
        """Build from decoded JSON; raise ``SpecError`` on bad input."""
        return codec.structure(data, cls)

    @classmethod
    def from_json(cls, text: str | bytes) -> State:
        """Parse state JSON text."""
        return codec.loads(text, cls)

    def to_dict(self) -> dict[str, Any]:
        """The JSON document as plain dicts/lists."""
        return codec.unstructure(self)

    def to_json(self, *, indent: int | None = None) -> str:
        """Serialise to JSON text."""
        return codec.dumps(self, indent=indent)


@model
class ContainerProcessState:
    """Payload sent to a seccomp notify listener (1.1.0)."""

    oci_version: str = req()
    fds: list[str] | None = opt()
    pid: int = req("int")
    metadata: str | None = opt()
    state: State = req()
    extra: dict[str, Any] = extra()
