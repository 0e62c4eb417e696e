"""podkit.cdi.schema: the shipped official CDI schema against the upstream good/bad fixtures."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from podkit import cdi
from podkit.cdi import schema


def _testdata(shared: Path, kind: str) -> list[Path]:
    return sorted((shared / "fixtures/cdi/schema/testdata" / kind).glob("*.json"))


@pytest.fixture(autouse=True)
def _reset_global() -> Iterator[None]:
    yield
    cdi.set_spec_validator(None)


def test_shipped_schema_is_the_official_one(shared: Path) -> None:
    for name in ("schema.json", "defs.json"):
        shipped = Path(schema.__file__).parent / name
        assert shipped.read_bytes() == (shared / "fixtures/cdi/schema" / name).read_bytes()


def test_good_fixtures_pass(shared: Path) -> None:
    good = _testdata(shared, "good")
    assert [p.name for p in good] == ["minimal.json", "spec-example.json"]
    for path in good:
        schema.builtin().validate_file(path)
        schema.validate_spec_schema(cdi.load_spec(path))  # and as a spec validator


def test_bad_fixtures_fail(shared: Path) -> None:
    bad = _testdata(shared, "bad")
    assert [p.name for p in bad] == ["empty.json", "explicit-empty.json"]
    with pytest.raises(cdi.SpecError, match=r"\$: None is not of type 'object'") as exc:
        schema.builtin().validate_file(bad[0])
    assert exc.value.source == str(bad[0])
    with pytest.raises(cdi.SpecError) as exc:
        schema.builtin().validate_file(bad[1])
    for key in ("cdiVersion", "kind", "devices"):
        assert f"$: '{key}' is a required property" in str(exc.value)


def test_errors_name_the_json_path() -> None:
    doc = {"cdiVersion": "0.3.0", "kind": "v.com/c",
           "devices": [{"name": "d", "containerEdits": {"deviceNodes": [{"major": 1}]}}]}
    assert schema.builtin().errors(doc) == [
        "$.devices[0].containerEdits.deviceNodes[0]: 'path' is a required property"]
    assert schema.builtin().errors(json.loads((Path(schema.__file__).parent /
                                               "schema.json").read_text())) != []


def test_schema_as_process_wide_validator(shared: Path, tmp_path: Path) -> None:
    """The schema rejects what podkit's own checks let through (hook timeout < 0)."""
    d = tmp_path / "cdi"
    d.mkdir()
    example = shared / "fixtures/cdi/schema/testdata/good/spec-example.json"
    (d / "example.json").write_bytes(example.read_bytes())
    bad = {"cdiVersion": "0.3.0", "kind": "neg.com/c", "devices": [
        {"name": "d", "containerEdits": {"hooks": [
            {"hookName": "prestart", "path": "/bin/true", "timeout": -1}]}}]}
    (d / "neg.json").write_text(json.dumps(bad))
    assert "neg.com/c=d" in cdi.Cache([d], auto_refresh=False).list_devices()
    cdi.set_spec_validator(schema.validate_spec_schema)
    c = cdi.Cache([d], auto_refresh=False)
    assert "neg.com/c=d" not in c.list_devices()
    assert c.list_devices() == ["vendor.com/device=myDevice"]  # the good fixture's
    [msg] = c.errors[str(d / "neg.json")]
    assert "schema validation failed" in msg and "timeout" in msg
    with pytest.raises(cdi.SpecError, match="schema validation failed"):
        c.write_spec(cdi.Spec.from_dict(bad), "neg2.json")
    assert not (d / "neg2.json").exists()


def test_schema_from_file_resolves_refs_beside_it(tmp_path: Path) -> None:
    src = Path(schema.__file__).parent
    for name in ("schema.json", "defs.json"):
        (tmp_path / name).write_bytes((src / name).read_bytes())
    v = schema.SchemaValidator.from_file(tmp_path / "schema.json")
    assert v.errors({"cdiVersion": "1.0.0", "kind": "a/b", "devices": []}) == []
    assert "SchemaValidator" in repr(v)
    (tmp_path / "defs.json").unlink()
    with pytest.raises(cdi.SpecError, match=r'unresolvable reference "defs\.json#/definitions/'
                                            r'annotations": CDI schema .*cannot load "defs'):
        v2 = schema.SchemaValidator.from_file(tmp_path / "schema.json")
        v2.errors({"cdiVersion": "1.0.0", "kind": "a/b", "devices": [],
                   "annotations": {"a": "b"}})
    with pytest.raises(cdi.SpecError, match="cannot load CDI schema"):
        schema.SchemaValidator.from_file(tmp_path / "missing.json")
