"""Every public name has a docstring (issue 23): the API reference (``make docs``) is built from
them, so a name without one is a hole in it.

The public names are the ``__all__`` of each package face ``podkit.<name>`` (the modules and
packages directly under ``src/podkit`` whose names do not start with ``_``; lazy names
resolved). A class, function or module needs its own ``__doc__`` (not one Python made up, such
as a dataclass's signature); a constant or type alias needs the string literal right after its
assignment, found by following the face's imports (and its lazy-name table) to the module that
assigns it::

    DEFAULT_DIR = "/run/netns"
    \"\"\"Where ``create`` pins namespaces unless told otherwise.\"\"\"
"""

from __future__ import annotations

import ast
import importlib
import inspect
from functools import cache
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"
PACKAGE = SRC / "podkit"


def faces() -> list[str]:
    """``podkit.<name>`` for every public module or package directly under ``src/podkit``."""
    found = []
    for path in sorted(PACKAGE.iterdir()):
        if path.name.startswith("_"):
            continue
        if path.suffix == ".py" or (path / "__init__.py").is_file():
            found.append(f"podkit.{path.stem}")
    return found


def _source(module: str) -> Path:
    path = PACKAGE.parent.joinpath(*module.split("."))
    return path / "__init__.py" if path.is_dir() else path.with_suffix(".py")


@cache
def _tree(module: str) -> ast.Module:
    path = _source(module)
    return ast.parse(path.read_text(), filename=str(path))


def _absolute(module: str, node: ast.ImportFrom) -> str:
    """The module an ``ImportFrom`` in ``module`` names, relative levels resolved."""
    if not node.level:
        return node.module or ""
    package = module if _source(module).name == "__init__.py" else module.rpartition(".")[0]
    for _ in range(node.level - 1):
        package = package.rpartition(".")[0]
    return f"{package}.{node.module}" if node.module else package


def _assigned(node: ast.stmt) -> list[str]:
    """The names a top-level statement assigns (``X = ...``, ``X: T = ...``)."""
    if isinstance(node, ast.Assign):
        return [t.id for t in node.targets if isinstance(t, ast.Name)]
    if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
        return [node.target.id]
    return []


def _lazy_table(module: str) -> dict[str, str]:
    """The ``{name: submodule}`` table a package hands ``lazy_names`` (``_LAZY``), if any."""
    return dict(vars(importlib.import_module(module)).get("_LAZY", {}))


def attribute_docstring(module: str, name: str, seen: frozenset[str] = frozenset()) -> str | None:
    """The string literal after the assignment of ``name``, looked up from ``module`` through
    its imports; ``None`` when the assignment has none (raises when no assignment is found)."""
    if module in seen:
        raise LookupError(f"import cycle looking for {name} from {module}")
    seen = seen | {module}
    tree = _tree(module)
    body = tree.body
    for i, node in enumerate(body):
        if name in _assigned(node):
            after = body[i + 1] if i + 1 < len(body) else None
            if (isinstance(after, ast.Expr) and isinstance(after.value, ast.Constant)
                    and isinstance(after.value.value, str)):
                return after.value.value
            return None
        if isinstance(node, ast.ImportFrom):
            source = _absolute(module, node)
            for alias in node.names:
                if (alias.asname or alias.name) == name or (
                        alias.name == "*"
                        and name in getattr(importlib.import_module(source), "__all__", ())):
                    return attribute_docstring(source, alias.name if alias.name != "*" else name,
                                               seen)
    lazy = _lazy_table(module)
    if name in lazy:
        return attribute_docstring(f"{module}.{lazy[name]}", name, seen)
    raise LookupError(f"{module} neither assigns nor imports {name}")


def _own_doc(obj: Any) -> str | None:
    """The docstring ``obj`` was written with (a class's own, not a made-up signature)."""
    if inspect.isclass(obj):
        doc = obj.__dict__.get("__doc__")
        if isinstance(doc, str) and doc.startswith(f"{obj.__name__}("):  # dataclass, NamedTuple
            return None
        return doc if isinstance(doc, str) else None
    doc = getattr(obj, "__doc__", None)
    return doc if isinstance(doc, str) else None


def docstring(face: ModuleType, name: str) -> str | None:
    """The docstring of the public ``name`` of ``face``."""
    obj = getattr(face, name)
    if inspect.isclass(obj) or inspect.isroutine(obj) or inspect.ismodule(obj):
        return _own_doc(obj)
    return attribute_docstring(face.__name__, name)


def public_names() -> list[tuple[str, str]]:
    return [(face, name) for face in faces()
            for name in getattr(importlib.import_module(face), "__all__", ())]


NAMES = public_names()


def test_the_faces_are_found() -> None:
    assert {"podkit.oci", "podkit.sandbox", "podkit.container", "podkit.node",
            "podkit.cri", "podkit.cli"} <= set(faces())
    assert len(NAMES) > 500


def test_every_face_has_a_docstring_and_names_its_public_names() -> None:
    """``podkit.pods`` is the one face without ``__all__``: ``podkit.sandbox`` and
    ``podkit.container`` are its public names."""
    modules = [importlib.import_module(f) for f in faces()]
    assert [m.__name__ for m in modules if not (m.__doc__ or "").strip()] == []
    assert [m.__name__ for m in modules if not hasattr(m, "__all__")] == ["podkit.pods"]


def test_every_public_name_has_a_docstring() -> None:
    missing = [f"{face}.{name}" for face, name in NAMES
               if not (docstring(importlib.import_module(face), name) or "").strip()]
    assert missing == [], (
        "public names without a docstring (a class or function: its own; a constant or "
        f"type alias: a string literal on the line after its assignment): {missing}")


@pytest.mark.parametrize(("source", "name", "doc"), [
    ('X = 1\n"""one"""\n', "X", "one"),
    ('X: int = 1\n"""one"""\n', "X", "one"),
    ('X = 1\nY = 2\n"""two"""\n', "X", None),
])
def test_attribute_docstrings_are_read(source: str, name: str, doc: str | None,
                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(f"{__name__}._tree", lambda module: ast.parse(source))
    assert attribute_docstring("podkit.fake", name) == doc
