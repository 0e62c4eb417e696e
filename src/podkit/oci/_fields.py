"""Field declarations shared by the OCI models: wire names, integer ranges, requiredness.

The codec reads this metadata; models stay plain attrs classes.
"""

from __future__ import annotations

import copy
from typing import Any, TypeVar, dataclass_transform

import attrs

T = TypeVar("T")



def _meta(wire: str | None, kind: str | None, required: bool) -> dict[str, Any]:
    md: dict[str, Any] = {"required": required}
    if wire is not None:
        md["wire"] = wire
    if kind is not None:
        md["int"] = kind
    return md


def opt(kind: str | None = None, *, wire: str | None = None) -> Any:
    """An optional field: ``None`` means absent on the wire (Go ``*T`` / ``omitempty``)."""
    return attrs.field(default=None, metadata=_meta(wire, kind, False), kw_only=True)


def req(kind: str | None = None, *, wire: str | None = None, default: Any = attrs.NOTHING) -> Any:
    """A field the spec marks REQUIRED; the loader rejects a document without it."""
    return attrs.field(default=default, metadata=_meta(wire, kind, True), kw_only=True)


def extra() -> Any:
    """Unknown wire keys kept verbatim so a round-trip loses nothing."""
    return attrs.field(factory=dict, repr=False, kw_only=True, metadata={"extra": True})


@dataclass_transform(kw_only_default=True, field_specifiers=())
def model(cls: type[T]) -> type[T]:
    """Class decorator of every OCI model: attrs, slots, keyword-only, value equality.

    ``dataclass_transform`` lets type checkers see the generated ``__init__``; ``opt``/``req``
    are plain defaults to them (required keys are enforced by the codec, not the constructor).
    """
    new = attrs.define(cls, slots=True, kw_only=True, eq=True)
    new.__deepcopy__ = _model_deepcopy  # type: ignore[attr-defined]
    return new


_SCALARS = (str, int, bool, float, type(None))


def _copy_value(v: Any, memo: dict[int, Any]) -> Any:
    t = type(v)
    if t in _SCALARS:
        return v
    if t is list:
        if all(type(x) is str for x in v):
            return list(v)
        return [_copy_value(x, memo) for x in v]
    if t is dict:
        return {k: _copy_value(x, memo) for k, x in v.items()}
    if t in _NAMES:  # a model (its names are cached once it has been copied)
        return _model_deepcopy(v, memo)
    return copy.deepcopy(v, memo)


def _model_deepcopy(self: Any, memo: dict[int, Any]) -> Any:
    """``copy.deepcopy`` for models: JSON-shaped trees copied directly (several times faster)."""
    cls = type(self)
    kwargs = {}
    for name in _names(cls):
        v = getattr(self, name)
        if v is None:
            continue
        t = type(v)
        kwargs[name] = v if t is str or t is int or t is bool else _copy_value(v, memo)
    return cls(**kwargs)


_NAMES: dict[type, tuple[str, ...]] = {}


def _names(cls: type) -> tuple[str, ...]:
    names = _NAMES.get(cls)
    if names is None:
        names = _NAMES[cls] = tuple(a.name for a in attrs.fields(cls))
    return names
