"""The size and test-hygiene rules of docs/architecture.md, read from the tree (ast), so they
cannot drift: no hand-written module over 800 lines, no function over 80 lines without a
written reason below, and no test module importing from a ``conftest`` (shared helpers live in
plain modules such as ``tests/support.py``; conftest files hold fixtures).

Generated code (the protobuf and gRPC modules) is exempt. ``REASONS`` is the written reason for
each function allowed past the limit; an entry whose function is back under it fails too, so
the list only holds what is still true.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src" / "podkit"
MODULE_LINES = 800
FUNCTION_LINES = 80
GENERATED = ("api_pb2.py", "api_pb2_grpc.py")

# "path/relative/to/src/podkit.py:qualified.name" -> why it is one function.
REASONS: dict[str, str] = {}


def _sources() -> list[Path]:
    return [p for p in sorted(SRC.rglob("*.py")) if p.name not in GENERATED]


def _functions(tree: ast.AST, prefix: str = "") -> list[tuple[str, int]]:
    """(qualified name, line count) of every function and method, nested ones included."""
    out: list[tuple[str, int]] = []
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            name = prefix + node.name
            assert node.end_lineno is not None
            out.append((name, node.end_lineno - node.lineno + 1))
            out += _functions(node, name + ".")
        elif isinstance(node, ast.ClassDef):
            out += _functions(node, prefix + node.name + ".")
    return out


def long_functions() -> dict[str, int]:
    found: dict[str, int] = {}
    for path in _sources():
        rel = path.relative_to(SRC).as_posix()
        for name, lines in _functions(ast.parse(path.read_text(), str(path))):
            if lines > FUNCTION_LINES:
                found[f"{rel}:{name}"] = lines
    return found


def test_no_module_over_the_limit() -> None:
    big = {p.relative_to(SRC).as_posix(): n for p in _sources()
           if (n := len(p.read_text().splitlines())) > MODULE_LINES}
    assert big == {}, f"modules over {MODULE_LINES} lines: split them by job"


def test_no_function_over_the_limit_without_a_reason() -> None:
    found = long_functions()
    unexplained = {k: v for k, v in found.items() if k not in REASONS}
    assert unexplained == {}, f"functions over {FUNCTION_LINES} lines: split or give a reason"
    stale = sorted(set(REASONS) - set(found))
    assert stale == [], "REASONS entries for functions now within the limit: remove them"


def test_the_function_counter_sees_nested_and_methods() -> None:
    tree = ast.parse("class A:\n    def f(self):\n        def g():\n            pass\n")
    assert _functions(tree) == [("A.f", 3), ("A.f.g", 2)]


def _conftest_imports(path: Path) -> list[str]:
    bad = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        names = ([node.module or ""] if isinstance(node, ast.ImportFrom)
                 else [a.name for a in node.names] if isinstance(node, ast.Import) else [])
        bad += [n for n in names if n.split(".")[-1] == "conftest"]
    return bad


def test_no_test_module_imports_a_conftest() -> None:
    offenders = {p.relative_to(ROOT).as_posix(): found
                 for p in sorted((ROOT / "tests").rglob("*.py"))
                 if (found := _conftest_imports(p))}
    assert offenders == {}, "import shared test helpers from a plain module, not conftest"


def test_the_conftest_check_sees_both_import_forms(tmp_path: Path) -> None:
    f = tmp_path / "t.py"
    f.write_text("from cri.conftest import x\nimport conftest\nfrom support import y\n")
    assert _conftest_imports(f) == ["cri.conftest", "conftest"]
