"""The official runtime-spec fixtures and schema against podkit's loader and validators.

Good fixtures load, round-trip (dict equality) and validate clean; bad ones are rejected by the
loader or by ``validate``. ``jsonschema`` (tests only) cross-checks that podkit never accepts what
the official schema rejects, on the fixtures and on hypothesis-generated documents.
"""

from __future__ import annotations

import functools
import json
import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings

from podkit import oci
from podkit.oci.codec import structure
from podkit.oci.validate import Problem, validate, validate_features, validate_state
from support import shared_dir

from .helpers import schema_validator, wire_docs

# Same location rule as conftest.shared_dir (PODKIT_SHARED overrides), read at collection time.
SHARED = Path(os.environ.get("PODKIT_SHARED", Path(__file__).resolve().parents[3] / "shared"))
FIXTURES = SHARED / "fixtures" / "oci" / "schema"
KINDS: dict[str, tuple[type, str, Callable[[Any], list[Problem]]]] = {
    "config": (oci.Spec, "config-schema.json", validate),
    "state": (oci.State, "state-schema.json", validate_state),
    "features": (oci.Features, "features-schema.json", validate_features),
}


def _fixtures(verdict: str) -> list[tuple[str, str]]:
    paths = FIXTURES.glob(f"test/*/{verdict}/*.json")
    found = sorted((p.parent.parent.name, p.name) for p in paths)
    return found or [("config", "missing-fixtures")]


def _path(shared: Path, kind: str, verdict: str, name: str) -> Path:
    path = shared / "fixtures" / "oci" / "schema" / "test" / kind / verdict / name
    assert path.is_file(), f"fixture {path} is missing"
    return path


@functools.cache
def _validator(kind: str) -> Any:
    return schema_validator(shared_dir(), KINDS[kind][1])


def test_all_fixtures_are_exercised(shared: Path) -> None:
    base = shared / "fixtures" / "oci" / "schema" / "test"
    names = {(p.parent.parent.name, p.parent.name, p.name) for p in base.glob("*/*/*.json")}
    assert len(names) == 19
    assert {(k, n) for k, v, n in names if v == "good"} == set(_fixtures("good"))
    assert {(k, n) for k, v, n in names if v == "bad"} == set(_fixtures("bad"))


@pytest.mark.parametrize(("kind", "name"), _fixtures("good"), ids="/".join)
def test_good_fixture_loads_round_trips_and_validates(
    shared: Path, kind: str, name: str
) -> None:
    path = _path(shared, kind, "good", name)
    doc = json.loads(path.read_text())
    assert list(_validator(kind).iter_errors(doc)) == []  # the schema agrees it is good
    cls, _, check = KINDS[kind]
    obj = structure(doc, cls, source=str(path))
    assert obj.to_dict() == doc
    assert json.loads(obj.to_json()) == doc
    assert check(obj) == []


@pytest.mark.parametrize(("kind", "name"), _fixtures("bad"), ids="/".join)
def test_bad_fixture_is_rejected(
    shared: Path, kind: str, name: str
) -> None:
    path = _path(shared, kind, "bad", name)
    cls, _, check = KINDS[kind]
    try:
        doc = json.loads(path.read_text())
    except ValueError:
        with pytest.raises(oci.SpecError, match="malformed JSON") as info:
            oci.Spec.load(path) if cls is oci.Spec else cls.from_json(path.read_bytes())
        assert info.value.path == "$"
        return
    assert list(_validator(kind).iter_errors(doc)) != []  # the schema agrees it is bad
    try:
        obj = structure(doc, cls, source=str(path))
    except oci.SpecError as e:
        assert e.path.startswith("$") and e.source == str(path)
        return
    problems = check(obj)
    assert problems, f"{kind}/{name} loaded and validated clean"
    assert all(p.path.startswith("$") for p in problems)


EXPECTED_BAD = {
    "freebsd-vnet-disable.json": ("validate", "$.freebsd.jail.vnet"),
    "linux-hugepage.json": ("validate", "$.linux.resources.hugepageLimits[0].pageSize"),
    "linux-netdevice.json": ("load", "$.linux.netDevices.eth0.name"),
    "linux-rdma.json": ("load", "$.linux.resources.rdma.mlx5_1.hcaHandles"),
    "missing-ociVersionMax.json": ("load", "$"),
}


@pytest.mark.parametrize("name", sorted(EXPECTED_BAD))
def test_bad_fixtures_fail_at_the_right_place(shared: Path, name: str) -> None:
    (path,) = (shared / "fixtures" / "oci" / "schema" / "test").glob(f"*/bad/{name}")
    cls = oci.Features if path.parent.parent.name == "features" else oci.Spec
    stage, where = EXPECTED_BAD[name]
    if stage == "load":
        with pytest.raises(oci.SpecError) as info:
            structure(json.loads(path.read_text()), cls)
        assert info.value.path == where
    else:
        spec = oci.Spec.load(path)
        assert [p.path for p in validate(spec)] == [where]


# --- cross-check with the official schema on generated documents -------------------------------

# Where podkit is knowingly stricter than (or different from) the schema; each rule is from the
# spec text (config.md / config-linux.md) or the Go types.
STRICTER = (
    "must be an absolute path",  # cwd, hooks, devices, masked paths, mount destinations < 1.2.0
    "REQUIRED",  # root, process.user.uid/gid, ioPriority.priority, personality.domain, major/minor
    "SemVer",  # ociVersion
    "unknown capability", "unknown rlimit", "duplicate", "soft limit",
    "needs", "need the", "need a",  # user/time/uts ns, SCMP_ACT_NOTIFY listenerPath, idmap options
    "given without a user namespace", "given together", "mutually exclusive",
    "unknown clock", "device cgroup type", "is not made of r, w, m", "is not in 0..",
    "cannot join a namespace of unknown type",
    "does not match",  # patterns anchored with \Z: the schema's "$" accepts a trailing newline
    "annotation keys must not be empty",
)


def _explained(problem: Problem) -> bool:
    if any(s in problem.message for s in STRICTER):
        return True
    # the schema describes only the boottime and monotonic offsets; podkit reports any other
    # clock (unknown clock) and still checks its values
    clock = re.match(r'\$\.linux\.timeOffsets\["(.*?)"\]', problem.path)
    if clock and clock.group(1) not in ("boottime", "monotonic"):
        return True
    # enableCMT/enableMBM (1.1.0-1.2.1) left the schema in 1.3.0; podkit still models them.
    return problem.path.endswith((".enableCMT", ".enableMBM"))


def _explained_features(problem: Problem) -> bool:
    if "SemVer" in problem.message:
        return True
    # features-linux.json lacks the 1.3.0 entries (intelRdt.schemata/monitoring, memoryPolicy),
    # so the schema lets a null through there.
    unschema = (".schemata", ".monitoring", ".memoryPolicy")
    return problem.message == "null is not allowed here" and (
        problem.path.endswith(unschema) or ".memoryPolicy." in problem.path)


def _schema_errors(validator: Any, doc: dict[str, Any]) -> list[str]:
    errors = []
    for e in validator.iter_errors(doc):
        where = list(e.absolute_path)
        # runtime-spec 1.3.0 made pids.limit optional; the schema file still requires it.
        pids_limit = where[-1:] == ["pids"] and "'limit' is a required" in e.message
        if pids_limit and doc.get("ociVersion") == "1.3.0":
            continue
        errors.append(f"{where}: {e.message}")
    return errors


@settings(max_examples=300, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(wire_docs(oci.Spec, schema_values=True))
def test_validate_agrees_with_the_schema_on_generated_specs(
    doc: dict[str, Any]
) -> None:
    schema_errors = _schema_errors(_validator("config"), doc)
    problems = validate(oci.Spec.from_dict(doc, strict=False))
    if schema_errors:
        assert problems, f"schema rejects but podkit accepts: {schema_errors}"
    else:
        unexplained = [p for p in problems if not _explained(p)]
        assert unexplained == []


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(wire_docs(oci.State, schema_values=True), wire_docs(oci.Features, schema_values=True))
def test_state_and_features_validation_agree_with_the_schema(
    state: dict[str, Any], feats: dict[str, Any]
) -> None:
    for kind, doc, check, cls in (("state", state, validate_state, oci.State),
                                  ("features", feats, validate_features, oci.Features)):
        schema_ok = not list(_validator(kind).iter_errors(doc))
        problems = check(structure(doc, cls))
        if not schema_ok:
            assert problems
        else:
            assert all(_explained_features(p) for p in problems), problems


def test_podkit_defaults_are_schema_valid() -> None:
    for spec in (oci.default_spec(), oci.runc_spec()):
        assert list(_validator("config").iter_errors(spec.to_dict())) == []
        assert validate(spec) == []


def test_schema_registry_resolves_cross_file_refs() -> None:
    bad = {"ociVersion": "1.3.0", "linux": {"namespaces": [{"type": "foo"}]}}
    (error,) = _validator("config").iter_errors(bad)
    assert list(error.absolute_path) == ["linux", "namespaces", 0]
    assert [p.path for p in validate(oci.Spec.from_dict(bad, strict=False))] == [
        "$", "$.linux.namespaces[0].type"]
