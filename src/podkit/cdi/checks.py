"""Semantic validation of a parsed CDI spec, rule by rule as the Go library (names, env, device
nodes, mounts, hooks, intelRdt, netDevices, versions); the first failure raises ``SpecError``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from podkit.cdi import names as _names
from podkit.cdi.errors import SpecError
from podkit.cdi.models import (
    HOOK_NAMES,
    NO_PERMISSIONS,
    ContainerEdits,
    Device,
    DeviceNode,
    Hook,
    IntelRdt,
    Mount,
    NetDevice,
    Spec,
)
from podkit.cdi.versions import validate_version
from podkit.errors import InvalidArgumentError

__all__ = ["validate_container_edits", "validate_env", "validate_spec"]

_DEVICE_TYPES = ("", "b", "c", "u", "p")
_PERMISSIONS_RE = re.compile(r"[rwm]+\Z")


# --- validation ----------------------------------------------------------------------------

def validate_env(env: Iterable[str], field: str = "env") -> None:
    """Every entry must be ``KEY=VALUE`` with a non-empty key."""
    for i, e in enumerate(env):
        if e.find("=") <= 0:
            raise SpecError(f'invalid environment variable "{e}"', field=f"{field}[{i}]")


def _validate_device_node(n: DeviceNode, field: str) -> None:
    if not n.path:
        raise SpecError("invalid (empty) device path", field=f"{field}.path")
    if (n.type or "") not in _DEVICE_TYPES:
        raise SpecError(f'device "{n.path}": invalid type "{n.type}"', field=f"{field}.type")
    p = n.permissions
    if p and p != NO_PERMISSIONS and not _PERMISSIONS_RE.match(p):
        raise SpecError(
            f'device "{n.path}": invalid permissions "{p}"', field=f"{field}.permissions"
        )


def _validate_hook(h: Hook, field: str) -> None:
    if h.hook_name not in HOOK_NAMES:
        raise SpecError(f'invalid hook name "{h.hook_name}"', field=f"{field}.hookName")
    if not h.path:
        raise SpecError(f'invalid hook "{h.hook_name}" with empty path', field=f"{field}.path")
    try:
        validate_env(h.env or (), f"{field}.env")
    except SpecError as e:
        raise SpecError(f'invalid hook "{h.hook_name}": {e.message}', field=e.field) from None


def _validate_mount(m: Mount, field: str) -> None:
    if not m.host_path:
        raise SpecError("invalid mount, empty host path", field=f"{field}.hostPath")
    if not m.container_path:
        raise SpecError("invalid mount, empty container path", field=f"{field}.containerPath")


def _validate_intel_rdt(r: IntelRdt, field: str) -> None:
    c = r.clos_id
    if c and c != "/" and (len(c) >= 4096 or c in (".", "..") or "/" in c or "\n" in c):
        raise SpecError("invalid ClosID", field=f"{field}.closID")


def _validate_net_devices(devs: Iterable[NetDevice], field: str) -> None:
    hosts: set[str] = set()
    names: set[str] = set()
    for i, d in enumerate(devs):
        f = f"{field}[{i}]"
        if not d.host_interface_name:
            raise SpecError("invalid linux net device, empty HostInterfaceName",
                            field=f"{f}.hostInterfaceName")
        if not d.name:
            raise SpecError("invalid linux net device, empty Name", field=f"{f}.name")
        if d.host_interface_name in hosts:
            raise SpecError(f'invalid linux net device, duplicate HostInterfaceName '
                            f'"{d.host_interface_name}"', field=f"{f}.hostInterfaceName")
        if d.name in names:
            raise SpecError(f'invalid linux net device, duplicate Name "{d.name}"',
                            field=f"{f}.name")
        hosts.add(d.host_interface_name)
        names.add(d.name)


def validate_container_edits(edits: ContainerEdits, field: str = "containerEdits") -> None:
    """Validate one set of edits (env, device nodes, hooks, mounts, intelRdt, netDevices)."""
    if edits.env:
        try:
            validate_env(edits.env, f"{field}.env")
        except SpecError as e:
            raise SpecError(f"invalid container edits: {e.message}", field=e.field) from None
    for i, n in enumerate(edits.device_nodes or ()):
        _validate_device_node(n, f"{field}.deviceNodes[{i}]")
    for i, h in enumerate(edits.hooks or ()):
        _validate_hook(h, f"{field}.hooks[{i}]")
    for i, m in enumerate(edits.mounts or ()):
        _validate_mount(m, f"{field}.mounts[{i}]")
    if edits.intel_rdt is not None:
        _validate_intel_rdt(edits.intel_rdt, f"{field}.intelRdt")
    if edits.net_devices:
        _validate_net_devices(edits.net_devices, f"{field}.netDevices")


def _validate_device(dev: Device, field: str) -> None:
    try:
        _names.validate_device_name(dev.name)
    except InvalidArgumentError as e:
        raise SpecError(str(e), field=f"{field}.name") from None
    edits = dev.container_edits
    if edits.is_empty():
        raise SpecError("invalid device, empty device edits", field=f"{field}.containerEdits")
    try:
        validate_container_edits(edits, f"{field}.containerEdits")
    except SpecError as e:
        raise SpecError(f'invalid device "{dev.name}": {e.message}', field=e.field) from None


def validate_spec(spec: Spec) -> None:
    """Validate a parsed spec like the Go library's ``ReadSpec``; first failure wins.

    Order: version, vendor and class names, spec-level edits, each device (name, non-empty
    edits, edits, duplicates), at least one device. Raises :class:`SpecError`.
    """
    try:
        validate_version(spec)
        vendor, class_ = _names.parse_qualifier(spec.kind)
        try:
            _names.validate_vendor_name(vendor)
            _names.validate_class_name(class_)
        except InvalidArgumentError as e:
            raise SpecError(str(e), field="kind") from None
        if spec.container_edits is not None:
            validate_container_edits(spec.container_edits)
        seen: set[str] = set()
        for i, dev in enumerate(spec.devices):
            try:
                _validate_device(dev, f"devices[{i}]")
            except SpecError as e:
                raise SpecError(f'failed add device "{dev.name}": {e.message}',
                                field=e.field) from None
            if dev.name in seen:
                raise SpecError(f'invalid spec, multiple device "{dev.name}"',
                                field=f"devices[{i}].name")
            seen.add(dev.name)
        if not spec.devices:
            raise SpecError("invalid spec, no devices", field="devices")
    except SpecError as e:
        raise SpecError(f"invalid CDI Spec: {e.message}", field=e.field, source=e.source) from None
