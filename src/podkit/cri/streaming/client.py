"""Clients for the Kubernetes streaming protocols (what kubectl/crictl do with an Exec URL).

:func:`connect_remotecommand` upgrades to SPDY/3.1 or a WebSocket, opens the streams/channels the
way client-go does and returns a :class:`RemoteCommandSession` (write stdin, resize, read
output, wait for the status). :class:`SpdyPortForward` and :class:`WsPortForward` speak the
port-forward protocols. podkit's tests drive :class:`~podkit.cri.streaming.StreamingServer` with
them; they work against any CRI runtime's streaming server.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import socket
import struct
import threading
import urllib.parse
from collections.abc import Sequence
from typing import Any

import attrs

from podkit.cri.streaming import spdy, ws
from podkit.cri.streaming import wire as srv
from podkit.cri.streaming.sessions import WsTunnel
from podkit.errors import PodkitError

__all__ = [
    "RemoteCommandResult",
    "RemoteCommandSession",
    "SpdyPortForward",
    "UpgradeRejectedError",
    "WsPortForward",
    "connect_remotecommand",
    "http_upgrade",
    "run_remotecommand",
]


class UpgradeRejectedError(PodkitError):
    """The server answered the upgrade with an HTTP error (``code``, ``body``, ``headers``)."""

    def __init__(self, code: int, body: str, headers: dict[str, list[str]]) -> None:
        super().__init__(f"upgrade rejected with HTTP {code}: {body.strip()}")
        self.code = code
        self.body = body
        self.headers = headers


def http_upgrade(
    url: str, headers: Sequence[tuple[str, str]], timeout: float = 30.0
) -> tuple[socket.socket, dict[str, list[str]], bytes]:
    """Send a GET with ``headers``; on 101 the socket, lower-cased response headers, leftover.

    Raises :class:`UpgradeRejectedError` for any other status.
    """
    u = urllib.parse.urlsplit(url)
    host = u.hostname or "127.0.0.1"
    port = u.port or 80
    sock = socket.create_connection((host, port), timeout)
    try:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        path = u.path + (f"?{u.query}" if u.query else "")
        lines = [f"GET {path} HTTP/1.1", f"Host: {u.netloc}", *[f"{k}: {v}" for k, v in headers]]
        sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1"))
        buf = b""
        while b"\r\n\r\n" not in buf:
            chunk = sock.recv(65536)
            if not chunk:
                raise ConnectionError(f"{url}: server closed without a response")
            buf += chunk
        head, rest = buf.split(b"\r\n\r\n", 1)
        status_line, *header_lines = head.decode("latin-1").split("\r\n")
        code = int(status_line.split(" ")[1])
        resp: dict[str, list[str]] = {}
        for line in header_lines:
            k, _, v = line.partition(":")
            resp.setdefault(k.strip().lower(), []).append(v.strip())
        if code != 101:
            length = int(resp.get("content-length", ["0"])[0])
            while len(rest) < length:
                chunk = sock.recv(65536)
                if not chunk:
                    break
                rest += chunk
            raise UpgradeRejectedError(code, rest.decode(errors="replace"), resp)
        sock.settimeout(None)
        return sock, resp, rest
    except BaseException:
        sock.close()
        raise


@attrs.frozen
class RemoteCommandResult:
    """What an exec/attach produced: output, the error-stream status and the exit code."""

    stdout: bytes
    stderr: bytes
    error: bytes
    protocol: str

    @property
    def status(self) -> dict[str, Any] | None:
        """The decoded v4 Status (``None`` for older protocols or an empty error stream)."""
        if self.protocol not in (srv.PROTOCOL_V4, srv.PROTOCOL_V5, srv.WS_V4_BASE64):
            return None
        return json.loads(self.error) if self.error else None

    @property
    def exit_code(self) -> int:
        """0 on success, the command's code on NonZeroExitCode; raises on other failures."""
        status = self.status
        if status is not None:
            return srv.exit_code_from_status(status)
        if self.error:
            raise PodkitError(self.error.decode(errors="replace"))
        return 0


class _Collector:
    def __init__(self) -> None:
        self.data = bytearray()
        self.cond = threading.Condition()
        self.eof = False

    def add(self, chunk: bytes) -> None:
        with self.cond:
            self.data += chunk
            self.cond.notify_all()

    def end(self) -> None:
        with self.cond:
            self.eof = True
            self.cond.notify_all()

    def wait_for(self, needle: bytes, timeout: float, min_len: int = 0) -> bytes:
        with self.cond:
            self.cond.wait_for(
                lambda: (needle in self.data and len(self.data) >= min_len) or self.eof, timeout)
            return bytes(self.data)


class RemoteCommandSession:
    """A live exec/attach: send stdin and resizes, watch output, then :meth:`wait`."""

    def __init__(self, protocol: str) -> None:
        self.protocol = protocol
        self.out = {1: _Collector(), 2: _Collector(), 3: _Collector()}
        self._threads: list[threading.Thread] = []

    # transport hooks
    def write_stdin(self, data: bytes) -> None:
        """Send to the command's stdin."""
        raise NotImplementedError

    def close_stdin(self) -> None:
        """End the command's stdin."""
        raise NotImplementedError

    def resize(self, width: int, height: int) -> None:
        """Send a terminal size."""
        raise NotImplementedError

    def close(self) -> None:
        """Drop the connection."""
        raise NotImplementedError

    def wait_output(self, needle: bytes, timeout: float = 30.0) -> bytes:
        """Block until stdout contains ``needle`` (or ends); all stdout so far."""
        return self.out[1].wait_for(needle, timeout)

    def wait(self, timeout: float = 60.0) -> RemoteCommandResult:
        """Wait for the session's end; the collected result."""
        for t in self._threads:
            t.join(timeout)
        self.close()
        return RemoteCommandResult(bytes(self.out[1].data), bytes(self.out[2].data),
                                   bytes(self.out[3].data), self.protocol)


class _SpdySession(RemoteCommandSession):
    def __init__(self, conn: spdy.SpdyConnection, protocol: str, *, stdin: bool, stdout: bool,
                 stderr: bool, tty: bool) -> None:
        super().__init__(protocol)
        self.conn = conn
        self.streams: dict[str, spdy.SpdyStream] = {}
        kinds = [srv.STREAM_ERROR]
        if stdin:
            kinds.append(srv.STREAM_STDIN)
        if stdout:
            kinds.append(srv.STREAM_STDOUT)
        if stderr and not tty:
            kinds.append(srv.STREAM_STDERR)
        if tty and protocol in (srv.PROTOCOL_V3, srv.PROTOCOL_V4):
            kinds.append(srv.STREAM_RESIZE)
        for kind in kinds:
            self.streams[kind] = conn.open_stream([(srv.STREAM_TYPE, kind)])
        for kind, channel in ((srv.STREAM_STDOUT, 1), (srv.STREAM_STDERR, 2),
                              (srv.STREAM_ERROR, 3)):
            if kind in self.streams:
                t = threading.Thread(target=self._copy, args=(self.streams[kind], channel),
                                     daemon=True)
                t.start()
                self._threads.append(t)

    def _copy(self, stream: spdy.SpdyStream, channel: int) -> None:
        while chunk := stream.read():
            self.out[channel].add(chunk)
        self.out[channel].end()

    def write_stdin(self, data: bytes) -> None:
        self.streams[srv.STREAM_STDIN].write(data)

    def close_stdin(self) -> None:
        self.streams[srv.STREAM_STDIN].close()

    def resize(self, width: int, height: int) -> None:
        self.streams[srv.STREAM_RESIZE].write(
            json.dumps({"Width": width, "Height": height}).encode())

    def close(self) -> None:
        self.conn.abort()


class _WsSession(RemoteCommandSession):
    def __init__(self, conn: ws.WebSocketConnection, protocol: str) -> None:
        super().__init__(protocol)
        self.conn = conn
        self.binary = protocol not in (srv.WS_BASE64, srv.WS_V4_BASE64)
        self.first: tuple[int, bytes] | None = None
        t = threading.Thread(target=self._read, daemon=True)
        t.start()
        self._threads.append(t)

    def _read(self) -> None:
        try:
            while (msg := self.conn.recv()) is not None:
                data = msg.data
                if not data:
                    continue
                channel = data[0] if self.binary else data[0] - ord("0")
                payload = data[1:] if self.binary else base64.b64decode(data[1:])
                if self.first is None:
                    self.first = (channel, payload)
                if channel in self.out:
                    self.out[channel].add(payload)
        except (OSError, ws.WebSocketError):
            pass
        finally:
            for c in self.out.values():
                c.end()

    def _send(self, channel: int, data: bytes) -> None:
        if self.binary:
            self.conn.send_binary(bytes([channel]) + data)
        else:
            self.conn.send_text(chr(ord("0") + channel) + base64.b64encode(data).decode())

    def write_stdin(self, data: bytes) -> None:
        self._send(srv.CH_STDIN, data)

    def close_stdin(self) -> None:
        if self.protocol == srv.PROTOCOL_V5:
            self.conn.send_binary(bytes([srv.CH_CLOSE, srv.CH_STDIN]))

    def resize(self, width: int, height: int) -> None:
        self._send(srv.CH_RESIZE, json.dumps({"Width": width, "Height": height}).encode())

    def close(self) -> None:
        self.conn.close()
        self.conn.shutdown()


def connect_remotecommand(
    url: str,
    *,
    transport: str = "spdy",
    protocols: Sequence[str] | None = None,
    stdin: bool = False,
    stdout: bool = True,
    stderr: bool = True,
    tty: bool = False,
) -> RemoteCommandSession:
    """Open an exec/attach URL over ``"spdy"`` or ``"websocket"``; the live session.

    The stream flags must match the CRI request the URL was made for (as with kubelet).
    """
    if transport == "spdy":
        offered = list(protocols or srv.REMOTECOMMAND_PROTOCOLS)
        headers = [("Connection", "Upgrade"), ("Upgrade", srv.SPDY_31)]
        headers += [(srv.HEADER_PROTOCOL_VERSION, p) for p in offered]
        sock, resp, rest = http_upgrade(url, headers)
        protocol = (resp.get(srv.HEADER_PROTOCOL_VERSION.lower()) or [""])[0]
        conn = spdy.SpdyConnection(sock, server=False, initial=rest).start()
        return _SpdySession(conn, protocol, stdin=stdin, stdout=stdout, stderr=stderr, tty=tty)
    if transport == "websocket":
        offered = list(protocols if protocols is not None else [srv.PROTOCOL_V5,
                                                                 srv.PROTOCOL_V4])
        key = base64.b64encode(os.urandom(16)).decode()
        headers = [("Connection", "Upgrade"), ("Upgrade", "websocket"),
                   ("Sec-WebSocket-Version", "13"), ("Sec-WebSocket-Key", key)]
        if offered:
            headers.append(("Sec-WebSocket-Protocol", ", ".join(offered)))
        sock, resp, rest = http_upgrade(url, headers)
        if resp.get("sec-websocket-accept", [""])[0] != ws.accept_key(key):
            sock.close()
            raise PodkitError(f"{url}: bad Sec-WebSocket-Accept in the server's answer")
        protocol = (resp.get("sec-websocket-protocol") or [""])[0]
        return _WsSession(ws.WebSocketConnection(sock, server=False, initial=rest), protocol)
    raise ValueError(f"transport {transport!r}: want 'spdy' or 'websocket'")


def run_remotecommand(
    url: str,
    *,
    transport: str = "spdy",
    protocols: Sequence[str] | None = None,
    stdin: bytes | None = None,
    stdout: bool = True,
    stderr: bool = True,
    timeout: float = 60.0,
) -> RemoteCommandResult:
    """Non-interactive exec/attach: send ``stdin`` (then close it), collect everything."""
    session = connect_remotecommand(url, transport=transport, protocols=protocols,
                                    stdin=stdin is not None, stdout=stdout, stderr=stderr)
    if stdin is not None:
        if stdin:
            session.write_stdin(stdin)
        session.close_stdin()
    return session.wait(timeout)


class SpdyPortForward:
    """A ``portforward.k8s.io`` connection: :meth:`open` a (data, error) stream pair per
    forwarded TCP connection."""

    def __init__(self, url: str, *, tunnel: bool = False) -> None:
        """``tunnel``: SPDY inside WebSocket binary messages (``SPDY/3.1+portforward.k8s.io``),
        as kubectl 1.30+ does, instead of an ``Upgrade: SPDY/3.1``."""
        if tunnel:
            key = base64.b64encode(os.urandom(16)).decode()
            headers = [("Connection", "Upgrade"), ("Upgrade", "websocket"),
                       ("Sec-WebSocket-Version", "13"), ("Sec-WebSocket-Key", key),
                       ("Sec-WebSocket-Protocol", srv.PROTOCOL_PORTFORWARD_TUNNEL)]
            sock, _, rest = http_upgrade(url, headers)
            wsconn = ws.WebSocketConnection(sock, server=False, initial=rest)
            self.conn = spdy.SpdyConnection(WsTunnel(wsconn), server=False).start()
        else:
            headers = [("Connection", "Upgrade"), ("Upgrade", srv.SPDY_31),
                       (srv.HEADER_PROTOCOL_VERSION, srv.PROTOCOL_PORTFORWARD)]
            sock, _, rest = http_upgrade(url, headers)
            self.conn = spdy.SpdyConnection(sock, server=False, initial=rest).start()
        self._next_request = 0

    def open(self, port: int) -> tuple[spdy.SpdyStream, spdy.SpdyStream]:
        """Streams for one connection to ``port``: ``(data, error)`` (error opened first)."""
        request_id = str(self._next_request)
        self._next_request += 1
        base = [(srv.HEADER_PORT, str(port)), (srv.HEADER_REQUEST_ID, request_id)]
        error = self.conn.open_stream([(srv.STREAM_TYPE, srv.STREAM_ERROR), *base])
        error.close()  # the client never writes on the error stream
        data = self.conn.open_stream([(srv.STREAM_TYPE, srv.STREAM_DATA), *base])
        return data, error

    def close(self) -> None:
        """Drop the connection."""
        self.conn.abort()


class WsPortForward:
    """Port forwarding over a WebSocket (``v4.channel.k8s.io``): 2 channels per port."""

    def __init__(self, url: str, protocol: str = srv.PROTOCOL_V4) -> None:
        key = base64.b64encode(os.urandom(16)).decode()
        headers = [("Connection", "Upgrade"), ("Upgrade", "websocket"),
                   ("Sec-WebSocket-Version", "13"), ("Sec-WebSocket-Key", key),
                   ("Sec-WebSocket-Protocol", protocol)]
        sock, _, rest = http_upgrade(url, headers)
        self.conn = ws.WebSocketConnection(sock, server=False, initial=rest)
        self.channels: dict[int, _Collector] = {}
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _chan(self, n: int) -> _Collector:
        with self._lock:
            return self.channels.setdefault(n, _Collector())

    def _read(self) -> None:
        try:
            while (msg := self.conn.recv()) is not None:
                if msg.data:
                    self._chan(msg.data[0]).add(msg.data[1:])
        except (OSError, ws.WebSocketError):
            pass
        finally:
            with self._lock:
                chans = list(self.channels.values())
            for c in chans:
                c.end()

    def send(self, index: int, data: bytes) -> None:
        """Send to the ``index``-th port's data channel."""
        self.conn.send_binary(bytes([2 * index]) + data)

    def wait_data(self, index: int, needle: bytes, timeout: float = 30.0) -> bytes:
        """Everything received on the port's data channel once ``needle`` is in it."""
        return self._chan(2 * index).wait_for(needle, timeout)

    def port_prefix(self, index: int, timeout: float = 30.0) -> tuple[int, int]:
        """The ports the server announced on the data and error channels (2-byte LE)."""
        d = self._chan(2 * index).wait_for(b"", timeout, 2)
        e = self._chan(2 * index + 1).wait_for(b"", timeout, 2)
        with contextlib.suppress(struct.error):
            return struct.unpack("<H", d[:2])[0], struct.unpack("<H", e[:2])[0]
        return -1, -1

    def close(self) -> None:
        """Close the websocket."""
        self.conn.close()
        self.conn.shutdown()
