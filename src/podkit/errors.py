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
    "PodkitError",
]


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
