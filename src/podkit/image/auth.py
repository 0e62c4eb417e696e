"""Registry credentials: what to send, and where to find it (Docker's ``config.json`` and helpers).

:class:`Credentials` holds a username/password, an identity (refresh) token or a registry
(bearer) token, the shapes of the CRI ``AuthConfig``. :class:`AuthFile` reads Docker's
``config.json`` (``auths``, ``credHelpers``, ``credsStore``), found like podman and docker find
it (:func:`auth_file_path`), and writes it for ``login``/``logout``. Secrets never appear in a
``repr``, a log line or an error message of this module.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import json
import os
import shutil
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import attrs

from podkit import _proc
from podkit.image.errors import ImageError

__all__ = [
    "AuthFile",
    "AuthSource",
    "CredentialHelperError",
    "Credentials",
    "auth_file_path",
    "credential_helper",
    "registry_key",
]

DOCKER_HUB_KEY = "https://index.docker.io/v1/"
_DOCKER_HUB_HOSTS = frozenset({"docker.io", "index.docker.io", "registry-1.docker.io"})
_HELPER_TIMEOUT = 30.0
_HELPER_OUTPUT_CAP = 64 << 10


class CredentialHelperError(ImageError):
    """A ``docker-credential-<name>`` helper that is missing, failed or answered nonsense."""


@attrs.frozen(slots=True)
class Credentials:
    """What to authenticate with at a registry; sent only after a ``401`` challenge.

    ``username``/``password`` for basic auth and for the token endpoint; ``identity_token`` is
    an OAuth2 refresh token exchanged at the token endpoint; ``registry_token`` is a bearer
    token sent as it is.
    """

    username: str = ""
    password: str = attrs.field(default="", repr=False)
    identity_token: str | None = attrs.field(default=None, repr=False)
    registry_token: str | None = attrs.field(default=None, repr=False)

    @classmethod
    def from_auth(cls, auth: str, *, identity_token: str | None = None) -> Credentials:
        """From a ``config.json``/CRI ``auth`` field: base64 of ``user:password``."""
        try:
            raw = base64.b64decode(auth.strip(), validate=True).decode()
        except (binascii.Error, UnicodeDecodeError, ValueError):
            raise ImageError("auth: not base64 of user:password") from None
        user, sep, password = raw.partition(":")
        if not sep:
            raise ImageError("auth: not base64 of user:password")
        return cls(user, password, identity_token=identity_token)

    @classmethod
    def from_fields(cls, *, username: str = "", password: str = "", auth: str = "",
                    identity_token: str = "", registry_token: str = "") -> Credentials | None:
        """From the fields of a CRI ``AuthConfig`` (or a ``config.json`` entry); ``None``
        when all are empty. ``username``/``password`` win over ``auth``."""
        if not (username or password) and auth:
            creds = cls.from_auth(auth)
        elif username or password:
            creds = cls(username, password)
        elif identity_token or registry_token:
            creds = cls()
        else:
            return None
        return attrs.evolve(creds, identity_token=identity_token or None,
                            registry_token=registry_token or None)

    @property
    def basic(self) -> str | None:
        """The ``Basic`` Authorization value, when there is a username or password."""
        if not (self.username or self.password):
            return None
        raw = f"{self.username}:{self.password}".encode()
        return "Basic " + base64.b64encode(raw).decode()

    def auth_field(self) -> str:
        """The base64 ``auth`` value ``config.json`` stores."""
        return base64.b64encode(f"{self.username}:{self.password}".encode()).decode()


AuthSource = Credentials | Mapping[str, Credentials] | Callable[[str], Credentials | None]


def registry_key(host: str) -> str:
    """The ``auths`` key of ``host`` (``https://index.docker.io/v1/`` for Docker Hub)."""
    return DOCKER_HUB_KEY if host in _DOCKER_HUB_HOSTS else host


def _normalize(key: str) -> str:
    """``https://host/v1/`` and ``http://host`` spell the host ``host``."""
    for prefix in ("https://", "http://"):
        if key.startswith(prefix):
            key = key[len(prefix):]
    key = key.split("/", 1)[0]
    return "docker.io" if key in _DOCKER_HUB_HOSTS else key


def auth_file_path(authfile: str | Path | None = None,
                   env: Mapping[str, str] | None = None) -> Path:
    """The ``config.json`` to use: ``authfile``, ``$REGISTRY_AUTH_FILE``,
    ``$DOCKER_CONFIG/config.json`` or ``~/.docker/config.json``, the first one given."""
    env = os.environ if env is None else env
    if authfile:
        return Path(authfile)
    if env.get("REGISTRY_AUTH_FILE"):
        return Path(env["REGISTRY_AUTH_FILE"])
    if env.get("DOCKER_CONFIG"):
        return Path(env["DOCKER_CONFIG"]) / "config.json"
    home = env.get("HOME") or str(Path.home())
    return Path(home) / ".docker" / "config.json"


def credential_helper(name: str, server: str, *, env: Mapping[str, str] | None = None,
                      timeout: float = _HELPER_TIMEOUT) -> Credentials | None:
    """Ask ``docker-credential-<name> get`` for ``server`` (``None``: it has none).

    The protocol: the server URL on stdin; JSON ``{"Username", "Secret"}`` on stdout, where
    the username ``<token>`` marks the secret as an identity token.
    """
    env = dict(os.environ if env is None else env)
    program = f"docker-credential-{name}"
    path = shutil.which(program, path=env.get("PATH", os.defpath))
    if path is None:
        raise CredentialHelperError(f"credential helper {program} not found in PATH")
    try:
        result = _proc.run([path, "get"], env=env, stdin=server.encode(), timeout=timeout,
                           cap=_HELPER_OUTPUT_CAP)
    except _proc.ProcTimeout:
        raise CredentialHelperError(f"{program} get {server}: no answer in {timeout:g}s"
                                    ) from None
    except OSError as e:
        raise CredentialHelperError(f"{program} get {server}: {e.strerror or e}") from None
    if result.returncode != 0:
        said = (result.stdout.data + result.stderr.data).decode("utf-8", "replace")
        if "credentials not found" in said.lower():
            return None
        # the helper's words may echo what it read; only its exit status is reported
        raise CredentialHelperError(f"{program} get {server}: exit status {result.returncode}")
    try:
        data = json.loads(result.stdout.data)
        user, secret = data.get("Username", ""), data.get("Secret", "")
        if not isinstance(user, str) or not isinstance(secret, str):
            raise ValueError
    except (ValueError, AttributeError):
        raise CredentialHelperError(f"{program} get {server}: the answer is not "
                                    "JSON with Username and Secret") from None
    if user == "<token>":
        return Credentials(identity_token=secret)
    return Credentials(user, secret)


class AuthFile:
    """Docker's ``config.json``: credentials per registry, read at each lookup's need.

    :meth:`credentials` is an ``AuthSource`` callable: ``credHelpers[host]`` first, then the
    ``auths`` entry, then ``credsStore``. A missing file has no credentials.
    """

    def __init__(self, path: str | Path | None = None, *,
                 env: Mapping[str, str] | None = None) -> None:
        self.path = auth_file_path(path, env)
        self._env = env

    def read(self) -> dict[str, Any]:
        """The file's JSON object (``{}`` when there is no file)."""
        try:
            text = self.path.read_text()
        except FileNotFoundError:
            return {}
        except OSError as e:
            raise ImageError(f"{self.path}: cannot read: {e.strerror or e}") from None
        try:
            data = json.loads(text) if text.strip() else {}
        except json.JSONDecodeError as e:
            raise ImageError(f"{self.path}: not JSON: {e.msg} at line {e.lineno}") from None
        if not isinstance(data, dict):
            raise ImageError(f"{self.path}: not a JSON object")
        return data

    def _entry(self, data: Mapping[str, Any], host: str) -> Mapping[str, Any] | None:
        auths = data.get("auths") or {}
        if not isinstance(auths, dict):
            raise ImageError(f"{self.path}: key auths: not an object")
        want = _normalize(host)
        for key in (registry_key(host), host):
            if isinstance(auths.get(key), dict):
                return auths[key]  # type: ignore[no-any-return]
        for key, entry in auths.items():
            if _normalize(key) == want and isinstance(entry, dict):
                return entry
        return None

    def credentials(self, host: str) -> Credentials | None:
        """The credentials stored for ``host`` (a registry or mirror ``host[:port]``)."""
        data = self.read()
        helpers = data.get("credHelpers") or {}
        if isinstance(helpers, dict):
            for key, name in helpers.items():
                if _normalize(key) == _normalize(host) and isinstance(name, str):
                    return credential_helper(name, registry_key(host), env=self._env)
        entry = self._entry(data, host)
        if entry is not None:
            identity = entry.get("identitytoken") or None
            registry_token = entry.get("registrytoken") or None
            if entry.get("auth"):
                try:
                    creds = Credentials.from_auth(str(entry["auth"]), identity_token=identity)
                except ImageError:
                    raise ImageError(f"{self.path}: key auths.{host}.auth: not base64 of "
                                     "user:password") from None
                return attrs.evolve(creds, registry_token=registry_token)
            if identity or registry_token:
                return Credentials(identity_token=identity, registry_token=registry_token)
        store = data.get("credsStore")
        if isinstance(store, str) and store:
            return credential_helper(store, registry_key(host), env=self._env)
        return None

    __call__ = credentials

    def _write(self, data: Mapping[str, Any]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd, tmp = tempfile.mkstemp(prefix=".config.", dir=self.path.parent)
        try:
            with os.fdopen(fd, "w") as f:  # mkstemp: mode 0600 from the start
                json.dump(data, f, indent="\t")
                f.write("\n")
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, self.path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise

    def login(self, host: str, creds: Credentials) -> None:
        """Store ``creds`` for ``host`` as ``auths.<host>.auth``, keeping everything else."""
        data = self.read()
        auths = data.setdefault("auths", {})
        if not isinstance(auths, dict):
            raise ImageError(f"{self.path}: key auths: not an object")
        auths[registry_key(host)] = {"auth": creds.auth_field()}
        self._write(data)

    def logout(self, host: str) -> bool:
        """Remove the ``auths`` entry of ``host``; False when there was none."""
        data = self.read()
        auths = data.get("auths") or {}
        found = [k for k in auths if _normalize(k) == _normalize(host)]
        if not found:
            return False
        for key in found:
            del auths[key]
        self._write(data)
        return True
