"""examples/ci_pods.py runs against real runc and conmon (issue 23); every example imports only
documented public names: a public module of docs/api.md and names in its ``__all__``."""

from __future__ import annotations

import ast
import importlib
import json
import subprocess
import sys
from pathlib import Path

import pytest

import _leaks
from api_surface import public_modules
from support import REPO, require_binary, require_isolated

pytestmark = pytest.mark.integration

EXAMPLES = sorted((REPO / "examples").glob("*.py"))
FACES = set(public_modules())
"""The public modules (docs/api.md's table)."""


def _private_uses(path: Path) -> list[str]:
    """Imports of ``podkit`` modules that are not a face, or of names not in its ``__all__``."""
    bad = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            bad += [a.name for a in node.names
                    if a.name.startswith("podkit") and a.name not in FACES]
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("podkit"):
            module = node.module or ""
            if module not in FACES:
                bad.append(module)
                continue
            public = set(getattr(importlib.import_module(module), "__all__", ()))
            for alias in node.names:
                sub = f"{module}.{alias.name}"
                if alias.name not in public and sub not in FACES:
                    bad.append(sub)
    return bad


def test_examples_exist_and_use_public_names_only() -> None:
    assert "ci_pods.py" in [p.name for p in EXAMPLES]
    assert {p.name: _private_uses(p) for p in EXAMPLES} == {p.name: [] for p in EXAMPLES}


def test_the_private_check_catches_private_names(tmp_path: Path) -> None:
    f = tmp_path / "x.py"
    f.write_text("import podkit.pods.steps\nfrom podkit._files import atomic_write\n"
                 "from podkit.sandbox import SandboxManager, _copy\nfrom podkit import image\n")
    assert _private_uses(f) == ["podkit.pods.steps", "podkit._files", "podkit.sandbox._copy"]


def _run(tmp_path: Path, *args: str) -> tuple[int, dict[str, object], str]:
    out = subprocess.run(
        [sys.executable, str(REPO / "examples" / "ci_pods.py"), "--root", str(tmp_path / "root"),
         "--state", str(tmp_path / "state"), "--bridge", "pkci0", *args],
        capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL)
    return out.returncode, json.loads(out.stdout), out.stderr


def test_ci_pods_runs_and_leaves_nothing(tmp_path: Path) -> None:
    require_isolated()
    for binary in ("runc", "conmon", "catatonit"):
        require_binary(binary)
    _leaks.register_runtime_root(tmp_path / "state" / "runc")
    _leaks.register_ipam_dir(tmp_path / "state" / "ipam")
    before = _leaks.snapshot()
    try:
        code, summary, err = _run(tmp_path)
        assert code == 0, (summary, err)
        assert summary["ok"] is True
        assert summary["checks"] == {"ready": True, "page": True, "running": True}
        assert summary["exec"] == {"exit_code": 0, "stdout": "hello from the CI pod\n"}
        assert [c["name"] for c in summary["containers"]] == ["web", "probe"]  # type: ignore[attr-defined]
        assert summary["logs"]["probe"] == "ready\n"  # type: ignore[index]
        first = summary["image"]
        # a second run: the same tree, the same image; the pause image made once
        code, summary, err = _run(tmp_path, "--expect", "another page\n")
        assert code == 1, (summary, err)  # a failed check: exit 1, all torn down
        assert summary["ok"] is False
        assert summary["checks"] == {"ready": True, "page": False, "running": True}
        assert summary["image"] == first
        names = sorted(p.name for p in (tmp_path / "root" / "image" / "images").iterdir())
        assert len(names) == 2  # the app image and the built-in pause
    finally:
        subprocess.run(["ip", "link", "del", "pkci0"], capture_output=True, check=False)
    assert list((tmp_path / "state" / "sandboxes").glob("*.json")) == []
    assert list((tmp_path / "state" / "containers").glob("*.json")) == []
    assert _leaks.leaked_since(before, kinds=("netns", "link", "mount")) == []


def test_ci_pods_says_why_it_could_not_run(tmp_path: Path) -> None:
    require_isolated()
    (tmp_path / "root").write_text("a file where the store should go")
    code, summary, _ = _run(tmp_path)
    assert code == 2 and summary["ok"] is False
    assert "root" in str(summary["error"])
