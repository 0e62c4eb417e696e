"""A private scratch directory shared by concurrent calls, removed when the last one ends.

``Runc`` keeps pid files and process specs there: on tmpfs (``/dev/shm``) when writable, so
they never touch a disk, and reference-counted, so nothing is left behind.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import threading
from collections.abc import Iterator

__all__ = ["ScratchDir"]

_SHM = "/dev/shm"


class ScratchDir:
    """``use()`` yields the directory (made on first use); the last user out removes it.

    It is made in ``parent`` (created when missing), else on ``/dev/shm`` when writable, else
    in the temp dir."""

    def __init__(self, prefix: str, parent: str | os.PathLike[str] | None = None) -> None:
        self.prefix = prefix
        self.parent = os.fspath(parent) if parent is not None else None
        self.path: str | None = None
        self._users = 0
        self._lock = threading.Lock()

    @contextlib.contextmanager
    def use(self) -> Iterator[str]:
        """The directory, for the duration of the ``with`` block."""
        with self._lock:
            if self.path is None:
                base = self.parent
                if base is not None:
                    os.makedirs(base, mode=0o700, exist_ok=True)
                elif os.path.isdir(_SHM) and os.access(_SHM, os.W_OK):
                    base = _SHM
                self.path = tempfile.mkdtemp(prefix=self.prefix, dir=base)
            self._users += 1
            path = self.path
        try:
            yield path
        finally:
            with self._lock:
                self._users -= 1
                if self._users == 0 and self.path is not None:
                    shutil.rmtree(self.path, ignore_errors=True)
                    self.path = None
