"""The container rootfs' user database: ``/etc/passwd`` and ``/etc/group`` read with symlinks
resolved inside the rootfs (never escaping it), and name lookups in them.
"""

from __future__ import annotations

import os
from pathlib import Path

from podkit.oci.opts.core import SpecOptError, UserLookupError
from podkit.oci.spec import Spec

__all__ = [
    "lookup_group", "lookup_user", "read_groups", "read_passwd", "resolve_in_root", "rootfs_of",
]


def resolve_in_root(root: Path, rel: str) -> Path:
    """``root/rel`` with symlinks resolved as if ``root`` were ``/`` (never escapes ``root``)."""
    parts = [p for p in rel.split("/") if p not in ("", ".")]
    done: list[str] = []
    hops = 0
    while parts:
        part = parts.pop(0)
        if part == "..":
            if done:
                done.pop()
            continue
        candidate = root.joinpath(*done, part)
        if candidate.is_symlink():
            hops += 1
            if hops > 40:
                raise SpecOptError(f"too many symlinks resolving {rel!r} in rootfs {root}")
            target = os.readlink(candidate)
            if target.startswith("/"):
                done = []
            parts = [p for p in target.split("/") if p not in ("", ".")] + parts
            continue
        done.append(part)
    return root.joinpath(*done)


def rootfs_of(s: Spec, rootfs: str | os.PathLike[str] | None) -> Path:
    """The rootfs to look users up in: ``rootfs`` if given, else the spec's absolute root.path."""
    if rootfs is not None:
        return Path(rootfs)
    path = s.root.path if s.root else None
    if not path or not path.startswith("/"):
        raise SpecOptError(
            f"cannot look up users: root.path {path!r} is not absolute; pass rootfs=<path>"
        )
    return Path(path)


def _read_db(root: Path, name: str) -> tuple[Path, list[list[str]] | None]:
    """Lines of ``/etc/passwd`` or ``/etc/group`` split on ``:``; ``None`` if the file is absent."""
    path = resolve_in_root(root, f"etc/{name}")
    try:
        text = path.read_text(errors="replace")
    except FileNotFoundError:
        return root / "etc" / name, None
    except OSError as e:
        raise SpecOptError(f"cannot read {path}: {e.strerror}") from None
    rows = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            rows.append(line.split(":"))
    return path, rows


def read_passwd(root: Path) -> tuple[Path, list[tuple[str, int, int]] | None]:
    """(path, [(name, uid, gid)]) of the rootfs' ``/etc/passwd``; ``None`` if it is absent."""
    path, rows = _read_db(root, "passwd")
    if rows is None:
        return path, None
    users = []
    for r in rows:
        if len(r) >= 4 and r[2].isdigit() and r[3].isdigit():
            users.append((r[0], int(r[2]), int(r[3])))
    return path, users


def read_groups(root: Path) -> tuple[Path, list[tuple[str, int, list[str]]] | None]:
    """(path, [(name, gid, members)]) of the rootfs' ``/etc/group``; ``None`` if it is absent."""
    path, rows = _read_db(root, "group")
    if rows is None:
        return path, None
    groups = []
    for r in rows:
        if len(r) >= 3 and r[2].isdigit():
            members = [m for m in (r[3].split(",") if len(r) > 3 else []) if m]
            groups.append((r[0], int(r[2]), members))
    return path, groups


def lookup_user(root: Path, name: str) -> tuple[int, int]:
    """(uid, gid) of user ``name``; ``UserLookupError`` if it or the file is missing."""
    path, users = read_passwd(root)
    if users is None:
        raise UserLookupError(f"cannot look up user {name!r}: {path} does not exist")
    for uname, uid, gid in users:
        if uname == name:
            return uid, gid
    raise UserLookupError(f"user {name!r} not found in {path}")


def lookup_group(root: Path, name: str) -> int:
    """The gid of group ``name``; ``UserLookupError`` if it or the file is missing."""
    path, groups = read_groups(root)
    if groups is None:
        raise UserLookupError(f"cannot look up group {name!r}: {path} does not exist")
    for gname, gid, _ in groups:
        if gname == name:
            return gid
    raise UserLookupError(f"group {name!r} not found in {path}")
