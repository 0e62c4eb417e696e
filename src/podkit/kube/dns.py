"""Pod DNS as the kubelet's DNS configurer decides it: ``dnsPolicy`` and the ``dnsConfig`` merge."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from podkit.errors import InvalidArgumentError, quote
from podkit.sandbox import DNSConfig

__all__ = ["DNS_POLICIES", "parse_resolv_conf", "pod_dns"]

DNS_POLICIES = ("ClusterFirst", "ClusterFirstWithHostNet", "Default", "None")


def parse_resolv_conf(text: str) -> DNSConfig:
    """nameserver, search/domain and options lines of a resolv.conf (the last search wins)."""
    servers: list[str] = []
    searches: list[str] = []
    options: list[str] = []
    for line in text.splitlines():
        fields = line.split("#", 1)[0].split(";", 1)[0].split()
        if not fields:
            continue
        if fields[0] == "nameserver" and len(fields) > 1:
            servers.append(fields[1])
        elif fields[0] in ("search", "domain"):
            searches = fields[1:]
        elif fields[0] == "options":
            options.extend(fields[1:])
    return DNSConfig(servers=tuple(servers), searches=tuple(searches), options=tuple(options))


def _unique(items: Iterable[str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(items))


def _merge_options(existing: Sequence[str], extra: Iterable[Mapping[str, Any]]) -> tuple[str, ...]:
    """Pod options replace same-named existing ones (kubelet's mergeDNSOptions), sorted."""
    table: dict[str, str] = {}
    for text in existing:
        name, _, val = text.partition(":")
        table[name] = val
    for op in extra:
        table[str(op.get("name", ""))] = "" if op.get("value") is None else str(op["value"])
    return tuple(sorted(f"{k}:{v}" if v else k for k, v in table.items()))


def _cluster(namespace: str, cluster_dns: Sequence[str], domain: str,
             host: DNSConfig) -> DNSConfig:
    searches = [f"{namespace}.svc.{domain}", f"svc.{domain}", domain] if domain else []
    return DNSConfig(servers=tuple(cluster_dns), searches=_unique([*searches, *host.searches]),
                     options=("ndots:5",))


def pod_dns(spec: Mapping[str, Any], namespace: str, *, host_dns: DNSConfig | None,
            cluster_dns: Sequence[str] = (), cluster_domain: str = "cluster.local",
            ) -> DNSConfig | None:
    """The sandbox DNSConfig; None means the runtime's own (the host's resolv.conf).

    ClusterFirst without ``cluster_dns`` falls back to Default, as kubelet does (podkit has no
    cluster DNS, so this is the usual case and not warned about), and so does ClusterFirst on
    the host network; Default uses ``host_dns``; None only ``dnsConfig``.
    """
    policy = str(spec.get("dnsPolicy") or "ClusterFirst")
    if policy not in DNS_POLICIES:
        raise InvalidArgumentError(f"spec.dnsPolicy: {quote(policy)} is not one of "
                                   f"{', '.join(DNS_POLICIES)}")
    if policy == "ClusterFirst" and spec.get("hostNetwork"):
        policy = "Default"
    if policy.startswith("ClusterFirst") and not cluster_dns:
        policy = "Default"
    extra = spec.get("dnsConfig")
    host = host_dns or DNSConfig()
    if policy == "None":
        base = DNSConfig()
    elif policy == "Default":
        if host_dns is None and not extra:
            return None
        base = host
    else:
        base = _cluster(namespace, cluster_dns, cluster_domain, host)
    if not extra:
        return base
    return DNSConfig(
        servers=_unique([*base.servers, *(str(s) for s in extra.get("nameservers") or ())]),
        searches=_unique([*base.searches, *(str(s) for s in extra.get("searches") or ())]),
        options=_merge_options(base.options, extra.get("options") or ()),
    )
