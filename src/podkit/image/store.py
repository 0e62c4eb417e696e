"""``ImageStore``: a content-addressed blob store plus image records, safe across processes.

Layout under ``<root>/image/`` (``root`` is the podkit state root, ``/var/lib/podkit`` by
default, shared with the CRI server)::

    blobs/sha256/<hex>        verified content (manifests, configs, layers)
    ingest/sha256-<hex>.partial  downloads in progress (kept to resume an interrupted pull)
    images/<sha256 of name>.json  one record per reference (atomic JSON)
    snapshots/<chain-id hex>/  unpacked layers (see ``podkit.image.unpack``)
    containers/<id>/          per-container rootfs state (upper/work dirs, mount metadata)
    locks/                    flock files: ``gc.lock`` (shared by writers, exclusive for gc),
                              ``ingest-<hex>.lock`` (one writer per blob)

Blobs are written to a temp file, hashed, checked against digest and size, then renamed into
place; a blob is hashed again whenever it is read. Every writer holds ``gc.lock`` shared, so
``gc()`` (exclusive) never deletes what a concurrent import or pull is about to reference.
"""

from __future__ import annotations

import builtins
import contextlib
import datetime
import hashlib
import io
import json
import os
import shutil
import tempfile
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

import attrs

from podkit import _linux
from podkit._files import atomic_write, file_lock, fsync_dir, make_dirs
from podkit.errors import quote
from podkit.image.descriptor import (
    INDEX_TYPES,
    MANIFEST_TYPES,
    Descriptor,
    Platform,
    parse_index,
    parse_manifest,
)
from podkit.image.errors import (
    BlobNotFoundError,
    DigestMismatchError,
    ImageError,
    ImageNotFoundError,
)
from podkit.image.lookup import MIN_ID_PREFIX, ImageQuery
from podkit.image.reference import Reference, parse_digest, parse_reference
from podkit.image.usage import DiskUsage, disk_usage

if TYPE_CHECKING:
    from podkit.image.config import ImageConfig

__all__ = ["BlobWriter", "GCResult", "Image", "ImageStore", "StreamWriter", "VerifyingReader",
           "chain_ids"]

_CHUNK = 1 << 20
_MAX_JSON_BLOB = 8 << 20
_WRITEBACK = 4 << 20


def _start_writeback(fd: int, offset: int, length: int) -> None:
    """Ask the kernel to start writing a range back (``sync_file_range``, async, best effort)."""
    _linux.start_writeback(fd, offset, length)


def chain_ids(diff_ids: Iterable[str]) -> list[str]:
    """The OCI ChainIDs of a layer stack: ``chain(n) = sha256(chain(n-1) + " " + diff(n))``."""
    out: list[str] = []
    for diff_id in diff_ids:
        if not out:
            out.append(diff_id)
        else:
            out.append("sha256:" + hashlib.sha256(f"{out[-1]} {diff_id}".encode()).hexdigest())
    return out


def _hex(digest: str) -> str:
    parse_digest(digest)
    algorithm, _, hex_ = digest.partition(":")
    if algorithm != "sha256":
        raise ImageError(f"unsupported digest algorithm in {digest}: only sha256 is stored")
    return hex_


@attrs.frozen(slots=True)
class Image:
    """An image record: its name, the descriptor it points to, and this platform's image.

    ``target`` is what the reference resolved to (an index or a manifest); ``manifest`` is the
    platform manifest chosen from it; ``layers`` (base first), ``diff_ids`` and ``chain_ids``
    describe the filesystem; ``config`` the image configuration blob.
    """

    name: str
    target: Descriptor
    manifest: Descriptor
    config: Descriptor
    layers: tuple[Descriptor, ...]
    diff_ids: tuple[str, ...]
    platform: Platform | None
    created: str

    @property
    def chain_ids(self) -> list[str]:
        """The snapshot keys of this image's layers, base first."""
        return chain_ids(self.diff_ids)

    @property
    def size(self) -> int:
        """Bytes of the compressed layers plus the config and manifest."""
        return self.manifest.size + self.config.size + sum(layer.size for layer in self.layers)

    def to_dict(self) -> dict[str, Any]:
        """The record as stored on disk (camelCase keys)."""
        return {
            "name": self.name,
            "target": self.target.to_dict(),
            "manifest": self.manifest.to_dict(),
            "config": self.config.to_dict(),
            "layers": [layer.to_dict() for layer in self.layers],
            "diffIds": list(self.diff_ids),
            "platform": self.platform.to_dict() if self.platform else None,
            "created": self.created,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any], where: str) -> Image:
        """Parse a stored record; ``where`` names the file for errors."""
        try:
            plat = data.get("platform")
            return cls(
                name=str(data["name"]),
                target=Descriptor.from_dict(data["target"], f"{where} target"),
                manifest=Descriptor.from_dict(data["manifest"], f"{where} manifest"),
                config=Descriptor.from_dict(data["config"], f"{where} config"),
                layers=tuple(
                    Descriptor.from_dict(d, f"{where} layers") for d in data["layers"]
                ),
                diff_ids=tuple(str(d) for d in data["diffIds"]),
                platform=Platform(plat["os"], plat["architecture"], plat.get("variant"))
                if isinstance(plat, dict)
                else None,
                created=str(data.get("created", "")),
            )
        except (KeyError, TypeError) as e:
            raise ImageError(f"corrupt image record {where}: {e!r}") from None


@attrs.frozen(slots=True)
class GCResult:
    """What ``ImageStore.gc()`` removed."""

    blobs: tuple[str, ...]
    snapshots: tuple[str, ...]
    bytes_freed: int


class VerifyingReader(io.RawIOBase):
    """A read-only stream over a stored blob that hashes what it yields.

    At end of file the digest and size are checked; a mismatch raises
    :class:`DigestMismatchError` naming the blob, so corrupt content is never trusted.
    """

    def __init__(self, path: Path, digest: str, size: int | None, where: str) -> None:
        super().__init__()
        self._f: io.BufferedReader = open(path, "rb")  # noqa: SIM115
        self._hash = hashlib.sha256()
        self._digest = digest
        self._size = size
        self._seen = 0
        self._where = where
        self._checked = False

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        n = self._f.readinto(buffer)
        if n:
            self._hash.update(memoryview(buffer)[:n])
            self._seen += n
        elif not self._checked:
            self.verify()
        return n or 0

    def verify(self) -> None:
        """Check digest and size of everything read so far (called at EOF automatically)."""
        self._checked = True
        actual = "sha256:" + self._hash.hexdigest()
        if self._size is not None and self._seen != self._size:
            raise DigestMismatchError(
                f"blob {self._digest}{self._where}: size {self._seen}, expected {self._size}"
            )
        if actual != self._digest:
            raise DigestMismatchError(f"blob {self._digest}{self._where}: content is {actual}")

    def close(self) -> None:
        self._f.close()
        super().close()


class BlobWriter:
    """Writes one blob into the store: temp ``.partial`` file, hash, verify, rename.

    With ``resume`` an existing partial file is kept and hashed first (``offset`` tells how
    many bytes are already there), so an interrupted download continues where it stopped.
    Use under ``ImageStore.ingest_lock(digest)``.
    """

    def __init__(self, store: ImageStore, digest: str, size: int | None, where: str,
                 *, resume: bool = False) -> None:
        self._store = store
        self.digest = digest
        self.size = size
        self._where = where
        self.path = store._ingest_path(digest)
        self._hash = hashlib.sha256()
        self.offset = 0
        if resume and self.path.exists():
            with open(self.path, "rb") as f:
                while chunk := f.read(_CHUNK):
                    self._hash.update(chunk)
                    self.offset += len(chunk)
            if size is not None and self.offset > size:
                self.offset = 0
                self._hash = hashlib.sha256()
                self.path.unlink()
        elif self.path.exists():
            self.path.unlink()
        self._f: BinaryIO = open(self.path, "ab")  # noqa: SIM115
        self._flushed = self.offset

    def write(self, data: bytes) -> None:
        """Append ``data``; refuses to grow past the expected size."""
        self.offset += len(data)
        if self.size is not None and self.offset > self.size:
            self.discard()
            raise DigestMismatchError(
                f"blob {self.digest}{self._where}: more than the expected {self.size} bytes"
            )
        self._hash.update(data)
        self._f.write(data)
        if self.offset - self._flushed >= _WRITEBACK:
            # start writing back what we have so the fdatasync at commit has little left
            self._f.flush()
            _start_writeback(self._f.fileno(), self._flushed, self.offset - self._flushed)
            self._flushed = self.offset

    def restart(self) -> None:
        """Drop what was written (the source could not resume) and start from byte 0."""
        self._f.truncate(0)
        self._f.seek(0)
        self._hash = hashlib.sha256()
        self.offset = 0
        self._flushed = 0

    def commit(self, *, sync_dir: bool = True) -> None:
        """Verify size and digest, then move the blob into place (idempotent for equal data)."""
        self._f.flush()
        os.fdatasync(self._f.fileno())  # the data must be durable before the rename
        self._f.close()
        actual = "sha256:" + self._hash.hexdigest()
        if self.size is not None and self.offset != self.size:
            self.discard()
            raise DigestMismatchError(
                f"blob {self.digest}{self._where}: got {self.offset} bytes, expected {self.size}"
                " (truncated)"
            )
        if actual != self.digest:
            self.discard()
            raise DigestMismatchError(f"blob {self.digest}{self._where}: content is {actual}")
        dest = self._store.blob_path(self.digest)
        os.chmod(self.path, 0o444)
        os.replace(self.path, dest)
        if sync_dir:
            fsync_dir(dest.parent)

    def keep(self) -> None:
        """Close, keeping the partial file so a later attempt resumes from it."""
        if not self._f.closed:
            self._f.flush()
            self._f.close()

    def discard(self) -> None:
        """Close and delete the partial file."""
        if not self._f.closed:
            self._f.close()
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()


class StreamWriter:
    """A blob of content not known in advance, written to a temp file of the store's
    ``ingest`` dir and hashed as it goes; see :meth:`ImageStore.stream`."""

    def __init__(self, store: ImageStore) -> None:
        self._store = store
        fd, self._tmp = tempfile.mkstemp(dir=store.root / "ingest", prefix=".stream-")
        self._f: BinaryIO = os.fdopen(fd, "wb")
        self._hash = hashlib.sha256()
        self.size = 0
        self.digest = ""

    def write(self, data: bytes) -> int:
        """Append ``data`` (a file object's ``write``: the number of bytes)."""
        self._hash.update(data)
        self.size += len(data)
        self._f.write(data)
        return len(data)

    def commit(self) -> None:
        """Make the content durable and move it into place as ``sha256:<its hash>``."""
        self._f.flush()
        os.fsync(self._f.fileno())
        self._f.close()
        digest = "sha256:" + self._hash.hexdigest()
        with self._store.ingest_lock(digest):
            if not self._store.has_blob(digest):
                os.chmod(self._tmp, 0o444)
                os.replace(self._tmp, self._store.blob_path(digest))
                fsync_dir(self._store.blob_path(digest).parent)
        self.digest = digest

    def discard(self) -> None:
        """Close and delete the temp file (nothing once committed)."""
        if not self._f.closed:
            self._f.close()
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self._tmp)


class ImageStore:
    """Blobs, image records, snapshots and container rootfs state under ``<root>/image``.

    Safe for concurrent use by several threads and processes: records are atomic files,
    blob writes are serialised per digest by ``flock`` and land by rename, and ``gc()`` is
    excluded while any writer holds the store.
    """

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root) / "image"
        make_dirs(self.root, 0o711)  # the root and the store: others may pass, never list
        for sub in ("blobs/sha256", "ingest", "images", "snapshots", "containers", "locks"):
            (self.root / sub).mkdir(parents=True, exist_ok=True)

    # -- locks -----------------------------------------------------------------------------

    @contextlib.contextmanager
    def hold(self) -> Iterator[None]:
        """Hold the store against ``gc()`` while adding blobs, records or snapshots."""
        with file_lock(self.root / "locks" / "gc.lock", shared=True):
            yield

    @contextlib.contextmanager
    def ingest_lock(self, digest: str) -> Iterator[None]:
        """Serialise writers of one blob across threads and processes."""
        with file_lock(self.root / "locks" / f"ingest-{_hex(digest)}.lock"):
            yield

    # -- blobs -----------------------------------------------------------------------------

    def blob_path(self, digest: str) -> Path:
        """Where the blob ``digest`` lives (whether or not it exists yet)."""
        return self.root / "blobs" / "sha256" / _hex(digest)

    def _ingest_path(self, digest: str) -> Path:
        return self.root / "ingest" / f"sha256-{_hex(digest)}.partial"

    def has_blob(self, digest: str) -> bool:
        """True if the blob is stored (it was verified when written)."""
        return self.blob_path(digest).is_file()

    def sync(self) -> None:
        """fsync the blobs dir: makes renames of ``commit(sync_dir=False)`` durable."""
        fsync_dir(self.root / "blobs" / "sha256")

    def writer(self, digest: str, size: int | None, where: str = "",
               *, resume: bool = False) -> BlobWriter:
        """A :class:`BlobWriter` for ``digest``; hold ``ingest_lock(digest)`` while using it."""
        return BlobWriter(self, digest, size, where, resume=resume)

    def ingest(self, digest: str, size: int | None, chunks: Iterable[bytes],
               where: str = "", progress: Callable[[int], None] | None = None) -> bool:
        """Store a blob from ``chunks`` unless present; returns True if it was written.

        The content is verified against ``digest`` and ``size`` before it becomes visible;
        on any error nothing is left behind.
        """
        with self.ingest_lock(digest):
            if self.has_blob(digest):
                return False
            w = self.writer(digest, size, where)
            try:
                for chunk in chunks:
                    w.write(chunk)
                    if progress is not None:
                        progress(len(chunk))
                w.commit()
            except BaseException:
                w.discard()
                raise
            return True

    @contextlib.contextmanager
    def stream(self) -> Iterator[StreamWriter]:
        """Store content whose digest is not known in advance, written to the yielded
        :class:`StreamWriter`: on a clean exit it is stored and its ``digest`` and ``size``
        are set; on an error nothing is left behind."""
        writer = StreamWriter(self)
        try:
            yield writer
            writer.commit()
        finally:
            writer.discard()

    def put_stream(self, chunks: Iterable[bytes], where: str = "") -> tuple[str, int]:
        """Store content whose digest is not known in advance; returns ``(digest, size)``."""
        with self.stream() as w:
            for chunk in chunks:
                w.write(chunk)
        return w.digest, w.size

    def put_blob(self, data: bytes, where: str = "") -> str:
        """Store small content (a manifest or config) and return its digest."""
        digest = "sha256:" + hashlib.sha256(data).hexdigest()
        self.ingest(digest, len(data), [data], where)
        return digest

    def open_blob(self, digest: str, size: int | None = None, where: str = "") -> VerifyingReader:
        """Open a stored blob for streaming; the digest is checked when EOF is reached."""
        path = self.blob_path(digest)
        if not path.is_file():
            raise BlobNotFoundError(f"blob {digest}{where} is not in the store {self.root}")
        return VerifyingReader(path, digest, size, where)

    def read_blob(self, digest: str, size: int | None = None, where: str = "") -> bytes:
        """The verified bytes of a small stored blob (manifests, configs, indexes)."""
        if size is not None and size > _MAX_JSON_BLOB:
            raise ImageError(f"blob {digest}{where}: {size} bytes is too big for a JSON document")
        with self.open_blob(digest, size, where) as r:
            data = r.read(_MAX_JSON_BLOB + 1)
            if len(data) > _MAX_JSON_BLOB:
                raise ImageError(f"blob {digest}{where}: too big for a JSON document")
            r.read()
        return data

    # -- records ---------------------------------------------------------------------------

    def _record_path(self, name: str) -> Path:
        return self.root / "images" / (hashlib.sha256(name.encode()).hexdigest() + ".json")

    def build_image(self, name: Reference | str, target: Descriptor, manifest: Descriptor,
                    platform: Platform | None = None) -> Image:
        """Make an :class:`Image` from stored manifest and config blobs (not yet recorded)."""
        ref = name if isinstance(name, Reference) else parse_reference(name)
        where = f" of {ref}"
        raw = self.read_blob(manifest.digest, manifest.size, f" (manifest{where})")
        man = parse_manifest(raw, manifest.media_type, f"manifest {manifest.digest}{where}")
        config_raw = self.read_blob(man.config.digest, man.config.size, f" (config{where})")
        try:
            config = json.loads(config_raw)
            diff_ids = config["rootfs"]["diff_ids"]
        except (ValueError, KeyError, TypeError):
            raise ImageError(
                f"config {man.config.digest}{where}: no rootfs.diff_ids"
            ) from None
        if not isinstance(diff_ids, list) or len(diff_ids) != len(man.layers):
            raise ImageError(
                f"config {man.config.digest}{where}: {len(diff_ids)} diff_ids for "
                f"{len(man.layers)} layers"
            )
        for d in diff_ids:
            parse_digest(str(d), where=f"diff_id in config {man.config.digest}{where}")
        if platform is None and isinstance(config.get("os"), str):
            platform = Platform(config["os"], str(config.get("architecture", "")),
                                config.get("variant"))
        now = datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")
        return Image(str(ref), target, manifest, man.config, man.layers,
                     tuple(str(d) for d in diff_ids), platform, now)

    def put(self, image: Image) -> Image:
        """Record ``image`` under its name (replacing an older record atomically)."""
        atomic_write(self._record_path(image.name), json.dumps(image.to_dict(), indent=2) + "\n")
        return image

    def _read(self, name: str) -> Image | None:
        """The record stored under the normalised ``name``; ``None`` when there is none."""
        path = self._record_path(name)
        try:
            data = json.loads(path.read_text())
        except FileNotFoundError:
            return None
        except ValueError as e:
            raise ImageError(f"corrupt image record {path} for {name}: {e}") from None
        return Image.from_dict(data, str(path))

    def resolve(self, ref: Reference | str) -> builtins.list[Image]:
        """Every record ``ref`` names, sorted by name (see :mod:`podkit.image.lookup`).

        ``ref`` may be a name (``busybox``, ``REPO:TAG``), ``REPO@DIGEST``,
        ``REPO:TAG@DIGEST``, the image ID (``sha256:<hex>`` or the hex alone) or a unique
        prefix of it, or an index or manifest digest. :class:`ImageNotFoundError` when it names
        nothing; ``ReferenceError`` when it can name nothing (``AmbiguousImageError`` for an
        ID prefix several images share).
        """
        query = ImageQuery.parse(ref)
        if query.reference is not None and query.reference.digest is None:
            record = self._read(str(query.reference))  # a tag: one file, no listing
            if record is not None:
                return [record]
            if query.id_prefix is None:
                raise ImageNotFoundError(self._not_found(query))
        found = query.match(self.list())
        if not found:
            raise ImageNotFoundError(self._not_found(query))
        return found

    def _not_found(self, query: ImageQuery) -> str:
        what = query.digest or (str(query.reference) if query.reference else quote(query.text))
        text = f"image {what} not found in {self.root}"
        if query.id_prefix:
            text += f", nor an image ID starting with {query.id_prefix}"
        elif query.reference is None and query.digest is None:
            text += f" (an image ID prefix has at least {MIN_ID_PREFIX} hex digits)"
        return text

    def get(self, ref: Reference | str) -> Image:
        """The image record ``ref`` names (the first by name when it names several: an ID),
        else :class:`ImageNotFoundError`; the forms are those of :meth:`resolve`."""
        return self.resolve(ref)[0]

    def list(self) -> builtins.list[Image]:
        """Every image record, sorted by name."""
        out = []
        for path in (self.root / "images").glob("*.json"):
            try:
                data = json.loads(path.read_text())
            except FileNotFoundError:
                continue
            except ValueError as e:
                raise ImageError(f"corrupt image record {path}: {e}") from None
            out.append(Image.from_dict(data, str(path)))
        return sorted(out, key=lambda i: i.name)

    def remove(self, ref: Reference | str | Image) -> builtins.list[Image]:
        """Delete every record ``ref`` names (an :class:`Image`: that record; blobs stay until
        ``gc()``); returns what was removed, :class:`ImageNotFoundError` when nothing."""
        images = [ref] if isinstance(ref, Image) else self.resolve(ref)
        removed = []
        for image in images:
            path = self._record_path(image.name)
            with contextlib.suppress(FileNotFoundError):
                path.unlink()
                removed.append(image)
        if not removed:
            raise ImageNotFoundError(f"image {images[0].name} not found in {self.root}")
        fsync_dir(self.root / "images")
        return removed

    def tag(self, src: Reference | str, dst: Reference | str) -> Image:
        """Record the image of ``src`` under the name ``dst`` as well."""
        image = self.get(src)
        name = str(dst if isinstance(dst, Reference) else parse_reference(dst))
        return self.put(attrs.evolve(image, name=name))

    def config(self, ref: Reference | str | Image) -> ImageConfig:
        """The parsed image configuration (env, entrypoint, cmd, user, ...) of ``ref``."""
        from podkit.image.config import parse_config

        image = ref if isinstance(ref, Image) else self.get(ref)
        raw = self.read_blob(image.config.digest, image.config.size, f" (config of {image.name})")
        return parse_config(raw, f"config {image.config.digest} of {image.name}")

    # -- garbage collection ----------------------------------------------------------------

    def _children(self, desc: Descriptor) -> builtins.list[Descriptor]:
        if not self.has_blob(desc.digest):
            return []
        where = f" (referenced by the store, {desc.media_type})"
        try:
            if desc.media_type in INDEX_TYPES:
                raw = self.read_blob(desc.digest, desc.size, where)
                return list(parse_index(raw, desc.media_type, desc.digest).manifests)
            if desc.media_type in MANIFEST_TYPES:
                raw = self.read_blob(desc.digest, desc.size, where)
                man = parse_manifest(raw, desc.media_type, desc.digest)
                return [man.config, *man.layers]
        except ImageError:
            return []
        return []

    def usage(self) -> DiskUsage:
        """Disk used by content (blobs, downloads in progress) and snapshots, as ``du -x``
        counts it, and the mount point of the filesystem they are on."""
        return disk_usage([self.root / d for d in ("blobs", "ingest", "snapshots")], self.root)

    def in_use_snapshots(self) -> set[str]:
        """Chain IDs referenced by container rootfs state (see ``podkit.image.unpack``)."""
        used: set[str] = set()
        for meta in (self.root / "containers").glob("*/rootfs.json"):
            try:
                used.update(json.loads(meta.read_text()).get("chainIds", []))
            except (FileNotFoundError, ValueError):
                continue
        return used

    def gc(self) -> GCResult:
        """Delete blobs and snapshots no image record (or container rootfs) references.

        Also drops abandoned partial downloads. Excludes every concurrent writer while it runs.
        """
        with file_lock(self.root / "locks" / "gc.lock"):
            live_blobs: set[str] = set()
            live_snaps: set[str] = set(self.in_use_snapshots())
            for image in self.list():
                todo = [image.target, image.manifest, image.config, *image.layers]
                while todo:
                    desc = todo.pop()
                    if desc.digest in live_blobs:
                        continue
                    live_blobs.add(desc.digest)
                    todo.extend(self._children(desc))
                live_snaps.update(image.chain_ids)
            removed: builtins.list[str] = []
            freed = 0
            for path in (self.root / "blobs" / "sha256").iterdir():
                digest = f"sha256:{path.name}"
                if digest not in live_blobs:
                    with contextlib.suppress(FileNotFoundError):
                        freed += path.stat().st_size
                        path.unlink()
                        removed.append(digest)
            for path in (self.root / "ingest").iterdir():
                with contextlib.suppress(FileNotFoundError):
                    freed += path.stat().st_size
                    path.unlink()
            snaps: builtins.list[str] = []
            snap_root = self.root / "snapshots"
            for path in snap_root.iterdir():
                if path.name.startswith("."):
                    shutil.rmtree(path, ignore_errors=True)  # leftovers of a crashed unpack
                    continue
                if f"sha256:{path.name}" in live_snaps:
                    continue
                trash = Path(tempfile.mkdtemp(dir=snap_root, prefix=".gc-"))
                os.rename(path, trash / "snap")
                shutil.rmtree(trash)
                snaps.append(f"sha256:{path.name}")
            fsync_dir(snap_root)
            return GCResult(tuple(sorted(removed)), tuple(sorted(snaps)), freed)
