"""The streaming server itself: the HTTP listener, the single-use tokens, the dispatch.

:class:`StreamingServer` serves the URLs CRI ``Exec``, ``Attach`` and ``PortForward`` answer
with; each ``get_*`` stores the request under a random single-use token valid for one minute
(:class:`TokenCache`); an unknown, used or expired token answers 404. The handshakes live in
``wire``, the upgraded sessions in ``sessions``.
"""

from __future__ import annotations

import collections
import contextlib
import secrets
import socket
import socketserver
import threading
import time
from collections.abc import Callable
from typing import Any, Protocol

from podkit.cri.streaming import ws
from podkit.cri.streaming.sessions import (
    Live,
    Track,
    WsTunnel,
    serve_spdy_portforward,
    serve_spdy_remotecommand,
    serve_ws_portforward,
    serve_ws_remotecommand,
)
from podkit.cri.streaming.types import (
    AttachRequest,
    ExecRequest,
    PortForwardRequest,
    StreamingRuntime,
)
from podkit.cri.streaming.wire import (
    PORTFORWARD_PROTOCOLS,
    PROTOCOL_PORTFORWARD,
    PROTOCOL_PORTFORWARD_TUNNEL,
    REMOTECOMMAND_PROTOCOLS,
    WS_PORTFORWARD,
    WS_REMOTECOMMAND,
    BadRequest,
    Reject,
    is_websocket,
    negotiate_spdy,
    query_ports,
    read_request,
    send_error,
    upgrade_spdy,
    upgrade_websocket,
)
from podkit.errors import InvalidArgumentError, PodkitError

__all__ = ["StreamingError", "StreamingServer", "TokenCache"]

DEFAULT_TOKEN_TTL = 60.0
DEFAULT_MAX_IN_FLIGHT = 1000
DEFAULT_STREAM_CREATION_TIMEOUT = 30.0
DEFAULT_STREAM_IDLE_TIMEOUT = 4 * 3600.0


class StreamingError(PodkitError):
    """A streaming request could not be registered (too many in flight)."""


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
        self._live: set[Live] = set()
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
        mine: list[Live] = []

        def track(conn: Live) -> None:
            mine.append(conn)
            with self._lock:
                self._live.add(conn)

        try:
            self._serve(sock, track)
        except Reject as r:
            send_error(sock, r.code, str(r), r.headers)
        except BadRequest as e:
            send_error(sock, 400, str(e))
        except (OSError, ConnectionError):
            pass
        finally:
            with self._lock:
                self._conns.discard(sock)
                self._live.difference_update(mine)
            with contextlib.suppress(OSError):
                sock.close()

    def _serve(self, sock: socket.socket, track: Track) -> None:
        req, rest = read_request(sock)
        parts = req.path.strip("/").split("/")
        if len(parts) != 2 or parts[0] not in ("exec", "attach", "portforward"):
            raise Reject(404, "404 page not found")
        if req.method not in ("GET", "POST"):
            raise Reject(405, f"method {req.method} not allowed")
        kind, token = parts
        cached = self.cache.consume(token)
        want = {"exec": ExecRequest, "attach": AttachRequest,
                "portforward": PortForwardRequest}[kind]
        if not isinstance(cached, want):
            raise Reject(404, "404 page not found")
        websocket = is_websocket(req)
        if isinstance(cached, PortForwardRequest):
            if websocket:
                tunnel_wanted = PROTOCOL_PORTFORWARD_TUNNEL in req.values("Sec-WebSocket-Protocol")
                ports = list(cached.port) or ([] if tunnel_wanted else query_ports(req))
                protocol = upgrade_websocket(sock, req, WS_PORTFORWARD)
                if protocol == PROTOCOL_PORTFORWARD_TUNNEL:
                    tunnel = WsTunnel(ws.WebSocketConnection(sock, server=True, initial=rest))
                    serve_spdy_portforward(tunnel, b"", cached, self.runtime,
                                            self.stream_creation_timeout, track)
                    return
                serve_ws_portforward(sock, rest, protocol, cached, ports, self.runtime, track)
            else:
                negotiate_spdy(req, PORTFORWARD_PROTOCOLS)
                upgrade_spdy(sock, PROTOCOL_PORTFORWARD)
                serve_spdy_portforward(sock, rest, cached, self.runtime,
                                        self.stream_creation_timeout, track)
            return
        assert isinstance(cached, (ExecRequest, AttachRequest))
        if websocket:
            protocol = upgrade_websocket(sock, req, WS_REMOTECOMMAND)
            serve_ws_remotecommand(sock, rest, protocol, cached, self.runtime, track)
        else:
            protocol = negotiate_spdy(req, REMOTECOMMAND_PROTOCOLS)
            upgrade_spdy(sock, protocol)
            serve_spdy_remotecommand(sock, rest, protocol, cached, self.runtime,
                                      self.stream_creation_timeout, track)
