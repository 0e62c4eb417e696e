"""Options on the user the process runs as: numeric ids, names looked up in the rootfs
(``passwd``), additional groups.
"""

from __future__ import annotations

import os
from pathlib import Path

from podkit.oci.opts.core import _UINT32, SpecOpt, SpecOptError, _int, _str, _user
from podkit.oci.opts.passwd import lookup_group, lookup_user, read_groups, read_passwd, rootfs_of
from podkit.oci.spec import (
    Spec,
    User,
)

__all__ = [
    "with_additional_gids",
    "with_append_additional_groups",
    "with_uid_gid",
    "with_user",
    "with_user_id",
    "with_username",
]

_ID_MAX = 2**31 - 1  # runc refuses uids/gids above MaxInt32, containerd follows


def _ensure_primary_gid(u: User) -> None:
    """containerd puts the primary gid first in additionalGids unless it is already there."""
    gids = u.additional_gids or []
    if u.gid is not None and u.gid not in gids:
        gids = [u.gid, *gids]
    u.additional_gids = gids


def _parse_id(text: str, what: str, user: str) -> int | None:
    if not text.isdigit():
        return None
    value = int(text)
    if value > _ID_MAX:
        raise SpecOptError(f"invalid user {user!r}: {what} {value} out of range [0, {_ID_MAX}]")
    return value


def with_uid_gid(uid: int, gid: int) -> SpecOpt:
    """Run as numeric ``uid``/``gid`` (no lookup); additional gids reset to ``[gid]``."""
    u_ = _int(uid, "uid", 0, _ID_MAX)
    g_ = _int(gid, "gid", 0, _ID_MAX)

    def opt(s: Spec) -> None:
        u = _user(s)
        u.uid, u.gid, u.additional_gids = u_, g_, None
        _ensure_primary_gid(u)

    return opt


def with_user_id(uid: int, *, rootfs: str | os.PathLike[str] | None = None) -> SpecOpt:
    """Run as ``uid`` with its gid from the rootfs ``/etc/passwd`` (gid 0 if not listed)."""
    u_ = _int(uid, "uid", 0, _ID_MAX)

    def opt(s: Spec) -> None:
        _, users = read_passwd(rootfs_of(s, rootfs))
        gid = next((g for _, i, g in users or [] if i == u_), 0)
        u = _user(s)
        u.uid, u.gid, u.additional_gids = u_, gid, None
        _ensure_primary_gid(u)

    return opt


def with_username(name: str, *, rootfs: str | os.PathLike[str] | None = None) -> SpecOpt:
    """Run as user ``name``: uid and gid from the rootfs ``/etc/passwd``; error if absent."""
    n = _str(name, "user name")

    def opt(s: Spec) -> None:
        uid, gid = lookup_user(rootfs_of(s, rootfs), n)
        u = _user(s)
        u.uid, u.gid, u.additional_gids = uid, gid, None
        _ensure_primary_gid(u)

    return opt


def with_user(user: str, *, rootfs: str | os.PathLike[str] | None = None) -> SpecOpt:
    """Run as ``"uid"``, ``"name"``, ``"uid:gid"``, ``"name:group"`` (or mixed), like an image USER.

    Names are looked up in ``rootfs`` (default: an absolute ``root.path``).
    """
    value = _str(user, "user")
    parts = value.split(":")
    if len(parts) > 2 or not all(parts):
        raise SpecOptError(f"invalid user {value!r}: expected uid, name, uid:gid or name:group")
    uid = _parse_id(parts[0], "uid", value)
    if len(parts) == 1:
        return with_user_id(uid, rootfs=rootfs) if uid is not None else with_username(
            value, rootfs=rootfs
        )
    gid = _parse_id(parts[1], "gid", value)
    if uid is not None and gid is not None:
        return with_uid_gid(uid, gid)

    def opt(s: Spec) -> None:
        root = rootfs_of(s, rootfs)
        u_ = uid if uid is not None else lookup_user(root, parts[0])[0]
        g_ = gid if gid is not None else lookup_group(root, parts[1])
        u = _user(s)
        u.uid, u.gid, u.additional_gids = u_, g_, None
        _ensure_primary_gid(u)

    return opt


def with_additional_gids(user: str, *, rootfs: str | os.PathLike[str] | None = None) -> SpecOpt:
    """Set additional gids to the groups listing ``user`` (a name or uid) in ``/etc/group``."""
    value = _str(user, "user")

    def opt(s: Spec) -> None:
        root = rootfs_of(s, rootfs)
        u = _user(s)
        u.additional_gids = None
        name: str | None = value
        if value.isdigit():
            _, users = read_passwd(root)
            name = next((n for n, i, _ in users or [] if i == int(value)), None)
        _, groups = read_groups(root)
        if name is not None and groups is not None:
            u.additional_gids = [g for gn, g, members in groups if gn != name and name in members]
        _ensure_primary_gid(u)

    return opt


def with_append_additional_groups(
    *groups: str, rootfs: str | os.PathLike[str] | None = None
) -> SpecOpt:
    """Append groups (gids or names looked up in the rootfs ``/etc/group``) to additional gids."""
    values = [_str(g, "group") for g in groups]
    for g in values:
        if g.isdigit():
            _int(int(g), "gid", 0, _UINT32[1])

    def opt(s: Spec) -> None:
        gids: list[int] = []
        root: Path | None = None
        for g in values:
            if g.isdigit():
                gids.append(int(g))
            else:
                root = root or rootfs_of(s, rootfs)
                gids.append(lookup_group(root, g))
        u = _user(s)
        u.additional_gids = [*(u.additional_gids or []), *gids]
        _ensure_primary_gid(u)

    return opt
