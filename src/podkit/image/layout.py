"""Import images from OCI image layouts, OCI archives and ``docker save`` archives.

``import_image(store, path)`` detects the format: a directory with ``oci-layout`` and
``index.json``; a tar holding such a layout (OCI archive; ``docker save`` of Docker >= 25 too);
or a ``docker save`` tar with ``manifest.json`` (converted to an OCI manifest). Multi-platform
indexes are resolved to one platform (this machine's by default). Blobs are copied into the
store verified; the image records are written last, so a failed import records nothing.
"""

from __future__ import annotations

import contextlib
import gzip
import json
import lzma
import os
import posixpath
import tarfile
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

from podkit.image.descriptor import (
    INDEX_TYPES,
    MANIFEST_TYPES,
    MEDIA_TYPE_OCI_CONFIG,
    MEDIA_TYPE_OCI_LAYER,
    MEDIA_TYPE_OCI_LAYER_GZIP,
    MEDIA_TYPE_OCI_LAYER_ZSTD,
    MEDIA_TYPE_OCI_MANIFEST,
    Descriptor,
    Platform,
    host_platform,
    parse_index,
    parse_manifest,
    select_platform,
)
from podkit.image.errors import BlobNotFoundError, ImageError, UnsupportedMediaTypeError
from podkit.image.progress import Progress, ProgressCallback
from podkit.image.reference import Reference, ReferenceError, parse_reference
from podkit.image.store import Image, ImageStore

__all__ = [
    "ANNOTATION_CONTAINERD_NAME",
    "ANNOTATION_REF_NAME",
    "import_image",
    "resolve_platform_manifest",
]

ANNOTATION_REF_NAME = "org.opencontainers.image.ref.name"
ANNOTATION_CONTAINERD_NAME = "io.containerd.image.name"
_CHUNK = 1 << 20
_MAX_JSON = 8 << 20
_BROKEN_ARCHIVE = (tarfile.TarError, EOFError, zlib.error, lzma.LZMAError, gzip.BadGzipFile)
"""What reading a cut or corrupt (compressed) tar raises."""


class _Source:
    """Files of a layout or archive by relative path."""

    where: str

    def open(self, name: str) -> IO[bytes]:
        raise NotImplementedError

    def exists(self, name: str) -> bool:
        raise NotImplementedError

    def size(self, name: str) -> int:
        raise NotImplementedError

    def read_json(self, name: str) -> Any:
        with self.open(name) as f:
            raw = f.read(_MAX_JSON + 1)
        if len(raw) > _MAX_JSON:
            raise ImageError(f"{self.where}: {name} is too big for a JSON document")
        try:
            return json.loads(raw)
        except ValueError as e:
            raise ImageError(f"{self.where}: {name} is not valid JSON: {e}") from None


def _clean(name: str, where: str) -> str:
    norm = posixpath.normpath(name)
    if norm.startswith("/") or norm == ".." or norm.startswith("../"):
        raise ImageError(f"{where}: path {name!r} escapes the archive")
    return norm


class _DirSource(_Source):
    def __init__(self, root: Path) -> None:
        self.root = root
        self.where = str(root)

    def _path(self, name: str) -> Path:
        return self.root / _clean(name, self.where)

    def open(self, name: str) -> IO[bytes]:
        try:
            return open(self._path(name), "rb")
        except FileNotFoundError:
            raise BlobNotFoundError(f"{self.where}: {name} is missing") from None

    def exists(self, name: str) -> bool:
        return self._path(name).is_file()

    def size(self, name: str) -> int:
        return self._path(name).stat().st_size


class _TarSource(_Source):
    def __init__(self, path: Path) -> None:
        self.where = str(path)
        try:
            self.tar = tarfile.open(path, "r:*")  # noqa: SIM115
        except (*_BROKEN_ARCHIVE, OSError) as e:
            raise ImageError(f"{path}: not a tar archive: {e}") from None
        self.members: dict[str, tarfile.TarInfo] = {}
        try:
            for member in self.tar.getmembers():
                self.members[posixpath.normpath(member.name)] = member
        except _BROKEN_ARCHIVE as e:
            self.tar.close()
            raise ImageError(f"{path}: broken tar archive (truncated or corrupt): "
                             f"{e or type(e).__name__}") from None

    def _member(self, name: str) -> tarfile.TarInfo:
        key = _clean(name, self.where)
        for _ in range(16):  # follow symlinks inside the archive (old docker save links layers)
            member = self.members.get(key)
            if member is None:
                raise BlobNotFoundError(f"{self.where}: {name} is missing")
            if member.issym():
                key = _clean(posixpath.join(posixpath.dirname(key), member.linkname), self.where)
                continue
            if member.islnk():
                key = _clean(member.linkname, self.where)
                continue
            return member
        raise ImageError(f"{self.where}: too many links resolving {name}")

    def open(self, name: str) -> IO[bytes]:
        member = self._member(name)
        f = self.tar.extractfile(member)
        if f is None:
            raise ImageError(f"{self.where}: {name} is not a regular file")
        return f

    def exists(self, name: str) -> bool:
        try:
            self._member(name)
        except BlobNotFoundError:
            return False  # a link leaving the archive or a loop is an error, not "missing"
        return True

    def size(self, name: str) -> int:
        return self._member(name).size

    def close(self) -> None:
        self.tar.close()


def _chunks(f: IO[bytes]) -> Iterator[bytes]:
    with f:
        while chunk := f.read(_CHUNK):
            yield chunk


def _blob_name(digest: str) -> str:
    algorithm, _, hex_ = digest.partition(":")
    return f"blobs/{algorithm}/{hex_}"


def _copy(store: ImageStore, src: _Source, desc: Descriptor, where: str,
          progress: ProgressCallback | None) -> None:
    if store.has_blob(desc.digest):
        if progress:
            progress(Progress(desc.digest, "exists", desc.size, desc.size))
        return
    name = _blob_name(desc.digest)
    if not src.exists(name):
        raise BlobNotFoundError(f"blob {desc.digest} ({desc.media_type}) of {where} is missing "
                                f"from {src.where}")
    done = 0

    def moved(n: int) -> None:
        nonlocal done
        done += n
        if progress:
            progress(Progress(desc.digest, "copying", done, desc.size))

    store.ingest(desc.digest, desc.size, _chunks(src.open(name)), f" of {where}", moved)
    if progress:
        progress(Progress(desc.digest, "done", desc.size, desc.size))


def resolve_platform_manifest(
    read: Any, desc: Descriptor, platform: Platform, where: str
) -> tuple[Descriptor, list[Descriptor]]:
    """Follow indexes from ``desc`` down to the manifest for ``platform``.

    ``read(desc) -> bytes`` fetches a document. Returns the manifest descriptor and the
    index descriptors passed on the way (nested indexes are allowed, up to 8 deep).
    """
    chain: list[Descriptor] = []
    for _ in range(8):
        if desc.media_type in MANIFEST_TYPES:
            return desc, chain
        if desc.media_type not in INDEX_TYPES:
            raise UnsupportedMediaTypeError(
                f"{where}: unsupported media type {desc.media_type!r} for {desc.digest}"
            )
        chain.append(desc)
        index = parse_index(read(desc), desc.media_type, f"index {desc.digest} of {where}")
        child = select_platform(index, platform, f"index {desc.digest} of {where}")
        desc = child
    raise ImageError(f"{where}: indexes nested too deeply")


def _import_descriptor(store: ImageStore, src: _Source, desc: Descriptor, name: Reference,
                       platform: Platform, progress: ProgressCallback | None) -> Image:
    where = f"{name} in {src.where}"

    def read(d: Descriptor) -> bytes:
        _copy(store, src, d, where, None)
        return store.read_blob(d.digest, d.size, f" of {where}")

    manifest_desc, _ = resolve_platform_manifest(read, desc, platform, where)
    raw = read(manifest_desc)
    manifest = parse_manifest(raw, manifest_desc.media_type,
                              f"manifest {manifest_desc.digest} of {where}")
    for blob in (manifest.config, *manifest.layers):
        _copy(store, src, blob, where, progress)
    return store.build_image(name, desc, manifest_desc,
                             manifest_desc.platform if manifest_desc.platform else None)


def _entry_name(desc: Descriptor, ref: Reference | None, single: bool, where: str) -> Reference:
    """The name of a layout entry: an explicit ``ref`` (with tag) for a single image, else the
    entry's annotations, a tag-only annotation completed by ``ref``'s repository."""
    ann = desc.annotations or {}
    if ref is not None and single and (ref.tag or ref.digest):
        return ref
    full = ann.get(ANNOTATION_CONTAINERD_NAME)
    if full:
        return parse_reference(full)
    tagged = ann.get(ANNOTATION_REF_NAME)
    if tagged and ("/" in tagged or ":" in tagged):
        return parse_reference(tagged)
    if tagged:
        if ref is None:
            raise ReferenceError(
                f"{where}: entry {desc.digest} is named only by tag {tagged!r}: pass a reference"
            )
        return ref.with_tag(tagged)
    if ref is not None and single:
        return ref.with_tag("latest")
    raise ReferenceError(f"{where}: entry {desc.digest} has no name: pass a reference")


def _import_layout(store: ImageStore, src: _Source, ref: Reference | None, platform: Platform,
                   progress: ProgressCallback | None) -> list[Image]:
    layout = src.read_json("oci-layout")
    if not isinstance(layout, dict) or "imageLayoutVersion" not in layout:
        raise ImageError(f"{src.where}: oci-layout has no imageLayoutVersion")
    index = parse_index(json.dumps(src.read_json("index.json")).encode(), None,
                        f"{src.where}/index.json")
    entries = [d for d in index.manifests if d.media_type in MANIFEST_TYPES | INDEX_TYPES]
    if not entries:
        kinds = ", ".join(sorted({repr(d.media_type) for d in index.manifests}))
        if kinds:
            raise UnsupportedMediaTypeError(
                f"{src.where}: index.json lists no image podkit supports (media types {kinds})"
            )
        raise ImageError(f"{src.where}: index.json lists no images")
    images = []
    for desc in entries:
        name = _entry_name(desc, ref, len(entries) == 1, src.where)
        images.append(_import_descriptor(store, src, desc, name, platform, progress))
    return images


def _sniff_layer_type(head: bytes) -> str:
    if head.startswith(b"\x1f\x8b"):
        return MEDIA_TYPE_OCI_LAYER_GZIP
    if head.startswith(b"\x28\xb5\x2f\xfd"):
        return MEDIA_TYPE_OCI_LAYER_ZSTD
    return MEDIA_TYPE_OCI_LAYER


def _import_docker(store: ImageStore, src: _Source, ref: Reference | None,
                   progress: ProgressCallback | None) -> list[Image]:
    manifests = src.read_json("manifest.json")
    if not isinstance(manifests, list) or not manifests:
        raise ImageError(f"{src.where}: manifest.json must be a non-empty list")
    images = []
    for i, entry in enumerate(manifests):
        where = f"{src.where} manifest.json[{i}]"
        if not isinstance(entry, dict) or not isinstance(entry.get("Config"), str):
            raise ImageError(f"{where}: entry without Config")
        layers = entry.get("Layers")
        if not isinstance(layers, list) or not all(isinstance(p, str) for p in layers):
            raise ImageError(f"{where}: Layers must be a list of paths")
        tags = entry.get("RepoTags") or []
        try:
            names = [parse_reference(t) for t in tags if isinstance(t, str)]
        except ReferenceError as e:
            raise ReferenceError(f"{where}: RepoTags: {e}") from None
        if ref is not None:
            names = [ref if ref.tag or ref.digest else ref.with_tag("latest")]
        if not names:
            raise ReferenceError(f"{where}: image has no RepoTags: pass a reference")
        with src.open(entry["Config"]) as f:
            config_raw = f.read(_MAX_JSON + 1)
        if len(config_raw) > _MAX_JSON:
            raise ImageError(f"{where}: config {entry['Config']} is too big for a JSON document")
        config_digest = store.put_blob(config_raw, f" (config of {where})")
        layer_descs = []
        for path in layers:
            with src.open(path) as f:
                head = f.read(4)
            media_type = _sniff_layer_type(head)
            size = src.size(path)
            if progress:
                progress(Progress(path, "copying", 0, size))
            digest, size = store.put_stream(_chunks(src.open(path)), f" (layer {path} of {where})")
            if progress:
                progress(Progress(path, "done", size, size))  # one key per blob: its path
            layer_descs.append(Descriptor(media_type, digest, size))
        manifest = {
            "schemaVersion": 2,
            "mediaType": MEDIA_TYPE_OCI_MANIFEST,
            "config": Descriptor(MEDIA_TYPE_OCI_CONFIG, config_digest, len(config_raw)).to_dict(),
            "layers": [d.to_dict() for d in layer_descs],
        }
        raw = json.dumps(manifest, separators=(",", ":")).encode()
        man_digest = store.put_blob(raw, f" (manifest of {where})")
        man_desc = Descriptor(MEDIA_TYPE_OCI_MANIFEST, man_digest, len(raw))
        for name in names:
            images.append(store.build_image(name, man_desc, man_desc))
    return images


def import_image(store: ImageStore, path: str | os.PathLike[str], ref: str | None = None, *,
                 platform: Platform | None = None,
                 progress: ProgressCallback | None = None) -> list[Image]:
    """Import every image of a layout directory, OCI archive or ``docker save`` archive.

    ``ref`` names a single image (``name:tag``); without a tag it gives the repository for
    entries annotated with only a tag (``org.opencontainers.image.ref.name``). Returns the
    images recorded, one per entry (one per tag of a ``docker save`` entry), in the archive's
    order. Raises ``ImageError`` subclasses naming the archive, reference and digest.
    """
    src_path = Path(path)
    want = platform or host_platform()
    base = parse_reference(ref, default_tag=False) if ref is not None else None
    if not src_path.exists():
        raise ImageError(f"cannot import {src_path}: no such file or directory")
    with store.hold():
        source: _Source = _DirSource(src_path) if src_path.is_dir() else _TarSource(src_path)
        try:
            if source.exists("manifest.json"):
                images = _import_docker(store, source, base, progress)
            elif source.exists("oci-layout"):
                images = _import_layout(store, source, base, want, progress)
            else:
                raise ImageError(
                    f"{src_path}: neither an OCI layout (oci-layout, index.json) nor a "
                    "docker save archive (manifest.json)"
                )
        except _BROKEN_ARCHIVE as e:
            raise ImageError(f"{src_path}: broken archive (truncated or corrupt): "
                             f"{e or type(e).__name__}") from None
        finally:
            if isinstance(source, _TarSource):
                with contextlib.suppress(Exception):
                    source.close()
        for image in images:
            store.put(image)
    return images
