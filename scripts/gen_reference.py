#!/usr/bin/env python3
"""Fill the field tables of the docs from the models (issue 23): run it after changing a model.

A page marks a generated region with ``<!-- fields:NAME -->`` ... ``<!-- /fields -->``; this
rewrites what is between the markers and nothing else:

- ``SandboxConfig``, ``ContainerConfig``: a table per attrs class (field, type, default, the
  field's attribute docstring in ``podkit.pods.config``), the class first, then every config
  class it holds, depth first; a class an earlier region of the page showed is not repeated;
  then the enums the tables name, with their values.
- ``NodeConfig``: every key of the node config (``podkit.node.reference_table()``: key,
  variable, default, the ``doc`` of its field).

``--check`` changes nothing and exits 1 when a page is out of date (``tests/test_reference.py``
does the same check).

    python scripts/gen_reference.py [--check]
"""

from __future__ import annotations

import argparse
import ast
import enum
import inspect
import itertools
import json
import re
import sys
from collections.abc import Callable, Iterator
from functools import cache
from pathlib import Path
from typing import Any

import attrs

ROOT = Path(__file__).resolve().parent.parent
PAGES = (ROOT / "docs" / "reference.md", ROOT / "docs" / "config.md")
REGION = re.compile(r"(<!-- fields:(\w+) -->\n)(.*?)(<!-- /fields -->)", re.S)
COMMAND = "python scripts/gen_reference.py"


class MissingDocError(Exception):
    """A model field has no docstring to put in its table."""


def _cell(text: str) -> str:
    """One table cell: one line, reST ````code```` as Markdown ``code``, pipes escaped."""
    return " ".join(text.split()).replace("``", "`").replace("|", "\\|")


@cache
def _source_fields(cls: type) -> dict[str, tuple[str, str | None]]:
    """Each annotated field of ``cls`` as written: its annotation (source text, whatever
    ``attrs.resolve_types`` did to the class since) and its attribute docstring, if any."""
    source = Path(inspect.getsourcefile(cls) or "")
    for node in ast.walk(ast.parse(source.read_text())):
        if isinstance(node, ast.ClassDef) and node.name == cls.__name__:
            found: dict[str, tuple[str, str | None]] = {}
            for st, nxt in itertools.pairwise([*node.body, ast.Pass()]):
                if isinstance(st, ast.AnnAssign) and isinstance(st.target, ast.Name):
                    doc = (nxt.value.value if isinstance(nxt, ast.Expr)
                           and isinstance(nxt.value, ast.Constant)
                           and isinstance(nxt.value.value, str) else None)
                    found[st.target.id] = (ast.unparse(st.annotation), doc)
            return found
    raise LookupError(f"class {cls.__name__} not found in {source}")


def _names_in(annotation: str, namespace: dict[str, Any]) -> Iterator[Any]:
    """The classes and enums of ``namespace`` an annotation string names, in order."""
    for word in re.findall(r"[A-Za-z_]\w*", annotation):
        value = namespace.get(word)
        if inspect.isclass(value) and (attrs.has(value) or issubclass(value, enum.Enum)):
            yield value


def _default(field: Any) -> str:
    default = field.default
    if default is attrs.NOTHING:
        return "required"
    if isinstance(default, attrs.Factory):  # type: ignore[arg-type]
        made = default.factory
        return "`{}`" if made is dict else f"`{made.__name__}()`"
    if isinstance(default, enum.Enum):
        return f"`{type(default).__name__}.{default.name}`"
    if isinstance(default, str):
        return f"`{json.dumps(default)}`"
    return f"`{default!r}`"


def class_table(cls: type) -> str:
    """The table of one attrs class: a row per field, in declaration order."""
    written = _source_fields(cls)
    rows = [f"### `{cls.__name__}`", "", _cell(inspect.getdoc(cls) or ""), "",
            "| field | type | default | what |", "|---|---|---|---|"]
    for f in attrs.fields(cls):
        annotation, doc = written.get(f.name, (str(f.type), None))
        if doc is None:
            raise MissingDocError(
                f"{cls.__module__}.{cls.__name__}.{f.name} has no docstring: write one on the "
                f"line after the field, then run {COMMAND}")
        rows.append(f"| `{f.name}` | `{_cell(annotation)}` | {_default(f)} | {_cell(doc)} |")
    return "\n".join(rows) + "\n"


def closure(root: type) -> list[type]:
    """``root`` and every attrs class and enum its fields name, depth first, each once."""
    found: list[type] = []

    def walk(cls: type) -> None:
        if cls in found:
            return
        found.append(cls)
        if attrs.has(cls):
            namespace = vars(sys.modules[cls.__module__])
            written = _source_fields(cls)
            for f in attrs.fields(cls):
                for named in _names_in(written.get(f.name, (str(f.type), None))[0], namespace):
                    walk(named)

    walk(root)
    return found


def enum_table(enums: list[type[enum.Enum]]) -> str:
    rows = ["| enum | values |", "|---|---|"]
    for e in enums:
        values = ", ".join(f"`{m.name}` ({m.value})" for m in e)
        rows.append(f"| `{e.__name__}` | {values} |")
    return "\n".join(rows) + "\n"


def model_region(root: type, shown: set[type]) -> str:
    """The tables of ``root``'s closure less the classes in ``shown`` (updated)."""
    classes = [c for c in closure(root) if c not in shown]
    shown.update(classes)
    parts = [class_table(c) for c in classes if attrs.has(c)]
    enums = [c for c in classes if issubclass(c, enum.Enum)]
    if enums:
        parts.append(enum_table(enums))
    return "\n".join(parts)


def _node_region(shown: set[type]) -> str:
    from podkit.node import reference_table
    return reference_table()


def _models() -> dict[str, Callable[[set[type]], str]]:
    from podkit.container import ContainerConfig
    from podkit.sandbox import SandboxConfig
    return {"SandboxConfig": lambda shown: model_region(SandboxConfig, shown),
            "ContainerConfig": lambda shown: model_region(ContainerConfig, shown),
            "NodeConfig": _node_region}


REGIONS = ("SandboxConfig", "ContainerConfig", "NodeConfig")


def render_page(text: str) -> str:
    """``text`` with every generated region made anew from the models."""
    models = _models()
    shown: set[type] = set()

    def fill(m: re.Match[str]) -> str:
        name = m.group(2)
        if name not in models:
            raise LookupError(f"<!-- fields:{name} -->: no such model (one of {REGIONS})")
        return m.group(1) + "\n" + models[name](shown) + "\n" + m.group(4)

    return REGION.sub(fill, text)


def regions(text: str) -> list[str]:
    """The model names of a page's generated regions, in order."""
    return [m.group(2) for m in REGION.finditer(text)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true",
                        help="change nothing; exit 1 when a page is out of date")
    args = parser.parse_args(argv)
    stale = []
    for page in PAGES:
        text = page.read_text()
        new = render_page(text)
        if new != text:
            stale.append(page.relative_to(ROOT))
            if not args.check:
                page.write_text(new)
    if args.check and stale:
        print(f"out of date: {', '.join(map(str, stale))}; run {COMMAND}", file=sys.stderr)
        return 1
    for page in stale:
        print(f"rewrote {page}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
