"""Tests for podkit.oci.codec and the models: wire names, integer kinds, lossless round-trips,
and bad input rejected with the JSON path (and file) in the error."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import attrs
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from podkit import oci
from podkit.errors import InvalidArgumentError
from podkit.oci import features as ft
from podkit.oci import spec as sp
from podkit.oci.codec import structure, unstructure, wire_fields

from .helpers import EVERYTHING, model_objects, wire_docs

MODELS = [getattr(sp, n) for n in sp.__all__ if attrs.has(getattr(sp, n))] + [
    getattr(ft, n) for n in ft.__all__ if attrs.has(getattr(ft, n))
]



def _all_extras(obj: Any) -> list[dict[str, Any]]:
    """The non-empty ``extra`` dicts anywhere in a model tree."""
    found: list[dict[str, Any]] = [obj.extra] if obj.extra else []
    for f in wire_fields(type(obj)):
        value = getattr(obj, f.name)
        children = value if isinstance(value, list) else (
            list(value.values()) if isinstance(value, dict) else [value])
        for child in children:
            if attrs.has(type(child)):
                found += _all_extras(child)
    return found


def test_every_linux_field_is_modelled() -> None:
    spec = oci.Spec.from_dict(EVERYTHING)
    assert _all_extras(spec) == []  # no key of the inventory fell through to "extra"
    assert spec.to_dict() == EVERYTHING
    assert spec.process is not None and spec.process.io_priority is not None
    assert spec.process.io_priority.class_ == "IOPRIO_CLASS_BE"
    assert spec.linux is not None and spec.linux.resources is not None
    assert spec.linux.resources.block_io is not None
    assert spec.linux.resources.block_io.throttle_read_iops_device is not None
    assert spec.linux.time_offsets is not None
    assert spec.linux.time_offsets["boottime"] == oci.LinuxTimeOffset(secs=-5, nanosecs=7)


def test_intel_rdt_cmt_mbm_and_state_and_process_state_fields() -> None:
    rdt = {"enableCMT": True, "enableMBM": False}
    assert oci.LinuxIntelRdt(enable_cmt=True, enable_mbm=False).extra == {}
    assert unstructure(structure(rdt, oci.LinuxIntelRdt)) == rdt
    state = {"ociVersion": "1.3.0", "id": "c1", "status": "running", "pid": 42,
             "bundle": "/b", "annotations": {"a": "b"}}
    cps = {"ociVersion": "1.3.0", "fds": ["seccompFd"], "pid": 42, "metadata": "m",
           "state": state}
    loaded = structure(cps, oci.ContainerProcessState)
    assert loaded.state.pid == 42 and _all_extras(loaded) == []
    assert unstructure(loaded) == cps


# (class, attribute, wire name, integer kind); kinds from specs-go, bounded by the schema.
INT_FIELDS = [
    (oci.Box, "height", "height", "uint"),
    (oci.User, "uid", "uid", "uint32"),
    (oci.User, "umask", "umask", "uint32"),
    (oci.User, "additional_gids", "additionalGids", "uint32"),
    (oci.POSIXRlimit, "soft", "soft", "uint64"),
    (oci.Process, "oom_score_adj", "oomScoreAdj", "int"),
    (oci.Scheduler, "nice", "nice", "int32"),
    (oci.Scheduler, "runtime", "runtime", "uint64"),
    (oci.IOPriority, "priority", "priority", "int32"),
    (oci.Hook, "timeout", "timeout", "int"),
    (oci.LinuxIDMapping, "container_id", "containerID", "uint32"),
    (oci.LinuxIDMapping, "host_id", "hostID", "uint32"),
    (oci.LinuxTimeOffset, "secs", "secs", "int64"),
    (oci.LinuxTimeOffset, "nanosecs", "nanosecs", "uint32"),
    (oci.LinuxDevice, "major", "major", "int64"),
    (oci.LinuxDevice, "file_mode", "fileMode", "uint32"),
    (oci.LinuxDeviceCgroup, "minor", "minor", "int64"),
    (oci.LinuxMemory, "kernel_tcp", "kernelTCP", "int64"),
    (oci.LinuxMemory, "swappiness", "swappiness", "uint64"),
    (oci.LinuxCPU, "shares", "shares", "uint64"),
    (oci.LinuxCPU, "quota", "quota", "int64"),
    (oci.LinuxCPU, "idle", "idle", "int64"),
    (oci.LinuxPids, "limit", "limit", "int64"),
    (oci.LinuxBlockIO, "weight", "weight", "uint16"),
    (oci.LinuxWeightDevice, "leaf_weight", "leafWeight", "uint16"),
    (oci.LinuxThrottleDevice, "rate", "rate", "uint64"),
    (oci.LinuxHugepageLimit, "limit", "limit", "uint64"),
    (oci.LinuxNetwork, "class_id", "classID", "uint32"),
    (oci.LinuxInterfacePriority, "priority", "priority", "uint32"),
    (oci.LinuxRdma, "hca_handles", "hcaHandles", "uint32"),
    (oci.LinuxSeccomp, "default_errno_ret", "defaultErrnoRet", "uint32"),
    (oci.LinuxSyscall, "errno_ret", "errnoRet", "uint32"),
    (oci.LinuxSeccompArg, "index", "index", "uint32"),
    (oci.LinuxSeccompArg, "value_two", "valueTwo", "uint64"),
    (oci.State, "pid", "pid", "int"),
]


@pytest.mark.parametrize(("cls", "attr", "wire", "kind"), INT_FIELDS,
                         ids=[f"{c.__name__}.{a}" for c, a, _, _ in INT_FIELDS])
def test_integer_fields_have_the_spec_kind(cls: type, attr: str, wire: str, kind: str) -> None:
    (field,) = [f for f in wire_fields(cls) if f.name == attr]
    assert (field.wire, field.int_kind) == (wire, kind)


REQUIRED: dict[type, set[str]] = {
    oci.Box: {"height", "width"}, oci.POSIXRlimit: {"type", "soft", "hard"},
    oci.Scheduler: {"policy"}, oci.IOPriority: {"class"}, oci.Process: {"cwd"},
    oci.Root: {"path"}, oci.LinuxIDMapping: {"containerID", "hostID", "size"},
    oci.Mount: {"destination"}, oci.Hook: {"path"}, oci.LinuxNamespace: {"type"},
    oci.LinuxDevice: {"type", "path"}, oci.LinuxDeviceCgroup: {"allow"},
    oci.LinuxWeightDevice: {"major", "minor"}, oci.LinuxThrottleDevice: {"major", "minor", "rate"},
    oci.LinuxHugepageLimit: {"pageSize", "limit"}, oci.LinuxInterfacePriority: {"name", "priority"},
    oci.LinuxMemoryPolicy: {"mode"}, oci.LinuxSeccompArg: {"index", "value", "op"},
    oci.LinuxSyscall: {"names", "action"}, oci.LinuxSeccomp: {"defaultAction"},
    oci.Spec: {"ociVersion"}, oci.State: {"ociVersion", "id", "status", "bundle"},
    oci.ContainerProcessState: {"ociVersion", "pid", "state"},
    oci.Features: {"ociVersionMin", "ociVersionMax"},
}


@pytest.mark.parametrize("cls", MODELS, ids=lambda c: c.__name__)
def test_required_keys_match_the_spec(cls: type) -> None:
    assert {f.wire for f in wire_fields(cls) if f.required} == REQUIRED.get(cls, set())


# --- lossless round trips ---------------------------------------------------------------------


def test_absent_and_zero_are_different_and_both_survive() -> None:
    zero = oci.Spec.from_json('{"ociVersion":"1.3.0","process":{"cwd":"/","oomScoreAdj":0,'
                              '"env":[],"terminal":false},"annotations":{}}')
    assert zero.process is not None
    assert (zero.process.oom_score_adj, zero.process.env, zero.process.terminal) == (0, [], False)
    assert zero.annotations == {}
    assert zero.to_dict()["process"] == {"cwd": "/", "oomScoreAdj": 0, "env": [], "terminal": False}
    absent = oci.Spec.from_json('{"ociVersion":"1.3.0","process":{"cwd":"/"}}')
    assert absent.process is not None and absent.process.oom_score_adj is None
    assert absent.to_dict() == {"ociVersion": "1.3.0", "process": {"cwd": "/"}}


def test_unknown_keys_other_platforms_and_nulls_round_trip() -> None:
    doc = {
        "ociVersion": "1.3.0", "windows": {"layerFolders": ["C:\\l"]}, "vm": {"kernel": {}},
        "x-vendor": [1, {"a": None}], "hostname": None,
        "linux": {"resources": {"memory": {"limit": 5, "x-future": True}, "pids": None},
                  "namespaces": [{"type": "pid", "flags": 3}]},
    }
    spec = oci.Spec.from_dict(doc)
    assert spec.hostname is None and spec.extra["hostname"] is None
    assert spec.linux is not None and spec.linux.namespaces is not None
    assert spec.linux.namespaces[0].extra == {"flags": 3}
    assert spec.to_dict() == doc
    assert json.loads(spec.to_json()) == doc
    spec.hostname = "set-later"  # a set field wins over a kept null
    assert spec.to_dict()["hostname"] == "set-later"


def test_loading_does_not_alias_or_mutate_the_input() -> None:
    doc = {"ociVersion": "1.3.0", "x-ext": {"list": [1, 2]}, "annotations": {"a": "b"}}
    before = copy.deepcopy(doc)
    spec = oci.Spec.from_dict(doc)
    spec.extra["x-ext"]["list"].append(3)
    assert spec.annotations is not None
    spec.annotations["c"] = "d"
    assert doc == before
    out = spec.to_dict()
    out["x-ext"]["list"].append(4)
    assert spec.extra["x-ext"]["list"] == [1, 2, 3]


def test_unknown_enum_values_are_errors_unless_not_strict(tmp_path: Path) -> None:
    doc = {"ociVersion": "1.9.0", "linux": {"namespaces": [{"type": "foo"}],
                                            "seccomp": {"defaultAction": "SCMP_ACT_FUTURE"}}}
    with pytest.raises(oci.SpecError) as exc:
        oci.Spec.from_dict(doc)
    assert exc.value.path == "$.linux.namespaces[0].type"
    assert "unknown namespace type 'foo'" in str(exc.value)
    assert "$.linux.seccomp.defaultAction: unknown seccomp action" in str(exc.value)
    path = tmp_path / "config.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(oci.SpecError, match=r"config\.json: "):
        oci.Spec.load(path)
    with pytest.raises(oci.SpecError, match="unknown namespace type"):
        oci.Spec.from_json(json.dumps(doc))
    spec = oci.Spec.from_dict(doc, strict=False)
    assert spec.to_dict() == doc
    assert oci.Spec.load(path, strict=False) == spec
    assert {p.path for p in oci.validate(spec)} >= {
        "$.linux.namespaces[0].type", "$.linux.seccomp.defaultAction"}


@pytest.mark.parametrize("cls", MODELS, ids=lambda c: c.__name__)
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_documents_round_trip_through_every_model(cls: type, data: st.DataObject) -> None:
    doc: dict[str, Any] = data.draw(wire_docs(cls))
    obj: Any = structure(doc, cls)
    assert unstructure(obj) == doc
    assert structure(unstructure(obj), cls) == obj


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(model_objects(oci.Spec))
def test_random_specs_survive_dict_and_json(spec: oci.Spec) -> None:
    assert oci.Spec.from_dict(spec.to_dict(), strict=False) == spec
    assert oci.Spec.from_json(spec.to_json(), strict=False) == spec
    assert oci.Spec.from_json(spec.to_json(indent=2), strict=False).to_dict() == spec.to_dict()
    assert spec.copy() == spec


@settings(max_examples=50, deadline=None)
@given(model_objects(oci.State), model_objects(oci.Features))
def test_random_state_and_features_survive_json(state: oci.State, feats: oci.Features) -> None:
    assert oci.State.from_json(state.to_json()) == state
    assert oci.Features.from_json(feats.to_json()) == feats


def test_dump_keeps_lone_surrogates_escaped(tmp_path: Path) -> None:
    spec = oci.Spec.from_json('{"ociVersion": "1.3.0", "hostname": "a\\udc00b"}')
    spec.dump(tmp_path / "config.json")
    assert oci.Spec.load(tmp_path / "config.json") == spec


def test_dump_and_load_a_file(tmp_path: Path) -> None:
    spec = oci.Spec.from_dict(EVERYTHING)
    path = tmp_path / "config.json"
    spec.dump(path)  # 0600 unless asked: a config.json holds the environment
    assert path.stat().st_mode & 0o777 == 0o600
    spec.dump(path, mode=0o644)
    assert path.stat().st_mode & 0o777 == 0o644
    assert oci.Spec.load(path) == spec
    assert json.loads(path.read_text()) == EVERYTHING


def test_copy_is_deep() -> None:
    spec = oci.Spec.from_dict(EVERYTHING)
    clone = spec.copy()
    assert clone.process is not None and clone.process.env is not None
    clone.process.env.append("B=2")
    assert spec.process is not None and spec.process.env == ["PATH=/bin"]
    spec.extra["x-ext"] = {"deep": [1]}
    mounts = copy.deepcopy(spec.mounts)
    clone = spec.copy()
    clone.extra["x-ext"]["deep"].append(2)
    assert clone.linux is not None and clone.linux.resources is not None
    assert clone.linux.resources.memory is not None
    clone.linux.resources.memory.limit = 1
    assert spec.extra["x-ext"] == {"deep": [1]}
    assert spec.linux is not None and spec.linux.resources is not None
    assert spec.linux.resources.memory is not None
    assert spec.linux.resources.memory.limit == 1 << 30
    assert mounts == spec.mounts and mounts is not spec.mounts
    assert mounts is not None and spec.mounts is not None
    assert mounts[1].uid_mappings is not spec.mounts[1].uid_mappings


# --- bad input --------------------------------------------------------------------------------

BAD = [
    ("{]", "$", "malformed JSON"),
    ('{"ociVersion": NaN}', "$", "NaN is not valid JSON"),
    ('{"ociVersion": Infinity}', "$", "Infinity is not valid JSON"),
    ("[]", "$", "expected an object (Spec), got array"),
    ("{}", "$", "missing required key 'ociVersion'"),
    ('{"ociVersion": null}', "$.ociVersion", "must not be null"),
    ('{"ociVersion": 1}', "$.ociVersion", "expected a string, got integer 1"),
    ('{"ociVersion": "1", "hostname": false}', "$.hostname", "expected a string, got boolean"),
    ('{"ociVersion": "1", "root": {}}', "$.root", "missing required key 'path'"),
    ('{"ociVersion": "1", "root": {"path": "r", "readonly": "yes"}}', "$.root.readonly",
     "expected a boolean"),
    ('{"ociVersion": "1", "process": {}}', "$.process", "missing required key 'cwd'"),
    ('{"ociVersion": "1", "process": {"cwd": "/", "user": {"uid": "0"}}}', "$.process.user.uid",
     "expected an integer (uint32), got string '0'"),
    ('{"ociVersion": "1", "process": {"cwd": "/", "user": {"uid": true}}}', "$.process.user.uid",
     "got boolean True"),
    ('{"ociVersion": "1", "process": {"cwd": "/", "user": {"uid": 1.0}}}', "$.process.user.uid",
     "got number 1.0"),
    ('{"ociVersion": "1", "process": {"cwd": "/", "user": {"uid": -1}}}', "$.process.user.uid",
     "-1 is out of range for uint32"),
    ('{"ociVersion": "1", "process": {"cwd": "/", "user": {"uid": 4294967296}}}',
     "$.process.user.uid", "4294967296 is out of range for uint32"),
    ('{"ociVersion": "1", "process": {"cwd": "/", "user": {"additionalGids": [1, -2]}}}',
     "$.process.user.additionalGids[1]", "out of range for uint32"),
    ('{"ociVersion": "1", "process": {"cwd": "/", "oomScoreAdj": 9223372036854775808}}',
     "$.process.oomScoreAdj", "out of range for int"),
    ('{"ociVersion": "1", "process": {"cwd": "/", "scheduler": {"policy": "SCHED_RR", '
     '"nice": 2147483648}}}', "$.process.scheduler.nice", "out of range for int32"),
    ('{"ociVersion": "1", "process": {"cwd": "/", "args": ["sh", 1]}}', "$.process.args[1]",
     "expected a string"),
    ('{"ociVersion": "1", "process": {"cwd": "/", "args": "sh"}}', "$.process.args",
     "expected an array"),
    ('{"ociVersion": "1", "process": {"cwd": "/", "rlimits": [{"type": "RLIMIT_CORE", '
     '"soft": 1}]}}', "$.process.rlimits[0]", "missing required key 'hard'"),
    ('{"ociVersion": "1", "annotations": {"org.example": 1}}', '$.annotations["org.example"]',
     "expected a string"),
    ('{"ociVersion": "1", "annotations": []}', "$.annotations", "expected an object, got array"),
    ('{"ociVersion": "1", "linux": []}', "$.linux", "expected an object (Linux)"),
    ('{"ociVersion": "1", "linux": {"namespaces": [{"type": "pid"}, {"path": "/x"}]}}',
     "$.linux.namespaces[1]", "missing required key 'type'"),
    ('{"ociVersion": "1", "linux": {"resources": {"memory": '
     '{"swappiness": 18446744073709551616}}}}',
     "$.linux.resources.memory.swappiness", "out of range for uint64"),
    ('{"ociVersion": "1", "linux": {"resources": {"blockIO": {"weight": 65536}}}}',
     "$.linux.resources.blockIO.weight", "out of range for uint16"),
    ('{"ociVersion": "1", "linux": {"seccomp": {"defaultAction": "SCMP_ACT_ALLOW", '
     '"syscalls": [{"names": ["read"], "action": "SCMP_ACT_ERRNO", "errnoRet": 4294967296}]}}}',
     "$.linux.seccomp.syscalls[0].errnoRet", "out of range for uint32"),
    ('{"ociVersion": "1", "linux": {"netDevices": {"eth0": {"name": 23}}}}',
     "$.linux.netDevices.eth0.name", "expected a string, got integer 23"),
    ('{"ociVersion": "1", "linux": {"timeOffsets": {"boot time": {"secs": "1"}}}}',
     '$.linux.timeOffsets["boot time"].secs', "expected an integer (int64)"),
]


@pytest.mark.parametrize(("text", "path", "message"), BAD, ids=[p + " " + m for _, p, m in BAD])
def test_bad_input_names_the_json_path(text: str, path: str, message: str) -> None:
    with pytest.raises(oci.SpecError) as info:
        oci.Spec.from_json(text)
    assert info.value.path == path
    assert message in info.value.message
    assert str(info.value).startswith(f"{path}: ")
    assert isinstance(info.value, InvalidArgumentError)


def test_non_utf8_bytes_are_malformed() -> None:
    with pytest.raises(oci.SpecError, match="malformed JSON"):
        oci.Spec.from_json(b'{"ociVersion": "\xff"}')


def test_errors_from_files_name_the_file(tmp_path: Path) -> None:
    path = tmp_path / "config.json"
    path.write_text('{"ociVersion": "1.3.0", "process": {"cwd": "/", "user": {"gid": -1}}}')
    with pytest.raises(oci.SpecError) as info:
        oci.Spec.load(path)
    assert info.value.source == str(path)
    assert str(info.value) == f"{path}: $.process.user.gid: -1 is out of range for uint32 " \
        "[0, 4294967295]"
    with pytest.raises(oci.SpecError, match="cannot read") as missing:
        oci.Spec.load(tmp_path / "absent.json")
    assert missing.value.source == str(tmp_path / "absent.json")


def test_bad_state_and_features_are_rejected() -> None:
    with pytest.raises(oci.SpecError, match="missing required key 'bundle'"):
        oci.State.from_json('{"ociVersion": "1", "id": "c", "status": "running"}')
    with pytest.raises(oci.SpecError) as info:
        oci.Features.from_json('{"ociVersionMin": "1.0.0", "ociVersionMax": "1.1.0", '
                               '"linux": {"seccomp": {"enabled": "yes"}}}')
    assert info.value.path == "$.linux.seccomp.enabled"
