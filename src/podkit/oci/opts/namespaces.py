"""Options on namespaces: host or new, joined by path, user-namespace mappings, and sysctls
(which the kernel scopes to namespaces).
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping

from podkit.oci.opts.core import (
    _UINT32,
    SpecOpt,
    SpecOptError,
    _abs_path,
    _int,
    _linux,
    _namespace_type,
    _str_map,
)
from podkit.oci.spec import (
    LinuxIDMapping,
    LinuxNamespace,
    Spec,
)

__all__ = [
    "with_host_namespace",
    "with_linux_namespace",
    "with_namespace_path",
    "with_sysctls",
    "with_user_namespace",
    "without_namespace",
]


def with_host_namespace(type: str) -> SpecOpt:
    """Drop the ``type`` namespace entry, so the container shares the host's."""
    t = _namespace_type(type)

    def opt(s: Spec) -> None:
        lx = _linux(s)
        if lx.namespaces is not None:
            lx.namespaces = [n for n in lx.namespaces if n.type != t]

    return opt


def without_namespace(type: str) -> SpecOpt:
    """Remove the ``type`` namespace entry (CRI name for ``with_host_namespace``)."""
    return with_host_namespace(type)


def with_linux_namespace(type: str, path: str | None = None) -> SpecOpt:
    """Add a namespace (new, or joined via ``path``), replacing an entry of the same type."""
    t = _namespace_type(type)
    p = None if path is None else _abs_path(path, f"{t} namespace path")

    def opt(s: Spec) -> None:
        lx = _linux(s)
        entry = LinuxNamespace(type=t, path=p)
        namespaces = list(lx.namespaces or [])
        for i, n in enumerate(namespaces):
            if n.type == t:
                namespaces[i] = entry
                break
        else:
            namespaces.append(entry)
        lx.namespaces = namespaces

    return opt


def with_namespace_path(type: str, path: str) -> SpecOpt:
    """Join an existing namespace by path; error if the spec has no ``type`` entry."""
    t = _namespace_type(type)
    p = _abs_path(path, f"{t} namespace path")

    def opt(s: Spec) -> None:
        for n in (s.linux.namespaces if s.linux else None) or []:
            if n.type == t:
                n.path = p
                return
        raise SpecOptError(f"cannot join {t} namespace {p!r}: the spec has no {t} namespace")

    return opt


def _id_mapping(m: LinuxIDMapping | tuple[int, int, int], what: str) -> LinuxIDMapping:
    if isinstance(m, LinuxIDMapping):
        m = (m.container_id, m.host_id, m.size)
    if not isinstance(m, tuple) or len(m) != 3:
        raise SpecOptError(f"invalid {what} {m!r}: expected (container_id, host_id, size)")
    c, h, n = (_int(v, what, *_UINT32) for v in m)
    return LinuxIDMapping(container_id=c, host_id=h, size=n)


def with_user_namespace(
    uid_maps: Iterable[LinuxIDMapping | tuple[int, int, int]],
    gid_maps: Iterable[LinuxIDMapping | tuple[int, int, int]],
) -> SpecOpt:
    """Add a user namespace (if missing) and append uid/gid mappings."""
    uids = [_id_mapping(m, "uid mapping") for m in uid_maps]
    gids = [_id_mapping(m, "gid mapping") for m in gid_maps]

    def opt(s: Spec) -> None:
        lx = _linux(s)
        if not any(n.type == "user" for n in lx.namespaces or []):
            lx.namespaces = [*(lx.namespaces or []), LinuxNamespace(type="user")]
        lx.uid_mappings = [*(lx.uid_mappings or []), *copy.deepcopy(uids)]
        lx.gid_mappings = [*(lx.gid_mappings or []), *copy.deepcopy(gids)]

    return opt


def with_sysctls(sysctls: Mapping[str, str]) -> SpecOpt:
    """Merge ``linux.sysctl`` entries (``{"net.ipv4.ip_forward": "1"}``)."""
    values = _str_map(sysctls, "sysctl")

    def opt(s: Spec) -> None:
        lx = _linux(s)
        lx.sysctl = {**(lx.sysctl or {}), **values}

    return opt
