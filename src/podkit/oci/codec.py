"""The OCI JSON codec: attrs models <-> JSON documents, lossless and path-aware.

One converter for the whole OCI wire format, driven by field metadata (``_fields``): camelCase
wire names, integer ranges, required keys. ``None`` is *absent*; an explicit JSON ``null`` and
unknown keys are kept in ``extra`` so that ``to_dict(from_dict(d)) == d`` for every valid ``d``.
Per-class encode/decode tables are built once, on first use.

What the loader rejects (``SpecError`` naming the JSON path, and the file when known; nothing
partial is returned): malformed JSON (including ``NaN``/``Infinity``), a wrong JSON type for a
modelled key, an integer outside its kind's range, a missing (or null) REQUIRED key.

What it deliberately keeps: strings are not checked against enums or patterns. An unknown
namespace type, seccomp action or capability name loads as the string it is, so a document from a
newer runtime-spec survives a round-trip unchanged; ``podkit.oci.validate`` reports such values.
"""

from __future__ import annotations

import copy
import json
import os
import re
import types
import typing
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import attrs

from podkit import _files
from podkit.errors import InvalidArgumentError
from podkit.oci.values import INT_RANGES

__all__ = [
    "SpecError",
    "WireField",
    "copy_json",
    "deep_copy",
    "dump",
    "dumps",
    "key_path",
    "load",
    "loads",
    "structure",
    "unstructure",
    "wire_fields",
]

T = TypeVar("T")


class SpecError(InvalidArgumentError):
    """A document that cannot be an OCI spec: names the JSON path and, if known, the file."""

    def __init__(self, path: str, message: str, source: str | None = None) -> None:
        self.path = path
        self.message = message
        self.source = source
        where = f"{source}: " if source else ""
        super().__init__(f"{where}{path}: {message}")


Decoder = Callable[[Any], Any]
Encoder = Callable[[Any], Any]


class _Fail(Exception):
    """A decoding error on its way up; containers add their key or index (innermost first)."""

    def __init__(self, message: str) -> None:
        self.message = message
        self.where: list[str | int] = []


def _camel(name: str) -> str:
    head, *rest = name.rstrip("_").split("_")
    return head + "".join(p[:1].upper() + p[1:] for p in rest)


_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


def key_path(path: str, key: str) -> str:
    """JSON path of ``key`` inside the object at ``path``: ``$.a.b`` or ``$.a["x.y"]``."""
    if _IDENT.match(key):
        return f"{path}.{key}"
    return f"{path}[{json.dumps(key, ensure_ascii=False)}]"


def _path_of(where: list[str | int]) -> str:
    path = "$"
    for part in reversed(where):
        path = f"{path}[{part}]" if isinstance(part, int) else key_path(path, part)
    return path


def _type_name(v: Any) -> str:
    if v is None:
        return "null"
    return {bool: "boolean", int: "integer", float: "number", str: "string", list: "array",
            dict: "object"}.get(type(v), type(v).__name__)


def copy_json(v: Any) -> Any:
    """A deep copy of a plain JSON value (faster than ``copy.deepcopy``)."""
    if type(v) is dict:
        return {k: copy_json(x) for k, x in v.items()}
    if type(v) is list:
        return [copy_json(x) for x in v]
    if isinstance(v, (dict, list)):
        return copy.deepcopy(v)
    return v


def _str(v: Any) -> str:
    if type(v) is not str:
        raise _Fail(f"expected a string, got {_type_name(v)} {v!r}")
    return v


def _bool(v: Any) -> bool:
    if type(v) is not bool:
        raise _Fail(f"expected a boolean, got {_type_name(v)} {v!r}")
    return v


def _int_decoder(kind: str) -> Decoder:
    lo, hi = INT_RANGES[kind]

    def dec(v: Any) -> int:
        if type(v) is not int:
            raise _Fail(f"expected an integer ({kind}), got {_type_name(v)} {v!r}")
        if not lo <= v <= hi:
            raise _Fail(f"{v} is out of range for {kind} [{lo}, {hi}]")
        return v

    return dec


def _list_decoder(item: Decoder) -> Decoder:
    if item is _str:  # the common case (args, env, options, paths): no call per item

        def dec_str(v: Any) -> list[Any]:
            if type(v) is not list:
                raise _Fail(f"expected an array, got {_type_name(v)} {v!r}")
            for x in v:
                if type(x) is not str:
                    break
            else:
                return list(v)
            return _list_slow(v, item)

        return dec_str

    def dec(v: Any) -> list[Any]:
        if type(v) is not list:
            raise _Fail(f"expected an array, got {_type_name(v)} {v!r}")
        return _list_slow(v, item)

    return dec


def _list_slow(v: list[Any], item: Decoder) -> list[Any]:
    out = []
    for i, x in enumerate(v):
        try:
            out.append(item(x))
        except _Fail as e:
            e.where.append(i)
            raise
    return out


def _dict_decoder(value: Decoder) -> Decoder:
    def dec(v: Any) -> dict[str, Any]:
        if type(v) is not dict:
            raise _Fail(f"expected an object, got {_type_name(v)} {v!r}")
        out = {}
        for k, x in v.items():
            try:
                out[k] = value(x)
            except _Fail as e:
                e.where.append(k)
                raise
        return out

    return dec


def _decoder_for(tp: Any, kind: str | None) -> Decoder:
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        (tp,) = args
        origin = typing.get_origin(tp)
    if tp is str:
        return _str
    if tp is bool:
        return _bool
    if tp is int:
        return _int_decoder(kind or "int64")
    if tp is Any:
        return copy_json
    if origin is list:
        (item,) = typing.get_args(tp)
        return _list_decoder(_decoder_for(item, kind))
    if origin is dict:
        _, value = typing.get_args(tp)
        return _dict_decoder(_decoder_for(value, kind))
    if attrs.has(tp):
        return lambda v: _structure_cls(v, tp)
    raise TypeError(f"podkit.oci.codec: no decoder for {tp!r}")


def _encoder_for(tp: Any) -> Encoder | None:
    """None means the value is already plain JSON (str/int/bool or lists/dicts of them)."""
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        (tp,) = [a for a in typing.get_args(tp) if a is not type(None)]
        origin = typing.get_origin(tp)
    if tp is Any:
        return copy_json
    if origin is list:
        item = _encoder_for(typing.get_args(tp)[0])
        if item is None:
            return list
        return lambda v: [item(x) for x in v]
    if origin is dict:
        value = _encoder_for(typing.get_args(tp)[1])
        if value is None:
            return dict
        return lambda v: {k: value(x) for k, x in v.items()}
    if attrs.has(tp):
        return unstructure
    return None


@attrs.frozen
class WireField:
    """How one model attribute appears on the wire (used by the codec and by ``validate``)."""

    name: str
    wire: str
    required: bool
    type: Any
    int_kind: str | None
    decode: Decoder = attrs.field(repr=False)
    encode: Encoder | None = attrs.field(repr=False)


@attrs.frozen
class _Table:
    fields: tuple[WireField, ...]
    by_wire: dict[str, WireField]
    required: tuple[WireField, ...]


_TABLES: dict[type, _Table] = {}


def _table(cls: type) -> _Table:
    table = _TABLES.get(cls)
    if table is None:
        hints = typing.get_type_hints(cls)
        fields = tuple(
            WireField(
                name=f.name,
                wire=f.metadata.get("wire") or _camel(f.name),
                required=bool(f.metadata.get("required")),
                type=hints[f.name],
                int_kind=f.metadata.get("int"),
                decode=_decoder_for(hints[f.name], f.metadata.get("int")),
                encode=_encoder_for(hints[f.name]),
            )
            for f in attrs.fields(cls)
            if not f.metadata.get("extra")
        )
        table = _Table(fields, {f.wire: f for f in fields}, tuple(f for f in fields if f.required))
        _TABLES[cls] = table
    return table


def wire_fields(cls: type) -> tuple[WireField, ...]:
    """The wire fields of an OCI model class, in declaration order (not ``extra``)."""
    return _table(cls).fields


def _structure_cls(data: Any, cls: type[T]) -> T:
    if type(data) is not dict:
        raise _Fail(f"expected an object ({cls.__name__}), got {_type_name(data)}")
    table = _table(cls)
    by_wire = table.by_wire
    kwargs: dict[str, Any] = {}
    extra: dict[str, Any] = {}
    for key, value in data.items():
        f = by_wire.get(key)
        if f is None:
            extra[key] = copy_json(value)
        elif value is None:
            extra[key] = None  # explicit null: absent for podkit, written back as null
        else:
            try:
                kwargs[f.name] = f.decode(value)
            except _Fail as e:
                e.where.append(key)
                raise
    for f in table.required:
        if f.name not in kwargs:
            if f.wire in extra:
                null = _Fail("required key must not be null")
                null.where.append(f.wire)
                raise null
            raise _Fail(f"missing required key {f.wire!r}")
    obj = cls(**kwargs)
    if extra:
        obj.extra = extra  # type: ignore[attr-defined]
    return obj


def structure(data: Any, cls: type[T], *, source: str | None = None) -> T:
    """Decode a JSON value into model ``cls``; raise ``SpecError`` with the JSON path.

    The input is not modified and nothing in the result aliases it.
    """
    try:
        return _structure_cls(data, cls)
    except _Fail as e:
        raise SpecError(_path_of(e.where), e.message, source) from None


def unstructure(obj: Any) -> dict[str, Any]:
    """Encode a model to plain JSON values; absent (``None``) fields are left out."""
    out: dict[str, Any] = {}
    for f in _table(type(obj)).fields:
        value = getattr(obj, f.name)
        if value is not None:
            out[f.wire] = value if f.encode is None else f.encode(value)
    extra: dict[str, Any] = obj.extra
    for key, value in extra.items():
        if key not in out:
            out[key] = copy_json(value)
    return out


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def loads(text: str | bytes, cls: type[T], *, source: str | None = None) -> T:
    """Parse JSON text into ``cls``; malformed JSON is a ``SpecError`` too."""
    try:
        data = json.loads(text, parse_constant=_reject_constant)
    except (ValueError, UnicodeDecodeError) as e:
        raise SpecError("$", f"malformed JSON: {e}", source) from None
    return structure(data, cls, source=source)


def load(path: str | os.PathLike[str], cls: type[T]) -> T:
    """Read and parse a JSON file into ``cls``."""
    p = Path(path)
    try:
        text = p.read_bytes()
    except OSError as e:
        raise SpecError("$", f"cannot read: {e.strerror}", str(p)) from None
    return loads(text, cls, source=str(p))


def dumps(obj: Any, *, indent: int | None = None) -> str:
    """Serialise a model to JSON text (keys in model order, extras last)."""
    return json.dumps(unstructure(obj), indent=indent, ensure_ascii=False)


def dump(obj: Any, path: str | os.PathLike[str], *, mode: int = 0o600,
         durable: bool = True) -> None:
    """Write a model as JSON (UTF-8) to ``path`` atomically (``_files.atomic_write``); 0600 by
    default: a ``config.json`` holds the process environment."""
    data = unstructure(obj)
    try:
        raw = (json.dumps(data, ensure_ascii=False) + "\n").encode()
    except UnicodeEncodeError:  # lone surrogates (from "\udXXX" escapes): keep them escaped
        raw = (json.dumps(data) + "\n").encode()
    _files.atomic_write(path, raw, mode=mode, durable=durable)


def deep_copy(obj: T) -> T:
    """A deep copy of a model."""
    return copy.deepcopy(obj)
