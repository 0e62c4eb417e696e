"""The manager's records and stats as CRI statuses, list items and stats (one way)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from podkit.cgroups import PsiStats
from podkit.container import ContainerConfig
from podkit.cri import api_pb2 as pb
from podkit.cri.convert.container import mount_to
from podkit.cri.convert.fields import each, enum_number, fill_fields, set_field
from podkit.cri.convert.resources import linux_resources_to_cri
from podkit.cri.convert.security import namespaces_to
from podkit.cri.convert.signals import cri_signal
from podkit.sandbox import (
    Container,
    ContainerState,
    ContainerStats,
    Sandbox,
    SandboxConfig,
    SandboxState,
    SandboxStats,
)

__all__ = [
    "container_stats_to_cri",
    "container_status_to_cri",
    "container_to_cri",
    "pod_sandbox_stats_to_cri",
    "pod_sandbox_status_to_cri",
    "pod_sandbox_to_cri",
]


def _sandbox_metadata_to(out: pb.PodSandboxMetadata, config: SandboxConfig, path: str) -> None:
    md = config.metadata
    fill_fields(out, path, {"name": md.name, "uid": md.uid, "namespace": md.namespace,
                      "attempt": md.attempt})
    out.SetInParent()


def _container_metadata_to(out: pb.ContainerMetadata, config: ContainerConfig, path: str) -> None:
    fill_fields(out, path, {"name": config.metadata.name, "attempt": config.metadata.attempt})
    out.SetInParent()


def pod_sandbox_to_cri(sb: Sandbox, *, runtime_handler: str = "") -> pb.PodSandbox:
    """A manager ``Sandbox`` record as a ``ListPodSandbox`` item."""
    out = pb.PodSandbox()
    _sandbox_metadata_to(out.metadata, sb.config, "sandbox.metadata")
    fill_fields(out, "sandbox", {
        "id": sb.id,
        "state": enum_number(SandboxState, sb.state, "sandbox.state"),
        "created_at": sb.created_at,
        "labels": dict(sb.config.labels),
        "annotations": dict(sb.config.annotations),
        "runtime_handler": runtime_handler,
    })
    return out


def pod_sandbox_status_to_cri(sb: Sandbox, *, runtime_handler: str = "") -> pb.PodSandboxStatus:
    """A manager ``Sandbox`` record as CRI ``PodSandboxStatus`` (IPs, namespace options)."""
    out = pb.PodSandboxStatus()
    _sandbox_metadata_to(out.metadata, sb.config, "status.metadata")
    fill_fields(out, "status", {
        "id": sb.id,
        "state": enum_number(SandboxState, sb.state, "status.state"),
        "created_at": sb.created_at,
        "labels": dict(sb.config.labels),
        "annotations": dict(sb.config.annotations),
        "runtime_handler": runtime_handler,
    })
    set_field(out.network, "ip", sb.ips[0] if sb.ips else "", "status.network")
    out.network.SetInParent()
    for i, ip in enumerate(sb.ips[1:]):
        set_field(out.network.additional_ips.add(), "ip", ip, f"status.network.additional_ips[{i}]")
    ns = sb.config.linux.security_context.namespace_options
    out.linux.namespaces.options.CopyFrom(
        namespaces_to(ns, "status.linux.namespaces.options")
    )
    return out


def _image_spec_to(out: pb.ImageSpec, image: str, path: str) -> None:
    set_field(out, "image", image, path)
    out.SetInParent()


def container_to_cri(c: Container, *, image_ref: str = "", image_id: str = "") -> pb.Container:
    """A manager ``Container`` record as a ``ListContainers`` item.

    ``image_ref``/``image_id`` come from the image store (the record keeps only
    ``config.image``); ``image_ref`` defaults to ``config.image``.
    """
    out = pb.Container()
    _container_metadata_to(out.metadata, c.config, "container.metadata")
    _image_spec_to(out.image, c.config.image, "container.image")
    fill_fields(out, "container", {
        "id": c.id,
        "pod_sandbox_id": c.sandbox_id,
        "image_ref": image_ref or c.config.image,
        "state": enum_number(ContainerState, c.state, "container.state"),
        "created_at": c.created_at,
        "labels": dict(c.config.labels),
        "annotations": dict(c.config.annotations),
        "image_id": image_id,
    })
    return out


def container_status_to_cri(
    c: Container, *, image_ref: str = "", image_id: str = ""
) -> pb.ContainerStatus:
    """A manager ``Container`` record as CRI ``ContainerStatus`` (times, exit, mounts, log)."""
    out = pb.ContainerStatus()
    _container_metadata_to(out.metadata, c.config, "status.metadata")
    _image_spec_to(out.image, c.config.image, "status.image")
    fill_fields(out, "status", {
        "id": c.id,
        "state": enum_number(ContainerState, c.state, "status.state"),
        "created_at": c.created_at,
        "started_at": c.started_at,
        "finished_at": c.finished_at,
        "exit_code": c.exit_code,
        "image_ref": image_ref or c.config.image,
        "reason": c.reason,
        "message": c.message,
        "labels": dict(c.config.labels),
        "annotations": dict(c.config.annotations),
        "log_path": c.log_path,
        "image_id": image_id,
        "stop_signal": cri_signal(c.config.stop_signal, path="status.stop_signal"),
    })
    out.mounts.extend(each(c.config.mounts, "status.mounts", mount_to))
    if c.config.linux.resources is not None:
        out.resources.linux.CopyFrom(
            linux_resources_to_cri(c.config.linux.resources, path="status.resources.linux")
        )
    return out


def _uint64(out: Any, field: str, value: int, path: str) -> None:
    set_field(getattr(out, field), "value", value, f"{path}.{field}")
    getattr(out, field).SetInParent()


def _container_stats_to(
    stats: ContainerStats, c: Container | None, path: str
) -> pb.ContainerStats:
    out = pb.ContainerStats()
    attrs_ = out.attributes
    set_field(attrs_, "id", stats.id, f"{path}.attributes")
    if c is not None:
        _container_metadata_to(attrs_.metadata, c.config, f"{path}.attributes.metadata")
        fill_fields(attrs_, f"{path}.attributes", {"labels": dict(c.config.labels),
                                             "annotations": dict(c.config.annotations)})
    set_field(out.cpu, "timestamp", stats.timestamp, f"{path}.cpu")
    _uint64(out.cpu, "usage_core_nano_seconds", stats.cpu_usage_core_nano_seconds,
            f"{path}.cpu")
    set_field(out.memory, "timestamp", stats.timestamp, f"{path}.memory")
    _uint64(out.memory, "working_set_bytes", stats.memory_working_set_bytes, f"{path}.memory")
    _uint64(out.memory, "usage_bytes", stats.memory_usage_bytes, f"{path}.memory")
    _uint64(out.memory, "rss_bytes", stats.memory_rss_bytes, f"{path}.memory")
    if stats.memory_available_bytes is not None:
        _uint64(out.memory, "available_bytes", stats.memory_available_bytes, f"{path}.memory")
    _uint64(out.memory, "page_faults", stats.memory_page_faults, f"{path}.memory")
    _uint64(out.memory, "major_page_faults", stats.memory_major_page_faults, f"{path}.memory")
    _psi(out.cpu, stats.cpu_psi)
    _psi(out.memory, stats.memory_psi)
    if stats.io_psi is not None:
        set_field(out.io, "timestamp", stats.timestamp, f"{path}.io")
        _psi(out.io, stats.io_psi)
    return out


def _psi(out: Any, psi: PsiStats | None) -> None:
    """``out.psi`` (CPU, memory or IO usage) from a cgroup v2 pressure sample."""
    if psi is None:
        return
    for name, line in (("Some", psi.some), ("Full", psi.full)):
        if line is None:
            continue
        data = getattr(out.psi, name)
        data.Total, data.Avg10, data.Avg60, data.Avg300 = (
            line.total, line.avg10, line.avg60, line.avg300)
        data.SetInParent()


def container_stats_to_cri(stats: ContainerStats, c: Container | None = None) -> pb.ContainerStats:
    """Container usage as CRI ``ContainerStats``; ``c`` (its record) fills the attributes."""
    return _container_stats_to(stats, c, "stats")


def pod_sandbox_stats_to_cri(
    stats: SandboxStats, sb: Sandbox | None = None,
    containers: Mapping[str, Container] | None = None,
) -> pb.PodSandboxStats:
    """Pod usage as CRI ``PodSandboxStats`` (CPU, memory, processes, each container's stats).

    ``sb`` fills the pod's attributes and ``containers`` (records by ID) the containers'.
    """
    out = pb.PodSandboxStats()
    set_field(out.attributes, "id", stats.id, "stats.attributes")
    if sb is not None:
        _sandbox_metadata_to(out.attributes.metadata, sb.config, "stats.attributes.metadata")
        fill_fields(out.attributes, "stats.attributes", {"labels": dict(sb.config.labels),
                                                   "annotations": dict(sb.config.annotations)})
    linux = out.linux
    set_field(linux.cpu, "timestamp", stats.timestamp, "stats.linux.cpu")
    _uint64(linux.cpu, "usage_core_nano_seconds", stats.cpu_usage_core_nano_seconds,
            "stats.linux.cpu")
    set_field(linux.memory, "timestamp", stats.timestamp, "stats.linux.memory")
    _uint64(linux.memory, "working_set_bytes", stats.memory_working_set_bytes,
            "stats.linux.memory")
    _uint64(linux.memory, "usage_bytes", stats.memory_usage_bytes, "stats.linux.memory")
    _uint64(linux.memory, "rss_bytes", stats.memory_rss_bytes, "stats.linux.memory")
    _uint64(linux.memory, "page_faults", stats.memory_page_faults, "stats.linux.memory")
    _uint64(linux.memory, "major_page_faults", stats.memory_major_page_faults,
            "stats.linux.memory")
    set_field(linux.process, "timestamp", stats.timestamp, "stats.linux.process")
    _uint64(linux.process, "process_count", stats.process_count, "stats.linux.process")
    known = containers or {}
    for i, cs in enumerate(stats.containers):
        linux.containers.append(
            _container_stats_to(cs, known.get(cs.id), f"stats.linux.containers[{i}]")
        )
    return out
