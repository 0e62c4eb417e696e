"""The libcni-compatible result cache (``<cache_dir>/results/<network>-<id>-<ifname>``).

The file is the same JSON document libcni writes (``kind: cniCacheV1``, the list file bytes in
base64, CNI args, capability args, final result), so cnitool/containerd and podkit can read each
other's entries. podkit writes it atomically (temp + fsync + rename), reads a bare legacy result
too, and never lets a corrupt or empty entry block teardown. Operations on one attachment are
serialised across processes by a lock file under ``<cache_dir>/locks``.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import fcntl
import hashlib
import os
import struct
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs

from podkit import _files
from podkit.cni._wire import go_dumps, loads_object
from podkit.cni.types import ERR_DECODING_FAILURE, AnyResult, CNIError, parse_result
from podkit.errors import InvalidArgumentError

__all__ = [
    "CACHE_KIND",
    "CacheError",
    "CachedAttachment",
    "ResultCache",
    "converted_result",
    "encode_entry",
]

CACHE_KIND = "cniCacheV1"
"""The ``kind`` of a cache document (libcni ``CNICacheV1``): files podkit and libcni share."""


class CacheError(CNIError):
    """A cache entry that cannot be read (empty, garbage, wrong kind, bad result)."""

    def __init__(self, msg: str, path: str | None = None) -> None:
        super().__init__(ERR_DECODING_FAILURE, msg)
        self.path = path


@attrs.frozen
class CachedAttachment:
    """One cache entry (libcni ``NetworkAttachment`` plus the cached result document)."""

    container_id: str
    network: str
    ifname: str
    config: bytes = attrs.field(repr=False)
    netns: str = ""
    cni_args: tuple[tuple[str, str], ...] = ()
    capability_args: Mapping[str, Any] = attrs.field(factory=dict)
    result: Mapping[str, Any] | None = None
    path: str | None = None

    def parsed_result(self) -> AnyResult | None:
        """The cached result as a model (version auto-detected), or ``None``."""
        if self.result is None:
            return None
        return parse_result(self.result)


def converted_result(entry: CachedAttachment, version: str) -> AnyResult | None:
    """The entry's result converted to ``version`` (``None`` if it holds none).

    Raises ``CacheError`` naming the file when the result cannot be parsed or converted.
    """
    if entry.result is None:
        return None
    try:
        result = parse_result(entry.result)
    except CNIError as e:
        raise CacheError(f"decoding cached result: {e.msg}", entry.path) from None
    try:
        return result.to_version(version)
    except CNIError as e:
        raise CacheError(f'failed to convert cached result to config version "{version}": '
                         f"{e.msg}", entry.path) from None


def encode_entry(
    *,
    container_id: str,
    network: str,
    ifname: str,
    config: bytes,
    netns: str = "",
    cni_args: Sequence[tuple[str, str]] = (),
    capability_args: Mapping[str, Any] | None = None,
    result: AnyResult | Mapping[str, Any] | None = None,
) -> bytes:
    """The cache document, byte for byte as libcni's ``json.Marshal`` of ``cachedInfo``."""
    doc: dict[str, Any] = {
        "kind": CACHE_KIND,
        "containerId": container_id,
        "config": base64.b64encode(config).decode(),
        "ifName": ifname,
        "networkName": network,
    }
    if netns:
        doc["netns"] = netns
    if cni_args:
        doc["cniArgs"] = [[k, v] for k, v in cni_args]
    if capability_args:
        doc["capabilityArgs"] = _sorted(capability_args)
    if result is not None:
        doc["result"] = _sorted(result if isinstance(result, Mapping) else result.to_dict())
    return go_dumps(doc, sort_keys=False)


def _sorted(obj: Any) -> Any:
    if isinstance(obj, Mapping):
        return {k: _sorted(obj[k]) for k in sorted(obj)}
    if isinstance(obj, (list, tuple)):
        return [_sorted(v) for v in obj]
    return obj


def _decode_entry(data: bytes, path: str) -> CachedAttachment | None:
    """The entry if ``data`` is a cniCacheV1 document, ``None`` if it is something else."""
    try:
        doc = loads_object(data)
    except ValueError:
        return None
    if doc.get("kind") != CACHE_KIND:
        return None
    try:
        raw_args = doc.get("cniArgs") or []
        args = tuple((str(k), str(v)) for k, v in raw_args)
        config = base64.b64decode(doc.get("config") or "", validate=True)
        caps = doc.get("capabilityArgs") or {}
        result = doc.get("result")
        if not isinstance(caps, dict) or not (result is None or isinstance(result, dict)):
            return None
        return CachedAttachment(
            container_id=str(doc.get("containerId") or ""), network=str(doc.get("networkName")
                                                                        or ""),
            ifname=str(doc.get("ifName") or ""), config=config, netns=str(doc.get("netns") or ""),
            cni_args=args, capability_args=caps, result=result, path=path,
        )
    except (TypeError, ValueError, binascii.Error):
        return None


def _flock(kind: int, offset: int) -> bytes:
    """A ``struct flock`` for one byte at ``offset`` (l_pid 0, as OFD locks require)."""
    return struct.pack("hhqqi4x", kind, os.SEEK_SET, offset, 1, 0)


def _offset(domain: str, name: str) -> int:
    digest = hashlib.blake2b(f"{domain}:{name}".encode(), digest_size=6).digest()
    return int.from_bytes(digest, "big")


def _write_durably(target: Path, data: bytes) -> None:
    """temp file + fdatasync + rename + directory fsync: readers see old or new, never part."""
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    try:
        try:
            _write_all(fd, data)
            os.fdatasync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    _files.fsync_dir(target.parent)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


class ResultCache:
    """The result cache under ``cache_dir`` (libcni default ``/var/lib/cni``)."""

    def __init__(self, cache_dir: str | os.PathLike[str] = "/var/lib/cni") -> None:
        self.cache_dir = Path(cache_dir)

    @property
    def results_dir(self) -> Path:
        """``<cache_dir>/results``."""
        return self.cache_dir / "results"

    def path(self, network: str, container_id: str, ifname: str) -> Path:
        """The entry's file; all three parts must be non-empty and free of separators."""
        if not network or not container_id or not ifname:
            raise InvalidArgumentError(
                f'cache file path requires network name ("{network}"), container ID '
                f'("{container_id}"), and interface name ("{ifname}")')
        return _files.safe_join(self.results_dir, f"{network}-{container_id}-{ifname}")

    def _lock_fd(self) -> int:
        locks = self.cache_dir / "locks"
        path = locks / "attachments.lock"
        try:
            return os.open(path, os.O_RDWR | os.O_CLOEXEC)
        except FileNotFoundError:
            locks.mkdir(parents=True, exist_ok=True, mode=0o700)
            return os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)

    @contextlib.contextmanager
    def lock(self, network: str, container_id: str, ifname: str) -> Iterator[None]:
        """Hold the attachment's cross-process (and cross-thread) lock for the ``with`` block.

        One byte of ``<cache_dir>/locks/attachments.lock``, at an offset hashed from the
        attachment, is locked with an open-file-description lock: no file per attachment is
        ever created or left behind, and a hash collision only serialises a little more. The
        network's byte is held shared at the same time, so ``network_lock`` (GC) excludes it.
        """
        name = self.path(network, container_id, ifname).name
        fd = self._lock_fd()
        try:
            fcntl.fcntl(fd, fcntl.F_OFD_SETLKW, _flock(fcntl.F_RDLCK, _offset("n", network)))
            fcntl.fcntl(fd, fcntl.F_OFD_SETLKW, _flock(fcntl.F_WRLCK, _offset("a", name)))
            yield
        finally:
            os.close(fd)  # closing the description releases its locks

    @contextlib.contextmanager
    def network_lock(self, network: str) -> Iterator[None]:
        """Hold ``network`` exclusively: no ADD/CHECK/DEL of it runs meanwhile (for GC)."""
        fd = self._lock_fd()
        try:
            fcntl.fcntl(fd, fcntl.F_OFD_SETLKW, _flock(fcntl.F_WRLCK, _offset("n", network)))
            yield
        finally:
            os.close(fd)

    def write(self, network: str, container_id: str, ifname: str, *, config: bytes,
              netns: str = "", cni_args: Sequence[tuple[str, str]] = (),
              capability_args: Mapping[str, Any] | None = None,
              result: AnyResult | None = None) -> Path:
        """Write the entry atomically (mode 0600, dir 0700)."""
        target = self.path(network, container_id, ifname)
        self.results_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        data = encode_entry(container_id=container_id, network=network, ifname=ifname,
                            config=config, netns=netns, cni_args=cni_args,
                            capability_args=capability_args, result=result)
        _write_durably(target, data)
        return target

    def read(self, network: str, container_id: str, ifname: str) -> CachedAttachment | None:
        """The entry, ``None`` if absent; a bare legacy result gives an entry with no config.

        Raises ``CacheError`` for an empty or unparsable file.
        """
        target = self.path(network, container_id, ifname)
        try:
            data = target.read_bytes()
        except FileNotFoundError:
            return None
        except OSError as e:
            raise CacheError(f"failed to read cache file {target}: {e.strerror}",
                             str(target)) from None
        entry = _decode_entry(data, str(target))
        if entry is not None:
            return entry
        try:
            legacy = loads_object(data)
        except ValueError as e:
            raise CacheError(f"decoding version from network config: {e}", str(target)) from None
        return CachedAttachment(container_id=container_id, network=network, ifname=ifname,
                                config=b"", result=legacy, path=str(target))

    def read_result(self, network: str, container_id: str, ifname: str,
                    version: str) -> AnyResult | None:
        """The cached result converted to ``version`` (``None`` if there is no entry)."""
        entry = self.read(network, container_id, ifname)
        return None if entry is None else converted_result(entry, version)

    def remove(self, network: str, container_id: str, ifname: str) -> bool:
        """Delete the entry; ``False`` if there was none."""
        target = self.path(network, container_id, ifname)
        try:
            target.unlink()
        except FileNotFoundError:
            return False
        with contextlib.suppress(OSError):
            _files.fsync_dir(target.parent)
        return True

    def attachments(self, container_id: str = "") -> list[CachedAttachment]:
        """Every readable cniCacheV1 entry (for one container if given), sorted by file name."""
        try:
            names = sorted(os.listdir(self.results_dir))
        except FileNotFoundError:
            return []
        out = []
        for name in names:
            if name.startswith("."):
                continue
            if container_id and name.find(f"-{container_id}-") <= 0:
                continue
            file = self.results_dir / name
            try:
                data = file.read_bytes()
            except OSError:
                continue
            entry = _decode_entry(data, str(file))
            if entry is None or not entry.ifname or not entry.network:
                continue
            if container_id and entry.container_id != container_id:
                continue
            out.append(entry)
        return out
