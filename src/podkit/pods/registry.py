"""The manager's in-memory index: pods and containers by ID, the names they reserve, one lock
per pod, the bundles of containers created but not yet started, the users containers run as,
and a pidfd per running container (``exits``: an exit is a poll away, not a question to the
supervisor). Thread-safe; no I/O beyond opening and closing those pidfds."""

from __future__ import annotations

import threading
from collections.abc import Iterable

from podkit import oci, procfs
from podkit.errors import AlreadyExistsError, NotFoundError, quote
from podkit.pods.records import Container, Sandbox
from podkit.runtime import Bundle

__all__ = ["Registry"]


class Registry:
    """What one manager knows, guarded by one lock (the per-pod locks serialise operations
    on a pod and its containers; this one only the dicts)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._names: dict[str, str] = {}
        self._sandboxes: dict[str, Sandbox] = {}
        self._containers: dict[str, Container] = {}
        self._built: dict[str, Bundle] = {}  # bundles of CREATED containers, spec in memory
        self._sandbox_locks: dict[str, threading.RLock] = {}
        self._users: dict[str, oci.User | None] = {}  # resolved at create, or on first ask
        self.exits = procfs.PidWatches()
        """The container processes watched by pidfd, by container ID."""

    # -- names ------------------------------------------------------------------------------

    def reserve(self, name: str, id: str, what: str) -> None:
        """Reserve ``name`` for ``id``; ``AlreadyExistsError`` if another ID holds it."""
        with self._lock:
            owner = self._names.get(name)
            if owner is not None:
                raise AlreadyExistsError(f"{what} name {name!r} is already reserved by {owner}")
            self._names[name] = id

    def release(self, name: str, id: str) -> None:
        """Free ``name`` if ``id`` holds it."""
        with self._lock:
            if self._names.get(name) == id:
                del self._names[name]

    # -- pods -------------------------------------------------------------------------------

    def sandbox(self, id: str) -> Sandbox:
        """The pod ``id``; ``NotFoundError`` if unknown."""
        with self._lock:
            sb = self._sandboxes.get(id)
        if sb is None:
            raise NotFoundError(f"no sandbox {quote(id)}")
        return sb

    def has_sandbox(self, id: str) -> bool:
        with self._lock:
            return id in self._sandboxes

    def sandboxes(self) -> list[Sandbox]:
        """Every pod known (the records themselves, not copies)."""
        with self._lock:
            return list(self._sandboxes.values())

    def sandbox_lock(self, id: str) -> threading.RLock:
        """The lock of pod ``id`` (made on first use)."""
        lock = self._sandbox_locks.get(id)  # one dict read: a List asks once per container
        if lock is None:
            with self._lock:
                lock = self._sandbox_locks.setdefault(id, threading.RLock())
        return lock

    def add_sandbox(self, sb: Sandbox) -> None:
        with self._lock:
            self._sandboxes[sb.id] = sb

    def drop_sandbox(self, id: str) -> None:
        with self._lock:
            self._sandboxes.pop(id, None)
            self._sandbox_locks.pop(id, None)

    # -- containers -------------------------------------------------------------------------

    def container(self, id: str) -> Container:
        """The container ``id``; ``NotFoundError`` if unknown."""
        c = self.find_container(id)
        if c is None:
            raise NotFoundError(f"no container {quote(id)}")
        return c

    def find_container(self, id: str) -> Container | None:
        with self._lock:
            return self._containers.get(id)

    def has_container(self, id: str) -> bool:
        with self._lock:
            return id in self._containers

    def containers(self) -> list[Container]:
        """Every container known (the records themselves, not copies)."""
        with self._lock:
            return list(self._containers.values())

    def containers_of(self, sandbox_id: str) -> list[Container]:
        with self._lock:
            return [c for c in self._containers.values() if c.sandbox_id == sandbox_id]

    def add_container(self, c: Container, bundle: Bundle | None = None) -> None:
        """Index ``c`` (with its built ``bundle``, handed to the supervisor at start, and the
        user the bundle's process runs as)."""
        with self._lock:
            self._containers[c.id] = c
            if bundle is not None:
                self._built[c.id] = bundle
                process = bundle.spec.process
                self._users[c.id] = process.user if process is not None else None

    def user(self, id: str) -> tuple[bool, oci.User | None]:
        """Whether the user of container ``id`` is known, and that user (``None``: none)."""
        with self._lock:
            return id in self._users, self._users.get(id)

    def set_user(self, id: str, user: oci.User | None) -> None:
        """Remember the user of a known container (read from its bundle after a restart)."""
        with self._lock:
            if id in self._containers:
                self._users[id] = user

    def take_bundle(self, id: str) -> Bundle | None:
        """The built bundle of a CREATED container, once."""
        with self._lock:
            return self._built.pop(id, None)

    def drop_container(self, id: str) -> None:
        with self._lock:
            self._containers.pop(id, None)
            self._built.pop(id, None)
            self._users.pop(id, None)
        self.exits.forget(id)

    def close(self) -> None:
        """Close the pidfds (the records stay; a later look opens them again)."""
        self.exits.close()

    # -- recovery ---------------------------------------------------------------------------

    def adopt(self, sandboxes: Iterable[Sandbox], containers: Iterable[Container]
              ) -> tuple[dict[str, Sandbox], list[Container]]:
        """Index records read from disk and reserve their names; a record already indexed
        stays the one in use (returned in place of the one read)."""
        with self._lock:
            pods = {s.id: self._sandboxes.setdefault(s.id, s) for s in sandboxes}
            for s in pods.values():
                self._names.setdefault(s.name, s.id)
            ctrs = [self._containers.setdefault(c.id, c) for c in containers]
            for c in ctrs:
                self._names.setdefault(c.name, c.id)
        return pods, ctrs
