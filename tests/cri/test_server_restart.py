"""The server survives its own restart: a new one over the same root manages everything."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import grpc
import pytest

import _leaks
from cri.helpers import (
    BUSYBOX,
    PAUSE,
    Harness,
    container_config,
    import_images,
    pod_config,
    write_cni_conf,
)
from podkit.cri import api_pb2 as pb
from podkit.cri import api_pb2_grpc
from support import require_binary, require_isolated

pytestmark = pytest.mark.integration


def _lifecycle_before(rt: Any) -> tuple[str, str, str]:
    sid = rt.RunPodSandbox(pb.RunPodSandboxRequest(config=pod_config())).pod_sandbox_id
    running = rt.CreateContainer(pb.CreateContainerRequest(
        pod_sandbox_id=sid, config=container_config("run"))).container_id
    rt.StartContainer(pb.StartContainerRequest(container_id=running))
    created = rt.CreateContainer(pb.CreateContainerRequest(
        pod_sandbox_id=sid, config=container_config("later"))).container_id
    return sid, running, created


def _lifecycle_after(rt: Any, sid: str, running: str, created: str) -> None:
    pods = rt.ListPodSandbox(pb.ListPodSandboxRequest()).items
    assert [(p.id, p.state) for p in pods] == [(sid, pb.SANDBOX_READY)]
    ctrs = {c.id: c for c in rt.ListContainers(pb.ListContainersRequest()).containers}
    assert set(ctrs) == {running, created}
    assert ctrs[running].state == pb.CONTAINER_RUNNING
    assert ctrs[created].state == pb.CONTAINER_CREATED
    st = rt.ContainerStatus(pb.ContainerStatusRequest(container_id=running)).status
    assert st.image.image == BUSYBOX and st.image_id.startswith("sha256:")
    assert st.stop_signal == pb.SIGTERM
    res = rt.ExecSync(pb.ExecSyncRequest(container_id=running, cmd=["echo", "still here"]))
    assert (res.exit_code, res.stdout) == (0, b"still here\n")
    rt.StartContainer(pb.StartContainerRequest(container_id=created))
    assert rt.ContainerStatus(pb.ContainerStatusRequest(
        container_id=created)).status.state == pb.CONTAINER_RUNNING
    # a new container in the old pod, then the whole pod goes
    third = rt.CreateContainer(pb.CreateContainerRequest(
        pod_sandbox_id=sid, config=container_config("third"))).container_id
    rt.StartContainer(pb.StartContainerRequest(container_id=third))
    rt.StopContainer(pb.StopContainerRequest(container_id=running, timeout=0))
    rt.RemoveContainer(pb.RemoveContainerRequest(container_id=running))
    rt.StopPodSandbox(pb.StopPodSandboxRequest(pod_sandbox_id=sid))
    rt.RemovePodSandbox(pb.RemovePodSandboxRequest(pod_sandbox_id=sid))
    assert rt.ListPodSandbox(pb.ListPodSandboxRequest()).items == []
    assert rt.ListContainers(pb.ListContainersRequest()).containers == []


def test_restart_in_process(bridge: None, image_layouts: dict[str, Path],
                            tmp_path_factory: pytest.TempPathFactory) -> None:
    require_isolated()
    require_binary("conmon")
    base = tmp_path_factory.mktemp("cri-restart")
    h1 = Harness(base, image_layouts)
    try:
        ids = _lifecycle_before(h1.rt)
    finally:
        h1.shutdown()
    h2 = Harness(base, image_layouts)
    try:
        _lifecycle_after(h2.rt, *ids)
        # every container rootfs is gone; only the shared pause rootfs stays
        from podkit import image

        assert [r.container_id.startswith("cri-pause-") for r in image.list_rootfs(h2.store)] \
            == [True]
    finally:
        h2.close()


class _Process:
    """``podkit cri serve`` as a child process."""

    def __init__(self, argv: list[str], socket: Path) -> None:
        self.socket = socket
        self.proc = subprocess.Popen(argv, stderr=subprocess.PIPE, text=True)
        self.channel = grpc.insecure_channel(f"unix://{socket}")
        try:
            grpc.channel_ready_future(self.channel).result(timeout=60)
        except grpc.FutureTimeoutError:
            self.proc.kill()
            _, err = self.proc.communicate()
            raise AssertionError(f"server did not come up: {err}") from None
        self.rt = api_pb2_grpc.RuntimeServiceStub(self.channel)

    def stop(self, sig: int = signal.SIGTERM) -> tuple[int, str]:
        self.channel.close()
        self.proc.send_signal(sig)
        _, err = self.proc.communicate(timeout=60)
        return self.proc.returncode, err


def test_restart_of_the_cli_server(bridge: None, image_layouts: dict[str, Path],
                                   tmp_path_factory: pytest.TempPathFactory) -> None:
    require_isolated()
    require_binary("runc")
    require_binary("conmon")
    base = tmp_path_factory.mktemp("cri-cli")
    root = base / "root"
    import_images(root, image_layouts)
    conf = write_cni_conf(base / "net")
    _leaks.register_runtime_root(root / "state" / "cri" / "runc")
    _leaks.register_ipam_dir(base / "net" / "ipam")
    sock = base / "cri.sock"
    argv = [sys.executable, "-m", "podkit.cli", "cri", "serve", "--socket", str(sock),
            "--root", str(root), "--cni-conf-dir", str(conf), "--cni-bin-dir", "/usr/lib/cni",
            "--runtime", "runc", "--pause-image", PAUSE]
    procs: list[_Process] = []
    try:
        p1 = _Process(argv, sock)
        procs.append(p1)
        ids = _lifecycle_before(p1.rt)
        # a second server on the same socket is refused, and does not disturb the first
        other = subprocess.run([*argv[:7], "--root", str(base / "other"), *argv[9:]],
                               capture_output=True, text=True, timeout=60)
        assert other.returncode == 5  # ConflictError: docs/cli.md exit codes
        assert "another server is listening" in other.stderr
        rc, err = p1.stop(signal.SIGTERM)
        assert rc == 0, err
        assert "stopped" in err
        assert not sock.exists()

        # a killed server leaves a stale socket; the next one replaces it
        p2 = _Process(argv, sock)
        procs.append(p2)
        assert len(p2.rt.ListContainers(pb.ListContainersRequest()).containers) == 2
        p2.stop(signal.SIGKILL)
        assert sock.exists()

        p3 = _Process(argv, sock)
        procs.append(p3)
        # the CLI serves exec through its streaming server
        from podkit.cri.streaming.client import run_remotecommand

        url = p3.rt.Exec(pb.ExecRequest(container_id=ids[1], cmd=["echo", "via url"],
                                        stdout=True)).url
        assert run_remotecommand(url, stderr=False).stdout == b"via url\n"
        _lifecycle_after(p3.rt, *ids)
        rc, err = p3.stop(signal.SIGINT)
        assert rc == 0, err
    finally:
        for p in procs:
            if p.proc.poll() is None:
                p.proc.kill()
                p.proc.wait()
        _cleanup(root, conf)


def _cleanup(root: Path, conf: Path) -> None:
    """Remove whatever a failed test left under ``root`` (the server's own manager)."""
    from podkit import image
    from podkit.cri import CRI_MANAGER
    from podkit.node import NetworkSettings, NodeConfig, PauseSettings, build_manager

    config = NodeConfig(root=str(root), netns_prefix="podkit-cri-",
                        network=NetworkSettings(conf_dir=str(conf), bin_dirs=("/usr/lib/cni",)),
                        pause=PauseSettings(rootfs="/"))
    store = image.ImageStore(root)
    with build_manager(config, name=CRI_MANAGER) as mgr:
        mgr.recover()
        mgr.remove_all()
    for r in image.list_rootfs(store):
        image.remove_rootfs(store, r.container_id)
