"""``Puller``: the CRI PullImage path, registry hosts plus credentials, one download per
reference at a time.

The hosts (mirrors, TLS, headers) come from ``cri serve --registry-config-dir``; credentials
from the request's ``AuthConfig`` when it has any, else from the auth file. Concurrent pulls of
the same reference with the same credentials share one download (a single flight), as
containerd's content ingestion makes the second wait for the first.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import Future

from podkit import image as _image
from podkit.cri import api_pb2 as pb
from podkit.errors import InvalidArgumentError

__all__ = ["CredentialLookup", "Puller", "request_credentials"]

CredentialLookup = Callable[[str], "_image.Credentials | None"]
"""Credentials for a registry host (``host[:port]``), e.g. an :class:`~podkit.image.AuthFile`."""


def request_credentials(auth: pb.AuthConfig) -> _image.Credentials | None:
    """The credentials of a PullImage ``AuthConfig`` (user and password, ``auth``, identity or
    registry token); ``None`` when it has none. The error never repeats the secret."""
    try:
        return _image.Credentials.from_fields(
            username=auth.username, password=auth.password, auth=auth.auth,
            identity_token=auth.identity_token, registry_token=auth.registry_token)
    except (_image.ImageError, ValueError):
        raise InvalidArgumentError("auth.auth: not base64 of user:password") from None


def _host_of(server_address: str) -> str:
    """``host[:port]`` of an ``AuthConfig.server_address`` (a URL or a bare host)."""
    text = server_address.split("://", 1)[-1]
    return text.split("/", 1)[0].lower()


def _same_host(a: str, b: str) -> bool:
    aliases = {"docker.io", "index.docker.io", "registry-1.docker.io"}
    return a == b or (a in aliases and b in aliases)


class Puller:
    """Pulls into a store through ``hosts``; ``auth`` is the fallback credential lookup.

    Without request credentials one shared :class:`~podkit.image.Registry` serves every pull
    (connections and tokens reused); with them a registry of their own, so one client's token
    never serves another's pull. Thread-safe.
    """

    def __init__(self, store: _image.ImageStore, hosts: _image.RegistryHosts | None = None,
                 auth: CredentialLookup | None = None) -> None:
        self.store = store
        self.hosts = hosts if hosts is not None else _image.RegistryHosts()
        self.auth = auth
        self._shared: _image.Registry | None = None  # made by the first pull
        self._lock = threading.Lock()
        self._flights: dict[tuple[str, _image.Credentials | None, str], Future[_image.Image]] \
            = {}

    def _registry(self, creds: _image.Credentials | None, server: str) -> _image.Registry:
        if creds is None:
            with self._lock:
                if self._shared is None:
                    self._shared = _image.Registry(hosts=self.hosts, auth=self.auth)
                return self._shared
        fallback = self.auth

        def lookup(host: str) -> _image.Credentials | None:
            # containerd's rule: without server_address the request's credentials go to every
            # host of this pull (mirrors too); with it, only to that host
            if not server or _same_host(_host_of(server), host.lower()):
                return creds
            return fallback(host) if fallback is not None else None

        return _image.Registry(hosts=self.hosts, auth=lookup)

    def pull(self, ref: str, auth: pb.AuthConfig | None = None) -> _image.Image:
        """Pull ``ref`` (a reference already checked) and return its image record; a pull of
        the same reference and credentials already running is joined, not repeated."""
        creds = request_credentials(auth) if auth is not None else None
        server = auth.server_address if auth is not None and creds is not None else ""
        key = (str(_image.parse_reference(ref)), creds, server)
        with self._lock:
            flight = self._flights.get(key)
            leader = flight is None
            if flight is None:
                flight = self._flights[key] = Future()
        if not leader:
            return flight.result()
        try:
            img = self._registry(creds, server).pull(self.store, key[0])
        except BaseException as exc:
            flight.set_exception(exc)
            raise
        else:
            flight.set_result(img)
            return img
        finally:
            with self._lock:
                del self._flights[key]
