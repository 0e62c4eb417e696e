"""CRI ``runtime.v1`` messages to podkit models and back.

The podkit models (``SandboxConfig``, ``ContainerConfig`` and their parts, see
``podkit.sandbox``/``podkit.container``) mirror the CRI field for field in snake_case, so most of
the work is mechanical; what is not:

- ``Int64Value`` wrappers become ``int | None``; unset sub-messages become ``None`` where the
  model has an optional field and the model's default where it does not (``linux``,
  ``security_context``, ``namespace_options``), and going back those are always sent, as the
  kubelet does.
- ``KeyValue.value`` is bytes on the wire and ``str`` in podkit (UTF-8); ``CDI_devices`` become
  the device names; ``ContainerConfig.image`` is the ``ImageSpec.image`` reference; enums map by
  number, except ``stop_signal``: the model holds the Linux signal number (``signal.SIGTERM``,
  0 for ``RUNTIME_DEFAULT``), the CRI its own ``Signal`` enum (``SIGTERM`` is 23 there); an empty
  ``masked_paths`` or ``readonly_paths`` means "the runtime's defaults" (``None``), as in
  containerd.
- The deprecated ``seccomp_profile_path``/``apparmor_profile`` strings are read when the newer
  ``SecurityProfile`` field is unset. Windows parts and the ``ImageSpec`` details other than the
  reference are ignored (a Linux runtime has no use for them); image volumes (``Mount.image``)
  are refused, since podkit cannot honour them.

Every error is a ``ConversionError`` naming the CRI field path, for example
``config.linux.security_context.namespace_options.pid``. Filters become the manager's
``SandboxFilter``/``ContainerFilter``; the manager's records (``Sandbox``, ``Container``) and
statistics go back as CRI statuses, list items and stats (one way: they hold more than the CRI).
"""

from __future__ import annotations

import enum
import signal
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, TypeVar

from podkit.container import (
    Capability,
    ContainerConfig,
    ContainerMetadata,
    Device,
    HugepageLimit,
    KeyValue,
    LinuxContainerConfig,
    LinuxContainerSecurityContext,
    Mount,
    MountPropagation,
    SupplementalGroupsPolicy,
)
from podkit.cri import api_pb2 as pb
from podkit.errors import InvalidArgumentError, quote
from podkit.sandbox import (
    Container,
    ContainerFilter,
    ContainerState,
    ContainerStats,
    DNSConfig,
    IDMapping,
    LinuxContainerResources,
    LinuxPodSandboxConfig,
    LinuxSandboxSecurityContext,
    NamespaceMode,
    NamespaceOption,
    PodSandboxMetadata,
    PortMapping,
    ProfileType,
    Protocol,
    Sandbox,
    SandboxConfig,
    SandboxFilter,
    SandboxState,
    SandboxStats,
    SecurityProfile,
    SELinuxOption,
    UserNamespace,
)

__all__ = [
    "ConversionError",
    "container_config_from_cri",
    "container_config_to_cri",
    "container_filter_from_cri",
    "container_filter_to_cri",
    "container_stats_to_cri",
    "container_status_to_cri",
    "container_to_cri",
    "cri_signal",
    "linux_resources_from_cri",
    "linux_resources_to_cri",
    "pod_sandbox_filter_from_cri",
    "pod_sandbox_filter_to_cri",
    "pod_sandbox_stats_to_cri",
    "pod_sandbox_status_to_cri",
    "pod_sandbox_to_cri",
    "sandbox_config_from_cri",
    "sandbox_config_to_cri",
    "signal_number",
]

E = TypeVar("E", bound=enum.IntEnum)
T = TypeVar("T")


class ConversionError(InvalidArgumentError):
    """A CRI message (or podkit model) that cannot be converted; ``path`` names the CRI field."""

    def __init__(self, path: str, problem: str) -> None:
        super().__init__(f"{path}: {problem}")
        self.path = path
        self.problem = problem

    def __reduce__(self) -> tuple[type[ConversionError], tuple[str, str]]:
        return (type(self), (self.path, self.problem))


# --- small helpers ------------------------------------------------------------------------


def _enum(cls: type[E], value: int, path: str) -> E:
    try:
        return cls(value)
    except ValueError:
        names = ", ".join(f"{m.name}={m.value}" for m in cls)
        raise ConversionError(path, f"unknown {cls.__name__} value {value} ({names})") from None


def _num(cls: type[E], value: object, path: str) -> int:
    """A model enum value as its CRI number, refusing what the CRI enum does not define."""
    if isinstance(value, cls):
        return int(value)
    if isinstance(value, int) and not isinstance(value, bool):
        return int(_enum(cls, value, path))
    raise ConversionError(path, f"{quote(value)} is not a {cls.__name__}")


def _set(msg: Any, field: str, value: object, path: str) -> None:
    """Assign one scalar (or extend one repeated scalar) field, naming it when the value is bad."""
    try:
        if isinstance(value, (list, tuple)):
            getattr(msg, field).extend(value)
        elif isinstance(value, dict):
            getattr(msg, field).update(value)
        else:
            setattr(msg, field, value)
    except (TypeError, ValueError) as exc:
        raise ConversionError(f"{path}.{field}", f"{quote(value)} does not fit: {exc}") from None
    except AttributeError:  # a single value for a repeated or map field
        raise ConversionError(
            f"{path}.{field}", f"{quote(value)}: expected a sequence or mapping"
        ) from None


def _fill(msg: Any, path: str, values: Mapping[str, object]) -> None:
    for field, value in values.items():
        if isinstance(value, Sequence) and not isinstance(value, (str, bytes)):
            value = list(value)
        _set(msg, field, value, path)


def _each(
    items: Iterable[T], path: str, convert: Callable[[T, str], Any]
) -> list[Any]:
    return [convert(item, f"{path}[{i}]") for i, item in enumerate(items)]


def _strings(values: Sequence[str] | None) -> tuple[str, ...]:
    return tuple(values or ())


# --- shared shapes ------------------------------------------------------------------------


def _id_mapping_from(msg: pb.IDMapping, path: str) -> IDMapping:
    return IDMapping(host_id=msg.host_id, container_id=msg.container_id, length=msg.length)


def _id_mapping_to(m: IDMapping, path: str) -> pb.IDMapping:
    out = pb.IDMapping()
    _fill(out, path, {"host_id": m.host_id, "container_id": m.container_id, "length": m.length})
    return out


def _userns_from(msg: pb.UserNamespace, path: str) -> UserNamespace:
    return UserNamespace(
        mode=_enum(NamespaceMode, msg.mode, f"{path}.mode"),
        uids=tuple(_each(msg.uids, f"{path}.uids", _id_mapping_from)),
        gids=tuple(_each(msg.gids, f"{path}.gids", _id_mapping_from)),
    )


def _userns_to(u: UserNamespace, path: str) -> pb.UserNamespace:
    out = pb.UserNamespace()
    _set(out, "mode", _num(NamespaceMode, u.mode, f"{path}.mode"), path)
    out.uids.extend(_each(u.uids, f"{path}.uids", _id_mapping_to))
    out.gids.extend(_each(u.gids, f"{path}.gids", _id_mapping_to))
    return out


def _namespaces_from(msg: pb.NamespaceOption, path: str) -> NamespaceOption:
    return NamespaceOption(
        network=_enum(NamespaceMode, msg.network, f"{path}.network"),
        pid=_enum(NamespaceMode, msg.pid, f"{path}.pid"),
        ipc=_enum(NamespaceMode, msg.ipc, f"{path}.ipc"),
        target_id=msg.target_id,
        userns_options=(
            _userns_from(msg.userns_options, f"{path}.userns_options")
            if msg.HasField("userns_options")
            else None
        ),
    )


def _namespaces_to(n: NamespaceOption, path: str) -> pb.NamespaceOption:
    out = pb.NamespaceOption()
    _fill(out, path, {"network": _num(NamespaceMode, n.network, f"{path}.network"),
                      "pid": _num(NamespaceMode, n.pid, f"{path}.pid"),
                      "ipc": _num(NamespaceMode, n.ipc, f"{path}.ipc"),
                      "target_id": n.target_id})
    if n.userns_options is not None:
        out.userns_options.CopyFrom(_userns_to(n.userns_options, f"{path}.userns_options"))
    return out


def _selinux_from(msg: pb.SELinuxOption, path: str) -> SELinuxOption:
    return SELinuxOption(user=msg.user, role=msg.role, type=msg.type, level=msg.level)


def _selinux_to(s: SELinuxOption, path: str) -> pb.SELinuxOption:
    out = pb.SELinuxOption()
    _fill(out, path, {"user": s.user, "role": s.role, "type": s.type, "level": s.level})
    return out


def _profile_from(msg: pb.SecurityProfile, path: str) -> SecurityProfile:
    return SecurityProfile(
        profile_type=_enum(ProfileType, msg.profile_type, f"{path}.profile_type"),
        localhost_ref=msg.localhost_ref,
    )


def _profile_to(p: SecurityProfile, path: str) -> pb.SecurityProfile:
    out = pb.SecurityProfile()
    _fill(out, path, {
        "profile_type": _num(ProfileType, p.profile_type, f"{path}.profile_type"),
        "localhost_ref": p.localhost_ref,
    })
    return out


def _legacy_profile(value: str, path: str, aliases: Sequence[str]) -> SecurityProfile | None:
    """A deprecated profile string (``runtime/default``, ``unconfined``, ``localhost/<ref>``)."""
    if not value:
        return None
    if value in aliases:
        return SecurityProfile(profile_type=ProfileType.RUNTIME_DEFAULT)
    if value == "unconfined":
        return SecurityProfile(profile_type=ProfileType.UNCONFINED)
    if value.startswith("localhost/") and len(value) > len("localhost/"):
        return SecurityProfile(
            profile_type=ProfileType.LOCALHOST, localhost_ref=value[len("localhost/"):]
        )
    raise ConversionError(
        path, f"{quote(value)} is not {' or '.join(aliases)}, unconfined or localhost/<profile>"
    )


_SECCOMP_DEFAULTS = ("runtime/default", "docker/default")
_APPARMOR_DEFAULTS = ("runtime/default",)


def _profiles_from(msg: Any, path: str, *, apparmor_field: str | None) -> dict[str, Any]:
    seccomp = (
        _profile_from(msg.seccomp, f"{path}.seccomp")
        if msg.HasField("seccomp")
        else _legacy_profile(
            msg.seccomp_profile_path, f"{path}.seccomp_profile_path", _SECCOMP_DEFAULTS
        )
    )
    apparmor: SecurityProfile | None
    if msg.HasField("apparmor"):
        apparmor = _profile_from(msg.apparmor, f"{path}.apparmor")
    elif apparmor_field is not None:
        apparmor = _legacy_profile(
            getattr(msg, apparmor_field), f"{path}.{apparmor_field}", _APPARMOR_DEFAULTS
        )
    else:
        apparmor = None
    return {"seccomp": seccomp, "apparmor": apparmor}


def _run_as(msg: Any, field: str) -> int | None:
    return int(getattr(msg, field).value) if msg.HasField(field) else None


def _set_run_as(out: Any, field: str, value: int | None, path: str) -> None:
    if value is not None:
        _set(getattr(out, field), "value", value, f"{path}.{field}")
        getattr(out, field).SetInParent()


def linux_resources_from_cri(
    msg: pb.LinuxContainerResources, *, path: str = "linux"
) -> LinuxContainerResources:
    """CRI ``LinuxContainerResources`` to the podkit model (zero still means unset)."""
    return LinuxContainerResources(
        cpu_period=msg.cpu_period,
        cpu_quota=msg.cpu_quota,
        cpu_shares=msg.cpu_shares,
        memory_limit_in_bytes=msg.memory_limit_in_bytes,
        oom_score_adj=msg.oom_score_adj,
        cpuset_cpus=msg.cpuset_cpus,
        cpuset_mems=msg.cpuset_mems,
        hugepage_limits=tuple(
            HugepageLimit(page_size=h.page_size, limit=h.limit) for h in msg.hugepage_limits
        ),
        unified=dict(msg.unified),
        memory_swap_limit_in_bytes=msg.memory_swap_limit_in_bytes,
    )


def linux_resources_to_cri(
    res: LinuxContainerResources, *, path: str = "linux"
) -> pb.LinuxContainerResources:
    """The podkit resources model to CRI ``LinuxContainerResources``."""
    out = pb.LinuxContainerResources()
    _fill(out, path, {
        "cpu_period": res.cpu_period,
        "cpu_quota": res.cpu_quota,
        "cpu_shares": res.cpu_shares,
        "memory_limit_in_bytes": res.memory_limit_in_bytes,
        "oom_score_adj": res.oom_score_adj,
        "cpuset_cpus": res.cpuset_cpus,
        "cpuset_mems": res.cpuset_mems,
        "unified": dict(res.unified),
        "memory_swap_limit_in_bytes": res.memory_swap_limit_in_bytes,
    })
    for i, h in enumerate(res.hugepage_limits):
        _fill(out.hugepage_limits.add(), f"{path}.hugepage_limits[{i}]",
              {"page_size": h.page_size, "limit": h.limit})
    return out


def _optional_resources_from(msg: Any, field: str, path: str) -> LinuxContainerResources | None:
    if not msg.HasField(field):
        return None
    return linux_resources_from_cri(getattr(msg, field), path=f"{path}.{field}")


def _set_optional_resources(
    out: Any, field: str, res: LinuxContainerResources | None, path: str
) -> None:
    if res is not None:
        getattr(out, field).CopyFrom(linux_resources_to_cri(res, path=f"{path}.{field}"))


# --- sandbox ------------------------------------------------------------------------------


def _sandbox_security_from(
    msg: pb.LinuxSandboxSecurityContext, path: str
) -> LinuxSandboxSecurityContext:
    return LinuxSandboxSecurityContext(
        **_security_common_from(msg, path),
        **_profiles_from(msg, path, apparmor_field=None),
    )


def _security_common_from(
    msg: pb.LinuxSandboxSecurityContext | pb.LinuxContainerSecurityContext, path: str
) -> dict[str, Any]:
    """The fields pod and container security contexts share, as model keyword arguments."""
    return {
        "namespace_options": _namespaces_from(msg.namespace_options, f"{path}.namespace_options"),
        "selinux_options": (
            _selinux_from(msg.selinux_options, f"{path}.selinux_options")
            if msg.HasField("selinux_options")
            else None
        ),
        "run_as_user": _run_as(msg, "run_as_user"),
        "run_as_group": _run_as(msg, "run_as_group"),
        "readonly_rootfs": msg.readonly_rootfs,
        "supplemental_groups": tuple(msg.supplemental_groups),
        "supplemental_groups_policy": _enum(
            SupplementalGroupsPolicy, msg.supplemental_groups_policy,
            f"{path}.supplemental_groups_policy",
        ),
        "privileged": msg.privileged,
    }


def _sandbox_security_to(
    sc: LinuxSandboxSecurityContext, path: str
) -> pb.LinuxSandboxSecurityContext:
    out = pb.LinuxSandboxSecurityContext()
    out.namespace_options.CopyFrom(
        _namespaces_to(sc.namespace_options, f"{path}.namespace_options")
    )
    if sc.selinux_options is not None:
        out.selinux_options.CopyFrom(_selinux_to(sc.selinux_options, f"{path}.selinux_options"))
    _set_run_as(out, "run_as_user", sc.run_as_user, path)
    _set_run_as(out, "run_as_group", sc.run_as_group, path)
    _fill(out, path, {
        "readonly_rootfs": sc.readonly_rootfs,
        "supplemental_groups": sc.supplemental_groups,
        "supplemental_groups_policy": _num(
            SupplementalGroupsPolicy, sc.supplemental_groups_policy,
            f"{path}.supplemental_groups_policy",
        ),
        "privileged": sc.privileged,
    })
    if sc.seccomp is not None:
        out.seccomp.CopyFrom(_profile_to(sc.seccomp, f"{path}.seccomp"))
    if sc.apparmor is not None:
        out.apparmor.CopyFrom(_profile_to(sc.apparmor, f"{path}.apparmor"))
    return out


def _port_from(msg: pb.PortMapping, path: str) -> PortMapping:
    return PortMapping(
        container_port=msg.container_port,
        host_port=msg.host_port,
        protocol=_enum(Protocol, msg.protocol, f"{path}.protocol"),
        host_ip=msg.host_ip,
    )


def _port_to(p: PortMapping, path: str) -> pb.PortMapping:
    out = pb.PortMapping()
    _fill(out, path, {
        "protocol": _num(Protocol, p.protocol, f"{path}.protocol"),
        "container_port": p.container_port,
        "host_port": p.host_port,
        "host_ip": p.host_ip,
    })
    return out


def sandbox_config_from_cri(msg: pb.PodSandboxConfig, *, path: str = "config") -> SandboxConfig:
    """CRI ``PodSandboxConfig`` (of ``RunPodSandboxRequest.config``) to a ``SandboxConfig``."""
    if not msg.HasField("metadata"):
        raise ConversionError(f"{path}.metadata", "required")
    md = msg.metadata
    linux = msg.linux
    lpath = f"{path}.linux"
    return SandboxConfig(
        metadata=PodSandboxMetadata(
            name=md.name, uid=md.uid, namespace=md.namespace, attempt=md.attempt
        ),
        hostname=msg.hostname,
        log_directory=msg.log_directory,
        dns_config=(
            DNSConfig(
                servers=tuple(msg.dns_config.servers),
                searches=tuple(msg.dns_config.searches),
                options=tuple(msg.dns_config.options),
            )
            if msg.HasField("dns_config")
            else None
        ),
        port_mappings=tuple(_each(msg.port_mappings, f"{path}.port_mappings", _port_from)),
        labels=dict(msg.labels),
        annotations=dict(msg.annotations),
        linux=LinuxPodSandboxConfig(
            cgroup_parent=linux.cgroup_parent,
            security_context=_sandbox_security_from(
                linux.security_context, f"{lpath}.security_context"
            ),
            sysctls=dict(linux.sysctls),
            overhead=_optional_resources_from(linux, "overhead", lpath),
            resources=_optional_resources_from(linux, "resources", lpath),
        ),
    )


def sandbox_config_to_cri(config: SandboxConfig, *, path: str = "config") -> pb.PodSandboxConfig:
    """A ``SandboxConfig`` to CRI ``PodSandboxConfig``; ``linux`` is always sent."""
    out = pb.PodSandboxConfig()
    md = config.metadata
    _fill(out.metadata, f"{path}.metadata", {"name": md.name, "uid": md.uid,
                                             "namespace": md.namespace, "attempt": md.attempt})
    _fill(out, path, {"hostname": config.hostname, "log_directory": config.log_directory,
                      "labels": dict(config.labels), "annotations": dict(config.annotations)})
    if config.dns_config is not None:
        dns = config.dns_config
        _fill(out.dns_config, f"{path}.dns_config", {
            "servers": dns.servers, "searches": dns.searches, "options": dns.options})
        out.dns_config.SetInParent()
    out.port_mappings.extend(_each(config.port_mappings, f"{path}.port_mappings", _port_to))
    lpath = f"{path}.linux"
    linux = config.linux
    _fill(out.linux, lpath, {"cgroup_parent": linux.cgroup_parent,
                             "sysctls": dict(linux.sysctls)})
    out.linux.security_context.CopyFrom(
        _sandbox_security_to(linux.security_context, f"{lpath}.security_context")
    )
    _set_optional_resources(out.linux, "overhead", linux.overhead, lpath)
    _set_optional_resources(out.linux, "resources", linux.resources, lpath)
    return out


# --- container ----------------------------------------------------------------------------


def _env_from(msg: pb.KeyValue, path: str) -> KeyValue:
    try:
        value = msg.value.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConversionError(f"{path}.value", f"not UTF-8 ({exc.reason})") from None
    return KeyValue(key=msg.key, value=value)


def _env_to(kv: KeyValue, path: str) -> pb.KeyValue:
    out = pb.KeyValue()
    try:
        value = kv.value.encode("utf-8")
    except (AttributeError, UnicodeEncodeError) as exc:
        raise ConversionError(f"{path}.value",
                              f"{quote(kv.value)} is not UTF-8 text: {exc}") from None
    _fill(out, path, {"key": kv.key, "value": value})
    return out


def _mount_from(msg: pb.Mount, path: str) -> Mount:
    if msg.HasField("image"):
        raise ConversionError(f"{path}.image", "image volumes are not supported by podkit")
    if msg.image_sub_path:
        raise ConversionError(f"{path}.image_sub_path", "image volumes are not supported")
    return Mount(
        container_path=msg.container_path,
        host_path=msg.host_path,
        readonly=msg.readonly,
        selinux_relabel=msg.selinux_relabel,
        propagation=_enum(MountPropagation, msg.propagation, f"{path}.propagation"),
        uid_mappings=tuple(_each(msg.uidMappings, f"{path}.uidMappings", _id_mapping_from)),
        gid_mappings=tuple(_each(msg.gidMappings, f"{path}.gidMappings", _id_mapping_from)),
        recursive_read_only=msg.recursive_read_only,
    )


def _mount_to(m: Mount, path: str) -> pb.Mount:
    out = pb.Mount()
    _fill(out, path, {
        "container_path": m.container_path,
        "host_path": m.host_path,
        "readonly": m.readonly,
        "selinux_relabel": m.selinux_relabel,
        "propagation": _num(MountPropagation, m.propagation, f"{path}.propagation"),
        "recursive_read_only": m.recursive_read_only,
    })
    out.uidMappings.extend(_each(m.uid_mappings, f"{path}.uidMappings", _id_mapping_to))
    out.gidMappings.extend(_each(m.gid_mappings, f"{path}.gidMappings", _id_mapping_to))
    return out


def _device_from(msg: pb.Device, path: str) -> Device:
    return Device(
        container_path=msg.container_path, host_path=msg.host_path, permissions=msg.permissions
    )


def _device_to(d: Device, path: str) -> pb.Device:
    out = pb.Device()
    _fill(out, path, {"container_path": d.container_path, "host_path": d.host_path,
                      "permissions": d.permissions})
    return out


def _container_security_from(
    msg: pb.LinuxContainerSecurityContext, path: str
) -> LinuxContainerSecurityContext:
    caps = msg.capabilities
    return LinuxContainerSecurityContext(
        capabilities=(
            Capability(
                add_capabilities=tuple(caps.add_capabilities),
                drop_capabilities=tuple(caps.drop_capabilities),
                add_ambient_capabilities=tuple(caps.add_ambient_capabilities),
            )
            if msg.HasField("capabilities")
            else None
        ),
        **_security_common_from(msg, path),
        run_as_username=msg.run_as_username,
        no_new_privs=msg.no_new_privs,
        masked_paths=tuple(msg.masked_paths) or None,
        readonly_paths=tuple(msg.readonly_paths) or None,
        **_profiles_from(msg, path, apparmor_field="apparmor_profile"),
    )


def _container_security_to(
    sc: LinuxContainerSecurityContext, path: str
) -> pb.LinuxContainerSecurityContext:
    out = pb.LinuxContainerSecurityContext()
    if sc.capabilities is not None:
        caps = sc.capabilities
        _fill(out.capabilities, f"{path}.capabilities", {
            "add_capabilities": caps.add_capabilities,
            "drop_capabilities": caps.drop_capabilities,
            "add_ambient_capabilities": caps.add_ambient_capabilities,
        })
        out.capabilities.SetInParent()
    out.namespace_options.CopyFrom(
        _namespaces_to(sc.namespace_options, f"{path}.namespace_options")
    )
    if sc.selinux_options is not None:
        out.selinux_options.CopyFrom(_selinux_to(sc.selinux_options, f"{path}.selinux_options"))
    _set_run_as(out, "run_as_user", sc.run_as_user, path)
    _set_run_as(out, "run_as_group", sc.run_as_group, path)
    _fill(out, path, {
        "privileged": sc.privileged,
        "run_as_username": sc.run_as_username,
        "readonly_rootfs": sc.readonly_rootfs,
        "supplemental_groups": sc.supplemental_groups,
        "supplemental_groups_policy": _num(
            SupplementalGroupsPolicy, sc.supplemental_groups_policy,
            f"{path}.supplemental_groups_policy",
        ),
        "no_new_privs": sc.no_new_privs,
        "masked_paths": _strings(sc.masked_paths),
        "readonly_paths": _strings(sc.readonly_paths),
    })
    if sc.seccomp is not None:
        out.seccomp.CopyFrom(_profile_to(sc.seccomp, f"{path}.seccomp"))
    if sc.apparmor is not None:
        out.apparmor.CopyFrom(_profile_to(sc.apparmor, f"{path}.apparmor"))
    return out


def container_config_from_cri(
    msg: pb.ContainerConfig, *, path: str = "config"
) -> ContainerConfig:
    """CRI ``ContainerConfig`` (of ``CreateContainerRequest.config``) to a ``ContainerConfig``."""
    if not msg.HasField("metadata"):
        raise ConversionError(f"{path}.metadata", "required")
    if not msg.HasField("image"):
        raise ConversionError(f"{path}.image", "required")
    lpath = f"{path}.linux"
    return ContainerConfig(
        metadata=ContainerMetadata(name=msg.metadata.name, attempt=msg.metadata.attempt),
        image=msg.image.image,
        command=tuple(msg.command),
        args=tuple(msg.args),
        working_dir=msg.working_dir,
        envs=tuple(_each(msg.envs, f"{path}.envs", _env_from)),
        mounts=tuple(_each(msg.mounts, f"{path}.mounts", _mount_from)),
        devices=tuple(_each(msg.devices, f"{path}.devices", _device_from)),
        labels=dict(msg.labels),
        annotations=dict(msg.annotations),
        log_path=msg.log_path,
        stdin=msg.stdin,
        stdin_once=msg.stdin_once,
        tty=msg.tty,
        linux=LinuxContainerConfig(
            resources=_optional_resources_from(msg.linux, "resources", lpath),
            security_context=_container_security_from(
                msg.linux.security_context, f"{lpath}.security_context"
            ),
        ),
        cdi_devices=tuple(d.name for d in msg.CDI_devices),
        stop_signal=signal_number(msg.stop_signal, path=f"{path}.stop_signal") or 0,
    )


def _signal(value: object, path: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value not in pb.Signal.values():
        raise ConversionError(path, f"unknown Signal value {value} (0..{max(pb.Signal.values())})")
    return int(value)


def signal_number(stop_signal: int, *, path: str = "stop_signal") -> int | None:
    """The Linux signal number of a CRI ``Signal`` value; ``None`` for ``RUNTIME_DEFAULT``.

    The CRI enum numbers its own way (``SIGTERM`` is 23 there, 15 on Linux);
    ``ContainerConfig.stop_signal`` holds the Linux number, what a runtime sends.
    ``SIGRTMINPLUSn``/``SIGRTMAXMINUSn`` count from the C library's ``SIGRTMIN``/``SIGRTMAX``
    (34 and 64 with glibc). An unknown value is a ``ConversionError`` naming ``path``.
    """
    name = pb.Signal.Name(_signal(stop_signal, path))
    if name == "RUNTIME_DEFAULT":
        return None
    if name.startswith("SIGRTMINPLUS"):
        return int(signal.SIGRTMIN) + int(name.removeprefix("SIGRTMINPLUS"))
    if name.startswith("SIGRTMAXMINUS"):
        return int(signal.SIGRTMAX) - int(name.removeprefix("SIGRTMAXMINUS"))
    return int(getattr(signal, name))


def _cri_signals() -> dict[int, int]:
    """Linux signal number -> CRI ``Signal`` value; aliases (``SIGCLD``, ``SIGIOT``,
    ``SIGPOLL``) give way to the names Python uses (``SIGCHLD``, ``SIGABRT``, ``SIGIO``)."""
    out: dict[int, int] = {0: pb.RUNTIME_DEFAULT}
    for value in sorted(pb.Signal.values()):
        number = signal_number(value)
        if number is not None:
            out.setdefault(number, value)
    return out


_CRI_SIGNALS = _cri_signals()


def cri_signal(linux_number: int, *, path: str = "stop_signal") -> int:
    """The CRI ``Signal`` value of a Linux signal number (0 gives ``RUNTIME_DEFAULT``).

    The inverse of ``signal_number``. A number the CRI has no name for (32 and 33, which glibc
    keeps for itself, or anything out of range) is a ``ConversionError`` naming ``path``.
    """
    if isinstance(linux_number, bool) or not isinstance(linux_number, int):
        raise ConversionError(path, f"not a signal number: {quote(linux_number)}")
    try:
        return _CRI_SIGNALS[int(linux_number)]
    except KeyError:
        raise ConversionError(
            path, f"Linux signal {linux_number} has no CRI Signal name "
            f"(1..31, {int(signal.SIGRTMIN)}..{int(signal.SIGRTMAX)})"
        ) from None


def container_config_to_cri(
    config: ContainerConfig, *, path: str = "config"
) -> pb.ContainerConfig:
    """A ``ContainerConfig`` to CRI ``ContainerConfig``; ``linux`` is always sent."""
    out = pb.ContainerConfig()
    _fill(out.metadata, f"{path}.metadata",
          {"name": config.metadata.name, "attempt": config.metadata.attempt})
    _set(out.image, "image", config.image, f"{path}.image")
    out.image.SetInParent()
    _fill(out, path, {
        "command": config.command,
        "args": config.args,
        "working_dir": config.working_dir,
        "labels": dict(config.labels),
        "annotations": dict(config.annotations),
        "log_path": config.log_path,
        "stdin": config.stdin,
        "stdin_once": config.stdin_once,
        "tty": config.tty,
        "stop_signal": cri_signal(config.stop_signal, path=f"{path}.stop_signal"),
    })
    out.envs.extend(_each(config.envs, f"{path}.envs", _env_to))
    out.mounts.extend(_each(config.mounts, f"{path}.mounts", _mount_to))
    out.devices.extend(_each(config.devices, f"{path}.devices", _device_to))
    for i, name in enumerate(config.cdi_devices):
        _set(out.CDI_devices.add(), "name", name, f"{path}.CDI_devices[{i}]")
    lpath = f"{path}.linux"
    _set_optional_resources(out.linux, "resources", config.linux.resources, lpath)
    out.linux.security_context.CopyFrom(
        _container_security_to(config.linux.security_context, f"{lpath}.security_context")
    )
    return out


# --- statuses and stats (podkit -> CRI) -------------------------------------------------


def _sandbox_metadata_to(out: pb.PodSandboxMetadata, config: SandboxConfig, path: str) -> None:
    md = config.metadata
    _fill(out, path, {"name": md.name, "uid": md.uid, "namespace": md.namespace,
                      "attempt": md.attempt})
    out.SetInParent()


def _container_metadata_to(out: pb.ContainerMetadata, config: ContainerConfig, path: str) -> None:
    _fill(out, path, {"name": config.metadata.name, "attempt": config.metadata.attempt})
    out.SetInParent()


def pod_sandbox_to_cri(sb: Sandbox, *, runtime_handler: str = "") -> pb.PodSandbox:
    """A manager ``Sandbox`` record as a ``ListPodSandbox`` item."""
    out = pb.PodSandbox()
    _sandbox_metadata_to(out.metadata, sb.config, "sandbox.metadata")
    _fill(out, "sandbox", {
        "id": sb.id,
        "state": _num(SandboxState, sb.state, "sandbox.state"),
        "created_at": sb.created_at,
        "labels": dict(sb.config.labels),
        "annotations": dict(sb.config.annotations),
        "runtime_handler": runtime_handler,
    })
    return out


def pod_sandbox_status_to_cri(sb: Sandbox, *, runtime_handler: str = "") -> pb.PodSandboxStatus:
    """A manager ``Sandbox`` record as CRI ``PodSandboxStatus`` (IPs, namespace options)."""
    out = pb.PodSandboxStatus()
    _sandbox_metadata_to(out.metadata, sb.config, "status.metadata")
    _fill(out, "status", {
        "id": sb.id,
        "state": _num(SandboxState, sb.state, "status.state"),
        "created_at": sb.created_at,
        "labels": dict(sb.config.labels),
        "annotations": dict(sb.config.annotations),
        "runtime_handler": runtime_handler,
    })
    _set(out.network, "ip", sb.ips[0] if sb.ips else "", "status.network")
    out.network.SetInParent()
    for i, ip in enumerate(sb.ips[1:]):
        _set(out.network.additional_ips.add(), "ip", ip, f"status.network.additional_ips[{i}]")
    ns = sb.config.linux.security_context.namespace_options
    out.linux.namespaces.options.CopyFrom(
        _namespaces_to(ns, "status.linux.namespaces.options")
    )
    return out


def _image_spec_to(out: pb.ImageSpec, image: str, path: str) -> None:
    _set(out, "image", image, path)
    out.SetInParent()


def container_to_cri(c: Container, *, image_ref: str = "", image_id: str = "") -> pb.Container:
    """A manager ``Container`` record as a ``ListContainers`` item.

    ``image_ref``/``image_id`` come from the image store (the record keeps only
    ``config.image``); ``image_ref`` defaults to ``config.image``.
    """
    out = pb.Container()
    _container_metadata_to(out.metadata, c.config, "container.metadata")
    _image_spec_to(out.image, c.config.image, "container.image")
    _fill(out, "container", {
        "id": c.id,
        "pod_sandbox_id": c.sandbox_id,
        "image_ref": image_ref or c.config.image,
        "state": _num(ContainerState, c.state, "container.state"),
        "created_at": c.created_at,
        "labels": dict(c.config.labels),
        "annotations": dict(c.config.annotations),
        "image_id": image_id,
    })
    return out


def container_status_to_cri(
    c: Container, *, image_ref: str = "", image_id: str = ""
) -> pb.ContainerStatus:
    """A manager ``Container`` record as CRI ``ContainerStatus`` (times, exit, mounts, log)."""
    out = pb.ContainerStatus()
    _container_metadata_to(out.metadata, c.config, "status.metadata")
    _image_spec_to(out.image, c.config.image, "status.image")
    _fill(out, "status", {
        "id": c.id,
        "state": _num(ContainerState, c.state, "status.state"),
        "created_at": c.created_at,
        "started_at": c.started_at,
        "finished_at": c.finished_at,
        "exit_code": c.exit_code,
        "image_ref": image_ref or c.config.image,
        "reason": c.reason,
        "message": c.message,
        "labels": dict(c.config.labels),
        "annotations": dict(c.config.annotations),
        "log_path": c.log_path,
        "image_id": image_id,
        "stop_signal": cri_signal(c.config.stop_signal, path="status.stop_signal"),
    })
    out.mounts.extend(_each(c.config.mounts, "status.mounts", _mount_to))
    if c.config.linux.resources is not None:
        out.resources.linux.CopyFrom(
            linux_resources_to_cri(c.config.linux.resources, path="status.resources.linux")
        )
    return out


def _uint64(out: Any, field: str, value: int, path: str) -> None:
    _set(getattr(out, field), "value", value, f"{path}.{field}")
    getattr(out, field).SetInParent()


def _container_stats_to(
    stats: ContainerStats, c: Container | None, path: str
) -> pb.ContainerStats:
    out = pb.ContainerStats()
    attrs_ = out.attributes
    _set(attrs_, "id", stats.id, f"{path}.attributes")
    if c is not None:
        _container_metadata_to(attrs_.metadata, c.config, f"{path}.attributes.metadata")
        _fill(attrs_, f"{path}.attributes", {"labels": dict(c.config.labels),
                                             "annotations": dict(c.config.annotations)})
    _set(out.cpu, "timestamp", stats.timestamp, f"{path}.cpu")
    _uint64(out.cpu, "usage_core_nano_seconds", stats.cpu_usage_core_nano_seconds,
            f"{path}.cpu")
    _set(out.memory, "timestamp", stats.timestamp, f"{path}.memory")
    _uint64(out.memory, "working_set_bytes", stats.memory_working_set_bytes, f"{path}.memory")
    _uint64(out.memory, "usage_bytes", stats.memory_usage_bytes, f"{path}.memory")
    _uint64(out.memory, "rss_bytes", stats.memory_rss_bytes, f"{path}.memory")
    return out


def container_stats_to_cri(stats: ContainerStats, c: Container | None = None) -> pb.ContainerStats:
    """Container usage as CRI ``ContainerStats``; ``c`` (its record) fills the attributes."""
    return _container_stats_to(stats, c, "stats")


def pod_sandbox_stats_to_cri(
    stats: SandboxStats, sb: Sandbox | None = None,
    containers: Mapping[str, Container] | None = None,
) -> pb.PodSandboxStats:
    """Pod usage as CRI ``PodSandboxStats`` (CPU, memory, processes, each container's stats).

    ``sb`` fills the pod's attributes and ``containers`` (records by ID) the containers'.
    """
    out = pb.PodSandboxStats()
    _set(out.attributes, "id", stats.id, "stats.attributes")
    if sb is not None:
        _sandbox_metadata_to(out.attributes.metadata, sb.config, "stats.attributes.metadata")
        _fill(out.attributes, "stats.attributes", {"labels": dict(sb.config.labels),
                                                   "annotations": dict(sb.config.annotations)})
    linux = out.linux
    _set(linux.cpu, "timestamp", stats.timestamp, "stats.linux.cpu")
    _uint64(linux.cpu, "usage_core_nano_seconds", stats.cpu_usage_core_nano_seconds,
            "stats.linux.cpu")
    _set(linux.memory, "timestamp", stats.timestamp, "stats.linux.memory")
    _uint64(linux.memory, "working_set_bytes", stats.memory_working_set_bytes,
            "stats.linux.memory")
    _set(linux.process, "timestamp", stats.timestamp, "stats.linux.process")
    _uint64(linux.process, "process_count", stats.process_count, "stats.linux.process")
    known = containers or {}
    for i, cs in enumerate(stats.containers):
        linux.containers.append(
            _container_stats_to(cs, known.get(cs.id), f"stats.linux.containers[{i}]")
        )
    return out


# --- filters ------------------------------------------------------------------------------


def _filter_state_from(msg: Any, cls: type[E], path: str) -> E | None:
    """A CRI filter's ``state`` (a ``*StateValue`` wrapper) as ``cls``; None when unset."""
    if not msg.HasField("state"):
        return None
    return _enum(cls, msg.state.state, f"{path}.state.state")


def _filter_state_to(out: Any, cls: type[E], state: E | None, path: str) -> None:
    """Set a CRI filter's ``state`` wrapper from ``state`` (left unset when None)."""
    if state is None:
        return
    _set(out.state, "state", _num(cls, state, f"{path}.state.state"), f"{path}.state")
    out.state.SetInParent()


def pod_sandbox_filter_from_cri(
    msg: pb.PodSandboxFilter | None, *, path: str = "filter"
) -> SandboxFilter:
    """CRI ``PodSandboxFilter`` (possibly unset) to the manager's ``SandboxFilter``."""
    if msg is None:
        return SandboxFilter()
    return SandboxFilter(
        id=msg.id,
        state=_filter_state_from(msg, SandboxState, path),
        label_selector=dict(msg.label_selector),
    )


def pod_sandbox_filter_to_cri(f: SandboxFilter, *, path: str = "filter") -> pb.PodSandboxFilter:
    """A ``SandboxFilter`` to CRI ``PodSandboxFilter``."""
    out = pb.PodSandboxFilter()
    _fill(out, path, {"id": f.id, "label_selector": dict(f.label_selector)})
    _filter_state_to(out, SandboxState, f.state, path)
    return out


def container_filter_from_cri(
    msg: pb.ContainerFilter | None, *, path: str = "filter"
) -> ContainerFilter:
    """CRI ``ContainerFilter`` (possibly unset) to the manager's ``ContainerFilter``."""
    if msg is None:
        return ContainerFilter()
    return ContainerFilter(
        id=msg.id,
        state=_filter_state_from(msg, ContainerState, path),
        pod_sandbox_id=msg.pod_sandbox_id,
        label_selector=dict(msg.label_selector),
    )


def container_filter_to_cri(f: ContainerFilter, *, path: str = "filter") -> pb.ContainerFilter:
    """A ``ContainerFilter`` to CRI ``ContainerFilter``."""
    out = pb.ContainerFilter()
    _fill(out, path, {"id": f.id, "pod_sandbox_id": f.pod_sandbox_id,
                      "label_selector": dict(f.label_selector)})
    _filter_state_to(out, ContainerState, f.state, path)
    return out
