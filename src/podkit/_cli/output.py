"""How every listing or showing command prints records: ``-o table|json|yaml`` and ``-q``.

A command builds plain records (dicts of JSON values: str, int, float, bool, None, lists and
dicts; snake_case keys, documented in docs/cli.md) and hands them to :func:`emit` with the
table's columns. JSON and YAML print the records as they are (the table is a view of the same
data, never the other way round); ``-q`` prints one ID per line::

    add_output_options(parser)                      # in register()
    emit(args, records, [Column("id", "POD ID", short_id), Column("name", "NAME")])
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TextIO

import attrs
import yaml

__all__ = ["FORMATS", "Column", "add_output_options", "cell", "emit", "render", "short_id"]

FORMATS = ("table", "json", "yaml")
"""The values of ``-o``/``--output``."""


def cell(value: Any) -> str:
    """A value as table text: ``None`` empty, lists comma-joined, mappings ``k=v`` joined."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, Mapping):
        return ",".join(f"{k}={cell(v)}" for k, v in value.items())
    if isinstance(value, list | tuple):
        return ",".join(cell(v) for v in value)
    return str(value)


def short_id(value: Any) -> str:
    """The first 12 characters of an ID (as ``docker ps`` and ``crictl`` print them)."""
    return str(value or "")[:12]


@attrs.frozen
class Column:
    """One table column: the record ``key`` it shows, its ``header``, and how a value prints."""

    key: str
    header: str
    text: Callable[[Any], str] = cell


def add_output_options(parser: argparse.ArgumentParser, *, default: str = "table",
                       quiet: bool = True) -> None:
    """Add ``-o/--output table|json|yaml`` and, unless ``quiet=False``, ``-q/--quiet``."""
    parser.add_argument("-o", "--output", choices=FORMATS, default=default,
                        help=f"output format (default {default})")
    if quiet:
        parser.add_argument("-q", "--quiet", action="store_true",
                            help="print only IDs, one per line")


def _table(records: Sequence[Mapping[str, Any]], columns: Sequence[Column]) -> str:
    rows = [[c.header for c in columns]]
    rows += [[c.text(r.get(c.key)) for c in columns] for r in records]
    widths = [max(len(row[i]) for row in rows) for i in range(len(columns))]
    return "".join("  ".join(v.ljust(w) for v, w in zip(row, widths, strict=True)).rstrip()
                   + "\n" for row in rows)


def render(fmt: str, data: Any, columns: Sequence[Column] = ()) -> str:
    """``data`` (a record or a list of them) as ``fmt`` text, ending in a newline."""
    if fmt == "json":
        return json.dumps(data, indent=2) + "\n"
    if fmt == "yaml":
        return str(yaml.safe_dump(data, sort_keys=False, default_flow_style=False))
    if fmt == "table":
        return _table([data] if isinstance(data, Mapping) else data, columns)
    raise ValueError(f"output format {fmt!r} is not one of {', '.join(FORMATS)}")


def emit(args: argparse.Namespace, records: Sequence[Mapping[str, Any]] | Mapping[str, Any],
         columns: Sequence[Column], *, id_key: str = "id", out: TextIO | None = None) -> None:
    """Print ``records`` as ``args.output`` (``table`` if absent), or only their ``id_key``
    values with ``args.quiet``. One mapping (an ``inspect`` of one thing) prints as a JSON or
    YAML object, a sequence as an array."""
    stream = out if out is not None else sys.stdout
    many = [records] if isinstance(records, Mapping) else list(records)
    if getattr(args, "quiet", False):
        stream.write("".join(f"{r.get(id_key, '')}\n" for r in many))
        return
    stream.write(render(getattr(args, "output", "table") or "table", records, columns))
