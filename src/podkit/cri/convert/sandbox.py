"""``PodSandboxConfig`` to ``SandboxConfig`` and back (port mappings included)."""

from __future__ import annotations

from podkit.cri import api_pb2 as pb
from podkit.cri.convert.fields import ConversionError, each, enum_number, enum_value, fill_fields
from podkit.cri.convert.resources import optional_resources_from, set_optional_resources
from podkit.cri.convert.security import sandbox_security_from, sandbox_security_to
from podkit.sandbox import (
    DNSConfig,
    LinuxPodSandboxConfig,
    PodSandboxMetadata,
    PortMapping,
    Protocol,
    SandboxConfig,
)

__all__ = ["sandbox_config_from_cri", "sandbox_config_to_cri"]


def _port_from(msg: pb.PortMapping, path: str) -> PortMapping:
    return PortMapping(
        container_port=msg.container_port,
        host_port=msg.host_port,
        protocol=enum_value(Protocol, msg.protocol, f"{path}.protocol"),
        host_ip=msg.host_ip,
    )


def _port_to(p: PortMapping, path: str) -> pb.PortMapping:
    out = pb.PortMapping()
    fill_fields(out, path, {
        "protocol": enum_number(Protocol, p.protocol, f"{path}.protocol"),
        "container_port": p.container_port,
        "host_port": p.host_port,
        "host_ip": p.host_ip,
    })
    return out


def sandbox_config_from_cri(msg: pb.PodSandboxConfig, *, path: str = "config") -> SandboxConfig:
    """CRI ``PodSandboxConfig`` (of ``RunPodSandboxRequest.config``) to a ``SandboxConfig``."""
    if not msg.HasField("metadata"):
        raise ConversionError(f"{path}.metadata", "required")
    md = msg.metadata
    linux = msg.linux
    lpath = f"{path}.linux"
    return SandboxConfig(
        metadata=PodSandboxMetadata(
            name=md.name, uid=md.uid, namespace=md.namespace, attempt=md.attempt
        ),
        hostname=msg.hostname,
        log_directory=msg.log_directory,
        dns_config=(
            DNSConfig(
                servers=tuple(msg.dns_config.servers),
                searches=tuple(msg.dns_config.searches),
                options=tuple(msg.dns_config.options),
            )
            if msg.HasField("dns_config")
            else None
        ),
        port_mappings=tuple(each(msg.port_mappings, f"{path}.port_mappings", _port_from)),
        labels=dict(msg.labels),
        annotations=dict(msg.annotations),
        linux=LinuxPodSandboxConfig(
            cgroup_parent=linux.cgroup_parent,
            security_context=sandbox_security_from(
                linux.security_context, f"{lpath}.security_context"
            ),
            sysctls=dict(linux.sysctls),
            overhead=optional_resources_from(linux, "overhead", lpath),
            resources=optional_resources_from(linux, "resources", lpath),
        ),
    )


def sandbox_config_to_cri(config: SandboxConfig, *, path: str = "config") -> pb.PodSandboxConfig:
    """A ``SandboxConfig`` to CRI ``PodSandboxConfig``; ``linux`` is always sent."""
    out = pb.PodSandboxConfig()
    md = config.metadata
    fill_fields(out.metadata, f"{path}.metadata", {"name": md.name, "uid": md.uid,
                                             "namespace": md.namespace, "attempt": md.attempt})
    fill_fields(out, path, {"hostname": config.hostname, "log_directory": config.log_directory,
                      "labels": dict(config.labels), "annotations": dict(config.annotations)})
    if config.dns_config is not None:
        dns = config.dns_config
        fill_fields(out.dns_config, f"{path}.dns_config", {
            "servers": dns.servers, "searches": dns.searches, "options": dns.options})
        out.dns_config.SetInParent()
    out.port_mappings.extend(each(config.port_mappings, f"{path}.port_mappings", _port_to))
    lpath = f"{path}.linux"
    linux = config.linux
    fill_fields(out.linux, lpath, {"cgroup_parent": linux.cgroup_parent,
                             "sysctls": dict(linux.sysctls)})
    out.linux.security_context.CopyFrom(
        sandbox_security_to(linux.security_context, f"{lpath}.security_context")
    )
    set_optional_resources(out.linux, "overhead", linux.overhead, lpath)
    set_optional_resources(out.linux, "resources", linux.resources, lpath)
    return out
