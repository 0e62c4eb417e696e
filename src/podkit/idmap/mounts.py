"""ID-mapped mounts: a view of a directory (or file) whose owners a user namespace's maps
shift, made with the kernel's mount API (``open_tree`` + ``mount_setattr(MOUNT_ATTR_IDMAP)``
+ ``move_mount``), so a runtime that cannot make them (runc < 1.2) only bind-mounts the view.

Through a view mapped by ``0 100000 65536``, a file the disk says is uid 0 shows as 100000,
and a file host uid 100000 creates lands on disk as 0: the container's root sees its files as
root does without a user namespace, and the disk keeps the IDs it had.

    fd = idmap.open_user_namespace(pin)
    idmap.mount_idmapped("/srv/data", "/var/lib/podkit/mounts/c1/0", fd)
    ...
    idmap.unmount_under("/var/lib/podkit/mounts/c1")
"""

from __future__ import annotations

import errno
import os
import stat
import threading
from pathlib import Path

from podkit import _linux
from podkit.idmap.maps import IDMap
from podkit.idmap.userns import Holder, IDMapError

__all__ = [
    "mount_idmapped",
    "mounts_under",
    "supported",
    "unmount",
    "unmount_under",
    "unreachable",
]

_FS_NAMES = {0xEF53: "ext4", 0x58465342: "xfs", 0x9123683E: "btrfs", 0x01021994: "tmpfs",
             0x794C7630: "overlay", 0x6969: "nfs", 0x01021997: "9p", 0x65735546: "fuse",
             0xF2F52010: "f2fs", 0x4D44: "vfat"}
_probe_lock = threading.Lock()
_probed: dict[int, str] = {}  # st_dev -> "" (supported) or why not


def mount_idmapped(source: str | os.PathLike[str], target: str | os.PathLike[str],
                   userns_fd: int, *, recursive: bool = True) -> None:
    """Mount an ID-mapped copy of the mount tree at ``source`` (its submounts too when
    ``recursive``) on ``target`` (an existing directory, or a file for a file), mapped by the
    user namespace ``userns_fd``. ``IDMapError`` naming the source and why, nothing left."""
    try:
        tree = _linux.open_tree(source, _linux.OPEN_TREE_CLONE
                                | (_linux.AT_RECURSIVE if recursive else 0))
    except OSError as exc:
        raise IDMapError(f"clone the mount at {os.fspath(source)}: {exc.strerror}") from None
    try:
        try:
            _linux.mount_setattr_idmap(tree, userns_fd, recursive=recursive, path=source)
        except OSError as exc:
            raise IDMapError(f"ID-map the mount of {os.fspath(source)}: "
                             f"{_why(exc, source)}") from None
        try:
            _linux.move_mount(tree, target)
        except OSError as exc:
            raise IDMapError(f"mount the ID-mapped {os.fspath(source)} on "
                             f"{os.fspath(target)}: {exc.strerror}") from None
    finally:
        os.close(tree)


def _why(exc: OSError, path: str | os.PathLike[str]) -> str:
    """What a failed ``mount_setattr(MOUNT_ATTR_IDMAP)`` means."""
    if exc.errno == errno.ENOSYS:
        return "the kernel has no mount_setattr (Linux 5.12 or later has)"
    if exc.errno == errno.EINVAL:
        return f"{_fs_name(path)} does not support ID-mapped mounts (or a submount's does)"
    return exc.strerror or str(exc)


def _fs_name(path: str | os.PathLike[str]) -> str:
    try:
        magic = _linux.fs_type(path)
    except OSError:
        return "its file system"
    return f"its file system ({_FS_NAMES.get(magic, hex(magic))})"


def supported(path: str | os.PathLike[str]) -> str:
    """Why ID-mapped mounts of ``path``'s file system cannot be made here ("" when they can);
    probed once per file system (a detached mount ID-mapped by a throw-away user namespace)."""
    try:
        dev = os.stat(path).st_dev
    except OSError as exc:
        return f"{os.fspath(path)}: {exc.strerror}"
    with _probe_lock:
        if dev not in _probed:
            _probed[dev] = _probe(path)
        return _probed[dev]


def _probe(path: str | os.PathLike[str]) -> str:
    try:
        tree = _linux.open_tree(path, _linux.OPEN_TREE_CLONE)
    except OSError as exc:
        return f"clone the mount at {os.fspath(path)}: {exc.strerror}"
    try:
        with Holder(IDMap.single(65534, 1)) as holder:
            fd = os.open(holder.path("user"), os.O_RDONLY | os.O_CLOEXEC)
        try:
            _linux.mount_setattr_idmap(tree, fd, recursive=False, path=path)
        finally:
            os.close(fd)
    except OSError as exc:
        return f"{os.fspath(path)}: {_why(exc, path)}"
    except IDMapError as exc:
        return str(exc)
    finally:
        os.close(tree)  # the detached mount goes with it
    return ""


def unmount(target: str | os.PathLike[str]) -> None:
    """Detach every mount stacked on ``target``; a path that is no mount point is fine."""
    for _ in range(16):
        try:
            _linux.umount(target, _linux.MNT_DETACH | _linux.UMOUNT_NOFOLLOW)
        except OSError as exc:
            if exc.errno in (errno.EINVAL, errno.ENOENT):
                return
            raise IDMapError(f"unmount {os.fspath(target)}: {exc.strerror}") from None


def _unescape(field: str) -> str:
    return field.encode().decode("unicode_escape") if "\\" in field else field


def mounts_under(directory: str | os.PathLike[str]) -> list[str]:
    """The mount points at or below ``directory`` in this mount namespace, deepest first."""
    top = os.path.abspath(os.fspath(directory))
    found = set()
    with open("/proc/self/mountinfo") as f:
        for line in f:
            point = _unescape(line.split(" ", 5)[4])
            if point == top or point.startswith(top.rstrip("/") + "/"):
                found.add(point)
    return sorted(found, key=lambda p: (-len(Path(p).parts), p))


def unmount_under(directory: str | os.PathLike[str]) -> None:
    """Detach every mount at or below ``directory`` (deepest first)."""
    for point in mounts_under(directory):
        unmount(point)


def unreachable(path: str | os.PathLike[str], uid: int, gid: int) -> str:
    """Why a process of host ``uid``/``gid`` without privileges over files it does not own
    cannot reach ``path`` (a directory on the way it may not search), "" when it can. Modes
    only: ACLs are not read."""
    p = Path(os.path.abspath(os.fspath(path)))
    for d in (*reversed(p.parents), p):
        try:
            st = os.stat(d)
        except OSError as exc:
            return f"{d}: {exc.strerror}"
        if not stat.S_ISDIR(st.st_mode):
            continue
        if st.st_uid == uid:
            ok = st.st_mode & stat.S_IXUSR
        elif st.st_gid == gid:
            ok = st.st_mode & stat.S_IXGRP
        else:
            ok = st.st_mode & stat.S_IXOTH
        if not ok:
            return (f"{d} (mode {stat.S_IMODE(st.st_mode):04o}, owner {st.st_uid}:{st.st_gid}) "
                    f"is not searchable by uid {uid} gid {gid}")
    return ""

