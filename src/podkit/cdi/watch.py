"""Auto-refresh for the CDI cache: inotify via watchdog, with a synchronous freshness check.

Two parts, both on the kernel's inotify (watchdog's bindings):

* a private, non-blocking inotify descriptor that only the cache reads, at query time. The
  kernel queues an event before ``write()``/``rename()``/``unlink()`` returns to the writer, so a
  query that drains this descriptor first can never miss a change that happened before it
  started. This is the cheap check that makes "a changed spec is visible to the next query"
  hold without waiting for any thread (one non-blocking ``read`` per query when nothing changed).
* watchdog's ``InotifyObserver`` thread, which pushes change notifications (``on_change``) for
  listeners such as ``podkit cdi watch``.

Spec directories that do not exist yet are covered by watching their nearest existing parent;
when a directory appears or is removed the watch set is recomputed. When watching is impossible
(out of inotify instances or watches, EMFILE, ...), the watcher reports itself *degraded* and the
cache rescans on every query instead of crashing; it retries setting up now and then.
"""

from __future__ import annotations

import ctypes
import errno
import os
import struct
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

__all__ = ["ALL_CHANGED", "SpecDirWatcher"]

ALL_CHANGED = "*"
"""Marker in the changed-path set: everything may have changed (overflow, dirs, degraded)."""

_IN_MODIFY = 0x2
_IN_ATTRIB = 0x4
_IN_CLOSE_WRITE = 0x8
_IN_MOVED_FROM = 0x40
_IN_MOVED_TO = 0x80
_IN_CREATE = 0x100
_IN_DELETE = 0x200
_IN_DELETE_SELF = 0x400
_IN_MOVE_SELF = 0x800
_IN_Q_OVERFLOW = 0x4000
_IN_IGNORED = 0x8000
_IN_ONLYDIR = 0x1000000
_DIR_MASK = (
    _IN_MODIFY | _IN_ATTRIB | _IN_CLOSE_WRITE | _IN_MOVED_FROM | _IN_MOVED_TO | _IN_CREATE
    | _IN_DELETE | _IN_DELETE_SELF | _IN_MOVE_SELF | _IN_ONLYDIR
)
_PARENT_MASK = _IN_CREATE | _IN_MOVED_TO | _IN_DELETE_SELF | _IN_MOVE_SELF | _IN_ONLYDIR
_SELF_GONE = _IN_DELETE_SELF | _IN_MOVE_SELF | _IN_IGNORED
_EVENT = struct.Struct("iIII")
_RETRY_SECONDS = 1.0


def _inotify() -> Any:
    """watchdog's ctypes bindings of inotify_init/add_watch/rm_watch (imported lazily)."""
    from watchdog.observers import inotify_c

    return inotify_c


def _oserror(what: str) -> OSError:
    err = ctypes.get_errno() or errno.EIO
    return OSError(err, f"{what}: {os.strerror(err)}")


def _watch_target(directory: str) -> tuple[str, str | None]:
    """The path to watch for ``directory``: itself, or its nearest existing parent.

    Returns ``(path, next_component)``; ``next_component`` is None when ``path == directory``.
    """
    if os.path.isdir(directory):
        return directory, None
    child = directory
    parent = os.path.dirname(directory)
    while parent != child:
        if os.path.isdir(parent):
            rest = os.path.relpath(directory, parent)
            return parent, rest.split(os.sep, 1)[0]
        child, parent = parent, os.path.dirname(parent)
    return "/", None


class SpecDirWatcher:
    """Watches CDI spec directories; :meth:`poll` says what changed since the last call.

    ``errors`` maps a directory to the reason it is not watched (e.g. ``failed to create
    watcher: [Errno 24] Too many open files``). ``on_change`` is called from watchdog's thread
    on every relevant event; it must be quick and must not call back into the watcher.
    """

    def __init__(
        self, dirs: Sequence[str], on_change: Callable[[], None] | None = None
    ) -> None:
        self.dirs = tuple(dirs)
        self.errors: dict[str, str] = {}
        self._on_change = on_change
        self._fd: int | None = None
        self._wd_paths: dict[int, str] = {}  # wd -> watched path
        self._targets: dict[str, tuple[str, str | None]] = {}  # spec dir -> (path, next part)
        self._observer: Any = None
        self._observed: tuple[str, ...] = ()
        self._lock = threading.Lock()
        self._last_attempt = 0.0
        self._closed = False

    # -- lifecycle --------------------------------------------------------------------------

    @property
    def degraded(self) -> bool:
        """True when changes cannot be watched and callers must rescan on every query."""
        return self._fd is None

    def start(self) -> None:
        """Create the inotify descriptor and the observer; degrade on failure, never raise."""
        with self._lock:
            self._start_locked()

    def _start_locked(self) -> None:
        self._last_attempt = time.monotonic()
        try:
            lib = _inotify()
            fd = lib.inotify_init()
            if fd < 0:
                raise _oserror("inotify_init")
            os.set_blocking(fd, False)
            os.set_inheritable(fd, False)
            self._fd = fd
            self._update_watches_locked()
            self._start_observer_locked()
        except OSError as e:
            self._teardown_locked()
            for d in self.dirs:
                self.errors[d] = f"failed to create watcher: {e}"
            return
        for d in self.dirs:
            if self.errors.get(d, "").startswith("failed to create watcher"):
                del self.errors[d]

    def _start_observer_locked(self) -> None:
        from watchdog.observers.inotify import InotifyObserver

        observer = InotifyObserver()
        self._observer = observer
        self._schedule_locked()
        observer.daemon = True
        observer.start()

    def _schedule_locked(self) -> None:
        from watchdog import events as ev

        paths = tuple(sorted({p for p, _ in self._targets.values()}))
        if self._observer is None or paths == self._observed:
            return
        watcher = self

        # Only changes: without a filter watchdog also asks for IN_OPEN/IN_CLOSE_NOWRITE, and
        # every rescan (which opens each spec file) would flood its thread with events.
        event_filter = [
            ev.FileCreatedEvent, ev.FileModifiedEvent, ev.FileDeletedEvent, ev.FileMovedEvent,
            ev.FileClosedEvent, ev.DirCreatedEvent, ev.DirDeletedEvent, ev.DirMovedEvent,
            ev.DirModifiedEvent,
        ]

        class _Handler(ev.FileSystemEventHandler):
            def on_any_event(self, event: Any) -> None:
                cb = watcher._on_change
                if cb is not None:
                    cb()

        self._observer.unschedule_all()
        for p in paths:
            self._observer.schedule(_Handler(), p, recursive=False, event_filter=event_filter)
        self._observed = paths

    def _teardown_locked(self) -> None:
        if self._fd is not None:
            os.close(self._fd)  # closing the inotify fd drops all its watches
            self._fd = None
        self._wd_paths.clear()
        self._targets.clear()
        observer, self._observer = self._observer, None
        self._observed = ()
        if observer is not None:
            try:
                observer.stop()
                if observer.is_alive() and observer is not threading.current_thread():
                    observer.join(timeout=5)
            except (OSError, RuntimeError):
                pass

    def close(self) -> None:
        """Stop watching and release the inotify descriptor and the observer thread."""
        with self._lock:
            self._closed = True
            self._teardown_locked()

    # -- watches ----------------------------------------------------------------------------

    def _update_watches_locked(self) -> None:
        assert self._fd is not None
        lib = _inotify()
        targets = {d: _watch_target(d) for d in self.dirs}
        wanted: dict[str, int] = {}
        for path, part in targets.values():
            mask = _DIR_MASK if part is None else _PARENT_MASK
            wanted[path] = wanted.get(path, 0) | mask
        current = {p: wd for wd, p in self._wd_paths.items()}
        for path, wd in current.items():
            if path not in wanted:
                lib.inotify_rm_watch(self._fd, wd)
                del self._wd_paths[wd]
        for path, mask in wanted.items():
            wd = lib.inotify_add_watch(self._fd, os.fsencode(path), mask)
            if wd < 0:
                err = ctypes.get_errno()
                if err in (errno.ENOENT, errno.ENOTDIR):
                    continue  # vanished meanwhile: the next poll recomputes
                raise _oserror(f"inotify_add_watch {path}")
            self._wd_paths[wd] = path
        self._targets = targets
        for d in targets:
            if self.errors.get(d, "").startswith("failed to monitor"):
                del self.errors[d]
        if self._observer is not None:
            try:
                self._schedule_locked()
            except OSError as e:  # observer trouble: the fd still keeps queries fresh
                for d in self.dirs:
                    self.errors[d] = f"failed to monitor for changes: {e}"

    # -- polling ----------------------------------------------------------------------------

    def poll(self) -> set[str]:
        """Paths (or :data:`ALL_CHANGED`) that changed since the last poll; non-blocking.

        Degraded: always ``{ALL_CHANGED}`` (and now and then a retry to start watching).
        """
        with self._lock:
            if self._closed:
                return set()
            if self._fd is None:
                if time.monotonic() - self._last_attempt >= _RETRY_SECONDS:
                    self._start_locked()
                return {ALL_CHANGED}
            changed: set[str] = set()
            rewatch = False
            while True:
                try:
                    buf = os.read(self._fd, 65536)
                except BlockingIOError:
                    break
                except OSError as e:
                    self._teardown_locked()
                    for d in self.dirs:
                        self.errors[d] = f"failed to monitor for changes: {e}"
                    return {ALL_CHANGED}
                if not buf:
                    break
                rewatch |= self._parse(buf, changed)
            if rewatch:
                changed.add(ALL_CHANGED)
                try:
                    self._update_watches_locked()
                except OSError as e:
                    self._teardown_locked()
                    for d in self.dirs:
                        self.errors[d] = f"failed to create watcher: {e}"
            return changed

    def _parse(self, buf: bytes, changed: set[str]) -> bool:
        """Collect changed paths from raw inotify events; True if the watch set must change."""
        rewatch = False
        parents = {
            path: {part for p, part in self._targets.values() if p == path and part}
            for path, _ in self._targets.values()
        }
        off = 0
        while off + _EVENT.size <= len(buf):
            wd, mask, _cookie, length = _EVENT.unpack_from(buf, off)
            name = buf[off + _EVENT.size: off + _EVENT.size + length].rstrip(b"\0")
            off += _EVENT.size + length
            if mask & _IN_Q_OVERFLOW:
                changed.add(ALL_CHANGED)
                rewatch = True
                continue
            path = self._wd_paths.get(wd)
            if path is None:
                continue
            if mask & _SELF_GONE:
                if mask & _IN_IGNORED:  # the kernel dropped this watch: forget its wd
                    del self._wd_paths[wd]
                rewatch = True
                continue
            fname = os.fsdecode(name)
            if fname in parents.get(path, ()):
                rewatch = True  # a missing spec dir (or one of its parents) appeared
            if path in self.dirs:
                changed.add(os.path.join(path, fname))
        return rewatch
