"""Reading ``/proc``: a process's state, start time, argv and network counters; and
:class:`PidWatches`, pidfds that say a process exited without reading ``/proc`` again.

One home for the few ``/proc`` files podkit reads, so frontends and supervisors do not parse
them each in their own way. Stdlib only; every function answers "gone" (``None``, ``False``,
empty) instead of raising when the process or the file is not there.
"""

from __future__ import annotations

import contextlib
import os
import resource
import select
import threading
from collections.abc import Callable, Collection
from typing import NamedTuple

__all__ = [
    "PROC",
    "InterfaceCounters",
    "PidWatches",
    "alive",
    "cmdline",
    "name_and_state",
    "net_dev",
    "parse_net_dev",
    "parse_stat",
    "start_time",
    "state",
]

PROC = "/proc"
"""Where procfs is mounted."""


def _read(pid: int, name: str, proc: str) -> bytes | None:
    if pid <= 0:
        return None
    try:
        with open(os.path.join(proc, str(pid), name), "rb") as f:
            return f.read()
    except OSError:
        return None


def parse_stat(data: bytes) -> list[bytes]:
    """The fields of a ``/proc/<pid>/stat`` line after the command name (field 3, the state,
    first); the command may hold spaces and parentheses, so it is cut at the last ``)``."""
    head, sep, rest = data.rpartition(b")")
    if not sep or not head:
        raise ValueError("not a /proc/<pid>/stat line")
    return rest.split()


def state(pid: int, *, proc: str = PROC) -> str | None:
    """The one-letter state of ``pid`` (``R``, ``S``, ``Z``, ...); ``None`` when it is gone."""
    data = _read(pid, "stat", proc)
    if data is None:
        return None
    try:
        return parse_stat(data)[0].decode("ascii", "replace")
    except (ValueError, IndexError):
        return None


def name_and_state(pid: int, *, proc: str = PROC) -> tuple[str, str] | None:
    """The command name (``comm``, what an exec sets) and the one-letter state of ``pid``;
    ``None`` when it is gone."""
    data = _read(pid, "stat", proc)
    if data is None:
        return None
    head, sep, rest = data.rpartition(b")")
    if not sep:
        return None
    try:
        return (head.partition(b"(")[2].decode("utf-8", "replace"),
                rest.split()[0].decode("ascii", "replace"))
    except IndexError:
        return None


def alive(pid: int, *, proc: str = PROC) -> bool:
    """Whether ``pid`` is a live process (present and neither a zombie nor dead)."""
    return state(pid, proc=proc) not in (None, "Z", "X")


def start_time(pid: int, *, proc: str = PROC) -> int | None:
    """When ``pid`` started, in clock ticks since boot (field 22 of ``stat``): with the pid
    it names one process even after the pid is reused. ``None`` when it is gone."""
    data = _read(pid, "stat", proc)
    if data is None:
        return None
    try:
        return int(parse_stat(data)[19])
    except (ValueError, IndexError):
        return None


def cmdline(pid: int, *, proc: str = PROC) -> list[bytes]:
    """The argv of ``pid`` (empty once it is gone, or for a kernel thread)."""
    data = _read(pid, "cmdline", proc)
    if not data:
        return []
    return data.rstrip(b"\0").split(b"\0")


class InterfaceCounters(NamedTuple):
    """One line of ``/proc/<pid>/net/dev``: an interface's byte and error counters."""

    name: str
    rx_bytes: int
    rx_errors: int
    tx_bytes: int
    tx_errors: int


def parse_net_dev(text: str) -> list[InterfaceCounters]:
    """The interfaces of a ``/proc/net/dev`` table (two header lines; bad lines skipped)."""
    out = []
    for line in text.splitlines()[2:]:
        name, _, counters = line.partition(":")
        fields = counters.split()
        if len(fields) < 11:
            continue
        try:
            out.append(InterfaceCounters(name.strip(), int(fields[0]), int(fields[2]),
                                         int(fields[8]), int(fields[10])))
        except ValueError:
            continue
    return out


def net_dev(pid: int, *, proc: str = PROC) -> list[InterfaceCounters] | None:
    """The interface counters of the network namespace ``pid`` is in; ``None`` when the
    process is gone."""
    data = _read(pid, "net/dev", proc)
    if data is None:
        return None
    return parse_net_dev(data.decode("utf-8", "replace"))


class PidWatches:
    """One pidfd per watched process, by key: whether it has exited is one ``poll`` of its
    pidfd (readable once the process is a zombie or gone), not a ``/proc`` read, and a pid
    reused later cannot fool it. Thread-safe; :meth:`forget` or :meth:`close` closes the fds.

    At most ``limit`` pidfds are held (default: a quarter of the soft ``RLIMIT_NOFILE``): past
    it :meth:`watch` keeps nothing and says so, and the owner asks the slow way, so watches
    never starve the process of fds. ``pidfd_open`` is the seam tests replace (any callable
    returning an fd that turns readable when the process exits, ``OSError`` when it is gone).
    """

    def __init__(self, pidfd_open: Callable[[int], int] = os.pidfd_open,
                 limit: int | None = None) -> None:
        self._open = pidfd_open
        if limit is None:
            soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
            limit = 4096 if soft == resource.RLIM_INFINITY else max(16, soft // 4)
        self.limit = limit
        self._lock = threading.Lock()
        self._fds: dict[str, tuple[int, int]] = {}  # key -> (pid, pidfd)
        self._keys: dict[int, str] = {}  # pidfd -> key
        self._epoll: select.epoll | None = None  # every pidfd, for exited_keys()

    def watch(self, key: str, pid: int) -> bool:
        """Watch ``pid`` under ``key`` (replacing a watch of another pid there); ``False``
        (nothing kept) when ``pid`` is not a process any more or :attr:`limit` fds are held."""
        self.forget(key)
        if pid <= 0 or len(self) >= self.limit:
            return False
        try:
            fd = self._open(pid)
        except OSError:
            return False
        with self._lock:
            old = self._fds.get(key)
            if old is not None:  # a concurrent watch of the same key
                self._drop(old[1])
            self._fds[key] = (pid, fd)
            self._keys[fd] = key
            if self._epoll is None:
                self._epoll = select.epoll()
            self._epoll.register(fd, select.EPOLLIN)
        return True

    def _drop(self, fd: int) -> None:
        """Close ``fd`` and forget it (the lock is held)."""
        self._keys.pop(fd, None)
        if self._epoll is not None:
            with contextlib.suppress(OSError):
                self._epoll.unregister(fd)
        os.close(fd)

    def exited(self, key: str, pid: int) -> bool | None:
        """``True`` once the process watched under ``key`` has exited, ``False`` while it
        runs; ``None`` when ``key`` watches no process or another pid than ``pid``."""
        with self._lock:
            found = self._fds.get(key)
            if found is None or found[0] != pid:
                return None
            poller = select.poll()
            poller.register(found[1], select.POLLIN)
            return bool(poller.poll(0))

    def watching(self, key: str, pid: int) -> bool:
        """Whether ``key`` watches ``pid``."""
        with self._lock:
            found = self._fds.get(key)
        return found is not None and found[0] == pid

    def watched(self) -> dict[str, int]:
        """The pid watched under each key, at this moment (a List reads it once)."""
        with self._lock:
            return {k: pid for k, (pid, _) in self._fds.items()}

    def exited_keys(self) -> set[str]:
        """The keys whose process has exited, from one ``epoll_wait`` over every pidfd."""
        with self._lock:
            if self._epoll is None or not self._fds:
                return set()
            ready = self._epoll.poll(0, len(self._fds))
            return {self._keys[fd] for fd, _ in ready if fd in self._keys}

    def forget(self, key: str) -> None:
        """Stop watching under ``key`` and close its pidfd (nothing to do when none)."""
        with self._lock:
            found = self._fds.pop(key, None)
            if found is not None:
                self._drop(found[1])

    def retain(self, keys: Collection[str]) -> None:
        """Forget every watch whose key is not in ``keys`` (what its owner no longer knows)."""
        with self._lock:
            for k in [k for k in self._fds if k not in keys]:
                self._drop(self._fds.pop(k)[1])

    def close(self) -> None:
        """Close every pidfd (and the epoll over them)."""
        with self._lock:
            fds, self._fds, self._keys = list(self._fds.values()), {}, {}
            epoll, self._epoll = self._epoll, None
            if epoll is not None:
                epoll.close()
            for _, fd in fds:
                os.close(fd)

    def __del__(self) -> None:  # an owner dropped without close(): no fd outlives it
        with contextlib.suppress(Exception):
            self.close()

    def __len__(self) -> int:
        with self._lock:
            return len(self._fds)

    def __contains__(self, key: object) -> bool:
        with self._lock:
            return key in self._fds
