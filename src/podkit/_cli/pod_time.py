"""Durations and points in time as ``podkit pod`` options take them (``--timeout 60s``,
``--since 10m`` or ``--since 2026-01-02T03:04:05Z``)."""

from __future__ import annotations

import re

from podkit.errors import InvalidArgumentError
from podkit.runtime.logs import parse_cri_timestamp

__all__ = ["parse_duration", "parse_since"]

_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}
_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|ms|s|m|h)")
_NUMBER = re.compile(r"\d+(?:\.\d*)?|\.\d+")


def parse_duration(text: str, where: str) -> float:
    """Seconds from ``60s``, ``2m``, ``500ms``, ``1h30m`` (Go's units) or plain seconds
    (``2.5``); ``where`` names the option in the error."""
    value = text.strip()
    if _NUMBER.fullmatch(value):
        return float(value)
    pos, total = 0, 0.0
    for m in _PART.finditer(value):
        if m.start() != pos:
            break
        total += float(m.group(1)) * _UNITS[m.group(2)]
        pos = m.end()
    if not value or pos != len(value):
        raise InvalidArgumentError(
            f"{where} {text!r}: not a duration (want e.g. 60s, 2m, 500ms, 1h30m or seconds)")
    return total


def parse_since(text: str, where: str, now_ns: int) -> int:
    """Nanoseconds since the epoch: ``now_ns`` minus a duration, or an RFC 3339 time."""
    if "T" in text or "t" in text:
        try:
            return parse_cri_timestamp(text.strip())
        except InvalidArgumentError:
            raise InvalidArgumentError(
                f"{where} {text!r}: not an RFC 3339 time (e.g. 2026-01-02T03:04:05Z)"
            ) from None
    return now_ns - int(parse_duration(text, where) * 1e9)
