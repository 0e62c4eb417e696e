"""The container events bus: one bounded queue per subscribed ``GetContainerEvents`` stream.

A stream that falls :data:`EVENTS_BACKLOG` events behind is dropped from the bus and ends
with ``EventsOverflowError`` once it has read what it had (the client subscribes again).
"""

from __future__ import annotations

import contextlib
import queue
import threading

from podkit.cri import api_pb2 as pb

__all__ = ["EVENTS_BACKLOG", "EventBus", "EventQueue"]

EVENTS_BACKLOG = 1000
"""Events a stream may have waiting before it is ended."""

EventQueue = queue.Queue[pb.ContainerEventResponse | None]
"""One stream's queue; ``None`` in it ends the stream (the bus closed)."""


class EventBus:
    """Container events: one bounded queue per subscribed stream."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._queues: list[EventQueue] = []
        self._overflowed: set[int] = set()

    def subscribe(self) -> EventQueue:
        """A new stream's queue, holding every event published from now on."""
        q: EventQueue = queue.Queue(EVENTS_BACKLOG)
        with self._lock:
            self._queues.append(q)
        return q

    def overflowed(self, q: EventQueue) -> bool:
        """Whether ``q`` was dropped for falling behind (or by :meth:`close`)."""
        with self._lock:
            return id(q) in self._overflowed

    def unsubscribe(self, q: EventQueue) -> None:
        """Stop delivering to ``q``."""
        with self._lock:
            if q in self._queues:
                self._queues.remove(q)
            self._overflowed.discard(id(q))

    def publish(self, event: pb.ContainerEventResponse) -> None:
        """Deliver ``event`` to every stream; a full one is dropped."""
        with self._lock:
            queues = list(self._queues)
        for q in queues:
            try:
                q.put_nowait(event)
            except queue.Full:
                with self._lock:
                    if q in self._queues:
                        self._queues.remove(q)
                    self._overflowed.add(id(q))

    def close(self) -> None:
        """End every stream (the server stops)."""
        with self._lock:
            queues, self._queues = self._queues, []
        for q in queues:
            with contextlib.suppress(queue.Full):
                q.put_nowait(None)
            with self._lock:
                self._overflowed.add(id(q))  # a full queue ends at its next poll

    @property
    def subscribers(self) -> int:
        """Streams subscribed now."""
        with self._lock:
            return len(self._queues)
