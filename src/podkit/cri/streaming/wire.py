"""Wire facts and HTTP/1.1 handshakes of the Kubernetes streaming protocols (no sessions here).

Header names, sub-protocol names, stream types and channel numbers exactly as kubelet and
client-go use them; the ``metav1.Status`` documents of the v4/v5 error stream; the request parser
and the SPDY/WebSocket upgrade answers of :class:`~podkit.cri.streaming.StreamingServer`.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import json
import socket
import urllib.parse
from collections.abc import Sequence
from typing import Any

import attrs

from podkit.cri.streaming import ws
from podkit.errors import InvalidArgumentError, quote

__all__ = [
    "CH_CLOSE",
    "CH_ERROR",
    "CH_RESIZE",
    "CH_STDERR",
    "CH_STDIN",
    "CH_STDOUT",
    "EXIT_CODE_CAUSE_TYPE",
    "HEADER_ACCEPTED_PROTOCOL_VERSIONS",
    "HEADER_PORT",
    "HEADER_PROTOCOL_VERSION",
    "HEADER_REQUEST_ID",
    "NON_ZERO_EXIT_CODE_REASON",
    "PORTFORWARD_PROTOCOLS",
    "PROTOCOL_PORTFORWARD",
    "PROTOCOL_PORTFORWARD_TUNNEL",
    "PROTOCOL_V1",
    "PROTOCOL_V2",
    "PROTOCOL_V3",
    "PROTOCOL_V4",
    "PROTOCOL_V5",
    "REMOTECOMMAND_PROTOCOLS",
    "SPDY_31",
    "STREAM_DATA",
    "STREAM_ERROR",
    "STREAM_RESIZE",
    "STREAM_STDERR",
    "STREAM_STDIN",
    "STREAM_STDOUT",
    "STREAM_TYPE",
    "WS_BASE64",
    "WS_PORTFORWARD",
    "WS_REMOTECOMMAND",
    "WS_V4_BASE64",
    "BadRequest",
    "HttpRequest",
    "Reject",
    "encode_status",
    "exit_code_from_status",
    "go_list",
    "is_websocket",
    "negotiate_spdy",
    "query_ports",
    "read_request",
    "send_error",
    "status_exit_code",
    "status_internal_error",
    "status_success",
    "upgrade_spdy",
    "upgrade_websocket",
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
WS_REMOTECOMMAND = {"": True, PROTOCOL_V1: True, WS_BASE64: False, PROTOCOL_V4: True,
                     WS_V4_BASE64: False, PROTOCOL_V5: True}
WS_PORTFORWARD = {"": True, PROTOCOL_V4: True, WS_V4_BASE64: False,
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

_MAX_REQUEST_HEAD = 64 * 1024


# --- status (metav1.Status as the v4 error stream carries it) --------------------------------


def status_success() -> dict[str, Any]:
    """``{"metadata":{},"status":"Success"}``."""
    return {"metadata": {}, "status": "Success"}


def go_list(items: Sequence[str]) -> str:
    """``[a b c]``: how Go prints a string slice in kubelet's messages."""
    return "[" + " ".join(items) + "]"


def status_exit_code(code: int, cmd: Sequence[str] = ()) -> dict[str, Any]:
    """The Failure status for a command that exited ``code`` (reason ``NonZeroExitCode``)."""
    return {
        "metadata": {},
        "status": "Failure",
        "message": "command terminated with non-zero exit code: error executing command "
        f"{go_list(cmd)}, exit code {code}",
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


def encode_status(status: dict[str, Any]) -> bytes:
    """Compact JSON, keys in ``metav1.Status`` order."""
    return json.dumps(status, separators=(",", ":")).encode()


# --- HTTP ------------------------------------------------------------------------------------


@attrs.frozen
class HttpRequest:
    """A parsed request head: method, path, query and headers in arrival order."""

    method: str
    path: str
    query: dict[str, list[str]]
    headers: tuple[tuple[str, str], ...]

    def get(self, name: str) -> str:
        """The first value of header ``name`` (case-insensitive), ``""`` when absent."""
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


class BadRequest(Exception):
    """The request head is not HTTP/1.x (answered 400)."""


def read_request(sock: socket.socket) -> tuple[HttpRequest, bytes]:
    """Read a request head; the request and the bytes already read past it."""
    buf = b""
    while b"\r\n\r\n" not in buf:
        if len(buf) > _MAX_REQUEST_HEAD:
            raise BadRequest("request head too large")
        chunk = sock.recv(65536)
        if not chunk:
            raise ConnectionError("client closed before sending a request")
        buf += chunk
    head, rest = buf.split(b"\r\n\r\n", 1)
    lines = head.decode("latin-1").split("\r\n")
    parts = lines[0].split(" ")
    if len(parts) != 3 or not parts[2].startswith("HTTP/1."):
        raise BadRequest(f"malformed request line {quote(lines[0])}")
    headers = []
    for line in lines[1:]:
        name, sep, value = line.partition(":")
        if not sep or not name.strip():
            raise BadRequest(f"malformed header line {quote(line)}")
        headers.append((name.strip(), value.strip()))
    url = urllib.parse.urlsplit(parts[1])
    return HttpRequest(parts[0], url.path, urllib.parse.parse_qs(url.query),
                        tuple(headers)), rest


_REASONS = {101: "Switching Protocols", 400: "Bad Request", 403: "Forbidden", 404: "Not Found",
            405: "Method Not Allowed", 500: "Internal Server Error"}


def _response_head(code: int, headers: Sequence[tuple[str, str]]) -> bytes:
    lines = [f"HTTP/1.1 {code} {_REASONS.get(code, 'Error')}"]
    lines += [f"{k}: {v}" for k, v in headers]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


def send_error(sock: socket.socket, code: int, message: str,
                headers: Sequence[tuple[str, str]] = ()) -> None:
    """An HTTP error answer with a plain-text body, as Go's ``http.Error`` writes it."""
    body = (message + "\n").encode()
    head = [*headers, ("Content-Type", "text/plain; charset=utf-8"),
            ("X-Content-Type-Options", "nosniff"), ("Content-Length", str(len(body))),
            ("Connection", "close")]
    with contextlib.suppress(OSError):
        sock.sendall(_response_head(code, head) + body)


class Reject(Exception):
    """An HTTP error answer before the upgrade."""

    def __init__(self, code: int, message: str, headers: Sequence[tuple[str, str]] = ()) -> None:
        super().__init__(message)
        self.code = code
        self.headers = tuple(headers)


def is_websocket(req: HttpRequest) -> bool:
    """``Upgrade: websocket`` with ``Connection: ... upgrade ...`` (wsstream's test)."""
    if req.get("Upgrade").lower() != "websocket":
        return False
    return "upgrade" in [p.strip() for p in req.get("Connection").lower().split(",")]


def negotiate_spdy(req: HttpRequest, supported: Sequence[str]) -> str:
    """kubelet's ``httpstream.Handshake`` + the SPDY upgrade header check."""
    client = req.values(HEADER_PROTOCOL_VERSION)
    if not client:
        raise Reject(400, f"unable to upgrade: {HEADER_PROTOCOL_VERSION} is required")
    chosen = next((p for p in client if p in supported), "")
    if not chosen:
        raise Reject(
            403,
            "unable to upgrade: unable to negotiate protocol: client supports "
            f"{go_list(client)}, server accepts {go_list(supported)}",
            [(HEADER_ACCEPTED_PROTOCOL_VERSIONS, p) for p in supported],
        )
    if "upgrade" not in req.get("Connection").lower() or \
            SPDY_31.lower() not in req.get("Upgrade").lower():
        raise Reject(400, "unable to upgrade: missing upgrade headers in request "
                      f"(Connection: {quote(req.get('Connection'))}, "
                      f"Upgrade: {quote(req.get('Upgrade'))}); "
                      f"want Connection: Upgrade and Upgrade: {SPDY_31}")
    return chosen


def upgrade_spdy(sock: socket.socket, protocol: str) -> None:
    """The 101 answer of a SPDY/3.1 upgrade naming the negotiated sub-protocol."""
    sock.sendall(_response_head(101, [("Connection", "Upgrade"), ("Upgrade", SPDY_31),
                                      (HEADER_PROTOCOL_VERSION, protocol)]))


def upgrade_websocket(sock: socket.socket, req: HttpRequest, protocols: dict[str, bool]) -> str:
    """Check the RFC 6455 handshake, pick a sub-protocol, send the 101; the protocol picked."""
    if req.get("Sec-WebSocket-Version") != "13":
        raise Reject(400, "unable to upgrade: Sec-WebSocket-Version must be 13, got "
                      f"{quote(req.get('Sec-WebSocket-Version'))}",
                      [("Sec-WebSocket-Version", "13")])
    key = req.get("Sec-WebSocket-Key")
    try:
        if len(base64.b64decode(key, validate=True)) != 16:
            raise ValueError
    except (ValueError, binascii.Error):
        raise Reject(400, f"unable to upgrade: bad Sec-WebSocket-Key {quote(key)}") from None
    client = req.values("Sec-WebSocket-Protocol") or [""]
    chosen = next((p for p in client if p in protocols), None)
    if chosen is None:
        supported = sorted(p for p in protocols if p)
        raise Reject(403, f"unable to upgrade: requested protocol(s) are not supported: "
                      f"{go_list(client)}; supports {go_list(supported)}")
    headers = [("Upgrade", "websocket"), ("Connection", "Upgrade"),
               ("Sec-WebSocket-Accept", ws.accept_key(key))]
    if chosen:
        headers.append(("Sec-WebSocket-Protocol", chosen))
    sock.sendall(_response_head(101, headers))
    return chosen


def query_ports(req: HttpRequest) -> list[int]:
    """The ``port`` query parameters (each may be comma-separated) of a WebSocket port-forward."""
    ports = []
    for value in req.query.get(HEADER_PORT, []):
        for p in value.split(","):
            if not p.isdigit() or not 0 < int(p) < 65536:
                raise Reject(400, f"unable to parse {quote(value)} as a port")
            ports.append(int(p))
    if not ports:
        raise Reject(400, f"query parameter {HEADER_PORT!r} is required")
    return ports
