"""Extra spec validation plugged in by the user (the Go library's ``SetSpecValidator``).

A spec validator is a callable that gets a parsed :class:`~podkit.cdi.models.Spec` and raises to
reject it (``SpecError`` or any other ``Exception``; its message is kept). The process-wide one
set here runs wherever specs are read or written: ``load_spec``, every ``Cache`` scan and
``Cache.write_spec``; a cache may add its own (``Cache(spec_validator=...)``). A ready JSON-schema
validator is :func:`podkit.cdi.schema.validate_spec_schema`::

    from podkit import cdi
    from podkit.cdi import schema
    cdi.set_spec_validator(schema.validate_spec_schema)
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the models load with the first spec, not with this module
    from podkit.cdi.models import Spec

__all__ = ["SpecValidator", "get_spec_validator", "set_spec_validator", "validator_generation"]

SpecValidator = Callable[["Spec"], None]
"""Raises to reject a spec; returns ``None`` to accept it."""

_lock = threading.Lock()
_validator: SpecValidator | None = None
_generation = 0


def set_spec_validator(fn: SpecValidator | None) -> None:
    """Install the process-wide spec validator (``None`` removes it).

    Caches apply it from their next scan on: auto-refreshing caches at their next query,
    the others at their next ``refresh()``.
    """
    global _validator, _generation
    if fn is not None and not callable(fn):
        raise TypeError(f"spec validator must be callable or None, got {type(fn).__name__}")
    with _lock:
        _validator = fn
        _generation += 1


def get_spec_validator() -> SpecValidator | None:
    """The process-wide spec validator, or ``None``."""
    return _validator


def validator_generation() -> int:
    """A number that changes whenever the process-wide validator is set (for cache keys)."""
    return _generation


def describe(fn: SpecValidator) -> str:
    """A short name of a validator for error messages."""
    name = getattr(fn, "__qualname__", None)
    return name if isinstance(name, str) else repr(fn)


def active(own: SpecValidator | None) -> tuple[SpecValidator, ...]:
    """The validators to run: the process-wide one, then ``own`` (each if set)."""
    return tuple(fn for fn in (_validator, own) if fn is not None)
