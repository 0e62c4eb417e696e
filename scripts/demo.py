#!/usr/bin/env python3
"""podkit demo: two real pods on podkit's built-in bridge network, then a Kubernetes manifest.

A server pod runs busybox httpd serving a file; a client pod fetches it over the pod network
(pod IP to pod IP across the bridge), and the host fetches it through the server pod's host
port. Then ``podkit kube play --wait`` runs a two-container Pod manifest (an init container
fills an emptyDir that httpd serves once its readiness probe passes) and ``podkit kube down``
removes it. Every step is timed; everything is torn down at the end, even on failure.

Run by ``make demo`` (as root, inside ``scripts/isolated``: the bridge, veths and iptables rules
live in a private network namespace).
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TypeVar

from podkit.container import ContainerConfig, ContainerMetadata, Mount
from podkit.runtime import Runc, read_cri_log
from podkit.sandbox import (
    Container,
    ContainerState,
    DNSConfig,
    PauseConfig,
    PodSandboxMetadata,
    PortMapping,
    SandboxConfig,
    SandboxManager,
    default_networks,
)

BUSYBOX = Path("/bin/busybox")
HOST_PORT = 8080
T = TypeVar("T")


def make_rootfs(dest: Path) -> Path:
    """A tiny rootfs: static busybox and a symlink per applet."""
    for d in ("bin", "etc", "proc", "sys", "dev", "tmp", "www"):
        (dest / d).mkdir(parents=True)
    shutil.copy2(BUSYBOX, dest / "bin" / "busybox")
    applets = subprocess.run([str(BUSYBOX), "--list"], capture_output=True, text=True,
                             check=True, timeout=30).stdout.split()
    for applet in applets:
        if applet != "busybox":
            (dest / "bin" / applet).symlink_to("busybox")
    (dest / "etc" / "passwd").write_text("root:x:0:0::/:/bin/sh\n")
    return dest


def timed(what: str, fn: Callable[[], T]) -> T:
    """Run ``fn`` and print how long it took."""
    t0 = time.perf_counter()
    result = fn()
    print(f"  {(time.perf_counter() - t0) * 1000:7.1f} ms  {what}")
    return result


@contextmanager
def workdir() -> Iterator[Path]:
    work = Path(tempfile.mkdtemp(prefix="podkit-demo-"))
    try:
        yield work
    finally:
        shutil.rmtree(work, ignore_errors=True)


def container(rootfs: Path, name: str, *command: str, mounts: tuple[Mount, ...] = ()
              ) -> ContainerConfig:
    return ContainerConfig(metadata=ContainerMetadata(name=name), image=str(rootfs),
                           command=list(command), log_path=f"{name}.log", mounts=mounts)


def run(work: Path) -> int:
    rootfs = make_rootfs(work / "rootfs")
    www = work / "www"
    www.mkdir()
    (www / "index.html").write_text("hello from the podkit server pod\n")
    state = work / "state"
    mgr = SandboxManager(work / "root", state, Runc(root=state / "runc"),
                         default_networks(state), pause=PauseConfig(rootfs=str(rootfs)))
    try:
        print("podkit demo: two pods on the built-in bridge network (pk0, 10.88.0.0/16)")
        server = timed("run_sandbox server (netns, CNI bridge+portmap, files, pause)",
                       lambda: mgr.run_sandbox(SandboxConfig(
                           metadata=PodSandboxMetadata(name="server", namespace="demo"),
                           hostname="server", log_directory=str(work / "logs" / "server"),
                           port_mappings=[PortMapping(container_port=80, host_port=HOST_PORT)])))
        httpd = timed("create httpd", lambda: mgr.create_container(server.id, container(
            rootfs, "httpd", "httpd", "-f", "-v", "-p", "80", "-h", "/www",
            mounts=(Mount(container_path="/www", host_path=str(www), readonly=True),))))
        timed("start httpd (under conmon)", lambda: mgr.start_container(httpd))
        client = timed("run_sandbox client", lambda: mgr.run_sandbox(SandboxConfig(
            metadata=PodSandboxMetadata(name="client", namespace="demo"), hostname="client",
            log_directory=str(work / "logs" / "client"),
            dns_config=DNSConfig(servers=["10.88.0.1"], searches=["demo.svc"]))))
        url = f"http://{server.ip}/index.html"
        fetch = timed("create + start the client (wget from the server pod)",
                      lambda: _start(mgr, client.id, container(
                          rootfs, "fetch", "sh", "-c",
                          f"until wget -q -O - {url}; do sleep 0.1; done")))
        status = timed("wait for the client to exit", lambda: _wait_exit(mgr, fetch))
        print(f"\nserver pod {server.id[:12]} ip {server.ip}; client pod {client.id[:12]} "
              f"ip {client.ip}")
        print(f"client exit code {status.exit_code} ({status.reason}); its log "
              f"{status.log_path}:")
        got = b"".join(line.content + b"\n" for line in read_cri_log(status.log_path))
        print("  " + got.decode().strip())
        from_host = timed(f"host -> gateway:{HOST_PORT} (portmap DNAT) -> httpd",
                          lambda: _http_get("10.88.0.1", HOST_PORT))
        status_line = from_host.split(b"\r\n", 1)[0].decode()
        last_line = from_host.decode().strip().splitlines()[-1]
        print(f"  {status_line} ... {last_line}")
        res = mgr.exec_sync(httpd, ["hostname"], timeout=10)
        print(f"exec_sync in httpd: hostname -> {res.stdout.decode().strip()}")
        stats = mgr.sandbox_stats(server.id)
        print(f"server pod cgroups: {stats.process_count} processes, "
              f"{stats.memory_working_set_bytes // 1024} KiB working set")
        ok = status.exit_code == 0 and got == b"hello from the podkit server pod\n" \
            and from_host.endswith(b"hello from the podkit server pod\n")
        print("\ntearing down")
        timed("remove_sandbox client", lambda: mgr.remove_sandbox(client.id))
        timed("remove_sandbox server (containers, pause, CNI DEL, netns, files)",
              lambda: mgr.remove_sandbox(server.id))
    finally:
        mgr.remove_all()
        mgr.close()
    ok = kube_play(work, rootfs) and ok
    print("demo " + ("OK" if ok else "FAILED"))
    return 0 if ok else 1


KUBE_MANIFEST = """\
apiVersion: v1
kind: Pod
metadata: {{name: web, namespace: demo}}
spec:
  terminationGracePeriodSeconds: 2
  volumes: [{{name: www, emptyDir: {{}}}}]
  initContainers:
  - name: content
    image: {rootfs}
    command: [sh, -c, 'echo "hello from kube play" > /www/index.html']
    volumeMounts: [{{name: www, mountPath: /www}}]
  containers:
  - name: httpd
    image: {rootfs}
    command: [httpd, -f, -p, "80", -h, /www]
    volumeMounts: [{{name: www, mountPath: /www, readOnly: true}}]
    readinessProbe: {{httpGet: {{path: /index.html, port: 80}}, periodSeconds: 1}}
  - name: poller
    image: {rootfs}
    command: [sh, -c, 'trap "exit 0" TERM; while true; do wget -q -O - localhost; sleep 5; done']
"""


def kube_play(work: Path, rootfs: Path) -> bool:
    """``podkit kube play --wait`` of a two-container manifest, a fetch, ``kube down``."""
    manifest = work / "web.yaml"
    manifest.write_text(KUBE_MANIFEST.format(rootfs=rootfs))
    dirs = ["--root", str(work / "kube"), "--pause-rootfs", str(rootfs),
            "--log-root", str(work / "logs" / "kube")]
    print(f"\n$ podkit kube play {manifest.name} --wait --timeout 60s")
    played = timed("kube play --wait (init container, 2 containers, readiness probe)",
                   lambda: _podkit("kube", "play", str(manifest), "--wait", "--timeout", "60s",
                                   *dirs))
    print(played.stdout.rstrip())
    ok = played.returncode == 0
    if ok:
        ip = played.stdout.splitlines()[1].split()[2]
        got = timed(f"host -> pod {ip}:80 (httpd)", lambda: _http_get(ip, 80))
        print("  " + got.decode().strip().splitlines()[-1])
        ok = got.endswith(b"hello from kube play\n")
    else:
        print(played.stderr.rstrip(), file=sys.stderr)
    print(f"$ podkit kube down {manifest.name}")
    downed = timed("kube down (preStop, grace period, sandbox, volumes)",
                   lambda: _podkit("kube", "down", str(manifest), *dirs))
    print(downed.stdout.rstrip() or downed.stderr.rstrip())
    return ok and downed.returncode == 0


def _podkit(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", "import sys; from podkit.cli import main; "
                           "sys.exit(main())", *args], capture_output=True, text=True,
                          timeout=300, check=False)


def _start(mgr: SandboxManager, sandbox_id: str, cfg: ContainerConfig) -> str:
    cid = mgr.create_container(sandbox_id, cfg)
    mgr.start_container(cid)
    return cid


def _wait_exit(mgr: SandboxManager, cid: str, timeout: float = 30.0) -> Container:
    deadline = time.monotonic() + timeout
    while (status := mgr.container_status(cid)).state != ContainerState.CONTAINER_EXITED:
        if time.monotonic() > deadline:
            raise TimeoutError(f"container {cid} still running after {timeout}s")
        time.sleep(0.05)
    return status


def _http_get(host: str, port: int) -> bytes:
    with socket.create_connection((host, port), timeout=5) as s:
        s.sendall(b"GET /index.html HTTP/1.0\r\n\r\n")
        data = b""
        while chunk := s.recv(4096):
            data += chunk
    return data


def main() -> int:
    if os.geteuid() != 0 or not BUSYBOX.exists() or os.environ.get("PODKIT_ISOLATED") != "1":
        print("demo needs root, /bin/busybox and scripts/isolated (run `make demo`)",
              file=sys.stderr)
        return 1
    with workdir() as work:
        try:
            return run(work)
        except Exception as exc:
            print(f"demo FAILED: {type(exc).__name__}: {exc}", file=sys.stderr)
            return 1


if __name__ == "__main__":
    sys.exit(main())
