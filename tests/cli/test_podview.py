"""``podkit._cli.podview``: the pod and container records ``pod ls`` / ``pod inspect`` print,
over the in-memory fake manager."""

from __future__ import annotations

import io
import json
from typing import Any

from podkit._cli.output import emit
from podkit._cli.podview import (
    CONTAINER_COLUMNS,
    POD_COLUMNS,
    container_record,
    pod_record,
    rfc3339,
)
from podkit.container import ContainerConfig, ContainerMetadata, Mount
from podkit.pods.testing import FakePodManager
from podkit.sandbox import PodSandboxMetadata, PortMapping, SandboxConfig


class _Fake(FakePodManager):
    def container_log_file(self, id: str) -> str:
        return f"/logs/{id}.log"


def _pod() -> tuple[Any, Any, str]:
    mgr = _Fake(networks=object())  # any value: the fake only checks for None
    sb = mgr.run_sandbox(SandboxConfig(
        metadata=PodSandboxMetadata(name="web", namespace="demo", uid="u1", attempt=2),
        hostname="web-host", labels={"app": "web"}, annotations={"a": "1"},
        port_mappings=[PortMapping(container_port=80, host_port=8080)],
        log_directory="/var/log/pods/web"))
    cid = mgr.create_container(sb.id, ContainerConfig(
        metadata=ContainerMetadata(name="httpd"), image="/srv/busybox",
        command=["httpd"], args=["-f"], labels={"tier": "front"},
        mounts=[Mount(container_path="/data", host_path="/srv/data", readonly=True)]))
    return mgr, mgr.sandbox_status(sb.id), cid


def test_rfc3339() -> None:
    assert rfc3339(0) is None
    assert rfc3339(1_764_754_200_123_456_789) == "2025-12-03T09:30:00.123456789Z"
    assert rfc3339(1_000_000_000) == "1970-01-01T00:00:01.000000000Z"


def test_pod_record() -> None:
    mgr, sb, cid = _pod()
    rec = pod_record(mgr, sb, "crun")
    assert {k: rec[k] for k in ("id", "name", "namespace", "uid", "attempt", "state", "ip",
                                "ips", "host_network", "hostname", "labels", "annotations",
                                "log_directory", "runtime")} == {
        "id": sb.id, "name": "web", "namespace": "demo", "uid": "u1", "attempt": 2,
        "state": "READY", "ip": sb.ip, "ips": list(sb.ips), "host_network": False,
        "hostname": "web-host", "labels": {"app": "web"}, "annotations": {"a": "1"},
        "log_directory": "/var/log/pods/web", "runtime": "crun"}
    assert rec["port_mappings"] == [
        {"container_port": 80, "host_port": 8080, "protocol": "TCP", "host_ip": ""}]
    assert rec["created_at"] == rfc3339(sb.created_at)
    assert [c["id"] for c in rec["containers"]] == [cid]
    json.dumps(rec)  # plain JSON values only


def test_container_record_before_and_after_exit() -> None:
    mgr, _, cid = _pod()
    rec = container_record(mgr, mgr.container_status(cid))
    assert (rec["name"], rec["state"], rec["exit_code"], rec["started_at"]) == (
        "httpd", "CREATED", None, None)
    assert rec["mounts"] == [{"container_path": "/data", "host_path": "/srv/data",
                              "readonly": True, "propagation": "PRIVATE"}]
    assert (rec["command"], rec["args"], rec["log_path"]) == (
        ["httpd"], ["-f"], f"/logs/{cid}.log")
    mgr.start_container(cid)
    mgr.exit(cid, 3)
    rec = container_record(mgr, mgr.container_status(cid))
    assert (rec["state"], rec["exit_code"], rec["reason"]) == ("EXITED", 3, "Error")
    assert rec["finished_at"] is not None and rec["started_at"] is not None


def test_tables() -> None:
    mgr, sb, cid = _pod()
    mgr.start_container(cid)
    mgr.exit(cid, 1)
    out = io.StringIO()
    emit(argparse_ns(), [pod_record(mgr, sb, "runc")], POD_COLUMNS, out=out)
    header, row = out.getvalue().splitlines()
    assert header.split() == ["POD", "ID", "NAME", "NAMESPACE", "STATE", "IP", "CREATED",
                              "CONTAINERS"]
    assert row.split()[:4] == [sb.id[:12], "web", "demo", "READY"]
    assert row.endswith("httpd:EXITED(1)")
    out = io.StringIO()
    emit(argparse_ns(), container_record(mgr, mgr.container_status(cid)), CONTAINER_COLUMNS,
         out=out)
    assert out.getvalue().splitlines()[1].split()[:4] == [cid[:12], "httpd", "EXITED", "1"]


def argparse_ns() -> Any:
    import argparse

    return argparse.Namespace(output="table", quiet=False)
