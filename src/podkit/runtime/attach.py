"""The client side of conmon's attach socket, and docker's detach-key notation.

conmon serves ``<socket-dir>/<cuuid>/attach``: ``SOCK_SEQPACKET``; every message from conmon
starts with one byte naming the stream (2 stdout, 3 stderr), then up to 8192 bytes of output;
bytes a client sends go to the container's stdin (with ``--stdin``); a client's EOF closes the
container's stdin unless ``--leave-stdin-open``. Any number of clients; each sees output from
its connect on.
"""

from __future__ import annotations

import contextlib
import errno
import os
import socket
import time
from typing import BinaryIO

from podkit.errors import InvalidArgumentError
from podkit.runtime.errors import RuntimeTimeoutError
from podkit.runtime.io import wait_readable
from podkit.runtime.logs import STDERR, STDOUT

__all__ = [
    "ATTACH_STDERR",
    "ATTACH_STDOUT",
    "DEFAULT_DETACH_KEYS",
    "Attachment",
    "parse_detach_keys",
]

ATTACH_STDOUT = 2
ATTACH_STDERR = 3
_ATTACH_STREAMS = {ATTACH_STDOUT: STDOUT, ATTACH_STDERR: STDERR}
_ATTACH_BUF = 8192 + 1  # conmon's STDIO_BUF_SIZE plus the stream byte

DEFAULT_DETACH_KEYS = "ctrl-p,ctrl-q"
"""Docker's and podman's default detach sequence."""


def parse_detach_keys(spec: str) -> bytes:
    """Turn docker's detach-key notation (``"ctrl-p,ctrl-q"``, ``"a,ctrl-@"``) into bytes."""
    out = bytearray()
    for raw in spec.split(","):
        key = raw.strip()
        if len(key) == 1:
            out.append(ord(key))
            continue
        if key.startswith("ctrl-") and len(key) == 6:
            ch = key[5]
            if ch.isalpha():
                out.append(ord(ch.lower()) - ord("a") + 1)
                continue
            if ch in "@[\\]^_":
                out.append("@[\\]^_".index(ch) + (0 if ch == "@" else 26))
                continue
        raise InvalidArgumentError(
            f"invalid detach key {key!r} in {spec!r}: want a single character or ctrl-<key>"
        )
    if not out:
        raise InvalidArgumentError(f"invalid detach keys {spec!r}: empty")
    return bytes(out)


class Attachment:
    """One client connection to a container's conmon attach socket.

    :meth:`recv` returns ``(stream, data)`` messages until conmon closes the connection (the
    container exited); :meth:`send` writes to the container's stdin; :meth:`close_stdin` ends
    it. :meth:`copy` pumps everything between the container and local files, with a detach key.
    """

    def __init__(self, sock: socket.socket, container_id: str) -> None:
        self._sock = sock
        self.container_id = container_id

    def fileno(self) -> int:
        """The socket fd (for ``poll`` or ``selectors``)."""
        return self._sock.fileno()

    def recv(self, timeout: float | None = None) -> tuple[str, bytes] | None:
        """The next output message, or ``None`` when conmon closed the connection.

        Raises :class:`RuntimeTimeoutError` when nothing arrived within ``timeout`` seconds.
        """
        while True:
            if not wait_readable([self._sock.fileno()], timeout):
                raise RuntimeTimeoutError(
                    f"no output from container {self.container_id} within {timeout}s"
                )
            try:
                msg = self._sock.recv(_ATTACH_BUF)
            except OSError as exc:
                if exc.errno in (errno.ECONNRESET, errno.EBADF, errno.ENOTCONN):
                    return None
                raise
            if not msg:
                return None
            stream = _ATTACH_STREAMS.get(msg[0])
            if stream is not None:
                return stream, msg[1:]

    def read_until_eof(self, timeout: float | None = None) -> dict[str, bytes]:
        """Collect output per stream until conmon closes the connection."""
        out = {STDOUT: bytearray(), STDERR: bytearray()}
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            item = self.recv(left)
            if item is None:
                return {k: bytes(v) for k, v in out.items()}
            out[item[0]] += item[1]

    def send(self, data: bytes) -> None:
        """Write ``data`` to the container's stdin (needs ``stdin=True`` at create)."""
        for start in range(0, len(data), _ATTACH_BUF - 1):
            self._sock.sendall(data[start : start + _ATTACH_BUF - 1])

    def close_stdin(self) -> None:
        """Signal EOF on stdin (conmon closes the container's stdin unless told to keep it)."""
        with contextlib.suppress(OSError):
            self._sock.shutdown(socket.SHUT_WR)

    def copy(
        self,
        stdout: BinaryIO | None = None,
        stderr: BinaryIO | None = None,
        stdin: BinaryIO | None = None,
        *,
        detach_keys: str | bytes | None = DEFAULT_DETACH_KEYS,
        close_stdin: bool = True,
    ) -> str:
        """Pump output to ``stdout``/``stderr`` and ``stdin`` to the container.

        Returns ``"exited"`` when the container's output ended, ``"detached"`` when the detach
        sequence was read from ``stdin`` (it is not forwarded; the container keeps running).
        At EOF of ``stdin`` the container's stdin is closed when ``close_stdin``.
        """
        keys = b""
        if detach_keys:
            keys = detach_keys if isinstance(detach_keys, bytes) else parse_detach_keys(
                detach_keys
            )
        sinks = {STDOUT: stdout, STDERR: stderr}
        in_fd = stdin.fileno() if stdin is not None else None
        matched = 0
        while True:
            watch = [self._sock.fileno()] + ([in_fd] if in_fd is not None else [])
            ready = wait_readable(watch, None)
            if in_fd is not None and in_fd in ready:
                data = os.read(in_fd, 4096)
                if not data:
                    in_fd = None
                    if close_stdin:
                        self.close_stdin()
                else:
                    forward = bytearray()
                    for byte in data:
                        if keys and byte == keys[matched]:
                            matched += 1
                            if matched == len(keys):
                                if forward:
                                    self.send(bytes(forward))
                                return "detached"
                            continue
                        if matched:
                            forward += keys[:matched]
                            matched = 0
                        forward.append(byte)
                    if forward:
                        self.send(bytes(forward))
            if self._sock.fileno() in ready:
                item = self.recv(0)
                if item is None:
                    return "exited"
                sink = sinks[item[0]]
                if sink is not None:
                    sink.write(item[1])
                    sink.flush()

    def close(self) -> None:
        """Disconnect (detach); the container keeps running."""
        self._sock.close()

    def __enter__(self) -> Attachment:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
