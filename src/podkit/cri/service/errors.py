"""The errors the CRI service adds, and how every podkit error becomes a gRPC status.

``status_code_name`` is the mapping kubelet expects (``NotFoundError`` -> ``NOT_FOUND``, ...),
after the codes a service was given for exception classes of its own (:func:`check_codes`);
``status_detail`` bounds the message a status carries, whatever raised it.
"""

from __future__ import annotations

from collections.abc import Mapping

from podkit.errors import (
    AlreadyExistsError,
    ConflictError,
    InvalidArgumentError,
    NotFoundError,
    PermissionDeniedError,
    PodkitError,
    quote,
)
from podkit.runtime.errors import RuntimeTimeoutError

__all__ = [
    "STATUS_CODES",
    "STATUS_DETAIL_BYTES",
    "STATUS_DETAIL_CHARS",
    "EventsOverflowError",
    "UnimplementedError",
    "check_codes",
    "mapped_code",
    "status_code_name",
    "status_detail",
]

STATUS_DETAIL_CHARS = 1024
"""The most characters of an error message a gRPC status carries."""
STATUS_DETAIL_BYTES = 4096
"""The most bytes of a status message on the wire (percent-encoded ``grpc-message``)."""
STATUS_CODES = frozenset({
    "CANCELLED", "UNKNOWN", "INVALID_ARGUMENT", "DEADLINE_EXCEEDED", "NOT_FOUND",
    "ALREADY_EXISTS", "PERMISSION_DENIED", "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION",
    "ABORTED", "OUT_OF_RANGE", "UNIMPLEMENTED", "INTERNAL", "UNAVAILABLE", "DATA_LOSS",
    "UNAUTHENTICATED"})
"""The gRPC status code names an error can be answered with (every code but ``OK``)."""


class UnimplementedError(PodkitError):
    """An RPC (or a part of one) this server does not implement (gRPC ``UNIMPLEMENTED``)."""


class EventsOverflowError(PodkitError):
    """An events stream fell more than ``EVENTS_BACKLOG`` events behind and was ended
    (``RESOURCE_EXHAUSTED``; the client subscribes again)."""


def _wire_size(char: str) -> int:
    """Bytes ``char`` takes in a percent-encoded ``grpc-message`` header."""
    return 1 if " " <= char <= "~" and char != "%" else 3 * len(char.encode("utf-8"))


def status_detail(message: str) -> str:
    """``message`` cut to fit a gRPC status (:data:`STATUS_DETAIL_CHARS` characters and
    :data:`STATUS_DETAIL_BYTES` wire bytes), saying how long it was; a last line of defence."""
    message = message.encode("utf-8", "backslashreplace").decode("utf-8")
    if len(message) <= STATUS_DETAIL_CHARS and \
            sum(map(_wire_size, message)) <= STATUS_DETAIL_BYTES:
        return message
    suffix = f"... ({len(message)} characters, cut)"
    budget = STATUS_DETAIL_BYTES - len(suffix)
    kept = 0
    for char in message[:STATUS_DETAIL_CHARS - len(suffix)]:
        budget -= _wire_size(char)
        if budget < 0:
            break
        kept += 1
    return message[:kept] + suffix


_CODES: tuple[tuple[type[BaseException], str], ...] = (
    (UnimplementedError, "UNIMPLEMENTED"),
    (PermissionDeniedError, "PERMISSION_DENIED"),
    (NotFoundError, "NOT_FOUND"),
    (AlreadyExistsError, "ALREADY_EXISTS"),
    (InvalidArgumentError, "INVALID_ARGUMENT"),
    (ConflictError, "FAILED_PRECONDITION"),
    (RuntimeTimeoutError, "DEADLINE_EXCEEDED"),
    (EventsOverflowError, "RESOURCE_EXHAUSTED"),
)


def check_codes(codes: Mapping[type[BaseException], str]) -> dict[type[BaseException], str]:
    """``codes`` (exception class -> status code name) checked: classes and known names."""
    out = {}
    for cls, name in codes.items():
        if not (isinstance(cls, type) and issubclass(cls, BaseException)):
            raise InvalidArgumentError(f"status_codes key {quote(cls)}: not an exception class")
        if name not in STATUS_CODES:
            raise InvalidArgumentError(
                f"status_codes[{cls.__name__}] {quote(name)}: not a gRPC status code name "
                f"(one of {', '.join(sorted(STATUS_CODES))})")
        out[cls] = name
    return out


def mapped_code(exc: BaseException, codes: Mapping[type[BaseException], str]) -> str | None:
    """The code ``codes`` gives ``exc``'s class or its nearest base class; ``None`` if none."""
    for cls in type(exc).__mro__:
        if cls in codes:
            return codes[cls]
    return None


def status_code_name(exc: BaseException,
                     codes: Mapping[type[BaseException], str] | None = None) -> str:
    """The gRPC status code name (``NOT_FOUND``, ...) for ``exc``: the one ``codes`` (a
    service's own classes, :func:`check_codes`) gives it, else the one kubelet expects for a
    podkit error, else ``UNKNOWN``."""
    mapped = mapped_code(exc, codes) if codes else None
    if mapped is not None:
        return mapped
    for cls, name in _CODES:
        if isinstance(exc, cls):
            return name
    return "UNKNOWN"
