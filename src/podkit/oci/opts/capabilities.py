"""Options on capabilities: set, add, drop, ambient, all known ones, or the caller's own
(read from ``/proc/self/status``); and podkit's rule for the names a CRI config gives
(:func:`capability_name`).
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from podkit.oci.defaults import KNOWN_CAPABILITIES
from podkit.oci.opts.core import SpecOpt, SpecOptError, _cap_names, _caps, _str
from podkit.oci.spec import Spec

__all__ = [
    "capability_name",
    "current_capabilities",
    "with_added_capabilities",
    "with_all_current_capabilities",
    "with_all_known_capabilities",
    "with_ambient_capabilities",
    "with_capabilities",
    "with_dropped_capabilities",
]


def capability_name(name: str, where: str = "") -> str:
    """The OCI name of a capability as a CRI config or a manifest spells it: ``CAP_`` optional,
    any case, spaces around ignored (``"sys_admin"`` -> ``"CAP_SYS_ADMIN"``).

    The one rule podkit applies wherever it reads such names, so a policy that compares
    ``capability_name(n)`` sees what podkit grants. The CRI keyword ``ALL`` (any case, with or
    without ``CAP_``) becomes ``"CAP_ALL"``. The name is not checked against
    :data:`KNOWN_CAPABILITIES` (podkit refuses unknown ones when it builds a spec); an empty
    one raises ``SpecOptError`` naming ``where``.

    >>> capability_name("net_admin"), capability_name("Cap_Kill"), capability_name("all")
    ('CAP_NET_ADMIN', 'CAP_KILL', 'CAP_ALL')
    """
    place = f" in {where}" if where else ""
    if not isinstance(name, str):
        raise SpecOptError(f"capability name {name!r}{place}: must be a string")
    upper = name.strip().upper()
    if not upper:
        raise SpecOptError(f"empty capability name{place}")
    return upper if upper.startswith("CAP_") else "CAP_" + upper


def with_capabilities(caps: Iterable[str] | None) -> SpecOpt:
    """Set bounding, effective and permitted to ``caps``; filter inheritable to them."""
    names = _cap_names(caps)

    def opt(s: Spec) -> None:
        c = _caps(s)
        c.bounding, c.effective, c.permitted = list(names), list(names), list(names)
        if not names:
            c.inheritable = None
        elif c.inheritable:
            c.inheritable = [x for x in c.inheritable if x in names]

    return opt


def with_added_capabilities(caps: Iterable[str]) -> SpecOpt:
    """Add ``caps`` to the bounding, effective and permitted sets."""
    names = _cap_names(caps)

    def opt(s: Spec) -> None:
        c = _caps(s)
        c.bounding = [*(c.bounding or []), *(n for n in names if n not in (c.bounding or []))]
        c.effective = [*(c.effective or []), *(n for n in names if n not in (c.effective or []))]
        c.permitted = [*(c.permitted or []), *(n for n in names if n not in (c.permitted or []))]

    return opt


def with_dropped_capabilities(caps: Iterable[str]) -> SpecOpt:
    """Remove ``caps`` from the bounding, effective, permitted and inheritable sets."""
    names = set(_cap_names(caps))

    def opt(s: Spec) -> None:
        c = _caps(s)
        c.bounding = [x for x in c.bounding or [] if x not in names]
        c.effective = [x for x in c.effective or [] if x not in names]
        c.permitted = [x for x in c.permitted or [] if x not in names]
        if c.inheritable is not None:
            c.inheritable = [x for x in c.inheritable if x not in names]

    return opt


def with_ambient_capabilities(caps: Iterable[str]) -> SpecOpt:
    """Set the ambient and inheritable sets to ``caps`` (for non-root processes)."""
    names = _cap_names(caps)

    def opt(s: Spec) -> None:
        c = _caps(s)
        c.ambient, c.inheritable = list(names), list(names)

    return opt


def with_all_known_capabilities() -> SpecOpt:
    """Grant every capability podkit knows (``KNOWN_CAPABILITIES``)."""
    return with_capabilities(KNOWN_CAPABILITIES)


def _capability_masks(text: str) -> dict[str, int]:
    """The ``Cap*`` hex masks of a ``/proc/<pid>/status`` text (bad lines are left out)."""
    masks = {}
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.startswith("Cap"):
            try:
                masks[key] = int(value.strip(), 16)
            except ValueError:
                continue
    return masks


def current_capabilities(status_path: str = "/proc/self/status") -> list[str]:
    """The capabilities a runtime started by this process can grant: ``CapEff`` ∩ ``CapBnd``.

    containerd's ``cap.Current()`` reads ``CapEff``; a child that execs (runc) only gets what
    is also in the bounding set, so a reduced bounding set narrows it too.
    """
    path = _str(status_path, "status path")
    try:
        text = Path(path).read_text()
    except OSError as e:
        raise SpecOptError(f"cannot read capabilities from {path}: {e.strerror}") from None
    masks = _capability_masks(text)
    if "CapEff" not in masks:
        raise SpecOptError(f"no valid CapEff line in {path}")
    mask = masks["CapEff"] & masks.get("CapBnd", masks["CapEff"])
    return [c for bit, c in enumerate(KNOWN_CAPABILITIES) if mask >> bit & 1]


def with_all_current_capabilities(status_path: str = "/proc/self/status") -> SpecOpt:
    """Grant what this process can pass on (:func:`current_capabilities` of ``status_path``)."""
    path = _str(status_path, "status path")

    def opt(s: Spec) -> None:
        with_capabilities(current_capabilities(path))(s)

    return opt
