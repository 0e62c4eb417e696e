"""Pod and container security contexts as the kubelet maps them to the CRI (the container's
fields win over the pod's; ``determineEffectiveSecurityContext`` and friends)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from podkit.container import (
    Capability,
    LinuxContainerSecurityContext,
    SupplementalGroupsPolicy,
)
from podkit.errors import InvalidArgumentError, quote
from podkit.sandbox import (
    LinuxSandboxSecurityContext,
    NamespaceMode,
    NamespaceOption,
    ProfileType,
    SecurityProfile,
    SELinuxOption,
)

__all__ = [
    "APPARMOR_ANNOTATION_PREFIX",
    "SECCOMP_ROOT",
    "apparmor_profile",
    "container_security",
    "namespace_options",
    "run_as_non_root",
    "sandbox_security",
    "seccomp_profile",
]

APPARMOR_ANNOTATION_PREFIX = "container.apparmor.security.beta.kubernetes.io/"
SECCOMP_ROOT = "/var/lib/kubelet/seccomp"  # kubelet's default --seccomp-profile-root
_PROFILE_TYPES = {"RuntimeDefault": ProfileType.RUNTIME_DEFAULT,
                  "Unconfined": ProfileType.UNCONFINED, "Localhost": ProfileType.LOCALHOST}
_ANNOTATION_PROFILES = {"runtime/default": "RuntimeDefault", "unconfined": "Unconfined"}


def _sc(obj: Mapping[str, Any] | None) -> dict[str, Any]:
    got = (obj or {}).get("securityContext")
    return got if isinstance(got, dict) else {}


def namespace_options(spec: Mapping[str, Any]) -> NamespaceOption:
    """hostNetwork/hostIPC/hostPID -> NODE; a pod's own PID namespace only when
    shareProcessNamespace, else each container has its own (kubelet's NamespacesForPod)."""
    node, pod = NamespaceMode.NODE, NamespaceMode.POD
    if spec.get("hostPID"):
        pid = node
    elif spec.get("shareProcessNamespace"):
        pid = pod
    else:
        pid = NamespaceMode.CONTAINER
    return NamespaceOption(network=node if spec.get("hostNetwork") else pod,
                           pid=pid, ipc=node if spec.get("hostIPC") else pod)


def _profile(field: Mapping[str, Any] | None, where: str, seccomp_root: str | None,
             ) -> SecurityProfile | None:
    if not field:
        return None
    kind = field.get("type")
    if kind not in _PROFILE_TYPES:
        raise InvalidArgumentError(f"{where}.type: {quote(kind)} is not one of "
                                   f"{', '.join(_PROFILE_TYPES)}")
    ref = str(field.get("localhostProfile") or "")
    if (kind == "Localhost") != bool(ref):
        raise InvalidArgumentError(
            f"{where}.localhostProfile: required exactly when type is Localhost")
    if ref and seccomp_root is not None:
        ref = f"{seccomp_root.rstrip('/')}/{ref}"
    return SecurityProfile(profile_type=_PROFILE_TYPES[kind], localhost_ref=ref)


def seccomp_profile(pod_spec: Mapping[str, Any], container: Mapping[str, Any] | None,
                    where: str, seccomp_root: str = SECCOMP_ROOT) -> SecurityProfile | None:
    """Container's seccompProfile, else the pod's; unset is the runtime's choice (Unconfined in
    kubelet without SeccompDefault). Localhost profiles resolve under ``seccomp_root``."""
    ctr = _sc(container).get("seccompProfile")
    if ctr:
        return _profile(ctr, f"{where}.securityContext.seccompProfile", seccomp_root)
    return _profile(_sc(pod_spec).get("seccompProfile"),
                    "spec.securityContext.seccompProfile", seccomp_root)


def apparmor_profile(pod: Mapping[str, Any], container: Mapping[str, Any], where: str,
                     ) -> SecurityProfile | None:
    """Container's appArmorProfile, else the legacy pod annotation for the container, else the
    pod's profile (kubelet's apparmor.GetProfile order)."""
    ctr = _sc(container).get("appArmorProfile")
    if ctr:
        return _profile(ctr, f"{where}.securityContext.appArmorProfile", None)
    annotations = (pod.get("metadata") or {}).get("annotations") or {}
    key = APPARMOR_ANNOTATION_PREFIX + str(container.get("name", ""))
    if key in annotations:
        raw = str(annotations[key])
        if raw.startswith("localhost/"):
            return SecurityProfile(profile_type=ProfileType.LOCALHOST,
                                   localhost_ref=raw.removeprefix("localhost/"))
        if raw not in _ANNOTATION_PROFILES:
            raise InvalidArgumentError(
                f"metadata.annotations[{key}]: {quote(raw)} is not runtime/default, "
                "unconfined or localhost/<profile>")
        return _profile({"type": _ANNOTATION_PROFILES[raw]}, key, None)
    return _profile(_sc(pod.get("spec")).get("appArmorProfile"),
                    "spec.securityContext.appArmorProfile", None)


def _selinux(sc: Mapping[str, Any]) -> SELinuxOption | None:
    opts = sc.get("seLinuxOptions")
    if not opts:
        return None
    return SELinuxOption(user=str(opts.get("user", "")), role=str(opts.get("role", "")),
                         type=str(opts.get("type", "")), level=str(opts.get("level", "")))


def _groups(pod_sc: Mapping[str, Any]) -> tuple[int, ...]:
    """fsGroup first, then supplementalGroups, as the kubelet appends them."""
    fs = pod_sc.get("fsGroup")
    return ((int(fs),) if fs is not None else ()) + tuple(
        int(g) for g in pod_sc.get("supplementalGroups") or ())


def _groups_policy(pod_sc: Mapping[str, Any]) -> SupplementalGroupsPolicy:
    raw = pod_sc.get("supplementalGroupsPolicy") or "Merge"
    if raw not in ("Merge", "Strict"):
        raise InvalidArgumentError(f"spec.securityContext.supplementalGroupsPolicy: {quote(raw)} "
                                   "is not Merge or Strict")
    return SupplementalGroupsPolicy.STRICT if raw == "Strict" else SupplementalGroupsPolicy.MERGE


def _privileged(containers: Iterable[Mapping[str, Any]]) -> bool:
    return any(_sc(c).get("privileged") for c in containers)


def sandbox_security(pod: Mapping[str, Any], all_containers: Iterable[Mapping[str, Any]],
                     seccomp_root: str = SECCOMP_ROOT) -> LinuxSandboxSecurityContext:
    """The sandbox's context: pod user/group/groups, host namespaces, privileged when any
    container is, the pod's seccomp profile."""
    spec = pod.get("spec") or {}
    psc = _sc(spec)
    return LinuxSandboxSecurityContext(
        namespace_options=namespace_options(spec),
        selinux_options=_selinux(psc),
        run_as_user=psc.get("runAsUser"),
        run_as_group=psc.get("runAsGroup"),
        supplemental_groups=_groups(psc),
        supplemental_groups_policy=_groups_policy(psc),
        privileged=_privileged(all_containers),
        seccomp=_profile(psc.get("seccompProfile"), "spec.securityContext.seccompProfile",
                         seccomp_root),
    )


def _pick(ctr_sc: Mapping[str, Any], pod_sc: Mapping[str, Any], name: str) -> Any:
    return ctr_sc[name] if ctr_sc.get(name) is not None else pod_sc.get(name)


def run_as_non_root(pod_spec: Mapping[str, Any], container: Mapping[str, Any]) -> bool:
    """Whether the kubelet must refuse a container whose user is root (uid 0)."""
    return bool(_pick(_sc(container), _sc(pod_spec), "runAsNonRoot"))


def container_security(pod: Mapping[str, Any], container: Mapping[str, Any], where: str,
                       seccomp_root: str = SECCOMP_ROOT) -> LinuxContainerSecurityContext:
    """One container's CRI context: its own fields over the pod's."""
    spec = pod.get("spec") or {}
    csc, psc = _sc(container), _sc(spec)
    caps = csc.get("capabilities") or {}
    capability = (Capability(add_capabilities=tuple(str(c) for c in caps.get("add") or ()),
                             drop_capabilities=tuple(str(c) for c in caps.get("drop") or ()))
                  if caps else None)
    unmasked = csc.get("procMount") == "Unmasked"
    escalation = csc.get("allowPrivilegeEscalation")
    return LinuxContainerSecurityContext(
        capabilities=capability,
        privileged=bool(csc.get("privileged", False)),
        namespace_options=namespace_options(spec),
        selinux_options=_selinux(csc) or _selinux(psc),
        run_as_user=_pick(csc, psc, "runAsUser"),
        run_as_group=_pick(csc, psc, "runAsGroup"),
        readonly_rootfs=bool(csc.get("readOnlyRootFilesystem", False)),
        supplemental_groups=_groups(psc),
        supplemental_groups_policy=_groups_policy(psc),
        no_new_privs=escalation is False,
        masked_paths=() if unmasked else None,
        readonly_paths=() if unmasked else None,
        seccomp=seccomp_profile(spec, container, where, seccomp_root),
        apparmor=apparmor_profile(pod, container, where),
    )
