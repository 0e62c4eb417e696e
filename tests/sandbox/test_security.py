"""pods.security: a security context resolved into plain values; given them, the builders
ask the host nothing (no AppArmor lookups, no profile files, no capability reads)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from podkit import apparmor, oci
from podkit.container import ContainerConfigError, build_container_spec
from podkit.pods.container_spec import resolve_security
from podkit.pods.security import ContainerSecurity, Seccomp, resolve_seccomp, selinux_label
from podkit.sandbox import SandboxConfigError, build_sandbox_spec
from podkit.sandbox import selinux_label as public_selinux_label

from ._security import (
    FILES,
    RUNTIME_DEFAULT,
    UNCONFINED,
    container_config,
    localhost,
    pod_config,
    pod_context,
)


class NoHost(apparmor.AppArmorHost):
    """A host every question to fails: a build that asks it is not pure."""

    def enabled(self) -> bool:
        raise AssertionError("the builder asked the AppArmor host")


def test_seccomp_choices() -> None:
    assert resolve_seccomp(None, privileged=False, error=SandboxConfigError) == Seccomp()
    assert resolve_seccomp(RUNTIME_DEFAULT, privileged=True, error=SandboxConfigError) == \
        Seccomp()
    assert resolve_seccomp(UNCONFINED, privileged=False, error=SandboxConfigError) == Seccomp()
    assert resolve_seccomp(RUNTIME_DEFAULT, privileged=False,
                           error=SandboxConfigError) == Seccomp(default=True)
    with pytest.raises(ContainerConfigError, match="must be an absolute path"):
        resolve_seccomp(localhost("rel.json"), privileged=False, error=ContainerConfigError)


def test_localhost_seccomp_is_read_once_at_resolution(tmp_path: Path) -> None:
    path = tmp_path / "profile.json"
    path.write_text(json.dumps({"defaultAction": "SCMP_ACT_ALLOW"}))
    choice = resolve_seccomp(localhost(str(path)), privileged=False, error=SandboxConfigError)
    path.unlink()  # building from the choice reads nothing
    assert choice.profile is not None and choice.profile.default_action == "SCMP_ACT_ALLOW"
    spec = build_sandbox_spec(pod_config(seccomp=localhost(str(path))), id="sb1", files=FILES,
                              netns_path="/run/netns/x", seccomp=choice)
    assert spec.linux is not None and spec.linux.seccomp is not None
    assert spec.linux.seccomp.default_action == "SCMP_ACT_ALLOW"


def test_container_build_with_resolved_security_asks_the_host_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(apparmor, "HOST", NoHost())

    def no_caps() -> list[str]:
        raise AssertionError("the builder read this process's capabilities")

    monkeypatch.setattr(oci, "current_capabilities", no_caps)
    sec = ContainerSecurity(apparmor_profile="k8s-nginx", seccomp=Seccomp(default=True),
                            capabilities=("CAP_CHOWN", "CAP_KILL"))
    config = container_config(privileged=False)
    spec = build_container_spec(config, pod_context(pod_config()), id="c1",
                                rootfs=str(tmp_path), security=sec)
    assert spec.process is not None and spec.process.apparmor_profile == "k8s-nginx"
    assert spec.linux is not None and spec.linux.seccomp is not None


def test_resolve_security_gives_the_host_capabilities(tmp_path: Path) -> None:
    disabled = apparmor.AppArmorHost(enabled_file=str(tmp_path / "no-such-file"))
    sec = resolve_security(container_config(apparmor=UNCONFINED), apparmor_host=disabled,
                           host_capabilities=["CAP_KILL"])
    assert sec == ContainerSecurity(capabilities=("CAP_KILL",))
    with pytest.raises(ContainerConfigError, match="AppArmor is not enabled"):
        resolve_security(container_config(apparmor=RUNTIME_DEFAULT), apparmor_host=disabled)


def test_selinux_label_is_still_public_from_sandbox() -> None:
    assert public_selinux_label is selinux_label
    assert selinux_label(None) == ""
