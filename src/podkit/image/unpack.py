"""Layers to snapshots, snapshots to container root filesystems.

Each layer is unpacked into its own snapshot directory ``snapshots/<chain-id hex>/fs``, keyed by
ChainID so images that share a base share its snapshots. A layer is extracted into a temp dir
and renamed into place only when the whole tar was read and its uncompressed digest matched the
``diff_id`` of the image config: a failed unpack leaves no partial snapshot.

Snapshots use the overlayfs format (the decision that lets one snapshot serve both modes):

* a whiteout ``.wh.<name>`` becomes a character device 0/0 named ``<name>``;
* an opaque marker ``.wh..wh..opq`` becomes the ``trusted.overlay.opaque=y`` xattr on its dir.

A container rootfs is then either an overlay mount (``lowerdir`` = snapshots, top layer first,
plus a per-container ``upper``/``work`` dir) or, when overlay is not available, a copy that
applies the snapshots base first, interpreting those whiteouts and opaque dirs. ``trusted.
overlay.*`` xattrs inside a layer tar are ignored, never applied.

A rootfs for a container in a user namespace (``userns=``) shows the image's files owned by
that namespace's IDs: the overlay gets ID-mapped lower layers (``idmap.mount_idmapped``; the
snapshots stay as they are, shared) and an upper dir owned by the namespace's root; a copy is
chowned as it is made (host ID = ``IDMap.host_uid``; IDs the maps lack become 65534).

Entries that would escape the snapshot (absolute paths, ``..``, paths through a symlink,
hardlinks outside) or nest deeper than :data:`MAX_DEPTH` are refused with
:class:`UnsafeLayerError` naming the layer and the entry.
"""

from __future__ import annotations

import contextlib
import errno
import gzip
import hashlib
import io
import json
import os
import shutil
import stat
import tarfile
import tempfile
from pathlib import Path
from typing import Any

import attrs

from podkit import _linux, _trash, idmap
from podkit._files import atomic_write, file_lock, fsync_dir, validate_id
from podkit.errors import AlreadyExistsError, InvalidArgumentError, NotFoundError, quote
from podkit.image.descriptor import Descriptor, layer_compression
from podkit.image.errors import (
    DigestMismatchError,
    ImageError,
    ImageInUseError,
    UnsafeLayerError,
    UnsupportedMediaTypeError,
)
from podkit.image.reference import Reference
from podkit.image.store import Image, ImageStore

__all__ = [
    "MAX_DEPTH",
    "OPAQUE_XATTR",
    "Rootfs",
    "create_rootfs",
    "get_rootfs",
    "list_rootfs",
    "overlay_supported",
    "remove_rootfs",
    "unmount_rootfs",
    "unpack",
]

OPAQUE_XATTR = "trusted.overlay.opaque"
_WH_PREFIX = ".wh."
_WH_OPAQUE = ".wh..wh..opq"
_WH_META = ".wh..wh."
_MAX_HEADER = 1 << 20  # pax / GNU long-name headers bigger than this are refused
MAX_DEPTH = 256
"""Deepest entry path a layer may hold (deeper trees could not be copied or removed)."""
_CHUNK = 1 << 20
_MS_RDONLY = 1
_HEADER_TYPES = (tarfile.XHDTYPE, tarfile.XGLTYPE, tarfile.SOLARIS_XHDTYPE,
                 tarfile.GNUTYPE_LONGNAME, tarfile.GNUTYPE_LONGLINK)


class _BoundedTarInfo(tarfile.TarInfo):
    """TarInfo that refuses huge extended headers instead of reading them into memory."""

    def _proc_member(self, tarfile: tarfile.TarFile) -> Any:
        if self.type in _HEADER_TYPES and self.size > _MAX_HEADER:
            raise UnsafeLayerError(
                f"extended tar header of {self.size} bytes (limit {_MAX_HEADER})"
            )
        return super()._proc_member(tarfile)  # type: ignore[misc]


class _HashingReader(io.RawIOBase):
    """Passes reads through, hashing them (the uncompressed stream gives the diff_id)."""

    def __init__(self, inner: Any) -> None:
        super().__init__()
        self._inner = inner
        self.hash = hashlib.sha256()

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        n: int = self._inner.readinto(buffer) or 0
        if n:
            self.hash.update(memoryview(buffer)[:n])
        return n


def _decompressor(raw: Any, compression: str, where: str) -> Any:
    if compression == "":
        return raw
    if compression == "gzip":
        return gzip.GzipFile(fileobj=raw, mode="rb")
    if compression == "zstd":
        try:
            import zstandard  # type: ignore[import-not-found,unused-ignore]
        except ImportError:
            raise UnsupportedMediaTypeError(
                f"layer{where} is zstd-compressed: install the 'zstandard' package to unpack it"
            ) from None
        return zstandard.ZstdDecompressor().stream_reader(raw, read_size=_CHUNK)
    raise UnsupportedMediaTypeError(f"unsupported layer compression {compression!r}{where}")


def _entry_path(name: str, what: str, where: str) -> str:
    """Normalise a tar entry name to a relative path; refuse absolute paths, ``..`` and
    paths deeper than :data:`MAX_DEPTH`."""
    if "\0" in name:
        raise UnsafeLayerError(f"layer{where}: {what} {quote(name)} contains NUL")
    if name.startswith("/"):
        raise UnsafeLayerError(f"layer{where}: {what} {quote(name)} is an absolute path")
    parts = []
    for part in name.split("/"):
        if part in ("", "."):
            continue
        if part == "..":
            raise UnsafeLayerError(f"layer{where}: {what} {quote(name)} contains '..'")
        parts.append(part)
    if len(parts) > MAX_DEPTH:
        raise UnsafeLayerError(f"layer{where}: {what} {quote(name)} is {len(parts)} levels "
                               f"deep, deeper than {MAX_DEPTH}")
    return "/".join(parts)


def _lexists(path: str) -> bool:
    try:
        os.lstat(path)
    except FileNotFoundError:
        return False
    return True


def _remove(path: str) -> None:
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return
    if stat.S_ISDIR(st.st_mode):
        shutil.rmtree(path)
    else:
        os.unlink(path)


def _lstat_under(base: str, rel: str, name: str, where: str) -> os.stat_result | None:
    """``lstat`` of ``base/rel`` without following symlinks on the way (None if missing)."""
    path = base
    parts = rel.split("/")
    for i, part in enumerate(parts):
        path = os.path.join(path, part)
        try:
            st = os.lstat(path)
        except (FileNotFoundError, NotADirectoryError):
            return None
        if i < len(parts) - 1:
            if stat.S_ISLNK(st.st_mode):
                raise UnsafeLayerError(
                    f"layer{where}: entry {name!r} passes through symlink "
                    f"{'/'.join(parts[: i + 1])!r} of a lower layer (possible escape)"
                )
            if not stat.S_ISDIR(st.st_mode):
                return None
    return st


def _ensure_parents(root: str, rel: str, name: str, where: str,
                    parents: list[str] | None = None) -> str:
    """Create the missing parent dirs of ``rel`` under ``root``; refuse symlinked parents.

    A created dir takes owner, mode and mtime from the same dir in the nearest lower snapshot
    (so an upper layer that omits a dir entry does not change it in the merged view).
    """
    parent = root
    parts = rel.split("/")[:-1]
    for i, part in enumerate(parts):
        parent = os.path.join(parent, part)
        try:
            st = os.lstat(parent)
        except FileNotFoundError:
            os.mkdir(parent, 0o755)
            sub = "/".join(parts[: i + 1])
            for lower in reversed(parents or []):
                try:
                    lst = _lstat_under(lower, sub, name, where)
                except UnsafeLayerError:
                    lst = None
                if lst is not None:
                    if stat.S_ISDIR(lst.st_mode):
                        _chown(parent, lst.st_uid, lst.st_gid)
                        os.chmod(parent, stat.S_IMODE(lst.st_mode))
                        os.utime(parent, ns=(lst.st_atime_ns, lst.st_mtime_ns))
                    break
            continue
        if stat.S_ISLNK(st.st_mode):
            raise UnsafeLayerError(
                f"layer{where}: entry {name!r} passes through symlink "
                f"{os.path.relpath(parent, root)!r} (possible escape)"
            )
        if not stat.S_ISDIR(st.st_mode):
            raise UnsafeLayerError(
                f"layer{where}: entry {name!r} is under non-directory "
                f"{os.path.relpath(parent, root)!r}"
            )
    return parent


def _chown(path: str, uid: int, gid: int) -> None:
    if os.geteuid() == 0:
        os.chown(path, uid, gid, follow_symlinks=False)


def _set_xattrs(path: str, member: tarfile.TarInfo, where: str) -> None:
    for key, value in member.pax_headers.items():
        if not key.startswith("SCHILY.xattr."):
            continue
        name = key[len("SCHILY.xattr."):]
        if name.startswith("trusted.overlay."):
            continue  # would forge overlay metadata (opaque, redirect): never from a layer
        try:
            os.setxattr(path, name, value.encode("utf-8", "surrogateescape"),
                        follow_symlinks=False)
        except OSError as e:
            if e.errno in (errno.ENOTSUP, errno.EPERM) and member.issym():
                continue
            if e.errno == errno.ENOTSUP:
                continue  # the filesystem cannot hold it (for example security.selinux)
            raise ImageError(
                f"layer{where}: cannot set xattr {name!r} on {member.name!r}: {e}"
            ) from None


def _copy_up(parents: list[str], rel: str, dest_root: str, name: str, where: str) -> bool:
    """Copy ``rel`` from the nearest lower snapshot into ``dest_root`` (hardlink targets).

    Never follows a symlink of a lower layer on the way, so a hostile lower layer cannot make
    a host file the target.
    """
    for parent in reversed(parents):
        st = _lstat_under(parent, rel, name, where)
        if st is None:
            continue
        if stat.S_ISCHR(st.st_mode) and st.st_rdev == 0:
            return False  # whited out
        if not stat.S_ISREG(st.st_mode):
            return False
        _ensure_parents(dest_root, rel, name, where, parents)
        dst = os.path.join(dest_root, rel)
        fd = os.open(os.path.join(parent, rel), os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        with os.fdopen(fd, "rb") as src, open(dst, "xb") as out:
            shutil.copyfileobj(src, out, _CHUNK)
        _chown(dst, st.st_uid, st.st_gid)
        os.chmod(dst, stat.S_IMODE(st.st_mode))
        os.utime(dst, ns=(st.st_atime_ns, st.st_mtime_ns), follow_symlinks=False)
        return True
    return False


def _extract(tf: tarfile.TarFile, root: str, parents: list[str], where: str) -> None:
    dirs: list[tuple[str, tarfile.TarInfo]] = []
    for member in tf:
        rel = _entry_path(member.name, "entry", where)
        if not rel:
            continue  # the layer root itself
        base = rel.rsplit("/", 1)[-1]
        parent = _ensure_parents(root, rel, member.name, where, parents)
        if base.startswith(_WH_PREFIX):
            _whiteout(parent, base, member.name, where)
            continue
        path = os.path.join(root, rel)
        try:
            existing = os.lstat(path)
        except FileNotFoundError:
            existing = None
        if existing is not None and not (member.isdir() and stat.S_ISDIR(existing.st_mode)):
            _remove(path)
            existing = None
        if member.islnk():
            _hardlink(root, parents, member, path, where)
            continue  # a hardlink shares the target's metadata
        if member.isdir():
            if existing is None:
                os.mkdir(path, 0o700)
            dirs.append((path, member))
        else:
            _create(tf, member, path, where)
        _set_xattrs(path, member, where)
    for path, member in reversed(dirs):
        _chown(path, member.uid, member.gid)
        os.chmod(path, member.mode & 0o7777)
        os.utime(path, (member.mtime, member.mtime))


def _whiteout(parent: str, base: str, name: str, where: str) -> None:
    """Apply an AUFS-style whiteout entry: the opaque marker or a removal (a 0:0 char device)."""
    if base == _WH_OPAQUE:
        os.setxattr(parent, OPAQUE_XATTR, b"y")
    elif not base.startswith(_WH_META):
        target = base[len(_WH_PREFIX):]
        if target in ("", ".", ".."):
            raise UnsafeLayerError(f"layer{where}: bad whiteout {name!r}")
        path = os.path.join(parent, target)
        _remove(path)
        os.mknod(path, stat.S_IFCHR | 0o000, os.makedev(0, 0))


def _create(tf: tarfile.TarFile, member: tarfile.TarInfo, path: str, where: str) -> None:
    """Create a regular file, symlink, device or FIFO entry at ``path`` with its metadata."""
    if member.isreg():
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
                     | os.O_CLOEXEC, 0o600)
        with os.fdopen(fd, "wb") as out:
            src = tf.extractfile(member)
            if src is not None:
                shutil.copyfileobj(src, out, _CHUNK)
            if os.geteuid() == 0:
                os.fchown(out.fileno(), member.uid, member.gid)
            os.fchmod(out.fileno(), member.mode & 0o7777)
    elif member.issym():
        os.symlink(member.linkname, path)
        _chown(path, member.uid, member.gid)
    elif member.ischr() or member.isblk() or member.isfifo():
        if member.isfifo():
            os.mkfifo(path, 0o600)
        else:
            kind = stat.S_IFCHR if member.ischr() else stat.S_IFBLK
            os.mknod(path, kind | 0o600, os.makedev(member.devmajor, member.devminor))
        _chown(path, member.uid, member.gid)
        os.chmod(path, member.mode & 0o7777)
    else:
        raise UnsafeLayerError(
            f"layer{where}: entry {member.name!r} has unsupported type {member.type!r}"
        )
    os.utime(path, (member.mtime, member.mtime), follow_symlinks=False)


def _hardlink(root: str, parents: list[str], member: tarfile.TarInfo, path: str,
              where: str) -> None:
    """Link ``path`` to an earlier entry of this layer or, copied up, of a lower one."""
    target_rel = _entry_path(member.linkname, f"hardlink target of {member.name!r}", where)
    if not target_rel:
        raise UnsafeLayerError(f"layer{where}: hardlink {member.name!r} to the root")
    _ensure_parents(root, target_rel, member.linkname, where, parents)
    target = os.path.join(root, target_rel)
    if not _lexists(target) and not _copy_up(parents, target_rel, root, member.linkname, where):
        raise UnsafeLayerError(
            f"layer{where}: hardlink {member.name!r} to missing {member.linkname!r}"
        )
    if stat.S_ISDIR(os.lstat(target).st_mode):
        raise UnsafeLayerError(
            f"layer{where}: hardlink {member.name!r} to directory {member.linkname!r}"
        )
    os.link(target, path, follow_symlinks=False)


def _snapshot_dir(store: ImageStore, chain_id: str) -> Path:
    return store.root / "snapshots" / chain_id.partition(":")[2]


def _unpack_layer(store: ImageStore, image: Image, index: int, parents: list[str]) -> Path:
    layer: Descriptor = image.layers[index]
    diff_id = image.diff_ids[index]
    chain_id = image.chain_ids[index]
    where = f" {layer.digest} of {image.name}"
    final = _snapshot_dir(store, chain_id)
    compression = layer_compression(layer.media_type, f" ({layer.digest} of {image.name})")
    tmp = Path(tempfile.mkdtemp(dir=store.root / "snapshots", prefix=".unpack-"))
    try:
        fs = tmp / "fs"
        fs.mkdir(mode=0o755)
        with store.open_blob(layer.digest, layer.size, f" (layer of {image.name})") as raw:
            stream = _decompressor(raw, compression, where)
            hashing = _HashingReader(stream)
            reader = io.BufferedReader(hashing, _CHUNK)
            try:
                with tarfile.open(fileobj=reader, mode="r|", tarinfo=_BoundedTarInfo,
                                  bufsize=_CHUNK) as tf:
                    _extract(tf, str(fs), parents, where)
                while reader.read(_CHUNK):
                    pass
            except UnsafeLayerError as e:
                msg = str(e)
                if not msg.startswith("layer "):
                    msg = f"layer{where}: {msg}"
                raise UnsafeLayerError(msg) from None
            except (tarfile.TarError, EOFError, OSError, ValueError) as e:
                if isinstance(e, DigestMismatchError):
                    raise
                raise ImageError(f"layer{where}: cannot unpack: {e}") from None
            raw.read()
        actual = "sha256:" + hashing.hash.hexdigest()
        if actual != diff_id:
            raise DigestMismatchError(
                f"layer{where}: uncompressed content is {actual}, config diff_id is {diff_id}"
            )
        meta = {"chainId": chain_id, "diffId": diff_id, "layer": layer.to_dict(),
                "parent": image.chain_ids[index - 1] if index else None}
        atomic_write(tmp / "snapshot.json", json.dumps(meta, indent=2) + "\n")
        os.rename(tmp, final)
        fsync_dir(final.parent)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return final


def _resolve(store: ImageStore, ref: Image | Reference | str) -> Image:
    return ref if isinstance(ref, Image) else store.get(ref)


def unpack(store: ImageStore, ref: Image | Reference | str) -> list[Path]:
    """Unpack the layers of an image into snapshots (skipping existing ones).

    Returns the snapshot ``fs`` directories, base layer first. Safe to call concurrently for
    the same or overlapping images from several processes.
    """
    image = _resolve(store, ref)
    out: list[Path] = []
    with store.hold():
        for i, chain_id in enumerate(image.chain_ids):
            snap = _snapshot_dir(store, chain_id)
            with file_lock(store.root / "locks" / f"snapshot-{snap.name}.lock"):
                if not snap.is_dir():
                    _unpack_layer(store, image, i, [str(p) for p in out])
            out.append(snap / "fs")
    return out


# -- container root filesystems ------------------------------------------------------------


@attrs.frozen(slots=True)
class Rootfs:
    """A container's root filesystem made from an image.

    ``path`` is the directory to use as the OCI ``root.path``; ``mode`` is ``overlay`` or
    ``copy``; ``chain_ids`` are the snapshots it uses (protected from ``gc()``).
    """

    container_id: str
    image: str
    path: Path
    mode: str
    chain_ids: tuple[str, ...]


def _check_option_paths(paths: list[Path]) -> None:
    for path in paths:
        if any(c in str(path) for c in ":,\\"):
            raise OSError(errno.EINVAL, f"path {path} cannot be an overlay mount option")


def _mount_overlay(lowers: list[Path], upper: Path, work: Path, target: Path) -> None:
    _check_option_paths([*lowers, upper, work])
    options = (f"lowerdir={':'.join(str(p) for p in lowers)},upperdir={upper},"
               f"workdir={work},index=off")
    if len(options) >= 4096:
        raise OSError(errno.E2BIG, "overlay mount options longer than a page")
    _overlay(target, 0, options)


def _overlay(target: Path, flags: int, options: str) -> None:
    try:
        _linux.mount("overlay", target, "overlay", flags, options)
    except OSError as exc:
        raise OSError(exc.errno, f"mount overlay on {target}: {os.strerror(exc.errno or 0)}") \
            from None


def _umount(target: Path) -> None:
    try:
        _linux.umount(target)
        return
    except OSError as exc:
        err = exc.errno or 0
    if err == errno.EINVAL:
        return  # not a mount point
    if err == errno.EBUSY:
        with contextlib.suppress(OSError):
            _linux.umount(target, _linux.MNT_DETACH)
            return
    raise ImageInUseError(f"cannot unmount {target}: {os.strerror(err)}")


def overlay_supported() -> bool:
    """True if the kernel has overlayfs and this process may mount (root)."""
    try:
        with open("/proc/filesystems") as f:
            has = any(line.split()[-1:] == ["overlay"] for line in f)
    except OSError:
        return False
    return has and os.geteuid() == 0


_OVERFLOW_ID = 65534  # what the kernel shows for an ID a namespace does not map


def _owner(st: os.stat_result, ids: idmap.IDMap | None) -> tuple[int, int]:
    """The owner a copy of a file gets: the same, or its host IDs under ``ids``."""
    if ids is None:
        return st.st_uid, st.st_gid
    uid, gid = ids.host_uid(st.st_uid), ids.host_gid(st.st_gid)
    return (_OVERFLOW_ID if uid is None else uid), (_OVERFLOW_ID if gid is None else gid)


def _copy_meta(src: str, dst: str, st: os.stat_result, ids: idmap.IDMap | None) -> None:
    _chown(dst, *_owner(st, ids))
    if not stat.S_ISLNK(st.st_mode):
        os.chmod(dst, stat.S_IMODE(st.st_mode))
    for name in os.listxattr(src, follow_symlinks=False):
        if name.startswith("trusted.overlay."):
            continue
        with contextlib.suppress(OSError):
            os.setxattr(dst, name, os.getxattr(src, name, follow_symlinks=False),
                        follow_symlinks=False)
    os.utime(dst, ns=(st.st_atime_ns, st.st_mtime_ns), follow_symlinks=False)


def _apply_snapshot(src: str, dst: str, links: dict[tuple[int, int], str],
                    ids: idmap.IDMap | None = None) -> None:
    """Apply one overlay-format snapshot dir onto ``dst`` (copy mode; owners shifted by
    ``ids``)."""
    try:
        opaque = os.getxattr(src, OPAQUE_XATTR) == b"y"
    except OSError:
        opaque = False
    if opaque:
        for name in os.listdir(dst):
            _remove(os.path.join(dst, name))
    with os.scandir(src) as it:
        entries = list(it)
    for entry in entries:
        s = entry.path
        d = os.path.join(dst, entry.name)
        st = entry.stat(follow_symlinks=False)
        mode = st.st_mode
        if stat.S_ISCHR(mode) and st.st_rdev == 0:
            _remove(d)
            continue
        try:
            existing: os.stat_result | None = os.lstat(d)
        except FileNotFoundError:
            existing = None
        if stat.S_ISDIR(mode):
            if existing is not None and not stat.S_ISDIR(existing.st_mode):
                _remove(d)
                existing = None
            if existing is None:
                os.mkdir(d, 0o700)
            _apply_snapshot(s, d, links, ids)
            _copy_meta(s, d, st, ids)
            continue
        if existing is not None:
            _remove(d)
        key = (st.st_dev, st.st_ino)
        if st.st_nlink > 1 and key in links:
            os.link(links[key], d, follow_symlinks=False)
            continue
        if stat.S_ISREG(mode):
            shutil.copyfile(s, d, follow_symlinks=False)
        elif stat.S_ISLNK(mode):
            os.symlink(os.readlink(s), d)
        elif stat.S_ISCHR(mode) or stat.S_ISBLK(mode) or stat.S_ISFIFO(mode):
            os.mknod(d, mode, st.st_rdev)
        else:
            continue  # sockets are not image content
        if st.st_nlink > 1:
            links[key] = d
        _copy_meta(s, d, st, ids)


def _container_dir(store: ImageStore, container_id: str) -> Path:
    return store.root / "containers" / validate_id(container_id, "container ID")


def rootfs_path(store: ImageStore, container_id: str) -> Path:
    """Where :func:`create_rootfs` makes the rootfs of ``container_id`` (known before it is
    made: a spec can name it while it is being made)."""
    return _container_dir(store, container_id) / "rootfs"


def create_rootfs(store: ImageStore, ref: Image | Reference | str, container_id: str, *,
                  mode: str = "auto", readonly: bool = False,
                  userns: idmap.UserNamespace | None = None) -> Rootfs:
    """Make a root filesystem for ``container_id`` from an image.

    ``mode``: ``overlay`` (mount the snapshots plus a private upper dir), ``copy`` (a private
    copy of the layers), or ``auto`` (overlay when available, else copy). ``readonly`` mounts
    the overlay without an upper dir. ``userns``: the files show owned by that user
    namespace's IDs (ID-mapped layers; a chowned copy where the snapshots' file system cannot
    map them, in ``auto`` mode). On any error nothing is left behind.
    """
    if mode not in ("auto", "overlay", "copy"):
        raise InvalidArgumentError(f"invalid rootfs mode {mode!r}: want auto, overlay or copy")
    image = _resolve(store, ref)
    cdir = _container_dir(store, container_id)
    with store.hold():
        try:
            cdir.mkdir()
        except FileExistsError:
            raise AlreadyExistsError(
                f"rootfs for container {container_id!r} already exists in {store.root}"
            ) from None
        target = rootfs_path(store, container_id)
        try:
            use = mode
            if use == "auto":
                use = "overlay" if overlay_supported() else "copy"
            meta: dict[str, Any] = {
                "containerId": container_id, "image": image.name, "mode": use,
                "chainIds": image.chain_ids, "path": str(target)}
            if userns is not None:
                meta["idMap"] = {"uidMap": userns.ids.uid_map(), "gidMap": userns.ids.gid_map()}
            atomic_write(cdir / "rootfs.json", json.dumps(meta, indent=2) + "\n")
            lowers = unpack(store, image)
            target.mkdir(mode=0o755)
            if use == "overlay":
                try:
                    _mount_rootfs(cdir, lowers, readonly, userns)
                except (OSError, idmap.IDMapError) as e:
                    if mode == "overlay":
                        raise ImageError(
                            f"cannot mount overlay rootfs for {container_id!r} from "
                            f"{image.name}: {e}"
                        ) from None
                    use = "copy"
                    meta["mode"] = use
                    atomic_write(cdir / "rootfs.json", json.dumps(meta, indent=2) + "\n")
            if use == "copy":
                links: dict[tuple[int, int], str] = {}
                ids = userns.ids if userns is not None else None
                for lower in lowers:
                    links.clear()
                    _apply_snapshot(str(lower), str(target), links, ids)
                if ids is not None and ids.root is not None:
                    _chown(str(target), *ids.root)
        except BaseException:
            _cleanup(cdir)
            raise
    return Rootfs(container_id, image.name, target, use, tuple(image.chain_ids))


def _mount_rootfs(cdir: Path, lowers: list[Path], readonly: bool,
                  userns: idmap.UserNamespace | None = None) -> None:
    if userns is None:
        _mount_layers(cdir, lowers, readonly, None)
        return
    staged = cdir / "layers"  # each snapshot ID-mapped here until the overlay holds it
    staged.mkdir()
    fd = idmap.open_user_namespace(userns.path)
    try:
        mapped = []
        for i, lower in enumerate(lowers):
            (staged / str(i)).mkdir()
            idmap.mount_idmapped(lower, staged / str(i), fd, recursive=False)
            mapped.append(staged / str(i))
        _mount_layers(cdir, mapped, readonly, userns.ids.root)
    finally:
        os.close(fd)
        for i in range(len(lowers)):
            idmap.unmount(staged / str(i))
            with contextlib.suppress(FileNotFoundError):
                (staged / str(i)).rmdir()
        staged.rmdir()


def _mount_layers(cdir: Path, lowers: list[Path], readonly: bool,
                  root: tuple[int, int] | None) -> None:
    """The overlay of ``lowers`` (base first) on ``cdir/rootfs``; its upper dir owned by
    ``root`` when given (the merged root dir is the upper's)."""
    target = cdir / "rootfs"
    upper, work = cdir / "upper", cdir / "work"
    ordered = list(reversed(lowers))  # overlay wants the top-most layer first
    if readonly:
        if len(ordered) == 1:
            ordered.append(ordered[0])  # overlay needs two lowers without an upper dir
        _check_option_paths(ordered)
        options = f"lowerdir={':'.join(str(p) for p in ordered)}"
        _overlay(target, _MS_RDONLY, options)
        return
    upper.mkdir(mode=0o755, exist_ok=True)
    if root is not None:
        os.chown(upper, *root)
    work.mkdir(mode=0o700, exist_ok=True)
    _mount_overlay(ordered, upper, work, target)


def _cleanup(cdir: Path) -> None:
    target = cdir / "rootfs"
    if os.path.ismount(target):
        _umount(target)
    if (cdir / "layers").exists():  # ID-mapped snapshots of a make cut short: never rmtree them
        idmap.unmount_under(cdir / "layers")
    shutil.rmtree(cdir, ignore_errors=True)
    if cdir.exists():
        shutil.rmtree(cdir)


def get_rootfs(store: ImageStore, container_id: str) -> Rootfs:
    """The rootfs recorded for ``container_id``, else ``NotFoundError``."""
    cdir = _container_dir(store, container_id)
    try:
        meta = json.loads((cdir / "rootfs.json").read_text())
    except FileNotFoundError:
        raise NotFoundError(
            f"no rootfs for container {quote(container_id)} in {store.root}") from None
    return Rootfs(container_id, str(meta["image"]), Path(meta["path"]), str(meta["mode"]),
                  tuple(meta["chainIds"]))


def list_rootfs(store: ImageStore) -> list[Rootfs]:
    """Every container rootfs recorded in the store."""
    out = []
    for meta in sorted((store.root / "containers").glob("*/rootfs.json")):
        with contextlib.suppress(NotFoundError, ValueError, KeyError):
            out.append(get_rootfs(store, meta.parent.name))
    return out


def unmount_rootfs(store: ImageStore, container_id: str) -> None:
    """Unmount an overlay rootfs (no-op when not mounted or in copy mode)."""
    target = _container_dir(store, container_id) / "rootfs"
    if os.path.ismount(target):
        _umount(target)


def remove_rootfs(store: ImageStore, container_id: str, *, background: bool = False) -> None:
    """Unmount and delete a container's rootfs, upper and work dirs (idempotent). With
    ``background``, the unmounted dir is gone from its place at once and its files are
    deleted on a background thread (:func:`podkit._trash.remove_later`, from
    ``<store>/containers/.trash``): a pod's removal does not wait for them."""
    cdir = _container_dir(store, container_id)
    if not cdir.exists():
        return
    if not background:
        _cleanup(cdir)
        return
    target = cdir / "rootfs"
    if os.path.ismount(target):
        _umount(target)
    _trash.remove_later(cdir, cdir.parent / _trash.TRASH)

