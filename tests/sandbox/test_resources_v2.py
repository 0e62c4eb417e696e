"""CRI resources through SandboxManager.create_container, read back from the container's cgroup
files under runc and crun: cgroup v1 on this host, cgroup v2 in the guest (make test-cgroupv2).

What each CRI field becomes (docs/runtime.md, "cgroup v2 resources"): shares -> ``cpu.shares``
(v1) or ``cpu.weight`` (v2, the runtime converts), quota/period -> ``cpu.cfs_*`` or
``cpu.max``, memory -> ``memory.limit_in_bytes`` or ``memory.max``, memory+swap ->
``memory.memsw.limit_in_bytes`` or ``memory.swap.max`` = swap - limit, hugepages ->
``hugetlb.2MB.limit_in_bytes`` or ``hugetlb.2MB.max``, ``unified`` passed through (v2 only).
A resource the container's cgroup cannot have is refused at create, leaving nothing.
"""

from __future__ import annotations

import os
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from podkit import cgroups
from podkit.pods.config import (
    HugepageLimit,
    LinuxContainerConfig,
    LinuxContainerResources,
    LinuxContainerSecurityContext,
    LinuxPodSandboxConfig,
    NamespaceMode,
    NamespaceOption,
)
from podkit.runtime import UnavailableResourceError
from podkit.sandbox import SandboxManager
from support import require_binary

from ._pods import ctr_config, leaked, leftovers, make_manager, pod_config, snapshot

pytestmark = pytest.mark.integration

V2 = cgroups.host().mode is cgroups.Mode.UNIFIED
MiB = 1 << 20


@pytest.fixture(params=["runc", "crun"])
def binary(request: pytest.FixtureRequest) -> str:
    require_binary(request.param)
    return str(request.param)


def _managed(base: Path, rootfs: Path, binary: str, **kw: object) -> Iterator[SandboxManager]:
    """A manager without pod networks; afterwards nothing may be left (runtime containers,
    records, bundles, cgroups, netns, mounts)."""
    before = snapshot()
    m = make_manager(base, rootfs, binary=binary, networks=False, **kw)
    paths: list[str] = []
    try:
        yield m
    finally:
        paths = [p for p in [s.cgroups_path for s in m.list_sandboxes()] + [
            c.cgroups_path for c in m.list_containers()] if p]  # (infra-less pods: none)
        m.remove_all()
        m.close()
    assert leftovers(base, m, paths) == []
    assert leaked(before) == []


@pytest.fixture
def mgr(bridge: None, rootfs: Path, tmp_path: Path, binary: str) -> Iterator[SandboxManager]:
    yield from _managed(tmp_path / "m", rootfs, binary)


def _linux(res: LinuxContainerResources) -> LinuxContainerConfig:
    return LinuxContainerConfig(resources=res, security_context=LinuxContainerSecurityContext(
        namespace_options=NamespaceOption(pid=NamespaceMode.CONTAINER)))


def started(m: SandboxManager, rootfs: Path, res: LinuxContainerResources,
            parent: str = "") -> str:
    """A running busybox container with ``res`` in a new pod; its cgroups path."""
    sb = m.run_sandbox(pod_config(host_network=True,
                                  linux=LinuxPodSandboxConfig(cgroup_parent=parent)))
    cid = m.create_container(sb.id, ctr_config(rootfs, "res", ["sleep", "600"],
                                               linux=_linux(res)))
    m.start_container(cid)
    return m.container_status(cid).cgroups_path


def read(cgroups_path: str, controller: str, name: str) -> str:
    return (cgroups.cgroup_dir(controller, cgroups_path) / name).read_text().strip()


def weight(shares: int) -> int:
    """runc's and crun's cgroup v1 shares -> v2 weight conversion."""
    return 1 + (shares - 2) * 9999 // 262142


def test_cpu_memory_swap_and_unified_land_in_the_cgroup(mgr: SandboxManager,
                                                        rootfs: Path) -> None:
    res = LinuxContainerResources(
        cpu_shares=512, cpu_quota=50000, cpu_period=100000, cpuset_cpus="0", cpuset_mems="0",
        memory_limit_in_bytes=64 * MiB, memory_swap_limit_in_bytes=96 * MiB,
        unified={"memory.high": str(48 * MiB), "pids.max": "77"} if V2 else {})
    path = started(mgr, rootfs, res)
    assert read(path, "cpuset", "cpuset.cpus") == "0"
    assert read(path, "cpuset", "cpuset.mems") == "0"
    if V2:
        assert read(path, "cpu", "cpu.weight") == str(weight(512))
        assert read(path, "cpu", "cpu.max") == "50000 100000"
        assert read(path, "memory", "memory.max") == str(64 * MiB)
        assert read(path, "memory", "memory.swap.max") == str(32 * MiB)  # swap - limit
        assert read(path, "memory", "memory.high") == str(48 * MiB)
        assert read(path, "pids", "pids.max") == "77"
    else:
        assert read(path, "cpu", "cpu.shares") == "512"
        assert read(path, "cpu", "cpu.cfs_quota_us") == "50000"
        assert read(path, "cpu", "cpu.cfs_period_us") == "100000"
        assert read(path, "memory", "memory.limit_in_bytes") == str(64 * MiB)
        assert read(path, "memory", "memory.memsw.limit_in_bytes") == str(96 * MiB)


def test_a_limit_without_swap_means_no_swap(mgr: SandboxManager, rootfs: Path) -> None:
    # containerd's rule: CRI swap 0 next to a limit becomes the limit where swap is accounted
    assert cgroups.swap_available()  # both hosts account swap: the rule applies
    path = started(mgr, rootfs, LinuxContainerResources(memory_limit_in_bytes=32 * MiB))
    if V2:
        assert read(path, "memory", "memory.max") == str(32 * MiB)
        assert read(path, "memory", "memory.swap.max") == "0"
    else:
        assert read(path, "memory", "memory.memsw.limit_in_bytes") == str(32 * MiB)


def test_quota_alone_keeps_the_default_period(mgr: SandboxManager, rootfs: Path) -> None:
    path = started(mgr, rootfs, LinuxContainerResources(cpu_quota=20000))
    if V2:
        assert read(path, "cpu", "cpu.max") == "20000 100000"
    else:
        assert read(path, "cpu", "cpu.cfs_quota_us") == "20000"
        assert read(path, "cpu", "cpu.cfs_period_us") == "100000"


def test_update_container_resources(mgr: SandboxManager, rootfs: Path) -> None:
    path = started(mgr, rootfs, LinuxContainerResources(memory_limit_in_bytes=64 * MiB,
                                                        cpu_shares=256))
    cid = next(c.id for c in mgr.list_containers())
    mgr.update_container_resources(cid, LinuxContainerResources(
        memory_limit_in_bytes=80 * MiB, cpu_shares=1024, cpu_quota=30000, cpu_period=60000))
    if V2:
        assert read(path, "memory", "memory.max") == str(80 * MiB)
        assert read(path, "memory", "memory.swap.max") == "0"
        assert read(path, "cpu", "cpu.weight") == str(weight(1024))
        assert read(path, "cpu", "cpu.max") == "30000 60000"
    else:
        assert read(path, "memory", "memory.limit_in_bytes") == str(80 * MiB)
        assert read(path, "cpu", "cpu.shares") == "1024"
        assert read(path, "cpu", "cpu.cfs_quota_us") == "30000"
    with pytest.raises(UnavailableResourceError, match=r"unified\['memory\.hgh'\]"):
        mgr.update_container_resources(cid, LinuxContainerResources(
            unified={"memory.hgh": "1"}))


def test_hugepages_applied_where_the_controller_is_else_refused(
    mgr: SandboxManager, rootfs: Path
) -> None:
    # this host: hugetlb sits on the cgroup2 mount of a hybrid host, not on v1, so runc/crun
    # could not apply it: refused at create, naming the field, controller and version
    have = cgroups.available_controllers("/podkit-probe/ctr")
    res = LinuxContainerResources(hugepage_limits=[HugepageLimit(page_size="2MB",
                                                                 limit=4 * MiB)])
    if "hugetlb" in have.names:
        path = started(mgr, rootfs, res)
        name = "hugetlb.2MB.max" if V2 else "hugetlb.2MB.limit_in_bytes"
        assert read(path, "hugetlb", name) == str(4 * MiB)
        return
    sb = mgr.run_sandbox(pod_config(host_network=True))
    with pytest.raises(UnavailableResourceError) as err:
        mgr.create_container(sb.id, ctr_config(rootfs, "huge", ["true"], linux=_linux(res)))
    [problem] = err.value.problems
    assert problem.path == "$.linux.resources.hugepageLimits[0].pageSize"
    assert problem.message.startswith("needs the hugetlb cgroup controller, which cgroup /")
    assert problem.message.endswith(
        f"cannot have on this host's {have.version} (available: {' '.join(sorted(have.names))})")
    assert mgr.list_containers() == []


def test_unified_keys_refused_by_name(mgr: SandboxManager, rootfs: Path) -> None:
    # v1: any unified key; v2: a file no controller has
    sb = mgr.run_sandbox(pod_config(host_network=True))
    key = "memory.high" if not V2 else "memory.hihg"
    with pytest.raises(UnavailableResourceError) as err:
        mgr.create_container(sb.id, ctr_config(rootfs, "uni", ["true"], linux=_linux(
            LinuxContainerResources(unified={key: "1M"}))))
    [problem] = err.value.problems
    assert problem.path == f"$.linux.resources.unified[{key!r}]"
    assert problem.message == ("no such memory file on cgroup v2" if V2 else
                               "unified settings need cgroup v2; this host runs "
                               f"{cgroups.available_controllers(None).version}")
    assert mgr.list_containers() == []


@pytest.fixture
def busy_parent() -> Iterator[str]:
    """A cgroup v2 parent holding a process and no enabled controller: its children can get
    no controller (the no-internal-process rule)."""
    if not V2:
        pytest.skip("cgroup v2 only: a v1 parent holding processes still gives its children "
                    "every controller")
    name = f"pk-busy-{uuid.uuid4().hex[:8]}"
    d = Path("/sys/fs/cgroup") / name
    d.mkdir()
    sleeper = subprocess.Popen(["sleep", "600"])
    try:
        (d / "cgroup.procs").write_text(str(sleeper.pid))
        yield "/" + name
    finally:
        sleeper.kill()
        sleeper.wait()
        for sub in sorted(d.glob("*/"), reverse=True):  # what a failed create could leave
            if sub.is_dir():
                os.rmdir(sub)
        os.rmdir(d)


def test_a_parent_that_cannot_enable_a_controller_refuses_at_create(
    bridge: None, rootfs: Path, tmp_path: Path, binary: str, busy_parent: str
) -> None:
    # infra-less pods: a pause's cpu shares would be refused first under this parent
    for m in _managed(tmp_path / "m", rootfs, binary, infraless=True):
        sb = m.run_sandbox(pod_config(host_network=True,
                                      linux=LinuxPodSandboxConfig(cgroup_parent=busy_parent)))
        with pytest.raises(UnavailableResourceError) as err:
            m.create_container(sb.id, ctr_config(rootfs, "busy", ["sleep", "600"], linux=_linux(
                LinuxContainerResources(memory_limit_in_bytes=32 * MiB))))
        text = str(err.value)
        assert "$.linux.resources.memory.limit: needs the memory cgroup controller" in text
        assert f"cgroup {busy_parent}/" in text and "cgroup v2 (available: none)" in text
        assert f"/sys/fs/cgroup{busy_parent} holds processes" in text
        assert m.list_containers() == []
        assert not list((tmp_path / "m" / "root" / "containers").iterdir())  # no bundle
    assert [p for p in Path("/sys/fs/cgroup", busy_parent.strip("/")).iterdir()
            if p.is_dir()] == []  # no cgroup made
