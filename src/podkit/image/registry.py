"""Pull from (and push to) an OCI distribution registry over HTTP(S) with urllib.

``pull(store, ref)`` negotiates the manifest by ``Accept`` headers (OCI and Docker manifests
and indexes), picks this machine's platform from an index, then downloads the config and the
layers concurrently, each verified against its digest and size before it lands in the store.
Blobs already stored are skipped; a download cut short is kept as ``.partial`` and resumed
with a ``Range`` request next time (when the registry honours it). Auth, TLS and retries are
the :class:`~podkit.image.transport.Transport`'s. ``push(store, ref)`` uploads blobs
(monolithic POST + PUT) and the manifest.

Where a registry's names come from is a :class:`~podkit.image.hosts.RegistryHosts` (mirrors
first, then the upstream, as containerd's ``hosts.toml`` says): a host that lacks the content
or fails falls through to the next one, each with its own TLS settings and headers. Content
is always verified against the digest asked for, whichever host served it.
"""

from __future__ import annotations

import contextlib
import json
import re
import threading
import time
import urllib.parse
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, TypeVar

from podkit.image.auth import AuthSource, Credentials
from podkit.image.descriptor import (
    INDEX_TYPES,
    MANIFEST_TYPES,
    Descriptor,
    Platform,
    digest_of,
    host_platform,
    parse_manifest,
)
from podkit.image.errors import (
    BlobNotFoundError,
    DigestMismatchError,
    ImageNotFoundError,
    RegistryError,
    UnsupportedMediaTypeError,
)
from podkit.image.hosts import RegistryHost, RegistryHosts
from podkit.image.progress import Progress, ProgressCallback
from podkit.image.reference import Reference, parse_reference
from podkit.image.store import Image, ImageStore

# The HTTP side (http.client, urllib, email) and the layout code load with the first request,
# not with the client: a CRI server makes its Registry at start and may never pull.
if TYPE_CHECKING:
    import http.client
    import ssl

    from podkit.image.transport import Transport

__all__ = ["Credentials", "Registry", "RegistryHosts", "pull", "push"]

_T = TypeVar("_T")

_ACCEPT = ", ".join(sorted(MANIFEST_TYPES | INDEX_TYPES))
_CHUNK = 1 << 20
_MAX_MANIFEST = 8 << 20
_DOWN_FOR = 30.0  # seconds an unreachable host is asked last


class _Interrupted(Exception):
    """A blob body ended early (connection dropped); the partial file is kept for resume."""


def _declared_size(resp: http.client.HTTPResponse) -> int | None:
    """The blob size a 200/206 answer declares (Content-Length / Content-Range), if any."""
    if resp.status == 206:
        match = re.match(r"bytes \d+-\d+/(\d+)$", resp.headers.get("Content-Range", "").strip())
        return int(match.group(1)) if match else None
    length = resp.headers.get("Content-Length", "")
    return int(length) if length.strip().isdigit() else None


def _api_path(endpoint: RegistryHost, ref: Reference, kind: str, name: str) -> str:
    """``<api root>/<repository>/<kind>/<name>`` on ``endpoint`` (``/v2/app/blobs/sha256:..``)."""
    return f"{endpoint.path}/{ref.path}/{kind}/{name}"


def _check_manifest(what: str, host: str, reference: str, raw: bytes, content_type: str,
                    header_digest: str | None, declared: int | None,
                    expect: Descriptor | None) -> tuple[Descriptor, bytes]:
    """Verify a manifest answer (size, the digest asked for, the media type); its descriptor."""
    if declared is not None and declared != len(raw) and len(raw) <= _MAX_MANIFEST:
        raise RegistryError(f"{what}: got {len(raw)} bytes, the registry declared "
                            f"{declared} (truncated)")
    if len(raw) > _MAX_MANIFEST:
        raise RegistryError(f"{what}: larger than {_MAX_MANIFEST} bytes")
    digest = digest_of(raw)
    if reference.startswith("sha256:") and digest != reference:
        raise DigestMismatchError(f"{what}: content is {digest} (served by {host})")
    if header_digest and header_digest.startswith("sha256:") and header_digest != digest:
        raise DigestMismatchError(
            f"{what}: Docker-Content-Digest {header_digest} but content is {digest}")
    media_type = content_type
    with contextlib.suppress(ValueError, AttributeError):
        media_type = json.loads(raw).get("mediaType") or content_type
    if expect is not None:
        if expect.size != len(raw):
            raise DigestMismatchError(
                f"{what}: {len(raw)} bytes, descriptor says {expect.size}")
        media_type = expect.media_type
    if media_type not in MANIFEST_TYPES | INDEX_TYPES:
        raise UnsupportedMediaTypeError(f"{what}: unsupported media type {media_type!r}")
    platform = expect.platform if expect is not None else None
    return Descriptor(media_type, digest, len(raw), platform), raw


class Registry:
    """A client for OCI distribution registries (one per process is plenty; thread-safe).

    ``hosts``: where each registry's names are served (mirrors, TLS, headers); by default
    every registry is its own only host. ``auth``: credentials for every host, a
    ``{host: Credentials}`` map, or a callable such as :class:`~podkit.image.auth.AuthFile`
    (asked with the host being contacted, a mirror's own ``host[:port]`` included).
    ``plain_http``: without ``hosts``, ``None`` uses HTTP only for loopback hosts,
    ``True``/``False`` forces it. ``retries`` and ``backoff`` (seconds, doubled per attempt)
    govern retries of 5xx, 429 and network errors; ``timeout`` is per socket operation;
    ``max_workers`` parallel layer downloads; ``ssl_context`` is the TLS context of hosts
    without their own TLS settings.
    """

    def __init__(self, *, auth: AuthSource | None = None, plain_http: bool | None = None,
                 timeout: float = 30.0, retries: int = 3, backoff: float = 0.2,
                 max_workers: int = 4, ssl_context: ssl.SSLContext | None = None,
                 hosts: RegistryHosts | None = None) -> None:
        if hosts is None:
            scheme = None if plain_http is None else ("http" if plain_http else "https")
            hosts = RegistryHosts(scheme=scheme)
        self.hosts = hosts

        def make_transport() -> Transport:
            from podkit.image.transport import Transport

            return Transport(auth=auth, timeout=timeout, retries=retries, backoff=backoff,
                             ssl_context=ssl_context)

        self._make_transport = make_transport
        self._transport: Transport | None = None
        self._transport_lock = threading.Lock()
        self.max_workers = max(1, max_workers)
        self._down: dict[str, float] = {}  # host URL -> until when it is asked last
        self._down_lock = threading.Lock()

    @property
    def transport(self) -> Transport:
        """The requests to the hosts (auth, retries, TLS), made on first use."""
        if self._transport is None:
            with self._transport_lock:
                if self._transport is None:
                    self._transport = self._make_transport()
        return self._transport

    @property
    def retries(self) -> int:
        """Retries of a failed request or an interrupted body (the transport's setting)."""
        return self.transport.retries

    @property
    def timeout(self) -> float:
        """Seconds per socket operation (the transport's setting)."""
        return self.transport.timeout

    @property
    def backoff(self) -> float:
        """First retry delay in seconds, doubled per attempt (the transport's setting)."""
        return self.transport.backoff

    # -- HTTP plumbing ---------------------------------------------------------------------

    def endpoints(self, ref: Reference, *capabilities: str) -> tuple[RegistryHost, ...]:
        """The hosts tried for ``ref`` with ``capabilities``, in order."""
        return self.hosts.endpoints(ref.domain, *capabilities)

    def _each(self, ref: Reference, capabilities: tuple[str, ...], what: str,
              attempt: Callable[[RegistryHost], _T]) -> _T:
        """``attempt`` on each host in turn until one succeeds (containerd's fall-through).

        A host that misses (404), cannot be reached, fails or serves content that does not
        verify gives way to the next; when all fail, the first error that was not a 404 is
        raised (or the first 404). A host that could not be reached is asked last for a while,
        so a dead mirror costs its retries once, not once per blob.
        """
        endpoints = self.endpoints(ref, *capabilities)
        if not endpoints:
            raise RegistryError(f"{what}: no host of {ref.domain} has the "
                                f"{'+'.join(capabilities)} capability")
        now = time.monotonic()
        with self._down_lock:
            down = {url for url, until in self._down.items() if until > now}
        missing: Exception | None = None
        failed: Exception | None = None
        for endpoint in sorted(endpoints, key=lambda e: e.url in down):  # stable
            try:
                return attempt(endpoint)
            except (ImageNotFoundError, BlobNotFoundError) as e:
                missing = missing or e
            except (RegistryError, DigestMismatchError, UnsupportedMediaTypeError) as e:
                failed = failed or e
                if isinstance(e, RegistryError) and e.status is None and len(endpoints) > 1:
                    with self._down_lock:
                        self._down[endpoint.url] = time.monotonic() + _DOWN_FOR
        raise (failed or missing)  # type: ignore[misc]

    def _request(self, ref: Reference, method: str, url: str, what: str, *,
                 endpoint: RegistryHost | None = None, headers: Mapping[str, str] | None = None,
                 body: Callable[[], Any] | None = None, push: bool = False,
                 ok: Iterable[int] = (200,), scope: str | None = None,
                 ) -> http.client.HTTPResponse:
        """A request for ``ref`` through the transport (see :meth:`Transport.request`).

        ``endpoint`` defaults to the first host of ``ref`` for the request's kind; ``url`` is
        absolute or a path on that host (:func:`_api_path` builds one); ``scope`` defaults to
        the repository's pull (or pull,push) scope.
        """
        if endpoint is None:
            endpoint = self.endpoints(ref, "push" if push else "pull")[0]
        if scope is None:
            scope = f"repository:{ref.path}:{'pull,push' if push else 'pull'}"
        return self.transport.request(endpoint, method, url, what, scope=scope,
                                      headers=headers, body=body, ok=ok)

    def check_login(self, registry: str) -> None:
        """Check the credentials of ``registry`` as ``docker login`` does: ``GET /v2/`` at
        its upstream server, through the auth challenge; raises :class:`RegistryError`."""
        endpoint = self.hosts.hosts(registry)[-1]
        ref = parse_reference(f"{registry}/login")  # names the request; no repository scope
        with self._request(ref, "GET", f"{endpoint.path}/", f"login to {registry}",
                           endpoint=endpoint, scope=""):
            pass

    # -- pull ------------------------------------------------------------------------------

    def _get_manifest(self, ref: Reference, reference: str,
                      expect: Descriptor | None = None) -> tuple[Descriptor, bytes]:
        """The manifest ``reference`` (a tag: resolved; a digest: verified) from the first
        host that has it."""
        what = f"manifest {reference} of {ref}"
        caps = ("pull",) if reference.startswith("sha256:") else ("pull", "resolve")
        return self._each(ref, caps, what, lambda endpoint: self._get_manifest_from(
            ref, endpoint, reference, expect, what))

    def _get_manifest_from(self, ref: Reference, endpoint: RegistryHost, reference: str,
                           expect: Descriptor | None, what: str) -> tuple[Descriptor, bytes]:
        from podkit.image.transport import NETWORK_ERRORS

        attempt = 0
        while True:
            try:
                with self._request(ref, "GET", _api_path(endpoint, ref, "manifests", reference),
                                   what, endpoint=endpoint, headers={"Accept": _ACCEPT}) as resp:
                    raw = resp.read(_MAX_MANIFEST + 1)
                    content_type = (resp.headers.get("Content-Type") or "").split(";")[0].strip()
                    header_digest = resp.headers.get("Docker-Content-Digest")
                    declared = _declared_size(resp)
                break
            except NETWORK_ERRORS as e:
                if attempt >= self.retries:
                    raise RegistryError(f"{what}: reading the answer failed {attempt + 1} "
                                        f"times: {e or type(e).__name__}") from None
                attempt += 1
                self.transport.sleep(attempt, None)
        return _check_manifest(what, endpoint.host, reference, raw, content_type,
                               header_digest, declared, expect)

    def _fetch_blob(self, store: ImageStore, ref: Reference, desc: Descriptor,
                    progress: ProgressCallback | None) -> bool:
        what = f"blob {desc.digest} of {ref}"
        with store.ingest_lock(desc.digest):
            if store.has_blob(desc.digest):
                if progress:
                    progress(Progress(desc.digest, "exists", desc.size, desc.size))
                return False
            self._each(ref, ("pull",), what, lambda endpoint: self._fetch_blob_from(
                store, ref, endpoint, desc, progress, what))
            if progress:
                progress(Progress(desc.digest, "done", desc.size, desc.size))
            return True

    def _fetch_blob_from(self, store: ImageStore, ref: Reference, endpoint: RegistryHost,
                         desc: Descriptor, progress: ProgressCallback | None, what: str) -> None:
        attempt = 0
        while True:
            writer = store.writer(desc.digest, desc.size, f" of {ref}", resume=True)
            try:
                self._download(ref, endpoint, desc, writer, what, progress)
                writer.commit(sync_dir=False)  # pull() syncs the dir once at the end
                return
            except _Interrupted as e:
                writer.keep()
                if attempt >= self.retries:
                    if not writer.offset:
                        writer.discard()
                    raise RegistryError(
                        f"{what}: download from {endpoint.host} interrupted {attempt + 1} "
                        f"times at byte {writer.offset} of {desc.size} (truncated): {e}"
                    ) from None
                attempt += 1
                self.transport.sleep(attempt, None)
            except DigestMismatchError:
                writer.discard()
                raise
            except BaseException:
                if writer.offset:
                    writer.keep()  # what arrived is resumed by the next pull
                else:
                    writer.discard()
                raise

    def _download(self, ref: Reference, endpoint: RegistryHost, desc: Descriptor, writer: Any,
                  what: str, progress: ProgressCallback | None) -> None:
        from http.client import IncompleteRead

        from podkit.image.transport import NETWORK_ERRORS

        headers = {}
        if writer.offset:
            headers["Range"] = f"bytes={writer.offset}-"
        with self._request(ref, "GET", _api_path(endpoint, ref, "blobs", desc.digest), what,
                           endpoint=endpoint, headers=headers, ok=(200, 206)) as resp:
            if resp.status == 206:
                match = re.match(r"bytes (\d+)-", resp.headers.get("Content-Range", ""))
                if not match or int(match.group(1)) != writer.offset:
                    writer.restart()
                    raise _Interrupted("registry sent an unexpected range")
            elif writer.offset:
                writer.restart()  # the registry ignored Range: start over
            declared = _declared_size(resp)
            if declared is not None and declared != desc.size:
                raise DigestMismatchError(
                    f"{what}: the registry serves {declared} bytes, the descriptor says "
                    f"{desc.size}")
            if progress:
                progress(Progress(desc.digest, "copying", writer.offset, desc.size))
            buf = memoryview(bytearray(_CHUNK))  # reused: no fresh pages per chunk
            try:
                while n := resp.readinto(buf):
                    writer.write(buf[:n])
                    if progress:
                        progress(Progress(desc.digest, "copying", writer.offset, desc.size))
            except (IncompleteRead, *NETWORK_ERRORS) as e:
                raise _Interrupted(str(e) or type(e).__name__) from None
            if writer.offset < desc.size:  # http.client reports an early close as EOF
                raise _Interrupted(f"connection closed after {writer.offset} bytes")

    def pull(self, store: ImageStore, ref: Reference | str, *, platform: Platform | None = None,
             progress: ProgressCallback | None = None) -> Image:
        """Download ``ref`` into ``store`` and record it; returns the :class:`Image`.

        Nothing is recorded unless every blob arrived verified; finished blobs stay in the
        store (and partial ones in ``ingest/``) so a retry only fetches what is missing.
        """
        reference = ref if isinstance(ref, Reference) else parse_reference(ref)
        want = platform or host_platform()
        with store.hold():
            target, raw = self._get_manifest(reference, reference.object)
            cache = {target.digest: raw}

            def read(desc: Descriptor) -> bytes:
                if desc.digest not in cache:
                    cache[desc.digest] = self._get_manifest(reference, desc.digest, desc)[1]
                return cache[desc.digest]

            from podkit.image.layout import resolve_platform_manifest

            manifest_desc, _ = resolve_platform_manifest(read, target, want, str(reference))
            manifest = parse_manifest(read(manifest_desc), manifest_desc.media_type,
                                      f"manifest {manifest_desc.digest} of {reference}")
            if progress:
                for layer in manifest.layers:
                    progress(Progress(layer.digest, "waiting", 0, layer.size))
            # manifests and config are stored beside the layers, each in its own thread: a
            # small fsync can wait long for the layers' data and must not hold up a layer
            with ThreadPoolExecutor(len(cache) + 1, "podkit-pull-meta") as meta, \
                    ThreadPoolExecutor(self.max_workers, "podkit-pull") as pool:
                futures: list[Future[object]] = [
                    meta.submit(store.put_blob, body, f" (manifest of {reference})")
                    for body in cache.values()]
                futures.append(meta.submit(self._fetch_blob, store, reference, manifest.config,
                                           progress))
                futures += [pool.submit(self._fetch_blob, store, reference, layer, progress)
                            for layer in manifest.layers]
                errors = [f.exception() for f in futures]
            for err in errors:
                if err is not None:
                    raise err
            image = store.build_image(reference, target, manifest_desc,
                                      manifest_desc.platform)
            store.sync()  # every blob rename durable before the record points at it
            return store.put(image)

    # -- push ------------------------------------------------------------------------------

    def _push_blob(self, store: ImageStore, ref: Reference, endpoint: RegistryHost,
                   desc: Descriptor, progress: ProgressCallback | None) -> None:
        what = f"blob {desc.digest} of {ref}"
        path = store.blob_path(desc.digest)
        if not path.is_file():
            raise BlobNotFoundError(f"{what}: not in the store, cannot push")
        try:
            with self._request(ref, "HEAD", _api_path(endpoint, ref, "blobs", desc.digest),
                               what, endpoint=endpoint, push=True):
                if progress:
                    progress(Progress(desc.digest, "exists", desc.size, desc.size))
                return
        except BlobNotFoundError:
            pass
        with self._request(ref, "POST", _api_path(endpoint, ref, "blobs", "uploads/"), what,
                           endpoint=endpoint, push=True, ok=(202,), body=lambda: b"") as resp:
            location = resp.headers.get("Location")
        if not location:
            raise RegistryError(f"{what}: upload started without a Location")
        location = urllib.parse.urljoin(endpoint.url + "/", location)
        sep = "&" if "?" in location else "?"
        url = f"{location}{sep}digest={urllib.parse.quote(desc.digest)}"
        opened: list[Any] = []

        def body() -> Any:
            for f in opened:
                f.close()
            f = store.open_blob(desc.digest, desc.size)
            opened.append(f)
            return f

        try:
            with self._request(ref, "PUT", url, what, endpoint=endpoint, push=True,
                               ok=(201, 204), body=body,
                               headers={"Content-Type": "application/octet-stream",
                                        "Content-Length": str(desc.size)}):
                pass
        finally:
            for f in opened:
                f.close()
        if progress:
            progress(Progress(desc.digest, "done", desc.size, desc.size))

    def push(self, store: ImageStore, ref: Reference | str, dest: Reference | str | None = None,
             *, progress: ProgressCallback | None = None) -> Descriptor:
        """Upload the stored image ``ref`` (this platform's manifest) to ``dest`` or ``ref``.

        Blobs the registry has are skipped (HEAD); others go up as one monolithic PUT each.
        The first host with the ``push`` capability receives it. Returns the manifest
        descriptor pushed.
        """
        image = store.get(ref)
        target = parse_reference(str(dest)) if dest is not None else parse_reference(image.name)
        endpoints = self.endpoints(target, "push")
        if not endpoints:
            raise RegistryError(f"push {target}: no host of {target.domain} has the push "
                                "capability")
        endpoint = endpoints[0]
        with store.hold():
            for desc in (image.config, *image.layers):
                self._push_blob(store, target, endpoint, desc, progress)
            raw = store.read_blob(image.manifest.digest, image.manifest.size,
                                  f" (manifest of {image.name})")
            tag = target.tag or image.manifest.digest
            what = f"manifest {tag} of {target}"
            with self._request(target, "PUT", _api_path(endpoint, target, "manifests", tag),
                               what, endpoint=endpoint, push=True, ok=(201, 202, 204),
                               body=lambda: raw,
                               headers={"Content-Type": image.manifest.media_type}):
                pass
        return image.manifest


def pull(store: ImageStore, ref: Reference | str, *, platform: Platform | None = None,
         progress: ProgressCallback | None = None, **options: Any) -> Image:
    """Pull ``ref`` into ``store`` with a :class:`Registry` made from ``options``."""
    return Registry(**options).pull(store, ref, platform=platform, progress=progress)


def push(store: ImageStore, ref: Reference | str, dest: Reference | str | None = None, *,
         progress: ProgressCallback | None = None, **options: Any) -> Descriptor:
    """Push the stored image ``ref`` to its registry (or ``dest``)."""
    return Registry(**options).push(store, ref, dest, progress=progress)
