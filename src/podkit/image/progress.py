"""Progress events for imports and pulls: one per blob state change and per chunk moved."""

from __future__ import annotations

from collections.abc import Callable

import attrs

__all__ = ["Progress", "ProgressCallback"]


@attrs.frozen(slots=True)
class Progress:
    """The state of one blob: ``status`` is ``waiting``, ``exists`` (already stored, skipped),
    ``copying`` (``done`` of ``total`` bytes moved so far) or ``done``."""

    digest: str
    status: str
    done: int
    total: int


ProgressCallback = Callable[[Progress], None]
"""What a pull or import calls with each ``Progress`` (bytes done of each blob)."""
