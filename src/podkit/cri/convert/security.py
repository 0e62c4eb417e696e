"""Security contexts both ways: namespaces, user namespaces and ID maps, SELinux, seccomp and
AppArmor profiles, run-as users, for pods and containers."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from podkit.container import (
    Capability,
    LinuxContainerSecurityContext,
    SupplementalGroupsPolicy,
)
from podkit.cri import api_pb2 as pb
from podkit.cri.convert.fields import (
    ConversionError,
    each,
    enum_number,
    enum_value,
    fill_fields,
    set_field,
    strings,
)
from podkit.errors import quote
from podkit.sandbox import (
    IDMapping,
    LinuxSandboxSecurityContext,
    NamespaceMode,
    NamespaceOption,
    ProfileType,
    SecurityProfile,
    SELinuxOption,
    UserNamespace,
)

__all__ = [
    "container_security_from",
    "container_security_to",
    "id_mapping_from",
    "id_mapping_to",
    "namespaces_to",
    "sandbox_security_from",
    "sandbox_security_to",
]


def id_mapping_from(msg: pb.IDMapping, path: str) -> IDMapping:
    return IDMapping(host_id=msg.host_id, container_id=msg.container_id, length=msg.length)


def id_mapping_to(m: IDMapping, path: str) -> pb.IDMapping:
    out = pb.IDMapping()
    fill_fields(out, path,
                {"host_id": m.host_id, "container_id": m.container_id, "length": m.length})
    return out


def _userns_from(msg: pb.UserNamespace, path: str) -> UserNamespace:
    return UserNamespace(
        mode=enum_value(NamespaceMode, msg.mode, f"{path}.mode"),
        uids=tuple(each(msg.uids, f"{path}.uids", id_mapping_from)),
        gids=tuple(each(msg.gids, f"{path}.gids", id_mapping_from)),
    )


def _userns_to(u: UserNamespace, path: str) -> pb.UserNamespace:
    out = pb.UserNamespace()
    set_field(out, "mode", enum_number(NamespaceMode, u.mode, f"{path}.mode"), path)
    out.uids.extend(each(u.uids, f"{path}.uids", id_mapping_to))
    out.gids.extend(each(u.gids, f"{path}.gids", id_mapping_to))
    return out


def _namespaces_from(msg: pb.NamespaceOption, path: str) -> NamespaceOption:
    return NamespaceOption(
        network=enum_value(NamespaceMode, msg.network, f"{path}.network"),
        pid=enum_value(NamespaceMode, msg.pid, f"{path}.pid"),
        ipc=enum_value(NamespaceMode, msg.ipc, f"{path}.ipc"),
        target_id=msg.target_id,
        userns_options=(
            _userns_from(msg.userns_options, f"{path}.userns_options")
            if msg.HasField("userns_options")
            else None
        ),
    )


def namespaces_to(n: NamespaceOption, path: str) -> pb.NamespaceOption:
    out = pb.NamespaceOption()
    fill_fields(out, path, {"network": enum_number(NamespaceMode, n.network, f"{path}.network"),
                      "pid": enum_number(NamespaceMode, n.pid, f"{path}.pid"),
                      "ipc": enum_number(NamespaceMode, n.ipc, f"{path}.ipc"),
                      "target_id": n.target_id})
    if n.userns_options is not None:
        out.userns_options.CopyFrom(_userns_to(n.userns_options, f"{path}.userns_options"))
    return out


def _selinux_from(msg: pb.SELinuxOption, path: str) -> SELinuxOption:
    return SELinuxOption(user=msg.user, role=msg.role, type=msg.type, level=msg.level)


def _selinux_to(s: SELinuxOption, path: str) -> pb.SELinuxOption:
    out = pb.SELinuxOption()
    fill_fields(out, path, {"user": s.user, "role": s.role, "type": s.type, "level": s.level})
    return out


def _profile_from(msg: pb.SecurityProfile, path: str) -> SecurityProfile:
    return SecurityProfile(
        profile_type=enum_value(ProfileType, msg.profile_type, f"{path}.profile_type"),
        localhost_ref=msg.localhost_ref,
    )


def _profile_to(p: SecurityProfile, path: str) -> pb.SecurityProfile:
    out = pb.SecurityProfile()
    fill_fields(out, path, {
        "profile_type": enum_number(ProfileType, p.profile_type, f"{path}.profile_type"),
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
        set_field(getattr(out, field), "value", value, f"{path}.{field}")
        getattr(out, field).SetInParent()


def sandbox_security_from(
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
        "supplemental_groups_policy": enum_value(
            SupplementalGroupsPolicy, msg.supplemental_groups_policy,
            f"{path}.supplemental_groups_policy",
        ),
        "privileged": msg.privileged,
    }


def sandbox_security_to(
    sc: LinuxSandboxSecurityContext, path: str
) -> pb.LinuxSandboxSecurityContext:
    out = pb.LinuxSandboxSecurityContext()
    out.namespace_options.CopyFrom(
        namespaces_to(sc.namespace_options, f"{path}.namespace_options")
    )
    if sc.selinux_options is not None:
        out.selinux_options.CopyFrom(_selinux_to(sc.selinux_options, f"{path}.selinux_options"))
    _set_run_as(out, "run_as_user", sc.run_as_user, path)
    _set_run_as(out, "run_as_group", sc.run_as_group, path)
    fill_fields(out, path, {
        "readonly_rootfs": sc.readonly_rootfs,
        "supplemental_groups": sc.supplemental_groups,
        "supplemental_groups_policy": enum_number(
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


def container_security_from(
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


def container_security_to(
    sc: LinuxContainerSecurityContext, path: str
) -> pb.LinuxContainerSecurityContext:
    out = pb.LinuxContainerSecurityContext()
    if sc.capabilities is not None:
        caps = sc.capabilities
        fill_fields(out.capabilities, f"{path}.capabilities", {
            "add_capabilities": caps.add_capabilities,
            "drop_capabilities": caps.drop_capabilities,
            "add_ambient_capabilities": caps.add_ambient_capabilities,
        })
        out.capabilities.SetInParent()
    out.namespace_options.CopyFrom(
        namespaces_to(sc.namespace_options, f"{path}.namespace_options")
    )
    if sc.selinux_options is not None:
        out.selinux_options.CopyFrom(_selinux_to(sc.selinux_options, f"{path}.selinux_options"))
    _set_run_as(out, "run_as_user", sc.run_as_user, path)
    _set_run_as(out, "run_as_group", sc.run_as_group, path)
    fill_fields(out, path, {
        "privileged": sc.privileged,
        "run_as_username": sc.run_as_username,
        "readonly_rootfs": sc.readonly_rootfs,
        "supplemental_groups": sc.supplemental_groups,
        "supplemental_groups_policy": enum_number(
            SupplementalGroupsPolicy, sc.supplemental_groups_policy,
            f"{path}.supplemental_groups_policy",
        ),
        "no_new_privs": sc.no_new_privs,
        "masked_paths": strings(sc.masked_paths),
        "readonly_paths": strings(sc.readonly_paths),
    })
    if sc.seccomp is not None:
        out.seccomp.CopyFrom(_profile_to(sc.seccomp, f"{path}.seccomp"))
    if sc.apparmor is not None:
        out.apparmor.CopyFrom(_profile_to(sc.apparmor, f"{path}.apparmor"))
    return out
