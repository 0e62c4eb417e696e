"""A pause container and an app container built by podkit's builders, run by real runc.

The app joins the pause's network, ipc, uts and pid namespaces through /proc/<pid>/ns paths
(the pod network namespace is pinned with podkit.netns), and sees the pod's files.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from podkit import netns
from podkit.container import PodContext, build_container_spec
from podkit.pods.config import (
    ContainerConfig,
    ContainerMetadata,
    DNSConfig,
    KeyValue,
    LinuxContainerConfig,
    LinuxContainerSecurityContext,
    LinuxPodSandboxConfig,
    Mount,
    PodSandboxMetadata,
    SandboxConfig,
)
from podkit.pods.rules import resolv_conf
from podkit.sandbox import SandboxFiles, build_sandbox_spec
from support import require_binary, require_isolated

pytestmark = pytest.mark.integration


class Runc:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.created: list[str] = []

    def __call__(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["runc", "--root", str(self.root), *args],
            capture_output=True, text=True, timeout=60, check=check, stdin=subprocess.DEVNULL,
        )

    def start_detached(self, id: str, bundle: Path) -> int:
        """``runc run --detach`` with stdio in a file: the container inherits it, so no pipe."""
        self.created.append(id)
        log = bundle / "stdio.log"
        with open(log, "wb") as out:
            rc = subprocess.run(
                ["runc", "--root", str(self.root), "run", "--detach", "--bundle", str(bundle), id],
                stdin=subprocess.DEVNULL, stdout=out, stderr=out, timeout=60,
            ).returncode
        assert rc == 0, log.read_text()
        return int(json.loads(self("state", id).stdout)["pid"])


@pytest.fixture
def runc(tmp_path: Path) -> Iterator[Runc]:
    require_isolated()
    require_binary("runc")
    r = Runc(tmp_path / "runc-root")
    yield r
    for id in reversed(r.created):
        r("delete", "--force", id, check=False)


def test_pod_with_pause_and_app_container(
    runc: Runc, busybox_rootfs: Path, tmp_path: Path
) -> None:
    suffix = uuid.uuid4().hex[:8]
    sandbox_id, app_id = f"pk-sb-pause-{suffix}", f"pk-sb-app-{suffix}"
    rootfs = tmp_path / "rootfs"
    shutil.copytree(busybox_rootfs, rootfs, symlinks=True)
    files_dir = tmp_path / "sandbox"
    files_dir.mkdir()
    files = SandboxFiles.under(files_dir)
    Path(files.shm).mkdir()
    Path(files.hostname).write_text("pk-pod\n")
    Path(files.hosts).write_text("127.0.0.1 localhost pk-pod\n")
    dns = DNSConfig(servers=["10.88.0.53"], searches=["pk.local"], options=["ndots:2"])
    Path(files.resolv_conf).write_text(resolv_conf(dns))
    host_dir = tmp_path / "data"
    host_dir.mkdir()
    (host_dir / "note").write_text("from the host\n")

    pod = SandboxConfig(
        metadata=PodSandboxMetadata(name="pk-pod", uid="uid-1", namespace="test"),
        hostname="pk-pod",
        dns_config=dns,
        linux=LinuxPodSandboxConfig(sysctls={"net.ipv4.ip_unprivileged_port_start": "80"}),
    )
    ns = netns.create(f"pk-sb-{suffix}", dir="/run/netns", loopback_up=True)
    try:
        pause_bundle = tmp_path / "pause"
        pause_bundle.mkdir()
        build_sandbox_spec(
            pod, id=sandbox_id, files=files, args=["sleep", "2147483647"],
            env=["PATH=/bin"], rootfs=str(rootfs), netns_path=ns.path, oom_score_floor=0,
        ).dump(pause_bundle / "config.json")
        pause_pid = runc.start_detached(sandbox_id, pause_bundle)

        context = PodContext(
            id=sandbox_id, config=pod, files=files,
            namespace_paths={t: f"/proc/{pause_pid}/ns/{n}" for t, n in (
                ("network", "net"), ("ipc", "ipc"), ("uts", "uts"), ("pid", "pid"))},
        )
        app = ContainerConfig(
            metadata=ContainerMetadata(name="app"),
            image=str(rootfs),
            command=["sh", "-c", (
                "echo host=$(hostname); echo user=$(id -u):$(id -g); echo env=$GREETING;"
                " echo note=$(cat /data/note); echo dns=$(grep -c nameserver /etc/resolv.conf);"
                " echo sysctl=$(cat /proc/sys/net/ipv4/ip_unprivileged_port_start);"
                " echo pid1=$(cat /proc/1/comm); echo links=$(ls /sys/class/net | tr '\\n' ,);"
                " touch /probe 2>/dev/null && echo root=rw || echo root=ro"
            )],
            envs=[KeyValue(key="GREETING", value="hi")],
            mounts=[Mount(container_path="/data", host_path=str(host_dir), readonly=True)],
            linux=LinuxContainerConfig(security_context=LinuxContainerSecurityContext(
                run_as_user=1000, run_as_group=1000, readonly_rootfs=True,
            )),
        )
        app_bundle = tmp_path / "app"
        app_bundle.mkdir()
        build_container_spec(
            app, context, id=app_id, rootfs=str(rootfs), oom_score_floor=0
        ).dump(app_bundle / "config.json")
        runc.created.append(app_id)
        out = runc("run", "--bundle", str(app_bundle), app_id)
        seen = dict(line.split("=", 1) for line in out.stdout.splitlines())
        assert seen == {
            "host": "pk-pod",
            "user": "1000:1000",
            "env": "hi",
            "note": "from the host",
            "dns": "1",
            "sysctl": "80",
            "pid1": "sleep",
            "links": "lo,",
            "root": "ro",
        }, out.stdout + out.stderr
    finally:
        for id in reversed(runc.created):
            runc("delete", "--force", id, check=False)
        runc.created.clear()
        ns.remove()
    assert not netns.exists(ns.path)
