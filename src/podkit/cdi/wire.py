"""The strict wire codec of the CDI models: JSON/YAML documents to models and back.

Strict like the Go library: unknown keys, duplicate keys and wrong types are errors naming the
JSON path; YAML scalars become strings where the Go YAML->JSON bridge makes them so.
"""

from __future__ import annotations

import datetime
import json
import re
from collections.abc import Callable
from typing import Any, TypeVar

import attrs

from podkit.cdi.errors import SpecError

__all__ = ["decode", "encode", "load_document"]

T = TypeVar("T")


# --- decoding ------------------------------------------------------------------------------

_INT_RANGES = {
    "int": (-(2**63), 2**63 - 1),
    "int64": (-(2**63), 2**63 - 1),
    "uint32": (0, 2**32 - 1),
}
_TABLES: dict[type, tuple[dict[str, tuple[str, Any]], list[tuple[str, str]]]] = {}
_FIRST_CHAR = re.compile(r"\s*(\S)")


def _table(cls: type) -> tuple[dict[str, tuple[str, Any]], list[tuple[str, str]]]:
    tab = _TABLES.get(cls)
    if tab is None:
        fields = attrs.fields(cls)
        by_wire = {f.metadata["wire"]: (f.name, f.metadata["kind"]) for f in fields}
        order = [(f.name, f.metadata["wire"]) for f in fields]
        tab = _TABLES[cls] = (by_wire, order)
    return tab


def _tname(v: Any) -> str:
    if v is None:
        return "null"
    return {bool: "boolean", int: "integer", float: "number", str: "string", list: "array",
            dict: "object"}.get(type(v), type(v).__name__)


def _yaml_str(v: Any) -> str | None:
    """YAML scalars the Go YAML->JSON bridge turns into strings for string fields."""
    if type(v) is bool:
        return "true" if v else "false"
    if type(v) is int:
        return str(v)
    if type(v) is float:
        if v.is_integer() and abs(v) < 1e21:
            return str(int(v))
        return repr(v)
    if isinstance(v, (datetime.date, datetime.datetime)):
        return v.isoformat()
    return None


Decoder = Callable[[Any], Any]


def _join(part: str, field: str | None) -> str:
    if not field:
        return part
    return f"{part}{field}" if field.startswith("[") else f"{part}.{field}"


def _at(e: SpecError, part: str) -> SpecError:
    """The same error one level further out: prefix ``part`` to its JSON path."""
    return SpecError(e.message, field=_join(part, e.field), source=e.source)


def _str_decoder(yaml_coerce: bool) -> Decoder:
    def dec(v: Any) -> str:
        if type(v) is str:
            return v
        if yaml_coerce:
            s = _yaml_str(v)
            if s is not None:
                return s
        raise SpecError(f"failed to parse CDI Spec: expected a string, got {_tname(v)} {v!r}")
    return dec


def _bool(v: Any) -> bool:
    if type(v) is bool:
        return v
    raise SpecError(f"failed to parse CDI Spec: expected a boolean, got {_tname(v)} {v!r}")


def _int_decoder(kind: str) -> Decoder:
    lo, hi = _INT_RANGES[kind]

    def dec(v: Any) -> Any:
        if type(v) is not int:
            if type(v) is float and v.is_integer():
                v = int(v)
            else:
                raise SpecError(f"failed to parse CDI Spec: expected an integer ({kind}), "
                                f"got {_tname(v)} {v!r}")
        if not lo <= v <= hi:
            raise SpecError(f"failed to parse CDI Spec: {v} out of range for {kind}")
        return v
    return dec


def _list_decoder(item: Decoder) -> Decoder:
    def dec(v: Any) -> tuple[Any, ...]:
        if type(v) is not list:
            raise SpecError(f"failed to parse CDI Spec: expected an array, got {_tname(v)} {v!r}")
        try:
            return tuple(map(item, v))
        except SpecError:
            for i, x in enumerate(v):
                try:
                    item(x)
                except SpecError as e:
                    raise _at(e, f"[{i}]") from None
            raise
    return dec


def _map_decoder(yaml_coerce: bool) -> Decoder:
    str_dec = _str_decoder(yaml_coerce)

    def dec(v: Any) -> dict[str, str]:
        if type(v) is not dict:
            raise SpecError(f"failed to parse CDI Spec: expected an object, got {_tname(v)}")
        out: dict[str, str] = {}
        for k, item in v.items():
            key = k if type(k) is str else (_yaml_str(k) if yaml_coerce else None)
            if key is None:
                raise SpecError(f"failed to parse CDI Spec: invalid key {k!r}")
            try:
                out[key] = str_dec(item)
            except SpecError as e:
                raise _at(e, key) from None
        return out
    return dec


_DECODERS: dict[tuple[Any, bool], Decoder] = {}


def _decoder(kind: Any, yaml_coerce: bool) -> Decoder:
    key = (kind, yaml_coerce)
    dec = _DECODERS.get(key)
    if dec is not None:
        return dec
    if kind == "str":
        dec = _str_decoder(yaml_coerce)
    elif kind == "bool":
        dec = _bool
    elif isinstance(kind, str):
        dec = _int_decoder(kind)
    elif isinstance(kind, tuple) and kind[0] == "list":
        dec = _list_decoder(_decoder(kind[1], yaml_coerce))
    elif isinstance(kind, tuple):
        dec = _map_decoder(yaml_coerce)
    else:
        dec = _class_decoder(kind, yaml_coerce)
    _DECODERS[key] = dec
    return dec


def _class_decoder(cls: type, yaml_coerce: bool) -> Decoder:
    """A decoder for one model class: strict keys, no ``__init__`` call (values are final).

    The function is generated once per class (an unrolled ``if key == ...`` chain), which
    keeps parsing within a small factor of plain ``json.loads``.
    """
    fields = attrs.fields(cls)
    ns: dict[str, Any] = {
        "cls": cls, "new": object.__new__, "setattr_": object.__setattr__,
        "SpecError": SpecError, "_at": _at, "_tname": _tname,
    }
    # placeholder first: nested classes may refer back to decoders not built yet
    _DECODERS[(cls, yaml_coerce)] = lambda v: ns["dec"](v)
    lines = [
        "def dec(data):",
        "    if type(data) is not dict:",
        "        raise SpecError('failed to parse CDI Spec: expected an object, got '"
        " + _tname(data))",
    ]
    for i, f in enumerate(fields):
        d = f.default
        if isinstance(d, attrs.Factory):  # type: ignore[arg-type]
            d = d.factory()  # sharing is fine: the models are immutable
        ns[f"D{i}"] = d
        ns[f"F{i}"] = _decoder(f.metadata["kind"], yaml_coerce)
        lines.append(f"    v{i} = D{i}")
    lines.append("    for key, value in data.items():")
    for i, f in enumerate(fields):
        wire = f.metadata["wire"]
        lines.append(f"        {'if' if i == 0 else 'elif'} key == {wire!r}:")
        if f.metadata["kind"] == "str":  # inline fast path for the most common field kind
            lines += [
                "            if type(value) is str:",
                f"                v{i} = value",
                "            elif value is not None:",
            ]
        else:
            lines.append("            if value is not None:")  # JSON null: absent (Go zero)
        lines += [
            "                try:",
            f"                    v{i} = F{i}(value)",
            "                except SpecError as e:",
            f"                    raise _at(e, {wire!r}) from None",
        ]
    lines += [
        "        else:",
        "            raise SpecError(f'failed to parse CDI Spec: unknown field \"{key}\"')",
        "    obj = new(cls)",
    ]
    lines += [f"    setattr_(obj, {f.name!r}, v{i})" for i, f in enumerate(fields)]
    lines.append("    return obj")
    exec(compile("\n".join(lines), f"<cdi decoder {cls.__name__}>", "exec"), ns)
    dec: Decoder = ns["dec"]
    return dec


def decode(cls: type[T], data: Any, path: str, *, yaml_coerce: bool) -> T:
    dec = _decoder(cls, yaml_coerce)
    try:
        result: T = dec(data)
    except SpecError as e:
        raise (_at(e, path) if path else e) from None
    return result


def encode(obj: Any) -> dict[str, Any]:
    _, order = _table(type(obj))
    out: dict[str, Any] = {}
    for name, wire in order:
        v = getattr(obj, name)
        if v is None:
            continue
        if attrs.has(type(v)):
            v = encode(v)
        elif isinstance(v, tuple):
            v = [encode(x) if attrs.has(type(x)) else x for x in v]
        elif isinstance(v, dict):
            v = dict(v)
        out[wire] = v
    return out


def _no_dup_pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out = dict(pairs)
    if len(out) != len(pairs):
        seen: set[str] = set()
        for k, _ in pairs:
            if k in seen:
                raise SpecError(f"failed to parse CDI Spec: duplicate key {k!r}")
            seen.add(k)
    return out


_JSON_DECODER = json.JSONDecoder(object_pairs_hook=_no_dup_pairs)


def load_document(data: str | bytes, fmt: str | None) -> tuple[Any, bool]:
    """Decode a JSON or YAML document; returns (value, came_from_yaml)."""
    text = data.decode("utf-8") if isinstance(data, bytes) else data
    first = _FIRST_CHAR.match(text)
    if fmt != "yaml" and first is not None and first.group(1) in ("{", "["):
        try:
            return _JSON_DECODER.decode(text), False
        except json.JSONDecodeError:
            pass  # not JSON after all: YAML is a superset, let the YAML parser say what's wrong
    from podkit.cdi import yamldoc  # PyYAML only when a document is YAML

    return yamldoc.load(text), True
