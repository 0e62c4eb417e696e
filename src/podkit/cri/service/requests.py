"""Checks of request fields the CRI service makes before it calls the pods layer, and the
batching of the ``Stream*`` list RPCs."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from podkit.cri.convert import ConversionError
from podkit.errors import InvalidArgumentError, quote

__all__ = ["STREAM_BATCH", "batches", "command", "now", "required", "with_field_prefix"]

STREAM_BATCH = 128
"""Items per message of the ``Stream*`` list RPCs."""


def now() -> int:
    """The time of a reply, in nanoseconds since the epoch."""
    return time.time_ns()


def required(value: str, field: str) -> str:
    """``value``, or InvalidArgumentError naming ``field`` when it is empty."""
    if not value:
        raise InvalidArgumentError(f"{field}: required")
    return value


def command(cmd: Sequence[str]) -> None:
    """An exec's argv: not empty, no NUL byte (a C string would end there, silently)."""
    if not cmd:
        raise InvalidArgumentError("cmd: required (the command to run)")
    for i, arg in enumerate(cmd):
        if "\0" in arg:
            raise InvalidArgumentError(f"cmd[{i}] {quote(arg)}: contains a NUL byte")


def with_field_prefix(prefix: str, fn: Callable[[], Any]) -> Any:
    """Run ``fn``; a builder's InvalidArgumentError gets the request field it is about."""
    try:
        return fn()
    except ConversionError:
        raise
    except InvalidArgumentError as exc:
        if str(exc).startswith(prefix):
            raise
        try:
            new = type(exc)(f"{prefix}: {exc}")
        except TypeError:
            new = InvalidArgumentError(f"{prefix}: {exc}")
        raise new from exc


def batches(items: Sequence[Any], wrap: Callable[[Sequence[Any]], Any],
            active: Callable[[], bool]) -> Iterator[Any]:
    """``items`` in messages of at most :data:`STREAM_BATCH` (one message when empty)."""
    for start in range(0, max(len(items), 1), STREAM_BATCH):
        if not active():
            return
        yield wrap(items[start:start + STREAM_BATCH])
