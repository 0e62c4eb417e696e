"""Helpers the CRI and hostile tests share: the test images' names and configs, CRI configs
as kubelet sends them, and :class:`Harness` (a CRIService served on a temp socket with gRPC
stubs). The fixtures that build them are in ``cri/fixtures.py``.

The images are made with tarfile from the session busybox rootfs (tests/image/imagebuild.py) and
imported into a store; the server runs real runc under conmon, real CNI plugins on a test bridge
inside the scripts/isolated namespace.
"""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import _leaks

BRIDGE = "pkcri0"
SUBNET = "10.89.0.0/16"
NETWORK = "pk-cri-net"
BUSYBOX = "localhost/pk-cri/busybox:1"
PAUSE = "localhost/pk-cri/pause:1"
BUSYBOX_CONFIG = {
    "Env": ["PATH=/usr/sbin:/usr/bin:/sbin:/bin", "FROM_IMAGE=yes"],
    "Cmd": ["sleep", "3600"],
    "WorkingDir": "/tmp",
    "StopSignal": "SIGTERM",
}
PAUSE_CONFIG = {"Env": ["PATH=/bin"], "Entrypoint": ["sleep"], "Cmd": ["2147483647"]}


def import_images(root: Path, layouts: dict[str, Path]) -> None:
    """Import the test images into the store under ``root``."""
    from podkit.image import ImageStore, import_image

    store = ImageStore(root)
    for name, layout in layouts.items():
        import_image(store, layout, name)


def write_cni_conf(state: Path) -> Path:
    """The test bridge network's conflist in ``<state>/net.d`` (the returned dir)."""
    from podkit.sandbox import default_network_config

    default_network_config(state, name=NETWORK, bridge=BRIDGE, subnet=SUBNET)
    return state / "net.d"


class Harness:
    """A CRIService served on a temp socket, and gRPC stubs talking to it."""

    def __init__(self, base: Path, layouts: dict[str, Path], *, runtime: str = "runc",
                 cdi_dirs: list[Path] | None = None, service: Any = None,
                 registry_hosts: Any = None,
                 **service_kw: Any) -> None:
        """``service``: the CRIService class to serve (a subclass), made with ``service_kw``
        (hooks, ...)."""
        import grpc

        from podkit.cri import CRIService, api_pb2_grpc, serve
        from podkit.image import ImageStore
        from podkit.runtime import Runc
        from podkit.sandbox import SandboxManager, default_networks, pause_config

        self.base = base
        self.layouts = layouts
        import_images(base, layouts)
        self.store = ImageStore(base)
        _leaks.register_runtime_root(base / "runc")
        _leaks.register_ipam_dir(base / "state" / "ipam")
        nets = default_networks(base / "state", bridge=BRIDGE, name=NETWORK, subnet=SUBNET)
        self.pause = pause_config(self.store, PAUSE)
        cache = None
        if cdi_dirs is not None:
            from podkit import cdi

            cache = cdi.Cache(cdi_dirs, auto_refresh=False)
        self.manager = SandboxManager(base / "root", base / "state",
                                      Runc(runtime, root=base / "runc"), nets, cdi=cache,
                                      pause=self.pause, netns_prefix="pk-cri-",
                                      images=self.store)
        self.manager.recover()
        self.service = (service or CRIService)(self.manager, self.store, pause_image=PAUSE,
                                               runtime_handler=runtime,
                                               registry_hosts=registry_hosts, **service_kw)
        self.server = serve(base / "cri.sock", self.service)
        self.channel = grpc.insecure_channel(self.server.address)
        self.rt = api_pb2_grpc.RuntimeServiceStub(self.channel)
        self.img = api_pb2_grpc.ImageServiceStub(self.channel)

    def shutdown(self) -> None:
        """Stop serving and release the state dir; pods and containers keep running."""
        self.channel.close()
        self.server.stop()
        self.manager.close()

    def close(self) -> None:
        """Remove every pod, stop the server, remove the pause rootfs."""
        from podkit import image

        try:
            self.manager.remove_all()
            for r in image.list_rootfs(self.store):
                image.remove_rootfs(self.store, r.container_id)
        finally:
            self.channel.close()
            self.server.stop()
            self.manager.close()


def pod_config(name: str = "", **kw: Any) -> Any:
    """A CRI PodSandboxConfig as kubelet sends it (pod network, unique name)."""
    from podkit.cri import api_pb2 as pb

    cfg = pb.PodSandboxConfig(
        metadata=pb.PodSandboxMetadata(name=name or f"pk-cri-{uuid.uuid4().hex[:8]}",
                                       uid=uuid.uuid4().hex, namespace="pk-cri", attempt=0),
        hostname="pk-cri-pod", **kw)
    cfg.linux.security_context.namespace_options.network = pb.POD
    cfg.linux.security_context.namespace_options.pid = pb.CONTAINER
    return cfg


USERNS_HOST_ID, USERNS_SIZE = 65536 * 300, 65536
"""The user namespace of :func:`userns_pod`: a kubelet-shaped range (a multiple of 65536)."""


def userns_pod(host_id: int = USERNS_HOST_ID, **kw: Any) -> Any:
    """:func:`pod_config` in a user namespace of its own (``userns_options`` POD) mapping
    container IDs 0-65535 to ``host_id`` on, as kubelet sends it."""
    from podkit.cri import api_pb2 as pb

    cfg = pod_config(**kw)
    u = cfg.linux.security_context.namespace_options.userns_options
    u.mode = pb.POD
    u.uids.add(host_id=host_id, container_id=0, length=USERNS_SIZE)
    u.gids.add(host_id=host_id, container_id=0, length=USERNS_SIZE)
    return cfg


def mapped_processes(host_id: int) -> list[int]:
    """The processes of this host in a user namespace whose root is host uid ``host_id``."""
    out = []
    for d in Path("/proc").iterdir():
        try:
            first = (d / "uid_map").read_text().split()[:2] if d.name.isdigit() else []
        except OSError:
            continue
        if first == ["0", str(host_id)]:
            out.append(int(d.name))
    return out


def container_config(name: str, command: list[str] | None = None, *,
                     image: str = BUSYBOX, **kw: Any) -> Any:
    """A CRI ContainerConfig for the busybox test image."""
    from podkit.cri import api_pb2 as pb

    cfg = pb.ContainerConfig(metadata=pb.ContainerMetadata(name=name),
                             image=pb.ImageSpec(image=image), **kw)
    if command is not None:
        cfg.command.extend(command)
    cfg.linux.security_context.namespace_options.pid = pb.CONTAINER
    return cfg


def read_json(path: Path) -> Any:
    return json.loads(path.read_text())


def copy_tree(src: Path, dest: Path) -> Path:
    shutil.copytree(src, dest, symlinks=True)
    return dest


def start_cri_serve(sock: Path, *args: str) -> tuple[subprocess.Popen[str], Any]:
    """``podkit cri serve --socket sock *args`` as a child process, and a ready gRPC channel."""
    import grpc

    argv = [sys.executable, "-m", "podkit.cli", "cri", "serve", "--socket", str(sock), *args]
    proc = subprocess.Popen(argv, stderr=subprocess.PIPE, text=True)
    channel = grpc.insecure_channel(f"unix://{sock}")
    try:
        grpc.channel_ready_future(channel).result(timeout=60)
    except grpc.FutureTimeoutError:
        proc.kill()
        raise AssertionError(f"server did not come up: {proc.communicate()[1]}") from None
    return proc, channel


def stop_cri_serve(proc: subprocess.Popen[str], channel: Any) -> str:
    """Close the channel, SIGTERM the server if it still runs, check it exits 0; its stderr."""
    channel.close()
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    return err
