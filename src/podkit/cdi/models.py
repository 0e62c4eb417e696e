"""CDI spec models (versions 0.3.0 ... 1.1.0): frozen attrs classes, one per wire object.

Attribute names are the snake_case form of the wire keys (``hostPath`` -> ``host_path``), ``None``
means *absent* and lists are stored as tuples; each field names its wire key and kind for ``wire``.
"""

from __future__ import annotations

import json
from typing import Any

import attrs

from podkit.cdi import names as _names
from podkit.cdi.errors import SpecError
from podkit.cdi.wire import decode, encode

__all__ = [
    "HOOK_NAMES",
    "NO_PERMISSIONS",
    "ContainerEdits",
    "Device",
    "DeviceNode",
    "Hook",
    "IntelRdt",
    "Mount",
    "NetDevice",
    "Spec",
]

HOOK_NAMES: tuple[str, ...] = (
    "prestart", "createRuntime", "createContainer", "startContainer", "poststart", "poststop",
)
"""Valid ``hookName`` values (OCI hook stages)."""

NO_PERMISSIONS = "none"
"""Device node ``permissions`` value that creates the node but grants no cgroup access."""


# --- field helpers -------------------------------------------------------------------------

def _tuple(v: Any) -> Any:
    """Store lists as tuples so that the frozen models really are immutable."""
    if v is None or isinstance(v, tuple):
        return v
    return tuple(v)


def _dict(v: Any) -> Any:
    return None if v is None else dict(v)


def _m(wire: str, kind: Any) -> dict[str, Any]:
    return {"wire": wire, "kind": kind}


def _f(wire: str, kind: Any, *, default: Any = None, conv: Any = None) -> Any:
    md = _m(wire, kind)
    if conv is not None:
        return attrs.field(default=default, metadata=md, converter=conv, kw_only=True)
    return attrs.field(default=default, metadata=md, kw_only=True)


# --- models --------------------------------------------------------------------------------

@attrs.frozen(slots=True, kw_only=True)
class DeviceNode:
    """A device node to create in the container (``containerEdits.deviceNodes[]``)."""

    path: str = _f("path", "str", default="")
    host_path: str | None = _f("hostPath", "str")
    type: str | None = _f("type", "str")
    major: int | None = _f("major", "int64")
    minor: int | None = _f("minor", "int64")
    file_mode: int | None = _f("fileMode", "uint32")
    permissions: str | None = _f("permissions", "str")
    uid: int | None = _f("uid", "uint32")
    gid: int | None = _f("gid", "uint32")


@attrs.frozen(slots=True, kw_only=True)
class Mount:
    """A mount to add to the container (``containerEdits.mounts[]``)."""

    host_path: str = _f("hostPath", "str", default="")
    container_path: str = _f("containerPath", "str", default="")
    options: tuple[str, ...] | None = _f("options", ("list", "str"), conv=_tuple)
    type: str | None = _f("type", "str")


@attrs.frozen(slots=True, kw_only=True)
class Hook:
    """An OCI hook to add to the container (``containerEdits.hooks[]``)."""

    hook_name: str = _f("hookName", "str", default="")
    path: str = _f("path", "str", default="")
    args: tuple[str, ...] | None = _f("args", ("list", "str"), conv=_tuple)
    env: tuple[str, ...] | None = _f("env", ("list", "str"), conv=_tuple)
    timeout: int | None = _f("timeout", "int")


@attrs.frozen(slots=True, kw_only=True)
class IntelRdt:
    """Intel RDT (resctrl) class of service for the container (``containerEdits.intelRdt``)."""

    clos_id: str | None = _f("closID", "str")
    l3_cache_schema: str | None = _f("l3CacheSchema", "str")
    mem_bw_schema: str | None = _f("memBwSchema", "str")
    schemata: tuple[str, ...] | None = _f("schemata", ("list", "str"), conv=_tuple)
    enable_monitoring: bool | None = _f("enableMonitoring", "bool")


@attrs.frozen(slots=True, kw_only=True)
class NetDevice:
    """A host network interface moved into the container (``containerEdits.netDevices[]``)."""

    host_interface_name: str = _f("hostInterfaceName", "str", default="")
    name: str = _f("name", "str", default="")


@attrs.frozen(slots=True, kw_only=True)
class ContainerEdits:
    """Edits a spec or a device makes to the OCI spec of a container."""

    env: tuple[str, ...] | None = _f("env", ("list", "str"), conv=_tuple)
    device_nodes: tuple[DeviceNode, ...] | None = _f(
        "deviceNodes", ("list", DeviceNode), conv=_tuple
    )
    hooks: tuple[Hook, ...] | None = _f("hooks", ("list", Hook), conv=_tuple)
    mounts: tuple[Mount, ...] | None = _f("mounts", ("list", Mount), conv=_tuple)
    intel_rdt: IntelRdt | None = attrs.field(default=None, metadata=_m("intelRdt", IntelRdt))
    additional_gids: tuple[int, ...] | None = _f(
        "additionalGids", ("list", "uint32"), conv=_tuple
    )
    net_devices: tuple[NetDevice, ...] | None = _f(
        "netDevices", ("list", NetDevice), conv=_tuple
    )

    def is_empty(self) -> bool:
        """True when the edits would change nothing (all lists empty, no intelRdt)."""
        return not (
            self.env or self.device_nodes or self.hooks or self.mounts
            or self.additional_gids or self.intel_rdt is not None or self.net_devices
        )


@attrs.frozen(slots=True, kw_only=True)
class Device:
    """One device of a spec: its (unqualified) name and the edits it needs."""

    name: str = _f("name", "str", default="")
    annotations: dict[str, str] | None = attrs.field(
        default=None, metadata=_m("annotations", ("map", "str")), converter=_dict
    )
    container_edits: ContainerEdits = attrs.field(
        factory=ContainerEdits, metadata=_m("containerEdits", ContainerEdits)
    )


@attrs.frozen(slots=True, kw_only=True)
class Spec:
    """A CDI spec file: a vendor/class (``kind``), its devices and spec-wide edits.

    >>> spec = Spec.from_dict({"cdiVersion": "0.3.0", "kind": "vendor.com/gpu",
    ...     "devices": [{"name": "0", "containerEdits": {"env": ["GPU=0"]}}]})
    >>> spec.vendor, spec.class_, spec.get_device("0").container_edits.env
    ('vendor.com', 'gpu', ('GPU=0',))
    """

    cdi_version: str = _f("cdiVersion", "str", default="")
    kind: str = _f("kind", "str", default="")
    annotations: dict[str, str] | None = attrs.field(
        default=None, metadata=_m("annotations", ("map", "str")), converter=_dict
    )
    devices: tuple[Device, ...] = _f("devices", ("list", Device), default=(), conv=_tuple)
    container_edits: ContainerEdits | None = attrs.field(
        default=None, metadata=_m("containerEdits", ContainerEdits)
    )

    @property
    def vendor(self) -> str:
        """The vendor part of ``kind`` (before the first ``/``); empty when malformed."""
        return _names.parse_qualifier(self.kind)[0]

    @property
    def class_(self) -> str:
        """The class part of ``kind`` (after the first ``/``)."""
        return _names.parse_qualifier(self.kind)[1]

    @classmethod
    def from_dict(cls, data: Any, *, source: str | None = None) -> Spec:
        """Build a spec from decoded JSON/YAML, strictly (no semantic validation)."""
        if data is None:
            raise SpecError("failed to parse CDI Spec, no Spec data", source=source)
        try:
            return decode(cls, data, "", yaml_coerce=False)
        except SpecError as e:
            raise e.with_source(source) if source else e from None

    def to_dict(self) -> dict[str, Any]:
        """The wire document: camelCase keys, absent fields left out."""
        return encode(self)

    def to_json(self, *, indent: int | None = None) -> str:
        """Serialise to JSON (compact by default, like the Go writer)."""
        seps = (",", ":") if indent is None else (",", ": ")
        return json.dumps(self.to_dict(), indent=indent, separators=seps)

    def to_yaml(self) -> str:
        """Serialise to a YAML document starting with ``---``, keys in model order."""
        from podkit.cdi import yamldoc  # PyYAML only when a spec is written as YAML

        return "---\n" + yamldoc.dump(self.to_dict())

    def get_device(self, name: str) -> Device | None:
        """The device with this unqualified name, if the spec has it."""
        for dev in self.devices:
            if dev.name == name:
                return dev
        return None
