"""The layer rules of DESIGN.md, read from every module's imports (ast), so they cannot drift.

Layers, bottom to top: base < oci < mechanisms (cdi, cni, host, runtime, image) < pods < node (the
node config and its builders) < frontends (cri and kube, then cli, which may use both). An import
may only point down (or stay in its own part); mechanisms are independent of each other (they
share only the oci models and base); protobuf and grpc stay in the wire frontends (cri, cli); a
part never imports another part's ``_private`` module or name (base is everyone's foundation); and
the import graph has no circle. Every import counts for the layers; for circles every import
counts too: one that runs late (a circle dodged by a lazy import is still a circle) and one under
``if TYPE_CHECKING:`` (a circle that only types close is still two modules that need each
other).

``KNOWN`` lists violations the code still has (none since the pods layer became a package: the
test failed on the earlier code with a pods circle, an oci circle and five private imports). The
list may only shrink: a listed violation that is gone fails too, so the entry leaves with the fix.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"
PACKAGE = "podkit"

# part -> (layer rank, module prefixes). A module belongs to the part of its longest prefix.
PARTS: dict[str, tuple[int, tuple[str, ...]]] = {
    "base": (0, ("podkit.errors", "podkit._files", "podkit._lazy", "podkit._linux", "podkit._proc",
              "podkit._trash", "podkit.procfs", "podkit.cgroups", "podkit.idmap")),
    "oci": (1, ("podkit.oci",)),
    "cdi": (2, ("podkit.cdi",)),
    "cni": (2, ("podkit.cni",)),
    "host": (2, ("podkit.netns", "podkit.apparmor")),
    "runtime": (2, ("podkit.runtime",)),
    "image": (2, ("podkit.image",)),
    "pods": (3, ("podkit.sandbox", "podkit.container", "podkit.pods")),
    "node": (4, ("podkit.node",)),
    "cri": (5, ("podkit.cri",)),
    "kube": (5, ("podkit.kube",)),
    "cli": (6, ("podkit.cli", "podkit._cli")),
}
MECHANISM_RANK = 2
WIRE_LIBRARIES = ("google.protobuf", "grpc")
FRONTENDS = ("cri", "cli")

# Violations still present; a fix removes its entry.
KNOWN: frozenset[str] = frozenset()


def module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def modules() -> dict[str, Path]:
    return {module_name(p): p for p in sorted((SRC / PACKAGE).rglob("*.py"))}


def _resolve(importer: str, is_package: bool, level: int, target: str | None) -> str:
    """The absolute module name of a (possibly relative) ``from`` import."""
    if level == 0:
        return target or ""
    base = importer.split(".")
    if not is_package:
        base.pop()
    if level > 1:
        base = base[: len(base) - (level - 1)]
    return ".".join(base + ([target] if target else []))


def imports(
    name: str, path: Path, known: dict[str, Path]
) -> Iterator[tuple[str, str | None]]:
    """(imported module, imported name or None) for every import in the file, lazy and
    ``TYPE_CHECKING`` ones included."""
    tree = ast.parse(path.read_text(), filename=str(path))
    is_package = path.name == "__init__.py"
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, None
        elif isinstance(node, ast.ImportFrom):
            target = _resolve(name, is_package, node.level, node.module)
            for alias in node.names:
                sub = f"{target}.{alias.name}"
                if sub in known:  # ``from pkg import submodule`` imports the submodule
                    yield sub, None
                else:
                    yield target, alias.name


def part_of(module: str) -> str | None:
    best: tuple[int, str] | None = None
    for part, (_, prefixes) in PARTS.items():
        for prefix in prefixes:
            if (module == prefix or module.startswith(prefix + ".")) and (
                best is None or len(prefix) > best[0]
            ):
                best = (len(prefix), part)
    return best[1] if best else None


def _is_private(module: str, name: str | None) -> bool:
    inner = module.split(".")[1:]
    return any(p.startswith("_") and not p.startswith("__") for p in inner) or bool(
        name and name.startswith("_") and not name.startswith("__")
    )


def edge_violations(importer: str, module: str, name: str | None) -> Iterator[str]:
    """The rules one import breaks."""
    src = part_of(importer)
    if module.startswith(WIRE_LIBRARIES) and src not in FRONTENDS:
        yield f"wire: {importer} imports {module} below cri"
    dst = part_of(module)
    if src is None or dst is None or src == dst:
        return
    src_rank, dst_rank = PARTS[src][0], PARTS[dst][0]
    if dst_rank > src_rank:
        yield f"upward: {importer} ({src}) imports {module} ({dst})"
    elif src_rank == dst_rank == MECHANISM_RANK:
        yield f"sideways: {importer} ({src}) imports {module} ({dst})"
    if dst != "base" and _is_private(module, name):
        shown = f"{module}.{name}" if name and name.startswith("_") else module
        yield f"private: {importer} imports {shown}"


def graph(known: dict[str, Path]) -> dict[str, set[str]]:
    """Module -> the podkit modules it imports (package facades count as modules)."""
    edges: dict[str, set[str]] = {m: set() for m in known}
    for name, path in known.items():
        for module, _ in imports(name, path, known):
            if module in known and module != name:
                edges[name].add(module)
    return edges


def circles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan), each in a stable order."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(edges[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return found


def _circle_text(comp: list[str], edges: dict[str, set[str]]) -> str:
    """One cycle through the component, from its first module, as 'a -> b -> a'."""
    members = set(comp)
    path = [comp[0]]
    while True:
        nxt = sorted(w for w in edges[path[-1]] if w in members)
        if comp[0] in nxt and len(path) > 1:
            break
        step = next((w for w in nxt if w not in path), None)
        if step is None:
            break
        path.append(step)
    return "circle: " + " -> ".join([*path, comp[0]])


def violations() -> set[str]:
    known = modules()
    found: set[str] = set()
    for name, path in known.items():
        for module, imported in imports(name, path, known):
            found.update(edge_violations(name, module, imported))
    edges = graph(known)
    found.update(_circle_text(c, edges) for c in circles(edges))
    return found


def test_every_module_belongs_to_a_part() -> None:
    orphans = [m for m in modules() if m != PACKAGE and part_of(m) is None]
    assert orphans == [], f"modules in no layer (add them to PARTS and DESIGN.md): {orphans}"


def test_no_new_layering_violation() -> None:
    new = sorted(violations() - KNOWN)
    assert new == [], "imports that break the layer rules of DESIGN.md:\n" + "\n".join(new)


def test_known_violations_are_still_there() -> None:
    """A fixed violation leaves KNOWN with the fix, so the list only shrinks."""
    gone = sorted(KNOWN - violations())
    assert gone == [], "fixed; delete from KNOWN:\n" + "\n".join(gone)


def test_the_rules_catch_each_kind_of_violation() -> None:
    assert list(edge_violations("podkit.oci.spec", "podkit.runtime.runc", "Runc")) == [
        "upward: podkit.oci.spec (oci) imports podkit.runtime.runc (runtime)"
    ]
    assert list(edge_violations("podkit.cni.client", "podkit.cdi.cache", None)) == [
        "sideways: podkit.cni.client (cni) imports podkit.cdi.cache (cdi)"
    ]
    assert list(edge_violations("podkit.runtime.base", "google.protobuf.message", None)) == [
        "wire: podkit.runtime.base imports google.protobuf.message below cri"
    ]
    assert list(edge_violations("podkit.cli", "podkit.runtime.conmon", "_open_pidfd")) == [
        "private: podkit.cli imports podkit.runtime.conmon._open_pidfd"
    ]
    assert list(edge_violations("podkit.runtime.conmon", "podkit._files", "atomic_write")) == []
    assert list(edge_violations("podkit.cri.service", "podkit.sandbox", "SandboxManager")) == []
    edges = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert circles(edges) == [["a", "b", "c"]]
    assert _circle_text(["a", "b", "c"], edges) == "circle: a -> b -> c -> a"


def test_imports_sees_lazy_and_type_checking_imports(tmp_path: Path) -> None:
    mod = tmp_path / "m.py"
    mod.write_text(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from podkit.oci import Spec\n"
        "def f():\n    import podkit.cni\n"
    )
    found = set(imports("podkit.x.m", mod, {}))
    assert {("podkit.oci", "Spec"), ("podkit.cni", None)} <= found
