"""Pull from (and push to) an OCI distribution registry over HTTP(S) with urllib.

``pull(store, ref)`` negotiates the manifest by ``Accept`` headers (OCI and Docker manifests
and indexes), picks this machine's platform from an index, then downloads the config and the
layers concurrently, each verified against its digest and size before it lands in the store.
Blobs already stored are skipped; a download cut short is kept as ``.partial`` and resumed
with a ``Range`` request next time (when the registry honours it). Auth: the ``WWW-Authenticate``
challenge of a ``401`` decides between a bearer token (fetched from the realm, with basic
credentials or an identity token if given) and basic auth. 5xx answers, 429 and connection
errors are retried with exponential backoff. ``push(store, ref)`` uploads blobs (monolithic
POST + PUT) and the manifest.

Where a registry's names come from is a :class:`~podkit.image.hosts.RegistryHosts` (mirrors
first, then the upstream, as containerd's ``hosts.toml`` says): a host that lacks the content
or fails falls through to the next one, each with its own TLS settings and headers. Content
is always verified against the digest asked for, whichever host served it.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import random
import re
import socket
import ssl
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, TypeVar

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
from podkit.image.layout import resolve_platform_manifest
from podkit.image.progress import Progress, ProgressCallback
from podkit.image.reference import Reference, parse_reference
from podkit.image.store import Image, ImageStore

__all__ = ["Credentials", "Registry", "RegistryHosts", "pull", "push"]

_T = TypeVar("_T")

_ACCEPT = ", ".join(sorted(MANIFEST_TYPES | INDEX_TYPES))
_CHUNK = 1 << 20
_MAX_MANIFEST = 8 << 20
_MAX_ERROR_BODY = 64 << 10
_RETRY_STATUS = frozenset({429, 500, 502, 503, 504})
_NETWORK_ERRORS = (urllib.error.URLError, ConnectionError, socket.timeout, TimeoutError,
                   http.client.HTTPException, ssl.SSLError)


class _Interrupted(Exception):
    """A blob body ended early (connection dropped); the partial file is kept for resume."""


def _challenge(header: str) -> tuple[str, dict[str, str]]:
    scheme, _, rest = header.strip().partition(" ")
    params = {k.lower(): v1 or v2 for k, v1, v2 in
              re.findall(r'(\w+)\s*=\s*(?:"([^"]*)"|([^,\s]*))', rest)}
    return scheme.lower(), params


def _registry_message(body: bytes) -> str:
    with contextlib.suppress(ValueError, AttributeError, TypeError):
        errors = json.loads(body).get("errors") or []
        parts = [f"{e.get('code', '?')}: {e.get('message', '')}".strip() for e in errors]
        if parts:
            return "; ".join(parts)
    return body[:200].decode("utf-8", "replace").strip()


def _error_body(e: urllib.error.HTTPError) -> bytes:
    """The start of an error answer's body (a broken or endless one reads as what arrived)."""
    try:
        return e.read(_MAX_ERROR_BODY)
    except _NETWORK_ERRORS as exc:
        partial = getattr(exc, "partial", b"")
        return partial if isinstance(partial, bytes) else b""
    finally:
        e.close()


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


def _status_error(what: str, host: str, status: int, reason: str, payload: bytes) -> Exception:
    """The error for an error status: the registry's code and message, never a credential."""
    detail = _registry_message(payload)
    text = f"{what}: {host} answered {status} {reason}"
    if detail:
        text += f" ({detail})"
    if status == 401:
        text += ": authentication required or credentials rejected"
    elif status == 403:
        text += ": access denied"
    if status == 404:
        return (ImageNotFoundError if "manifest" in what else BlobNotFoundError)(text)
    return RegistryError(text, status)


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


class _NoRedirectAuth(urllib.request.HTTPRedirectHandler):
    """Follow redirects (blob storage backends) without carrying Authorization along."""

    def redirect_request(self, req: urllib.request.Request, fp: Any, code: int, msg: str,
                         headers: Any, newurl: str) -> urllib.request.Request | None:
        new = super().redirect_request(req, fp, code, msg, headers, newurl)
        if new is not None and req.get_method() == "HEAD":
            new.method = "HEAD"
        return new


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
        self._auth = auth
        if hosts is None:
            scheme = None if plain_http is None else ("http" if plain_http else "https")
            hosts = RegistryHosts(scheme=scheme)
        self.hosts = hosts
        self.timeout = timeout
        self.retries = retries
        self.backoff = backoff
        self.max_workers = max(1, max_workers)
        self._default_ssl = ssl_context
        self._openers: dict[int, tuple[object, urllib.request.OpenerDirector]] = {}
        self._tokens: dict[tuple[str, str], str] = {}
        self._basic: set[str] = set()
        self._lock = threading.Lock()

    # -- HTTP plumbing ---------------------------------------------------------------------

    def _opener(self, endpoint: RegistryHost) -> urllib.request.OpenerDirector:
        """One opener per TLS context (the context object is kept, so its id stays unique)."""
        ctx = endpoint.ssl_context or self._default_ssl
        with self._lock:
            found = self._openers.get(id(ctx))
            if found is None:
                handlers: list[urllib.request.BaseHandler] = [_NoRedirectAuth()]
                if ctx is not None:
                    handlers.append(urllib.request.HTTPSHandler(context=ctx))
                found = (ctx, urllib.request.build_opener(*handlers))
                self._openers[id(ctx)] = found
            return found[1]

    def endpoints(self, ref: Reference, *capabilities: str) -> tuple[RegistryHost, ...]:
        """The hosts tried for ``ref`` with ``capabilities``, in order."""
        return self.hosts.endpoints(ref.domain, *capabilities)

    def _each(self, ref: Reference, capabilities: tuple[str, ...], what: str,
              attempt: Callable[[RegistryHost], _T]) -> _T:
        """``attempt`` on each host in turn until one succeeds (containerd's fall-through).

        A host that misses (404), cannot be reached, fails or serves content that does not
        verify gives way to the next; when all fail, the first error that was not a 404 is
        raised (or the first 404).
        """
        endpoints = self.endpoints(ref, *capabilities)
        if not endpoints:
            raise RegistryError(f"{what}: no host of {ref.domain} has the "
                                f"{'+'.join(capabilities)} capability")
        missing: Exception | None = None
        failed: Exception | None = None
        for endpoint in endpoints:
            try:
                return attempt(endpoint)
            except (ImageNotFoundError, BlobNotFoundError) as e:
                missing = missing or e
            except (RegistryError, DigestMismatchError, UnsupportedMediaTypeError) as e:
                failed = failed or e
        raise (failed or missing)  # type: ignore[misc]

    def _credentials(self, host: str) -> Credentials | None:
        auth = self._auth
        if auth is None or isinstance(auth, Credentials):
            return auth
        if isinstance(auth, Mapping):
            return auth.get(host)
        return auth(host)

    def _authorize(self, req: urllib.request.Request, host: str, scope: str) -> None:
        with self._lock:
            token = self._tokens.get((host, scope))
            basic = host in self._basic
        if token:
            req.add_unredirected_header("Authorization", f"Bearer {token}")
        elif basic:
            creds = self._credentials(host)
            if creds is not None and creds.basic:
                req.add_unredirected_header("Authorization", creds.basic)

    def _fetch_token(self, endpoint: RegistryHost, scope: str, params: dict[str, str],
                     what: str) -> None:
        host = endpoint.host
        creds = self._credentials(host)
        if creds is not None and creds.registry_token:
            with self._lock:
                self._tokens[(host, scope)] = creds.registry_token
            return
        realm = params.get("realm")
        if not realm:
            raise RegistryError(f"{what}: bearer challenge without realm from {host}", 401)
        query = {}
        if params.get("scope") or scope:
            query["scope"] = params.get("scope") or scope
        if params.get("service"):
            query["service"] = params["service"]
        if creds is not None and creds.identity_token:
            # OAuth2 refresh-token grant (docker's identity token), as a form POST
            form = {**query, "grant_type": "refresh_token", "client_id": "podkit",
                    "refresh_token": creds.identity_token}
            req = urllib.request.Request(realm, data=urllib.parse.urlencode(form).encode(),
                                         method="POST")
        else:
            url = realm + ("&" if "?" in realm else "?") + urllib.parse.urlencode(query)
            req = urllib.request.Request(url)
            if creds is not None and creds.basic:
                req.add_unredirected_header("Authorization", creds.basic)
        try:
            with self._opener(endpoint).open(req, timeout=self.timeout) as resp:
                data = json.loads(resp.read(1 << 20))
        except urllib.error.HTTPError as e:
            raise RegistryError(
                f"{what}: token request to {realm} failed: {e.code} "
                f"{_registry_message(_error_body(e))}", e.code) from None
        except (*_NETWORK_ERRORS, ValueError) as e:
            raise RegistryError(f"{what}: token request to {realm} failed: {e}") from None
        token = data.get("token") or data.get("access_token") if isinstance(data, dict) else None
        if not isinstance(token, str) or not token:
            raise RegistryError(f"{what}: token endpoint {realm} returned no token", 401)
        with self._lock:
            self._tokens[(host, scope)] = token

    def _request(self, ref: Reference, method: str, url: str, what: str, *,
                 endpoint: RegistryHost | None = None, headers: Mapping[str, str] | None = None,
                 body: Callable[[], Any] | None = None, push: bool = False,
                 ok: Iterable[int] = (200,), scope: str | None = None,
                 ) -> http.client.HTTPResponse:
        """Send a request to ``endpoint`` with auth and retries; return the open response.

        ``endpoint`` defaults to the first host of ``ref`` for the request's kind; ``url`` is
        absolute or a path on that host (:func:`_api_path` builds one); ``body`` is a factory
        so a retried upload sends its content again from the start. ``scope`` overrides the
        token scope (``""``: none, for ``/v2/``).
        """
        if endpoint is None:
            endpoint = self.endpoints(ref, "push" if push else "pull")[0]
        host = endpoint.host
        if scope is None:
            scope = f"repository:{ref.path}:{'pull,push' if push else 'pull'}"
        full = url if "://" in url else f"{endpoint.scheme}://{host}{url}"
        opener = self._opener(endpoint)
        auth_tries = 0
        attempt = 0
        while True:
            req = urllib.request.Request(full, method=method,
                                         data=body() if body is not None else None)
            for k, values in endpoint.headers.items():
                req.add_header(k, ", ".join(values))
            for k, v in (headers or {}).items():
                req.add_header(k, v)
            self._authorize(req, host, scope)
            try:
                resp: http.client.HTTPResponse = opener.open(req, timeout=self.timeout)
            except urllib.error.HTTPError as e:
                status = e.code
                payload = _error_body(e) if method != "HEAD" else b""
                if status in ok:
                    raise RegistryError(f"{what}: unexpected redirect body", status) from None
                if status == 401 and auth_tries < 2:
                    auth_tries += 1
                    scheme, params = _challenge(e.headers.get("WWW-Authenticate", ""))
                    if scheme == "bearer":
                        self._fetch_token(endpoint, scope, params, what)
                        continue
                    creds = self._credentials(host)
                    if scheme == "basic" and creds is not None and creds.basic:
                        with self._lock:
                            self._basic.add(host)
                        continue
                if status in _RETRY_STATUS and attempt < self.retries:
                    attempt += 1
                    self._sleep(attempt, e.headers.get("Retry-After"))
                    continue
                raise _status_error(what, host, status, e.reason, payload) from None
            except _NETWORK_ERRORS as e:
                if attempt < self.retries:
                    attempt += 1
                    self._sleep(attempt, None)
                    continue
                reason = getattr(e, "reason", e)
                raise RegistryError(
                    f"{what}: cannot reach {host} after {attempt + 1} attempts: {reason}"
                ) from None
            if resp.status not in ok:
                resp.close()
                raise RegistryError(f"{what}: {host} answered {resp.status}", resp.status)
            return resp

    def _sleep(self, attempt: int, retry_after: str | None) -> None:
        delay = self.backoff * (2 ** (attempt - 1))
        if retry_after and retry_after.isdigit():
            delay = max(delay, min(float(retry_after), 30.0))
        time.sleep(delay * (0.75 + random.random() / 2))

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
            except _NETWORK_ERRORS as e:
                if attempt >= self.retries:
                    raise RegistryError(f"{what}: reading the answer failed {attempt + 1} "
                                        f"times: {e or type(e).__name__}") from None
                attempt += 1
                self._sleep(attempt, None)
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
                self._sleep(attempt, None)
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
            except (http.client.IncompleteRead, *_NETWORK_ERRORS) as e:
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
