"""Images from a directory: ``build_from_rootfs`` makes a one-layer OCI image of a rootfs tree.

The layer is deterministic, so the same tree gives the same digests (and image ID) on every
run and machine with the same zlib: entries depth first in name order, every mtime
``mtime``, owners as on disk (or ``owner``), no user or group names, the ``user.*`` and
``security.capability`` xattrs only, hard links as links to the first name, sockets left out,
gzip without a name or time. The image config holds the platform, the given
:class:`ImageConfig` and the layer's diff ID, and no creation time.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import stat
import tarfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any, cast

from podkit.image.config import ImageConfig
from podkit.image.descriptor import (
    MEDIA_TYPE_OCI_CONFIG,
    MEDIA_TYPE_OCI_LAYER_GZIP,
    MEDIA_TYPE_OCI_MANIFEST,
    Descriptor,
    Platform,
    host_platform,
)
from podkit.image.errors import ImageError
from podkit.image.reference import ReferenceError, parse_reference
from podkit.image.store import Image, ImageStore

__all__ = ["CREATED_BY", "build_from_rootfs"]

CREATED_BY = "podkit build_from_rootfs"
"""The ``created_by`` of the image's one history entry."""

_XATTRS = ("user.", "security.capability")


class _Hashing:
    """A write-only file object that hashes and counts what passes through to ``out`` (the
    tar and gzip writers call ``write``, ``tell`` and ``flush`` only)."""

    def __init__(self, out: Any) -> None:
        self._out = out
        self.hash = hashlib.sha256()
        self.size = 0

    def write(self, data: bytes) -> int:
        self.hash.update(data)
        self.size += len(data)
        self._out.write(data)
        return len(data)

    def tell(self) -> int:
        return self.size

    def flush(self) -> None:
        pass

    @property
    def digest(self) -> str:
        return "sha256:" + self.hash.hexdigest()


def _walk(directory: Path, prefix: str = "") -> Iterator[tuple[str, Path]]:
    """Every entry under ``directory`` (not itself): (name in the layer, path), depth first,
    a directory right before what it holds, names in sorted order; symlinks not followed."""
    with os.scandir(directory) as it:
        entries = sorted(it, key=lambda e: e.name)
    for entry in entries:
        name = prefix + entry.name
        yield name, Path(entry.path)
        if entry.is_dir(follow_symlinks=False):
            yield from _walk(Path(entry.path), name + "/")


def _xattrs(path: Path) -> dict[str, str]:
    try:
        names = sorted(n for n in os.listxattr(path, follow_symlinks=False)
                       if n.startswith(_XATTRS))
    except OSError:  # a filesystem without xattrs
        return {}
    headers = {}
    for n in names:
        value = os.getxattr(path, n, follow_symlinks=False)
        headers["SCHILY.xattr." + n] = value.decode("utf-8", "surrogateescape")
    return headers


def _write_layer(tar: tarfile.TarFile, root: Path, owner: tuple[int, int] | None,
                 mtime: int) -> None:
    links: dict[tuple[int, int], str] = {}
    for name, path in _walk(root):
        st = os.lstat(path)
        info = tarfile.TarInfo(name)
        info.mode = stat.S_IMODE(st.st_mode)
        info.uid, info.gid = owner if owner is not None else (st.st_uid, st.st_gid)
        info.uname = info.gname = ""
        info.mtime = mtime
        info.pax_headers = _xattrs(path)
        kind = st.st_mode
        if not stat.S_ISDIR(kind) and st.st_nlink > 1:
            first = links.setdefault((st.st_dev, st.st_ino), name)
            if first != name:
                info.type, info.linkname = tarfile.LNKTYPE, first
                tar.addfile(info)
                continue
        if stat.S_ISDIR(kind):
            info.type = tarfile.DIRTYPE
        elif stat.S_ISREG(kind):
            info.type, info.size = tarfile.REGTYPE, st.st_size
            with open(path, "rb") as f:
                tar.addfile(info, f)
            continue
        elif stat.S_ISLNK(kind):
            info.type, info.linkname = tarfile.SYMTYPE, os.readlink(path)
        elif stat.S_ISCHR(kind) or stat.S_ISBLK(kind):
            info.type = tarfile.CHRTYPE if stat.S_ISCHR(kind) else tarfile.BLKTYPE
            info.devmajor, info.devminor = os.major(st.st_rdev), os.minor(st.st_rdev)
        elif stat.S_ISFIFO(kind):
            info.type = tarfile.FIFOTYPE
        else:  # a socket: tar has no type for it (as docker and buildah, left out)
            continue
        tar.addfile(info)


def _store_layer(store: ImageStore, root: Path, owner: tuple[int, int] | None,
                 mtime: int) -> tuple[Descriptor, str]:
    """The gzip layer of ``root`` into the store: its descriptor and diff ID."""
    with store.stream() as blob:
        compressed = _Hashing(blob)
        with gzip.GzipFile(filename="", mode="wb", fileobj=cast(IO[bytes], compressed),
                           mtime=0) as gz:
            plain = _Hashing(gz)
            with tarfile.open(fileobj=cast(IO[bytes], plain), mode="w",
                              format=tarfile.PAX_FORMAT, encoding="utf-8") as tar:
                _write_layer(tar, root, owner, mtime)
    return Descriptor(MEDIA_TYPE_OCI_LAYER_GZIP, blob.digest, blob.size), plain.digest


def _config_object(cfg: ImageConfig) -> dict[str, Any]:
    """The ``config`` object of an OCI image config, with the fields ``cfg`` sets."""
    out: dict[str, Any] = {}
    for key, value in (("User", cfg.user), ("WorkingDir", cfg.working_dir),
                       ("StopSignal", cfg.stop_signal)):
        if value:
            out[key] = value
    if cfg.env:
        out["Env"] = list(cfg.env)
    if cfg.entrypoint is not None:
        out["Entrypoint"] = list(cfg.entrypoint)
    if cfg.cmd is not None:
        out["Cmd"] = list(cfg.cmd)
    if cfg.exposed_ports:
        out["ExposedPorts"] = {p: {} for p in cfg.exposed_ports}
    if cfg.volumes:
        out["Volumes"] = {v: {} for v in cfg.volumes}
    if cfg.labels:
        out["Labels"] = dict(cfg.labels)
    return out


def _json(doc: dict[str, Any]) -> bytes:
    return json.dumps(doc, sort_keys=True, separators=(",", ":")).encode()


def build_from_rootfs(store: ImageStore, rootfs: str | os.PathLike[str], ref: str, *,
                      config: ImageConfig | None = None, owner: tuple[int, int] | None = None,
                      mtime: int = 0, platform: Platform | None = None) -> Image:
    """Make a one-layer OCI image of the directory ``rootfs`` and record it as ``ref``.

    ``config`` gives the image config's Env, Entrypoint, Cmd, WorkingDir, User, Labels, ...
    (its ``os``/``architecture`` are not used: ``platform``, default this machine's);
    ``owner`` ``(uid, gid)`` owns every entry (default: as on disk); ``mtime`` is every
    entry's modification time. The same tree gives the same bytes (see the module). An
    earlier record of ``ref`` is replaced. Raises ``ImageError`` naming ``rootfs`` (not a
    directory, an entry that cannot be read) and ``ReferenceError`` for a bad ``ref``; on
    an error no record is written and no temp file stays.
    """
    root = Path(rootfs)
    name = parse_reference(ref)
    if name.digest:
        raise ReferenceError(f"image build: {ref!r}: name the image by tag, not by digest")
    if not root.is_dir():
        raise ImageError(f"image build: {root}: not a directory")
    plat = platform or host_platform()
    with store.hold():
        try:
            layer, diff_id = _store_layer(store, root, owner, mtime)
        except OSError as exc:
            where = f" {exc.filename}" if exc.filename else ""
            raise ImageError(f"image build from {root}: cannot read{where}: "
                             f"{exc.strerror or exc}") from None
        doc: dict[str, Any] = {
            "architecture": plat.architecture, "os": plat.os,
            "config": _config_object(config or ImageConfig()),
            "rootfs": {"type": "layers", "diff_ids": [diff_id]},
            "history": [{"created_by": CREATED_BY}],
        }
        if plat.variant:
            doc["variant"] = plat.variant
        config_raw = _json(doc)
        config_desc = Descriptor(MEDIA_TYPE_OCI_CONFIG,
                                 store.put_blob(config_raw, f" (config of {name})"),
                                 len(config_raw))
        manifest_raw = _json({"schemaVersion": 2, "mediaType": MEDIA_TYPE_OCI_MANIFEST,
                              "config": config_desc.to_dict(), "layers": [layer.to_dict()]})
        manifest = Descriptor(MEDIA_TYPE_OCI_MANIFEST,
                              store.put_blob(manifest_raw, f" (manifest of {name})"),
                              len(manifest_raw))
        return store.put(store.build_image(name, manifest, manifest, plat))

