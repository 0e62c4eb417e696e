"""The process-wide default cache (the Go library's package-level API)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from podkit import cdi, oci
from podkit.cdi import default


@pytest.fixture(autouse=True)
def fresh_default(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Each test starts without a default cache and closes the one it made."""
    monkeypatch.setattr(default, "_cache", None)
    yield
    if default._cache is not None:
        default._cache.close()


def _spec(dir: Path, device: str, env: str) -> None:
    dir.mkdir(parents=True, exist_ok=True)
    (dir / "vendor.json").write_text(json.dumps({
        "cdiVersion": "0.6.0", "kind": "vendor.example/dev",
        "devices": [{"name": device, "containerEdits": {"env": [env]}}]}))


def test_default_cache_is_made_once_over_the_default_dirs() -> None:
    c = cdi.default_cache()
    assert c is cdi.default_cache()
    assert c.spec_dirs == cdi.DEFAULT_SPEC_DIRS and c.auto_refresh


def test_configure_replaces_and_closes_the_old_cache(tmp_path: Path) -> None:
    _spec(tmp_path / "a", "one", "ONE=1")
    old = cdi.default_cache()
    new = cdi.configure([tmp_path / "a"], auto_refresh=False)
    assert cdi.default_cache() is new and new is not old
    assert not old.auto_refresh  # closed: it stopped watching
    assert new.spec_dirs == (str(tmp_path / "a"),) and not new.auto_refresh
    assert new.list_devices() == ["vendor.example/dev=one"]
    kept = cdi.configure(auto_refresh=True)  # unset options keep their values
    assert kept.spec_dirs == new.spec_dirs and kept.auto_refresh


def test_inject_and_refresh_through_the_default_cache(tmp_path: Path) -> None:
    cdi.configure([tmp_path / "d"], auto_refresh=False)
    spec = oci.default_spec()
    with pytest.raises(cdi.UnresolvableDevicesError, match=r"vendor\.example/dev=gpu"):
        cdi.inject_devices(spec, ["vendor.example/dev=gpu"])
    _spec(tmp_path / "d", "gpu", "GPU=0")
    assert cdi.refresh() == {}  # without auto-refresh only a refresh sees the new file
    assert cdi.inject_devices(spec, ["vendor.example/dev=gpu"]) == ["vendor.example/dev=gpu"]
    assert spec.process is not None and "GPU=0" in (spec.process.env or [])
