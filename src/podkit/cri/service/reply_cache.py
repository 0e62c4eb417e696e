"""The replies the service built last, reused while what they report is unchanged.

A ``ListContainers`` or ``ListPodSandbox`` item (or a ``ContainerStatus``) depends on a record's
state and on fields fixed at create (config, image); building it field by field costs more than
the rest of the call. So each is kept by ID with a key of what it was built from, and built
again only when the key changes: a new state, another config object (the manager replaces
configs, never edits them). With an ``encode`` function each is also kept serialized, so the
gRPC side sends a List as the items' bytes joined (:mod:`podkit.cri.service.wire`).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Collection
from typing import Generic, TypeVar

__all__ = ["ReplyCache"]

M = TypeVar("M")


def _no_wire(message: object) -> bytes:
    return b""


class ReplyCache(Generic[M]):
    """Built reply messages by ID, each with the key it was built from (and its bytes, by
    ``encode``). Thread-safe.

    Callers copy what they get (``repeated.extend`` does) and never change it.
    """

    def __init__(self, encode: Callable[[M], bytes] | None = None) -> None:
        self._lock = threading.Lock()
        self._encode: Callable[[M], bytes] = encode or _no_wire
        self._items: dict[str, tuple[tuple[object, ...], object, M, bytes]] = {}

    def _entry(self, id: str, key: tuple[object, ...], source: object,
               build: Callable[[], M]) -> tuple[tuple[object, ...], object, M, bytes]:
        with self._lock:
            found = self._items.get(id)
        if found is not None and found[1] is source and found[0] == key:
            return found
        message = build()
        entry = (key, source, message, self._encode(message))
        with self._lock:
            self._items[id] = entry
        return entry

    def get(self, id: str, key: tuple[object, ...], source: object,
            build: Callable[[], M]) -> M:
        """The message for ``id`` built from ``key`` and the object ``source`` (compared by
        identity: e.g. the record's config); ``build()`` makes and keeps it when either
        changed."""
        return self._entry(id, key, source, build)[2]

    def get_wire(self, id: str, key: tuple[object, ...], source: object,
                 build: Callable[[], M]) -> bytes:
        """What :meth:`get` returns, serialized by ``encode``."""
        return self._entry(id, key, source, build)[3]

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
