"""The Python examples in the README and docs/ parse, and every podkit name they import or use
through an imported podkit module exists, so a rename cannot silently break the guide."""

from __future__ import annotations

import ast
import importlib
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
_BLOCK = re.compile(r"^```python\n(.*?)^```", re.S | re.M)


def _blocks() -> list[tuple[str, str]]:
    found = []
    for page in PAGES:
        for i, m in enumerate(_BLOCK.finditer(page.read_text())):
            found.append((f"{page.relative_to(REPO)}#{i + 1}", m.group(1)))
    return found


BLOCKS = _blocks()


def _podkit_references(tree: ast.Module) -> list[tuple[str, str]]:
    """(module, attribute) pairs the example relies on: imported names and ``mod.attr`` uses."""
    refs: list[tuple[str, str]] = []
    aliases: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("podkit"):
            for a in node.names:
                refs.append((node.module, a.name))
                aliases[a.asname or a.name] = f"{node.module}.{a.name}"
        elif isinstance(node, ast.Import):
            for a in node.names:
                if a.name.startswith("podkit"):
                    aliases[a.asname or a.name.split(".")[0]] = (
                        a.name if a.asname else a.name.split(".")[0])
    for node in ast.walk(tree):
        if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
                and node.value.id in aliases):
            refs.append((aliases[node.value.id], node.attr))
    return refs


def test_the_guide_has_examples() -> None:
    assert len(BLOCKS) >= 20


@pytest.mark.parametrize(("where", "code"), BLOCKS, ids=[b[0] for b in BLOCKS])
def test_example_names_exist(where: str, code: str) -> None:
    tree = ast.parse(code, filename=where)
    missing = []
    for module, attr in _podkit_references(tree):
        try:
            target = importlib.import_module(module)
        except ModuleNotFoundError:  # ``from podkit import oci`` style: module is a package attr
            parent, _, child = module.rpartition(".")
            target = getattr(importlib.import_module(parent), child, None)
        if target is None or not hasattr(target, attr):
            try:
                importlib.import_module(f"{module}.{attr}")
            except ModuleNotFoundError:
                missing.append(f"{module}.{attr}")
    assert missing == [], f"{where} uses names podkit does not have: {missing}"
