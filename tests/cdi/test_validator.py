"""Spec validators: the process-wide hook and the cache's own, on load and on write_spec."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from podkit import cdi, oci


def spec_doc(kind: str, *names: str) -> dict[str, Any]:
    return {"cdiVersion": "0.3.0", "kind": kind,
            "devices": [{"name": n, "containerEdits": {"env": [f"{n.upper()}=1"]}}
                        for n in names]}


def write(path: Path, doc: dict[str, Any]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc))
    return path


def no_evil(spec: cdi.Spec) -> None:
    """Reject every spec of vendor evil.com."""
    if spec.vendor == "evil.com":
        raise cdi.SpecError(f"vendor {spec.vendor} is not allowed")


@pytest.fixture(autouse=True)
def _reset_global() -> Iterator[None]:
    yield
    cdi.set_spec_validator(None)


@pytest.fixture
def specs(tmp_path: Path) -> Path:
    d = tmp_path / "cdi"
    write(d / "good.json", spec_doc("good.com/gpu", "g0", "g1"))
    write(d / "evil.json", spec_doc("evil.com/gpu", "e0"))
    return d


def test_global_validator_rejects_one_file(specs: Path) -> None:
    cdi.set_spec_validator(no_evil)
    assert cdi.get_spec_validator() is no_evil
    c = cdi.Cache([specs], auto_refresh=False)
    assert c.list_devices() == ["good.com/gpu=g0", "good.com/gpu=g1"]
    evil = str(specs / "evil.json")
    assert list(c.errors) == [evil]
    [msg] = c.errors[evil]
    assert "rejected by spec validator no_evil: vendor evil.com is not allowed" in msg
    assert c.list_vendors() == ["good.com"]
    with pytest.raises(cdi.UnresolvableDevicesError):
        c.inject_devices(oci.Spec(), ["evil.com/gpu=e0"])
    spec = oci.Spec()
    c.inject_devices(spec, ["good.com/gpu=g0"])
    assert spec.process is not None and spec.process.env == ["G0=1"]


def test_global_validator_applies_at_next_refresh_or_query(specs: Path) -> None:
    manual = cdi.Cache([specs], auto_refresh=False)
    with cdi.Cache([specs], auto_refresh=True) as auto:
        assert "evil.com/gpu=e0" in manual.list_devices() and "evil.com/gpu=e0" in (
            auto.list_devices())
        cdi.set_spec_validator(no_evil)
        assert "evil.com/gpu=e0" not in auto.list_devices()  # auto: at the next query
        assert "evil.com/gpu=e0" in manual.list_devices()  # manual: only refresh() rescans
        manual.refresh()
        assert "evil.com/gpu=e0" not in manual.list_devices()
        cdi.set_spec_validator(None)
        assert "evil.com/gpu=e0" in auto.list_devices()
        assert auto.errors == {}


def test_cache_validator_and_setter(specs: Path) -> None:
    c = cdi.Cache([specs], auto_refresh=False, spec_validator=no_evil)
    assert c.spec_validator is no_evil
    assert c.list_devices() == ["good.com/gpu=g0", "good.com/gpu=g1"]
    assert list(c.errors) == [str(specs / "evil.json")]
    c.set_spec_validator(None)  # rescans at once
    assert "evil.com/gpu=e0" in c.list_devices() and c.errors == {}
    other = cdi.Cache([specs], auto_refresh=False)
    assert "evil.com/gpu=e0" in other.list_devices()  # a cache's validator is its own
    with pytest.raises(TypeError, match="callable"):
        c.set_spec_validator("nope")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="callable"):
        cdi.set_spec_validator(42)  # type: ignore[arg-type]


def test_both_validators_run_process_wide_first(specs: Path) -> None:
    calls: list[str] = []

    def first(spec: cdi.Spec) -> None:
        calls.append(f"global:{spec.vendor}")

    def second(spec: cdi.Spec) -> None:
        calls.append(f"cache:{spec.vendor}")
        if spec.vendor == "good.com":
            raise ValueError("good is not good enough")

    cdi.set_spec_validator(first)
    c = cdi.Cache([specs], auto_refresh=False, spec_validator=second)
    assert c.list_devices() == ["evil.com/gpu=e0"]
    assert calls == ["global:evil.com", "cache:evil.com", "global:good.com", "cache:good.com"]
    [msg] = c.errors[str(specs / "good.json")]
    assert "rejected by spec validator" in msg and "second" in msg
    assert "ValueError: good is not good enough" in msg


def test_write_spec_refused_writes_nothing(tmp_path: Path) -> None:
    run = tmp_path / "run"
    c = cdi.Cache([tmp_path / "etc", run], auto_refresh=False, spec_validator=no_evil)
    evil = cdi.Spec.from_dict(spec_doc("evil.com/gpu", "e0"))
    with pytest.raises(cdi.SpecError, match="Spec validation failed: rejected by spec "
                                            "validator no_evil") as exc:
        c.write_spec(evil, "evil.json")
    assert exc.value.source == str(run / "evil.json")
    assert not run.exists() or list(run.iterdir()) == []
    good = cdi.Spec.from_dict(spec_doc("good.com/gpu", "g0"))
    c.write_spec(good, "good.json")
    assert sorted(p.name for p in run.iterdir()) == ["good.json"]


def test_write_spec_refused_by_global_validator(tmp_path: Path) -> None:
    cdi.set_spec_validator(no_evil)
    c = cdi.Cache([tmp_path], auto_refresh=False)
    with pytest.raises(cdi.SpecError, match="not allowed"):
        c.write_spec(cdi.Spec.from_dict(spec_doc("evil.com/gpu", "e0")), "evil")
    assert list(tmp_path.iterdir()) == []


def test_load_spec_uses_the_global_validator(specs: Path) -> None:
    assert cdi.load_spec(specs / "evil.json").vendor == "evil.com"
    cdi.set_spec_validator(no_evil)
    with pytest.raises(cdi.SpecError, match="not allowed") as exc:
        cdi.load_spec(specs / "evil.json")
    assert exc.value.source == str(specs / "evil.json")


def test_auto_refresh_cache_reloads_after_validator_and_file_change(specs: Path) -> None:
    with cdi.Cache([specs], auto_refresh=True, spec_validator=no_evil) as c:
        assert "evil.com/gpu=e0" not in c.list_devices()
        write(specs / "more.json", spec_doc("evil.com/npu", "n0"))
        deadline = time.monotonic() + 5
        while str(specs / "more.json") not in c.errors and time.monotonic() < deadline:
            c.wait_for_change(0.2)
            c.list_devices()  # a query rescans; ``errors`` never does
        assert str(specs / "more.json") in c.errors
        assert c.list_vendors() == ["good.com"]
