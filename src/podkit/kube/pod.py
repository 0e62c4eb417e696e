"""The pod sandbox as the kubelet configures it (``generatePodSandboxConfig``): metadata and
labels, hostname, DNS, port mappings, sysctls, log directory and security context."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs

from podkit.errors import InvalidArgumentError, quote
from podkit.kube.containers import POD_NAME_LABEL, POD_NAMESPACE_LABEL, POD_UID_LABEL
from podkit.kube.dns import pod_dns
from podkit.kube.security import SECCOMP_ROOT, sandbox_security
from podkit.sandbox import (
    DNSConfig,
    LinuxPodSandboxConfig,
    PodSandboxMetadata,
    PortMapping,
    Protocol,
    SandboxConfig,
)

__all__ = [
    "HOSTNAME_MAX",
    "LOG_ROOT",
    "PROTOCOLS",
    "SandboxOptions",
    "pod_hostname",
    "pod_log_directory",
    "port_mappings",
    "sandbox_config",
]

LOG_ROOT = "/var/log/pods"
HOSTNAME_MAX = 63
PROTOCOLS = {"TCP": Protocol.TCP, "UDP": Protocol.UDP, "SCTP": Protocol.SCTP}


def pod_log_directory(namespace: str, name: str, uid: str, log_root: str = LOG_ROOT) -> str:
    """``/var/log/pods/<namespace>_<name>_<uid>``, kubelet's BuildPodLogsDirectory."""
    return f"{log_root.rstrip('/')}/{namespace}_{name}_{uid}"


def pod_hostname(name: str, namespace: str, spec: Mapping[str, Any],
                 cluster_domain: str = "cluster.local") -> str:
    """``spec.hostname`` or the pod name cut to 63 characters (trailing ``-``/``.`` trimmed);
    with ``setHostnameAsFQDN`` and a ``subdomain``, the FQDN; empty on the host network."""
    if spec.get("hostNetwork"):
        return ""
    hostname = str(spec.get("hostname") or name)
    if len(hostname) > HOSTNAME_MAX:
        hostname = hostname[:HOSTNAME_MAX].rstrip("-.")
    subdomain = spec.get("subdomain")
    if subdomain and spec.get("setHostnameAsFQDN"):
        fqdn = f"{hostname}.{subdomain}.{namespace}.svc.{cluster_domain}"
        if len(fqdn) > HOSTNAME_MAX + 1:
            raise InvalidArgumentError(
                f"spec.setHostnameAsFQDN: the FQDN {fqdn!r} is longer than 64 characters")
        return fqdn
    return hostname


def port_mappings(spec: Mapping[str, Any]) -> tuple[PortMapping, ...]:
    """Every app container's ports (hostPort 0 included: the network skips it); a port name a
    container repeats counts once, as in kubelet's MakePortMappings."""
    out = []
    for ctr in spec.get("containers") or ():
        seen: set[str] = set()
        for p in ctr.get("ports") or ():
            protocol = str(p.get("protocol") or "TCP")
            key = p.get("name") or f"{protocol}:{p.get('containerPort')}"
            if key in seen:
                continue
            seen.add(str(key))
            host_port = int(p.get("hostPort") or 0)
            if spec.get("hostNetwork") and not host_port:
                host_port = int(p.get("containerPort") or 0)
            if protocol not in PROTOCOLS:
                raise InvalidArgumentError(f"protocol {quote(protocol)} is not one of "
                                           f"{', '.join(PROTOCOLS)}")
            out.append(PortMapping(container_port=int(p.get("containerPort") or 0),
                                   host_port=host_port, protocol=PROTOCOLS[protocol],
                                   host_ip=str(p.get("hostIP") or "")))
    return tuple(out)


@attrs.frozen(kw_only=True)
class SandboxOptions:
    """Node-side facts the sandbox config needs (DNS, cluster domain, paths)."""

    host_dns: DNSConfig | None = None
    cluster_dns: tuple[str, ...] = ()
    cluster_domain: str = "cluster.local"
    log_root: str = LOG_ROOT
    seccomp_root: str = SECCOMP_ROOT


def sandbox_config(pod: Mapping[str, Any], options: SandboxOptions) -> SandboxConfig:
    """The SandboxConfig of a pod whose metadata has name, namespace and uid filled."""
    meta = pod["metadata"]
    spec = pod.get("spec") or {}
    name, namespace, uid = str(meta["name"]), str(meta["namespace"]), str(meta["uid"])
    labels = {str(k): str(v) for k, v in (meta.get("labels") or {}).items()}
    labels |= {POD_NAME_LABEL: name, POD_NAMESPACE_LABEL: namespace, POD_UID_LABEL: uid}
    psc = spec.get("securityContext") or {}
    containers = [*(spec.get("initContainers") or ()), *(spec.get("containers") or ())]
    return SandboxConfig(
        metadata=PodSandboxMetadata(name=name, uid=uid, namespace=namespace, attempt=0),
        hostname=pod_hostname(name, namespace, spec, options.cluster_domain),
        log_directory=pod_log_directory(namespace, name, uid, options.log_root),
        dns_config=pod_dns(spec, namespace, host_dns=options.host_dns,
                           cluster_dns=options.cluster_dns,
                           cluster_domain=options.cluster_domain),
        port_mappings=port_mappings(spec),
        labels=labels,
        annotations={str(k): str(v) for k, v in (meta.get("annotations") or {}).items()},
        linux=LinuxPodSandboxConfig(
            security_context=sandbox_security(pod, containers, options.seccomp_root),
            sysctls={str(s.get("name")): str(s.get("value", ""))
                     for s in psc.get("sysctls") or ()},
        ),
    )
