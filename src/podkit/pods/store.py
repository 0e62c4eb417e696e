"""The manager's records on disk: one private JSON file per pod and per container.

``state_dir/sandboxes/<id>.json`` and ``state_dir/containers/<id>.json``, written atomically
(mode 0600: they hold env values). A record is written before the step it names is taken, so
an undo or a later ``recover()`` knows what exists; this module only reads and writes them.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TypeVar

import cattrs

from podkit._files import atomic_write, validate_id
from podkit.errors import InvalidArgumentError
from podkit.pods.records import Container, Sandbox

__all__ = ["RECORD_DIR_MODE", "RECORD_MODE", "RecordStore"]

RECORD_MODE, RECORD_DIR_MODE = 0o600, 0o700
"""Modes of the records in ``state_dir`` (they hold env values) and of their directories."""

KINDS = ("sandboxes", "containers")

T = TypeVar("T", Sandbox, Container)

_converter = cattrs.Converter()


class RecordStore:
    """Save, drop and load the pod and container records under ``state_dir``.

    A test that wants a write to fail replaces :meth:`save` on one store.
    """

    def __init__(self, state_dir: Path) -> None:
        self.state_dir = state_dir
        state_dir.mkdir(mode=RECORD_DIR_MODE, parents=True, exist_ok=True)
        for kind in KINDS:
            d = state_dir / kind
            d.mkdir(mode=RECORD_DIR_MODE, exist_ok=True)
            d.chmod(RECORD_DIR_MODE)  # records of an earlier version were in 0755 dirs

    def path(self, kind: str, id: str) -> Path:
        """The record file of ``id`` (``kind``: ``sandboxes`` or ``containers``)."""
        return self.state_dir / kind / f"{validate_id(id, kind[:-1] + ' ID')}.json"

    def save(self, obj: Sandbox | Container) -> None:
        """Write the record atomically (a crash leaves the old one or the new one)."""
        kind = "sandboxes" if isinstance(obj, Sandbox) else "containers"
        data = _converter.unstructure(obj)
        # compact: json's C encoder (an indent makes it use the pure-Python one, ~5x slower)
        atomic_write(self.path(kind, obj.id), json.dumps(data), mode=RECORD_MODE)

    def drop(self, kind: str, id: str) -> None:
        """Remove the record of ``id``; a missing one is fine."""
        self.path(kind, id).unlink(missing_ok=True)

    def load(self, kind: str, cls: type[T]) -> list[T]:
        """Every record of ``kind``; a corrupt one is an ``InvalidArgumentError``."""
        out = []
        for path in sorted((self.state_dir / kind).glob("*.json")):
            try:
                out.append(_converter.structure(json.loads(path.read_text()), cls))
                path.chmod(RECORD_MODE)  # an earlier version wrote them readable by all
            except (OSError, ValueError, cattrs.BaseValidationError) as exc:
                raise InvalidArgumentError(f"corrupt record {path}: {exc}") from None
        return out
