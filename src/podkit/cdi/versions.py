"""CDI spec versions: the known ones, the oldest one a spec's features need, and the check that
``cdiVersion`` is known and new enough.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from podkit.cdi.errors import SpecError
from podkit.cdi.models import ContainerEdits, Spec

__all__ = ["CURRENT_VERSION", "KNOWN_VERSIONS", "minimum_required_version", "validate_version"]

CURRENT_VERSION = "1.1.0"
"""The newest CDI spec version podkit understands (``specs-go.CurrentVersion``)."""

KNOWN_VERSIONS: tuple[str, ...] = (
    "1.1.0", "1.0.0", "0.8.0", "0.7.0", "0.6.0", "0.5.0", "0.4.0", "0.3.0", "0.2.0", "0.1.0",
)
"""Every version string the library knows, newest first."""

_EARLIEST_VERSION = "0.3.0"


# --- versions ------------------------------------------------------------------------------

def _all_edits(spec: Spec) -> Iterable[ContainerEdits]:
    if spec.container_edits is not None:
        yield spec.container_edits
    for dev in spec.devices:
        yield dev.container_edits


def _needs_1_1_0(spec: Spec) -> bool:
    for e in _all_edits(spec):
        if e.net_devices:
            return True
        rdt = e.intel_rdt
        if rdt is not None and (rdt.schemata is not None or rdt.enable_monitoring):
            return True
    return False


def _needs_0_7_0(spec: Spec) -> bool:
    return any(e.intel_rdt is not None or e.additional_gids for e in _all_edits(spec))


def _needs_0_6_0(spec: Spec) -> bool:
    if spec.annotations or any(d.annotations for d in spec.devices):
        return True
    _, _, cls = spec.kind.partition("/")
    return "." in cls


def _needs_0_5_0(spec: Spec) -> bool:
    for dev in spec.devices:
        if dev.name[:1].isascii() and dev.name[:1].isdigit():
            return True
    return any(n.host_path for e in _all_edits(spec) for n in e.device_nodes or ())


def _needs_0_4_0(spec: Spec) -> bool:
    return any(m.type for e in _all_edits(spec) for m in e.mounts or ())


_VERSION_PREDICATES: tuple[tuple[str, Callable[[Spec], bool]], ...] = (
    ("1.1.0", _needs_1_1_0),
    ("0.7.0", _needs_0_7_0),
    ("0.6.0", _needs_0_6_0),
    ("0.5.0", _needs_0_5_0),
    ("0.4.0", _needs_0_4_0),
)


_VERSION_KEYS = {v: tuple(int(x) for x in v.split(".")) for v in KNOWN_VERSIONS}


def _version_key(v: str) -> tuple[int, ...]:
    return _VERSION_KEYS.get(v) or tuple(int(x) for x in v.split("."))


def minimum_required_version(spec: Spec) -> str:
    """The oldest spec version that has every feature ``spec`` uses (no leading ``v``)."""
    for version, needs in _VERSION_PREDICATES:
        if needs(spec):
            return version
    return _EARLIEST_VERSION


def validate_version(spec: Spec) -> None:
    """Check ``cdiVersion`` is a known version and new enough for the features used."""
    raw = spec.cdi_version
    version = raw[1:] if raw.startswith("v") else raw
    if version not in KNOWN_VERSIONS:
        raise SpecError(f'invalid version "{raw}"', field="cdiVersion")
    minimum = minimum_required_version(spec)
    if _version_key(minimum) > _version_key(version):
        raise SpecError(f"the spec version must be at least v{minimum}", field="cdiVersion")
