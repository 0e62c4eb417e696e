"""``podkit._cli.output``: one set of records printed as a table, JSON, YAML or IDs."""

from __future__ import annotations

import argparse
import io
import json
from typing import Any

import pytest
import yaml

from podkit._cli.output import FORMATS, Column, add_output_options, cell, emit, render, short_id

RECORDS: list[dict[str, Any]] = [
    {"id": "0123456789abcdef", "name": "web", "labels": {"app": "web", "tier": "1"},
     "ips": ["10.0.0.2", "fd00::2"], "exit_code": None, "ready": True},
    {"id": "fedcba9876543210", "name": "a-longer-name", "labels": {}, "ips": [],
     "exit_code": 0, "ready": False},
]
COLUMNS = [Column("id", "ID", short_id), Column("name", "NAME"), Column("labels", "LABELS"),
           Column("ips", "IPS"), Column("exit_code", "EXIT"), Column("ready", "READY")]


def _emit(argv: list[str], records: object, **kw: object) -> str:
    parser = argparse.ArgumentParser()
    add_output_options(parser)
    out = io.StringIO()
    emit(parser.parse_args(argv), records, COLUMNS, out=out, **kw)  # type: ignore[arg-type]
    return out.getvalue()


def test_cells() -> None:
    assert cell(None) == ""
    assert cell(True) == "true" and cell(False) == "false"
    assert cell(0) == "0"
    assert cell({"a": 1, "b": None}) == "a=1,b="
    assert cell(["x", 2, ("y",)]) == "x,2,y"
    assert short_id("0123456789abcdef") == "0123456789ab" and short_id(None) == ""


def test_table_is_aligned_under_a_header() -> None:
    assert _emit([], RECORDS) == (
        "ID            NAME           LABELS          IPS               EXIT  READY\n"
        "0123456789ab  web            app=web,tier=1  10.0.0.2,fd00::2        true\n"
        "fedcba987654  a-longer-name                                    0     false\n")


def test_table_of_nothing_is_the_header() -> None:
    assert _emit([], []) == "ID  NAME  LABELS  IPS  EXIT  READY\n"


def test_json_and_yaml_are_the_records_unchanged() -> None:
    assert json.loads(_emit(["-o", "json"], RECORDS)) == RECORDS
    assert yaml.safe_load(_emit(["-o", "yaml"], RECORDS)) == RECORDS
    assert json.loads(_emit(["--output", "json"], [])) == []
    # one record (an inspect) is an object, not an array
    assert json.loads(_emit(["-o", "json"], RECORDS[0])) == RECORDS[0]
    assert yaml.safe_load(_emit(["-o", "yaml"], RECORDS[0])) == RECORDS[0]
    # YAML keeps the record's key order (field order in docs/cli.md)
    assert _emit(["-o", "yaml"], RECORDS[0]).splitlines()[:2] == [
        "id: 0123456789abcdef", "name: web"]


def test_quiet_prints_full_ids_one_per_line() -> None:
    assert _emit(["-q"], RECORDS) == "0123456789abcdef\nfedcba9876543210\n"
    assert _emit(["-q", "-o", "json"], RECORDS) == "0123456789abcdef\nfedcba9876543210\n"
    assert _emit(["-q"], RECORDS[0]) == "0123456789abcdef\n"
    assert _emit(["-q"], RECORDS, id_key="name") == "web\na-longer-name\n"
    assert _emit(["-q"], []) == ""


def test_a_namespace_without_the_options_prints_a_table() -> None:
    out = io.StringIO()
    emit(argparse.Namespace(), RECORDS[:1], COLUMNS[:2], out=out)
    assert out.getvalue() == "ID            NAME\n0123456789ab  web\n"


def test_bad_format() -> None:
    parser = argparse.ArgumentParser()
    add_output_options(parser)
    with pytest.raises(SystemExit) as info:
        parser.parse_args(["-o", "xml"])
    assert info.value.code == 2
    with pytest.raises(ValueError, match="'xml' is not one of table, json, yaml"):
        render("xml", [])
    assert FORMATS == ("table", "json", "yaml")


def test_default_and_no_quiet() -> None:
    parser = argparse.ArgumentParser()
    add_output_options(parser, default="json", quiet=False)
    args = parser.parse_args([])
    assert args.output == "json" and not hasattr(args, "quiet")
    with pytest.raises(SystemExit):
        parser.parse_args(["-q"])
