"""Integration: AppArmor through the SandboxManager (runc + conmon) on this real host.

This machine kind (Debian 12 test hosts) has no AppArmor in the kernel, so podkit must behave as
containerd does there: a container that asks for nothing runs without a profile, and one that
explicitly asks for RuntimeDefault or a Localhost profile is refused by ``create_container``
before anything exists (no record, no bundle, no runtime container).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from podkit import apparmor
from podkit.container import ContainerConfigError
from podkit.pods.config import (
    ContainerConfig,
    ContainerMetadata,
    LinuxContainerConfig,
    LinuxContainerSecurityContext,
    LinuxPodSandboxConfig,
    LinuxSandboxSecurityContext,
    NamespaceMode,
    NamespaceOption,
    PodSandboxMetadata,
    ProfileType,
    SandboxConfig,
    SecurityProfile,
)
from podkit.sandbox import SandboxManager
from support import require, require_binary, require_isolated, require_root

from ._pods import managed, snapshot

pytestmark = pytest.mark.integration

FIELD = "linux.security_context.apparmor"


@pytest.fixture
def manager(rootfs: Path, tmp_path: Path) -> Iterator[SandboxManager]:
    require_root()
    require_isolated()
    for binary in ("runc", "conmon"):
        require_binary(binary)
    require(not apparmor.enabled(), "needs a host without AppArmor (the Debian test hosts)")
    yield from managed(tmp_path / "m", rootfs, networks=False)


def host_pod(apparmor_profile: SecurityProfile | None = None) -> SandboxConfig:
    return SandboxConfig(
        metadata=PodSandboxMetadata(name=f"pk-apparmor-{uuid.uuid4().hex[:8]}",
                                    uid=uuid.uuid4().hex, namespace="pk-test"),
        linux=LinuxPodSandboxConfig(security_context=LinuxSandboxSecurityContext(
            apparmor=apparmor_profile,
            namespace_options=NamespaceOption(network=NamespaceMode.NODE),
        )),
    )


def app(rootfs: Path, profile: SecurityProfile | None, command: list[str]) -> ContainerConfig:
    return ContainerConfig(
        metadata=ContainerMetadata(name="app"), image=str(rootfs), command=command,
        linux=LinuxContainerConfig(security_context=LinuxContainerSecurityContext(
            apparmor=profile, namespace_options=NamespaceOption(pid=NamespaceMode.CONTAINER),
        )),
    )


def bundle_process(tmp_path: Path, cid: str) -> dict[str, object]:
    config = tmp_path / "m" / "root" / "containers" / cid / "bundle" / "config.json"
    process: dict[str, object] = json.loads(config.read_text())["process"]
    return process


def test_unset_profile_runs_without_apparmor(
    manager: SandboxManager, rootfs: Path, tmp_path: Path
) -> None:
    assert not apparmor.enabled() and not apparmor.HOST.enabled()
    # the pod's own apparmor field never reaches the pause, even an explicit one
    sb = manager.run_sandbox(host_pod(SecurityProfile(profile_type=ProfileType.RUNTIME_DEFAULT)))
    for profile in (None, SecurityProfile(profile_type=ProfileType.UNCONFINED)):
        cid = manager.create_container(sb.id, app(rootfs, profile, ["sleep", "600"]))
        assert "apparmorProfile" not in bundle_process(tmp_path, cid)
        manager.start_container(cid)
        script = "echo ok > /tmp/pk-apparmor && cat /tmp/pk-apparmor"
        res = manager.exec_sync(cid, ["sh", "-c", script], timeout=10)
        assert res.exit_code == 0 and res.stdout == b"ok\n", res
        manager.stop_container(cid, timeout=0)
        manager.remove_container(cid)
    manager.remove_sandbox(sb.id)


@pytest.mark.parametrize("profile", [
    SecurityProfile(profile_type=ProfileType.RUNTIME_DEFAULT),
    SecurityProfile(profile_type=ProfileType.LOCALHOST, localhost_ref="k8s-apparmor-example"),
    SecurityProfile(profile_type=ProfileType.LOCALHOST,
                    localhost_ref="localhost/k8s-apparmor-example"),
], ids=["runtime-default", "localhost", "localhost-prefixed"])
def test_explicit_profiles_are_refused_before_anything_is_created(
    manager: SandboxManager, rootfs: Path, tmp_path: Path, profile: SecurityProfile
) -> None:
    sb = manager.run_sandbox(host_pod())
    before = snapshot()
    runtime_before = {c.id for c in manager.runtime.list()}
    with pytest.raises(ContainerConfigError,
                       match=rf"^{FIELD}: AppArmor is not enabled on this host; profile_type "
                             f"{profile.profile_type.name} needs it"):
        manager.create_container(sb.id, app(rootfs, profile, ["true"]))
    assert manager.list_containers() == []
    assert {c.id for c in manager.runtime.list()} == runtime_before
    assert snapshot() == before
    assert not list((tmp_path / "m" / "root" / "containers").glob("*"))
    assert not list((tmp_path / "m" / "state" / "containers").glob("*.json"))
    # the name was not taken: the same container without the profile is created fine
    cid = manager.create_container(sb.id, app(rootfs, None, ["true"]))
    assert [c.id for c in manager.list_containers()] == [cid]
    manager.remove_sandbox(sb.id)
