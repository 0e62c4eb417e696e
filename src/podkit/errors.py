"""The one exception hierarchy every podkit layer raises from.

Each layer subclasses these kinds (``cni.CNIError`` is a ``PodkitError``, ``runtime.NotFoundError``
is a ``NotFoundError``), so callers can catch by kind without knowing the layer.
"""

from __future__ import annotations

__all__ = [
    "AlreadyExistsError",
    "ConflictError",
    "InvalidArgumentError",
    "NotFoundError",
    "PermissionDeniedError",
    "PodkitError",
    "quote",
]

QUOTE_LIMIT = 100
"""The most characters of a value an error message quotes (see :func:`quote`)."""


def quote(value: object, limit: int = QUOTE_LIMIT) -> str:
    """``repr(value)`` for an error message, cut to ``limit`` characters plus its full length.

    Messages quote what a caller sent, and a 10,000-character ID must not make a
    10,000-character error: ``quote("a" * 10000)`` ends in ``... (10000 characters)``.
    """
    text = repr(value)
    if len(text) <= limit:
        return text
    size = len(value) if isinstance(value, str | bytes) else len(text)
    return f"{text[:limit]}... ({size} characters)"


class PodkitError(Exception):
    """Base of every error podkit raises on purpose."""


class NotFoundError(PodkitError, LookupError):
    """A named thing (container, network, device, file) does not exist."""


class AlreadyExistsError(PodkitError):
    """Creating something whose name or ID is already taken."""


class InvalidArgumentError(PodkitError, ValueError):
    """Input that is malformed or inconsistent; the message names the value and its origin."""


class ConflictError(PodkitError):
    """The request is valid but clashes with the current state (busy, locked, wrong state)."""


class PermissionDeniedError(PodkitError):
    """A policy refused the request (gRPC ``PERMISSION_DENIED``); the message is the reason.

    What a CRI server's admission hook raises to refuse a pod or a container (see
    ``podkit.cri.CRIService``).
    """
