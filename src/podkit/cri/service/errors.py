"""The errors the CRI service adds, and how every podkit error becomes a gRPC status.

``status_code_name`` is the mapping kubelet expects (``NotFoundError`` -> ``NOT_FOUND``, ...);
``status_detail`` bounds the message a status carries, whatever raised it.
"""

from __future__ import annotations

from podkit.errors import (
    AlreadyExistsError,
    ConflictError,
    InvalidArgumentError,
    NotFoundError,
    PodkitError,
)
from podkit.runtime.errors import RuntimeTimeoutError

__all__ = [
    "STATUS_DETAIL_BYTES",
    "STATUS_DETAIL_CHARS",
    "EventsOverflowError",
    "UnimplementedError",
    "status_code_name",
    "status_detail",
]

STATUS_DETAIL_CHARS = 1024
"""The most characters of an error message a gRPC status carries."""
STATUS_DETAIL_BYTES = 4096
"""The most bytes of a status message on the wire (percent-encoded ``grpc-message``)."""


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
    (NotFoundError, "NOT_FOUND"),
    (AlreadyExistsError, "ALREADY_EXISTS"),
    (InvalidArgumentError, "INVALID_ARGUMENT"),
    (ConflictError, "FAILED_PRECONDITION"),
    (RuntimeTimeoutError, "DEADLINE_EXCEEDED"),
    (EventsOverflowError, "RESOURCE_EXHAUSTED"),
)


def status_code_name(exc: BaseException) -> str:
    """The gRPC status code name (``NOT_FOUND``, ...) kubelet expects for a podkit error."""
    for cls, name in _CODES:
        if isinstance(exc, cls):
            return name
    return "UNKNOWN"
