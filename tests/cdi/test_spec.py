"""CDI spec models: strict parsing, validation rules (reference/cdi.md b), versions (a)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from podkit import cdi
from podkit.cdi import spec as cspec


def doc(**over: Any) -> dict[str, Any]:
    """A minimal valid spec document, with top-level keys replaced by ``over``."""
    d: dict[str, Any] = {
        "cdiVersion": "0.3.0",
        "kind": "vendor.com/device",
        "devices": [{"name": "dev0", "containerEdits": {"env": ["A=B"]}}],
    }
    d.update(over)
    return d


def dev(name: str = "dev0", **edits: Any) -> dict[str, Any]:
    return {"name": name, "containerEdits": edits or {"env": ["A=B"]}}


def check(d: dict[str, Any]) -> cdi.Spec:
    s = cdi.Spec.from_dict(d)
    cdi.validate_spec(s)
    return s


def invalid(d: dict[str, Any], message: str) -> cdi.SpecError:
    s = cdi.Spec.from_dict(d)
    with pytest.raises(cdi.SpecError) as exc:
        cdi.validate_spec(s)
    assert message in str(exc.value), str(exc.value)
    assert str(exc.value).startswith("invalid CDI Spec: ")
    return exc.value


# --- parsing ---------------------------------------------------------------------------------

def test_parse_json_and_yaml_give_the_same_model() -> None:
    d = doc(containerEdits={"deviceNodes": [{"path": "/dev/x", "major": 1, "fileMode": 438}]})
    from_json = cdi.parse_spec(json.dumps(d))
    import yaml

    from_yaml = cdi.parse_spec(yaml.safe_dump(d), format="yaml")
    assert from_json == from_yaml
    assert from_json.container_edits is not None
    assert from_json.container_edits.device_nodes == (
        cdi.DeviceNode(path="/dev/x", major=1, file_mode=438),
    )


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "no Spec data"),
        ("   \n", "no Spec data"),
        ("null", "no Spec data"),
        ("---\n", "no Spec data"),
        ('{"cdiVersion": "0.3.0", "bogus": 1}', 'unknown field "bogus"'),
        ('{"devices": [{"name": "a", "containerEdits": {"envs": []}}]}',
         'unknown field "envs"'),
        ('{"kind": "a/b", "kind": "c/d"}', "duplicate key 'kind'"),
        ("kind: a/b\nkind: c/d\n", "duplicate key 'kind'"),
        ("devices:\n- name: a\n  name: b\n", "duplicate key 'name'"),
        ('{"kind": 1}', "expected a string"),
        ('{"devices": {}}', "expected an array"),
        ('{"devices": [{"containerEdits": {"deviceNodes": [{"path": "/x", "uid": -1}]}}]}',
         "out of range for uint32"),
        ('{"devices": [{"containerEdits": {"additionalGids": [4294967296]}}]}',
         "out of range for uint32"),
        ('{"devices": [{"containerEdits": {"deviceNodes": [{"path": "/x", "major": "1"}]}}]}',
         "expected an integer"),
        ('{"devices": [{"containerEdits": {"intelRdt": {"enableMonitoring": 1}}}]}',
         "expected a boolean"),
        ('{"devices": [{"containerEdits": {"intelRdt": {"enableCMT": true}}}]}',
         'unknown field "enableCMT"'),
        ("[1, 2]", "expected an object"),
        ("key: [unclosed", "failed to parse CDI Spec"),
        ("\tbad: yaml", "failed to parse CDI Spec"),
    ],
)
def test_parse_errors(text: str, message: str) -> None:
    with pytest.raises(cdi.SpecError) as exc:
        cdi.parse_spec(text, source="/etc/cdi/x.yaml")
    assert message in str(exc.value)
    assert "/etc/cdi/x.yaml" in str(exc.value)


def test_parse_error_names_the_json_path() -> None:
    text = '{"devices": [{"name": "a", "containerEdits": {"mounts": [{"hostPath": 5}]}}]}'
    with pytest.raises(cdi.SpecError) as exc:
        cdi.parse_spec(text)
    assert exc.value.field == "devices[0].containerEdits.mounts[0].hostPath"


def test_json_null_is_absent() -> None:
    s = cdi.parse_spec('{"cdiVersion": "0.3.0", "kind": "a/b", "containerEdits": null,'
                       ' "devices": [{"name": "a", "containerEdits": {"env": ["A=1"],'
                       ' "mounts": null}}]}')
    assert s.container_edits is None
    assert s.devices[0].container_edits.mounts is None


def test_yaml_scalars_become_strings_for_string_fields() -> None:
    s = cdi.parse_spec("cdiVersion: 0.5.0\nkind: v.com/c\ndevices:\n- name: 0\n"
                       "  containerEdits: {env: [A=1]}\n")
    assert s.devices[0].name == "0"
    cdi.validate_spec(s)
    s = cdi.parse_spec("cdiVersion: 1.0\nkind: v.com/c\n")
    assert s.cdi_version == "1"
    with pytest.raises(cdi.SpecError, match='invalid version "1"'):
        cdi.validate_version(s)


def test_yaml_octal_file_mode() -> None:
    s = cdi.parse_spec(
        "devices:\n- containerEdits:\n    deviceNodes: [{path: /x, fileMode: 0666}]\n"
    )
    assert s.devices[0].container_edits.device_nodes is not None
    assert s.devices[0].container_edits.device_nodes[0].file_mode == 0o666


def test_json_strings_are_not_coerced() -> None:
    with pytest.raises(cdi.SpecError, match="expected a string"):
        cdi.parse_spec('{"devices": [{"name": 0}]}', format="json")


def test_yaml_content_in_a_json_file_is_accepted_like_go() -> None:
    s = cdi.parse_spec("cdiVersion: 0.3.0\nkind: a/b\n", format="json")
    assert s.kind == "a/b"


def test_models_are_frozen_and_use_tuples() -> None:
    s = check(doc())
    with pytest.raises(AttributeError):
        s.kind = "x/y"  # type: ignore[misc]
    assert isinstance(s.devices, tuple)
    edits = cdi.ContainerEdits(env=["A=1"])
    assert edits.env == ("A=1",)


def test_round_trip_keeps_absent_and_empty_apart() -> None:
    d = doc(containerEdits={"env": [], "intelRdt": {"schemata": []}})
    s = cdi.Spec.from_dict(d)
    assert s.to_dict() == d
    assert cdi.parse_spec(s.to_json()) == s
    assert cdi.parse_spec(s.to_yaml()) == s
    assert s.to_yaml().startswith("---\n")


def test_load_spec_reads_and_validates(tmp_path: Path) -> None:
    p = tmp_path / "a.json"
    p.write_text(json.dumps(doc()))
    assert cdi.load_spec(p).kind == "vendor.com/device"
    p.write_text(json.dumps(doc(devices=[])))
    with pytest.raises(cdi.SpecError, match=r"invalid spec, no devices") as exc:
        cdi.load_spec(p)
    assert str(p) in str(exc.value)
    with pytest.raises(cdi.SpecError, match="failed to read CDI Spec"):
        cdi.load_spec(tmp_path / "missing.yaml")


# --- fixtures and the official JSON schema --------------------------------------------------

def test_good_fixtures_are_accepted(shared: Path) -> None:
    good = sorted((shared / "fixtures/cdi/schema/testdata/good").glob("*.json"))
    assert good
    for path in good:
        s = cdi.load_spec(path)
        assert s.devices


def test_bad_fixtures_are_rejected(shared: Path) -> None:
    bad = sorted((shared / "fixtures/cdi/schema/testdata/bad").glob("*.json"))
    assert bad
    for path in bad:
        with pytest.raises(cdi.SpecError):
            cdi.load_spec(path)


# --- versions (a) ----------------------------------------------------------------------------

@pytest.mark.parametrize(
    ("over", "devices", "version"),
    [
        ({}, None, "0.3.0"),
        ({"containerEdits": {"mounts": [{"hostPath": "/a", "containerPath": "/b",
                                         "type": "bind"}]}}, None, "0.4.0"),
        ({}, [dev(mounts=[{"hostPath": "/a", "containerPath": "/b", "type": "bind"}])], "0.4.0"),
        ({}, [dev(deviceNodes=[{"path": "/dev/a", "hostPath": "/dev/a"}])], "0.5.0"),
        ({}, [dev("0")], "0.5.0"),
        ({"annotations": {"a": "b"}}, None, "0.6.0"),
        ({"annotations": {}}, None, "0.3.0"),
        ({}, [{"name": "d", "annotations": {"x": "y"}, "containerEdits": {"env": ["A=1"]}}],
         "0.6.0"),
        ({"kind": "vendor.com/class.sub"}, None, "0.6.0"),
        ({"kind": "vendor.com/class"}, None, "0.3.0"),
        ({}, [dev(intelRdt={})], "0.7.0"),
        ({}, [dev(additionalGids=[0])], "0.7.0"),
        ({}, [dev(additionalGids=[])], "0.3.0"),
        ({}, [dev(netDevices=[{"hostInterfaceName": "eth1", "name": "net1"}])], "1.1.0"),
        ({}, [dev(intelRdt={"schemata": []})], "1.1.0"),
        ({}, [dev(intelRdt={"enableMonitoring": True})], "1.1.0"),
        ({}, [dev(intelRdt={"enableMonitoring": False})], "0.7.0"),
        ({"annotations": {"a": "b"}, "containerEdits": {
            "netDevices": [{"hostInterfaceName": "e", "name": "n"}]}}, None, "1.1.0"),
    ],
)
def test_minimum_required_version(
    over: dict[str, Any], devices: list[dict[str, Any]] | None, version: str
) -> None:
    d = doc(**over)
    if devices is not None:
        d["devices"] = devices
    s = cdi.Spec.from_dict(d)
    assert cdi.minimum_required_version(s) == version
    cdi.validate_version(cdi.Spec.from_dict({**d, "cdiVersion": version}))
    cdi.validate_version(cdi.Spec.from_dict({**d, "cdiVersion": "v1.1.0"}))


@pytest.mark.parametrize("version", ["", "1.2.0", "1.1", "1.1.0-rc1", "not-a-version", "vv1.0.0"])
def test_unknown_versions(version: str) -> None:
    with pytest.raises(cdi.SpecError, match=f'invalid version "{version}"'):
        cdi.validate_version(cdi.Spec.from_dict(doc(cdiVersion=version)))


@pytest.mark.parametrize("version", ["0.1.0", "0.2.0", "v0.2.0"])
def test_pre_release_versions_are_too_old(version: str) -> None:
    with pytest.raises(cdi.SpecError, match=r"the spec version must be at least v0\.3\.0"):
        cdi.validate_version(cdi.Spec.from_dict(doc(cdiVersion=version)))


def test_declared_version_older_than_features() -> None:
    d = doc(cdiVersion="0.6.0", devices=[dev(additionalGids=[5])])
    invalid(d, "the spec version must be at least v0.7.0")
    check({**d, "cdiVersion": "1.1.0"})


def test_version_table() -> None:
    assert cdi.CURRENT_VERSION == "1.1.0"
    assert cdi.KNOWN_VERSIONS[0] == "1.1.0" and cdi.KNOWN_VERSIONS[-1] == "0.1.0"


# --- validation (b) --------------------------------------------------------------------------

@pytest.mark.parametrize(
    ("kind", "message"),
    [
        ("vendor.com", "invalid vendor. empty name"),
        ("/class", "invalid vendor. empty name"),
        ("vendor.com/", "invalid vendor. empty name"),
        ("1vendor.com/class", 'invalid vendor. "1vendor.com", should start with letter'),
        ("vendor.com/x/y", "invalid class. invalid character '/' in name \"x/y\""),
        ("vendor.com/1class", 'invalid class. "1class", should start with letter'),
        ("vendor.com/class-", 'invalid class. "class-", should end with a letter or digit'),
    ],
)
def test_kind_names(kind: str, message: str) -> None:
    err = invalid(doc(kind=kind, cdiVersion="1.1.0"), message)
    assert err.field == "kind"


def test_class_with_dot_needs_0_6_0() -> None:
    invalid(doc(kind="vendor.com/a.b"), "the spec version must be at least v0.6.0")
    check(doc(kind="vendor.com/a.b", cdiVersion="0.6.0"))
    check(doc(kind="a/b"))


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("", "invalid (empty) device name"),
        ("-a", 'invalid name "-a", should start with a letter or digit'),
        ("a b", "invalid character ' ' in device name \"a b\""),
        ("a.", 'invalid name "a.", should end with a letter or digit'),
    ],
)
def test_device_names(name: str, message: str) -> None:
    err = invalid(doc(devices=[dev(name)], cdiVersion="1.1.0"), message)
    assert f'failed add device "{name}"' in str(err)
    assert err.field == "devices[0].name"


def test_device_name_starting_with_digit_needs_0_5_0() -> None:
    invalid(doc(devices=[dev("0")]), "at least v0.5.0")
    check(doc(devices=[dev("0")], cdiVersion="0.5.0"))


@pytest.mark.parametrize("env", ["FOO=", "A=B=C", "a=", "_=x"])
def test_valid_env(env: str) -> None:
    check(doc(devices=[dev(env=[env])]))
    check(doc(containerEdits={"env": [env]}))


@pytest.mark.parametrize("env", ["FOO", "=foo", ""])
def test_invalid_env(env: str) -> None:
    err = invalid(doc(devices=[dev(env=["OK=1", env])]),
                  f'invalid device "dev0": invalid container edits: '
                  f'invalid environment variable "{env}"')
    assert err.field == "devices[0].containerEdits.env[1]"
    invalid(doc(containerEdits={"env": [env]}), f'invalid environment variable "{env}"')


def test_device_nodes() -> None:
    for t in ("", "b", "c", "u", "p"):
        check(doc(devices=[dev(deviceNodes=[{"path": "/dev/x", "type": t}])]))
    for perm in ("", "r", "rw", "rwm", "mrw", "rrw", "m", "none"):
        check(doc(devices=[dev(deviceNodes=[{"path": "/dev/x", "permissions": perm}])]))
    check(doc(devices=[dev(deviceNodes=[{"path": "relative"}])]))
    invalid(doc(devices=[dev(deviceNodes=[{"path": ""}])]), "invalid (empty) device path")
    invalid(doc(devices=[dev(deviceNodes=[{"major": 1}])]), "invalid (empty) device path")
    invalid(doc(devices=[dev(deviceNodes=[{"path": "/dev/x", "type": "x"}])]),
            'device "/dev/x": invalid type "x"')
    for perm in ("rwmx", "to land", "NONE", "R"):
        err = invalid(doc(devices=[dev(deviceNodes=[{"path": "/dev/x", "permissions": perm}])]),
                      f'device "/dev/x": invalid permissions "{perm}"')
        assert err.field == "devices[0].containerEdits.deviceNodes[0].permissions"


def test_mounts() -> None:
    check(doc(devices=[dev(mounts=[{"hostPath": "a", "containerPath": "b"}])]))
    invalid(doc(devices=[dev(mounts=[{"containerPath": "/b"}])]),
            "invalid mount, empty host path")
    invalid(doc(containerEdits={"mounts": [{"hostPath": "/a"}]}),
            "invalid mount, empty container path")


def test_hooks() -> None:
    for name in cdi.HOOK_NAMES:
        check(doc(devices=[dev(hooks=[{"hookName": name, "path": "/bin/h"}])]))
    check(doc(devices=[dev(hooks=[{"hookName": "poststop", "path": "rel", "timeout": 0}])]))
    invalid(doc(devices=[dev(hooks=[{"hookName": "PreStart", "path": "/h"}])]),
            'invalid hook name "PreStart"')
    invalid(doc(devices=[dev(hooks=[{"hookName": "poststart"}])]),
            'invalid hook "poststart" with empty path')
    invalid(doc(devices=[dev(hooks=[{"hookName": "poststart", "path": "/h", "env": ["X"]}])]),
            'invalid hook "poststart": invalid environment variable "X"')


def test_intel_rdt_clos_id() -> None:
    for clos in ("", "/", "gold", "a" * 4095):
        check(doc(cdiVersion="0.7.0", devices=[dev(intelRdt={"closID": clos})]))
    for clos in (".", "..", "a/b", "a\nb", "a" * 4096):
        invalid(doc(cdiVersion="0.7.0", devices=[dev(intelRdt={"closID": clos})]),
                "invalid ClosID")


def test_net_devices() -> None:
    ok = [{"hostInterfaceName": "eth1", "name": "net1"},
          {"hostInterfaceName": "eth2", "name": "net2"}]
    check(doc(cdiVersion="1.1.0", devices=[dev(netDevices=ok)]))
    # the same host interface in two devices is fine (no cross-device check)
    check(doc(cdiVersion="1.1.0", devices=[dev("a", netDevices=ok[:1]),
                                             dev("b", netDevices=ok[:1])]))
    cases = [
        ([{"name": "n"}], "empty HostInterfaceName"),
        ([{"hostInterfaceName": "e"}], "empty Name"),
        ([ok[0], {"hostInterfaceName": "eth1", "name": "x"}], 'duplicate HostInterfaceName "eth1"'),
        ([ok[0], {"hostInterfaceName": "x", "name": "net1"}], 'duplicate Name "net1"'),
    ]
    for nets, message in cases:
        invalid(doc(cdiVersion="1.1.0", devices=[dev(netDevices=nets)]),
                f"invalid linux net device, {message}")
        invalid(doc(cdiVersion="1.1.0", containerEdits={"netDevices": nets}), message)


def test_device_edits_must_not_be_empty() -> None:
    invalid(doc(devices=[{"name": "d"}]), "invalid device, empty device edits")
    invalid(doc(devices=[{"name": "d", "containerEdits": {}}],
                containerEdits={"env": ["A=1"]}), "invalid device, empty device edits")
    invalid(doc(devices=[dev(env=[], mounts=[])]), "invalid device, empty device edits")
    for edits in ({"additionalGids": [1]}, {"intelRdt": {}}):
        check(doc(cdiVersion="0.7.0", devices=[{"name": "d", "containerEdits": edits}]))
    # spec-level edits may be empty or absent
    check(doc(containerEdits={}))


def test_duplicate_device_names() -> None:
    err = invalid(doc(devices=[dev("a"), dev("b"), dev("a")]), 'invalid spec, multiple device "a"')
    assert err.field == "devices[2].name"


def test_no_devices() -> None:
    invalid(doc(devices=[]), "invalid spec, no devices")
    invalid({"cdiVersion": "0.3.0", "kind": "a/b"}, "invalid spec, no devices")


def test_first_failure_wins_in_reference_order() -> None:
    # bad version, bad kind and bad device: the version is reported
    invalid(doc(cdiVersion="9", kind="x", devices=[]), 'invalid version "9"')
    invalid(doc(kind="x", devices=[]), "invalid vendor")
    invalid(doc(containerEdits={"env": ["X"]}, devices=[]), "invalid environment variable")


def test_annotation_keys_are_not_validated_like_go() -> None:
    check(doc(cdiVersion="0.6.0", annotations={"Not A/Valid Key!": "x"}))


def test_spec_helpers() -> None:
    s = check(doc(kind="vendor.com/gpu"))
    assert (s.vendor, s.class_) == ("vendor.com", "gpu")
    assert s.get_device("dev0") is not None and s.get_device("nope") is None
    assert cspec.dump_spec(s, "x.json").startswith("{")
    assert cspec.dump_spec(s, "x.yaml").startswith("---")
