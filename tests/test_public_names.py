"""Every name a module lists in ``__all__`` is importable from it (the public modules are
docs/api.md's; an internal module's ``__all__`` is what its package's face takes from it)."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"


def _declared_all(path: Path) -> list[str] | None:
    """The literal ``__all__`` of a module file, or None when it declares none."""
    for node in ast.parse(path.read_text(), filename=str(path)).body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets
        ):
            try:
                value = ast.literal_eval(node.value)
            except ValueError:  # computed (e.g. concatenated from submodules): import to read it
                return []
            return list(value)
    return None


def _modules() -> list[str]:
    found = []
    for path in sorted((SRC / "podkit").rglob("*.py")):
        if _declared_all(path) is None:
            continue
        parts = list(path.relative_to(SRC).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found.append(".".join(parts))
    return found


MODULES = _modules()


def test_the_public_modules_are_found() -> None:
    assert {"podkit.oci", "podkit.cdi", "podkit.cni", "podkit.runtime"} <= set(MODULES)


@pytest.mark.parametrize("name", MODULES)
def test_every_name_in_all_is_importable(name: str) -> None:
    module = importlib.import_module(name)
    exported = list(module.__all__)
    assert len(exported) == len(set(exported)), f"{name}.__all__ lists a name twice"
    missing = [n for n in exported if not hasattr(module, n)]
    assert missing == [], f"{name}.__all__ names what it does not define: {missing}"
