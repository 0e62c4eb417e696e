"""A spec's resources against the controllers its cgroup can have (pure; the real refusals at
create are in tests/sandbox/test_resources_v2.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from podkit import cgroups, oci
from podkit.cgroups import Controllers, Mode
from podkit.errors import InvalidArgumentError
from podkit.oci import codec
from podkit.runtime.resource_check import (
    UnavailableResourceError,
    check_bundle_resources,
    check_resources,
    resource_problems,
)

V2_ALL = frozenset(["cpuset", "cpu", "io", "memory", "hugetlb", "pids", "rdma", "misc"])
V2 = Controllers(mode=Mode.UNIFIED, names=V2_ALL, cgroup="/k/ctr", swap=True,
                 hugepage_sizes=frozenset({"2MB", "1GB"}))
V1 = Controllers(mode=Mode.HYBRID, names=frozenset(["cpu", "cpuacct", "cpuset", "memory", "pids",
                                                    "blkio", "devices", "freezer"]),
                 cgroup="/k/ctr", swap=True, hugepage_sizes=frozenset({"2MB"}))


def res(**wire: object) -> oci.LinuxResources:
    return codec.structure(wire, oci.LinuxResources)


FULL = {"cpu": {"shares": 512, "quota": 50000, "period": 100000, "cpus": "0", "mems": "0"},
        "memory": {"limit": 1 << 26, "swap": 1 << 27},
        "pids": {"limit": 50},
        "blockIO": {"weight": 100},
        "hugepageLimits": [{"pageSize": "2MB", "limit": 1 << 21}]}


def test_everything_available_gives_nothing() -> None:
    assert resource_problems(res(**FULL, unified={"memory.high": "1M", "cpu.pressure": "",
                                                  "hugetlb.1GB.max": "0",
                                                  "cgroup.max.depth": "3"}), V2) == []
    assert resource_problems(res(**FULL), V1.__class__(
        mode=V1.mode, names=V1.names | {"hugetlb"}, swap=True,
        hugepage_sizes=frozenset({"2MB"}))) == []
    assert resource_problems(None, V2) == []


def test_a_missing_controller_names_the_field_controller_and_version() -> None:
    have = Controllers(mode=Mode.UNIFIED, names=V2_ALL - {"hugetlb"}, cgroup="/k/ctr",
                       hugepage_sizes=frozenset({"2MB"}), why="/sys/fs/cgroup/k holds processes")
    [p] = resource_problems(res(hugepageLimits=[{"pageSize": "2MB", "limit": 1}]), have)
    assert p.path == "$.linux.resources.hugepageLimits[0].pageSize"
    assert "needs the hugetlb cgroup controller" in p.message
    assert "cgroup /k/ctr" in p.message and "cgroup v2" in p.message
    assert "available: cpu cpuset io memory misc pids rdma" in p.message
    assert "holds processes" in p.message


def test_on_this_hybrid_kind_of_host_hugetlb_is_not_a_v1_controller() -> None:
    [p] = resource_problems(res(hugepageLimits=[{"pageSize": "2MB", "limit": 1}]), V1)
    assert "hugetlb" in p.message and "cgroup v1 (hybrid)" in p.message


def test_each_field_maps_to_its_controller() -> None:
    none = Controllers(mode=Mode.UNIFIED, names=frozenset())
    paths = [p.path for p in resource_problems(res(**FULL, rdma={"mlx": {"hcaHandles": 1}}),
                                               none)]
    assert paths == [
        "$.linux.resources.memory.limit", "$.linux.resources.memory.swap",
        "$.linux.resources.cpu.shares", "$.linux.resources.cpu.quota",
        "$.linux.resources.cpu.period", "$.linux.resources.cpu.cpus",
        "$.linux.resources.cpu.mems", "$.linux.resources.pids.limit",
        "$.linux.resources.blockIO", "$.linux.resources.hugepageLimits[0].pageSize",
        "$.linux.resources.rdma"]
    messages = [p.message for p in resource_problems(res(**FULL), none)]
    assert [m.split()[2] for m in messages] == [
        "memory", "memory", "cpu", "cpu", "cpu", "cpuset", "cpuset", "pids", "io", "hugetlb"]
    v1_none = Controllers(mode=Mode.V1, names=frozenset())
    blkio = resource_problems(res(blockIO={"weight": 10}, network={"classID": 1}), v1_none)
    assert [p.message.split()[2] for p in blkio] == ["blkio", "net_cls"]


def test_an_unknown_hugepage_size() -> None:
    [p] = resource_problems(res(hugepageLimits=[{"pageSize": "4MB", "limit": 1}]), V2)
    assert p.path == "$.linux.resources.hugepageLimits[0].pageSize"
    assert p.message == "'4MB': the kernel has no such hugepage size (sizes: 1GB 2MB)"


def test_swap_without_accounting_only_when_the_runtime_would_fail() -> None:
    no_swap = Controllers(mode=Mode.UNIFIED, names=V2_ALL, swap=False)
    assert resource_problems(res(memory={"limit": 100, "swap": 100}), no_swap) == []
    assert resource_problems(res(memory={"limit": 100, "swap": -1}), no_swap) == []
    [p] = resource_problems(res(memory={"limit": 100, "swap": 300}), no_swap)
    assert p.path == "$.linux.resources.memory.swap" and p.message.startswith("300: swap")


@pytest.mark.parametrize(("key", "why"), [
    ("memory.hihg", "no such memory file on cgroup v2"),
    ("foo.bar", "no cgroup v2 controller 'foo'"),
    ("memory", "not a cgroup v2 file name such as 'memory.high'"),
    ("memory.max/../x", "not a cgroup v2 file name"),
    ("hugetlb.4MB.max", "no such hugetlb file (sizes: 1GB 2MB)"),
    ("hugetlb.2MB.limit", "no such hugetlb file"),
])
def test_unified_keys_naming_no_file(key: str, why: str) -> None:
    [p] = resource_problems(res(unified={key: "1"}), V2)
    assert p.path == f"$.linux.resources.unified[{key!r}]"
    assert p.message.startswith(why)


def test_unified_key_of_a_controller_not_available() -> None:
    have = Controllers(mode=Mode.UNIFIED, names=frozenset({"cpu"}), cgroup="/x/c")
    [p] = resource_problems(res(unified={"memory.high": "1M", "cpu.weight": "5"}), have)
    assert p.path == "$.linux.resources.unified['memory.high']"
    assert p.message.startswith("needs the memory cgroup controller, which cgroup /x/c")


def test_any_unified_key_on_v1_is_refused_by_name() -> None:
    problems = resource_problems(res(unified={"memory.high": "1M", "pids.max": "5"}), V1)
    assert [str(p) for p in problems] == [
        "$.linux.resources.unified['memory.high']: unified settings need cgroup v2; this host "
        "runs cgroup v1 (hybrid)",
        "$.linux.resources.unified['pids.max']: unified settings need cgroup v2; this host "
        "runs cgroup v1 (hybrid)"]


def test_check_resources_raises_an_invalid_argument_listing_every_problem() -> None:
    with pytest.raises(UnavailableResourceError) as err:
        check_resources(res(unified={"a.b": "1"}, hugepageLimits=[
            {"pageSize": "2MB", "limit": 1}]), "/k/ctr", V1)
    assert isinstance(err.value, InvalidArgumentError)
    assert len(err.value.problems) == 2
    assert str(err.value).startswith("resources the container cannot have on this host: "
                                     "$.linux.resources.hugepageLimits[0].pageSize: needs")
    check_resources(None, "/k/ctr", V1)


def test_a_bundle_that_does_not_load_is_left_to_the_runtime(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text("{not json")
    check_bundle_resources(tmp_path)
    check_bundle_resources(tmp_path / "missing")
    (tmp_path / "config.json").write_text(json.dumps({"ociVersion": "1.0.2", "linux": {
        "resources": {"unified": {"memory.high": "1"}}}}))
    if cgroups.host().mode is Mode.UNIFIED:
        check_bundle_resources(tmp_path)
    else:
        with pytest.raises(UnavailableResourceError, match="unified settings need cgroup v2"):
            check_bundle_resources(tmp_path)
