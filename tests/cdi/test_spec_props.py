"""Property tests: round-trips of valid specs, and podkit-written specs against the schema."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings

from podkit import cdi

from .strategies import specs

jsonschema = pytest.importorskip("jsonschema")
referencing = pytest.importorskip("referencing")


@pytest.fixture(scope="module")
def schema_validator(shared: Path) -> Any:
    base = shared / "fixtures/cdi/schema"
    schema = json.loads((base / "schema.json").read_text())
    defs = json.loads((base / "defs.json").read_text())
    from referencing.jsonschema import DRAFT7

    registry = referencing.Registry().with_resources([
        ("defs.json", DRAFT7.create_resource(defs)),
        ("schema.json", DRAFT7.create_resource(schema)),
    ])
    return jsonschema.Draft7Validator(schema, registry=registry)


def test_schema_fixtures_sanity(schema_validator: Any, shared: Path) -> None:
    good = shared / "fixtures/cdi/schema/testdata/good"
    for p in good.glob("*.json"):
        schema_validator.validate(json.loads(p.read_text()))
    assert not schema_validator.is_valid({})


@settings(max_examples=150, suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(spec=specs())
def test_valid_specs_round_trip(spec: cdi.Spec) -> None:
    cdi.validate_spec(spec)
    assert cdi.Spec.from_dict(spec.to_dict()) == spec
    assert cdi.parse_spec(spec.to_json(), format="json") == spec
    assert cdi.parse_spec(spec.to_yaml(), format="yaml") == spec
    assert cdi.parse_spec(spec.to_json(indent=2)) == spec


@settings(max_examples=60, suppress_health_check=[HealthCheck.too_slow,
                                                   HealthCheck.function_scoped_fixture],
          deadline=None)
@given(spec=specs())
def test_written_specs_match_the_official_schema(
    spec: cdi.Spec, schema_validator: Any, tmp_path_factory: pytest.TempPathFactory
) -> None:
    d = tmp_path_factory.mktemp("w")
    cache = cdi.Cache([d], auto_refresh=False)
    for name in ("s.json", "s.yaml"):
        path = cache.write_spec(spec, name)
        import yaml

        text = Path(path).read_text()
        data = json.loads(text) if name.endswith(".json") else yaml.safe_load(text)
        schema_validator.validate(data)
        assert cdi.load_spec(path) == spec
