"""CRI-shaped configs for the security-profile tests (seccomp, AppArmor)."""

from __future__ import annotations

from typing import Any

from podkit.container import PodContext
from podkit.pods.config import (
    ContainerConfig,
    ContainerMetadata,
    LinuxContainerConfig,
    LinuxContainerSecurityContext,
    LinuxPodSandboxConfig,
    LinuxSandboxSecurityContext,
    PodSandboxMetadata,
    ProfileType,
    SandboxConfig,
    SecurityProfile,
)
from podkit.sandbox import SandboxFiles

FILES = SandboxFiles.under("/run/pk/sb1")
RUNTIME_DEFAULT = SecurityProfile(profile_type=ProfileType.RUNTIME_DEFAULT)
UNCONFINED = SecurityProfile(profile_type=ProfileType.UNCONFINED)


def localhost(ref: str) -> SecurityProfile:
    return SecurityProfile(profile_type=ProfileType.LOCALHOST, localhost_ref=ref)


def pod_config(**security_context: Any) -> SandboxConfig:
    return SandboxConfig(
        metadata=PodSandboxMetadata(name="web", uid="u1", namespace="ns"),
        linux=LinuxPodSandboxConfig(
            security_context=LinuxSandboxSecurityContext(**security_context)),
    )


def pod_context(config: SandboxConfig) -> PodContext:
    """The pod as a container builder sees it (pause namespaces of pid 42)."""
    return PodContext(
        id="sb1", config=config, files=FILES,
        namespace_paths={"network": "/proc/42/ns/net", "ipc": "/proc/42/ns/ipc",
                         "uts": "/proc/42/ns/uts", "pid": "/proc/42/ns/pid"},
    )


def container_config(**security_context: Any) -> ContainerConfig:
    return ContainerConfig(
        metadata=ContainerMetadata(name="app"), image="/img", command=["sleep", "1"],
        linux=LinuxContainerConfig(
            security_context=LinuxContainerSecurityContext(**security_context)),
    )
