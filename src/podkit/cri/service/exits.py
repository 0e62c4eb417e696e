"""Sending container events: the once-per-container bookkeeping, and the exit poller that
notices containers and pods that stopped on their own (containerd's exit monitor)."""

from __future__ import annotations

import contextlib
import queue
import threading
from collections.abc import Callable, Iterator

from podkit.cri import api_pb2 as pb
from podkit.cri.service import events
from podkit.cri.service.base import ServiceBase
from podkit.cri.service.errors import EventsOverflowError
from podkit.cri.service.replies import sandbox_status_to_cri
from podkit.cri.service.requests import now
from podkit.errors import PodkitError
from podkit.sandbox import ContainerState, SandboxState

__all__ = ["ContainerEvents"]


class ContainerEvents(ServiceBase):
    """The events part of the CRI service: publishing, the exit poller, GetContainerEvents."""

    _monitor: threading.Thread | None = None
    _halt: threading.Event

    def _publish(self, id: str, kind: int, sandbox_id: str,
                 status: pb.ContainerStatus | None = None) -> None:
        with self._ordered:  # built and delivered in the order the bookkeeping saw them
            if not self._note(id, kind) or not self.events.subscribers:
                return
            ev = pb.ContainerEventResponse(container_id=id, container_event_type=kind,  # type: ignore[arg-type]
                                           created_at=now())
            with contextlib.suppress(PodkitError):
                ev.pod_sandbox_status.CopyFrom(
                    sandbox_status_to_cri(self.manager.sandbox_status(sandbox_id)))
            if status is not None:
                ev.containers_statuses.append(status)
            self.events.publish(ev)

    def _note(self, id: str, kind: int) -> bool:
        """Record the event; False for a second STOPPED (one per container or pod, whoever
        notices first)."""
        with self._lock:
            if kind == pb.CONTAINER_STARTED_EVENT:
                self._announced.add(id)
            elif kind == pb.CONTAINER_STOPPED_EVENT:
                if id in self._stopped:
                    return False
                self._stopped.add(id)
            elif kind == pb.CONTAINER_DELETED_EVENT:
                self._stopped.discard(id)
                self._announced.discard(id)
        return True

    def _publish_container(self, id: str, kind: int) -> None:
        if not self.events.subscribers:
            self._publish(id, kind, "")  # only the once-per-container bookkeeping
            return
        try:
            c = self.manager.container_status(id)
        except PodkitError:
            return
        self._publish(id, kind, c.sandbox_id, self._status(c))

    def _seen(self, id: str, running: bool, stopped: bool) -> None:
        """Record what ``poll_exits(publish=False)`` found: running or already stopped."""
        with self._lock:
            if running:
                self._announced.add(id)
            if stopped:
                self._stopped.add(id)

    def _was_announced(self, id: str) -> bool:
        with self._lock:
            return id in self._announced

    def poll_exits(self, *, publish: bool = True) -> None:
        """Send CONTAINER_STOPPED for containers and pods that stopped on their own.

        Only for those whose STARTED event went out (so STOPPED never comes first); with
        ``publish=False`` it just records what is running and what already stopped.
        """
        containers = self.manager.list_containers()
        ids = {c.id for c in containers}
        self._listed_containers.retain(ids)  # removed past the service
        self._statuses.retain(ids)
        for c in containers:
            exited = c.state == ContainerState.CONTAINER_EXITED
            if not publish:
                self._seen(c.id, c.state == ContainerState.CONTAINER_RUNNING, exited)
            elif exited and self._was_announced(c.id):  # else its STARTED is on the way
                self._publish(c.id, pb.CONTAINER_STOPPED_EVENT, c.sandbox_id,
                              self._status(c) if self.events.subscribers else None)
        pods = self.manager.list_sandboxes()
        self._pauses.retain({sb.id for sb in pods})  # pods removed past the service
        self._listed_pods.retain({sb.id for sb in pods})
        survey = self._pause_survey()
        for sb in pods:
            fresh = self._fresh(sb, survey)
            if fresh is None:
                continue
            down = fresh.state == SandboxState.SANDBOX_NOTREADY
            if not publish:
                self._seen(sb.id, fresh.state == SandboxState.SANDBOX_READY, down)
            elif down and self._was_announced(sb.id):
                self._publish(sb.id, pb.CONTAINER_STOPPED_EVENT, sb.id)

    def start_monitor(self, interval: float = 1.0) -> None:
        """Poll for exits every ``interval`` seconds in a thread (containerd's exit monitor)."""
        if self._monitor is not None:
            return
        self._halt = threading.Event()
        halt = self._halt

        def run() -> None:
            while not halt.wait(interval):
                with contextlib.suppress(Exception):
                    self.poll_exits()

        self._monitor = threading.Thread(target=run, name="podkit-cri-exits", daemon=True)
        self._monitor.start()

    def stop_monitor(self) -> None:
        """Stop the exit monitor thread."""
        if self._monitor is not None:
            self._halt.set()
            self._monitor.join()
            self._monitor = None

    def close(self) -> None:
        """Stop the exit monitor and close the pidfds the service watches pauses with (the
        pods keep running; a later call watches them again)."""
        self.stop_monitor()
        self._pauses.close()

    def GetContainerEvents(self, request: pb.GetEventsRequest,
                           is_active: Callable[[], bool] = lambda: True,
                           ) -> Iterator[pb.ContainerEventResponse]:
        """Every container and sandbox event from now on, until the stream ends."""
        q = self.events.subscribe()
        try:
            while is_active():
                try:
                    ev = q.get(timeout=1.0)
                except queue.Empty:
                    if self.events.overflowed(q):
                        raise EventsOverflowError(
                            f"events stream more than {events.EVENTS_BACKLOG} events behind: "
                            "ended, subscribe again") from None
                    continue
                if ev is None:
                    return
                yield ev
        finally:
            self.events.unsubscribe(q)
