"""podkit cni ...: the cnitool work-alike (FakeExec-free: it runs pk-test through RawExec)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from podkit import cni
from podkit.cli import build_parser
from podkit.errors import PodkitError

PLUGINS = Path(__file__).resolve().parent / "plugins"


def _run(argv: list[str]) -> int:
    """Run ``podkit`` with ``argv``, letting a ``PodkitError`` through (``main`` prints it)."""
    args = build_parser().parse_args(argv)
    rc: int = args.func(args)
    return rc


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    shutil.copy(PLUGINS / "pk-test", bin_dir / "pk-test")
    conf_dir = tmp_path / "net.d"
    conf_dir.mkdir()
    (conf_dir / "10-pk.conflist").write_text(json.dumps({
        "cniVersion": "1.1.0", "name": "pk-cli",
        "plugins": [{"type": "pk-test", "ip": "10.88.240.2/24", "log": str(tmp_path / "log"),
                     "capabilities": {"portMappings": True}}]}))
    monkeypatch.setenv("NETCONFPATH", str(conf_dir))
    monkeypatch.setenv("CNI_PATH", str(bin_dir))
    monkeypatch.delenv("CNI_ARGS", raising=False)
    monkeypatch.delenv("CAP_ARGS", raising=False)
    return tmp_path


def test_add_check_del_status_gc_version(env: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cache = ["--cache-dir", str(env / "cache")]
    caps = '{"portMappings":[{"hostPort":8080,"containerPort":80,"protocol":"tcp"}]}'
    assert _run(["cni", "add", "pk-cli", "--netns", "/run/netns/x", "--id", "c1",
                 "--args", "IgnoreUnknown=1;A=b", "--cap-args", caps, *cache]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["ips"] == [{"address": "10.88.240.2/24", "interface": 0}]
    assert _run(["cni", "check", "pk-cli", "--netns", "/run/netns/x", "--id", "c1", *cache]) == 0
    assert _run(["cni", "status", "pk-cli", *cache]) == 0
    assert _run(["cni", "version", "pk-cli", *cache]) == 0
    info = json.loads(capsys.readouterr().out)
    assert "1.1.0" in info["plugins"]["pk-test"]["supportedVersions"]
    assert _run(["cni", "gc", "pk-cli", "--valid", "c1:eth0", *cache]) == 0
    assert _run(["cni", "del", "pk-cli", "--netns", "/run/netns/x", "--id", "c1", *cache]) == 0
    calls = [json.loads(x) for x in (env / "log").read_text().splitlines()]
    assert [c["command"] for c in calls] == ["ADD", "CHECK", "STATUS", "GC", "DEL"]
    add = calls[0]
    assert add["env"]["CNI_ARGS"] == "IgnoreUnknown=1;A=b"
    assert json.loads(add["stdin"])["runtimeConfig"]["portMappings"][0]["hostPort"] == 8080


def test_default_container_id_and_env_args(env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CNI_ARGS", "IgnoreUnknown=1")
    cache = ["--cache-dir", str(env / "cache")]
    assert _run(["cni", "add", "pk-cli", "--netns", "/run/netns/y", *cache]) == 0
    [att] = cni.CNI([], cache_dir=env / "cache").cached_attachments()
    assert att.container_id.startswith("cnitool-") and len(att.container_id) == 20
    assert att.cni_args == (("IgnoreUnknown", "1"),)


def test_errors_are_podkit_errors(env: Path) -> None:
    cache = ["--cache-dir", str(env / "cache")]
    with pytest.raises(cni.NetworkNotFoundError):
        _run(["cni", "add", "nope", "--netns", "/x", "--id", "c", *cache])
    with pytest.raises(PodkitError, match="--cap-args"):
        _run(["cni", "add", "pk-cli", "--netns", "/x", "--id", "c", "--cap-args", "[", *cache])
    with pytest.raises(PodkitError, match="KEY=VALUE"):
        _run(["cni", "add", "pk-cli", "--netns", "/x", "--id", "c", "--args", "novalue", *cache])
    with pytest.raises(PodkitError, match="CONTAINER_ID:IFNAME"):
        _run(["cni", "gc", "pk-cli", "--valid", "bad", *cache])


def test_ls(env: Path, monkeypatch: pytest.MonkeyPatch,
            capsys: pytest.CaptureFixture[str]) -> None:
    from podkit.cli import main

    assert main(["cni", "ls"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["NAME", "CNIVERSION", "PLUGINS", "FILE"]
    assert lines[1].split() == ["pk-cli", "1.1.0", "pk-test", str(env / "net.d/10-pk.conflist")]
    assert main(["cni", "ls", "-o", "json"]) == 0
    assert json.loads(capsys.readouterr().out) == [{
        "name": "pk-cli", "cni_version": "1.1.0", "plugins": ["pk-test"],
        "file": str(env / "net.d/10-pk.conflist"), "disable_check": False,
        "disable_gc": False}]
    assert main(["cni", "ls", "-q"]) == 0
    assert capsys.readouterr().out == "pk-cli\n"
    (env / "net.d/20-bad.conflist").write_text("{")
    assert main(["cni", "ls"]) == 2  # a config error: bad input, named
    err = capsys.readouterr().err
    assert "20-bad.conflist" in err and len(err.splitlines()) == 1
    monkeypatch.setenv("NETCONFPATH", str(env / "none"))
    assert main(["cni", "ls", "-o", "yaml"]) == 0
    assert capsys.readouterr().out == "[]\n"
