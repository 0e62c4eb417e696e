"""Follow a CRI log file as it grows, across rotation and truncation (``tail -F`` for CRI logs).

The writer (conmon, :class:`~podkit.runtime.logs.CRILogWriter`) rotates by rename + reopen
(CRI ``ReopenContainerLog``) or truncates in place (a size cap with one file). A follower keeps
the open file until the path names a new inode, drains the old file first, then reads the new
one from its start; a file that shrank below the read offset is read again from its start.
Records are returned whole: a record still being written (no newline yet) waits for the next
read. :class:`LineJoiner` joins ``P`` chunks with their ``F`` record as records arrive.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable, Iterator

from podkit.runtime.logs import CRILogEntry, CRILogLine, parse_cri_log_line

__all__ = ["CRILogFollower", "LineJoiner", "follow_cri_log"]

_CHUNK = 64 * 1024


class CRILogFollower:
    """Incremental reader of one CRI log path; :meth:`read` returns the records written since
    the last call (the first call: the whole current file). A missing file reads as empty."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = os.fspath(path)
        self._fd: int | None = None
        self._ino: tuple[int, int] | None = None
        self._offset = 0
        self._buf = b""
        self._line = 0

    def _open(self) -> bool:
        try:
            fd = os.open(self.path, os.O_RDONLY | os.O_CLOEXEC)
        except FileNotFoundError:
            return False
        st = os.fstat(fd)
        self._fd, self._ino, self._offset, self._buf, self._line = (
            fd, (st.st_dev, st.st_ino), 0, b"", 0)
        return True

    def _path_inode(self) -> tuple[int, int] | None:
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            return None
        return st.st_dev, st.st_ino

    def _drain(self, out: list[CRILogEntry]) -> None:
        """Read the open file to its end; a file now shorter than the offset starts over."""
        assert self._fd is not None
        if os.fstat(self._fd).st_size < self._offset:
            self._offset, self._buf = 0, b""
        while chunk := os.pread(self._fd, _CHUNK, self._offset):
            self._offset += len(chunk)
            self._buf += chunk
        *lines, self._buf = self._buf.split(b"\n")
        for raw in lines:
            self._line += 1
            if raw.strip():
                out.append(parse_cri_log_line(
                    raw, where=f"record {self._line} of {self.path}"))

    def read(self) -> list[CRILogEntry]:
        """The whole records written since the last call, oldest first."""
        out: list[CRILogEntry] = []
        if self._fd is None and not self._open():
            return out
        while True:
            self._drain(out)
            now = self._path_inode()
            if now is None or now == self._ino:
                return out
            self.close()  # rotated: the old file is drained, the path names a new one
            if not self._open():
                return out

    def close(self) -> None:
        """Close the open file (a later :meth:`read` opens the path again from its start)."""
        if self._fd is not None:
            with contextlib.suppress(OSError):
                os.close(self._fd)
            self._fd = None

    def __enter__(self) -> CRILogFollower:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class LineJoiner:
    """Join ``P`` records with the ``F`` record that ends them, per stream, as they arrive."""

    def __init__(self) -> None:
        self._pending: dict[str, list[CRILogEntry]] = {}

    def feed(self, entry: CRILogEntry) -> CRILogLine | None:
        """The line ``entry`` completes, or ``None`` while its line goes on."""
        chunks = self._pending.setdefault(entry.stream, [])
        chunks.append(entry)
        if entry.partial:
            return None
        del self._pending[entry.stream]
        return CRILogLine(chunks[0].time_ns, entry.stream, b"".join(c.content for c in chunks))

    def flush(self) -> list[CRILogLine]:
        """The unfinished lines (``complete=False``), oldest first; forgets them."""
        lines = [CRILogLine(c[0].time_ns, s, b"".join(e.content for e in c), complete=False)
                 for s, c in self._pending.items() if c]
        self._pending.clear()
        return sorted(lines, key=lambda line: line.time_ns)


def follow_cri_log(
    path: str | os.PathLike[str] | CRILogFollower,
    done: Callable[[], bool],
    *,
    interval: float = 0.2,
    sleep: Callable[[float], object] = time.sleep,
) -> Iterator[CRILogEntry]:
    """Records of ``path`` as they are written, until ``done()`` is true (the writer finished)
    and the file is drained. ``done`` is asked before each read, so a record written before
    it turned true is still returned."""
    follower = path if isinstance(path, CRILogFollower) else CRILogFollower(path)
    try:
        while True:
            finished = done()
            batch = follower.read()
            yield from batch
            if finished and not batch:
                return
            if not batch:
                sleep(interval)
    finally:
        follower.close()
