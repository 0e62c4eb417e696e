"""CNI results of every spec version, their conversions, versions and the error model.

Three wire shapes cover the seven spec versions, as in libcni:

* ``LegacyResult`` for 0.1.0 and 0.2.0 (``ip4``/``ip6`` objects),
* ``Result`` for 0.3.0, 0.3.1, 0.4.0 (ips carry ``version``) and 1.0.0, 1.1.0 (no ``version``;
  interface ``mtu``/``socketPath``/``pciID`` and an omitted empty ``dns``).

``result.to_version(v)`` walks libcni's conversion graph, including its failure
``cannot convert: no valid IP addresses``. Models are frozen attrs classes; ``to_dict()`` gives
the document in the field order the Go structs print, ``to_json()`` the compact form.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping, Sequence
from typing import Any, TypeAlias

import attrs

from podkit.cni._wire import go_dumps, loads_object
from podkit.errors import PodkitError

__all__ = [
    "ALL_VERSIONS",
    "CURRENT_VERSION",
    "DNS",
    "ERR_DECODING_FAILURE",
    "ERR_INCOMPATIBLE_VERSION",
    "ERR_INTERNAL",
    "ERR_INVALID_ENVIRONMENT_VARIABLES",
    "ERR_INVALID_NETNS",
    "ERR_INVALID_NETWORK_CONFIG",
    "ERR_IO_FAILURE",
    "ERR_LIMITED_CONNECTIVITY",
    "ERR_PLUGIN_NOT_AVAILABLE",
    "ERR_TRY_AGAIN_LATER",
    "ERR_UNKNOWN",
    "ERR_UNKNOWN_CONTAINER",
    "ERR_UNSUPPORTED_FIELD",
    "AnyResult",
    "CNIError",
    "IPConfig",
    "Interface",
    "LegacyIPConfig",
    "LegacyResult",
    "Result",
    "ResultError",
    "Route",
    "parse_result",
    "parse_version",
    "version_at_least",
]

ALL_VERSIONS: tuple[str, ...] = ("0.1.0", "0.2.0", "0.3.0", "0.3.1", "0.4.0", "1.0.0", "1.1.0")
"""Every CNI spec version libcni knows, oldest first."""
CURRENT_VERSION = "1.1.0"
"""The newest CNI spec version (what libcni's ``version.Current()`` returns)."""
_LEGACY = ("0.1.0", "0.2.0")
_V04 = ("0.3.0", "0.3.1", "0.4.0")
_V1 = ("1.0.0", "1.1.0")

# Well-known error codes (SPEC.md "Error" table plus libcni's constants).
ERR_UNKNOWN = 0
"""No structured error from the plugin (raised on podkit's or libcni's side)."""
ERR_INCOMPATIBLE_VERSION = 1
"""The plugin does not speak the config's ``cniVersion``."""
ERR_UNSUPPORTED_FIELD = 2
"""A network config field the plugin does not support (the message names it)."""
ERR_UNKNOWN_CONTAINER = 3
"""The container is unknown to the plugin: no network cleanup is needed."""
ERR_INVALID_ENVIRONMENT_VARIABLES = 4
"""A ``CNI_*`` variable the plugin needs is missing or wrong."""
ERR_IO_FAILURE = 5
"""The plugin failed to read or write (its config on stdin, for example)."""
ERR_DECODING_FAILURE = 6
"""The plugin failed to decode what it was given (config, version info)."""
ERR_INVALID_NETWORK_CONFIG = 7
"""The network config is invalid."""
ERR_INVALID_NETNS = 8
"""The network namespace path is not a usable namespace (libcni)."""
ERR_TRY_AGAIN_LATER = 11
"""A transient failure: the same call may succeed later."""
ERR_PLUGIN_NOT_AVAILABLE = 50
"""STATUS: the plugin cannot serve ADD now."""
ERR_LIMITED_CONNECTIVITY = 51
"""STATUS: not available, and existing pods may have limited connectivity."""
ERR_INTERNAL = 999
"""An internal error of the plugin (libcni's ``ErrInternal``)."""


class CNIError(PodkitError):
    """An error from a CNI operation, in the spec's shape ``{code, msg, details}``.

    ``plugin`` is the plugin type that failed (``None`` for client-side errors), ``command`` the
    verb, ``network``/``container_id``/``ifname`` the attachment; ``stderr`` what the plugin
    printed. ``rollback_errors`` holds errors from undoing a failed ADD.
    """

    def __init__(
        self,
        code: int,
        msg: str,
        details: str = "",
        plugin: str | None = None,
        *,
        command: str | None = None,
        network: str | None = None,
        container_id: str | None = None,
        ifname: str | None = None,
        stderr: str = "",
        rollback_errors: Sequence[BaseException] = (),
    ) -> None:
        self.code = code
        self.msg = msg
        self.details = details
        self.plugin = plugin
        self.command = command
        self.network = network
        self.container_id = container_id
        self.ifname = ifname
        self.stderr = stderr
        self.rollback_errors = tuple(rollback_errors)
        super().__init__(code, msg, details, plugin)

    @property
    def plugin_error(self) -> str:
        """``msg`` or ``msg; details``: the text libcni's ``types.Error.Error()`` gives."""
        return f"{self.msg}; {self.details}" if self.details else self.msg

    def to_dict(self) -> dict[str, Any]:
        """The spec's error document (what a plugin prints on stdout)."""
        doc: dict[str, Any] = {"code": self.code, "msg": self.msg}
        if self.details:
            doc["details"] = self.details
        return doc

    def with_context(self, **kw: Any) -> CNIError:
        """A copy with more context (plugin, command, network, attachment) filled in."""
        err = type(self).__new__(type(self))
        err.__dict__.update(self.__dict__)
        err.__traceback__ = None
        for key, value in kw.items():
            if not hasattr(err, key):
                raise TypeError(f"unknown CNIError field {key!r}")
            setattr(err, key, value)
        err.args = (err.code, err.msg, err.details, err.plugin)
        return err

    def __str__(self) -> str:
        text = self.plugin_error
        if self.plugin is not None:
            verb = f" ({self.command.lower()})" if self.command else ""
            text = f'plugin type="{self.plugin}" failed{verb}: {text}'
        where = []
        if self.network is not None:
            where.append(f'network "{self.network}"')
        if self.container_id is not None:
            where.append(f'container "{self.container_id}"')
        if self.ifname is not None:
            where.append(f'ifname "{self.ifname}"')
        if where:
            text = f"{', '.join(where)}: {text}"
        if self.rollback_errors:
            text += "; rollback also failed: " + "; ".join(str(e) for e in self.rollback_errors)
        return text


class ResultError(CNIError):
    """A result that cannot be parsed or converted (code 6, decoding failure)."""

    def __init__(self, msg: str) -> None:
        super().__init__(ERR_DECODING_FAILURE, msg)


def parse_version(version: str) -> tuple[int, int, int]:
    """``"1.0"`` -> ``(1, 0, 0)``; ``""`` means 0.1.0, as libcni's ``ParseVersion``."""
    if not isinstance(version, str):
        raise ValueError(f"invalid version {version!r}: not a string")
    if version == "":
        return (0, 1, 0)
    parts = version.split(".")
    if len(parts) > 3:
        raise ValueError(f"invalid version {version!r}: too many dot-separated parts")
    nums = []
    for p in parts:
        if not p.isdigit():
            raise ValueError(f"invalid version {version!r}: {p!r} is not an integer")
        nums.append(int(p))
    while len(nums) < 3:
        nums.append(0)
    return (nums[0], nums[1], nums[2])


def version_at_least(version: str, minimum: str) -> bool:
    """``version >= minimum``; an unparsable ``version`` counts as older than everything."""
    try:
        return parse_version(version) >= parse_version(minimum)
    except ValueError:
        return False


# --------------------------------------------------------------------------------- models


def _opt_str(d: Mapping[str, Any], key: str, where: str) -> str | None:
    v = d.get(key)
    if v is None:
        return None
    if not isinstance(v, str):
        raise ResultError(f"{where}.{key}: expected a string, got {v!r}")
    return v


def _opt_int(d: Mapping[str, Any], key: str, where: str) -> int | None:
    v = d.get(key)
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, (int, float)) or int(v) != v:
        raise ResultError(f"{where}.{key}: expected an integer, got {v!r}")
    return int(v)


def _str_list(d: Mapping[str, Any], key: str, where: str) -> tuple[str, ...]:
    v = d.get(key)
    if v is None:
        return ()
    if not isinstance(v, list) or not all(isinstance(x, str) for x in v):
        raise ResultError(f"{where}.{key}: expected a list of strings, got {v!r}")
    return tuple(v)


def _objects(d: Mapping[str, Any], key: str, where: str) -> list[Mapping[str, Any]]:
    v = d.get(key)
    if v is None:
        return []
    if not isinstance(v, list) or not all(isinstance(x, dict) for x in v):
        raise ResultError(f"{where}.{key}: expected a list of objects, got {v!r}")
    return v


def _family(cidr_or_ip: str) -> int | None:
    try:
        return ipaddress.ip_interface(cidr_or_ip).version
    except ValueError:
        try:
            return ipaddress.ip_network(cidr_or_ip, strict=False).version
        except ValueError:
            return None


@attrs.frozen
class Interface:
    """One entry of ``interfaces``: a link the plugin created or touched."""

    name: str
    mac: str | None = None
    mtu: int | None = None  #: 1.1.0
    sandbox: str | None = None
    socket_path: str | None = None  #: 1.1.0
    pci_id: str | None = None  #: 1.1.0

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], where: str = "interfaces") -> Interface:
        """Parse one interface object."""
        return cls(
            name=_opt_str(d, "name", where) or "",
            mac=_opt_str(d, "mac", where) or None,
            mtu=_opt_int(d, "mtu", where) or None,
            sandbox=_opt_str(d, "sandbox", where) or None,
            socket_path=_opt_str(d, "socketPath", where) or None,
            pci_id=_opt_str(d, "pciID", where) or None,
        )

    def to_dict(self, v1: bool = True) -> dict[str, Any]:
        """The wire object; 0.x results drop the 1.1.0 fields."""
        d: dict[str, Any] = {"name": self.name}
        if self.mac:
            d["mac"] = self.mac
        if v1 and self.mtu:
            d["mtu"] = self.mtu
        if self.sandbox:
            d["sandbox"] = self.sandbox
        if v1 and self.socket_path:
            d["socketPath"] = self.socket_path
        if v1 and self.pci_id:
            d["pciID"] = self.pci_id
        return d


@attrs.frozen
class IPConfig:
    """One entry of ``ips``: an address (CIDR, host bits kept) on ``interfaces[interface]``."""

    address: str
    gateway: str | None = None
    interface: int | None = None
    version: str | None = None  #: "4"/"6" in 0.3.x/0.4.0 results only

    @property
    def family(self) -> int | None:
        """4 or 6, from the address."""
        return _family(self.address)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], where: str = "ips") -> IPConfig:
        """Parse one ip object."""
        return cls(
            address=_opt_str(d, "address", where) or "",
            gateway=_opt_str(d, "gateway", where) or None,
            interface=_opt_int(d, "interface", where),
            version=_opt_str(d, "version", where) or None,
        )

    def to_dict(self, v1: bool = True) -> dict[str, Any]:
        """The wire object; 0.x results carry ``version`` first."""
        d: dict[str, Any] = {}
        if not v1:
            fam = self.version or (str(self.family) if self.family else "")
            d["version"] = fam
        if self.interface is not None:
            d["interface"] = self.interface
        d["address"] = self.address
        if self.gateway:
            d["gateway"] = self.gateway
        return d


@attrs.frozen
class Route:
    """One route; ``mtu``/``advmss``/``priority``/``table``/``scope`` are 1.1.0 additions."""

    dst: str
    gw: str | None = None
    mtu: int | None = None
    advmss: int | None = None
    priority: int | None = None
    table: int | None = None
    scope: int | None = None

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], where: str = "routes") -> Route:
        """Parse one route object."""
        return cls(
            dst=_opt_str(d, "dst", where) or "",
            gw=_opt_str(d, "gw", where) or None,
            mtu=_opt_int(d, "mtu", where) or None,
            advmss=_opt_int(d, "advmss", where) or None,
            priority=_opt_int(d, "priority", where) or None,
            table=_opt_int(d, "table", where),
            scope=_opt_int(d, "scope", where),
        )

    def to_dict(self) -> dict[str, Any]:
        """The wire object (zero mtu/advmss/priority omitted, table/scope kept)."""
        d: dict[str, Any] = {"dst": self.dst}
        if self.gw:
            d["gw"] = self.gw
        if self.mtu:
            d["mtu"] = self.mtu
        if self.advmss:
            d["advmss"] = self.advmss
        if self.priority:
            d["priority"] = self.priority
        if self.table is not None:
            d["table"] = self.table
        if self.scope is not None:
            d["scope"] = self.scope
        return d

    def basic(self) -> Route:
        """Only ``dst`` and ``gw`` (what survives a conversion to 0.1.0/0.2.0)."""
        return Route(dst=self.dst, gw=self.gw)


@attrs.frozen
class DNS:
    """The ``dns`` object of a result."""

    nameservers: tuple[str, ...] = ()
    domain: str | None = None
    search: tuple[str, ...] = ()
    options: tuple[str, ...] = ()

    @classmethod
    def from_dict(cls, d: Any, where: str = "dns") -> DNS:
        """Parse the dns object (``null`` or absent means empty)."""
        if d is None:
            return cls()
        if not isinstance(d, dict):
            raise ResultError(f"{where}: expected an object, got {d!r}")
        return cls(
            nameservers=_str_list(d, "nameservers", where),
            domain=_opt_str(d, "domain", where) or None,
            search=_str_list(d, "search", where),
            options=_str_list(d, "options", where),
        )

    def to_dict(self) -> dict[str, Any]:
        """The wire object, empty fields omitted."""
        d: dict[str, Any] = {}
        if self.nameservers:
            d["nameservers"] = list(self.nameservers)
        if self.domain:
            d["domain"] = self.domain
        if self.search:
            d["search"] = list(self.search)
        if self.options:
            d["options"] = list(self.options)
        return d

    def __bool__(self) -> bool:
        return bool(self.nameservers or self.domain or self.search or self.options)


def _check_target(src: str, target: str) -> str:
    target = target or "0.1.0"
    if target not in ALL_VERSIONS:
        raise ResultError(f"no converter for CNI result version {src} to {target}")
    return target


@attrs.frozen
class Result:
    """A 0.3.0 ... 1.1.0 result: interfaces, ips, routes, dns."""

    cni_version: str
    interfaces: tuple[Interface, ...] = ()
    ips: tuple[IPConfig, ...] = ()
    routes: tuple[Route, ...] = ()
    dns: DNS = DNS()

    @property
    def is_v1(self) -> bool:
        """True for 1.0.0/1.1.0 (no ip ``version``, empty ``dns`` omitted)."""
        return self.cni_version in _V1

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], version: str | None = None) -> Result:
        """Parse a result document of version 0.3.0 or later."""
        ver = version or d.get("cniVersion") or ""
        if ver not in _V04 + _V1:
            raise ResultError(f"result type supports {list(_V04 + _V1)} but "
                              f'unmarshalled CNIVersion is "{ver}"')
        ips_key = "ips"
        return cls(
            cni_version=ver,
            interfaces=tuple(Interface.from_dict(x, f"interfaces[{i}]")
                             for i, x in enumerate(_objects(d, "interfaces", "result"))),
            ips=tuple(IPConfig.from_dict(x, f"ips[{i}]")
                      for i, x in enumerate(_objects(d, ips_key, "result"))),
            routes=tuple(Route.from_dict(x, f"routes[{i}]")
                         for i, x in enumerate(_objects(d, "routes", "result"))),
            dns=DNS.from_dict(d.get("dns")),
        )

    def to_dict(self) -> dict[str, Any]:
        """The document in Go struct order (cniVersion, interfaces, ips, routes, dns)."""
        v1 = self.is_v1
        d: dict[str, Any] = {"cniVersion": self.cni_version}
        if self.interfaces:
            d["interfaces"] = [i.to_dict(v1) for i in self.interfaces]
        if self.ips:
            d["ips"] = [i.to_dict(v1) for i in self.ips]
        if self.routes:
            d["routes"] = [r.to_dict() for r in self.routes]
        if self.dns or not v1:
            d["dns"] = self.dns.to_dict()
        return d

    def to_json(self) -> bytes:
        """Compact JSON with sorted keys (how libcni re-serialises a result)."""
        return go_dumps(self.to_dict())

    def to_version(self, version: str) -> AnyResult:
        """Convert along libcni's graph; raises ``ResultError`` when impossible."""
        target = _check_target(self.cni_version, version)
        if target in _LEGACY:
            return self._to_legacy(target)
        if target in _V1:
            ips = tuple(attrs.evolve(ip, version=None) for ip in self.ips)
            return attrs.evolve(self, cni_version=target, ips=ips)
        # 0.3.x / 0.4.0
        ips = tuple(
            attrs.evolve(ip, version=ip.version or (str(ip.family) if ip.family else None))
            for ip in self.ips
        )
        ifaces = tuple(attrs.evolve(i, mtu=None, socket_path=None, pci_id=None)
                       for i in self.interfaces)
        return attrs.evolve(self, cni_version=target, ips=ips, interfaces=ifaces)

    def _to_legacy(self, target: str) -> LegacyResult:
        ip4 = next((ip for ip in self.ips if ip.family == 4), None)
        ip6 = next((ip for ip in self.ips if ip.family == 6), None)
        if ip4 is None and ip6 is None:
            raise ResultError("cannot convert: no valid IP addresses")

        def legacy(ip: IPConfig | None, fam: int) -> LegacyIPConfig | None:
            if ip is None:
                return None
            routes = tuple(r.basic() for r in self.routes if _family(r.dst) == fam)
            return LegacyIPConfig(ip=ip.address, gateway=ip.gateway, routes=routes)

        return LegacyResult(cni_version=target, ip4=legacy(ip4, 4), ip6=legacy(ip6, 6),
                            dns=self.dns)


@attrs.frozen
class LegacyIPConfig:
    """``ip4``/``ip6`` of a 0.1.0/0.2.0 result."""

    ip: str
    gateway: str | None = None
    routes: tuple[Route, ...] = ()

    @classmethod
    def from_dict(cls, d: Any, where: str) -> LegacyIPConfig | None:
        """Parse an ``ip4``/``ip6`` object (``None`` when absent)."""
        if d is None:
            return None
        if not isinstance(d, dict):
            raise ResultError(f"{where}: expected an object, got {d!r}")
        return cls(
            ip=_opt_str(d, "ip", where) or "",
            gateway=_opt_str(d, "gateway", where) or None,
            routes=tuple(Route.from_dict(x, f"{where}.routes[{i}]")
                         for i, x in enumerate(_objects(d, "routes", where))),
        )

    def to_dict(self) -> dict[str, Any]:
        """The wire object."""
        d: dict[str, Any] = {"ip": self.ip}
        if self.gateway:
            d["gateway"] = self.gateway
        if self.routes:
            d["routes"] = [r.to_dict() for r in self.routes]
        return d


@attrs.frozen
class LegacyResult:
    """A 0.1.0/0.2.0 result (``ip4``, ``ip6``, ``dns``)."""

    cni_version: str
    ip4: LegacyIPConfig | None = None
    ip6: LegacyIPConfig | None = None
    dns: DNS = DNS()

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], version: str | None = None) -> LegacyResult:
        """Parse a 0.1.0/0.2.0 result document."""
        ver = version or d.get("cniVersion") or "0.1.0"
        if ver not in _LEGACY:
            raise ResultError(f"result type supports {list(_LEGACY)} but "
                              f'unmarshalled CNIVersion is "{ver}"')
        return cls(
            cni_version=ver,
            ip4=LegacyIPConfig.from_dict(d.get("ip4"), "ip4"),
            ip6=LegacyIPConfig.from_dict(d.get("ip6"), "ip6"),
            dns=DNS.from_dict(d.get("dns")),
        )

    @property
    def ips(self) -> tuple[IPConfig, ...]:
        """The addresses in the 0.3.0+ shape (no interface index)."""
        return tuple(IPConfig(address=c.ip, gateway=c.gateway)
                     for c in (self.ip4, self.ip6) if c is not None)

    @property
    def routes(self) -> tuple[Route, ...]:
        """``ip4`` then ``ip6`` routes."""
        return tuple(r for c in (self.ip4, self.ip6) if c is not None for r in c.routes)

    @property
    def interfaces(self) -> tuple[Interface, ...]:
        """Always empty: 0.1.0/0.2.0 results have no interfaces."""
        return ()

    def to_dict(self) -> dict[str, Any]:
        """The document in Go struct order (cniVersion, ip4, ip6, dns)."""
        d: dict[str, Any] = {"cniVersion": self.cni_version}
        if self.ip4 is not None:
            d["ip4"] = self.ip4.to_dict()
        if self.ip6 is not None:
            d["ip6"] = self.ip6.to_dict()
        d["dns"] = self.dns.to_dict()
        return d

    def to_json(self) -> bytes:
        """Compact JSON with sorted keys."""
        return go_dumps(self.to_dict())

    def to_version(self, version: str) -> AnyResult:
        """Convert along libcni's graph (0.1.0/0.2.0 relabel, 0.3.0+ via ``ips``)."""
        target = _check_target(self.cni_version, version)
        if target in _LEGACY:
            return attrs.evolve(self, cni_version=target)
        ips = []
        for c, fam in ((self.ip4, "4"), (self.ip6, "6")):
            if c is not None:
                ver = None if target in _V1 else fam
                ips.append(IPConfig(address=c.ip, gateway=c.gateway, version=ver))
        return Result(cni_version=target, ips=tuple(ips), routes=self.routes, dns=self.dns)


AnyResult: TypeAlias = Result | LegacyResult
"""What a plugin's ADD answers: a ``Result`` (CNI 0.3.0 and later) or a ``LegacyResult``."""


def parse_result(data: bytes | str | Mapping[str, Any] | None,
                 default_version: str = "0.1.0") -> AnyResult:
    """Parse a result document; a missing/empty ``cniVersion`` means ``default_version``.

    libcni labels plugin output without ``cniVersion`` with the config's version and a bare
    cached result with 0.1.0; ``null`` is an empty result. Unknown versions are refused.
    """
    if isinstance(data, (bytes, str)):
        text = data.decode("utf-8", "replace") if isinstance(data, bytes) else data
        if text.strip() == "null":
            doc: Mapping[str, Any] | None = None
        else:
            try:
                doc = loads_object(text)
            except ValueError as e:
                raise ResultError(f"failed to unmarshal raw result: {e}") from None
    else:
        doc = data
    if doc is None:
        doc = {}
    raw_ver = doc.get("cniVersion")
    if raw_ver is not None and not isinstance(raw_ver, str):
        raise ResultError(f"invalid cniVersion {raw_ver!r} in result")
    ver = raw_ver or default_version or "0.1.0"
    if ver in _LEGACY:
        return LegacyResult.from_dict(doc, ver)
    if ver in _V04 + _V1:
        return Result.from_dict(doc, ver)
    raise ResultError(f'unsupported CNI result version "{ver}"')
