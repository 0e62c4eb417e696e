"""One upgraded connection's session: exec/attach (remotecommand) and port-forward, over SPDY
or WebSocket, driving a :class:`~podkit.cri.streaming.types.StreamingRuntime`.

Called by :class:`~podkit.cri.streaming.StreamingServer` after the handshake; each ``serve_*``
returns when the session is over and its connection closed.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import json
import socket
import struct
import threading
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from podkit.cri.streaming import spdy, ws
from podkit.cri.streaming.types import (
    AttachRequest,
    ExecRequest,
    InputStream,
    OutputStream,
    PortForwardRequest,
    ResizeQueue,
    StreamingRuntime,
    TerminalSize,
)
from podkit.cri.streaming.wire import (
    CH_CLOSE,
    CH_ERROR,
    CH_RESIZE,
    CH_STDERR,
    CH_STDIN,
    CH_STDOUT,
    HEADER_PORT,
    HEADER_REQUEST_ID,
    PROTOCOL_V3,
    PROTOCOL_V4,
    PROTOCOL_V5,
    STREAM_DATA,
    STREAM_ERROR,
    STREAM_RESIZE,
    STREAM_STDERR,
    STREAM_STDIN,
    STREAM_STDOUT,
    STREAM_TYPE,
    WS_PORTFORWARD,
    WS_REMOTECOMMAND,
    WS_V4_BASE64,
    encode_status,
    status_exit_code,
    status_internal_error,
    status_success,
)

__all__ = [
    "Live",
    "Track",
    "WsTunnel",
    "serve_spdy_portforward",
    "serve_spdy_remotecommand",
    "serve_ws_portforward",
    "serve_ws_remotecommand",
]

_LINGER = 5.0


# --- stream plumbing -------------------------------------------------------------------------


class _Pipe:
    """An in-memory byte pipe: the WebSocket reader feeds it, the runtime reads it."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._buf = bytearray()
        self._eof = False

    def feed(self, data: bytes) -> None:
        with self._cond:
            if not self._eof:
                self._buf += data
                self._cond.notify_all()

    def close(self) -> None:
        with self._cond:
            self._eof = True
            self._cond.notify_all()

    def read(self, size: int = 65536) -> bytes:
        with self._cond:
            self._cond.wait_for(lambda: self._buf or self._eof)
            chunk = bytes(self._buf[:size])
            del self._buf[:size]
            return chunk


def _pump_resizes(source: InputStream, queue: ResizeQueue) -> threading.Thread:
    """Decode the JSON ``{"Width":..,"Height":..}`` objects of a resize stream into ``queue``."""

    def run() -> None:
        decoder = json.JSONDecoder()
        buf = ""
        try:
            while chunk := source.read(4096):
                buf += chunk.decode("utf-8", errors="replace")
                while True:
                    buf = buf.lstrip()
                    if not buf:
                        break
                    try:
                        obj, end = decoder.raw_decode(buf)
                    except json.JSONDecodeError:
                        break  # incomplete: wait for more
                    buf = buf[end:]
                    if isinstance(obj, dict):
                        fields = {k.lower(): v for k, v in obj.items()}
                        with contextlib.suppress(TypeError, ValueError):
                            queue.put(TerminalSize(int(fields.get("width", 0)),
                                                   int(fields.get("height", 0))))
        except OSError:
            pass
        finally:
            queue.close()

    thread = threading.Thread(target=run, name="stream-resize", daemon=True)
    thread.start()
    return thread


def _run_session(
    kind: str,
    runtime: StreamingRuntime,
    request: ExecRequest | AttachRequest,
    stdin: InputStream | None,
    stdout: OutputStream | None,
    stderr: OutputStream | None,
    resize: ResizeQueue | None,
) -> dict[str, Any]:
    """Run the exec/attach and return the status for the error stream."""
    try:
        if isinstance(request, ExecRequest):
            code = runtime.exec(request.container_id, list(request.cmd), stdin, stdout, stderr,
                                request.tty, resize)
            if code != 0:
                return status_exit_code(code, request.cmd)
        else:
            runtime.attach(request.container_id, stdin, stdout, stderr, request.tty, resize)
    except Exception as e:
        what = "error executing command in container" if kind == "exec" else \
            "error attaching to container"
        return status_internal_error(f"{what}: {e}")
    return status_success()


def _status_bytes(protocol: str, status: dict[str, Any]) -> bytes:
    if protocol in (PROTOCOL_V4, PROTOCOL_V5, WS_V4_BASE64):
        return encode_status(status)
    if status.get("status") == "Success":
        return b""
    return str(status.get("message", "")).encode()


class Live(Protocol):
    """An upgraded connection as the idle watchdog sees it."""

    last_activity: float

    def abort(self) -> None:
        """Cut the connection now."""
        ...


Track = Callable[[Live], None]

# --- SPDY sessions ---------------------------------------------------------------------------


def serve_spdy_remotecommand(
    sock: socket.socket, initial: bytes, protocol: str, request: ExecRequest | AttachRequest,
    runtime: StreamingRuntime, creation_timeout: float, track: Track,
) -> None:
    """Exec/attach over SPDY: wait for the client's streams, run the session, report the status."""
    arrived: dict[str, spdy.SpdyStream] = {}
    cond = threading.Condition()
    known = {STREAM_ERROR, STREAM_STDIN, STREAM_STDOUT, STREAM_STDERR, STREAM_RESIZE}

    def on_stream(stream: spdy.SpdyStream) -> bool:
        kind = stream.header(STREAM_TYPE)
        if kind in known:
            with cond:
                arrived[kind] = stream
                cond.notify_all()
        return True  # kubelet replies to unknown types too, and ignores them

    stderr_wanted = request.stderr and not request.tty
    expected = {STREAM_ERROR}
    if request.stdin:
        expected.add(STREAM_STDIN)
    if request.stdout:
        expected.add(STREAM_STDOUT)
    if stderr_wanted:
        expected.add(STREAM_STDERR)
    if request.tty and protocol in (PROTOCOL_V3, PROTOCOL_V4):
        expected.add(STREAM_RESIZE)

    conn = spdy.SpdyConnection(sock, server=True, on_stream=on_stream, initial=initial)
    track(conn)
    conn.start()
    try:
        with cond:
            ok = cond.wait_for(lambda: expected <= arrived.keys() or conn.closed.is_set(),
                               creation_timeout)
        if not ok or conn.closed.is_set():
            return  # timed out waiting for the client to create streams
        for s in arrived.values():
            s.replied.wait(creation_timeout)
        resize = None
        if STREAM_RESIZE in arrived and request.tty:
            resize = ResizeQueue()
            _pump_resizes(arrived[STREAM_RESIZE], resize)
        stdout = arrived.get(STREAM_STDOUT) if request.stdout else None
        stderr = arrived.get(STREAM_STDERR) if stderr_wanted else None
        stdin = arrived.get(STREAM_STDIN) if request.stdin else None
        kind = "exec" if isinstance(request, ExecRequest) else "attach"
        status = _run_session(kind, runtime, request, stdin, stdout, stderr, resize)
        for out in (stdout, stderr):
            if out is not None:
                out.close()
        error = arrived[STREAM_ERROR]
        data = _status_bytes(protocol, status)
        with contextlib.suppress(OSError, BrokenPipeError):
            if data:
                error.write(data)
            error.close()
    finally:
        conn.close()
        conn.wait_closed(_LINGER)
        conn.abort()


def serve_spdy_portforward(
    sock: spdy.ByteSocket, initial: bytes, request: PortForwardRequest, runtime: StreamingRuntime,
    creation_timeout: float, track: Track,
) -> None:
    """Port-forward over SPDY: a (data, error) stream pair per connection, until the client
    leaves."""
    lock = threading.Lock()
    pairs: dict[str, dict[str, spdy.SpdyStream]] = {}
    workers: list[threading.Thread] = []

    def forward(data: spdy.SpdyStream, error: spdy.SpdyStream) -> None:
        port = int(data.header(HEADER_PORT))
        try:
            runtime.port_forward(request.pod_sandbox_id, port, data)
        except (BrokenPipeError, ConnectionResetError):
            data.reset()
            error.reset()
            return
        except Exception as e:
            with contextlib.suppress(OSError, BrokenPipeError):
                error.write(f"error forwarding port {port} to pod {request.pod_sandbox_id}, "
                            f"uid : {e}".encode())
        data.close()
        error.close()

    def expire(request_id: str) -> None:
        with lock:
            pair = pairs.pop(request_id, None)
        if pair is not None and STREAM_ERROR in pair:
            with contextlib.suppress(OSError, BrokenPipeError):
                pair[STREAM_ERROR].write(
                    f"timed out waiting for streams of request {request_id}".encode())
                pair[STREAM_ERROR].close()

    def on_stream(stream: spdy.SpdyStream) -> bool:
        port_s = stream.header(HEADER_PORT)
        kind = stream.header(STREAM_TYPE)
        if not port_s.isdigit() or not 0 < int(port_s) < 65536:
            return False
        if kind not in (STREAM_ERROR, STREAM_DATA):
            return False
        request_id = stream.header(HEADER_REQUEST_ID)
        if not request_id:  # pre-requestID clients: error stream id N, data stream id N+2
            request_id = str(stream.id if kind == STREAM_ERROR else stream.id - 2)
        with lock:
            pair = pairs.setdefault(request_id, {})
            if kind in pair:
                return False
            pair[kind] = stream
            complete = len(pair) == 2
            if complete:
                del pairs[request_id]
            else:
                timer = threading.Timer(creation_timeout, expire, (request_id,))
                timer.daemon = True
                timer.start()
        if complete:
            def start() -> None:
                pair[STREAM_DATA].replied.wait(creation_timeout)
                pair[STREAM_ERROR].replied.wait(creation_timeout)
                forward(pair[STREAM_DATA], pair[STREAM_ERROR])

            t = threading.Thread(target=start, name="portforward", daemon=True)
            workers[:] = [w for w in workers if w.is_alive()] + [t]
            t.start()
        return True

    conn = spdy.SpdyConnection(sock, server=True, on_stream=on_stream, initial=initial)
    track(conn)
    conn.start()
    try:
        conn.wait_closed()
    finally:
        for t in workers:
            t.join(_LINGER)
        conn.abort()


# --- WebSocket sessions ----------------------------------------------------------------------


class _WsChannels:
    """The channel multiplexing of ``channel.k8s.io`` (binary) / ``base64.channel.k8s.io``."""

    def __init__(self, conn: ws.WebSocketConnection, binary: bool, close_signal: bool,
                 readable: Sequence[int]) -> None:
        self.conn = conn
        self.binary = binary
        self.close_signal = close_signal
        self.pipes = {ch: _Pipe() for ch in readable}
        self.done = threading.Event()
        self._thread = threading.Thread(target=self._read_loop, name="ws-reader", daemon=True)
        self._thread.start()

    def send(self, channel: int, data: bytes) -> None:
        if self.done.is_set() and self.conn.close_sent:
            raise BrokenPipeError("websocket closed")
        if self.binary:
            self.conn.send_binary(bytes([channel]) + data)
        else:
            self.conn.send_text(chr(ord("0") + channel) + base64.b64encode(data).decode())

    def _read_loop(self) -> None:
        try:
            while (msg := self.conn.recv()) is not None:
                data = msg.data
                if not data:
                    continue
                if self.close_signal and data[0] == CH_CLOSE:
                    if len(data) == 2 and data[1] in self.pipes:
                        self.pipes[data[1]].close()
                    continue
                channel = data[0] if self.binary else data[0] - ord("0")
                pipe = self.pipes.get(channel)
                if pipe is None:
                    continue
                payload = data[1:]
                if not self.binary:
                    try:
                        payload = base64.b64decode(payload)
                    except (ValueError, binascii.Error):
                        continue
                pipe.feed(payload)
        except (OSError, ws.WebSocketError):
            pass
        finally:
            for pipe in self.pipes.values():
                pipe.close()
            self.done.set()

    def finish(self) -> None:
        """Close the websocket: CLOSE frame, wait for the peer's, drop the socket."""
        self.conn.close()
        self.done.wait(_LINGER)
        self.conn.shutdown()


class _WsWriter:
    def __init__(self, channels: _WsChannels, channel: int) -> None:
        self.channels = channels
        self.channel = channel

    @property
    def closed(self) -> bool:
        return self.channels.done.is_set()

    def write(self, data: bytes) -> None:
        if data:
            self.channels.send(self.channel, data)

    def close(self) -> None:
        pass


class _WsDuplex(_WsWriter):
    def read(self, size: int = 65536) -> bytes:
        return self.channels.pipes[self.channel].read(size)


def serve_ws_remotecommand(
    sock: socket.socket, initial: bytes, protocol: str, request: ExecRequest | AttachRequest,
    runtime: StreamingRuntime, track: Track,
) -> None:
    """Exec/attach over a WebSocket channel protocol; the status goes on channel 3."""
    conn = ws.WebSocketConnection(sock, server=True, initial=initial)
    track(conn)
    readable = [CH_RESIZE] + ([CH_STDIN] if request.stdin else [])
    channels = _WsChannels(conn, WS_REMOTECOMMAND[protocol], protocol == PROTOCOL_V5, readable)
    try:
        stderr_wanted = request.stderr and not request.tty
        first = CH_STDOUT if request.stdout else CH_STDERR if stderr_wanted else CH_ERROR
        channels.send(first, b"")  # tells the client the connection is established
        resize = None
        if request.tty:
            resize = ResizeQueue()
            _pump_resizes(channels.pipes[CH_RESIZE], resize)
        stdin = channels.pipes[CH_STDIN] if request.stdin else None
        stdout = _WsWriter(channels, CH_STDOUT) if request.stdout else None
        stderr = _WsWriter(channels, CH_STDERR) if stderr_wanted else None
        kind = "exec" if isinstance(request, ExecRequest) else "attach"
        status = _run_session(kind, runtime, request, stdin, stdout, stderr, resize)
        data = _status_bytes(protocol, status)
        if data:
            with contextlib.suppress(OSError, BrokenPipeError):
                channels.send(CH_ERROR, data)
    finally:
        channels.finish()


def serve_ws_portforward(
    sock: socket.socket, initial: bytes, protocol: str, request: PortForwardRequest,
    ports: Sequence[int], runtime: StreamingRuntime, track: Track,
) -> None:
    """Port-forward over WebSocket channels: data ``2i``, error ``2i+1`` for the i-th port."""
    conn = ws.WebSocketConnection(sock, server=True, initial=initial)
    track(conn)
    channels = _WsChannels(conn, WS_PORTFORWARD[protocol], False,
                           [2 * i for i in range(len(ports))])
    try:
        for i, port in enumerate(ports):
            prefix = struct.pack("<H", port)
            channels.send(2 * i, prefix)
            channels.send(2 * i + 1, prefix)

        def forward(i: int, port: int) -> None:
            try:
                runtime.port_forward(request.pod_sandbox_id, port, _WsDuplex(channels, 2 * i))
            except Exception as e:
                with contextlib.suppress(OSError, BrokenPipeError):
                    channels.send(2 * i + 1, f"error forwarding port {port} to pod "
                                  f"{request.pod_sandbox_id}, uid : {e}".encode())

        threads = [threading.Thread(target=forward, args=(i, p), daemon=True)
                   for i, p in enumerate(ports)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        channels.finish()


class WsTunnel:
    """A WebSocket seen as a byte socket: binary messages carry the SPDY bytes (client-go's
    ``TunnelingConnection``)."""

    def __init__(self, conn: ws.WebSocketConnection) -> None:
        self.conn = conn
        self._buf = b""

    def recv(self, bufsize: int, /) -> bytes:
        """Bytes of the next binary message(s); ``b""`` once the WebSocket closed."""
        while not self._buf:
            msg = self.conn.recv()
            if msg is None:
                return b""
            if msg.opcode != ws.OP_BINARY:
                raise ConnectionError("SPDY tunnel: a text message in a binary tunnel")
            self._buf = msg.data
        chunk, self._buf = self._buf[:bufsize], self._buf[bufsize:]
        return chunk

    def sendall(self, data: bytes, /) -> None:
        """One binary message."""
        self.conn.send_binary(data)

    def shutdown(self, how: int, /) -> None:
        """Send CLOSE; ``SHUT_RDWR`` also cuts the socket."""
        self.conn.close()
        if how == socket.SHUT_RDWR:
            self.conn.abort()

    def close(self) -> None:
        """Close the socket."""
        self.conn.shutdown()
