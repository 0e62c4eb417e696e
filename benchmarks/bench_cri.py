"""Benchmark the reference CRI server: the kubelet's pod calls over gRPC against the raw floor.

Each round runs one pod through the reference server (in this process, on a Unix socket, with
a gRPC client) and one pod by hand, alternating who goes first:

* CRI: ``RunPodSandbox``; ``CreateContainer`` + ``StartContainer`` (a rootfs-dir image, and an
  image reference from the store, which adds an overlay rootfs); ``StopPodSandbox``;
  ``RemovePodSandbox`` (the server runs pause and containers under conmon, as it must so they
  outlive it);
* floor: ``netns.create`` + the same CNI plugins (loopback, bridge, portmap) executed directly
  with libcni's stdin + ``runc create``/``runc start`` of the same pause bundle (the
  ``config.json`` the server wrote for a template pod, netns path patched); ``runc create`` +
  ``start`` of the same container bundle; stop = ``runc kill`` + CNI DEL + netns removal;
  remove = ``runc delete`` + bundle dirs.

The table shows medians (and minimums) in ms and the ratios CRI / floor. Target:
RunPodSandbox <= 1.25x the floor. Needs root and ``scripts/isolated``.

Usage: ``scripts/isolated .venv/bin/python benchmarks/bench_cri.py [--rounds N] [--json out]``
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import os
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import grpc

from podkit import cni, netns, oci
from podkit.cni.invoke import build_request, plugin_env
from podkit.cri import CRIService, api_pb2_grpc, serve
from podkit.cri import api_pb2 as pb
from podkit.image import ImageStore, import_image
from podkit.runtime import Runc
from podkit.sandbox import PauseConfig, SandboxManager, default_networks

CNI_BIN = "/usr/lib/cni"
BRIDGE = "pkcribench0"
IMAGE = "localhost/pk-cri-bench/busybox:1"


def busybox_rootfs(dest: Path) -> Path:
    """A static busybox with its applet links."""
    for d in ("bin", "etc", "proc", "sys", "dev", "tmp", "run"):
        (dest / d).mkdir(parents=True, exist_ok=True)
    shutil.copy2("/bin/busybox", dest / "bin" / "busybox")
    out = subprocess.run(["/bin/busybox", "--list"], check=True, capture_output=True, text=True)
    for applet in out.stdout.split():
        if applet != "busybox":
            (dest / "bin" / applet).symlink_to("busybox")
    (dest / "etc" / "passwd").write_text("root:x:0:0:root:/root:/bin/sh\n")
    (dest / "etc" / "group").write_text("root:x:0:\n")
    return dest


def oci_layout(rootfs: Path, dest: Path) -> Path:
    """A one-layer OCI layout of ``rootfs`` (Cmd: sleep)."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tf:
        tf.add(rootfs, arcname=".")
    layer = buf.getvalue()
    blobs: dict[str, bytes] = {}

    def put(data: bytes) -> dict[str, Any]:
        digest = "sha256:" + hashlib.sha256(data).hexdigest()
        blobs[digest] = data
        return {"digest": digest, "size": len(data)}

    layer_d = put(layer)
    config = put(json.dumps({
        "architecture": "amd64", "os": "linux",
        "config": {"Cmd": ["sleep", "3600"], "Env": ["PATH=/bin"]},
        "rootfs": {"type": "layers", "diff_ids": [layer_d["digest"]]}}).encode())
    manifest = put(json.dumps({
        "schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {"mediaType": "application/vnd.oci.image.config.v1+json", **config},
        "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar", **layer_d}]}).encode())
    (dest / "blobs" / "sha256").mkdir(parents=True)
    for digest, data in blobs.items():
        (dest / "blobs" / "sha256" / digest.split(":")[1]).write_bytes(data)
    (dest / "oci-layout").write_text('{"imageLayoutVersion": "1.0.0"}')
    (dest / "index.json").write_text(json.dumps({"schemaVersion": 2, "manifests": [
        {"mediaType": "application/vnd.oci.image.manifest.v1+json", **manifest}]}))
    return dest


def pod_config() -> pb.PodSandboxConfig:
    cfg = pb.PodSandboxConfig(metadata=pb.PodSandboxMetadata(
        name=f"pk-cri-bench-{uuid.uuid4().hex[:8]}", uid=uuid.uuid4().hex, namespace="bench"),
        hostname="bench")
    cfg.linux.security_context.namespace_options.pid = pb.CONTAINER
    return cfg


def container_config(image: str) -> pb.ContainerConfig:
    cfg = pb.ContainerConfig(metadata=pb.ContainerMetadata(name="c"),
                             image=pb.ImageSpec(image=image), command=["sleep", "3600"])
    cfg.linux.security_context.namespace_options.pid = pb.CONTAINER
    return cfg


class Floor:
    """The same pod by hand: netns, CNI plugins, runc on the server's bundles."""

    def __init__(self, base: Path, networks: cni.Networks, pause_spec: oci.Spec,
                 ctr_spec: oci.Spec, template_dir: str) -> None:
        self.base = base
        self.networks = networks
        self.pause_spec = pause_spec
        self.ctr_spec = ctr_spec
        self.template_dir = template_dir
        self.runc_root = base / "runc"
        self.results: dict[tuple[str, str], Any] = {}

    def _runc(self, *args: str) -> str:
        # Files, not pipes: a created container inherits runc's stdio and keeps it open.
        with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
            proc = subprocess.run(["runc", "--root", str(self.runc_root), *args],
                                  stdin=subprocess.DEVNULL, stdout=out, stderr=err,
                                  check=False)
            out.seek(0)
            err.seek(0)
            if proc.returncode != 0:
                raise RuntimeError(f"runc {args}: {err.read().decode()}")
            return out.read().decode()

    def _cni(self, command: str, id: str, path: str) -> None:
        for att in (self.networks.attachments if command == "ADD"
                    else reversed(self.networks.attachments)):
            conf = att.config
            env = plugin_env(command, container_id=id, netns=path, ifname=att.ifname,
                             args=(), path=[CNI_BIN])
            prev = self.results.get((id, att.ifname)) if command == "DEL" else None
            for plugin in conf.plugins if command == "ADD" else tuple(reversed(conf.plugins)):
                stdin = build_request(plugin, conf.name, conf.cni_version, prev, {})
                proc = subprocess.run([os.path.join(CNI_BIN, plugin.type)], input=stdin,
                                      env=env, capture_output=True, check=False)
                if proc.returncode != 0:
                    raise RuntimeError(f"{plugin.type} {command}: {proc.stdout!r}")
                if command == "ADD":
                    prev = cni.parse_result(proc.stdout, conf.cni_version)
            if command == "ADD":
                self.results[(id, att.ifname)] = prev

    def _bundle(self, name: str, spec: oci.Spec) -> Path:
        d = self.base / name
        d.mkdir(parents=True, exist_ok=True)
        spec.dump(d / "config.json")
        return d

    def run(self, i: int) -> None:
        id = f"pk-cri-fl{i}"
        ns = netns.create(id, loopback_up=True)
        self._cni("ADD", id, ns.path)
        spec = self.pause_spec.copy()
        assert spec.linux is not None
        for n in spec.linux.namespaces or ():
            if n.type == "network":
                n.path = ns.path
        spec.linux.cgroups_path = f"/podkit/{id}"
        _retarget(spec, self.template_dir, str(self.base / "files"))
        bundle = self._bundle(f"{id}/pause", spec)
        self._runc("create", "--bundle", str(bundle), f"{id}-p")
        self._runc("start", f"{id}-p")

    def create_start(self, i: int) -> None:
        id = f"pk-cri-fl{i}"
        pid = json.loads(self._runc("state", f"{id}-p"))["pid"]
        spec = self.ctr_spec.copy()
        assert spec.linux is not None
        for n in spec.linux.namespaces or ():
            if n.path and n.path.startswith("/proc/"):
                n.path = f"/proc/{pid}/ns/{n.path.rsplit('/', 1)[1]}"
        spec.linux.cgroups_path = f"/podkit/{id}-c"
        _retarget(spec, self.template_dir, str(self.base / "files"))
        bundle = self._bundle(f"{id}/ctr", spec)
        self._runc("create", "--bundle", str(bundle), f"{id}-c")
        self._runc("start", f"{id}-c")

    def stop(self, i: int) -> None:
        id = f"pk-cri-fl{i}"
        self._runc("kill", f"{id}-c", "KILL")
        self._runc("kill", f"{id}-p", "KILL")
        path = os.path.join(netns.DEFAULT_DIR, id)
        self._cni("DEL", id, path)
        netns.remove(path)

    def remove(self, i: int) -> None:
        id = f"pk-cri-fl{i}"
        self._runc("delete", "--force", f"{id}-c")
        self._runc("delete", "--force", f"{id}-p")
        shutil.rmtree(self.base / id)


def _retarget(spec: oci.Spec, old: str, new: str) -> None:
    """Point the template pod's sandbox file mounts at the floor's copies."""
    for m in spec.mounts or ():
        if m.source and m.source.startswith(old):
            m.source = new + m.source[len(old):]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--json", help="write the measurements to this file")
    opts = parser.parse_args()
    if os.environ.get("PODKIT_ISOLATED") != "1" or os.geteuid() != 0:
        print("run as root under scripts/isolated", file=sys.stderr)
        return 2
    base = Path(tempfile.mkdtemp(prefix="pk-cri-bench-"))
    rootfs = busybox_rootfs(base / "busybox")
    subprocess.run(["ip", "link", "add", BRIDGE, "type", "bridge"], capture_output=True,
                   check=False)
    store = ImageStore(base / "root")
    import_image(store, oci_layout(rootfs, base / "layout"), IMAGE)
    networks = default_networks(base / "state", bridge=BRIDGE, name="pk-cri-bench",
                                subnet="10.89.0.0/16")
    manager = SandboxManager(base / "mroot", base / "state", Runc(root=base / "mrunc"),
                             networks, pause=PauseConfig(rootfs=str(rootfs)),
                             netns_prefix="pk-cri-b-", images=store)
    server = serve(base / "cri.sock", CRIService(manager, store))
    channel = grpc.insecure_channel(server.address)
    rt = api_pb2_grpc.RuntimeServiceStub(channel)
    times: dict[str, list[float]] = {}
    try:
        # The template pod: its bundles are the floor's bundles.
        sid = rt.RunPodSandbox(pb.RunPodSandboxRequest(config=pod_config())).pod_sandbox_id
        cid = rt.CreateContainer(pb.CreateContainerRequest(
            pod_sandbox_id=sid, config=container_config(str(rootfs)))).container_id
        pause_spec = oci.Spec.load(manager.root_dir / "sandboxes" / sid / "bundle" /
                                   "config.json")
        ctr_spec = oci.Spec.load(manager.root_dir / "containers" / cid / "bundle" /
                                 "config.json")
        template = str(manager.root_dir / "sandboxes" / sid)
        files = base / "floor" / "files"
        files.mkdir(parents=True)
        for name in ("hostname", "hosts", "resolv.conf"):
            shutil.copy(Path(template) / name, files / name)
        (files / "shm").mkdir()
        rt.RemovePodSandbox(pb.RemovePodSandboxRequest(pod_sandbox_id=sid))
        floor = Floor(base / "floor", networks, pause_spec, ctr_spec, template)

        def timed(key: str, fn: Callable[[], Any], keep: bool) -> Any:
            t0 = time.perf_counter()
            out = fn()
            if keep:
                times.setdefault(key, []).append(time.perf_counter() - t0)
            return out

        def cri_pod(keep: bool, image: str, label: str) -> None:
            sid = timed("cri RunPodSandbox", lambda: rt.RunPodSandbox(
                pb.RunPodSandboxRequest(config=pod_config())).pod_sandbox_id, keep)

            def create_start() -> None:
                cid = rt.CreateContainer(pb.CreateContainerRequest(
                    pod_sandbox_id=sid, config=container_config(image))).container_id
                rt.StartContainer(pb.StartContainerRequest(container_id=cid))

            timed(f"cri {label}", create_start, keep)
            timed("cri StopPodSandbox", lambda: rt.StopPodSandbox(
                pb.StopPodSandboxRequest(pod_sandbox_id=sid)), keep)
            timed("cri RemovePodSandbox", lambda: rt.RemovePodSandbox(
                pb.RemovePodSandboxRequest(pod_sandbox_id=sid)), keep)

        def floor_pod(keep: bool, i: int) -> None:
            timed("floor RunPodSandbox", lambda: floor.run(i), keep)
            timed("floor CreateContainer+StartContainer", lambda: floor.create_start(i), keep)
            timed("floor StopPodSandbox", lambda: floor.stop(i), keep)
            timed("floor RemovePodSandbox", lambda: floor.remove(i), keep)

        for i in range(opts.rounds + 1):  # round 0 warms caches
            keep = i > 0
            if i % 2:
                floor_pod(keep, i)
            cri_pod(keep, str(rootfs), "CreateContainer+StartContainer")
            if not i % 2:
                floor_pod(keep, i)
            cri_pod(keep, IMAGE, "CreateContainer+StartContainer (image ref)")
    finally:
        channel.close()
        server.stop()
        manager.remove_all()
        manager.close()
        from podkit import image

        for r in image.list_rootfs(store):
            image.remove_rootfs(store, r.container_id)
        subprocess.run(["ip", "link", "del", BRIDGE], capture_output=True, check=False)
        shutil.rmtree(base, ignore_errors=True)

    med = {k: statistics.median(v) * 1000 for k, v in times.items()}
    low = {k: min(v) * 1000 for k, v in times.items()}
    rows: list[dict[str, Any]] = []
    print(f"podkit.cri.serve over gRPC vs the raw floor, {opts.rounds} rounds (ms)")
    head = (f"{'operation':<44} {'cri med':>8} {'floor med':>9} {'ratio':>6} "
            f"{'cri min':>8} {'floor min':>9} {'ratio':>6} {'target':>7}")
    print(head)
    for op, floor_op, target in (
        ("RunPodSandbox", "RunPodSandbox", "<= 1.25"),
        ("CreateContainer+StartContainer", "CreateContainer+StartContainer", ""),
        ("CreateContainer+StartContainer (image ref)", "CreateContainer+StartContainer", ""),
        ("StopPodSandbox", "StopPodSandbox", ""),
        ("RemovePodSandbox", "RemovePodSandbox", ""),
    ):
        c, f = f"cri {op}", f"floor {floor_op}"
        ratio, ratio_min = med[c] / med[f], low[c] / low[f]
        rows.append({"operation": op, "cri_ms": med[c], "floor_ms": med[f], "ratio": ratio,
                     "cri_min_ms": low[c], "floor_min_ms": low[f], "ratio_min": ratio_min,
                     "target": target})
        print(f"{op:<44} {med[c]:>8.1f} {med[f]:>9.1f} {ratio:>6.2f} {low[c]:>8.1f} "
              f"{low[f]:>9.1f} {ratio_min:>6.2f} {target:>7}")
    if opts.json:
        Path(opts.json).write_text(json.dumps({"rounds": opts.rounds, "results": rows},
                                              indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
