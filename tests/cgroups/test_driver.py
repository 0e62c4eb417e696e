"""podkit.cgroups.driver and .cleanup: the host's driver, cgroups paths and kubelet parents in
both forms, refusals, and the removal of what a deleted container leaves (on recorded trees)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cgroups.trees import HYBRID_MOUNTINFO, UNIFIED_MOUNTINFO, V1_MOUNTINFO
from podkit import cgroups
from podkit.cgroups import Driver, Hierarchy
from podkit.errors import InvalidArgumentError

FORMS = ("cgroupfs form '/kubepods/burstable/pod<uid>' or systemd form "
         "'kubepods-burstable-pod<uid>.slice'")


# -- which driver --------------------------------------------------------------------------

@pytest.mark.parametrize(("mountinfo", "pid1", "want"), [
    (UNIFIED_MOUNTINFO, True, Driver.SYSTEMD),
    (UNIFIED_MOUNTINFO, False, Driver.CGROUPFS),
    (HYBRID_MOUNTINFO, True, Driver.CGROUPFS),  # systemd on v1/hybrid: cgroupfs (as kubeadm)
    (V1_MOUNTINFO, True, Driver.CGROUPFS),
    (V1_MOUNTINFO, False, Driver.CGROUPFS),
])
def test_detect_driver(mountinfo: str, pid1: bool, want: Driver) -> None:
    assert cgroups.detect_driver(Hierarchy.parse(mountinfo), pid1) is want


def test_systemd_running_needs_its_run_dir_and_pid1_named_systemd(tmp_path: Path) -> None:
    proc, run = tmp_path / "proc", tmp_path / "run-systemd"
    assert not cgroups.systemd_running(run, proc)  # no /proc/1/comm
    (proc / "1").mkdir(parents=True)
    (proc / "1" / "comm").write_text("systemd\n")
    assert not cgroups.systemd_running(run, proc)  # no /run/systemd/system
    run.mkdir()
    assert cgroups.systemd_running(run, proc)
    (proc / "1" / "comm").write_text("sh\n")
    assert not cgroups.systemd_running(run, proc)


def test_parse_and_resolve_driver() -> None:
    assert cgroups.parse_driver("systemd") is Driver.SYSTEMD
    assert cgroups.parse_driver("cgroupfs") == "cgroupfs"
    assert Driver.SYSTEMD.systemd and not Driver.CGROUPFS.systemd
    with pytest.raises(InvalidArgumentError,
                       match=r"^--cgroup-driver 'Systemd': unknown cgroup driver; want "
                             r"cgroupfs or systemd$"):
        cgroups.parse_driver("Systemd", "--cgroup-driver")
    assert cgroups.resolve_driver("systemd") is Driver.SYSTEMD
    assert cgroups.resolve_driver(None) is cgroups.default_driver()
    assert cgroups.resolve_driver("") is cgroups.default_driver()


# -- slices ---------------------------------------------------------------------------------

@pytest.mark.parametrize(("name", "path"), [
    ("system.slice", "/system.slice"),
    ("kubepods-burstable-pod1.slice",
     "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod1.slice"),
    ("a_b-c.d.slice", "/a_b.slice/a_b-c.d.slice"),
    ("-.slice", "/"),
])
def test_slice_path(name: str, path: str) -> None:
    assert cgroups.slice_path(name) == path


@pytest.mark.parametrize("name", ["kubepods", "a--b.slice", "-a.slice", "a-.slice",
                                  "a b.slice", "a@b.slice", ".slice"])
def test_slice_path_refuses_names_systemd_would_not_take(name: str) -> None:
    with pytest.raises(InvalidArgumentError, match=r"not a systemd slice name"):
        cgroups.slice_path(name)


@pytest.mark.parametrize(("path", "name"), [
    ("/kubepods/burstable/pod1234-ab-cd", "kubepods-burstable-pod1234_ab_cd.slice"),  # kubelet
    ("kubepods", "kubepods.slice"),
    ("/kubepods/", "kubepods.slice"),
    ("/", "-.slice"),
])
def test_slice_name_as_kubelet_to_systemd(path: str, name: str) -> None:
    assert cgroups.slice_name(path) == name


def test_slice_name_refuses_elements_no_unit_name_can_hold() -> None:
    with pytest.raises(InvalidArgumentError, match=r"element 'kube pods' cannot be part"):
        cgroups.slice_name("/kube pods/x")


_ELEMENT = st.text("abcxyz019_.-", min_size=1, max_size=8).filter(lambda e: e not in (".", ".."))


@given(st.lists(_ELEMENT, min_size=1, max_size=4))
def test_converted_parent_keeps_its_depth(elements: list[str]) -> None:
    """A cgroupfs parent under systemd becomes one slice per element, the last one named for
    the whole path (kubelet's nesting)."""
    name = cgroups.slice_name("/" + "/".join(elements))
    path = cgroups.slice_path(name)
    assert path.count("/") == len(elements)
    assert path.rsplit("/", 1)[1] == name


# -- cgroups paths ------------------------------------------------------------------------

@pytest.mark.parametrize(("parent", "cgroupfs", "systemd"), [
    ("", "/podkit/ID", "system.slice:cri-podkit:ID"),
    ("/kubepods/burstable/pod1-2", "/kubepods/burstable/pod1-2/ID",
     "kubepods-burstable-pod1_2.slice:cri-podkit:ID"),
    ("kubepods-burstable-pod1.slice",
     "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod1.slice/ID",
     "kubepods-burstable-pod1.slice:cri-podkit:ID"),
    ("/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod1.slice/",
     "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod1.slice/ID",
     "kubepods-burstable-pod1.slice:cri-podkit:ID"),
    ("/podkit", "/podkit/ID", "podkit.slice:cri-podkit:ID"),
])
def test_cgroups_path_for_each_driver(parent: str, cgroupfs: str, systemd: str) -> None:
    assert cgroups.cgroups_path_for("cgroupfs", parent, "ID") == cgroupfs
    assert cgroups.cgroups_path_for(Driver.SYSTEMD, parent, "ID") == systemd
    # what the stats read is where systemd puts the scope
    assert cgroups.cgroup_of_path(systemd).endswith("/cri-podkit-ID.scope")


@pytest.mark.parametrize(("parent", "why"), [
    ("/kubepods.slice/burstable", "a mix of slices and plain directories"),
    ("/foo.slice/bar-x.slice",
     r"not the path systemd gives bar-x.slice \(/bar.slice/bar-x.slice\)"),
    ("a--b.slice", "'a--b.slice' is not a systemd slice name"),
    ("system.slice:cri:x", "':' \\(a cgroups path, not a parent\\)"),
    ("/kubepods/../x", "'..' elements"),
])
@pytest.mark.parametrize("driver", ["cgroupfs", "systemd"])
def test_parents_neither_driver_can_read_are_refused_naming_both_forms(
        parent: str, why: str, driver: str) -> None:
    with pytest.raises(InvalidArgumentError) as info:
        cgroups.cgroups_path_for(driver, parent, "ID")
    msg = str(info.value)
    assert msg.startswith(f"cgroup_parent '{parent}' ({driver} cgroup driver): ")
    assert msg.endswith(f"; want the {FORMS}")
    assert re.search(why, msg)


@pytest.mark.parametrize(("parent", "why"), [
    ("/kube pods/x", "element 'kube pods' cannot be part of a systemd unit name"),
    ("/", "the root slice holds no pods"),
    ("-.slice", "the root slice holds no pods"),
])
def test_parents_only_systemd_cannot_take(parent: str, why: str) -> None:
    assert cgroups.cgroups_path_for("cgroupfs", parent, "ID").endswith("/ID")
    with pytest.raises(InvalidArgumentError, match=rf"\(systemd cgroup driver\): {why}"):
        cgroups.cgroups_path_for("systemd", parent, "ID")


def test_unknown_driver_is_refused_by_name() -> None:
    with pytest.raises(InvalidArgumentError, match=r"^cgroup_driver 'cgroupv2': unknown"):
        cgroups.cgroups_path_for("cgroupv2", "", "ID")


def test_scope_unit() -> None:
    assert cgroups.scope_unit("system.slice:cri-podkit:ab") == "cri-podkit-ab.scope"
    assert cgroups.scope_unit("a.slice:x:b-c.slice") == "b-c.slice"
    assert cgroups.scope_unit("/podkit/ab") is None


# -- leftovers ------------------------------------------------------------------------------

def test_cgroupfs_leftovers_empty_dirs_go_busy_ones_stay(tmp_path: Path) -> None:
    h = Hierarchy.parse(HYBRID_MOUNTINFO, root=tmp_path)
    base = tmp_path / "sys/fs/cgroup"
    for ctl in ("cpu", "memory"):
        (base / ctl / "podkit" / "gone" / "container").mkdir(parents=True)
    (base / "cpu" / "podkit" / "busy").mkdir(parents=True)
    (base / "cpu" / "podkit" / "busy" / "cgroup.procs").write_text("42\n")  # rmdir fails
    removed = cgroups.remove_leftovers("/podkit/gone", h, run=_no_systemctl)
    assert sorted(removed) == [str(base / "cpu/podkit/gone"), str(base / "memory/podkit/gone")]
    assert not (base / "memory/podkit/gone").exists()
    assert (base / "memory/podkit").is_dir()  # the parent is not the container's
    assert cgroups.remove_leftovers("/podkit/busy", h, run=_no_systemctl) == []
    assert (base / "cpu/podkit/busy").is_dir()
    assert cgroups.remove_leftovers("", h, run=_no_systemctl) == []


def test_systemd_leftover_scope_is_stopped_and_reset(tmp_path: Path) -> None:
    h = Hierarchy.parse(UNIFIED_MOUNTINFO, root=tmp_path)
    calls: list[list[str]] = []

    def run(args: object) -> int:
        calls.append(list(args))  # type: ignore[call-overload]
        return 0

    path = "system.slice:cri-podkit:abc"
    assert cgroups.remove_leftovers(path, h, run=run) == []  # no cgroup: only the reset
    assert calls == [["reset-failed", "cri-podkit-abc.scope"]]
    (tmp_path / "sys/fs/cgroup/system.slice/cri-podkit-abc.scope").mkdir(parents=True)
    calls.clear()
    assert cgroups.remove_leftovers(path, h, run=run) == ["cri-podkit-abc.scope"]
    assert calls == [["stop", "cri-podkit-abc.scope"], ["reset-failed", "cri-podkit-abc.scope"]]


def _no_systemctl(args: object) -> int:
    raise AssertionError(f"systemctl called for a cgroupfs path: {args}")
