"""Security contexts: the container's fields over the pod's, mapped to the CRI as kubelet does."""

from __future__ import annotations

from typing import Any

import pytest

from podkit.container import SupplementalGroupsPolicy
from podkit.errors import InvalidArgumentError
from podkit.sandbox import NamespaceMode, ProfileType, SecurityProfile

from .helpers import ctr, plan_of, pod


def _sc(pod_sc: dict[str, Any] | None = None, **ctr_sc: Any) -> Any:
    spec: dict[str, Any] = {"containers": [ctr(securityContext=ctr_sc)]}
    if pod_sc is not None:
        spec["securityContext"] = pod_sc
    p = plan_of(pod(spec))
    return p, p.containers[0].config.linux.security_context


def test_container_fields_win_over_the_pods() -> None:
    p, sc = _sc({"runAsUser": 1000, "runAsGroup": 3000, "runAsNonRoot": False},
                runAsUser=2000, runAsNonRoot=True)
    assert (sc.run_as_user, sc.run_as_group) == (2000, 3000)
    assert p.containers[0].run_as_non_root is True
    box = p.sandbox.linux.security_context
    assert (box.run_as_user, box.run_as_group) == (1000, 3000)


def test_run_as_non_root_from_the_pod() -> None:
    p, _ = _sc({"runAsNonRoot": True})
    assert p.containers[0].run_as_non_root is True
    p, _ = _sc()
    assert p.containers[0].run_as_non_root is False


def test_fs_group_then_supplemental_groups() -> None:
    p, sc = _sc({"fsGroup": 2000, "supplementalGroups": [5, 6]})
    assert tuple(sc.supplemental_groups) == (2000, 5, 6)
    assert tuple(p.sandbox.linux.security_context.supplemental_groups) == (2000, 5, 6)


@pytest.mark.parametrize(("policy", "expected"), [
    (None, SupplementalGroupsPolicy.MERGE), ("Merge", SupplementalGroupsPolicy.MERGE),
    ("Strict", SupplementalGroupsPolicy.STRICT)])
def test_supplemental_groups_policy(policy: str | None,
                                    expected: SupplementalGroupsPolicy) -> None:
    p, sc = _sc({"supplementalGroupsPolicy": policy} if policy else {})
    assert sc.supplemental_groups_policy == expected
    assert p.sandbox.linux.security_context.supplemental_groups_policy == expected


def test_bad_supplemental_groups_policy() -> None:
    with pytest.raises(InvalidArgumentError,
                       match=r"supplementalGroupsPolicy: 'Loose' is not Merge or Strict"):
        _sc({"supplementalGroupsPolicy": "Loose"})


def test_privileged_caps_readonly_and_no_new_privs() -> None:
    p, sc = _sc(privileged=True, readOnlyRootFilesystem=True,
                capabilities={"add": ["NET_ADMIN"], "drop": ["ALL"]})
    assert sc.privileged and sc.readonly_rootfs and not sc.no_new_privs
    assert sc.capabilities is not None
    assert tuple(sc.capabilities.add_capabilities) == ("NET_ADMIN",)
    assert tuple(sc.capabilities.drop_capabilities) == ("ALL",)
    # The sandbox is privileged when any container is.
    assert p.sandbox.linux.security_context.privileged


@pytest.mark.parametrize(("allow", "no_new_privs"), [(None, False), (True, False), (False, True)])
def test_allow_privilege_escalation(allow: bool | None, no_new_privs: bool) -> None:
    fields: dict[str, Any] = {} if allow is None else {"allowPrivilegeEscalation": allow}
    _, sc = _sc(**fields)
    assert sc.no_new_privs is no_new_privs


@pytest.mark.parametrize(("pod_profile", "ctr_profile", "expected"), [
    (None, None, None),
    ({"type": "RuntimeDefault"}, None, SecurityProfile(profile_type=ProfileType.RUNTIME_DEFAULT)),
    ({"type": "RuntimeDefault"}, {"type": "Unconfined"},
     SecurityProfile(profile_type=ProfileType.UNCONFINED)),
    (None, {"type": "Localhost", "localhostProfile": "profiles/audit.json"},
     SecurityProfile(profile_type=ProfileType.LOCALHOST,
                     localhost_ref="/var/lib/kubelet/seccomp/profiles/audit.json")),
])
def test_seccomp_profiles(pod_profile: dict[str, str] | None, ctr_profile: dict[str, str] | None,
                          expected: SecurityProfile | None) -> None:
    pod_sc = {"seccompProfile": pod_profile} if pod_profile else None
    fields = {"seccompProfile": ctr_profile} if ctr_profile else {}
    p, sc = _sc(pod_sc, **fields)
    assert sc.seccomp == expected
    if pod_profile:
        assert p.sandbox.linux.security_context.seccomp is not None


def test_seccomp_root_is_configurable() -> None:
    m = pod({"containers": [ctr(securityContext={"seccompProfile": {
        "type": "Localhost", "localhostProfile": "a.json"}})]})
    p = plan_of(m, seccomp_root="/etc/podkit/seccomp/")
    assert p.containers[0].config.linux.security_context.seccomp == SecurityProfile(
        profile_type=ProfileType.LOCALHOST, localhost_ref="/etc/podkit/seccomp/a.json")


def _apparmor(annotation: str | None, pod_profile: Any = None, ctr_profile: Any = None,
              ) -> SecurityProfile | None:
    spec: dict[str, Any] = {"containers": [ctr(securityContext=(
        {"appArmorProfile": ctr_profile} if ctr_profile else {}))]}
    if pod_profile:
        spec["securityContext"] = {"appArmorProfile": pod_profile}
    meta = {"annotations": {"container.apparmor.security.beta.kubernetes.io/c": annotation}
            } if annotation else {}
    profile: SecurityProfile | None = plan_of(pod(spec, **meta)).containers[0].config.linux \
        .security_context.apparmor
    return profile


def test_apparmor_order_container_then_annotation_then_pod() -> None:
    local = SecurityProfile(profile_type=ProfileType.LOCALHOST, localhost_ref="k8s-deny")
    default = SecurityProfile(profile_type=ProfileType.RUNTIME_DEFAULT)
    unconfined = SecurityProfile(profile_type=ProfileType.UNCONFINED)
    assert _apparmor(None) is None
    assert _apparmor("localhost/k8s-deny") == local
    assert _apparmor("runtime/default") == default
    assert _apparmor("unconfined", pod_profile={"type": "RuntimeDefault"}) == unconfined
    assert _apparmor(None, pod_profile={"type": "Unconfined"}) == unconfined
    assert _apparmor("unconfined", ctr_profile={"type": "Localhost",
                                                "localhostProfile": "k8s-deny"}) == local


def test_apparmor_annotation_of_another_container_does_not_apply() -> None:
    m = pod(annotations={"container.apparmor.security.beta.kubernetes.io/other": "unconfined"})
    assert plan_of(m).containers[0].config.linux.security_context.apparmor is None


@pytest.mark.parametrize(("meta", "fields", "message"), [
    ({"annotations": {"container.apparmor.security.beta.kubernetes.io/c": "bogus"}}, {},
     r"annotations\[container.apparmor.security.beta.kubernetes.io/c\]: 'bogus' is not"),
    ({}, {"seccompProfile": {"type": "Localhost"}},
     r"spec.containers\[0\].securityContext.seccompProfile.localhostProfile: required"),
    ({}, {"seccompProfile": {"type": "Strict"}},
     r"seccompProfile.type: 'Strict' is not one of RuntimeDefault, Unconfined, Localhost"),
])
def test_bad_profiles_name_the_field(meta: dict[str, Any], fields: dict[str, Any],
                                     message: str) -> None:
    with pytest.raises(InvalidArgumentError, match=message):
        plan_of(pod({"containers": [ctr(securityContext=fields)]}, **meta))


def test_proc_mount_unmasked_clears_masked_and_readonly_paths() -> None:
    _, sc = _sc(procMount="Unmasked")
    assert (sc.masked_paths, sc.readonly_paths) == ((), ())
    _, sc = _sc(procMount="Default")
    assert (sc.masked_paths, sc.readonly_paths) == (None, None)


@pytest.mark.parametrize(("spec", "net", "pid", "ipc"), [
    ({}, NamespaceMode.POD, NamespaceMode.CONTAINER, NamespaceMode.POD),
    ({"shareProcessNamespace": True}, NamespaceMode.POD, NamespaceMode.POD, NamespaceMode.POD),
    ({"hostNetwork": True, "hostPID": True, "hostIPC": True},
     NamespaceMode.NODE, NamespaceMode.NODE, NamespaceMode.NODE),
])
def test_namespace_options(spec: dict[str, Any], net: NamespaceMode, pid: NamespaceMode,
                           ipc: NamespaceMode) -> None:
    p = plan_of(pod(spec))
    for ns in (p.sandbox.linux.security_context.namespace_options,
               p.containers[0].config.linux.security_context.namespace_options):
        assert (ns.network, ns.pid, ns.ipc) == (net, pid, ipc)


def test_selinux_options_container_over_pod() -> None:
    _, sc = _sc({"seLinuxOptions": {"level": "s0:c1"}}, seLinuxOptions={"type": "spc_t"})
    assert sc.selinux_options is not None and sc.selinux_options.type == "spc_t"
    _, sc = _sc({"seLinuxOptions": {"level": "s0:c1"}})
    assert sc.selinux_options is not None and sc.selinux_options.level == "s0:c1"
