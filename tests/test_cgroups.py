"""podkit.cgroups on recorded trees: mode detection (v1, hybrid, unified, nested), cgroup paths
in both forms and from a pid, and stats in one shape for both versions, with and without
controllers; no silent zeros (missing file: an error naming it; gone: NotFoundError)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from cgroups.trees import (
    HYBRID_MOUNTINFO,
    NESTED_MOUNTINFO,
    UNIFIED_MOUNTINFO,
    V1_FILES,
    V1_MOUNTINFO,
    V2_FILES,
    v1_tree,
    write,
)
from podkit import cgroups
from podkit.cgroups import CgroupFileError, Hierarchy, Mode
from podkit.errors import InvalidArgumentError, NotFoundError
from podkit.runtime.usage import stats_of_cgroup
from podkit.sandbox import ContainerStats

CID = "/podkit/abc"


def v2(tmp_path: Path, files: dict[str, str] | None = None) -> Hierarchy:
    h = Hierarchy.parse(UNIFIED_MOUNTINFO, root=tmp_path)
    write(tmp_path / "sys/fs/cgroup/podkit/abc", V2_FILES if files is None else files)
    return h


def v1(tmp_path: Path) -> Hierarchy:
    h = Hierarchy.parse(V1_MOUNTINFO, root=tmp_path)
    v1_tree(tmp_path, CID, {"cpu": "cpu,cpuacct", "cpuacct": "cpu,cpuacct",
                            "memory": "memory", "pids": "pids"})
    return h


# -- mode and mounts ----------------------------------------------------------------------


def test_modes_from_mountinfo(tmp_path: Path) -> None:
    one = Hierarchy.parse(V1_MOUNTINFO)
    assert one.mode is Mode.V1 and one.unified is None
    assert sorted(one.v1) == ["cpu", "cpuacct", "memory", "pids"]  # name=systemd is no controller
    assert one.v1["cpu"] is one.v1["cpuacct"]
    assert one.v1["cpu"].mountpoint == Path("/sys/fs/cgroup/cpu,cpuacct")
    hybrid = Hierarchy.parse(HYBRID_MOUNTINFO)
    assert hybrid.mode is Mode.HYBRID and hybrid.unified is not None
    assert "pids" not in hybrid.v1
    unified = Hierarchy.parse(UNIFIED_MOUNTINFO, root=tmp_path)
    assert unified.mode is Mode.UNIFIED and unified.v1 == {}
    assert unified.unified is not None
    assert unified.unified.mountpoint == tmp_path / "sys/fs/cgroup"


@pytest.mark.integration  # so the cgroup-v2 guest lane (-m integration) checks its own host
def test_host_is_read_once_and_matches_this_machine() -> None:
    assert cgroups.host() is cgroups.host()
    assert cgroups.host().mode in (Mode.V1, Mode.HYBRID, Mode.UNIFIED)
    text = Path("/proc/self/mountinfo").read_text()
    assert (cgroups.host().mode is Mode.UNIFIED) == (" - cgroup " not in text)


def test_nested_mount_root_and_escapes(tmp_path: Path) -> None:
    h = Hierarchy.parse(NESTED_MOUNTINFO)
    assert h.unified is not None
    assert h.unified.dir("/kubepods/pod1/abc/x") == Path("/sys/fs/cgroup/x")
    assert h.unified.dir("/kubepods/pod1/abc") == Path("/sys/fs/cgroup")
    assert h.unified.dir("/elsewhere") is None
    spaced = Hierarchy.parse("1 0 0:1 / /a\\040b rw - cgroup2 cgroup2 rw\n")
    assert spaced.unified is not None and spaced.unified.mountpoint == Path("/a b")


# -- paths ------------------------------------------------------------------------------------


def test_cgroupfs_and_systemd_paths() -> None:
    assert cgroups.cgroup_of_path("podkit/abc/") == "/podkit/abc"
    assert cgroups.cgroup_of_path("kubepods-burstable-pod1.slice:cri-podkit:abc") == (
        "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod1.slice/"
        "cri-podkit-abc.scope")
    assert cgroups.systemd_path(":podkit:x") == "/system.slice/podkit-x.scope"
    with pytest.raises(InvalidArgumentError, match=r"'\.\.'"):
        cgroups.cgroup_of_path("/a/../b")
    with pytest.raises(InvalidArgumentError, match="slice:prefix:name"):
        cgroups.cgroup_of_path("a.slice::")


def test_locate_on_each_version(tmp_path: Path) -> None:
    loc = cgroups.locate(CID, Hierarchy.parse(V1_MOUNTINFO))
    assert loc.controller_dir("memory") == Path("/sys/fs/cgroup/memory/podkit/abc")
    assert loc.controller_dir("cpuacct") == Path("/sys/fs/cgroup/cpu,cpuacct/podkit/abc")
    assert loc.controller_dir("blkio") is None
    loc2 = cgroups.locate(CID, Hierarchy.parse(UNIFIED_MOUNTINFO))
    assert loc2.controller_dir("memory") == loc2.controller_dir("pids") == Path(
        "/sys/fs/cgroup/podkit/abc")
    assert cgroups.cgroup_dir("pids", CID, Hierarchy.parse(V1_MOUNTINFO)) == Path(
        "/sys/fs/cgroup/pids/podkit/abc")
    with pytest.raises(NotFoundError, match="'pids' is not mounted"):
        cgroups.cgroup_dir("pids", CID, Hierarchy.parse(HYBRID_MOUNTINFO))


def test_locate_pid_from_proc(tmp_path: Path) -> None:
    write(tmp_path / "proc/42", {"cgroup": (
        "5:pids:/podkit/p\n4:memory:/podkit/m\n2:cpu,cpuacct:/podkit/c\n"
        "1:name=systemd:/init.scope\n0::/podkit/u\n")})
    got = cgroups.cgroup_of_pid(42, tmp_path / "proc")
    assert got == {"pids": "/podkit/p", "memory": "/podkit/m", "cpu": "/podkit/c",
                   "cpuacct": "/podkit/c", "systemd": "/init.scope", "": "/podkit/u"}
    loc = cgroups.locate_pid(42, Hierarchy.parse(HYBRID_MOUNTINFO), tmp_path / "proc")
    assert loc.controller_dir("memory") == Path("/sys/fs/cgroup/memory/podkit/m")
    assert loc.unified == Path("/sys/fs/cgroup/unified/podkit/u")
    with pytest.raises(NotFoundError, match="process 43 is gone"):
        cgroups.cgroup_of_pid(43, tmp_path / "proc")


# -- v2 stats ---------------------------------------------------------------------------------


def test_v2_stats_every_field(tmp_path: Path) -> None:
    s = cgroups.stats(CID, v2(tmp_path))
    assert s.mode is Mode.UNIFIED
    assert s.cpu == cgroups.CpuStats(usage_ns=3330615000, user_ns=3000000000,
                                     system_ns=330615000, nr_periods=10, nr_throttled=2,
                                     throttled_ns=1500000)
    m = s.memory
    assert m is not None
    assert (m.usage, m.working_set, m.rss, m.cache) == (466944, 466944 - 65536, 131072, 200704)
    assert (m.page_faults, m.major_page_faults, m.limit, m.available) == (1234, 5, None, None)
    assert (m.oom_events, m.oom_kills) == (2, 1)
    assert s.pids == cgroups.PidsStats(current=1, limit=None)
    assert s.pressure is not None and s.pressure.cpu is not None
    assert s.pressure.cpu.some == cgroups.PsiData(1.5, 0.25, 0.05, 12345)
    assert s.pressure.io is not None and s.pressure.io.full is not None
    assert s.pressure.io.full.total == 42
    assert cgroups.oom_kills(CID, v2(tmp_path)) == 1


def test_v2_limit_gives_available(tmp_path: Path) -> None:
    h = v2(tmp_path, {**V2_FILES, "memory.max": "1048576\n", "pids.max": "20\n"})
    s = cgroups.stats(CID, h)
    assert s.memory is not None and s.memory.limit == 1048576
    assert s.memory.available == 1048576 - (466944 - 65536)
    assert s.pids is not None and s.pids.limit == 20


def test_v2_without_controllers_or_psi(tmp_path: Path) -> None:
    files = {"cgroup.controllers": "\n", "cpu.stat": V2_FILES["cpu.stat"].split("nr_")[0]}
    s = cgroups.stats(CID, v2(tmp_path, files))
    assert s.memory is None and s.pids is None  # not enabled: absent, not zero
    assert s.cpu is not None and s.cpu.usage_ns == 3330615000 and s.cpu.nr_periods == 0
    assert s.pressure == cgroups.Pressure()  # no PSI files: each None
    assert cgroups.oom_kills(CID, v2(tmp_path, files)) is None
    cpu_some_only = {**V2_FILES, "cpu.pressure": "some avg10=0 avg60=0 avg300=0 total=1\n"}
    p = cgroups.stats(CID, v2(tmp_path, cpu_some_only)).pressure
    assert p is not None and p.cpu is not None and p.cpu.full is None


@pytest.mark.parametrize("missing", ["memory.stat", "memory.current", "pids.current",
                                     "cpu.stat", "cgroup.controllers"])
def test_v2_missing_file_of_an_enabled_controller_is_an_error(
        tmp_path: Path, missing: str) -> None:
    files = {k: v for k, v in V2_FILES.items() if k != missing}
    with pytest.raises(CgroupFileError, match=missing.replace(".", r"\.")):
        cgroups.stats(CID, v2(tmp_path, files))


def test_bad_file_contents_are_errors(tmp_path: Path) -> None:
    with pytest.raises(CgroupFileError, match=r"memory\.current: not a number"):
        cgroups.stats(CID, v2(tmp_path, {**V2_FILES, "memory.current": "lots\n"}))
    with pytest.raises(CgroupFileError, match=r"io\.pressure: bad line"):
        cgroups.stats(CID, v2(tmp_path, {**V2_FILES, "io.pressure": "some avg10=x\n"}))
    with pytest.raises(CgroupFileError, match="no 'some' line"):
        cgroups.stats(CID, v2(tmp_path, {**V2_FILES, "io.pressure": ""}))


def test_gone_cgroup_is_not_found(tmp_path: Path) -> None:
    h = Hierarchy.parse(UNIFIED_MOUNTINFO, root=tmp_path)
    with pytest.raises(NotFoundError, match="podkit/gone does not exist"):
        cgroups.stats("/podkit/gone", h)
    with pytest.raises(NotFoundError, match="does not exist"):
        cgroups.stats("/podkit/gone", Hierarchy.parse(V1_MOUNTINFO, root=tmp_path))


# -- v1 stats ---------------------------------------------------------------------------------


def test_v1_stats_every_field(tmp_path: Path) -> None:
    s = cgroups.stats(CID, v1(tmp_path))
    assert s.mode is Mode.V1 and s.pressure is None
    tick = 10**9 // os.sysconf("SC_CLK_TCK")
    assert s.cpu == cgroups.CpuStats(usage_ns=5000000000, user_ns=300 * tick,
                                     system_ns=100 * tick, nr_periods=4, nr_throttled=1,
                                     throttled_ns=2000000)
    m = s.memory
    assert m is not None
    assert (m.usage, m.working_set, m.rss, m.cache) == (10485760, 10485760 - 1048576,
                                                        4194304, 2097152)
    assert (m.page_faults, m.major_page_faults) == (321, 7)
    assert m.limit is None  # the huge "no limit" value
    assert (m.oom_events, m.oom_kills) == (4, 2)
    assert s.pids == cgroups.PidsStats(current=3, limit=50)


def test_hybrid_without_pids_mount_and_missing_dirs(tmp_path: Path) -> None:
    h = Hierarchy.parse(HYBRID_MOUNTINFO, root=tmp_path)
    v1_tree(tmp_path, CID, {"cpu": "cpu", "cpuacct": "cpuacct", "memory": "memory"})
    s = cgroups.stats(CID, h)
    assert s.mode is Mode.HYBRID and s.pids is None and s.memory is not None
    assert s.cpu is not None and s.cpu.nr_periods == 4
    files = {k: v for k, v in V1_FILES["memory"].items() if k != "memory.oom_control"}
    write(tmp_path / "sys/fs/cgroup/memory/podkit/abc", files)
    (tmp_path / "sys/fs/cgroup/memory/podkit/abc/memory.oom_control").unlink()
    with pytest.raises(CgroupFileError, match=r"memory\.oom_control"):
        cgroups.stats(CID, h)


def test_v1_oom_control_without_oom_kill_counts_zero(tmp_path: Path) -> None:
    h = v1(tmp_path)  # kernels before 4.13 print no oom_kill line
    (tmp_path / "sys/fs/cgroup/memory/podkit/abc/memory.oom_control").write_text(
        "oom_kill_disable 0\nunder_oom 0\n")
    assert cgroups.oom_kills(CID, h) == 0


# -- the shapes the runtime, the manager and the CRI server use -------------------------------


def test_usage_runtime_stats_and_container_stats_agree(tmp_path: Path) -> None:
    s = cgroups.stats(CID, v2(tmp_path, {**V2_FILES, "memory.max": "1048576\n"}))
    short = cgroups.CgroupUsage.of(s)
    assert (short.cpu_usage_core_nano_seconds, short.memory_working_set_bytes,
            short.memory_rss_bytes, short.process_count) == (3330615000, 401408, 131072, 1)
    rt = stats_of_cgroup(s)
    assert (rt.cpu.total, rt.cpu.user, rt.cpu.kernel) == (3330615000, 3000000000, 330615000)
    assert (rt.memory.usage.usage, rt.memory.usage.limit, rt.memory.usage.failcnt) == (
        466944, 1048576, 2)
    assert (rt.pids_current, rt.pids_limit, rt.cgroup) == (1, 0, s)
    cs = ContainerStats.of("c1", s, 7)
    assert (cs.memory_available_bytes, cs.memory_page_faults, cs.memory_major_page_faults) == (
        1048576 - 401408, 1234, 5)
    assert s.pressure is not None and cs.io_psi == s.pressure.io
    old = ContainerStats.of("c1", short, 7)  # the short form still works
    assert old.memory_working_set_bytes == cs.memory_working_set_bytes


def test_cri_stats_carry_every_field(tmp_path: Path) -> None:
    from podkit.cri.convert import container_stats_to_cri

    s = cgroups.stats(CID, v2(tmp_path, {**V2_FILES, "memory.max": "1048576\n"}))
    out = container_stats_to_cri(ContainerStats.of("c1", s, 7))
    mem = out.memory
    assert (mem.working_set_bytes.value, mem.usage_bytes.value, mem.rss_bytes.value,
            mem.available_bytes.value, mem.page_faults.value, mem.major_page_faults.value) == (
        401408, 466944, 131072, 1048576 - 401408, 1234, 5)
    assert out.cpu.usage_core_nano_seconds.value == 3330615000
    assert (out.cpu.psi.Some.Total, out.cpu.psi.Some.Avg10) == (12345, 1.5)
    assert out.memory.psi.Full.Total == 3 and out.io.psi.Full.Total == 42
    v1_out = container_stats_to_cri(ContainerStats.of("c1", cgroups.stats(CID, v1(tmp_path)), 7))
    assert not v1_out.memory.HasField("available_bytes")  # unlimited: no available
    assert not v1_out.cpu.HasField("psi") and not v1_out.HasField("io")
