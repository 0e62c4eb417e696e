"""``make docs`` (scripts/api_docs.py): pdoc builds the API reference of every package face
from the docstrings without a single warning (the build is strict: a warning fails it)."""

from __future__ import annotations

import sys
from pathlib import Path

from test_docstrings import faces

SCRIPTS = Path(__file__).resolve().parents[1] / "scripts"
sys.path.insert(0, str(SCRIPTS))

import api_docs  # noqa: E402


def test_the_api_reference_builds_without_warnings(tmp_path: Path) -> None:
    out = tmp_path / "docs"
    assert api_docs.build(out) == []
    pages = {str(p.relative_to(out).with_suffix("")).replace("/", ".")
             for p in out.rglob("*.html")}
    assert set(faces()) - {"podkit.pods"} <= pages
    assert not [p for p in pages if p.startswith(("podkit._", "podkit.pods"))]
    sandbox = (out / "podkit" / "sandbox.html").read_text()
    assert "SandboxManager" in sandbox and "run_sandbox" in sandbox
