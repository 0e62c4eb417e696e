"""Which controllers a new container cgroup can have (podkit.cgroups.controllers), on recorded
trees: v1, hybrid, v2 with and without a populated ancestor, systemd paths; hugepage sizes and
swap accounting."""

from __future__ import annotations

from pathlib import Path

import pytest

from cgroups.trees import HYBRID_MOUNTINFO, UNIFIED_MOUNTINFO, V1_MOUNTINFO, write
from podkit import cgroups
from podkit.cgroups import Hierarchy, Mode
from podkit.cgroups.controllers import page_size_name

ALL_V2 = "cpuset cpu io memory hugetlb pids rdma misc\n"


def v2_host(tmp_path: Path, controllers: str = ALL_V2) -> tuple[Hierarchy, Path]:
    h = Hierarchy.parse(UNIFIED_MOUNTINFO, root=tmp_path)
    top = write(tmp_path / "sys/fs/cgroup", {"cgroup.controllers": controllers,
                                             "cgroup.subtree_control": "cpu memory pids\n",
                                             "cgroup.procs": "1\n"})
    return h, top


def hugepages(tmp_path: Path, *names: str) -> Path:
    d = tmp_path / "hugepages"
    for n in names:
        (d / n).mkdir(parents=True)
    d.mkdir(exist_ok=True)
    return d


@pytest.mark.parametrize(("kb", "name"), [(2048, "2MB"), (1048576, "1GB"), (64, "64KB"),
                                          (32768, "32MB"), (1536, "1536KB"), (16 << 30, "16TB")])
def test_page_size_names_as_runc_writes_them(kb: int, name: str) -> None:
    assert page_size_name(kb) == name


def test_hugepage_sizes_from_sysfs(tmp_path: Path) -> None:
    d = hugepages(tmp_path, "hugepages-2048kB", "hugepages-1048576kB", "hugepages-64kB", "junk")
    assert cgroups.hugepage_sizes(d) == {"2MB", "1GB", "64KB"}
    assert cgroups.hugepage_sizes(tmp_path / "none") == frozenset()


def test_v2_a_new_path_gets_every_root_controller(tmp_path: Path) -> None:
    h, _ = v2_host(tmp_path)
    have = cgroups.available_controllers("/kubepods/pod1/ctr", h,
                                         hugepages=hugepages(tmp_path, "hugepages-2048kB"))
    assert have.mode is Mode.UNIFIED and have.version == "cgroup v2"
    assert have.names == set(ALL_V2.split())
    assert (have.cgroup, have.hugepage_sizes, have.why) == ("/kubepods/pod1/ctr", {"2MB"}, "")


def test_v2_an_empty_existing_parent_can_enable_everything(tmp_path: Path) -> None:
    h, top = v2_host(tmp_path)
    write(top / "kubepods", {"cgroup.controllers": "cpu memory\n", "cgroup.procs": ""})
    assert cgroups.available_controllers("/kubepods/ctr", h).names == set(ALL_V2.split())


def test_v2_a_populated_ancestor_keeps_what_it_enabled(tmp_path: Path) -> None:
    h, top = v2_host(tmp_path)
    write(top / "busy", {"cgroup.controllers": "cpu memory pids\n", "cgroup.procs": "42\n",
                         "cgroup.subtree_control": "memory\n"})
    have = cgroups.available_controllers("/busy/deeper/ctr", h)
    assert have.names == {"memory"}
    assert "holds processes" in have.why and str(top / "busy") in have.why
    empty = cgroups.available_controllers("/busy/ctr", h)  # the direct parent counts too
    assert empty.names == {"memory"}


def test_v2_systemd_paths_get_the_root_controllers(tmp_path: Path) -> None:
    h, top = v2_host(tmp_path)
    write(top / "system.slice", {"cgroup.procs": "7\n", "cgroup.subtree_control": ""})
    have = cgroups.available_controllers("system.slice:podkit:abc", h)
    assert have.names == set(ALL_V2.split())
    assert have.cgroup == "/system.slice/podkit-abc.scope"


def test_no_cgroups_path_is_a_child_of_the_root(tmp_path: Path) -> None:
    h, _ = v2_host(tmp_path, "cpu memory\n")
    assert cgroups.available_controllers(None, h).names == {"cpu", "memory"}


@pytest.mark.parametrize(("mountinfo", "mode", "names"), [
    (V1_MOUNTINFO, Mode.V1, {"cpu", "cpuacct", "memory", "pids"}),
    (HYBRID_MOUNTINFO, Mode.HYBRID, {"cpu", "cpuacct", "memory"}),
])
def test_v1_and_hybrid_are_the_mounted_controllers(
    tmp_path: Path, mountinfo: str, mode: Mode, names: set[str]
) -> None:
    h = Hierarchy.parse(mountinfo, root=tmp_path)
    write(tmp_path / "sys/fs/cgroup/memory", {"memory.memsw.limit_in_bytes": "9\n"})
    have = cgroups.available_controllers("/a/b", h)
    assert (have.mode, have.names, have.swap) == (mode, names, True)
    assert have.version.startswith("cgroup v1")


def test_v1_swap_needs_memsw(tmp_path: Path) -> None:
    h = Hierarchy.parse(V1_MOUNTINFO, root=tmp_path)
    write(tmp_path / "sys/fs/cgroup/memory", {"memory.limit_in_bytes": "9\n"})
    assert not cgroups.swap_available(h)


def test_v2_swap_from_own_cgroup_or_a_child_of_the_root(tmp_path: Path) -> None:
    h, top = v2_host(tmp_path)
    write(top / "mine", {"memory.max": "max\n"})
    assert not cgroups.swap_available(h, "/mine")
    write(top / "mine", {"memory.swap.max": "max\n"})
    assert cgroups.swap_available(h, "/mine")
    # in the root cgroup (no memory.swap.max there): a child with memory enabled tells
    assert cgroups.swap_available(h, "/")
    (top / "cgroup.subtree_control").write_text("cpu\n")
    assert not cgroups.swap_available(h, "/")


def test_the_hosts_own_answer_matches_its_mounts() -> None:
    have = cgroups.available_controllers("/podkit-probe/ctr")
    h = cgroups.host()
    assert have.mode is h.mode
    if h.mode is not Mode.UNIFIED:
        assert have.names == set(h.v1)
