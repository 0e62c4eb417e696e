"""What the streaming server hands a backend: requests, byte streams, resize events, the seam.

:class:`StreamingRuntime` is the one interface the server drives; ``podkit.cri.streaming.runtime``
implements it on ``podkit.runtime`` and ``podkit.netns``, tests can implement it in memory.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Iterator, Sequence
from typing import Protocol, runtime_checkable

import attrs

__all__ = [
    "AttachRequest",
    "DuplexStream",
    "ExecRequest",
    "InputStream",
    "OutputStream",
    "PortForwardRequest",
    "ResizeQueue",
    "StreamingRuntime",
    "TerminalSize",
]


@attrs.frozen
class ExecRequest:
    """CRI ``ExecRequest``: run ``cmd`` in ``container_id`` with the chosen streams."""

    container_id: str
    cmd: tuple[str, ...]
    tty: bool = False
    stdin: bool = False
    stdout: bool = False
    stderr: bool = False


@attrs.frozen
class AttachRequest:
    """CRI ``AttachRequest``: connect to the main process of ``container_id``."""

    container_id: str
    tty: bool = False
    stdin: bool = False
    stdout: bool = False
    stderr: bool = False


@attrs.frozen
class PortForwardRequest:
    """CRI ``PortForwardRequest``: forward ``port`` s of the pod's network namespace."""

    pod_sandbox_id: str
    port: tuple[int, ...] = ()


@attrs.frozen
class TerminalSize:
    """A terminal size as the resize stream carries it (``{"Width": w, "Height": h}``)."""

    width: int
    height: int


class InputStream(Protocol):
    """Bytes from the client (stdin, or a port-forward data stream)."""

    def read(self, size: int = 65536) -> bytes:
        """Up to ``size`` bytes, blocking; ``b""`` once the client closed it."""
        ...


class OutputStream(Protocol):
    """Bytes to the client (stdout, stderr)."""

    @property
    def closed(self) -> bool:
        """True once the stream or the whole connection is gone (stop producing)."""
        ...

    def write(self, data: bytes) -> None:
        """Send ``data``; raises ``BrokenPipeError`` when the client is gone."""
        ...

    def close(self) -> None:
        """No more data (the client sees the end of this stream)."""
        ...


class DuplexStream(InputStream, OutputStream, Protocol):
    """A port-forward data stream: read from and write to the client."""


class ResizeQueue:
    """Terminal resize events from the client, in order; iterate until the stream ends.

    Thread-safe: the server :meth:`put` s, the backend iterates (or :meth:`get` s).
    """

    def __init__(self, sizes: Sequence[TerminalSize] = ()) -> None:
        self._items: deque[TerminalSize] = deque(sizes)
        self._closed = False
        self._cond = threading.Condition()

    def put(self, size: TerminalSize) -> None:
        """Queue one event."""
        with self._cond:
            self._items.append(size)
            self._cond.notify_all()

    def close(self) -> None:
        """No more events; iteration ends once the queue drained."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()

    def get(self, timeout: float | None = None) -> TerminalSize | None:
        """The next event; ``None`` at the end or after ``timeout`` seconds without one."""
        with self._cond:
            self._cond.wait_for(lambda: self._items or self._closed, timeout)
            return self._items.popleft() if self._items else None

    @property
    def closed(self) -> bool:
        """True once :meth:`close` was called (events may still be queued)."""
        return self._closed

    def __iter__(self) -> Iterator[TerminalSize]:
        while (size := self.get()) is not None:
            yield size


@runtime_checkable
class StreamingRuntime(Protocol):
    """The backend of the streaming server (kubelet's ``streaming.Runtime``).

    Methods block until the session ends and raise on failure (the client gets an
    ``InternalError`` status naming the error). ``None`` streams were not requested.
    """

    def exec(
        self,
        container_id: str,
        cmd: Sequence[str],
        stdin: InputStream | None,
        stdout: OutputStream | None,
        stderr: OutputStream | None,
        tty: bool,
        resize: ResizeQueue | None,
    ) -> int:
        """Run ``cmd`` in the container, pumping the streams; its exit code."""
        ...

    def attach(
        self,
        container_id: str,
        stdin: InputStream | None,
        stdout: OutputStream | None,
        stderr: OutputStream | None,
        tty: bool,
        resize: ResizeQueue | None,
    ) -> None:
        """Connect the streams to the container's main process until it exits or the client
        leaves."""
        ...

    def port_forward(self, pod_sandbox_id: str, port: int, stream: DuplexStream) -> None:
        """Connect ``stream`` to ``localhost:port`` inside the pod's network namespace."""
        ...
