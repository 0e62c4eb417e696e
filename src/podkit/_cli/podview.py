"""Pods and containers as the plain records ``pod ls`` and ``pod inspect`` print.

The field names are a contract with scripts (docs/cli.md lists them): snake_case, always
present, ``null`` when a value does not apply (the exit code of a running container).
Timestamps are RFC 3339 in UTC with nanoseconds, as crictl prints them.
"""

from __future__ import annotations

import datetime
from typing import Any

from podkit.sandbox import Container, ContainerFilter, Sandbox, SandboxManager

from .output import Column, cell, short_id

__all__ = ["CONTAINER_COLUMNS", "POD_COLUMNS", "container_record", "pod_record", "rfc3339"]


def rfc3339(ns: int) -> str | None:
    """Nanoseconds since the epoch as ``2026-12-03T09:30:00.123456789Z`` (``None`` for 0)."""
    if not ns:
        return None
    seconds, frac = divmod(ns, 1_000_000_000)
    stamp = datetime.datetime.fromtimestamp(seconds, datetime.UTC)
    return f"{stamp:%Y-%m-%dT%H:%M:%S}.{frac:09d}Z"


def _state(value: Any, prefix: str) -> str:
    return str(value.name).removeprefix(prefix)


def container_record(mgr: SandboxManager, c: Container) -> dict[str, Any]:
    """Everything ``pod inspect POD CTR`` shows of a container."""
    cfg = c.config
    return {
        "id": c.id,
        "pod_id": c.sandbox_id,
        "name": cfg.metadata.name,
        "attempt": cfg.metadata.attempt,
        "image": cfg.image,
        "image_ref": c.image_ref or None,
        "image_id": c.image_id or None,
        "state": _state(c.state, "CONTAINER_"),
        "created_at": rfc3339(c.created_at),
        "started_at": rfc3339(c.started_at),
        "finished_at": rfc3339(c.finished_at),
        "exit_code": c.exit_code if c.finished_at else None,
        "reason": c.reason or None,
        "message": c.message or None,
        "pid": c.pid or None,
        "command": list(cfg.command),
        "args": list(cfg.args),
        "mounts": [{"container_path": m.container_path, "host_path": m.host_path,
                    "readonly": m.readonly,
                    "propagation": _state(m.propagation, "PROPAGATION_")}
                   for m in cfg.mounts],
        "log_path": mgr.container_log_file(c.id),
        "labels": dict(cfg.labels),
        "annotations": dict(cfg.annotations),
    }


def pod_record(mgr: SandboxManager, sb: Sandbox, runtime: str, *,
               containers: list[Container] | None = None) -> dict[str, Any]:
    """Everything ``pod inspect POD`` shows of a pod, its containers included (those given,
    else the manager's)."""
    meta = sb.config.metadata
    if containers is None:
        containers = mgr.list_containers(ContainerFilter(pod_sandbox_id=sb.id))
    return {
        "id": sb.id,
        "name": meta.name,
        "namespace": meta.namespace,
        "uid": meta.uid,
        "attempt": meta.attempt,
        "state": _state(sb.state, "SANDBOX_"),
        "created_at": rfc3339(sb.created_at),
        "ip": sb.ip or None,
        "ips": list(sb.ips),
        "host_network": sb.host_network,
        "hostname": sb.config.hostname,
        "port_mappings": [{"container_port": p.container_port, "host_port": p.host_port,
                           "protocol": p.protocol.name, "host_ip": p.host_ip}
                          for p in sb.config.port_mappings],
        "labels": dict(sb.config.labels),
        "annotations": dict(sb.config.annotations),
        "log_directory": sb.config.log_directory or None,
        "netns_path": sb.netns_path or None,
        "pid": sb.pid or None,
        "cgroups_path": sb.cgroups_path or None,
        "runtime": runtime,
        "containers": [container_record(mgr, c) for c in containers],
    }


def _containers_cell(value: Any) -> str:
    return " ".join(
        f"{c['name']}:{c['state']}" + (f"({c['exit_code']})" if c["exit_code"] is not None
                                       else "")
        for c in value or ())


POD_COLUMNS = (
    Column("id", "POD ID", short_id), Column("name", "NAME"), Column("namespace", "NAMESPACE"),
    Column("state", "STATE"), Column("ip", "IP", lambda v: cell(v) or "-"),
    Column("created_at", "CREATED"), Column("containers", "CONTAINERS", _containers_cell),
)
"""``pod ls`` / ``pod inspect POD`` table columns."""

CONTAINER_COLUMNS = (
    Column("id", "CONTAINER ID", short_id), Column("name", "NAME"), Column("state", "STATE"),
    Column("exit_code", "EXIT"), Column("pid", "PID"), Column("image", "IMAGE"),
    Column("started_at", "STARTED"),
)
"""``pod inspect POD CTR`` table columns."""
