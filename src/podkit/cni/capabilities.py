"""Typed capability arguments that serialise to the CONVENTIONS.md names and JSON shapes.

Build the ``capability_args`` of a ``RuntimeConf`` with ``capability_args(...)``; each value is
only sent to plugins that declare the capability (``"capabilities": {"portMappings": true}``).
Keys are the CONVENTIONS camelCase names (go-cni's untagged structs send ``HostPort``..., which
non-Go plugins may not read); ``ipRanges`` is a list of range *sets* as host-local expects.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import attrs

from podkit.errors import InvalidArgumentError

__all__ = [
    "POD_ANNOTATIONS",
    "Bandwidth",
    "DNSConfig",
    "IPRange",
    "PortMapping",
    "capability_args",
    "kubernetes_args",
]

POD_ANNOTATIONS = "io.kubernetes.cri.pod-annotations"
"""The capability key containerd's CRI and CRI-O use for the pod annotations map."""

_PROTOCOLS = ("tcp", "udp", "sctp")


def _lower(value: str) -> str:
    return value.lower()


@attrs.frozen
class PortMapping:
    """``portMappings`` entry: host port -> container port (protocol tcp/udp/sctp)."""

    host_port: int
    container_port: int
    protocol: str = attrs.field(default="tcp", converter=_lower)
    host_ip: str | None = None

    def __attrs_post_init__(self) -> None:
        for what, port in (("host_port", self.host_port), ("container_port", self.container_port)):
            if isinstance(port, bool) or not isinstance(port, int) or not 0 < port < 65536:
                raise InvalidArgumentError(f"port mapping {what} {port!r}: must be 1..65535")
        if self.protocol not in _PROTOCOLS:
            raise InvalidArgumentError(f"port mapping protocol {self.protocol!r}: must be one "
                                       f"of {', '.join(_PROTOCOLS)}")

    def to_json(self) -> dict[str, Any]:
        """The CONVENTIONS object."""
        d: dict[str, Any] = {"hostPort": self.host_port, "containerPort": self.container_port,
                             "protocol": self.protocol}
        if self.host_ip:
            d["hostIP"] = self.host_ip
        return d


@attrs.frozen
class Bandwidth:
    """``bandwidth``: rates in bits per second, bursts in bits (0 = unlimited/absent)."""

    ingress_rate: int = 0
    ingress_burst: int = 0
    egress_rate: int = 0
    egress_burst: int = 0

    def to_json(self) -> dict[str, Any]:
        """The CONVENTIONS object (zero fields omitted)."""
        pairs = (("ingressRate", self.ingress_rate), ("ingressBurst", self.ingress_burst),
                 ("egressRate", self.egress_rate), ("egressBurst", self.egress_burst))
        for key, value in pairs:
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise InvalidArgumentError(f"bandwidth {key} {value!r}: must be an integer >= 0")
        return {k: v for k, v in pairs if v}


@attrs.frozen
class IPRange:
    """One range of an ``ipRanges`` range set (host-local's shape)."""

    subnet: str
    range_start: str | None = None
    range_end: str | None = None
    gateway: str | None = None

    def to_json(self) -> dict[str, Any]:
        """The CONVENTIONS object."""
        d: dict[str, Any] = {"subnet": self.subnet}
        if self.range_start:
            d["rangeStart"] = self.range_start
        if self.range_end:
            d["rangeEnd"] = self.range_end
        if self.gateway:
            d["gateway"] = self.gateway
        return d


@attrs.frozen
class DNSConfig:
    """``dns`` capability: servers, search domains, resolver options."""

    servers: tuple[str, ...] = ()
    searches: tuple[str, ...] = ()
    options: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        """The CONVENTIONS object."""
        d: dict[str, Any] = {}
        if self.servers:
            d["servers"] = list(self.servers)
        if self.searches:
            d["searches"] = list(self.searches)
        if self.options:
            d["options"] = list(self.options)
        return d


def _range_sets(ranges: Sequence[Sequence[IPRange] | IPRange]) -> list[list[dict[str, Any]]]:
    out = []
    for item in ranges:
        if isinstance(item, IPRange):
            out.append([item.to_json()])  # a lone range is a one-range set
        else:
            out.append([r.to_json() for r in item])
    return out


def capability_args(
    *,
    port_mappings: Sequence[PortMapping] | None = None,
    bandwidth: Bandwidth | None = None,
    ip_ranges: Sequence[Sequence[IPRange] | IPRange] | None = None,
    dns: DNSConfig | None = None,
    ips: Sequence[str] | None = None,
    mac: str | None = None,
    cgroup_path: str | None = None,
    pod_annotations: Mapping[str, str] | None = None,
    **extra: Any,
) -> dict[str, Any]:
    """The ``capability_args`` map; only the arguments given become keys.

    ``extra`` passes other capabilities verbatim (e.g. ``deviceID="0000:04:00.5"``).
    """
    args: dict[str, Any] = {}
    if port_mappings is not None:
        args["portMappings"] = [p.to_json() for p in port_mappings]
    if bandwidth is not None:
        args["bandwidth"] = bandwidth.to_json()
    if ip_ranges is not None:
        args["ipRanges"] = _range_sets(ip_ranges)
    if dns is not None:
        args["dns"] = dns.to_json()
    if ips is not None:
        args["ips"] = list(ips)
    if mac is not None:
        args["mac"] = mac
    if cgroup_path is not None:
        args["cgroupPath"] = cgroup_path
    if pod_annotations is not None:
        args[POD_ANNOTATIONS] = dict(pod_annotations)
    args.update(extra)
    return args


def kubernetes_args(namespace: str, name: str, uid: str,
                    sandbox_id: str) -> tuple[tuple[str, str], ...]:
    """CNI_ARGS a Kubernetes runtime passes, with ``IgnoreUnknown=1`` first so Go plugins
    do not reject keys they do not know."""
    for what, value in (("namespace", namespace), ("name", name), ("uid", uid),
                        ("sandbox_id", sandbox_id)):
        if ";" in value or "=" in value:
            raise InvalidArgumentError(f"kubernetes_args {what} {value!r}: must not contain ; or =")
    return (
        ("IgnoreUnknown", "1"),
        ("K8S_POD_NAMESPACE", namespace),
        ("K8S_POD_NAME", name),
        ("K8S_POD_INFRA_CONTAINER_ID", sandbox_id),
        ("K8S_POD_UID", uid),
    )
