"""The examples (examples/*.py) and their tests (tests/examples/) use only public names: no
module or name starting with ``_`` is imported or reached through an attribute, and every
name imported from podkit is in its module's ``__all__`` (what the docs describe). The
examples' own behaviour is tested in tests/examples/ against the real parts."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
FILES = sorted([*(REPO / "examples").glob("*.py"), *(REPO / "tests" / "examples").glob("*.py")])


def _private(dotted: str) -> bool:
    return any(part.startswith("_") and not part.startswith("__") for part in dotted.split("."))


def private_uses(source: str, where: str = "<example>") -> list[str]:
    """What ``source`` reaches that is not public, each as ``line: what``."""
    found = []
    for node in ast.walk(ast.parse(source, filename=where)):
        if isinstance(node, ast.Import):
            found += [f"{node.lineno}: import {a.name}" for a in node.names if _private(a.name)]
        elif isinstance(node, ast.ImportFrom) and node.module != "__future__":
            module = node.module or ""
            for a in node.names:
                if _private(module) or a.name.startswith("_"):
                    found.append(f"{node.lineno}: from {module} import {a.name}")
                elif module.split(".")[0] == "podkit" and not _exported(module, a.name):
                    found.append(f"{node.lineno}: {module}.{a.name} is not in its __all__")
        elif isinstance(node, ast.Attribute) and _private(node.attr):
            found.append(f"{node.lineno}: .{node.attr}")
    return found


def _exported(module: str, name: str) -> bool:
    public = getattr(importlib.import_module(module), "__all__", None)
    return public is None or name in public


def test_there_are_examples() -> None:
    assert REPO / "examples" / "policy_cri.py" in FILES


@pytest.mark.parametrize("path", FILES, ids=[str(p.relative_to(REPO)) for p in FILES])
def test_examples_use_only_public_names(path: Path) -> None:
    assert private_uses(path.read_text(), str(path)) == []


def test_the_check_finds_private_names() -> None:
    source = "\n".join([
        "from podkit._files import atomic_write",
        "import podkit.cri.service._x",
        "from podkit.cri import _adapter",
        "from podkit.cri.service import core",
        "from podkit.sandbox import Sandbox",
        "from __future__ import annotations",
        "service._image_of('x')",
        "service.__class__",
    ])
    assert private_uses(source) == [
        "1: from podkit._files import atomic_write", "2: import podkit.cri.service._x",
        "3: from podkit.cri import _adapter",
        "4: podkit.cri.service.core is not in its __all__", "7: ._image_of"]
