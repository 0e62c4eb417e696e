"""The CDI cache: directories, priorities, conflicts, errors, injection, producers (c, d.1)."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from podkit import cdi, oci


def spec_doc(kind: str = "vendor.com/dev", *devices: Any, version: str = "0.3.0",
             edits: dict[str, Any] | None = None) -> dict[str, Any]:
    d: dict[str, Any] = {"cdiVersion": version, "kind": kind, "devices": list(devices)}
    if edits is not None:
        d["containerEdits"] = edits
    return d


def dev(name: str, *env: str, **edits: Any) -> dict[str, Any]:
    e = dict(edits)
    if env:
        e["env"] = list(env)
    return {"name": name, "containerEdits": e}


def write(path: Path, d: dict[str, Any] | str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(d if isinstance(d, str) else json.dumps(d))
    return path


def fake_stat(path: str) -> Any:
    """Every host path is a char device 1:3 (so tests need no real /dev)."""
    return SimpleNamespace(st_mode=stat.S_IFCHR | 0o666, st_rdev=os.makedev(1, 3))


@pytest.fixture
def dirs(tmp_path: Path) -> tuple[Path, Path]:
    return tmp_path / "etc", tmp_path / "run"


def manual(dirs: tuple[Path, Path], **kw: Any) -> cdi.Cache:
    return cdi.Cache(dirs, auto_refresh=False, stat=fake_stat, **kw)


# --- scanning --------------------------------------------------------------------------------

def test_missing_dirs_are_fine(dirs: tuple[Path, Path]) -> None:
    c = manual(dirs)
    assert c.list_devices() == [] and c.errors == {}
    assert c.spec_dirs == tuple(str(d) for d in dirs)


def test_default_dirs() -> None:
    assert cdi.DEFAULT_SPEC_DIRS == ("/etc/cdi", "/var/run/cdi")
    c = cdi.Cache(auto_refresh=False)
    assert c.spec_dirs == ("/etc/cdi", "/var/run/cdi")
    assert cdi.Cache([], auto_refresh=False).spec_dirs == ("/etc/cdi", "/var/run/cdi")
    assert cdi.Cache(["/a/b/../c/"], auto_refresh=False).spec_dirs == ("/a/c",)


def test_only_json_and_yaml_non_recursive(dirs: tuple[Path, Path]) -> None:
    etc, _ = dirs
    write(etc / "a.json", spec_doc("a.com/x", dev("j", "A=1")))
    write(etc / "b.yaml", spec_doc("a.com/x", dev("y", "A=1")))
    write(etc / "c.yml", spec_doc("a.com/x", dev("yml", "A=1")))
    write(etc / "d.json.tmp", spec_doc("a.com/x", dev("tmp", "A=1")))
    write(etc / "sub" / "e.json", spec_doc("a.com/x", dev("sub", "A=1")))
    (etc / "dir.json").mkdir()
    c = manual(dirs)
    assert c.list_devices() == ["a.com/x=j", "a.com/x=y"]
    assert c.errors == {}


def test_later_dirs_win(dirs: tuple[Path, Path]) -> None:
    etc, run = dirs
    write(etc / "a.json", spec_doc("v.com/c", dev("d1", "FROM=etc"), dev("d2", "FROM=etc")))
    write(run / "a.json", spec_doc("v.com/c", dev("d1", "FROM=run")))
    c = manual(dirs)
    assert c.list_devices() == ["v.com/c=d1", "v.com/c=d2"]
    d1 = c.get_device("v.com/c=d1")
    assert d1 is not None and d1.spec.path == str(run / "a.json") and d1.spec.priority == 1
    assert d1.edits.env == ("FROM=run",)
    assert d1.qualified_name == "v.com/c=d1"
    d2 = c.get_device("v.com/c=d2")
    assert d2 is not None and d2.spec.priority == 0
    assert [s.path for s in c.get_vendor_specs("v.com")] == [str(etc / "a.json"),
                                                           str(run / "a.json")]
    assert c.errors == {}


def test_same_dir_conflict(dirs: tuple[Path, Path]) -> None:
    etc, _ = dirs
    a = write(etc / "a.yaml", spec_doc("v.com/c", dev("dup", "A=1"), dev("onlya", "A=1")))
    b = write(etc / "b.yaml", spec_doc("v.com/c", dev("dup", "B=1"), dev("onlyb", "B=1")))
    c = manual(dirs)
    assert c.list_devices() == ["v.com/c=onlya", "v.com/c=onlyb"]
    msg = f'conflicting device "v.com/c=dup" (specs "{b}", "{a}")'
    assert c.errors == {str(a): [msg], str(b): [msg]}
    assert c.get_spec_errors(str(a)) == [msg]
    with pytest.raises(cdi.UnresolvableDevicesError):
        c.inject_devices(oci.Spec(), ["v.com/c=dup"])


def test_conflict_does_not_hide_higher_priority_definition(dirs: tuple[Path, Path]) -> None:
    """Deliberate improvement over Go: /var/run/cdi's definition still resolves."""
    etc, run = dirs
    write(etc / "a.yaml", spec_doc("v.com/c", dev("dev1", "A=1")))
    write(etc / "b.yaml", spec_doc("v.com/c", dev("dev1", "B=1")))
    write(run / "c.yaml", spec_doc("v.com/c", dev("dev1", "C=1")))
    c = manual(dirs)
    d = c.get_device("v.com/c=dev1")
    assert d is not None and d.edits.env == ("C=1",)
    assert len(c.errors) == 2


def test_conflict_in_higher_dir_hides_lower_definition(dirs: tuple[Path, Path]) -> None:
    etc, run = dirs
    write(etc / "a.yaml", spec_doc("v.com/c", dev("dev1", "A=1")))
    write(run / "b.yaml", spec_doc("v.com/c", dev("dev1", "B=1")))
    write(run / "c.yaml", spec_doc("v.com/c", dev("dev1", "C=1")))
    assert manual(dirs).get_device("v.com/c=dev1") is None


def test_bad_files_are_reported_and_others_keep_working(dirs: tuple[Path, Path]) -> None:
    etc, run = dirs
    write(etc / "good.yaml", spec_doc("v.com/c", dev("ok", "A=1")))
    bad_parse = write(etc / "bad1.json", '{"cdiVersion": "0.3.0", "bogus": true}')
    bad_valid = write(etc / "bad2.yaml", spec_doc("v.com/c", dev("x", "NOEQUALS")))
    empty = write(run / "empty.json", "")
    c = manual(dirs)
    assert c.list_devices() == ["v.com/c=ok"]
    errs = c.errors
    assert set(errs) == {str(bad_parse), str(bad_valid), str(empty)}
    assert 'unknown field "bogus"' in errs[str(bad_parse)][0]
    assert errs[str(bad_valid)][0].startswith("failed to load CDI Spec: invalid CDI Spec: ")
    assert 'invalid environment variable "NOEQUALS"' in errs[str(bad_valid)][0]
    assert "devices[0].containerEdits.env[0]" in errs[str(bad_valid)][0]
    assert str(bad_valid) in errs[str(bad_valid)][0]
    assert "no Spec data" in errs[str(empty)][0]
    # fixing the file and refreshing clears the error
    write(bad_valid, spec_doc("v.com/c", dev("x", "A=1")))
    assert c.refresh() == {str(bad_parse): errs[str(bad_parse)], str(empty): errs[str(empty)]}
    assert c.list_devices() == ["v.com/c=ok", "v.com/c=x"]


def test_unreadable_dir_is_reported(dirs: tuple[Path, Path]) -> None:
    etc, run = dirs
    etc.parent.mkdir(parents=True, exist_ok=True)
    etc.write_text("not a dir")
    write(run / "a.yaml", spec_doc("v.com/c", dev("ok", "A=1")))
    c = manual(dirs)
    assert c.list_devices() == ["v.com/c=ok"]
    assert "failed to read CDI Spec directory" in c.errors[str(etc)][0]


def test_vendors_classes(dirs: tuple[Path, Path]) -> None:
    etc, run = dirs
    write(etc / "a.yaml", spec_doc("b.com/gpu", dev("0", "A=1"), version="0.5.0"))
    write(etc / "b.yaml", spec_doc("a.com/nic", dev("x", "A=1")))
    write(run / "c.yaml", spec_doc("a.com/gpu", dev("y", "A=1")))
    c = manual(dirs)
    assert c.list_vendors() == ["a.com", "b.com"]
    assert c.list_classes() == ["gpu", "nic"]
    assert [s.class_ for s in c.get_vendor_specs("a.com")] == ["nic", "gpu"]
    assert c.get_vendor_specs("none.com") == []
    assert len(c.list_specs()) == 3


def test_manual_mode_needs_refresh(dirs: tuple[Path, Path]) -> None:
    etc, _ = dirs
    c = manual(dirs)
    write(etc / "a.yaml", spec_doc("v.com/c", dev("x", "A=1")))
    assert c.get_device("v.com/c=x") is None
    c.refresh()
    assert c.get_device("v.com/c=x") is not None


# --- injection (d.1) -------------------------------------------------------------------------

@pytest.fixture
def two_vendors(dirs: tuple[Path, Path]) -> cdi.Cache:
    etc, run = dirs
    write(etc / "a.yaml", spec_doc(
        "a.com/c", dev("a1", "A1=1", "WHO=a1"), dev("a2", "A2=1", "WHO=a2"),
        edits={"env": ["SPEC=a", "WHO=spec-a"], "hooks": [{"hookName": "poststart",
                                                           "path": "/bin/a"}]}))
    write(run / "b.yaml", spec_doc(
        "b.com/c", dev("b1", "B1=1", "WHO=b1",
                       deviceNodes=[{"path": "/dev/b1"}],
                       mounts=[{"hostPath": "/h", "containerPath": "/c"}]),
        edits={"env": ["SPEC=b"]}))
    return manual(dirs)


def test_inject_interleaves_spec_and_device_edits(two_vendors: cdi.Cache) -> None:
    spec = oci.Spec(process=oci.Process(env=["WHO=orig", "PATH=/bin"]))
    got = two_vendors.inject_devices(spec, ["a.com/c=a1", "b.com/c=b1", "a.com/c=a2"])
    assert got == ["a.com/c=a1", "b.com/c=b1", "a.com/c=a2"]
    assert spec.process is not None
    # specA, a1, specB, b1, a2 -> WHO keeps its first position, last writer wins
    assert spec.process.env == ["WHO=a2", "PATH=/bin", "SPEC=b", "A1=1", "B1=1", "A2=1"]
    assert [h.path for h in spec.hooks.poststart or []] == ["/bin/a"]  # type: ignore[union-attr]


def test_same_device_twice_is_applied_once(two_vendors: cdi.Cache) -> None:
    """Deliberate improvement over Go: no doubled cgroup rules or hooks."""
    spec = oci.Spec()
    got = two_vendors.inject_devices(spec, ["b.com/c=b1", "b.com/c=b1"])
    assert got == ["b.com/c=b1"]
    assert spec.linux is not None and spec.linux.resources is not None
    assert len(spec.linux.resources.devices or []) == 1
    assert len(spec.mounts or []) == 1


def test_unresolvable_lists_every_unknown_name_and_leaves_spec(two_vendors: cdi.Cache) -> None:
    spec = oci.Spec(process=oci.Process(env=["A=1"]))
    before = spec.to_dict()
    with pytest.raises(cdi.UnresolvableDevicesError) as exc:
        two_vendors.inject_devices(spec, ["x.com/c=1", "a.com/c=a1", "y.com/c=2", "x.com/c=1"])
    assert exc.value.devices == ["x.com/c=1", "y.com/c=2", "x.com/c=1"]
    assert str(exc.value) == "unresolvable CDI devices x.com/c=1, y.com/c=2, x.com/c=1"
    assert isinstance(exc.value, LookupError)
    assert spec.to_dict() == before


@pytest.mark.parametrize(("name", "why"), [
    ("vendor.com/gpu", 'unqualified device "vendor.com/gpu", missing vendor (expected '
                       "vendor/class=name)"),
    ("gpu=0", 'unqualified device "gpu=0", missing vendor'),
    ("/dev/null", 'unqualified device "/dev/null", missing vendor'),
    ("", 'unqualified device "", missing vendor'),
    ("VENDOR/x=y", None),  # valid syntax (upper case is allowed): merely unknown
    ("_v.com/c=d", 'invalid device "_v.com/c=d": invalid vendor. "_v.com", should start with '
                   "letter"),
    ("v.com/c=d e", "invalid character ' ' in device name \"d e\""),
])
def test_malformed_name_is_a_name_error_not_unresolvable(two_vendors: cdi.Cache, name: str,
                                                         why: str | None) -> None:
    spec = oci.Spec(process=oci.Process(env=["A=1"]))
    before = spec.to_dict()
    if why is None:
        with pytest.raises(cdi.UnresolvableDevicesError):
            two_vendors.inject_devices(spec, ["a.com/c=a1", name])
        return
    with pytest.raises(cdi.InvalidDeviceNamesError) as exc:
        two_vendors.inject_devices(spec, ["a.com/c=a1", name, "x.com/c=unknown"])
    assert not isinstance(exc.value, cdi.UnresolvableDevicesError)
    assert isinstance(exc.value, cdi.InvalidNameError) and isinstance(exc.value, ValueError)
    assert exc.value.devices == [name]
    assert why in exc.value.problems[name] and why in str(exc.value)
    assert spec.to_dict() == before


def test_every_malformed_name_is_listed(two_vendors: cdi.Cache) -> None:
    with pytest.raises(cdi.InvalidDeviceNamesError) as exc:
        two_vendors.resolve(["gpu=0", "a.com/c=a1", "vendor.com/gpu", "gpu=0", 7])  # type: ignore[list-item]
    assert exc.value.devices == ["gpu=0", "vendor.com/gpu", "7"]
    assert "device name 7 is a int, not a string" in str(exc.value)


def test_inject_nothing_is_a_no_op(two_vendors: cdi.Cache) -> None:
    spec = oci.Spec()
    assert two_vendors.inject_devices(spec, []) == []
    assert spec == oci.Spec()


def test_inject_nil_or_invalid_oci_spec(two_vendors: cdi.Cache) -> None:
    with pytest.raises(ValueError, match="can't inject devices, nil OCI Spec"):
        two_vendors.inject_devices(None, ["a.com/c=a1"])
    with pytest.raises(ValueError, match=r"expected podkit\.oci\.Spec"):
        two_vendors.inject_devices({}, ["a.com/c=a1"])  # type: ignore[arg-type]


def test_apply_failure_leaves_spec_unchanged(dirs: tuple[Path, Path]) -> None:
    etc, _ = dirs
    write(etc / "a.yaml", spec_doc("v.com/c", dev("x", "A=2",
                                                  deviceNodes=[{"path": "/dev/pk-missing"}])))
    c = cdi.Cache(dirs, auto_refresh=False)  # real lstat: the host node does not exist
    spec = oci.Spec(process=oci.Process(env=["A=1"]))
    with pytest.raises(cdi.InjectionError, match='failed to inject devices: failed to stat CDI '
                                                 'host device "/dev/pk-missing"'):
        c.inject_devices(spec, ["v.com/c=x"])
    assert spec == oci.Spec(process=oci.Process(env=["A=1"]))


def test_injection_never_mutates_cached_specs(two_vendors: cdi.Cache) -> None:
    before = [s.spec for s in two_vendors.list_specs()]
    spec = oci.Spec()
    two_vendors.inject_devices(spec, ["b.com/c=b1", "a.com/c=a1"])
    spec.mounts[0].options = ["changed"]  # type: ignore[index]
    spec.process.env.append("X=1")  # type: ignore[union-attr]
    assert [s.spec for s in two_vendors.list_specs()] == before
    d = two_vendors.get_device("b.com/c=b1")
    assert d is not None and d.edits.device_nodes == (cdi.DeviceNode(path="/dev/b1"),)


# --- producers -------------------------------------------------------------------------------

def small_spec(kind: str = "v.com/c", **edits: Any) -> cdi.Spec:
    return cdi.Spec(kind=kind, devices=[cdi.Device(
        name="d", container_edits=cdi.ContainerEdits(**(edits or {"env": ["A=1"]})))])


def test_write_spec_yaml_and_json(dirs: tuple[Path, Path]) -> None:
    c = manual(dirs)
    _, run = dirs
    p = c.write_spec(small_spec(), "v.com-c")
    assert p == str(run / "v.com-c.yaml")
    assert Path(p).read_text().startswith("---\ncdiVersion: 0.3.0\n")
    assert stat.S_IMODE(os.stat(p).st_mode) == 0o644
    assert stat.S_IMODE(os.stat(run).st_mode) == 0o755
    pj = c.write_spec(small_spec("v.com/j", additional_gids=[5]), "j.json")
    data = json.loads(Path(pj).read_text())
    assert data["cdiVersion"] == "0.7.0"
    assert sorted(f.name for f in run.iterdir()) == ["j.json", "v.com-c.yaml"]
    c.refresh()
    assert c.list_devices() == ["v.com/c=d", "v.com/j=d"]


def test_write_spec_explicit_version_and_validation(dirs: tuple[Path, Path]) -> None:
    c = manual(dirs)
    p = c.write_spec(small_spec(), "x.json", cdi_version="1.0.0")
    assert json.loads(Path(p).read_text())["cdiVersion"] == "1.0.0"
    with pytest.raises(cdi.SpecError, match="Spec validation failed: invalid CDI Spec: the spec "
                                            r"version must be at least v0\.7\.0"):
        c.write_spec(small_spec(additional_gids=[1]), "y.json", cdi_version="0.3.0")
    with pytest.raises(cdi.SpecError, match=r"Spec validation failed: .*empty device edits"):
        c.write_spec(cdi.Spec(kind="v.com/c", devices=[cdi.Device(name="d")]), "z.json")
    assert not (dirs[1] / "y.json").exists() and not (dirs[1] / "z.json").exists()


def test_write_spec_custom_mode(dirs: tuple[Path, Path]) -> None:
    c = manual(dirs, file_mode=0o600)
    p = c.write_spec(small_spec(), "x.yaml")
    assert stat.S_IMODE(os.stat(p).st_mode) == 0o600


@pytest.mark.parametrize("name", ["../evil", "a/b", "..", "x..y", "", ".hidden", "a\0b"])
def test_unsafe_spec_names_are_refused(dirs: tuple[Path, Path], name: str) -> None:
    c = manual(dirs)
    with pytest.raises(ValueError, match="invalid CDI Spec name"):
        c.write_spec(small_spec(), name)
    with pytest.raises(ValueError, match="invalid CDI Spec name"):
        c.remove_spec(name)
    assert not dirs[1].exists()


def test_yml_name_gets_yaml_appended(dirs: tuple[Path, Path]) -> None:
    p = manual(dirs).write_spec(small_spec(), "foo.yml")
    assert p.endswith("foo.yml.yaml")


def test_remove_spec(dirs: tuple[Path, Path]) -> None:
    c = manual(dirs)
    p = c.write_spec(small_spec(), "x")
    c.remove_spec("x")
    assert not os.path.exists(p)
    c.remove_spec("x")  # missing is fine
    c.remove_spec("never.json")


def test_generated_names() -> None:
    assert cdi.generate_spec_name("vendor.com", "device") == "vendor.com-device"
    assert cdi.generate_transient_spec_name("vendor.com", "device", "id/0/1") == \
        "vendor.com-device_id_0_1"
    s = small_spec("vendor.com/gpu")
    assert cdi.generate_name_for_spec(s) == "vendor.com-gpu"
    assert cdi.generate_name_for_transient_spec(s, "ctr") == "vendor.com-gpu_ctr"
    with pytest.raises(ValueError, match='invalid vendor/class "nokind" in Spec'):
        cdi.generate_name_for_spec(small_spec("nokind"))


def test_transient_spec_lifecycle(dirs: tuple[Path, Path]) -> None:
    c = manual(dirs)
    s = small_spec("vendor.com/device")
    name = cdi.generate_name_for_transient_spec(s, "id0")
    c.write_spec(s, name)
    assert (dirs[1] / "vendor.com-device_id0.yaml").exists()
    c.remove_spec(name)
    assert not (dirs[1] / "vendor.com-device_id0.yaml").exists()


def test_context_manager_and_close(dirs: tuple[Path, Path]) -> None:
    with cdi.Cache(dirs, auto_refresh=True) as c:
        assert c.auto_refresh
    assert not c.auto_refresh
    c.close()
    assert c.list_devices() == []
