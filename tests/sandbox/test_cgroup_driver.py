"""SandboxManager under each cgroup driver: the driver chosen and matched to the runtime,
cgroups paths of pause and containers, limits in the cgroup files, stats, cleanup (no dir, no
scope left), and parents the driver cannot take refused before anything exists.

cgroupfs runs here (v1) and in the cgroup-v2 guest; systemd needs systemd as PID 1 (the
guest's ``--systemd`` pass; ``tests/cgroups/drivers.py`` says when it skips).
"""

from __future__ import annotations

import json
import subprocess
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import attrs
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
from podkit import cgroups
from podkit.errors import InvalidArgumentError
from podkit.pods.config import (
    LinuxContainerConfig,
    LinuxContainerResources,
    LinuxContainerSecurityContext,
    LinuxPodSandboxConfig,
    NamespaceMode,
    NamespaceOption,
)
from podkit.pods.sandbox_spec import SandboxConfigError, SandboxFiles, build_sandbox_spec
from podkit.runtime import Runc
from podkit.runtime.testing import FakeRuntime
from podkit.sandbox import PauseConfig, SandboxManager, default_networks
from support import require_binary

from ._fakes import FakeSupervisor, host_pod
from ._pods import BRIDGE, ctr_config, leaked, leftovers, pod_config, snapshot

# -- the driver a manager takes (no runtime runs) --------------------------------------------


def _bare(tmp: Path, runtime: Runc, **kw: object) -> SandboxManager:
    return SandboxManager(tmp / "root", tmp / "state", runtime, None, pause=None,
                          **kw)  # type: ignore[arg-type]


@pytest.mark.parametrize(("flag", "want"), [(True, "systemd"), (False, "cgroupfs")])
def test_driver_follows_the_runtime_flag(tmp_path: Path, flag: bool, want: str) -> None:
    with _bare(tmp_path, Runc(systemd_cgroup=flag)) as m:
        assert m.cgroup_driver == want
    with _bare(tmp_path, Runc(systemd_cgroup=flag), cgroup_driver=want) as m:
        assert m.cgroup_driver is cgroups.Driver(want)


@pytest.mark.parametrize(("flag", "driver"), [(True, "cgroupfs"), (False, "systemd")])
def test_a_runtime_flag_that_disagrees_is_refused(tmp_path: Path, flag: bool,
                                                  driver: str) -> None:
    with pytest.raises(InvalidArgumentError) as info:
        _bare(tmp_path, Runc(systemd_cgroup=flag), cgroup_driver=driver)
    msg = str(info.value)
    assert msg.startswith(f"cgroup_driver '{driver}': the runtime Runc(binary='runc'")
    assert f"systemd_cgroup={not flag}" in msg
    assert not (tmp_path / "root").exists() and not (tmp_path / "state").exists()


def test_an_unknown_driver_is_refused_by_name(tmp_path: Path) -> None:
    with pytest.raises(InvalidArgumentError,
                       match=r"^cgroup_driver 'cgroup2': unknown cgroup driver; want "
                             r"cgroupfs or systemd$"):
        _bare(tmp_path, Runc(), cgroup_driver="cgroup2")
    assert not (tmp_path / "root").exists()


def test_pause_cgroups_path_by_driver() -> None:
    files = SandboxFiles.under("/run/pk")
    kw = {"id": "sb1", "files": files, "netns_path": "/run/netns/x"}
    plain = pod_config("p")
    parented = pod_config("p", linux=LinuxPodSandboxConfig(cgroup_parent="/kubepods/pod-1"))
    want = [
        (None, plain, "/podkit/sb1"),  # no driver: as before (containerd's rule)
        ("cgroupfs", plain, "/podkit/sb1"),
        ("systemd", plain, "system.slice:cri-podkit:sb1"),
        ("cgroupfs", parented, "/kubepods/pod-1/sb1"),
        ("systemd", parented, "kubepods-pod_1.slice:cri-podkit:sb1"),
    ]
    for driver, cfg, path in want:
        spec = build_sandbox_spec(cfg, cgroup_driver=driver, **kw)  # type: ignore[arg-type]
        assert spec.linux is not None and spec.linux.cgroups_path == path, (driver, path)
    bad = pod_config("p", linux=LinuxPodSandboxConfig(cgroup_parent="/a.slice/b"))
    with pytest.raises(SandboxConfigError, match=r"^linux\.cgroup_parent '/a\.slice/b' "
                                                 r"\(systemd cgroup driver\): a mix"):
        build_sandbox_spec(bad, cgroup_driver="systemd", **kw)  # type: ignore[arg-type]


@pytest.mark.parametrize("driver", ["cgroupfs", "systemd"])
def test_pause_and_container_get_the_drivers_paths(tmp_path: Path, rootfs: Path,
                                                   driver: str) -> None:
    """Over a fake runtime (no flag: the driver is the one given, or the host's)."""
    rt = FakeRuntime()
    kw = {"pause": PauseConfig(rootfs=str(rootfs)), "supervisor": FakeSupervisor(rt)}
    with SandboxManager(tmp_path / "a", tmp_path / "sa", rt, None, **kw) as m:  # type: ignore[arg-type]
        assert m.cgroup_driver is cgroups.default_driver()
    parent = "/kubepods/besteffort/pod-1"
    pod = host_pod()
    pod = attrs.evolve(pod, linux=attrs.evolve(pod.linux, cgroup_parent=parent))
    with SandboxManager(tmp_path / "root", tmp_path / "state", rt, None, cgroup_driver=driver,
                        **kw) as m:  # type: ignore[arg-type]
        sb = m.run_sandbox(pod)
        cid = m.create_container(sb.id, ctr_config(rootfs, "c", ["sleep", "1"]))
        want = {i: cgroups.cgroups_path_for(driver, parent, i) for i in (sb.id, cid)}
        assert sb.cgroups_path == want[sb.id]
        assert m.container_status(cid).cgroups_path == want[cid]
        spec = json.loads((tmp_path / "root/containers" / cid / "bundle/config.json").read_text())
        assert spec["linux"]["cgroupsPath"] == want[cid]
        m.remove_sandbox(sb.id)
        assert m.list_sandboxes() == []


# -- pods under each driver (real runc/crun, conmon, CNI) ------------------------------------


def _make(base: Path, rootfs: Path, binary: str, driver: str) -> SandboxManager:
    """A manager on the test bridge under ``driver``, its runtime built to match."""
    require_binary(binary)
    root = base / "runtime"
    _leaks.register_runtime_root(root)
    _leaks.register_ipam_dir(base / "state" / "ipam")
    nets = default_networks(base / "state", bridge=BRIDGE, name="pk-pod-net")
    return SandboxManager(base / "root", base / "state",
                          Runc(binary, root=root, systemd_cgroup=driver == "systemd"), nets,
                          pause=PauseConfig(rootfs=str(rootfs)), netns_prefix="pk-pod-",
                          cgroup_driver=driver)


def _driven(base: Path, rootfs: Path, binary: str, driver: str) -> Iterator[SandboxManager]:
    """:func:`_make`; afterwards everything removed and checked: runtime containers, IPAM,
    records, cgroup dirs, scopes, netns, links, mounts."""
    before = snapshot()
    m = _make(base, rootfs, binary, driver)
    paths: list[str] = []
    try:
        yield m
    finally:
        paths = [s.cgroups_path for s in m.list_sandboxes()] + [
            c.cgroups_path for c in m.list_containers()]
        m.remove_all()
        m.close()
    assert leftovers(base, m, paths) == []
    assert leaked(before) == []


def _limited(rootfs: Path) -> LinuxContainerConfig:
    return LinuxContainerConfig(
        resources=LinuxContainerResources(memory_limit_in_bytes=MEMORY_LIMIT,
                                          cpu_quota=CPU_QUOTA, cpu_period=CPU_PERIOD),
        security_context=LinuxContainerSecurityContext(
            namespace_options=NamespaceOption(pid=NamespaceMode.CONTAINER)))


def _run_and_check(m: SandboxManager, rootfs: Path, parent: str) -> tuple[str, str]:
    """A pod and a limited busy container: limits in their cgroup files, stats non-zero.
    The cgroups paths of the pause and the container."""
    sb = m.run_sandbox(pod_config(linux=LinuxPodSandboxConfig(cgroup_parent=parent)))
    cid = m.create_container(sb.id, ctr_config(rootfs, "busy", BUSY, linux=_limited(rootfs)))
    m.start_container(cid)
    assert m.exec_sync(cid, ["true"], timeout=30).exit_code == 0
    c = m.container_status(cid)
    want = cgroups.cgroups_path_for(m.cgroup_driver, parent, cid)
    assert c.cgroups_path == want
    assert sb.cgroups_path == cgroups.cgroups_path_for(m.cgroup_driver, parent, sb.id)
    assert limits(c.cgroups_path) == (MEMORY_LIMIT, (CPU_QUOTA, CPU_PERIOD))
    stats = m.container_stats(cid)
    assert stats.cpu_usage_core_nano_seconds > 0 and stats.memory_usage_bytes > 0
    pids = _has_pids()
    assert stats.process_count >= 1 or not pids
    pod = m.sandbox_stats(sb.id)
    assert pod.memory_working_set_bytes > 0 and (pod.process_count >= 2 or not pids)
    assert [s.id for s in pod.containers] == [cid]
    m.remove_sandbox(sb.id)
    for path in (c.cgroups_path, sb.cgroups_path):
        assert not cgroups.locate(path).exists(), path
    return sb.cgroups_path, c.cgroups_path


def _has_pids() -> bool:
    """Whether process counts are there to read (v2, or a v1 host with pids mounted)."""
    h = cgroups.host()
    return h.mode is cgroups.Mode.UNIFIED or "pids" in h.v1


@pytest.mark.integration
@pytest.mark.parametrize("binary", ["runc", "crun"])
@pytest.mark.parametrize("parent", ["", "slice"])
def test_pod_under_cgroupfs(bridge: None, rootfs: Path, tmp_path: Path, binary: str,
                            parent: str) -> None:
    """Default parent ``/podkit``; a kubelet slice parent becomes the path systemd gives it."""
    top = ""
    if parent:
        tag = f"pk_cgd{uuid.uuid4().hex[:8]}"
        parent, top = f"{tag}-pod1.slice", f"/{tag}.slice"
    try:
        for m in _driven(tmp_path, rootfs, binary, "cgroupfs"):
            pause, ctr = _run_and_check(m, rootfs, parent)
            assert ctr.startswith(f"{top}/{parent}/" if parent else "/podkit/")
            assert ":" not in pause
    finally:
        if parent:
            remove_parent_dirs(f"{top}/{parent}")


@pytest.mark.integration
@pytest.mark.parametrize("binary", ["runc", "crun"])
@pytest.mark.parametrize("given", ["", "cgroupfs-form"])
def test_pod_under_systemd(bridge: None, rootfs: Path, tmp_path: Path, binary: str,
                           given: str) -> None:
    """Scopes ``cri-podkit-<id>.scope`` in ``system.slice`` or the parent's slice; none left
    after removal."""
    require_systemd()
    parent, top = fresh_parent() if given else ("", "")
    try:
        for m in _driven(tmp_path, rootfs, binary, "systemd"):
            pause, ctr = _run_and_check(m, rootfs, parent)
            slice_ = cgroups.slice_name(parent) if parent else "system.slice"
            assert ctr.startswith(f"{slice_}:cri-podkit:") and pause.startswith(slice_)
            assert podkit_units() == []
    finally:
        stop_slices(*([top] if top else []))
    assert podkit_units() == []


@pytest.mark.integration
@pytest.mark.parametrize("driver", ["cgroupfs", "systemd"])
def test_a_new_manager_recovers_and_removes_every_cgroup(
        bridge: None, rootfs: Path, tmp_path: Path, driver: str) -> None:
    """Pods left running by a manager that went away: the next one adopts them from the
    records and its removal leaves no cgroup dir and no scope."""
    if driver == "systemd":
        require_systemd()
    first = _make(tmp_path, rootfs, "runc", driver)
    try:
        sb = first.run_sandbox(pod_config())
        cid = first.create_container(sb.id, ctr_config(rootfs, "busy", BUSY,
                                                       linux=_limited(rootfs)))
        first.start_container(cid)
        paths = [sb.cgroups_path, first.container_status(cid).cgroups_path]
    finally:
        first.close()  # pods and containers keep running under conmon
    assert all(cgroups.locate(p).exists() for p in paths)
    for m in _driven(tmp_path, rootfs, "runc", driver):
        report = m.recover()
        assert (report.sandboxes, report.containers, report.errors) == ((sb.id,), (cid,), ())
        m.remove_sandbox(sb.id)
        assert [p for p in paths if cgroups.locate(p).exists()] == []
        assert driver == "cgroupfs" or podkit_units() == []


@pytest.mark.integration
@pytest.mark.parametrize(("driver", "parent"), [
    ("cgroupfs", "/pk.slice/pk-x-y.slice"), ("systemd", "/pk.slice/burstable"),
    ("systemd", "/pk pods/x")])
def test_a_parent_the_driver_cannot_take_is_refused_first(
        bridge: None, rootfs: Path, tmp_path: Path, driver: str, parent: str) -> None:
    """Refused before the netns, CNI, files or pause exist (the runtime is never asked)."""
    for m in _driven(tmp_path, rootfs, "runc", driver):
        with pytest.raises(SandboxConfigError) as info:
            m.run_sandbox(pod_config(linux=LinuxPodSandboxConfig(cgroup_parent=parent)))
        msg = str(info.value)
        assert msg.startswith(f"linux.cgroup_parent '{parent}' ({driver} cgroup driver): ")
        assert "cgroupfs form '/kubepods/burstable/pod<uid>'" in msg
        assert "systemd form 'kubepods-burstable-pod<uid>.slice'" in msg
        assert m.list_sandboxes() == []
        assert list((tmp_path / "root" / "sandboxes").iterdir()) == []


@pytest.mark.integration
def test_a_stale_scope_is_stopped(tmp_path: Path) -> None:
    """A ``cri-podkit-<id>.scope`` still loaded after its container's delete (a runtime
    killed mid-delete) is stopped, its process with it."""
    require_systemd()
    require_binary("systemd-run")
    id = f"pkstale{uuid.uuid4().hex[:8]}"
    unit = f"cri-podkit-{id}.scope"
    proc = subprocess.Popen(["systemd-run", "--quiet", "--scope", f"--unit={unit}",
                             "--slice=system.slice", "sleep", "600"])
    try:
        path = f"system.slice:cri-podkit:{id}"
        _wait_for(lambda: cgroups.locate(path).exists() or proc.poll() is not None)
        assert proc.poll() is None, "systemd-run --scope ended early"
        assert podkit_units(id) == [unit]
        assert cgroups.remove_leftovers(path) == [unit]
        assert proc.wait(timeout=60) != 0  # its sleep was killed with the scope
        assert not cgroups.locate(path).exists()
        assert podkit_units(id) == []
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def _wait_for(done: Callable[[], bool], attempts: int = 600) -> None:
    """Poll ``done`` (the caller asserts what it waited for)."""
    for _ in range(attempts):
        if done():
            return
        time.sleep(0.05)
