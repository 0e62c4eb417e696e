"""Registry hosts: which endpoints serve a registry's names, in containerd's ``hosts.toml`` format.

A hosts directory holds one subdirectory per registry (``docker.io``, ``gcr.io``,
``127.0.0.1:5000`` or containerd's ``127.0.0.1_5000_`` spelling, and ``_default`` for every
registry without its own), each with a ``hosts.toml``::

    server = "https://registry-1.docker.io"     # the upstream, tried last
    [host."http://127.0.0.1:5000"]               # mirrors, tried first, in file order
      capabilities = ["pull", "resolve"]
      ca = "ca.pem"                              # string or list, relative to the subdir
      client = [["client.cert", "client.key"]]   # cert file (key inside) or [cert, key] pairs
      skip_verify = false
      header = {x-mirror = "podkit"}             # string or list of strings
      override_path = false                      # true: the URL path is the API root

Semantics follow containerd: the ``[host]`` entries are tried first, in file order, and the
top-level entry (``server`` with the top-level settings) is always appended last; without a
``server`` it is the registry itself (``https://<registry>``, ``registry-1.docker.io`` for
``docker.io``). A subdirectory without ``hosts.toml`` uses Docker's certs.d layout (``*.crt`` CA
files, ``*.cert``/``*.key`` client pairs). Unlike containerd, which logs a broken file and goes
on, a broken file is refused at load with the file and key named.
"""

from __future__ import annotations

import ipaddress
import posixpath
import threading
import urllib.parse
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs

from podkit.image.errors import HostsConfigError

if TYPE_CHECKING:
    import ssl

__all__ = ["CAPABILITIES", "RegistryHost", "RegistryHosts", "default_server", "parse_hosts_toml"]

CAPABILITIES = frozenset({"pull", "resolve", "push"})
DEFAULT_DIR = Path("/etc/podkit/certs.d")
CONTAINERD_DIR = Path("/etc/containerd/certs.d")
_HOST_KEYS = frozenset({"capabilities", "ca", "client", "skip_verify", "header", "override_path"})
_TOP_KEYS = _HOST_KEYS | {"server", "host"}
_LOOPBACK_NAMES = frozenset({"localhost"})


def is_loopback(host: str) -> bool:
    """True for ``localhost`` and loopback IP literals (with or without a port)."""
    name = host
    if name.startswith("["):
        name = name[1:].partition("]")[0]
    elif name.count(":") == 1:
        name = name.partition(":")[0]
    if name in _LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


@attrs.frozen(slots=False)
class RegistryHost:
    """One endpoint of a registry: ``scheme://host`` plus the API root ``path`` (``/v2``).

    The TLS settings are checked when the host is made: a missing or unreadable CA file or a
    bad client certificate raises :class:`HostsConfigError` then, never at pull time.
    """

    scheme: str
    host: str
    path: str = "/v2"
    capabilities: frozenset[str] = CAPABILITIES
    skip_verify: bool | None = None
    ca: tuple[Path, ...] = ()
    client: tuple[tuple[Path, Path | None], ...] = ()
    headers: Mapping[str, tuple[str, ...]] = attrs.field(factory=dict)
    source: str = attrs.field(default="", eq=False, repr=False)
    _ssl: ssl.SSLContext | None = attrs.field(init=False, eq=False, repr=False, default=None)

    def __attrs_post_init__(self) -> None:
        where = self.source or self.url
        if self.scheme not in ("http", "https"):
            raise HostsConfigError(f"{where}: scheme {self.scheme!r} is not http or https")
        unknown = set(self.capabilities) - CAPABILITIES
        if unknown:
            raise HostsConfigError(f"{where}: key capabilities: unknown capability "
                                   f"{sorted(unknown)[0]!r} (pull, resolve, push)")
        object.__setattr__(self, "_ssl", self._make_ssl(where))

    @classmethod
    def from_url(cls, url: str, *, override_path: bool = False, **settings: Any) -> RegistryHost:
        """A host from a URL as hosts.toml spells it (no scheme means ``https``).

        Without ``override_path`` the path gets ``/v2`` appended unless it ends with it.
        """
        if "://" in url and not url.startswith(("http://", "https://")):
            scheme = url.split("://", 1)[0]
            raise HostsConfigError(f"{settings.get('source') or url}: scheme {scheme!r} is "
                                   "not http or https")
        if not url.startswith(("http://", "https://")):
            url = "https://" + url
        parts = urllib.parse.urlsplit(url)
        if not parts.netloc:
            raise HostsConfigError(f"{settings.get('source') or url}: no host in {url!r}")
        path = posixpath.normpath(parts.path) if parts.path else ""
        path = "" if path in (".", "/") else path
        if not override_path and not path.endswith("/v2"):
            path += "/v2"
        return cls(parts.scheme, parts.netloc, path, **settings)

    @property
    def url(self) -> str:
        """``scheme://host/path``: the API root requests are made under."""
        return f"{self.scheme}://{self.host}{self.path}"

    @property
    def ssl_context(self) -> ssl.SSLContext | None:
        """The TLS context of this host (``None``: the default one)."""
        return self._ssl

    def can(self, capability: str) -> bool:
        """True when this host serves ``capability`` (``pull``, ``resolve`` or ``push``)."""
        return capability in self.capabilities

    def _make_ssl(self, where: str) -> ssl.SSLContext | None:
        if self.scheme != "https" or not (self.ca or self.client or self.skip_verify):
            return None
        import ssl  # only for hosts with their own TLS settings

        ctx = ssl.create_default_context()
        for ca in self.ca:
            try:
                ctx.load_verify_locations(cafile=str(ca))
            except (OSError, ssl.SSLError) as e:
                raise HostsConfigError(f"{where}: key ca: cannot load CA file {ca}: "
                                       f"{getattr(e, 'strerror', None) or e}") from None
        for cert, key in self.client:
            try:
                ctx.load_cert_chain(str(cert), str(key) if key else None)
            except (OSError, ssl.SSLError) as e:
                raise HostsConfigError(f"{where}: key client: cannot load certificate {cert}"
                                       f"{f' with key {key}' if key else ''}: "
                                       f"{getattr(e, 'strerror', None) or e}") from None
        if self.skip_verify:
            ctx.check_hostname = False
            ctx.verify_mode = ssl.CERT_NONE
        return ctx


def default_server(registry: str, *, scheme: str | None = None) -> RegistryHost:
    """The upstream endpoint of ``registry`` when no file names one (containerd's default).

    ``docker.io`` is ``https://registry-1.docker.io``; loopback hosts use plain HTTP (podkit's
    rule since its first registry client); others use ``scheme`` or ``https``.
    """
    if registry == "docker.io":
        return RegistryHost("https", "registry-1.docker.io")
    if scheme is None:
        scheme = "http" if is_loopback(registry) else "https"
    return RegistryHost(scheme, registry)


def _strings(value: Any, where: str, key: str) -> list[str]:
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, list) or not all(isinstance(v, str) for v in items):
        raise HostsConfigError(f"{where}: key {key}: expected a string or a list of strings, "
                               f"got {value!r}")
    return items


def _client_pairs(value: Any, base: Path, where: str) -> tuple[tuple[Path, Path | None], ...]:
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, list):
        raise HostsConfigError(f"{where}: key client: expected a string or a list, got {value!r}")
    pairs: list[tuple[Path, Path | None]] = []
    for item in items:
        if isinstance(item, str):
            pairs.append((base / item, None))
        elif (isinstance(item, list) and len(item) == 2
              and all(isinstance(v, str) for v in item)):
            pairs.append((base / item[0], base / item[1] if item[1] else None))
        else:
            raise HostsConfigError(f"{where}: key client: {item!r} is not a file or a "
                                   "[cert, key] pair")
    return tuple(pairs)


def _headers(value: Any, where: str) -> dict[str, tuple[str, ...]]:
    if not isinstance(value, dict):
        raise HostsConfigError(f"{where}: key header: expected a table, got {value!r}")
    return {k: tuple(_strings(v, where, f"header.{k}")) for k, v in value.items()}


def _settings(table: Mapping[str, Any], base: Path, where: str) -> dict[str, Any]:
    """The keyword arguments of :class:`RegistryHost` from one TOML table."""
    out: dict[str, Any] = {"source": where}
    if "capabilities" in table:
        caps = [c.lower() for c in _strings(table["capabilities"], where, "capabilities")]
        # containerd: an empty list means every capability
        out["capabilities"] = frozenset(caps) if caps else CAPABILITIES
    if "skip_verify" in table:
        if not isinstance(table["skip_verify"], bool):
            raise HostsConfigError(f"{where}: key skip_verify: expected true or false")
        out["skip_verify"] = table["skip_verify"]
    if "ca" in table:
        out["ca"] = tuple(base / p for p in _strings(table["ca"], where, "ca"))
    if "client" in table:
        out["client"] = _client_pairs(table["client"], base, where)
    if "header" in table:
        out["headers"] = _headers(table["header"], where)
    if "override_path" in table:
        if not isinstance(table["override_path"], bool):
            raise HostsConfigError(f"{where}: key override_path: expected true or false")
        out["override_path"] = table["override_path"]
    return out


def parse_hosts_toml(text: str, base: Path, registry: str, *, source: str = "hosts.toml",
                     scheme: str | None = None) -> tuple[RegistryHost, ...]:
    """The ordered hosts of one ``hosts.toml`` (relative paths resolve against ``base``).

    The ``[host]`` entries come first in file order, then the top-level entry: ``server`` or,
    without it, :func:`default_server` of ``registry`` with the top-level settings.
    """
    import tomllib  # only when a hosts.toml exists

    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise HostsConfigError(f"{source}: invalid TOML: {e}") from None
    for key in doc:
        if key not in _TOP_KEYS:
            raise HostsConfigError(f"{source}: unknown key {key!r}")
    entries = doc.get("host", {})
    if not isinstance(entries, dict):
        raise HostsConfigError(f"{source}: key host: expected tables [host.\"<url>\"]")
    hosts: list[RegistryHost] = []
    for url, table in entries.items():  # tomllib keeps the file's order
        where = f"{source}: [host.{url!r}]"
        if not isinstance(table, dict):
            raise HostsConfigError(f"{where}: expected a table")
        for key in table:
            if key not in _HOST_KEYS:
                raise HostsConfigError(f"{where}: unknown key {key!r}")
        hosts.append(RegistryHost.from_url(url, **_settings(table, base, where)))
    top = _settings(doc, base, source)
    server = doc.get("server")
    if server is not None and (not isinstance(server, str) or not server):
        raise HostsConfigError(f"{source}: key server: expected a URL string")
    if server:
        hosts.append(RegistryHost.from_url(server, **top))
    else:
        top.pop("override_path", None)
        default = default_server(registry, scheme=scheme)
        hosts.append(RegistryHost(default.scheme, default.host, **top))
    return tuple(hosts)


def _cert_files(directory: Path, registry: str, scheme: str | None) -> tuple[RegistryHost, ...]:
    """Docker's certs.d layout: ``*.crt`` CAs, ``*.cert`` client certs with their ``*.key``."""
    files = sorted(p for p in directory.iterdir() if p.is_file())
    ca = tuple(p for p in files if p.suffix == ".crt")
    client = tuple((p, p.with_suffix(".key") if p.with_suffix(".key").exists() else None)
                   for p in files if p.suffix == ".cert")
    default = default_server(registry, scheme=scheme)
    return (RegistryHost(default.scheme, default.host, ca=ca, client=client,
                         source=str(directory)),)


def host_dir_names(registry: str) -> list[str]:
    """The subdirectory names tried for ``registry``, in containerd's order."""
    names = []
    colon = registry.rfind(":")
    if colon > 0 and not registry.endswith("]"):
        names.append(f"{registry[:colon]}_{registry[colon + 1:]}_")
    return [*names, registry, "_default"]


class RegistryHosts:
    """Where each registry's names are pulled from: hosts per registry, tried in order.

    Build it from a hosts directory with :meth:`load`, or in code from a mapping of registry
    name to its complete ordered host list (include the upstream yourself if it should be
    tried; ``"_default"`` applies to every registry without its own entry). Registries with
    no entry use :func:`default_server`.
    """

    def __init__(self, hosts: Mapping[str, Sequence[RegistryHost]] | None = None, *,
                 scheme: str | None = None) -> None:
        self._hosts = {name: tuple(v) for name, v in (hosts or {}).items()}
        self._scheme = scheme
        self._default_dir: Path | None = None
        self._for_default: dict[str, tuple[RegistryHost, ...]] = {}  # registry -> its hosts
        self._lock = threading.Lock()

    @classmethod
    def load(cls, directory: str | Path, *, scheme: str | None = None) -> RegistryHosts:
        """Read every ``<directory>/<registry>/hosts.toml`` now (a bad one raises here).

        A missing ``directory`` is an empty configuration (every registry uses its default).
        """
        self = cls(scheme=scheme)
        root = Path(directory)
        try:
            subdirs = sorted(p for p in root.iterdir() if p.is_dir())
        except FileNotFoundError:
            return self
        except OSError as e:
            raise HostsConfigError(f"{root}: cannot read the hosts directory: "
                                   f"{e.strerror or e}") from None
        for sub in subdirs:
            self._hosts[sub.name] = self._load_dir(sub, sub.name)
            if sub.name == "_default":
                self._default_dir = sub
        return self

    def _load_dir(self, sub: Path, registry: str) -> tuple[RegistryHost, ...]:
        file = sub / "hosts.toml"
        try:
            text = file.read_text()
        except FileNotFoundError:
            return _cert_files(sub, registry, self._scheme)
        except (OSError, UnicodeDecodeError) as e:
            raise HostsConfigError(f"{file}: cannot read: {getattr(e, 'strerror', None) or e}"
                                   ) from None
        if not text.strip():
            return _cert_files(sub, registry, self._scheme)
        return parse_hosts_toml(text, sub, registry, source=str(file), scheme=self._scheme)

    def hosts(self, registry: str) -> tuple[RegistryHost, ...]:
        """Every endpoint of ``registry`` in the order they are tried."""
        for name in host_dir_names(registry):
            if name not in self._hosts:
                continue
            if name == "_default" and self._default_dir is not None:
                return self._default_hosts(registry, self._default_dir)
            return self._hosts[name]
        return (default_server(registry, scheme=self._scheme),)

    def _default_hosts(self, registry: str, directory: Path) -> tuple[RegistryHost, ...]:
        """``_default``'s hosts for ``registry`` (its implicit server is that registry), made
        once per registry so TLS contexts are reused."""
        with self._lock:
            hosts = self._for_default.get(registry)
            if hosts is None:
                hosts = self._for_default[registry] = self._load_dir(directory, registry)
            return hosts

    def endpoints(self, registry: str, *capabilities: str) -> tuple[RegistryHost, ...]:
        """The endpoints of ``registry`` that have every one of ``capabilities``, in order.

        containerd's rule: a tag is resolved by hosts with ``pull`` and ``resolve``; content
        named by digest is fetched from hosts with ``pull``; pushes go to hosts with ``push``.
        """
        unknown = set(capabilities) - CAPABILITIES
        if unknown:
            raise ValueError(f"unknown capability {sorted(unknown)[0]!r}")
        return tuple(h for h in self.hosts(registry)
                     if all(h.can(c) for c in capabilities))

    def registries(self) -> Iterable[str]:
        """The registry names (subdirectory names) this configuration has entries for."""
        return tuple(self._hosts)
