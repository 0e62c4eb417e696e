"""The Kubernetes streaming server behind CRI ``Exec``, ``Attach`` and ``PortForward``.

A CRI server answers those RPCs with a URL; the client (kubelet, ``crictl``) then opens that URL
and upgrades the HTTP/1.1 connection to SPDY/3.1 (``X-Stream-Protocol-Version``
``v4.channel.k8s.io``, ``v3``, ``v2``, ``channel.k8s.io``; ``portforward.k8s.io``) or to a
WebSocket (``Sec-WebSocket-Protocol`` ``v5.channel.k8s.io``, ``v4.channel.k8s.io``,
``v4.base64.channel.k8s.io``, ``channel.k8s.io``, ``base64.channel.k8s.io``). This is kubelet's
``streaming.Server`` in pure Python (stdlib threads, no dependencies)::

    server = StreamingServer(runtime).start()          # 127.0.0.1:<free port>
    url = server.get_exec(exec_request)                 # http://127.0.0.1:PORT/exec/<token>
    ...
    server.stop()

Each ``get_*`` stores the request under a random single-use token valid for one minute
(:class:`TokenCache`); an unknown, used or expired token answers 404. The session is served by a
:class:`~podkit.cri.streaming_types.StreamingRuntime` (``podkit.cri.streaming_runtime`` has one
built on runc, conmon and netns).
"""

from __future__ import annotations

import base64
import binascii
import collections
import contextlib
import json
import secrets
import socket
import socketserver
import struct
import threading
import time
import urllib.parse
from collections.abc import Callable, Sequence
from typing import Any, Protocol

import attrs

from podkit.cri import streaming_spdy as spdy
from podkit.cri import streaming_ws as ws
from podkit.cri.streaming_types import (
    AttachRequest,
    DuplexStream,
    ExecRequest,
    InputStream,
    OutputStream,
    PortForwardRequest,
    ResizeQueue,
    StreamingRuntime,
    TerminalSize,
)
from podkit.errors import InvalidArgumentError, PodkitError

__all__ = [
    "PORTFORWARD_PROTOCOLS",
    "REMOTECOMMAND_PROTOCOLS",
    "AttachRequest",
    "DuplexStream",
    "ExecRequest",
    "InputStream",
    "OutputStream",
    "PortForwardRequest",
    "ResizeQueue",
    "StreamingError",
    "StreamingRuntime",
    "StreamingServer",
    "TerminalSize",
    "TokenCache",
    "exit_code_from_status",
    "status_exit_code",
    "status_internal_error",
    "status_success",
]

# --- wire facts ------------------------------------------------------------------------------

HEADER_PROTOCOL_VERSION = "X-Stream-Protocol-Version"
HEADER_ACCEPTED_PROTOCOL_VERSIONS = "X-Accepted-Stream-Protocol-Versions"
SPDY_31 = "SPDY/3.1"

PROTOCOL_V1 = "channel.k8s.io"
PROTOCOL_V2 = "v2.channel.k8s.io"
PROTOCOL_V3 = "v3.channel.k8s.io"
PROTOCOL_V4 = "v4.channel.k8s.io"
PROTOCOL_V5 = "v5.channel.k8s.io"
PROTOCOL_PORTFORWARD = "portforward.k8s.io"
PROTOCOL_PORTFORWARD_TUNNEL = "SPDY/3.1+portforward.k8s.io"
"""Port-forward SPDY tunnelled in WebSocket binary messages (kubectl 1.30+ tries it first)."""
WS_BASE64 = "base64.channel.k8s.io"
WS_V4_BASE64 = "v4.base64.channel.k8s.io"

REMOTECOMMAND_PROTOCOLS: tuple[str, ...] = (PROTOCOL_V4, PROTOCOL_V3, PROTOCOL_V2, PROTOCOL_V1)
"""SPDY exec/attach sub-protocols, preferred first (kubelet's ``SupportedStreamingProtocols``)."""
PORTFORWARD_PROTOCOLS: tuple[str, ...] = (PROTOCOL_PORTFORWARD,)
"""SPDY port-forward sub-protocols."""
# WebSocket sub-protocol -> binary framing?  "" is a client that named none.
_WS_REMOTECOMMAND = {"": True, PROTOCOL_V1: True, WS_BASE64: False, PROTOCOL_V4: True,
                     WS_V4_BASE64: False, PROTOCOL_V5: True}
_WS_PORTFORWARD = {"": True, PROTOCOL_V4: True, WS_V4_BASE64: False,
                   PROTOCOL_PORTFORWARD_TUNNEL: True}

STREAM_TYPE = "streamType"
STREAM_ERROR, STREAM_STDIN, STREAM_STDOUT, STREAM_STDERR, STREAM_RESIZE, STREAM_DATA = (
    "error", "stdin", "stdout", "stderr", "resize", "data")
HEADER_PORT = "port"
HEADER_REQUEST_ID = "requestID"

CH_STDIN, CH_STDOUT, CH_STDERR, CH_ERROR, CH_RESIZE = 0, 1, 2, 3, 4
CH_CLOSE = 255
"""v5.channel.k8s.io: ``[255, channel]`` closes ``channel`` (half-close of stdin)."""

NON_ZERO_EXIT_CODE_REASON = "NonZeroExitCode"
EXIT_CODE_CAUSE_TYPE = "ExitCode"

DEFAULT_TOKEN_TTL = 60.0
DEFAULT_MAX_IN_FLIGHT = 1000
DEFAULT_STREAM_CREATION_TIMEOUT = 30.0
DEFAULT_STREAM_IDLE_TIMEOUT = 4 * 3600.0
_LINGER = 5.0
_MAX_REQUEST_HEAD = 64 * 1024


class StreamingError(PodkitError):
    """A streaming request could not be registered (too many in flight)."""


# --- status (metav1.Status as the v4 error stream carries it) --------------------------------


def status_success() -> dict[str, Any]:
    """``{"metadata":{},"status":"Success"}``."""
    return {"metadata": {}, "status": "Success"}


def _go_list(items: Sequence[str]) -> str:
    return "[" + " ".join(items) + "]"


def status_exit_code(code: int, cmd: Sequence[str] = ()) -> dict[str, Any]:
    """The Failure status for a command that exited ``code`` (reason ``NonZeroExitCode``)."""
    return {
        "metadata": {},
        "status": "Failure",
        "message": "command terminated with non-zero exit code: error executing command "
        f"{_go_list(cmd)}, exit code {code}",
        "reason": NON_ZERO_EXIT_CODE_REASON,
        "details": {"causes": [{"reason": EXIT_CODE_CAUSE_TYPE, "message": str(code)}]},
    }


def status_internal_error(message: str) -> dict[str, Any]:
    """``apierrors.NewInternalError``: code 500, reason ``InternalError``."""
    return {
        "metadata": {},
        "status": "Failure",
        "message": f"Internal error occurred: {message}",
        "reason": "InternalError",
        "details": {"causes": [{"message": message}]},
        "code": 500,
    }


def exit_code_from_status(status: dict[str, Any]) -> int:
    """The exit code a v4 status reports (0 for Success), as client-go decodes it.

    Raises :class:`InvalidArgumentError` for a failure that is not an exit code.
    """
    if status.get("status") == "Success":
        return 0
    if status.get("reason") == NON_ZERO_EXIT_CODE_REASON:
        for cause in (status.get("details") or {}).get("causes") or []:
            if cause.get("reason") == EXIT_CODE_CAUSE_TYPE:
                return int(cause.get("message", ""))
    raise InvalidArgumentError(f"error stream reports a failure: {status.get('message', status)}")


def _encode_status(status: dict[str, Any]) -> bytes:
    return json.dumps(status, separators=(",", ":")).encode()


# --- token cache -----------------------------------------------------------------------------

_Request = ExecRequest | AttachRequest | PortForwardRequest


class TokenCache:
    """Single-use random tokens for pending requests, each valid for ``ttl`` seconds.

    ``clock`` is injectable (tests move time instead of sleeping).
    """

    def __init__(
        self,
        ttl: float = DEFAULT_TOKEN_TTL,
        max_in_flight: int = DEFAULT_MAX_IN_FLIGHT,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.ttl = ttl
        self.max_in_flight = max_in_flight
        self.clock = clock
        self._lock = threading.Lock()
        self._entries: collections.OrderedDict[str, tuple[_Request, float]] = (
            collections.OrderedDict())

    def _gc(self, now: float) -> None:
        while self._entries:
            token, (_, expires) = next(iter(self._entries.items()))
            if expires > now:
                break
            del self._entries[token]

    def insert(self, request: _Request) -> str:
        """Store ``request``; its token (11 URL-safe characters from 8 random bytes)."""
        with self._lock:
            now = self.clock()
            self._gc(now)
            if len(self._entries) >= self.max_in_flight:
                raise StreamingError(
                    f"too many in-flight streaming requests ({self.max_in_flight}); "
                    "retry once some are used or expired")
            while True:
                token = secrets.token_urlsafe(8)
                if token not in self._entries:
                    break
            self._entries[token] = (request, now + self.ttl)
            return token

    def consume(self, token: str) -> _Request | None:
        """The request stored under ``token`` (removing it), or None if unknown or expired."""
        with self._lock:
            entry = self._entries.pop(token, None)
            if entry is None:
                return None
            request, expires = entry
            return request if expires > self.clock() else None

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)


# --- request models from CRI messages (protobuf or attrs, duck-typed) -------------------------


class _ExecLike(Protocol):
    container_id: str
    tty: bool
    stdin: bool
    stdout: bool
    stderr: bool


class _PortForwardLike(Protocol):
    pod_sandbox_id: str


def _validate_streams(req: _ExecLike, rpc: str) -> None:
    if not req.container_id:
        raise InvalidArgumentError(f"{rpc}: missing required container_id")
    if req.tty and req.stderr:
        raise InvalidArgumentError(f"{rpc}: tty and stderr cannot both be true")
    if not (req.stdin or req.stdout or req.stderr):
        raise InvalidArgumentError(f"{rpc}: one of stdin, stdout, or stderr must be set")


# --- HTTP ------------------------------------------------------------------------------------


@attrs.frozen
class _HttpRequest:
    method: str
    path: str
    query: dict[str, list[str]]
    headers: tuple[tuple[str, str], ...]

    def get(self, name: str) -> str:
        want = name.lower()
        return next((v for k, v in self.headers if k.lower() == want), "")

    def values(self, name: str) -> list[str]:
        """Every comma-separated value of every ``name`` header, in order."""
        want = name.lower()
        out = []
        for k, v in self.headers:
            if k.lower() == want:
                out += [p.strip() for p in v.split(",") if p.strip()]
        return out


class _BadRequest(Exception):
    pass


def _read_request(sock: socket.socket) -> tuple[_HttpRequest, bytes]:
    buf = b""
    while b"\r\n\r\n" not in buf:
        if len(buf) > _MAX_REQUEST_HEAD:
            raise _BadRequest("request head too large")
        chunk = sock.recv(65536)
        if not chunk:
            raise ConnectionError("client closed before sending a request")
        buf += chunk
    head, rest = buf.split(b"\r\n\r\n", 1)
    lines = head.decode("latin-1").split("\r\n")
    parts = lines[0].split(" ")
    if len(parts) != 3 or not parts[2].startswith("HTTP/1."):
        raise _BadRequest(f"malformed request line {lines[0]!r}")
    headers = []
    for line in lines[1:]:
        name, sep, value = line.partition(":")
        if not sep or not name.strip():
            raise _BadRequest(f"malformed header line {line!r}")
        headers.append((name.strip(), value.strip()))
    url = urllib.parse.urlsplit(parts[1])
    return _HttpRequest(parts[0], url.path, urllib.parse.parse_qs(url.query),
                        tuple(headers)), rest


_REASONS = {101: "Switching Protocols", 400: "Bad Request", 403: "Forbidden", 404: "Not Found",
            405: "Method Not Allowed", 500: "Internal Server Error"}


def _response_head(code: int, headers: Sequence[tuple[str, str]]) -> bytes:
    lines = [f"HTTP/1.1 {code} {_REASONS.get(code, 'Error')}"]
    lines += [f"{k}: {v}" for k, v in headers]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


def _send_error(sock: socket.socket, code: int, message: str,
                headers: Sequence[tuple[str, str]] = ()) -> None:
    body = (message + "\n").encode()
    head = [*headers, ("Content-Type", "text/plain; charset=utf-8"),
            ("X-Content-Type-Options", "nosniff"), ("Content-Length", str(len(body))),
            ("Connection", "close")]
    with contextlib.suppress(OSError):
        sock.sendall(_response_head(code, head) + body)


class _Reject(Exception):
    """An HTTP error answer before the upgrade."""

    def __init__(self, code: int, message: str, headers: Sequence[tuple[str, str]] = ()) -> None:
        super().__init__(message)
        self.code = code
        self.headers = tuple(headers)


def _is_websocket(req: _HttpRequest) -> bool:
    if req.get("Upgrade").lower() != "websocket":
        return False
    return "upgrade" in [p.strip() for p in req.get("Connection").lower().split(",")]


def _negotiate_spdy(req: _HttpRequest, supported: Sequence[str]) -> str:
    """kubelet's ``httpstream.Handshake`` + the SPDY upgrade header check."""
    client = req.values(HEADER_PROTOCOL_VERSION)
    if not client:
        raise _Reject(400, f"unable to upgrade: {HEADER_PROTOCOL_VERSION} is required")
    chosen = next((p for p in client if p in supported), "")
    if not chosen:
        raise _Reject(
            403,
            "unable to upgrade: unable to negotiate protocol: client supports "
            f"{_go_list(client)}, server accepts {_go_list(supported)}",
            [(HEADER_ACCEPTED_PROTOCOL_VERSIONS, p) for p in supported],
        )
    if "upgrade" not in req.get("Connection").lower() or \
            SPDY_31.lower() not in req.get("Upgrade").lower():
        raise _Reject(400, "unable to upgrade: missing upgrade headers in request "
                      f"(Connection: {req.get('Connection')!r}, Upgrade: {req.get('Upgrade')!r}); "
                      f"want Connection: Upgrade and Upgrade: {SPDY_31}")
    return chosen


def _upgrade_spdy(sock: socket.socket, protocol: str) -> None:
    sock.sendall(_response_head(101, [("Connection", "Upgrade"), ("Upgrade", SPDY_31),
                                      (HEADER_PROTOCOL_VERSION, protocol)]))


def _upgrade_websocket(sock: socket.socket, req: _HttpRequest, protocols: dict[str, bool]) -> str:
    if req.get("Sec-WebSocket-Version") != "13":
        raise _Reject(400, "unable to upgrade: Sec-WebSocket-Version must be 13, got "
                      f"{req.get('Sec-WebSocket-Version')!r}", [("Sec-WebSocket-Version", "13")])
    key = req.get("Sec-WebSocket-Key")
    try:
        if len(base64.b64decode(key, validate=True)) != 16:
            raise ValueError
    except (ValueError, binascii.Error):
        raise _Reject(400, f"unable to upgrade: bad Sec-WebSocket-Key {key!r}") from None
    client = req.values("Sec-WebSocket-Protocol") or [""]
    chosen = next((p for p in client if p in protocols), None)
    if chosen is None:
        supported = sorted(p for p in protocols if p)
        raise _Reject(403, f"unable to upgrade: requested protocol(s) are not supported: "
                      f"{_go_list(client)}; supports {_go_list(supported)}")
    headers = [("Upgrade", "websocket"), ("Connection", "Upgrade"),
               ("Sec-WebSocket-Accept", ws.accept_key(key))]
    if chosen:
        headers.append(("Sec-WebSocket-Protocol", chosen))
    sock.sendall(_response_head(101, headers))
    return chosen


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
        return _encode_status(status)
    if status.get("status") == "Success":
        return b""
    return str(status.get("message", "")).encode()


class _Live(Protocol):
    """An upgraded connection as the idle watchdog sees it."""

    last_activity: float

    def abort(self) -> None: ...


_Track = Callable[[_Live], None]

# --- SPDY sessions ---------------------------------------------------------------------------


def _serve_spdy_remotecommand(
    sock: socket.socket, initial: bytes, protocol: str, request: ExecRequest | AttachRequest,
    runtime: StreamingRuntime, creation_timeout: float, track: _Track,
) -> None:
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


def _serve_spdy_portforward(
    sock: spdy.ByteSocket, initial: bytes, request: PortForwardRequest, runtime: StreamingRuntime,
    creation_timeout: float, track: _Track,
) -> None:
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


def _serve_ws_remotecommand(
    sock: socket.socket, initial: bytes, protocol: str, request: ExecRequest | AttachRequest,
    runtime: StreamingRuntime, track: _Track,
) -> None:
    conn = ws.WebSocketConnection(sock, server=True, initial=initial)
    track(conn)
    readable = [CH_RESIZE] + ([CH_STDIN] if request.stdin else [])
    channels = _WsChannels(conn, _WS_REMOTECOMMAND[protocol], protocol == PROTOCOL_V5, readable)
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


def _serve_ws_portforward(
    sock: socket.socket, initial: bytes, protocol: str, request: PortForwardRequest,
    ports: Sequence[int], runtime: StreamingRuntime, track: _Track,
) -> None:
    conn = ws.WebSocketConnection(sock, server=True, initial=initial)
    track(conn)
    channels = _WsChannels(conn, _WS_PORTFORWARD[protocol], False,
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


class _WsTunnel:
    """A WebSocket seen as a byte socket: binary messages carry the SPDY bytes (client-go's
    ``TunnelingConnection``)."""

    def __init__(self, conn: ws.WebSocketConnection) -> None:
        self.conn = conn
        self._buf = b""

    def recv(self, bufsize: int, /) -> bytes:
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
        self.conn.send_binary(data)

    def shutdown(self, how: int, /) -> None:
        self.conn.close()
        if how == socket.SHUT_RDWR:
            self.conn.abort()

    def close(self) -> None:
        self.conn.shutdown()


# --- the server ------------------------------------------------------------------------------


class StreamingServer:
    """kubelet's CRI streaming server: ``get_exec``/``get_attach``/``get_port_forward`` hand
    out URLs, :meth:`start` serves them on ``address`` until :meth:`stop`.

    ``base_url`` overrides the scheme/host the URLs name (default ``http://<bound address>``).
    ``stream_creation_timeout``: how long a SPDY client may take to open its streams;
    ``stream_idle_timeout``: a session with no traffic either way for that long is cut (kubelet's
    default, 4 hours; ``None``: never).
    """

    def __init__(
        self,
        runtime: StreamingRuntime,
        address: tuple[str, int] = ("127.0.0.1", 0),
        *,
        base_url: str | None = None,
        token_ttl: float = DEFAULT_TOKEN_TTL,
        stream_creation_timeout: float = DEFAULT_STREAM_CREATION_TIMEOUT,
        stream_idle_timeout: float | None = DEFAULT_STREAM_IDLE_TIMEOUT,
        cache: TokenCache | None = None,
    ) -> None:
        self.runtime = runtime
        self.address = address
        self.cache = cache if cache is not None else TokenCache(ttl=token_ttl)
        self.stream_creation_timeout = stream_creation_timeout
        self.stream_idle_timeout = stream_idle_timeout
        self._live: set[_Live] = set()
        self._stopping = threading.Event()
        self._base_url = base_url.rstrip("/") if base_url else None
        self._server: socketserver.ThreadingTCPServer | None = None
        self._thread: threading.Thread | None = None
        self._conns: set[socket.socket] = set()
        self._lock = threading.Lock()

    # registration (the CRI RPCs)
    def get_exec(self, req: Any) -> str:
        """Validate a CRI ``ExecRequest`` (protobuf or :class:`ExecRequest`); its URL."""
        _validate_streams(req, "Exec")
        if not list(req.cmd):
            raise InvalidArgumentError("Exec: cmd must not be empty")
        model = ExecRequest(req.container_id, tuple(req.cmd), bool(req.tty), bool(req.stdin),
                            bool(req.stdout), bool(req.stderr))
        return self._url("exec", self.cache.insert(model))

    def get_attach(self, req: Any) -> str:
        """Validate a CRI ``AttachRequest``; its URL."""
        _validate_streams(req, "Attach")
        model = AttachRequest(req.container_id, bool(req.tty), bool(req.stdin),
                              bool(req.stdout), bool(req.stderr))
        return self._url("attach", self.cache.insert(model))

    def get_port_forward(self, req: Any) -> str:
        """Validate a CRI ``PortForwardRequest``; its URL."""
        if not req.pod_sandbox_id:
            raise InvalidArgumentError("PortForward: missing required pod_sandbox_id")
        ports = tuple(int(p) for p in req.port)
        for p in ports:
            if not 0 < p < 65536:
                raise InvalidArgumentError(f"PortForward: port {p} outside 1..65535")
        return self._url("portforward", self.cache.insert(
            PortForwardRequest(req.pod_sandbox_id, ports)))

    @property
    def server_address(self) -> tuple[str, int]:
        """The bound ``(host, port)``; raises :class:`StreamingError` before :meth:`start`."""
        if self._server is None:
            raise StreamingError("streaming server is not started")
        host, port = self._server.server_address[:2]
        return str(host), int(port)

    @property
    def base_url(self) -> str:
        """``http://host:port`` of the listening socket (or the configured base URL)."""
        if self._base_url is not None:
            return self._base_url
        host, port = self.server_address
        return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"

    def _url(self, kind: str, token: str) -> str:
        return f"{self.base_url}/{kind}/{token}"

    # lifecycle
    def start(self) -> StreamingServer:
        """Bind and serve in a background thread; returns self."""
        outer = self

        class Handler(socketserver.BaseRequestHandler):
            def handle(self) -> None:
                outer._handle(self.request)

        family = socket.AF_INET6 if ":" in self.address[0] else socket.AF_INET

        class Server(socketserver.ThreadingTCPServer):
            address_family = family
            daemon_threads = True
            allow_reuse_address = True

        self._server = Server(self.address, Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.05,),
                                        name="streaming-server", daemon=True)
        self._thread.start()
        if self.stream_idle_timeout is not None:
            self._stopping.clear()
            threading.Thread(target=self._watch_idle, name="streaming-idle", daemon=True).start()
        return self

    def _watch_idle(self) -> None:
        assert self.stream_idle_timeout is not None
        limit = self.stream_idle_timeout
        while not self._stopping.wait(min(max(limit / 4, 0.05), 30.0)):
            now = time.monotonic()
            with self._lock:
                idle = [c for c in self._live if now - c.last_activity > limit]
            for conn in idle:
                conn.abort()

    def stop(self) -> None:
        """Stop listening and cut every open session."""
        self._stopping.set()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        with self._lock:
            conns = list(self._conns)
        for c in conns:
            with contextlib.suppress(OSError):
                c.shutdown(socket.SHUT_RDWR)

    def __enter__(self) -> StreamingServer:
        return self.start() if self._server is None else self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # one connection
    def _handle(self, sock: socket.socket) -> None:
        with contextlib.suppress(OSError):  # small frames (replies, status) go out at once
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        with self._lock:
            self._conns.add(sock)
        mine: list[_Live] = []

        def track(conn: _Live) -> None:
            mine.append(conn)
            with self._lock:
                self._live.add(conn)

        try:
            self._serve(sock, track)
        except _Reject as r:
            _send_error(sock, r.code, str(r), r.headers)
        except _BadRequest as e:
            _send_error(sock, 400, str(e))
        except (OSError, ConnectionError):
            pass
        finally:
            with self._lock:
                self._conns.discard(sock)
                self._live.difference_update(mine)
            with contextlib.suppress(OSError):
                sock.close()

    def _serve(self, sock: socket.socket, track: _Track) -> None:
        req, rest = _read_request(sock)
        parts = req.path.strip("/").split("/")
        if len(parts) != 2 or parts[0] not in ("exec", "attach", "portforward"):
            raise _Reject(404, "404 page not found")
        if req.method not in ("GET", "POST"):
            raise _Reject(405, f"method {req.method} not allowed")
        kind, token = parts
        cached = self.cache.consume(token)
        want = {"exec": ExecRequest, "attach": AttachRequest,
                "portforward": PortForwardRequest}[kind]
        if not isinstance(cached, want):
            raise _Reject(404, "404 page not found")
        websocket = _is_websocket(req)
        if isinstance(cached, PortForwardRequest):
            if websocket:
                tunnel_wanted = PROTOCOL_PORTFORWARD_TUNNEL in req.values("Sec-WebSocket-Protocol")
                ports = list(cached.port) or ([] if tunnel_wanted else _query_ports(req))
                protocol = _upgrade_websocket(sock, req, _WS_PORTFORWARD)
                if protocol == PROTOCOL_PORTFORWARD_TUNNEL:
                    tunnel = _WsTunnel(ws.WebSocketConnection(sock, server=True, initial=rest))
                    _serve_spdy_portforward(tunnel, b"", cached, self.runtime,
                                            self.stream_creation_timeout, track)
                    return
                _serve_ws_portforward(sock, rest, protocol, cached, ports, self.runtime, track)
            else:
                _negotiate_spdy(req, PORTFORWARD_PROTOCOLS)
                _upgrade_spdy(sock, PROTOCOL_PORTFORWARD)
                _serve_spdy_portforward(sock, rest, cached, self.runtime,
                                        self.stream_creation_timeout, track)
            return
        assert isinstance(cached, (ExecRequest, AttachRequest))
        if websocket:
            protocol = _upgrade_websocket(sock, req, _WS_REMOTECOMMAND)
            _serve_ws_remotecommand(sock, rest, protocol, cached, self.runtime, track)
        else:
            protocol = _negotiate_spdy(req, REMOTECOMMAND_PROTOCOLS)
            _upgrade_spdy(sock, protocol)
            _serve_spdy_remotecommand(sock, rest, protocol, cached, self.runtime,
                                      self.stream_creation_timeout, track)


def _query_ports(req: _HttpRequest) -> list[int]:
    ports = []
    for value in req.query.get(HEADER_PORT, []):
        for p in value.split(","):
            if not p.isdigit() or not 0 < int(p) < 65536:
                raise _Reject(400, f"unable to parse {value!r} as a port")
            ports.append(int(p))
    if not ports:
        raise _Reject(400, f"query parameter {HEADER_PORT!r} is required")
    return ports
