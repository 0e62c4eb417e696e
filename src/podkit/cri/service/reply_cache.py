"""The list items the service built last, reused while what they report is unchanged.

A ``ListContainers`` or ``ListPodSandbox`` item depends on a record's state and on fields fixed
at create (config, image); building it field by field costs more than the rest of a List. So
each item is kept by ID with a key of what it was built from, and built again only when the key
changes: a new state, another config object (the manager replaces configs, never edits them).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Collection, Hashable
from typing import Generic, TypeVar

__all__ = ["ReplyCache"]

M = TypeVar("M")


class ReplyCache(Generic[M]):
    """Built reply messages by ID, each with the key it was built from. Thread-safe.

    Callers copy what they get (``repeated.extend`` does) and never change it.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._items: dict[str, tuple[tuple[Hashable, ...], object, M]] = {}

    def get(self, id: str, key: tuple[Hashable, ...], source: object,
            build: Callable[[], M]) -> M:
        """The message for ``id`` built from ``key`` and the object ``source`` (compared by
        identity: e.g. the record's config); ``build()`` makes and keeps it when either
        changed."""
        with self._lock:
            found = self._items.get(id)
        if found is not None and found[0] == key and found[1] is source:
            return found[2]
        message = build()
        with self._lock:
            self._items[id] = (key, source, message)
        return message

    def forget(self, id: str) -> None:
        """Drop the message of ``id`` (removed)."""
        with self._lock:
            self._items.pop(id, None)

    def retain(self, ids: Collection[str]) -> None:
        """Drop every message whose ID is not in ``ids`` (records gone past the service)."""
        with self._lock:
            for id in [i for i in self._items if i not in ids]:
                del self._items[id]

    def __len__(self) -> int:
        with self._lock:
            return len(self._items)
