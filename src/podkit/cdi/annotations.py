"""CDI annotations: the Kubernetes device-plugin -> runtime hand-off (``cdi.k8s.io/...``).

A device plugin puts ``cdi.k8s.io/<plugin>_<deviceID>: vendor/class=a,vendor/class=b`` into the
container's annotations; the runtime parses them back into qualified device names.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from podkit.cdi.names import InvalidNameError, is_alpha_numeric, parse_qualified_name
from podkit.errors import InvalidArgumentError

__all__ = [
    "ANNOTATION_PREFIX",
    "MAX_ANNOTATION_NAME_LENGTH",
    "AnnotationError",
    "annotation_key",
    "annotation_value",
    "devices_from_request",
    "parse_annotations",
    "update_annotations",
]

ANNOTATION_PREFIX = "cdi.k8s.io/"
"""Prefix of every CDI annotation key."""

MAX_ANNOTATION_NAME_LENGTH = 63
"""Longest allowed name part of an annotation key (after the prefix)."""


class AnnotationError(InvalidArgumentError):
    """An annotation key or value that cannot carry CDI device names."""


def annotation_key(plugin_name: str, device_id: str) -> str:
    """The annotation key for a plugin and device ID: ``cdi.k8s.io/<plugin>_<deviceID>``.

    Every ``/`` in ``device_id`` becomes ``_``; the name must be at most 63 characters, start
    and end alphanumeric, and contain only alphanumerics, ``_``, ``-`` and ``.``.
    """
    if not plugin_name:
        raise AnnotationError("invalid plugin name, empty")
    if not device_id:
        raise AnnotationError("invalid deviceID, empty")
    name = plugin_name + "_" + device_id.replace("/", "_")
    if len(name) > MAX_ANNOTATION_NAME_LENGTH:
        raise AnnotationError(f'invalid plugin+deviceID "{name}", too long')
    if not is_alpha_numeric(name[0]):
        raise AnnotationError(f"invalid name \"{name}\", first '{name[0]}' should be alphanumeric")
    for c in name[1:-1]:
        if not (is_alpha_numeric(c) or c in "_-."):
            raise AnnotationError(f"invalid name \"{name}\", invalid character '{c}'")
    if not is_alpha_numeric(name[-1]):
        raise AnnotationError(f"invalid name \"{name}\", last '{name[-1]}' should be alphanumeric")
    return ANNOTATION_PREFIX + name


def annotation_value(devices: Iterable[str]) -> str:
    """Validate qualified device names and join them with ``,`` (empty list -> ``""``)."""
    out = list(devices)
    for d in out:
        try:
            parse_qualified_name(d)
        except InvalidNameError as e:
            raise AnnotationError(str(e)) from None
    return ",".join(out)


def update_annotations(
    annotations: Mapping[str, str] | None,
    plugin_name: str,
    device_id: str,
    devices: Iterable[str],
) -> dict[str, str]:
    """A copy of ``annotations`` with the CDI annotation for ``devices`` added.

    Raises :class:`AnnotationError` (``CDI annotation failed...``) when the key is invalid or
    already used, or a device name is invalid; the input mapping is never modified.
    """
    out = dict(annotations or {})
    try:
        key = annotation_key(plugin_name, device_id)
    except AnnotationError as e:
        raise AnnotationError(f"CDI annotation failed: {e}") from None
    if key in out:
        raise AnnotationError(f'CDI annotation failed, key "{key}" used')
    try:
        value = annotation_value(devices)
    except AnnotationError as e:
        raise AnnotationError(f"CDI annotation failed: {e}") from None
    out[key] = value
    return out


def parse_annotations(annotations: Mapping[str, str] | None) -> tuple[list[str], list[str]]:
    """The CDI keys and the device names in ``annotations``, in mapping order.

    Keys without the prefix are ignored; each value is split on ``,`` and every piece must be a
    valid qualified name (``invalid CDI device name "<piece>"`` otherwise). Duplicates are kept.
    """
    keys: list[str] = []
    devices: list[str] = []
    for key, value in (annotations or {}).items():
        if not key.startswith(ANNOTATION_PREFIX):
            continue
        for piece in value.split(","):
            try:
                parse_qualified_name(piece)
            except InvalidNameError:
                raise AnnotationError(
                    f'invalid CDI device name "{piece}" (annotation "{key}")'
                ) from None
            devices.append(piece)
        keys.append(key)
    return keys, devices


def devices_from_request(
    cdi_devices: Iterable[str], annotations: Mapping[str, str] | None
) -> list[str]:
    """Devices to inject for a CRI container, in containerd's order, without duplicates.

    containerd takes the CRI ``CDIDevice`` names first (in request order), then the devices
    named by ``cdi.k8s.io/`` annotations (in annotation order); a name seen before is skipped.
    """
    _, from_annotations = parse_annotations(annotations)
    return list(dict.fromkeys([*cdi_devices, *from_annotations]))
