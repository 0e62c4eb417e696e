"""The private-files guarantee on the paths users take: a container's environment (its
``config.json``, exec process files, records) and its output never end up readable by others.

A full lifecycle (a pod, a container from an image and one from a rootfs, both given a secret
env var that they print, exec, logs) runs through the library's ``SandboxManager`` under both
supervisors and through ``podkit cri serve`` with a real gRPC client; every file and dir under
the root, state and log dirs is walked (``_exposure.exposures``) while the containers run and
once more after the pod stopped.
"""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import _leaks
from _exposure import exposures
from cri.fixtures import bridge, image_layouts
from cri.helpers import (
    BRIDGE,
    BUSYBOX,
    NETWORK,
    PAUSE,
    SUBNET,
    container_config,
    import_images,
    pod_config,
    start_cri_serve,
    stop_cri_serve,
    write_cni_conf,
)
from support import require_binary, require_isolated

__all__ = ["bridge", "image_layouts"]  # fixtures from cri.fixtures, registered here

pytestmark = pytest.mark.integration

SECRET = f"pk-secret-{uuid.uuid4().hex}"
PRINT_AND_SLEEP = ["sh", "-c", 'echo "out:$PK_SECRET"; exec sleep 600']
EXEC = ["sh", "-c", 'echo "exec:$PK_SECRET"']


def _eventually(check: Callable[[], bool], what: str, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.1)


def _kubelet_log_dir(base: Path, name: str, uid: str) -> Path:
    """The pod's log dir as kubelet makes it (``/var/log/pods/<ns>_<name>_<uid>``, 0755)."""
    d = base / "logs" / f"pk-test_{name}_{uid}"
    d.mkdir(parents=True)
    for p in (d, d.parent):
        os.chmod(p, 0o755)
    return d


def _assert_private(top: Path, when: str) -> None:
    found = exposures([top], SECRET)
    assert not found, f"{when}:\n  " + "\n  ".join(found)


def _logged(path: Path) -> bool:
    return path.exists() and f"out:{SECRET}".encode() in path.read_bytes()


@pytest.fixture
def prerequisites(bridge: None) -> None:
    require_isolated()
    for b in ("runc", "conmon"):
        require_binary(b)


# -- the library --------------------------------------------------------------------------------

@pytest.fixture(params=["conmon", "in-process"])
def manager(request: pytest.FixtureRequest, prerequisites: None, tmp_path: Path,
            image_layouts: dict[str, Path]) -> Iterator[Any]:
    from podkit.image import ImageStore
    from podkit.runtime import InProcessSupervisor, Runc
    from podkit.sandbox import SandboxManager, default_networks, pause_config

    import_images(tmp_path / "images", image_layouts)
    store = ImageStore(tmp_path / "images")
    _leaks.register_runtime_root(tmp_path / "runc")
    _leaks.register_ipam_dir(tmp_path / "state" / "ipam")
    runc = Runc(root=tmp_path / "runc")
    kw = {"supervisor": InProcessSupervisor(runc)} if request.param == "in-process" else {}
    mgr = SandboxManager(
        tmp_path / "root", tmp_path / "state", runc,
        default_networks(tmp_path / "state", bridge=BRIDGE, name=NETWORK, subnet=SUBNET),
        pause=pause_config(store, PAUSE), images=store, netns_prefix="pk-priv-", **kw)
    try:
        yield mgr
    finally:
        mgr.remove_all()
        mgr.close()


def test_library_lifecycle_keeps_the_environment_private(
        manager: Any, tmp_path: Path, busybox_rootfs: Path) -> None:
    from podkit.container import ContainerConfig, ContainerMetadata, KeyValue
    from podkit.sandbox import PodSandboxMetadata, SandboxConfig

    uid = uuid.uuid4().hex
    logs = _kubelet_log_dir(tmp_path, "priv", uid)
    pod = manager.run_sandbox(SandboxConfig(
        metadata=PodSandboxMetadata(name="priv", uid=uid, namespace="pk-test"),
        log_directory=str(logs)))
    env = [KeyValue(key="PK_SECRET", value=SECRET)]
    ids = []
    for name, image in (("from-image", BUSYBOX), ("from-rootfs", str(busybox_rootfs))):
        cid = manager.create_container(pod.id, ContainerConfig(
            metadata=ContainerMetadata(name=name), image=image, command=PRINT_AND_SLEEP,
            envs=env, log_path=f"{name}/0.log"))
        _assert_private(tmp_path, f"after creating {name}")
        manager.start_container(cid)
        ids.append(cid)
    for name, cid in zip(("from-image", "from-rootfs"), ids, strict=True):
        res = manager.exec_sync(cid, EXEC, timeout=30)
        assert f"exec:{SECRET}".encode() in res.stdout
        _eventually(lambda n=name: _logged(logs / n / "0.log"), f"{name}'s log")
    _assert_private(tmp_path, "while running")
    manager.stop_sandbox(pod.id)
    _assert_private(tmp_path, "after the pod stopped")


# -- podkit cri serve ---------------------------------------------------------------------------

@pytest.mark.parametrize("supervisor", ["conmon", "in-process"])
def test_cri_serve_lifecycle_keeps_the_environment_private(
        prerequisites: None, tmp_path: Path, image_layouts: dict[str, Path],
        busybox_rootfs: Path, supervisor: str) -> None:
    from podkit.cri import api_pb2 as pb
    from podkit.cri import api_pb2_grpc

    root = tmp_path / "root"
    import_images(root, image_layouts)
    conf = write_cni_conf(tmp_path / "net")
    _leaks.register_ipam_dir(tmp_path / "net" / "ipam")
    _leaks.register_runtime_root(root / "state" / "cri" / "runc")
    config = tmp_path / "podkit.toml"
    config.write_text(f'[runtime]\nsupervisor = "{supervisor}"\n')
    proc, channel = start_cri_serve(
        tmp_path / "cri.sock", "--config", str(config), "--root", str(root),
        "--cni-conf-dir", str(conf), "--pause-image", PAUSE)
    rt = api_pb2_grpc.RuntimeServiceStub(channel)
    try:
        cfg = pod_config()
        logs = _kubelet_log_dir(tmp_path, cfg.metadata.name, cfg.metadata.uid)
        cfg.log_directory = str(logs)
        sid = rt.RunPodSandbox(pb.RunPodSandboxRequest(config=cfg)).pod_sandbox_id
        for name, image in (("from-image", BUSYBOX), ("from-rootfs", str(busybox_rootfs))):
            ccfg = container_config(name, PRINT_AND_SLEEP, image=image,
                                    log_path=f"{name}/0.log")
            ccfg.envs.add(key="PK_SECRET", value=SECRET.encode())
            cid = rt.CreateContainer(pb.CreateContainerRequest(
                pod_sandbox_id=sid, sandbox_config=cfg, config=ccfg)).container_id
            _assert_private(tmp_path, f"after creating {name}")
            rt.StartContainer(pb.StartContainerRequest(container_id=cid))
            out = rt.ExecSync(pb.ExecSyncRequest(container_id=cid, cmd=EXEC, timeout=30))
            assert f"exec:{SECRET}".encode() in out.stdout
            _eventually(lambda n=name: _logged(logs / n / "0.log"), f"{name}'s log")
        _assert_private(tmp_path, "while running")
        rt.StopPodSandbox(pb.StopPodSandboxRequest(pod_sandbox_id=sid))
        _assert_private(tmp_path, "after the pod stopped")
    finally:  # pods outlive the server: remove them first, whatever failed
        try:
            for p in rt.ListPodSandbox(pb.ListPodSandboxRequest()).items:
                rt.StopPodSandbox(pb.StopPodSandboxRequest(pod_sandbox_id=p.id))
                rt.RemovePodSandbox(pb.RemovePodSandboxRequest(pod_sandbox_id=p.id))
        finally:
            stop_cri_serve(proc, channel)
