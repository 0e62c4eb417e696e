"""TTY for containers: the ``--console-socket`` listener and the pty master it receives.

With ``process.terminal: true`` the runtime (``runc create``/``run``/``exec -t``) allocates a
pty inside the container and sends the *master* end over the Unix socket named by
``--console-socket`` (``SCM_RIGHTS``, one fd; runc names it ``/dev/ptmx``, crun ``" "``).
:class:`ConsoleSocket` is that listener; :meth:`ConsoleSocket.receive` returns a
:class:`Console` wrapping the master: read the container's output, write its input, resize it
(``TIOCSWINSZ``, seen by ``stty size`` inside), or copy its output to a file or a
:class:`~podkit.runtime.logs.CRILogWriter` on a thread.

The runtime connects and sends while ``create`` runs and does not wait for an ``accept``, so
calling :meth:`ConsoleSocket.receive` after ``create`` returned is fine.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import shutil
import socket
import struct
import tempfile
import termios
import threading
from pathlib import Path
from typing import BinaryIO

from podkit.errors import InvalidArgumentError
from podkit.runtime.errors import OCIRuntimeError, RuntimeTimeoutError
from podkit.runtime.io import wait_readable
from podkit.runtime.logs import STDOUT, CRILogWriter

__all__ = ["Console", "ConsoleSocket", "get_winsize", "set_winsize"]

_SUN_PATH_MAX = 107  # sizeof(sockaddr_un.sun_path) - 1 for the NUL
_WINSIZE = struct.Struct("HHHH")


def set_winsize(fd: int, rows: int, cols: int) -> None:
    """Set a terminal's window size (``TIOCSWINSZ``); the foreground process gets SIGWINCH."""
    for name, value in (("rows", rows), ("cols", cols)):
        if not 0 < value < 65536:
            raise InvalidArgumentError(f"invalid terminal {name} {value}: want 1..65535")
    fcntl.ioctl(fd, termios.TIOCSWINSZ, _WINSIZE.pack(rows, cols, 0, 0))


def get_winsize(fd: int) -> tuple[int, int]:
    """A terminal's ``(rows, cols)`` (``TIOCGWINSZ``)."""
    rows, cols, _, _ = _WINSIZE.unpack(fcntl.ioctl(fd, termios.TIOCGWINSZ, bytes(_WINSIZE.size)))
    return rows, cols


class Console:
    """The master side of a container's pty; owns ``fd`` until :meth:`close`.

    Reads return ``b""`` at the end (the kernel reports ``EIO`` once every slave fd is closed,
    i.e. the container's processes on the tty have exited).
    """

    def __init__(self, fd: int, name: str = "") -> None:
        self.fd = fd
        self.name = name
        self._threads: list[threading.Thread] = []

    def fileno(self) -> int:
        """The master fd."""
        return self.fd

    def resize(self, rows: int, cols: int) -> None:
        """Change the window size the container sees."""
        set_winsize(self.fd, rows, cols)

    def size(self) -> tuple[int, int]:
        """Current ``(rows, cols)``."""
        return get_winsize(self.fd)

    def read(self, size: int = 65536) -> bytes:
        """Read what the container wrote; ``b""`` at the end."""
        try:
            return os.read(self.fd, size)
        except OSError as exc:
            if exc.errno == errno.EIO:
                return b""
            raise

    def read_all(self) -> bytes:
        """Read until the end (every process on the tty has exited)."""
        chunks = []
        while chunk := self.read():
            chunks.append(chunk)
        return b"".join(chunks)

    def write(self, data: bytes) -> None:
        """Type ``data`` into the container's terminal."""
        view = memoryview(data)
        while view:
            view = view[os.write(self.fd, view) :]

    def copy_to(self, target: CRILogWriter | BinaryIO) -> threading.Thread:
        """Copy output to a CRI log (as ``stdout``, conmon's rule for a tty) or a binary file.

        Runs on a daemon thread until the end of output; the thread reads a dup of the master,
        so :meth:`close` and :meth:`resize` stay usable meanwhile. :meth:`join` waits for it.
        """
        dup = os.dup(self.fd)
        try:
            thread = _start_copy(dup, target)
        except BaseException:  # no thread took the dup
            os.close(dup)
            raise
        self._threads.append(thread)
        return thread

    def join(self, timeout: float | None = None) -> bool:
        """Wait for :meth:`copy_to` threads; True when all finished."""
        for thread in self._threads:
            thread.join(timeout)
        return not any(t.is_alive() for t in self._threads)

    def close(self) -> None:
        """Close the master (the container's tty gets a hangup if nobody else holds it)."""
        if self.fd >= 0:
            with contextlib.suppress(OSError):
                os.close(self.fd)
            self.fd = -1

    def __enter__(self) -> Console:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _start_copy(fd: int, target: CRILogWriter | BinaryIO) -> threading.Thread:
    """A started daemon thread copying ``fd`` (it closes it at the end) into ``target``."""
    if isinstance(target, CRILogWriter):
        return target.pump(fd, STDOUT)

    def run() -> None:
        try:
            while True:
                try:
                    chunk = os.read(fd, 65536)
                except OSError:
                    break
                if not chunk:
                    break
                target.write(chunk)
                target.flush()
        finally:
            os.close(fd)

    thread = threading.Thread(target=run, name="console-copy", daemon=True)
    thread.start()
    return thread


class ConsoleSocket:
    """A listening ``AF_UNIX`` stream socket to pass as ``--console-socket``.

    Without ``path`` the socket lives in a private temp dir (``/tmp/pk-console-*``) removed by
    :meth:`close`; a given ``path`` must fit ``sun_path`` (107 bytes).
    """

    def __init__(self, path: str | os.PathLike[str] | None = None) -> None:
        self._tmpdir: str | None = None
        if path is None:
            self._tmpdir = tempfile.mkdtemp(prefix="pk-console-")
            path = os.path.join(self._tmpdir, "console.sock")
        self.path = Path(path)
        if len(os.fsencode(self.path)) > _SUN_PATH_MAX:
            self._cleanup_dir()
            raise InvalidArgumentError(
                f"console socket path {os.fspath(self.path)!r} is longer than {_SUN_PATH_MAX} "
                "bytes (sun_path); use a shorter one or none"
            )
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM | socket.SOCK_CLOEXEC)
        try:
            self._sock.bind(os.fspath(self.path))
            os.chmod(self.path, 0o700)
            self._sock.listen(1)
        except BaseException:
            self._sock.close()
            self._cleanup_dir()
            raise

    def _cleanup_dir(self) -> None:
        if self._tmpdir is not None:
            shutil.rmtree(self._tmpdir, ignore_errors=True)
            self._tmpdir = None

    def __fspath__(self) -> str:
        return os.fspath(self.path)

    def receive(self, timeout: float | None = 30.0) -> Console:
        """Accept the runtime's connection and take the pty master it sends.

        Raises :class:`~podkit.runtime.errors.RuntimeTimeoutError` when no runtime connected
        within ``timeout`` seconds, :class:`~podkit.runtime.errors.OCIRuntimeError` when the
        peer sent no descriptor.
        """
        if self._sock.fileno() < 0:
            raise InvalidArgumentError(f"console socket {self.path} is closed")
        if not wait_readable([self._sock.fileno()], timeout):
            raise RuntimeTimeoutError(
                f"no runtime connected to console socket {self.path} within {timeout}s"
            )
        conn, _ = self._sock.accept()
        with conn:
            conn.settimeout(timeout)
            try:
                msg, fds, _flags, _addr = socket.recv_fds(conn, 4096, 1)
            except TimeoutError:
                raise RuntimeTimeoutError(
                    f"runtime connected to console socket {self.path} but sent nothing"
                ) from None
        if not fds:
            raise OCIRuntimeError(f"runtime sent no pty master over console socket {self.path}")
        return Console(fds[0], msg.decode(errors="replace").strip("\0"))

    def close(self) -> None:
        """Stop listening and remove the socket (and its temp dir)."""
        self._sock.close()
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()
        self._cleanup_dir()

    def __enter__(self) -> ConsoleSocket:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
