"""attrs model of a runtime's ``features.json`` (``runc features``, runtime-spec 1.1.0+)."""

from __future__ import annotations

from typing import Any

from podkit.oci._fields import extra, model, opt, req
from podkit.oci.codec import dumps, loads, structure, unstructure

__all__ = [
    "AppArmorFeatures",
    "CgroupFeatures",
    "Features",
    "IDMapFeatures",
    "IntelRdtFeatures",
    "LinuxFeatures",
    "MemoryPolicyFeatures",
    "MountExtensionsFeatures",
    "NetDevicesFeatures",
    "SELinuxFeatures",
    "SeccompFeatures",
]



@model
class CgroupFeatures:
    """Which cgroup managers and versions the runtime supports."""

    v1: bool | None = opt()
    v2: bool | None = opt()
    systemd: bool | None = opt()
    systemd_user: bool | None = opt()
    rdma: bool | None = opt()
    extra: dict[str, Any] = extra()


@model
class SeccompFeatures:
    """Seccomp support: actions, operators, architectures, flags."""

    enabled: bool | None = opt()
    actions: list[str] | None = opt()
    operators: list[str] | None = opt()
    archs: list[str] | None = opt()
    known_flags: list[str] | None = opt()
    supported_flags: list[str] | None = opt()
    extra: dict[str, Any] = extra()


@model
class AppArmorFeatures:
    """AppArmor support."""

    enabled: bool | None = opt()
    extra: dict[str, Any] = extra()


@model
class SELinuxFeatures:
    """SELinux support."""

    enabled: bool | None = opt()
    extra: dict[str, Any] = extra()


@model
class IntelRdtFeatures:
    """Intel RDT support (``schemata``/``monitoring`` since 1.3.0)."""

    enabled: bool | None = opt()
    schemata: bool | None = opt()
    monitoring: bool | None = opt()
    extra: dict[str, Any] = extra()


@model
class MemoryPolicyFeatures:
    """Supported ``set_mempolicy`` modes and flags (1.3.0)."""

    modes: list[str] | None = opt()
    flags: list[str] | None = opt()
    extra: dict[str, Any] = extra()


@model
class IDMapFeatures:
    """Idmapped mount support (1.2.0)."""

    enabled: bool | None = opt()
    extra: dict[str, Any] = extra()


@model
class MountExtensionsFeatures:
    """Mount extensions (1.2.0)."""

    idmap: IDMapFeatures | None = opt()
    extra: dict[str, Any] = extra()


@model
class NetDevicesFeatures:
    """``linux.netDevices`` support (1.3.0)."""

    enabled: bool | None = opt()
    extra: dict[str, Any] = extra()


@model
class LinuxFeatures:
    """Linux-specific features."""

    namespaces: list[str] | None = opt()
    capabilities: list[str] | None = opt()
    cgroup: CgroupFeatures | None = opt()
    seccomp: SeccompFeatures | None = opt()
    apparmor: AppArmorFeatures | None = opt()
    selinux: SELinuxFeatures | None = opt()
    intel_rdt: IntelRdtFeatures | None = opt()
    memory_policy: MemoryPolicyFeatures | None = opt()
    mount_extensions: MountExtensionsFeatures | None = opt()
    net_devices: NetDevicesFeatures | None = opt()
    extra: dict[str, Any] = extra()


@model
class Features:
    """What a runtime says it supports (``runc features``)."""

    oci_version_min: str = req()
    oci_version_max: str = req()
    hooks: list[str] | None = opt()
    mount_options: list[str] | None = opt()
    annotations: dict[str, str] | None = opt()
    potentially_unsafe_config_annotations: list[str] | None = opt()
    linux: LinuxFeatures | None = opt()
    extra: dict[str, Any] = extra()

    @classmethod
    def from_dict(cls, data: Any) -> Features:
        """Build from decoded JSON; raise ``SpecError`` on bad input."""
        return structure(data, cls)

    @classmethod
    def from_json(cls, text: str | bytes) -> Features:
        """Parse features JSON text."""
        return loads(text, cls)

    def to_dict(self) -> dict[str, Any]:
        """The JSON document as plain dicts/lists."""
        return unstructure(self)

    def to_json(self, *, indent: int | None = None) -> str:
        """Serialise to JSON text."""
        return dumps(self, indent=indent)
