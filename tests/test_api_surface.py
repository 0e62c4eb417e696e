"""The public API is the modules docs/api.md lists (issue 23): they import, and what a user
reads (README.md, docs/, examples/, the public modules' docstrings) imports podkit only from
them and only their public names. Every other module is internal; tests, benchmarks and the
soak suite may import it, a guide may not."""

from __future__ import annotations

import ast
import importlib
import importlib.util
import re
from pathlib import Path

import pytest

from api_surface import REPO, public_modules, snapshot_script

PUBLIC = public_modules()
_FROM = re.compile(r"\bfrom\s+(podkit(?:\.\w+)*)\s+import\s+(\([^)]*\)|[\w \t,]*)")
_IMPORT = re.compile(r"(?:^|[\n;:]|>>>)\s*import\s+(podkit(?:\.\w+)*(?:\s*,\s*podkit(?:\.\w+)*)*)")


def _is_module(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except ModuleNotFoundError:
        return False


def _public_names(module: str) -> set[str]:
    names: list[str] = snapshot_script()._exported(importlib.import_module(module))
    return set(names)


def imports_of(text: str) -> list[tuple[str, str | None]]:
    """(module, name) for each ``from M import name`` and (module, None) for each
    ``import M`` in ``text`` (Python source, Markdown, a docstring)."""
    found: list[tuple[str, str | None]] = []
    for m in _FROM.finditer(text):
        names = m.group(2).strip().strip("()").replace("\\\n", " ")
        for part in names.split(","):
            name = part.strip().split(" as ")[0].strip()
            if name and name != "*":
                found.append((m.group(1), name))
    for m in _IMPORT.finditer(text):
        for part in m.group(1).split(","):
            found.append((part.strip(), None))
    return found


def violations(text: str) -> list[str]:
    """Imports in ``text`` of an internal module, or of a name a public module does not
    export."""
    bad = []
    for module, name in imports_of(text):
        if module not in PUBLIC:
            bad.append(module)
        elif name is not None:
            sub = f"{module}.{name}"
            if _is_module(sub):
                if sub not in PUBLIC:
                    bad.append(sub)
            elif name not in _public_names(module):
                bad.append(sub)
    return bad


def _readers_files() -> list[Path]:
    return [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md")),
            *sorted((REPO / "docs").rglob("*.sh")), *sorted((REPO / "examples").rglob("*.py"))]


def test_the_public_modules_are_listed_once_and_import() -> None:
    assert len(PUBLIC) == len(set(PUBLIC))
    assert {"podkit.oci", "podkit.cdi", "podkit.cni", "podkit.runtime", "podkit.sandbox",
            "podkit.container", "podkit.cri", "podkit.errors"} <= set(PUBLIC)
    for name in PUBLIC:
        importlib.import_module(name)


def test_no_private_module_is_public() -> None:
    assert [m for m in PUBLIC if any(p.startswith("_") for p in m.split("."))] == []


@pytest.mark.parametrize("path", _readers_files(), ids=lambda p: p.relative_to(REPO).as_posix())
def test_what_users_read_imports_only_public_modules(path: Path) -> None:
    assert violations(path.read_text()) == [], (
        f"{path.relative_to(REPO)} imports internal podkit modules or names: use the public "
        "modules of docs/api.md (or list a module there, with why it is public)")


@pytest.mark.parametrize("name", PUBLIC)
def test_public_docstrings_import_only_public_modules(name: str) -> None:
    module = importlib.import_module(name)
    assert violations(module.__doc__ or "") == []


def test_examples_parse_and_the_scan_sees_their_imports() -> None:
    for path in sorted((REPO / "examples").glob("*.py")):
        tree = ast.parse(path.read_text())
        modules = {n.module for n in ast.walk(tree)
                   if isinstance(n, ast.ImportFrom) and (n.module or "").startswith("podkit")}
        assert modules <= {m for m, _ in imports_of(path.read_text())}


def test_the_check_catches_internal_imports() -> None:
    text = ("import podkit.pods.steps\nfrom podkit.cri import convert\n"
            "from podkit.sandbox import (\n    SandboxManager,\n    _copy,\n)\n"
            ">>> from podkit import oci, image as img\n"
            "from podkit.runtime.conmon import Conmon\n")
    assert violations(text) == ["podkit.cri.convert", "podkit.sandbox._copy",
                                "podkit.runtime.conmon", "podkit.pods.steps"]
