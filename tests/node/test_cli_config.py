"""The node config on the command line: ``--config``, the variables and the options, in that
order of precedence; a bad key or value stops a command before it makes anything (exit 2)."""

from __future__ import annotations

from pathlib import Path

import pytest

from podkit.cli import main


@pytest.fixture(autouse=True)
def _no_config(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("PODKIT_CONFIG", "PODKIT_ROOT", "PODKIT_STATE", "PODKIT_NETWORK_NAME"):
        monkeypatch.delenv(name, raising=False)


def test_config_show_merges_file_environment_and_options(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "podkit.toml"
    f.write_text('root = "from-file"\n[network]\nname = "none"\n[runtime]\nname = "crun"\n')
    monkeypatch.setenv("PODKIT_NETWORK_NAME", "host")
    assert main(["--config", str(f), "config", "show", "--root", "/flag"]) == 0
    out = capsys.readouterr().out
    assert 'root = "/flag"' in out  # the option wins over the file
    assert '[network]\nname = "host"' in out  # the variable wins over the file
    assert '[runtime]\nname = "crun"' in out  # the file wins over the default
    monkeypatch.setenv("PODKIT_CONFIG", str(f))
    assert main(["config", "show"]) == 0
    assert f'root = "{tmp_path / "from-file"}"' in capsys.readouterr().out  # the file's dir


def test_a_bad_config_stops_a_command_before_anything_is_made(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    root = tmp_path / "root"
    pod = tmp_path / "pod.yaml"
    pod.write_text("sandbox: {metadata: {name: p}}\n")
    f = tmp_path / "podkit.toml"
    f.write_text(f'root = "{root}"\n[cgroups]\ndrivr = "systemd"\n')
    assert main(["--config", str(f), "pod", "run", str(pod)]) == 2
    assert capsys.readouterr().err.strip() == (
        f"podkit: {f}:3: unknown key 'cgroups.drivr' (did you mean 'cgroups.driver'?)")
    monkeypatch.setenv("PODKIT_CGROUPS_DRIVER", "v2")
    assert main(["pod", "ls", "--root", str(root)]) == 2
    assert "$PODKIT_CGROUPS_DRIVER: 'v2': want" in capsys.readouterr().err
    monkeypatch.delenv("PODKIT_CGROUPS_DRIVER")
    assert main(["pod", "run", str(pod), "--root", str(root), "--cni-conf-dir",
                 str(tmp_path / "nope")]) == 2
    assert "network.conf_dir" in capsys.readouterr().err
    assert main(["pod", "ls", "--config", str(tmp_path / "none.toml")]) == 2
    assert "none.toml: no such config file" in capsys.readouterr().err
    assert not root.exists()
