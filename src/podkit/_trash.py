"""Directories deleted off the caller's time: renamed into a trash directory at once (one
rename: the path is gone, atomically), emptied (and then removed) by one background thread.

Deleting a tree is one blocking call per file and directory, and on some file systems each
waits for the disk (ext4 without a journal mounted with ``discard`` issues a synchronous
discard for every freed block: ~25 waits for a kubelet pod's files). A caller that only
needs the path gone (a pod or container removal) hands the tree here; what a killed process
left in a trash directory goes with the next removal into it, or with :func:`empty_later`.
"""

from __future__ import annotations

import contextlib
import logging
import os
import secrets
import shutil
import threading
from pathlib import Path

__all__ = ["TRASH", "empty_later", "remove_later", "wait"]

TRASH = ".trash"
"""The trash directory's usual name (beside the kinds of directories it takes)."""

_log = logging.getLogger("podkit.trash")
_lock = threading.Condition()
_pending: dict[Path, None] = {}  # trash dirs to empty, in order
_busy = False  # the thread is emptying one
_thread: threading.Thread | None = None


def remove_later(path: Path, trash: Path) -> None:
    """Move the directory ``path`` into ``trash`` (made 0700 when missing, on the same file
    system; removed again once emptied) and delete it on the background thread. A missing
    ``path`` is fine; a rename that cannot happen (another file system) deletes it here
    instead. ``OSError`` when it can be neither renamed nor deleted."""
    for _ in range(5):  # the thread may remove an emptied trash between mkdir and rename
        if not os.path.lexists(path):
            return
        try:
            trash.mkdir(mode=0o700, exist_ok=True)
        except FileExistsError:  # there at mkdir, emptied and removed by the thread since
            continue
        try:
            os.rename(path, trash / f"{path.name}.{secrets.token_hex(4)}")
        except FileNotFoundError:
            continue
        except OSError:
            break
        empty_later(trash)
        return
    shutil.rmtree(path, ignore_errors=True)
    if os.path.lexists(path):
        shutil.rmtree(path)


def empty_later(trash: Path) -> None:
    """Delete everything in ``trash`` on the background thread (leftovers of a killed
    process: a manager's recovery calls it)."""
    global _thread
    with _lock:
        _pending[trash] = None
        if _thread is None or not _thread.is_alive():
            _thread = threading.Thread(target=_run, name="podkit-trash", daemon=True)
            _thread.start()
        _lock.notify_all()


def wait(timeout: float | None = None) -> bool:
    """Block until every trash handed over is empty (a clean stop, tests); whether it is."""
    with _lock:
        return _lock.wait_for(lambda: not _pending and not _busy, timeout)


def _run() -> None:
    global _busy
    while True:
        with _lock:
            _lock.wait_for(lambda: bool(_pending))
            trash = next(iter(_pending))
            del _pending[trash]
            _busy = True
        try:
            _empty(trash)
        finally:
            with _lock:
                _busy = False
                _lock.notify_all()


def _empty(trash: Path) -> None:
    try:
        entries = list(trash.iterdir())
    except FileNotFoundError:
        return
    except OSError as exc:
        _log.warning("cannot list %s: %s", trash, exc)
        return
    for entry in entries:
        shutil.rmtree(entry, ignore_errors=True)
        if entry.exists():
            with contextlib.suppress(OSError):  # a file rather than a dir
                entry.unlink()
        if entry.exists():
            _log.warning("could not delete %s (left for the next removal)", entry)
    with contextlib.suppress(OSError):  # not empty: something new came in, or was left
        trash.rmdir()
