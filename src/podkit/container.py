"""Containers in a pod: the CRI-shaped ``ContainerConfig`` and ``build_container_spec`` (pure).

The public face of the pods layer for containers; the code lives in ``podkit.pods``
(``config``, ``container_spec``). Every name here is a contract.
"""

from __future__ import annotations

from podkit.pods.config import (
    Capability,
    ContainerConfig,
    ContainerMetadata,
    Device,
    HugepageLimit,
    KeyValue,
    LinuxContainerConfig,
    LinuxContainerResources,
    LinuxContainerSecurityContext,
    Mount,
    MountPropagation,
    SupplementalGroupsPolicy,
)
from podkit.pods.container_spec import (
    ContainerConfigError,
    DeviceInjector,
    ImageDefaults,
    PodContext,
    build_container_spec,
    validate_container_config,
)

__all__ = [
    "Capability",
    "ContainerConfig",
    "ContainerConfigError",
    "ContainerMetadata",
    "Device",
    "DeviceInjector",
    "HugepageLimit",
    "ImageDefaults",
    "KeyValue",
    "LinuxContainerConfig",
    "LinuxContainerResources",
    "LinuxContainerSecurityContext",
    "Mount",
    "MountPropagation",
    "PodContext",
    "SupplementalGroupsPolicy",
    "build_container_spec",
    "validate_container_config",
]
