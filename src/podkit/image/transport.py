"""HTTP to one registry host: TLS per host, auth challenges and tokens, retries with backoff.

:class:`Transport` sends one request to one :class:`~podkit.image.hosts.RegistryHost` and
answers with the open response: the ``WWW-Authenticate`` challenge of a ``401`` decides between
a bearer token (fetched from the realm with basic credentials, exchanged for an identity token,
or a registry token used as it is) and basic auth; 5xx, 429 and connection errors are retried
with exponential backoff. Which host to ask, and what the answer must be, is the registry
client's business (:mod:`podkit.image.registry`). Credentials never enter an error message.
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
from typing import Any

from podkit.image.auth import AuthSource, Credentials
from podkit.image.errors import BlobNotFoundError, ImageNotFoundError, RegistryError
from podkit.image.hosts import RegistryHost

__all__ = ["NETWORK_ERRORS", "Transport"]

_MAX_ERROR_BODY = 64 << 10
_RETRY_STATUS = frozenset({429, 500, 502, 503, 504})
NETWORK_ERRORS = (urllib.error.URLError, ConnectionError, socket.timeout, TimeoutError,
                  http.client.HTTPException, ssl.SSLError)


def _challenge(header: str) -> tuple[str, dict[str, str]]:
    """The scheme (lower case) and parameters of a ``WWW-Authenticate`` header."""
    scheme, _, rest = header.strip().partition(" ")
    params = {k.lower(): v1 or v2 for k, v1, v2 in
              re.findall(r'(\w+)\s*=\s*(?:"([^"]*)"|([^,\s]*))', rest)}
    return scheme.lower(), params


def _registry_message(body: bytes) -> str:
    """``CODE: message`` of a distribution error body (else its first 200 bytes)."""
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
    except NETWORK_ERRORS as exc:
        partial = getattr(exc, "partial", b"")
        return partial if isinstance(partial, bytes) else b""
    finally:
        e.close()


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


class _NoRedirectAuth(urllib.request.HTTPRedirectHandler):
    """Follow redirects (blob storage backends) without carrying Authorization along."""

    def redirect_request(self, req: urllib.request.Request, fp: Any, code: int, msg: str,
                         headers: Any, newurl: str) -> urllib.request.Request | None:
        new = super().redirect_request(req, fp, code, msg, headers, newurl)
        if new is not None and req.get_method() == "HEAD":
            new.method = "HEAD"
        return new


class Transport:
    """Requests to registry hosts with auth and retries (thread-safe; tokens are shared).

    ``auth``: credentials for every host, a ``{host: Credentials}`` map, or a callable asked
    with the host contacted. ``ssl_context`` serves hosts without TLS settings of their own.
    """

    def __init__(self, *, auth: AuthSource | None = None, timeout: float = 30.0,
                 retries: int = 3, backoff: float = 0.2,
                 ssl_context: ssl.SSLContext | None = None) -> None:
        self.auth = auth
        self.timeout = timeout
        self.retries = retries
        self.backoff = backoff
        self.ssl_context = ssl_context
        self._openers: dict[int, tuple[object, urllib.request.OpenerDirector]] = {}
        self._tokens: dict[tuple[str, str], str] = {}
        self._basic: set[str] = set()
        self._lock = threading.Lock()

    def opener(self, endpoint: RegistryHost) -> urllib.request.OpenerDirector:
        """One opener per TLS context (the context object is kept, so its id stays unique)."""
        ctx = endpoint.ssl_context or self.ssl_context
        with self._lock:
            found = self._openers.get(id(ctx))
            if found is None:
                handlers: list[urllib.request.BaseHandler] = [_NoRedirectAuth()]
                if ctx is not None:
                    handlers.append(urllib.request.HTTPSHandler(context=ctx))
                found = (ctx, urllib.request.build_opener(*handlers))
                self._openers[id(ctx)] = found
            return found[1]

    def credentials(self, host: str) -> Credentials | None:
        """What to authenticate to ``host`` with (the host contacted, a mirror's own)."""
        auth = self.auth
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
            creds = self.credentials(host)
            if creds is not None and creds.basic:
                req.add_unredirected_header("Authorization", creds.basic)

    def _fetch_token(self, endpoint: RegistryHost, scope: str, params: dict[str, str],
                     what: str) -> None:
        """Answer a bearer challenge: the registry token as it is, else a token from the realm
        (refresh grant with an identity token, or GET with basic credentials / anonymous)."""
        host = endpoint.host
        creds = self.credentials(host)
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
            with self.opener(endpoint).open(req, timeout=self.timeout) as resp:
                data = json.loads(resp.read(1 << 20))
        except urllib.error.HTTPError as e:
            raise RegistryError(
                f"{what}: token request to {realm} failed: {e.code} "
                f"{_registry_message(_error_body(e))}", e.code) from None
        except (*NETWORK_ERRORS, ValueError) as e:
            raise RegistryError(f"{what}: token request to {realm} failed: {e}") from None
        token = data.get("token") or data.get("access_token") if isinstance(data, dict) else None
        if not isinstance(token, str) or not token:
            raise RegistryError(f"{what}: token endpoint {realm} returned no token", 401)
        with self._lock:
            self._tokens[(host, scope)] = token

    def request(self, endpoint: RegistryHost, method: str, url: str, what: str, *,
                scope: str, headers: Mapping[str, str] | None = None,
                body: Callable[[], Any] | None = None, ok: Iterable[int] = (200,),
                ) -> http.client.HTTPResponse:
        """Send a request to ``endpoint`` with auth and retries; return the open response.

        ``url`` is absolute or a path on the host; ``scope`` is the token scope (``""``: none);
        ``body`` is a factory so a retried upload sends its content again from the start.
        Error statuses raise (``404`` as not-found errors); the status in ``ok`` returns.
        """
        host = endpoint.host
        full = url if "://" in url else f"{endpoint.scheme}://{host}{url}"
        opener = self.opener(endpoint)
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
                    creds = self.credentials(host)
                    if scheme == "basic" and creds is not None and creds.basic:
                        with self._lock:
                            self._basic.add(host)
                        continue
                if status in _RETRY_STATUS and attempt < self.retries:
                    attempt += 1
                    self.sleep(attempt, e.headers.get("Retry-After"))
                    continue
                raise _status_error(what, host, status, e.reason, payload) from None
            except NETWORK_ERRORS as e:
                if attempt < self.retries:
                    attempt += 1
                    self.sleep(attempt, None)
                    continue
                reason = getattr(e, "reason", e)
                raise RegistryError(
                    f"{what}: cannot reach {host} after {attempt + 1} attempts: {reason}"
                ) from None
            if resp.status not in ok:
                resp.close()
                raise RegistryError(f"{what}: {host} answered {resp.status}", resp.status)
            return resp

    def sleep(self, attempt: int, retry_after: str | None) -> None:
        """Back off before retry ``attempt`` (doubling, jittered; ``Retry-After`` honoured)."""
        delay = self.backoff * (2 ** (attempt - 1))
        if retry_after and retry_after.isdigit():
            delay = max(delay, min(float(retry_after), 30.0))
        time.sleep(delay * (0.75 + random.random() / 2))
