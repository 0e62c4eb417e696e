"""``podkit cdi ...`` sub-commands."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from podkit import oci
from podkit.cli import main


@pytest.fixture
def specdir(tmp_path: Path) -> Path:
    d = tmp_path / "cdi"
    d.mkdir()
    (d / "a.yaml").write_text(
        "cdiVersion: 0.3.0\nkind: vendor.com/dev\ncontainerEdits:\n  env: [SPEC=1]\n"
        "devices:\n- name: zero\n  containerEdits:\n    env: [ZERO=1]\n"
    )
    return d


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    rc = main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


def test_list(specdir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, _ = run(capsys, "cdi", "--spec-dir", str(specdir), "list")
    assert (rc, out) == (0, "NAME\nvendor.com/dev=zero\n")
    rc, out, _ = run(capsys, "cdi", "--spec-dir", str(specdir), "list", "-q")
    assert (rc, out) == (0, "vendor.com/dev=zero\n")
    rc, out, _ = run(capsys, "cdi", "--spec-dir", str(specdir), "list", "-v")
    assert [line.split() for line in out.splitlines()] == [
        ["NAME", "SPEC", "PRIORITY"], ["vendor.com/dev=zero", str(specdir / "a.yaml"), "0"]]
    rc, out, _ = run(capsys, "cdi", "--spec-dir", str(specdir), "list", "-o", "json")
    data = json.loads(out)
    assert data[0]["name"] == "vendor.com/dev=zero"
    assert data[0]["device"] == {"name": "zero", "containerEdits": {"env": ["ZERO=1"]}}
    rc, out, _ = run(capsys, "cdi", "--spec-dir", str(specdir), "list", "-o", "yaml")
    assert yaml.safe_load(out) == data


def test_show(specdir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, _ = run(capsys, "cdi", "--spec-dir", str(specdir), "show", "vendor.com/dev=zero")
    data = json.loads(out)
    assert data["spec_container_edits"] == {"env": ["SPEC=1"]}
    assert data["cdi_version"] and data["device"]["name"] == "zero"
    assert data["spec"] == str(specdir / "a.yaml") and data["priority"] == 0
    rc, _, err = run(capsys, "cdi", "--spec-dir", str(specdir), "show", "vendor.com/dev=nope")
    assert rc == 3 and "unresolvable CDI devices vendor.com/dev=nope" in err  # not found
    rc, out, _ = run(capsys, "cdi", "--spec-dir", str(specdir), "show", "vendor.com/dev=zero",
                     "-o", "yaml")
    assert yaml.safe_load(out) == data


def test_validate_and_dirs(specdir: Path, tmp_path: Path,
                           capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, _ = run(capsys, "cdi", "--spec-dir", str(specdir), "validate")
    assert (rc, out) == (0, "ok\n")
    (specdir / "bad.json").write_text('{"cdiVersion": "0.3.0", "kind": "x"}')
    rc, out, _ = run(capsys, "cdi", "--spec-dir", str(specdir), "validate")
    assert rc == 1 and f"{specdir / 'bad.json'}: failed to load CDI Spec" in out
    rc, out, _ = run(capsys, "cdi", "validate", "-o", "json", str(specdir / "bad.json"))
    assert rc == 1 and "invalid vendor" in json.loads(out)[str(specdir / "bad.json")][0]
    rc, out, _ = run(capsys, "cdi", "--spec-dir", str(specdir), "--spec-dir",
                     str(tmp_path / "missing"), "dirs", "-o", "json")
    assert rc == 0
    assert [(r["priority"], r["path"]) for r in json.loads(out)] == [
        (0, str(specdir)), (1, str(tmp_path / "missing"))]
    rc, out, _ = run(capsys, "cdi", "--spec-dir", str(specdir), "dirs")
    assert out.splitlines()[0].split() == ["PRIORITY", "PATH", "ERRORS"]
    assert out.splitlines()[1].split()[:2] == ["0", str(specdir)]


def test_inject(specdir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cfg = tmp_path / "config.json"
    oci.Spec(process=oci.Process(env=["PATH=/bin"])).dump(cfg)
    rc, out, _ = run(capsys, "cdi", "--spec-dir", str(specdir), "inject", str(cfg),
                     "vendor.com/dev=zero")
    assert rc == 0
    assert oci.Spec.from_json(out).process.env == ["PATH=/bin", "SPEC=1", "ZERO=1"]  # type: ignore[union-attr]
    rc, _, err = run(capsys, "cdi", "--spec-dir", str(specdir), "inject", str(cfg), "a.com/b=c")
    assert rc == 3 and "unresolvable CDI devices a.com/b=c" in err
    rc, _, err = run(capsys, "cdi", "--spec-dir", str(specdir), "inject",
                     str(tmp_path / "missing.json"), "vendor.com/dev=zero")
    assert rc == 2 and "cannot read OCI spec" in err and "missing.json" in err


def test_watch_prints_changes(specdir: Path) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "podkit.cli", "cdi", "--spec-dir", str(specdir), "watch",
         "--count", "1"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    try:
        assert proc.stdout is not None
        first = proc.stdout.readline()
        assert first == "devices: vendor.com/dev=zero\n"
        (specdir / "a.yaml").unlink()
        assert proc.wait(timeout=60) == 0
        assert proc.stdout.read() == "devices: (none)\n"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_malformed_names_are_name_errors(specdir: Path, tmp_path: Path,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    rc, _, err = run(capsys, "cdi", "--spec-dir", str(specdir), "show", "vendor.com/dev")
    assert rc == 2 and 'unqualified device "vendor.com/dev", missing vendor' in err
    rc, _, err = run(capsys, "cdi", "--spec-dir", str(specdir), "show", "vendor.com/dev=nope")
    assert rc == 3 and "unresolvable CDI devices vendor.com/dev=nope" in err
    cfg = tmp_path / "config.json"
    cfg.write_text(oci.Spec().to_json())
    rc, _, err = run(capsys, "cdi", "--spec-dir", str(specdir), "inject", str(cfg),
                     "vendor.com/dev=zero", "gpu=0")
    assert rc == 2 and "invalid CDI device names" in err and '"gpu=0"' in err
    assert "unresolvable" not in err


def test_schema_option(specdir: Path, tmp_path: Path, shared: Path,
                       capsys: pytest.CaptureFixture[str]) -> None:
    neg = {"cdiVersion": "0.3.0", "kind": "neg.com/c", "devices": [
        {"name": "d", "containerEdits": {"hooks": [
            {"hookName": "prestart", "path": "/bin/true", "timeout": -1}]}}]}
    (specdir / "neg.json").write_text(json.dumps(neg))
    rc, out, _ = run(capsys, "cdi", "--spec-dir", str(specdir), "list", "-q")
    assert (rc, out) == (0, "neg.com/c=d\nvendor.com/dev=zero\n")
    rc, out, _ = run(capsys, "cdi", "--spec-dir", str(specdir), "--schema", "list", "-q")
    assert (rc, out) == (0, "vendor.com/dev=zero\n")
    rc, out, _ = run(capsys, "cdi", "--spec-dir", str(specdir), "--schema", "validate")
    assert rc == 1 and "neg.json" in out and "schema validation failed" in out
    own = shared / "fixtures/cdi/schema/schema.json"
    rc, out, _ = run(capsys, "cdi", "--schema-file", str(own), "validate",
                     str(specdir / "neg.json"), str(specdir / "a.yaml"))
    assert rc == 1 and "neg.json" in out and "a.yaml" not in out
