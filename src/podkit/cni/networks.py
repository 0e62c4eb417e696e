"""Several networks per pod, like containerd's go-cni, with a real teardown story.

``Networks`` attaches an ordered list of networks to one netns: optional loopback (``lo``) first,
then each configured network as ``eth0``, ``eth1``, ... ``setup`` attaches them concurrently (as
go-cni does: the pod waits for the slowest network, not for the sum) and, if any fails, removes
the ones that were attached before raising; ``remove`` runs in reverse order and tries every
network even when one fails; results are merged in attachment order into a ``PodNetworkResult``.
"""

from __future__ import annotations

import contextlib
import ipaddress
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import attrs

from podkit.cni.client import CNI, VERB_SINCE, RuntimeConf
from podkit.cni.config import NetworkConfigList, NoConfigsFoundError, load_networks
from podkit.cni.types import DNS, AnyResult, CNIError, Route, version_at_least
from podkit.errors import InvalidArgumentError, PodkitError

__all__ = [
    "LOOPBACK_CONFIG",
    "Attachment",
    "IPInfo",
    "InterfaceInfo",
    "Networks",
    "NetworksError",
    "PodNetworkResult",
]

LOOPBACK_CONFIG = NetworkConfigList.from_bytes(
    b'{"cniVersion":"0.3.1","name":"cni-loopback","plugins":[{"type":"loopback"}]}')
"""go-cni's loopback network (``WithLoNetwork``): brings up ``lo`` in a pod's namespace."""


class NetworksError(PodkitError):
    """Some networks of a pod failed; ``errors`` maps network name to its error."""

    def __init__(self, action: str, container_id: str, errors: Mapping[str, BaseException]):
        self.errors = dict(errors)
        text = "; ".join(f"{net}: {e}" for net, e in self.errors.items())
        super().__init__(f"{action} of pod networks for container {container_id!r} failed: "
                         f"{text}")


@attrs.frozen
class Attachment:
    """One network of the pod and the interface name it gets."""

    config: NetworkConfigList
    ifname: str


@attrs.frozen
class IPInfo:
    """An address on a pod interface."""

    address: str
    gateway: str | None = None

    @property
    def ip(self) -> str:
        """The address without its prefix length."""
        return str(ipaddress.ip_interface(self.address).ip)


@attrs.frozen
class InterfaceInfo:
    """One interface of the merged pod result."""

    name: str
    ips: tuple[IPInfo, ...] = ()
    mac: str | None = None
    sandbox: str | None = None
    pci_id: str | None = None
    socket_path: str | None = None


@attrs.frozen
class PodNetworkResult:
    """What ``Networks.setup`` attached: interfaces by name, routes, DNS, raw results."""

    interfaces: Mapping[str, InterfaceInfo]
    routes: tuple[Route, ...]
    dns: tuple[DNS, ...]
    results: Mapping[str, AnyResult]  #: network name -> result converted to 1.1.0 when possible

    def primary_ip(self, ifname: str = "eth0", family: int = 4) -> str | None:
        """The first address of ``family`` on ``ifname`` (the "pod IP"), without prefix."""
        iface = self.interfaces.get(ifname)
        for ip in iface.ips if iface else ():
            if ipaddress.ip_interface(ip.address).version == family:
                return ip.ip
        return None


def _merge(attachments: Sequence[Attachment],
           results: Mapping[str, AnyResult]) -> PodNetworkResult:
    interfaces: dict[str, InterfaceInfo] = {}
    routes: list[Route] = []
    dns: list[DNS] = []
    converted: dict[str, AnyResult] = {}
    for att in attachments:
        res = results.get(att.config.name)
        if res is None:
            continue
        with contextlib.suppress(CNIError):
            res = res.to_version("1.1.0")
        converted[att.config.name] = res
        ifaces = res.interfaces
        for iface in ifaces:
            if iface.sandbox and iface.name not in interfaces:
                interfaces[iface.name] = InterfaceInfo(
                    iface.name, mac=iface.mac, sandbox=iface.sandbox, pci_id=iface.pci_id,
                    socket_path=iface.socket_path)
        for ip in res.ips:
            idx = ip.interface
            if idx is not None and 0 <= idx < len(ifaces):
                name = ifaces[idx].name
                if not ifaces[idx].sandbox:
                    continue  # an address on a host-side link is not a pod address
            else:
                name = att.ifname  # no index: the interface this network was attached as
            cur = interfaces.get(name) or InterfaceInfo(name)
            interfaces[name] = attrs.evolve(cur, ips=(*cur.ips, IPInfo(ip.address, ip.gateway)))
        routes.extend(res.routes)
        dns.append(res.dns)
    return PodNetworkResult(interfaces=interfaces, routes=tuple(routes), dns=tuple(dns),
                            results=converted)


class Networks:
    """The networks of a pod, attached in order and removed in reverse.

    ``networks`` are the configured networks (``eth0``, ``eth1``, ... with ``prefix``);
    ``loopback=True`` adds go-cni's loopback network as ``lo`` first.
    """

    def __init__(self, client: CNI, networks: Iterable[NetworkConfigList], *,
                 loopback: bool = False, prefix: str = "eth") -> None:
        self.client = client
        atts = [Attachment(LOOPBACK_CONFIG, "lo")] if loopback else []
        names = {a.config.name for a in atts}
        for i, conf in enumerate(networks):
            if conf.name in names:
                raise InvalidArgumentError(f"network {conf.name!r} given twice")
            names.add(conf.name)
            atts.append(Attachment(conf, f"{prefix}{i}"))
        if not atts:
            raise InvalidArgumentError("Networks needs at least one network")
        self.attachments: tuple[Attachment, ...] = tuple(atts)

    @classmethod
    def from_attachments(cls, client: CNI, attachments: Iterable[Attachment]) -> Networks:
        """The networks ``attachments`` name, with the interface names they give (e.g. the
        ones a container's ADD cached, to DEL it with the configs it was added with)."""
        self = cls.__new__(cls)
        self.client = client
        self.attachments = tuple(attachments)
        if not self.attachments:
            raise InvalidArgumentError("Networks needs at least one network")
        names = [a.config.name for a in self.attachments]
        if len(set(names)) != len(names):
            raise InvalidArgumentError(f"networks {names}: a network given twice")
        return self

    @classmethod
    def from_dir(cls, client: CNI, conf_dir: str | os.PathLike[str], *,
                 max_networks: int | None = None, loopback: bool = False,
                 prefix: str = "eth") -> Networks:
        """The networks of a config directory in sorted file order (go-cni ``WithAllConf``;
        ``max_networks=1`` is go-cni's default of using only the first one)."""
        nets = load_networks(conf_dir)
        if not nets:
            raise NoConfigsFoundError(os.fspath(conf_dir))
        return cls(client, nets[:max_networks], loopback=loopback, prefix=prefix)

    def _rt(self, att: Attachment, container_id: str, netns_path: str,
            args: Sequence[tuple[str, str]], capability_args: Mapping[str, Any]) -> RuntimeConf:
        return RuntimeConf(container_id, netns_path, att.ifname, tuple(args),
                           dict(capability_args))

    def setup(self, container_id: str, netns_path: str, *,
              args: Sequence[tuple[str, str]] = (),
              capability_args: Mapping[str, Any] | None = None) -> PodNetworkResult:
        """Attach every network (concurrently); if any fails, detach the attached ones and
        raise the first failure in attachment order."""
        caps = capability_args or {}

        def add(att: Attachment) -> AnyResult:
            return self.client.add(att.config,
                                   self._rt(att, container_id, netns_path, args, caps))

        outcomes = _each(add, self.attachments)
        failures = [o for o in outcomes if isinstance(o, BaseException)]
        if not failures:
            return _merge(self.attachments, {
                att.config.name: o for att, o in zip(self.attachments, outcomes, strict=True)
                if not isinstance(o, BaseException)})
        undo: dict[str, BaseException] = {}
        for att, o in reversed(list(zip(self.attachments, outcomes, strict=True))):
            if isinstance(o, BaseException):
                continue
            try:
                self.client.delete(att.config,
                                   self._rt(att, container_id, netns_path, args, caps))
            except PodkitError as de:
                undo[att.config.name] = de
        e = failures[0]
        if isinstance(e, CNIError) and undo:
            e = e.with_context(rollback_errors=(*e.rollback_errors, *undo.values()))
        raise e from None

    def remove(self, container_id: str, netns_path: str, *,
               args: Sequence[tuple[str, str]] = (),
               capability_args: Mapping[str, Any] | None = None) -> None:
        """Detach every network in reverse order; every one is tried, errors raised together.

        ``args``/``capability_args`` may be left out: DEL uses the ones cached by ``setup``.
        """
        caps = capability_args or {}
        errors: dict[str, BaseException] = {}
        for att in reversed(self.attachments):
            try:
                self.client.delete(att.config,
                                   self._rt(att, container_id, netns_path, args, caps))
            except PodkitError as e:
                errors[att.config.name] = e
        if errors:
            raise NetworksError("removal", container_id, errors)

    def check(self, container_id: str, netns_path: str, *,
              args: Sequence[tuple[str, str]] = (),
              capability_args: Mapping[str, Any] | None = None) -> None:
        """CHECK every network in order; the first error is raised.

        Networks whose version predates CHECK (< 0.4.0, e.g. the loopback network) are skipped.
        """
        caps = capability_args or {}
        for att in self.attachments:
            if not version_at_least(att.config.cni_version, VERB_SINCE["CHECK"]):
                continue
            self.client.check(att.config, self._rt(att, container_id, netns_path, args, caps))

    def status(self) -> None:
        """STATUS of every network; the first error is raised.

        Networks whose version predates STATUS (< 1.1.0, e.g. the loopback network) are skipped.
        """
        for att in self.attachments:
            if version_at_least(att.config.cni_version, VERB_SINCE["STATUS"]):
                self.client.status(att.config)


def _each(fn: Callable[[Attachment], AnyResult], atts: Sequence[Attachment],
          ) -> list[AnyResult | BaseException]:
    """``fn`` of every attachment, each in its own thread; errors as values."""
    with ThreadPoolExecutor(max(1, len(atts)), "podkit-cni") as pool:
        futures = [pool.submit(fn, att) for att in atts]
    return [f.exception() or f.result() for f in futures]
