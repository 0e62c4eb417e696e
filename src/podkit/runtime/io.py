"""Container stdio for runtime commands: null, pipes, files, the caller's own stdio.

An ``IO`` tells the adapter which file descriptors become the runtime process's stdin, stdout
and stderr (the container inherits them from ``runc create``/``run``/``exec``), and what to close
in the parent once the runtime command has started. podkit never reads such a pipe to EOF while
waiting for the runtime command: the container keeps the write end open for its whole life.
The TTY (console socket) and the CRI log writer live in ``console.py`` / ``logs.py`` and use the
same protocol.
"""

from __future__ import annotations

import contextlib
import fcntl
import math
import os
import select
import threading
from collections.abc import Iterable
from pathlib import Path
from typing import IO as _FileObj
from typing import Protocol, runtime_checkable

__all__ = [
    "EXEC_SYNC_OUTPUT_MAX",
    "IO",
    "CappedOutput",
    "FileIO",
    "InheritIO",
    "NullIO",
    "PipeIO",
    "wait_readable",
]

EXEC_SYNC_OUTPUT_MAX = 16 * 1024 * 1024
"""Bytes of stdout, and of stderr, that ``exec_sync`` keeps (containerd's and CRI-O's cap)."""

_CHUNK = 64 * 1024


def wait_readable(fds: Iterable[int], timeout: float | None) -> set[int]:
    """The descriptors of ``fds`` readable (or hung up) within ``timeout`` s; ``None`` waits on.

    ``poll(2)``, never ``select(2)``, so descriptor numbers past 1024 (``FD_SETSIZE``) work.
    """
    poller = select.poll()
    for fd in fds:
        poller.register(fd, select.POLLIN)
    millis = None if timeout is None else max(0, math.ceil(timeout * 1000))
    return {fd for fd, _ in poller.poll(millis)}


@runtime_checkable
class IO(Protocol):
    """Stdio of a container process, as handed to the runtime command."""

    def child_fds(self) -> tuple[int | None, int | None, int | None]:
        """Descriptors for the child's stdin, stdout, stderr (``None``: ``/dev/null``)."""
        ...

    def close_after_start(self) -> None:
        """Close the parent's copies of the child-side descriptors (the child holds its own)."""
        ...

    def close(self) -> None:
        """Release every descriptor this IO still holds."""
        ...


def _close(fd: int | None) -> None:
    if fd is not None:
        with contextlib.suppress(OSError):
            os.close(fd)


class NullIO:
    """Everything to and from ``/dev/null`` (go-runc ``NewNullIO``)."""

    def __init__(self) -> None:
        self._fd: int | None = None

    def child_fds(self) -> tuple[int | None, int | None, int | None]:
        """``/dev/null`` for all three."""
        if self._fd is None:
            self._fd = os.open(os.devnull, os.O_RDWR | os.O_CLOEXEC)
        return self._fd, self._fd, self._fd

    def close_after_start(self) -> None:
        """Close ``/dev/null``."""
        self.close()

    def close(self) -> None:
        """Close ``/dev/null``."""
        _close(self._fd)
        self._fd = None


class InheritIO:
    """The caller's own stdin/stdout/stderr (go-runc ``NewSTDIO``); nothing to close."""

    def child_fds(self) -> tuple[int | None, int | None, int | None]:
        """Descriptors 0, 1 and 2."""
        return 0, 1, 2

    def close_after_start(self) -> None:
        """Nothing: the caller's stdio stays open."""

    def close(self) -> None:
        """Nothing: the caller's stdio stays open."""


class PipeIO:
    """One pipe per stream; the parent keeps ``stdin`` (write), ``stdout``/``stderr`` (read).

    ``uid``/``gid`` chown the child-side ends so a non-root container user can open
    ``/proc/self/fd/N`` on them (go-runc ``NewPipeIO``). Read the parent ends concurrently
    (threads or selectors) while the container runs; they reach EOF when every process holding
    the child end has exited.
    """

    def __init__(
        self,
        uid: int | None = None,
        gid: int | None = None,
        *,
        stdin: bool = True,
        stdout: bool = True,
        stderr: bool = True,
    ) -> None:
        self.stdin: _FileObj[bytes] | None = None
        self.stdout: _FileObj[bytes] | None = None
        self.stderr: _FileObj[bytes] | None = None
        self._child: list[int | None] = [None, None, None]
        try:
            if stdin:
                r, w = os.pipe()
                self._child[0] = r
                self.stdin = os.fdopen(w, "wb", buffering=0)
            if stdout:
                r, w = os.pipe()
                self._child[1] = w
                self.stdout = os.fdopen(r, "rb", buffering=0)
            if stderr:
                r, w = os.pipe()
                self._child[2] = w
                self.stderr = os.fdopen(r, "rb", buffering=0)
            if uid is not None or gid is not None:
                for fd in self._child:
                    if fd is not None:
                        os.fchown(fd, -1 if uid is None else uid, -1 if gid is None else gid)
        except BaseException:
            self.close()
            raise

    def child_fds(self) -> tuple[int | None, int | None, int | None]:
        """The child-side ends (``None`` for a stream not requested)."""
        return self._child[0], self._child[1], self._child[2]

    def close_after_start(self) -> None:
        """Close the child-side ends so EOF arrives when the container closes its copies."""
        for i, fd in enumerate(self._child):
            _close(fd)
            self._child[i] = None

    def close(self) -> None:
        """Close both ends of every pipe."""
        self.close_after_start()
        for f in (self.stdin, self.stdout, self.stderr):
            if f is not None:
                f.close()


class FileIO:
    """stdout and stderr appended to files (stderr to the stdout file when not given).

    ``stdin_path`` (optional) is opened read-only; without it stdin is ``/dev/null``.
    """

    def __init__(
        self,
        stdout_path: str | os.PathLike[str],
        stderr_path: str | os.PathLike[str] | None = None,
        *,
        stdin_path: str | os.PathLike[str] | None = None,
        mode: int = 0o640,
    ) -> None:
        self.stdout_path = Path(stdout_path)
        self.stderr_path = Path(stderr_path) if stderr_path is not None else self.stdout_path
        self.stdin_path = Path(stdin_path) if stdin_path is not None else None
        self._mode = mode
        self._fds: list[int] = []

    def _open(self, path: Path, flags: int) -> int:
        fd = os.open(path, flags | os.O_CLOEXEC, self._mode)
        self._fds.append(fd)
        return fd

    def child_fds(self) -> tuple[int | None, int | None, int | None]:
        """Open the files (append mode) and return their descriptors."""
        self.close()
        try:
            wflags = os.O_WRONLY | os.O_CREAT | os.O_APPEND
            out = self._open(self.stdout_path, wflags)
            err = out if self.stderr_path == self.stdout_path else self._open(
                self.stderr_path, wflags
            )
            inp = self._open(self.stdin_path, os.O_RDONLY) if self.stdin_path else None
        except BaseException:
            self.close()
            raise
        return inp, out, err

    def close_after_start(self) -> None:
        """Close the parent's copies of the files."""
        self.close()

    def close(self) -> None:
        """Close every descriptor opened by ``child_fds``."""
        for fd in self._fds:
            _close(fd)
        self._fds = []


class CappedOutput:
    """stdout and stderr pipes read on a thread; the first ``limit`` bytes of each are kept.

    Output past ``limit`` is read and dropped, so the writer never blocks and keeps its exit
    code. :meth:`finish` (once the process has exited) takes what is left in the pipes without
    waiting for EOF, so a background child that inherited them cannot hold the caller.
    """

    def __init__(self, limit: int = EXEC_SYNC_OUTPUT_MAX) -> None:
        self.limit = limit
        self.kept = (bytearray(), bytearray())
        self.dropped = [0, 0]
        self._read: list[int] = []
        self._child: list[int | None] = [None, None]
        self._stop_r, self._stop_w = os.pipe2(os.O_CLOEXEC | os.O_NONBLOCK)
        try:
            for i in range(2):
                r, w = os.pipe2(os.O_CLOEXEC)
                os.set_blocking(r, False)
                self._read.append(r)
                self._child[i] = w
        except BaseException:
            self.close()
            raise
        self._thread = threading.Thread(target=self._pump, name="podkit-exec-output",
                                        daemon=True)
        self._thread.start()

    def child_fds(self) -> tuple[int | None, int | None, int | None]:
        """``/dev/null`` stdin, the write ends of the two pipes."""
        return None, self._child[0], self._child[1]

    def close_after_start(self) -> None:
        """Close the parent's copies of the write ends."""
        for i, fd in enumerate(self._child):
            _close(fd)
            self._child[i] = None

    def finish(self) -> tuple[bytes, bytes]:
        """Take what is buffered in the pipes, stop reading; the kept stdout and stderr."""
        with contextlib.suppress(OSError):
            os.write(self._stop_w, b"x")
        self._thread.join()
        return bytes(self.kept[0]), bytes(self.kept[1])

    def __enter__(self) -> CappedOutput:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Stop the reader and close every descriptor."""
        self.close_after_start()
        if getattr(self, "_thread", None) is not None and self._thread.is_alive():
            self.finish()
        for fd in (*self._read, self._stop_r, self._stop_w):
            _close(fd)
        self._read = []
        self._stop_r = self._stop_w = -1

    def _pump(self) -> None:
        open_fds = dict(zip(self._read, range(2), strict=True))
        poller = select.poll()
        for fd in (*open_fds, self._stop_r):
            poller.register(fd, select.POLLIN)
        while open_fds:
            ready = {fd for fd, _ in poller.poll()}
            for fd in ready & open_fds.keys():
                if not self._read_once(fd, open_fds[fd]):
                    poller.unregister(fd)
                    del open_fds[fd]
            if self._stop_r in ready:
                for fd, i in open_fds.items():
                    self._drain(fd, i)
                return

    def _read_once(self, fd: int, i: int) -> bool:
        """One read into stream ``i``; False at EOF."""
        try:
            chunk = os.read(fd, _CHUNK)
        except BlockingIOError:
            return True
        self._keep(i, chunk)
        return bool(chunk)

    def _drain(self, fd: int, i: int) -> None:
        """What the pipe holds now (at most its capacity more), without waiting for EOF."""
        budget = fcntl.fcntl(fd, fcntl.F_GETPIPE_SZ)
        while budget > 0:
            try:
                chunk = os.read(fd, min(_CHUNK, budget))
            except BlockingIOError:
                return
            if not chunk:
                return
            self._keep(i, chunk)
            budget -= len(chunk)

    def _keep(self, i: int, chunk: bytes) -> None:
        room = self.limit - len(self.kept[i])
        self.kept[i].extend(chunk[:max(room, 0)])
        self.dropped[i] += max(len(chunk) - max(room, 0), 0)
