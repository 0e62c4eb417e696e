"""Issue 24's "done when", as one CI host: 10.88.0.0/16 is already routed elsewhere (podman's
default range), and two jobs side by side, each with its own ``--root``, its own conflist chosen
with ``--network`` and its own CDI spec, ``kube play --wait`` a manifest with an init container,
a readiness probe, env from a ConfigMap and a device from a ``cdi.k8s.io`` annotation, with no
pause flag (the built-in pause). After ``kube down`` a census finds nothing of either job: no
netns pin, link, address, cgroup, mount or log outside its root, and the route it did not own
is untouched. Real runc, conmon, catatonit, CNI plugins and network namespaces."""

from __future__ import annotations

import ipaddress
import json
import os
import stat
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

import _leaks
from support import require_binary, require_isolated

from .node_helpers import Job, cgroup_dirs, copy_rootfs, del_link, mounts_under

pytestmark = pytest.mark.integration

TAKEN = "pktaken0"  # where this host routes 10.88.0.0/16 already
JOBS = {"a": ("pkcia0", "10.123.21.0/24"), "b": ("pkcib0", "10.123.22.0/24")}
KINDS = ("netns", "link", "mount", "ipam", "cgroup")

MANIFEST = """\
apiVersion: v1
kind: ConfigMap
metadata: {{name: web-conf, namespace: ci-{job}}}
data: {{GREETING: hello from {job}}}
---
apiVersion: apps/v1
kind: Deployment
metadata: {{name: web, namespace: ci-{job}}}
spec:
  selector: {{matchLabels: {{app: web}}}}
  template:
    metadata:
      labels: {{app: web}}
      annotations: {{cdi.k8s.io/ci: example.com/ci=gpu0}}
    spec:
      terminationGracePeriodSeconds: 1
      initContainers:
      - name: prepare
        image: {rootfs}
        command: [sh, -c, 'test -c /dev/pk-ci-dev && echo "$GREETING" > /work/greeting']
        envFrom: [{{configMapRef: {{name: web-conf}}}}]
        volumeMounts: [{{name: work, mountPath: /work}}]
      containers:
      - name: web
        image: {rootfs}
        command: [sh, -c, 'cat /work/greeting; exec sleep 3600']
        envFrom: [{{configMapRef: {{name: web-conf}}}}]
        volumeMounts: [{{name: work, mountPath: /work}}]
        readinessProbe:
          exec: {{command: [test, -s, /work/greeting]}}
          periodSeconds: 1
      volumes: [{{name: work, emptyDir: {{}}}}]
"""


def _route_dev(address: str) -> str:
    out = subprocess.run(["ip", "-o", "route", "get", address], capture_output=True,
                         text=True, check=True).stdout.split()
    return out[out.index("dev") + 1]


def _job(base: Path, rootfs: Path, name: str) -> tuple[Job, Path]:
    """A job with its conflist, its CDI spec (a char device it made) and its manifest."""
    job = Job(base, rootfs)
    bridge, subnet = JOBS[name]
    (base / "net.d").mkdir()
    (base / "net.d" / "10-ci.conflist").write_text(json.dumps({
        "cniVersion": "1.0.0", "name": f"ci-{name}", "plugins": [
            {"type": "bridge", "bridge": bridge, "isGateway": True,
             "ipam": {"type": "host-local", "ranges": [[{"subnet": subnet}]],
                      "dataDir": str(base / "ipam")}}]}))
    _leaks.register_ipam_dir(base / "ipam")
    os.mknod(base / "devnode", 0o666 | stat.S_IFCHR, os.makedev(1, 3))
    (base / "cdi").mkdir()
    (base / "cdi" / "ci.yaml").write_text(yaml.safe_dump({
        "cdiVersion": "0.6.0", "kind": "example.com/ci", "devices": [
            {"name": "gpu0", "containerEdits": {
                "env": [f"PK_CI_DEVICE=gpu0-{name}"],
                "deviceNodes": [{"path": "/dev/pk-ci-dev", "hostPath": str(base / "devnode")}]}}]}))
    manifest = job.write("app.yaml", MANIFEST.format(job=name, rootfs=rootfs))
    return job, manifest


def _outside(jobs: list[Job]) -> set[str]:
    """What a CLI command would leave in the host-wide places instead of under its root."""
    found = {f"netns {p}" for p in Path("/run/netns").glob("*")}
    found |= {f"log {p}" for p in Path("/var/log/pods").glob("ci-*")}
    found |= {f"scratch {p}" for p in Path("/dev/shm").glob("podkit-*")}
    found |= {f"state {p}" for p in Path("/run/podkit").glob("*")}
    found |= {f"root {p}" for p in Path("/var/lib/podkit").glob("*")}
    return found | {f"mount {m}" for j in jobs for m in mounts_under(j.base)}


@pytest.fixture
def host(busybox_rootfs: Path, tmp_path: Path) -> Iterator[list[tuple[Job, Path]]]:
    require_isolated()
    for b in ("runc", "conmon", "catatonit"):
        require_binary(b)
    subprocess.run(["ip", "link", "add", TAKEN, "type", "veth", "peer", "name", f"{TAKEN}p"],
                   check=True)
    subprocess.run(["ip", "link", "set", f"{TAKEN}p", "up"], check=True)
    subprocess.run(["ip", "addr", "add", "10.88.0.1/16", "dev", TAKEN], check=True)
    subprocess.run(["ip", "link", "set", TAKEN, "up"], check=True)
    rootfs = copy_rootfs(busybox_rootfs, tmp_path / "rootfs")
    jobs = [_job(tmp_path / name, rootfs, name) for name in JOBS]
    before = _leaks.snapshot(KINDS)
    try:
        yield jobs
    finally:
        for job, manifest in jobs:
            job.run("kube", "down", str(manifest))
        for bridge, _ in JOBS.values():
            del_link(bridge)
        del_link(TAKEN)
    assert _leaks.leaked_since(before, kinds=KINDS) == []


def test_two_ci_jobs_on_a_host_whose_default_range_is_taken(
        host: list[tuple[Job, Path]]) -> None:
    jobs = [job for job, _ in host]
    outside = _outside(jobs)
    assert _route_dev("10.88.0.9") == TAKEN
    plays = [job.popen("kube", "play", str(manifest), "--wait", "--timeout", "3m", "-o", "json",
                       "--network", f"ci-{name}", "--cni-conf-dir", str(job.base / "net.d"),
                       "--cdi-spec-dir", str(job.base / "cdi"))
             for (job, manifest), name in zip(host, JOBS, strict=True)]
    results = []
    for play in plays:
        out, err = play.communicate(timeout=400)
        assert play.returncode == 0, err
        results.append(json.loads(out))

    for (job, _), name, result in zip(host, JOBS, results, strict=True):
        (pod,) = result["pods"]
        assert (pod["namespace"], pod["name"], pod["status"]) == (f"ci-{name}", "web-pod",
                                                                 "Ready")
        bridge, subnet = JOBS[name]
        assert ipaddress.ip_address(pod["ip"]) in ipaddress.ip_network(subnet)
        assert _route_dev(pod["ip"]) == bridge
        assert job.ok("pod", "exec", "web-pod", "web", "--", "sh", "-c",
                      'echo "$PK_CI_DEVICE $GREETING"; test -c /dev/pk-ci-dev && echo dev'
                      ).split() == [f"gpu0-{name}", "hello", "from", name, "dev"]
        logs = sorted((job.root / "logs").glob("ci-*/web/0.log"))
        assert len(logs) == 1 and f"hello from {name}" in logs[0].read_text()
        assert len(list(job.netns_dir.iterdir())) == 1
        # each job sees its own pod only
        assert [p["name"] for p in json.loads(job.ok("pod", "ls", "-o", "json"))] == ["web-pod"]
    assert _route_dev("10.88.0.9") == TAKEN  # no job took or rerouted the default range
    assert not Path("/sys/class/net/pk0").exists()  # nor made the built-in bridge
    assert _outside(jobs) - outside <= {f"mount {m}" for j in jobs for m in mounts_under(j.base)}

    for job, manifest in host:
        job.ok("kube", "down", str(manifest))
        assert json.loads(job.ok("pod", "ls", "-o", "json")) == []
        assert not job.netns_dir.exists() and mounts_under(job.base) == []
        assert cgroup_dirs(job.cgroup_parent) == []
        assert not any((job.base / "ipam").rglob("10.*"))  # every reservation released
    assert _outside(jobs) == outside
    assert _route_dev("10.88.0.9") == TAKEN
