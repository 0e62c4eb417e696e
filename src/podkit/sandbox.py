"""Pod sandboxes: the CRI-shaped ``SandboxConfig``, ``build_sandbox_spec`` (pure) and
``SandboxManager``, which runs pods end to end.

The public face of the pods layer for pods; the code lives in ``podkit.pods`` (``config``,
``sandbox_spec``, ``security``, ``records``, ``network``, ``images``, ``manager`` and the modules
it is built from, ``steps`` among them; ``builtin_pause``). Every name here is a contract.
"""

from __future__ import annotations

from podkit.pods.builtin_pause import BUILTIN_PAUSE_IMAGE, builtin_pause
from podkit.pods.config import (
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
    SandboxConfig,
    SecurityProfile,
    SELinuxOption,
    UserNamespace,
)
from podkit.pods.images import pause_config
from podkit.pods.manager import SandboxManager
from podkit.pods.network import default_network_config, default_networks
from podkit.pods.pause import PauseExitedError
from podkit.pods.records import (
    INFRALESS_STEPS,
    SANDBOX_STEPS,
    USERNS_STEPS,
    Container,
    ContainerFilter,
    ContainerState,
    ContainerStats,
    PauseConfig,
    RecoveryReport,
    Sandbox,
    SandboxFilter,
    SandboxState,
    SandboxStats,
)
from podkit.pods.sandbox_spec import (
    SandboxConfigError,
    SandboxFiles,
    apparmor_opt,
    build_sandbox_spec,
    seccomp_opt,
    selinux_label,
    validate_sandbox_config,
)

__all__ = [
    "BUILTIN_PAUSE_IMAGE",
    "INFRALESS_STEPS",
    "SANDBOX_STEPS",
    "USERNS_STEPS",
    "Container",
    "ContainerFilter",
    "ContainerState",
    "ContainerStats",
    "DNSConfig",
    "IDMapping",
    "LinuxContainerResources",
    "LinuxPodSandboxConfig",
    "LinuxSandboxSecurityContext",
    "NamespaceMode",
    "NamespaceOption",
    "PauseConfig",
    "PauseExitedError",
    "PodSandboxMetadata",
    "PortMapping",
    "ProfileType",
    "Protocol",
    "RecoveryReport",
    "SELinuxOption",
    "Sandbox",
    "SandboxConfig",
    "SandboxConfigError",
    "SandboxFiles",
    "SandboxFilter",
    "SandboxManager",
    "SandboxState",
    "SandboxStats",
    "SecurityProfile",
    "UserNamespace",
    "apparmor_opt",
    "build_sandbox_spec",
    "builtin_pause",
    "default_network_config",
    "default_networks",
    "pause_config",
    "seccomp_opt",
    "selinux_label",
    "validate_sandbox_config",
]
