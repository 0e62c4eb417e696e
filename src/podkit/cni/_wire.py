"""JSON on the CNI wire, serialised the way Go's ``encoding/json`` does it.

libcni marshals Go maps, so every object it writes (plugin stdin, the cached result) has its
keys sorted and is compact; Go also escapes ``<``, ``>``, ``&``, U+2028 and U+2029 inside
strings. Matching this byte for byte keeps podkit's stdin and cache files identical to libcni's.
"""

from __future__ import annotations

import json
from typing import Any

_GO_ESCAPES = (
    ("<", "\\u003c"),
    (">", "\\u003e"),
    ("&", "\\u0026"),
    ("\u2028", "\\u2028"),
    ("\u2029", "\\u2029"),
)


def _normalise(obj: Any, sort: bool) -> Any:
    if isinstance(obj, dict):
        items = sorted(obj.items()) if sort else obj.items()
        return {k: _normalise(v, sort) for k, v in items}
    if isinstance(obj, (list, tuple)):
        return [_normalise(v, sort) for v in obj]
    if isinstance(obj, float) and obj.is_integer() and abs(obj) < 1e21:
        return int(obj)  # Go prints float64 integral values without a fraction
    return obj


def go_dumps(obj: Any, *, sort_keys: bool = True) -> bytes:
    """Compact JSON like Go's ``json.Marshal`` of maps (keys sorted at every level)."""
    text = json.dumps(_normalise(obj, sort_keys), separators=(",", ":"), ensure_ascii=False)
    for raw, esc in _GO_ESCAPES:
        if raw in text:
            text = text.replace(raw, esc)
    return text.encode()


def go_type(value: Any) -> str:
    """The Go ``%T`` name of a decoded JSON value, as libcni prints it in its messages."""
    if value is None:
        return "<nil>"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, (int, float)):
        return "float64"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "[]interface {}"
    if isinstance(value, dict):
        return "map[string]interface {}"
    return type(value).__name__


def loads_object(data: bytes | str) -> dict[str, Any]:
    """Decode a JSON object; raise ``ValueError`` with Go-like wording otherwise."""
    if isinstance(data, bytes):
        data = data.decode("utf-8", errors="replace")
    if not data.strip():
        raise ValueError("unexpected end of JSON input")
    try:
        value = json.loads(data)
    except json.JSONDecodeError as e:
        if e.pos >= len(data.rstrip()):
            raise ValueError("unexpected end of JSON input") from None
        raise ValueError(f"invalid JSON: {e.msg} at line {e.lineno} column {e.colno}") from None
    if not isinstance(value, dict):
        raise ValueError(f"cannot unmarshal {go_type(value)} into a JSON object")
    return value
