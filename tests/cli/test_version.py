"""``podkit --version`` prints ``podkit <version>`` from the installed distribution and exits 0,
without importing any command group."""

from __future__ import annotations

import importlib.metadata
import subprocess
import sys

import pytest

import podkit
from podkit import cli


def test_version_is_the_distributions() -> None:
    assert cli._version() == importlib.metadata.version("podkit") == podkit.__version__


def test_version_falls_back_to_the_package_attribute(monkeypatch: pytest.MonkeyPatch) -> None:
    def missing(name: str) -> str:
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(importlib.metadata, "version", missing)
    assert cli._version() == podkit.__version__


def test_main_prints_the_version(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["--version"]) == 0
    assert capsys.readouterr().out == f"podkit {cli._version()}\n"


def test_version_needs_no_command_group() -> None:
    assert cli._modules_for(["--version"]) == ()
    assert cli._modules_for(["--root", "/r", "--version"]) == ()
    assert cli._modules_for(["pod", "--version"]) == ("pod",)


def test_the_command_prints_the_version_alone() -> None:
    """As a process: the version on stdout, nothing on stderr, no command group imported."""
    code = ("import sys; from podkit.cli import main; rc = main(sys.argv[1:]); "
            "groups = sorted(m for m in sys.modules if m.startswith('podkit._cli.') "
            "and m.rsplit('.', 1)[1] in ('image', 'cdi', 'runtime', 'cni', 'pod', 'cri', "
            "'kube', 'config')); print(groups, file=sys.stderr) if groups else None; "
            "sys.exit(rc)")
    out = subprocess.run([sys.executable, "-c", code, "--version"], capture_output=True,
                         text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert (out.returncode, out.stdout, out.stderr) == (0, f"podkit {podkit.__version__}\n", "")
