"""The cgroup driver through the CRI: ``RuntimeConfig`` answers the manager's driver, and
``podkit cri serve --cgroup-driver`` runs pods under it (runc, crun): limits in the cgroup
files, stats, nothing left after removal, and a parent the driver cannot take refused with
INVALID_ARGUMENT. systemd needs systemd as PID 1 (``tests/cgroups/drivers.py``).
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import _leaks
from cgroups.drivers import (
    BUSY,
    CPU_PERIOD,
    CPU_QUOTA,
    MEMORY_LIMIT,
    fresh_parent,
    limits,
    podkit_units,
    remove_parent_dirs,
    require_systemd,
    stop_slices,
)
from cri.helpers import (
    BUSYBOX,
    PAUSE,
    container_config,
    import_images,
    pod_config,
    start_cri_serve,
    stop_cri_serve,
    write_cni_conf,
)
from podkit import cgroups
from podkit.cri import api_pb2 as pb
from podkit.cri.service import CRIService
from podkit.image import ImageStore
from podkit.pods.testing import FakePodManager
from support import require_binary

FORMS = ("cgroupfs form '/kubepods/burstable/pod<uid>' or systemd form "
         "'kubepods-burstable-pod<uid>.slice'")

# -- over the in-memory pod API --------------------------------------------------------------


@pytest.mark.parametrize(("driver", "want"), [("systemd", pb.SYSTEMD),
                                              ("cgroupfs", pb.CGROUPFS)])
def test_runtime_config_answers_the_managers_driver(tmp_path: Path, driver: str,
                                                    want: int) -> None:
    store = ImageStore(tmp_path)
    svc = CRIService(FakePodManager(images=store, cgroup_driver=driver), store)
    assert svc.RuntimeConfig(pb.RuntimeConfigRequest()).linux.cgroup_driver == want
    info = svc.Status(pb.StatusRequest(verbose=True)).info["config"]
    assert json.loads(info)["cgroupDriver"] == driver


def test_the_pod_api_has_the_driver() -> None:
    from podkit.cri.service.pods import PodAPI
    from podkit.sandbox import SandboxManager

    assert isinstance(PodAPI.__dict__["cgroup_driver"], property)
    assert FakePodManager().cgroup_driver == "cgroupfs"
    assert "cgroup_driver" in SandboxManager.__init__.__code__.co_varnames


def test_serve_refuses_an_unknown_driver_by_name(tmp_path: Path) -> None:
    argv = [sys.executable, "-m", "podkit.cli", "cri", "serve", "--socket",
            str(tmp_path / "cri.sock"), "--root", str(tmp_path / "root"), "--pause-image",
            PAUSE, "--cgroup-driver", "cgroupv2"]
    out = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)
    assert out.returncode == 2
    assert "--cgroup-driver: invalid choice: 'cgroupv2'" in out.stderr
    assert "'cgroupfs', 'systemd'" in out.stderr
    assert not (tmp_path / "root").exists() and not (tmp_path / "cri.sock").exists()


# -- podkit cri serve, for real ----------------------------------------------------------------


class _Served:
    """``podkit cri serve`` over a fresh root with the test images, on the test bridge."""

    def __init__(self, base: Path, layouts: dict[str, Path], binary: str,
                 driver: str | None) -> None:
        from podkit.cri import api_pb2_grpc

        root = base / "root"
        import_images(root, layouts)
        conf = write_cni_conf(base / "net")
        _leaks.register_ipam_dir(base / "net" / "ipam")
        _leaks.register_runtime_root(root / "state" / "cri" / binary)
        args = ["--root", str(root), "--cni-conf-dir", str(conf), "--streaming-address", "",
                "--pause-image", PAUSE, "--runtime", binary]
        self.proc, self.channel = start_cri_serve(
            base / "cri.sock", *args, *(["--cgroup-driver", driver] if driver else []))
        self.rt = api_pb2_grpc.RuntimeServiceStub(self.channel)

    def pods(self) -> list[Any]:
        return list(self.rt.ListPodSandbox(pb.ListPodSandboxRequest()).items)

    def stop(self) -> None:
        try:
            for p in self.pods():
                self.rt.StopPodSandbox(pb.StopPodSandboxRequest(pod_sandbox_id=p.id))
                self.rt.RemovePodSandbox(pb.RemovePodSandboxRequest(pod_sandbox_id=p.id))
        finally:
            stop_cri_serve(self.proc, self.channel)


@pytest.fixture
def served(request: pytest.FixtureRequest, bridge: None, image_layouts: dict[str, Path],
           tmp_path: Path) -> Iterator[_Served]:
    binary, driver = request.param
    require_binary(binary)
    require_binary("conmon")
    if driver in ("systemd", "host"):  # "host": no flag, the host's default
        require_systemd()
    srv = _Served(tmp_path, image_layouts, binary, None if driver == "host" else driver)
    try:
        yield srv
    finally:
        srv.stop()


def _limited(cfg: pb.ContainerConfig) -> pb.ContainerConfig:
    cfg.linux.resources.memory_limit_in_bytes = MEMORY_LIMIT
    cfg.linux.resources.cpu_quota = CPU_QUOTA
    cfg.linux.resources.cpu_period = CPU_PERIOD
    return cfg


def _pod_and_container(srv: _Served, parent: str, driver: str) -> None:
    """A pod under ``parent`` and a limited busy container: limits, stats, then removal
    leaves neither cgroup (nor scope)."""
    cfg = pod_config()
    cfg.linux.cgroup_parent = parent
    sid = srv.rt.RunPodSandbox(pb.RunPodSandboxRequest(config=cfg)).pod_sandbox_id
    cid = srv.rt.CreateContainer(pb.CreateContainerRequest(
        pod_sandbox_id=sid, sandbox_config=cfg,
        config=_limited(container_config("busy", BUSY, image=BUSYBOX)))).container_id
    srv.rt.StartContainer(pb.StartContainerRequest(container_id=cid))
    assert srv.rt.ExecSync(pb.ExecSyncRequest(container_id=cid, cmd=["true"],
                                              timeout=30)).exit_code == 0
    ctr, pause = (cgroups.cgroups_path_for(driver, parent, i) for i in (cid, sid))
    assert limits(ctr) == (MEMORY_LIMIT, (CPU_QUOTA, CPU_PERIOD))
    stats = srv.rt.ContainerStats(pb.ContainerStatsRequest(container_id=cid)).stats
    assert stats.cpu.usage_core_nano_seconds.value > 0
    assert stats.memory.working_set_bytes.value > 0
    pod = srv.rt.PodSandboxStats(pb.PodSandboxStatsRequest(pod_sandbox_id=sid)).stats
    assert pod.linux.memory.working_set_bytes.value > 0
    assert [c.attributes.id for c in pod.linux.containers] == [cid]
    srv.rt.StopPodSandbox(pb.StopPodSandboxRequest(pod_sandbox_id=sid))
    srv.rt.RemovePodSandbox(pb.RemovePodSandboxRequest(pod_sandbox_id=sid))
    for path in (ctr, pause):
        assert not cgroups.locate(path).exists(), path
    if driver == "systemd":
        assert podkit_units() == []


def _refused(srv: _Served, parent: str, driver: str) -> None:
    """RunPodSandbox with a parent the driver cannot take: INVALID_ARGUMENT, no pod."""
    import grpc

    cfg = pod_config()
    cfg.linux.cgroup_parent = parent
    with pytest.raises(grpc.RpcError) as info:
        srv.rt.RunPodSandbox(pb.RunPodSandboxRequest(config=cfg))
    err: Any = info.value
    assert err.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert err.details().startswith(  # the service names the request field
        f"config: linux.cgroup_parent '{parent}' ({driver} cgroup driver): ")
    assert err.details().endswith(f"; want the {FORMS}")
    assert srv.pods() == []


@pytest.mark.integration
@pytest.mark.parametrize("served", [("runc", "cgroupfs"), ("crun", "cgroupfs")],
                         indirect=True, ids=["runc", "crun"])
def test_serve_under_cgroupfs(served: _Served) -> None:
    rc = served.rt.RuntimeConfig(pb.RuntimeConfigRequest())
    assert rc.linux.cgroup_driver == pb.CGROUPFS
    _refused(served, "/pk.slice/pk-x-y.slice", "cgroupfs")
    parent = "/pk-cgd-cri/pod1"
    try:
        _pod_and_container(served, parent, "cgroupfs")
    finally:
        remove_parent_dirs(parent)


@pytest.mark.integration
@pytest.mark.parametrize("served", [("runc", "systemd"), ("crun", "host")],
                         indirect=True, ids=["runc-flag", "crun-host-default"])
def test_serve_under_systemd(served: _Served) -> None:
    """With ``--cgroup-driver systemd``, and without it on a systemd v2 host (the default)."""
    rc = served.rt.RuntimeConfig(pb.RuntimeConfigRequest())
    assert rc.linux.cgroup_driver == pb.SYSTEMD
    _refused(served, "/pk.slice/burstable", "systemd")
    parent, top = fresh_parent()
    try:
        _pod_and_container(served, parent, "systemd")
        _pod_and_container(served, "", "systemd")
    finally:
        stop_slices(top)
