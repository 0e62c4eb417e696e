"""A pod's volumes on the host: made before its containers start, removed on ``kube down``.

emptyDir is a directory (``medium: Memory``: a tmpfs, ``sizeLimit`` its size); hostPath gets
the kubelet's ``type`` checks (and creation for the ``OrCreate`` types); configMap, secret and
downwardAPI files are projected like the kubelet's atomic writer: a timestamped directory, a
``..data`` symlink to it swapped by rename, and one symlink per top-level name through it;
secret files on a tmpfs of their own (never on disk), as the kubelet keeps them.
"""

from __future__ import annotations

import os
import secrets
import shutil
import stat
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path, PurePosixPath

from podkit import _linux
from podkit.errors import InvalidArgumentError
from podkit.kube.plan import VolumePlan

__all__ = [
    "HOST_PATH_TYPES",
    "HostPathError",
    "check_host_path",
    "make_volumes",
    "project_files",
    "remove_created",
    "remove_volumes",
    "secret_tmpfs_size",
]

DATA_DIR = "..data"

# type -> (what the path must be, a test of its mode); the OrCreate types make it first
_KINDS: dict[str, tuple[str, Callable[[int], bool]]] = {
    "Directory": ("a directory", stat.S_ISDIR),
    "DirectoryOrCreate": ("a directory", stat.S_ISDIR),
    "File": ("a regular file", stat.S_ISREG),
    "FileOrCreate": ("a regular file", stat.S_ISREG),
    "Socket": ("a UNIX socket", stat.S_ISSOCK),
    "CharDevice": ("a character device", stat.S_ISCHR),
    "BlockDevice": ("a block device", stat.S_ISBLK),
}
HOST_PATH_TYPES = ("", *_KINDS)
"""The hostPath ``type`` values the kubelet knows ("" checks nothing)."""


class HostPathError(InvalidArgumentError):
    """A hostPath volume whose path does not pass its ``type`` check (or cannot be made)."""


def _where(vol: VolumePlan) -> str:
    kind = vol.host_path_type or '""'
    return f"volume {vol.name!r}: hostPath {vol.host_path} (type {kind})"


def check_host_path(vol: VolumePlan) -> list[Path]:
    """Check (and for DirectoryOrCreate/FileOrCreate make) a hostPath; what it made.

    DirectoryOrCreate makes the directory and its parents with mode 0755; FileOrCreate makes an
    empty file with mode 0644 whose parent must exist, as the kubelet does.
    """
    kind = vol.host_path_type
    if kind not in HOST_PATH_TYPES:
        raise HostPathError(f"{_where(vol)}: unknown type (want one of "
                            f"{', '.join(t for t in HOST_PATH_TYPES if t)} or \"\")")
    path = Path(vol.host_path)
    if not path.is_absolute():
        raise HostPathError(f"{_where(vol)}: not an absolute path")
    if not kind:
        return []
    made: list[Path] = []
    if not path.exists():
        try:
            if kind == "DirectoryOrCreate":
                missing = [p for p in (path, *path.parents) if not p.exists()]
                path.mkdir(mode=0o755, parents=True)
                for p in missing:
                    p.chmod(0o755)  # the umask does not apply
                made = missing
            elif kind == "FileOrCreate":
                if not path.parent.is_dir():
                    raise HostPathError(f"{_where(vol)}: parent directory {path.parent} does "
                                        "not exist")
                fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
                os.close(fd)
                path.chmod(0o644)
                made = [path]
        except OSError as exc:
            raise HostPathError(f"{_where(vol)}: cannot create it: {exc.strerror}") from None
    try:
        mode = path.stat().st_mode
    except OSError:
        raise HostPathError(f"{_where(vol)}: does not exist") from None
    what, test = _KINDS[kind]
    if not test(mode):
        raise HostPathError(f"{_where(vol)}: not {what}")
    return made


def _safe_relative(vol: VolumePlan, rel: str) -> PurePosixPath:
    p = PurePosixPath(rel)
    if not rel or p.is_absolute() or ".." in p.parts or p.parts[0].startswith(".."):
        raise InvalidArgumentError(
            f"volume {vol.name!r}: file path {rel!r} must be relative, without '..' and not "
            "start with '..'")
    return p


def _own(path: Path, fs_group: int | None, mask: int) -> None:
    """The kubelet's volume ownership: group ``fs_group``, ``mask`` added (dirs: setgid, x)."""
    if fs_group is None:
        return
    os.chown(path, -1, fs_group, follow_symlinks=False)
    mode = path.lstat().st_mode
    if stat.S_ISLNK(mode):
        return
    extra = mask | (stat.S_ISGID | 0o110 if stat.S_ISDIR(mode) else 0)
    path.chmod(stat.S_IMODE(mode) | extra)


def project_files(vol: VolumePlan, target: Path | None = None) -> None:
    """Write ``vol.files`` under ``target`` (default its host path) the atomic-writer way.

    A new ``..<timestamp>`` directory gets every file with its mode (group ``fs_group``, made
    group-readable, as the kubelet does); ``..data`` then points at it in one rename, top-level
    names are symlinks through ``..data``, and the previous timestamped directory goes.
    """
    root = Path(target or vol.host_path)
    rels = [(_safe_relative(vol, rel), data, mode) for rel, data, mode in vol.files]
    root.mkdir(mode=0o755, parents=True, exist_ok=True)
    root.chmod(0o755)
    stamp = time.strftime("..%Y_%m_%d_%H_%M_%S.", time.gmtime()) + secrets.token_hex(4)
    new = root / stamp
    new.mkdir(mode=0o755)
    for rel, data, mode in rels:
        dest = new / rel
        dest.parent.mkdir(mode=0o755, parents=True, exist_ok=True)
        fd = os.open(dest, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        dest.chmod(mode & 0o7777)
    for dirpath, dirnames, filenames in os.walk(new):
        for name in (*dirnames, *filenames):
            _own(Path(dirpath) / name, vol.fs_group, 0o440)
    _own(new, vol.fs_group, 0o440)
    old = os.readlink(root / DATA_DIR) if (root / DATA_DIR).is_symlink() else ""
    tmp = root / (DATA_DIR + "_tmp")
    tmp.unlink(missing_ok=True)
    tmp.symlink_to(stamp)
    os.replace(tmp, root / DATA_DIR)
    tops = {rel.parts[0] for rel, _, _ in rels}
    for top in tops:
        link = root / top
        if not link.is_symlink():
            link.symlink_to(f"{DATA_DIR}/{top}")
    for entry in root.iterdir():
        if not entry.name.startswith("..") and entry.is_symlink() and entry.name not in tops:
            entry.unlink()
    if old and old != stamp:
        shutil.rmtree(root / old, ignore_errors=True)


def _make_empty_dir(vol: VolumePlan) -> None:
    path = Path(vol.host_path)
    path.mkdir(mode=0o777, parents=True, exist_ok=True)
    if vol.medium == "Memory" and not os.path.ismount(path):
        data = f"size={vol.size_limit}" if vol.size_limit else None
        try:
            _linux.mount("tmpfs", path, "tmpfs", _linux.MS_NOSUID | _linux.MS_NODEV, data)
        except OSError as exc:
            raise InvalidArgumentError(
                f"volume {vol.name!r}: emptyDir medium Memory at {path}: mount tmpfs "
                f"({data or 'no size'}): {exc.strerror}") from None
    path.chmod(0o777)  # the kubelet's mode, whatever the umask
    _own(path, vol.fs_group, 0o660)


def secret_tmpfs_size(vol: VolumePlan) -> int:
    """Bytes for a secret volume's tmpfs: twice its files (the atomic writer's next version
    lands beside the current one) plus 1 MiB for directories and links, in whole pages."""
    page = os.sysconf("SC_PAGE_SIZE")
    size = 2 * sum(len(data) for _, data, _ in vol.files) + (1 << 20)
    return -(-size // page) * page


def _mount_secret_tmpfs(vol: VolumePlan) -> None:
    """Keep a secret volume in memory, as the kubelet does: a tmpfs at its directory."""
    path = Path(vol.host_path)
    path.mkdir(mode=0o755, parents=True, exist_ok=True)
    if os.path.ismount(path):
        return
    data = f"size={secret_tmpfs_size(vol)},mode=0755"
    try:
        _linux.mount("tmpfs", path, "tmpfs", _linux.MS_NOSUID | _linux.MS_NODEV, data)
    except OSError as exc:
        raise InvalidArgumentError(
            f"volume {vol.name!r}: secret at {path}: mount tmpfs ({data}): {exc.strerror}"
        ) from None


def make_volumes(volumes: Sequence[VolumePlan]) -> list[Path]:
    """Make every volume of a pod; the hostPaths it created (``OrCreate`` types), for
    :func:`remove_created` when the pod is undone. On an error, removes what it made.

    Kinds: emptyDir, hostPath, configMap, secret, downwardAPI. hostPath contents are never
    changed.
    """
    made_host: list[Path] = []
    done: list[VolumePlan] = []
    try:
        for vol in volumes:
            if vol.kind == "hostPath":
                made_host += check_host_path(vol)
                continue
            done.append(vol)
            if vol.kind == "emptyDir":
                _make_empty_dir(vol)
            elif vol.kind in ("configMap", "secret", "downwardAPI"):
                if vol.kind == "secret":
                    _mount_secret_tmpfs(vol)
                project_files(vol)
            else:
                raise InvalidArgumentError(f"volume {vol.name!r}: unknown kind {vol.kind!r}")
    except BaseException:
        remove_volumes(done)
        remove_created(made_host)
        raise
    return made_host


def remove_created(paths: Iterable[Path]) -> None:
    """Remove hostPaths :func:`make_volumes` created, while still empty (innermost first)."""
    for path in sorted(paths, key=lambda p: len(p.parts), reverse=True):
        _remove_if_empty(path)


def _remove_if_empty(path: Path) -> None:
    try:
        if path.is_dir() and not path.is_symlink():
            path.rmdir()
        elif path.is_file() and path.stat().st_size == 0:
            path.unlink()
    except OSError:
        pass  # something was put there meanwhile: it is not ours to remove


def _unmount_all(path: Path) -> None:
    while os.path.ismount(path):
        _linux.umount(path, 2)  # MNT_DETACH: a container may still hold it


def remove_volumes(volumes: Iterable[VolumePlan]) -> list[str]:
    """Remove the pod volumes (tmpfs unmounted first) and their pod dir when empty; never a
    hostPath. Idempotent; the paths it removed."""
    removed: list[str] = []
    parents: set[Path] = set()
    for vol in volumes:
        if vol.kind == "hostPath":
            continue
        path = Path(vol.host_path)
        parents.add(path.parent)
        if not path.exists() and not path.is_symlink():
            continue
        _unmount_all(path)
        shutil.rmtree(path)
        removed.append(str(path))
    for parent in parents:  # the pod's dirs: <pod>/volumes (the kubelet's layout), <pod>
        for d in (parent, parent.parent) if parent.name == "volumes" else (parent,):
            try:
                d.rmdir()
            except OSError:  # not empty: another volume's, or not ours
                break
    return removed
