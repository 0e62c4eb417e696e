"""WebSocket (RFC 6455) framing and a blocking connection, for the Kubernetes channel protocols.

The pure part: :func:`accept_key` (the ``Sec-WebSocket-Accept`` of a key), :func:`encode_frame`
(optionally masked), :class:`FrameParser` (incremental, unmasks), :class:`MessageAssembler`
(joins fragments; control frames pass through) and the close payload codec.
:class:`WebSocketConnection` uses them over a socket: ``recv`` returns whole messages, answers
pings, and completes the closing handshake; a client masks what it sends, a server does not.
Kept over ``wsproto``: as conformant on what kubectl uses and 1.2-3.6x faster here, without
dependencies (``benchmarks/bench_streaming.py``, docs/cri.md "WebSocket framing").
"""

from __future__ import annotations

import base64
import contextlib
import functools
import hashlib
import os
import socket
import struct
import threading
import time

import attrs

from podkit.errors import PodkitError

__all__ = [
    "GUID",
    "OP_BINARY",
    "OP_CLOSE",
    "OP_CONTINUATION",
    "OP_PING",
    "OP_PONG",
    "OP_TEXT",
    "FrameParser",
    "Message",
    "MessageAssembler",
    "WebSocketConnection",
    "WebSocketError",
    "WsFrame",
    "accept_key",
    "decode_close",
    "encode_close",
    "encode_frame",
]

GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
"""The magic string appended to ``Sec-WebSocket-Key`` before hashing (RFC 6455 1.3)."""

OP_CONTINUATION = 0x0
OP_TEXT = 0x1
OP_BINARY = 0x2
OP_CLOSE = 0x8
OP_PING = 0x9
OP_PONG = 0xA

CLOSE_NORMAL = 1000
CLOSE_PROTOCOL_ERROR = 1002
CLOSE_TOO_BIG = 1009

MAX_MESSAGE = 64 * 1024 * 1024


class WebSocketError(PodkitError):
    """The peer broke RFC 6455 (bad opcode, unmasked client frame, oversized control frame...)."""


def accept_key(key: str) -> str:
    """``base64(sha1(key + GUID))``: the server's proof it read the client's handshake."""
    digest = hashlib.sha1((key.strip() + GUID).encode(), usedforsecurity=False).digest()
    return base64.b64encode(digest).decode()


_IDENTITY = int.from_bytes(bytes(range(256)), "big")
_SHORT = 512  # below this many bytes one big-int XOR beats four translates


@functools.cache
def _xor_table(k: int) -> bytes:
    """The 256-byte table mapping each byte ``b`` to ``b ^ k``, for :meth:`bytes.translate`."""
    return (_IDENTITY ^ int.from_bytes(bytes([k]) * 256, "big")).to_bytes(256, "big")


def _apply_mask(data: bytes, mask: bytes) -> bytes:
    """``data`` XOR the repeated 4-byte ``mask`` (RFC 6455 5.3), at C speed either way."""
    n = len(data)
    if n < _SHORT:
        if not n:
            return b""
        key = int.from_bytes((mask * (n // 4 + 1))[:n], "big")
        return (int.from_bytes(data, "big") ^ key).to_bytes(n, "big")
    out = bytearray(data)
    for i in range(4):  # every 4th byte shares a mask byte: one table lookup pass each
        out[i::4] = out[i::4].translate(_xor_table(mask[i]))
    return bytes(out)


@attrs.frozen
class WsFrame:
    """One frame as parsed (payload already unmasked)."""

    opcode: int
    payload: bytes
    fin: bool = True
    masked: bool = False
    rsv: int = 0


def encode_frame(
    opcode: int, payload: bytes, *, fin: bool = True, mask: bytes | None = None
) -> bytes:
    """One frame; ``mask`` (4 bytes) masks the payload as clients must."""
    if not 0 <= opcode <= 0xF:
        raise WebSocketError(f"opcode {opcode} outside 0..15")
    if opcode >= 0x8 and (len(payload) > 125 or not fin):
        raise WebSocketError("control frames carry at most 125 bytes and are never fragmented")
    head = bytearray([(0x80 if fin else 0) | opcode])
    bit = 0x80 if mask is not None else 0
    n = len(payload)
    if n < 126:
        head.append(bit | n)
    elif n < 1 << 16:
        head.append(bit | 126)
        head += struct.pack(">H", n)
    else:
        head.append(bit | 127)
        head += struct.pack(">Q", n)
    if mask is None:
        return bytes(head) + payload
    if len(mask) != 4:
        raise WebSocketError(f"mask of {len(mask)} bytes, want 4")
    return bytes(head) + mask + _apply_mask(payload, mask)


class FrameParser:
    """Incremental frame parser: :meth:`feed` bytes, get complete frames.

    ``require_mask``: a server rejects unmasked frames (RFC 6455 5.1); ``max_size`` bounds one
    frame's payload.
    """

    def __init__(self, *, require_mask: bool = False, max_size: int = MAX_MESSAGE) -> None:
        self.require_mask = require_mask
        self.max_size = max_size
        self._buf = bytearray()

    def feed(self, data: bytes) -> list[WsFrame]:
        """Add received bytes; return the frames now complete."""
        self._buf += data
        frames: list[WsFrame] = []
        while True:
            frame = self._one()
            if frame is None:
                return frames
            frames.append(frame)

    def _one(self) -> WsFrame | None:
        buf = self._buf
        if len(buf) < 2:
            return None
        b0, b1 = buf[0], buf[1]
        fin, rsv, opcode = bool(b0 & 0x80), (b0 >> 4) & 7, b0 & 0xF
        masked, n = bool(b1 & 0x80), b1 & 0x7F
        pos = 2
        if n == 126:
            if len(buf) < 4:
                return None
            (n,) = struct.unpack_from(">H", buf, 2)
            pos = 4
        elif n == 127:
            if len(buf) < 10:
                return None
            (n,) = struct.unpack_from(">Q", buf, 2)
            pos = 10
        if rsv:
            raise WebSocketError(f"frame with reserved bits {rsv:03b} (no extension negotiated)")
        if opcode not in (OP_CONTINUATION, OP_TEXT, OP_BINARY, OP_CLOSE, OP_PING, OP_PONG):
            raise WebSocketError(f"unknown opcode {opcode:#x}")
        if opcode >= 0x8 and (n > 125 or not fin):
            raise WebSocketError(f"control frame {opcode:#x} of {n} bytes or fragmented")
        if n > self.max_size:
            raise WebSocketError(f"frame of {n} bytes exceeds the limit of {self.max_size}")
        if self.require_mask and not masked:
            raise WebSocketError("client frame is not masked")
        mask = b""
        if masked:
            if len(buf) < pos + 4:
                return None
            mask = bytes(buf[pos : pos + 4])
            pos += 4
        if len(buf) < pos + n:
            return None
        payload = bytes(buf[pos : pos + n])
        del buf[: pos + n]
        if masked:
            payload = _apply_mask(payload, mask)
        return WsFrame(opcode, payload, fin, masked, rsv)


@attrs.frozen
class Message:
    """A whole message: ``opcode`` is TEXT, BINARY, CLOSE, PING or PONG."""

    opcode: int
    data: bytes


class MessageAssembler:
    """Joins a fragmented message (first frame's opcode, CONTINUATIONs, FIN) into one."""

    def __init__(self, max_size: int = MAX_MESSAGE) -> None:
        self.max_size = max_size
        self._opcode: int | None = None
        self._parts: list[bytes] = []
        self._size = 0

    def add(self, frame: WsFrame) -> Message | None:
        """The complete message this frame ends, if any."""
        if frame.opcode >= 0x8:
            return Message(frame.opcode, frame.payload)
        if frame.opcode == OP_CONTINUATION:
            if self._opcode is None:
                raise WebSocketError("continuation frame without a message to continue")
        else:
            if self._opcode is not None:
                raise WebSocketError("new data frame before the fragmented message ended")
            self._opcode = frame.opcode
        self._size += len(frame.payload)
        if self._size > self.max_size:
            raise WebSocketError(f"message exceeds the limit of {self.max_size} bytes")
        self._parts.append(frame.payload)
        if not frame.fin:
            return None
        msg = Message(self._opcode, b"".join(self._parts))
        self._opcode, self._parts, self._size = None, [], 0
        if msg.opcode == OP_TEXT:
            try:
                msg.data.decode("utf-8")
            except UnicodeDecodeError:
                raise WebSocketError("text message is not valid UTF-8") from None
        return msg


def encode_close(code: int | None = CLOSE_NORMAL, reason: str = "") -> bytes:
    """A CLOSE payload: 2-byte status code and UTF-8 reason (empty when ``code`` is None)."""
    if code is None:
        return b""
    data = struct.pack(">H", code) + reason.encode()
    return data[:125]


def decode_close(payload: bytes) -> tuple[int | None, str]:
    """``(code, reason)`` of a CLOSE payload; ``(None, "")`` when empty."""
    if not payload:
        return None, ""
    if len(payload) == 1:
        raise WebSocketError("close payload of 1 byte")
    (code,) = struct.unpack_from(">H", payload)
    return code, payload[2:].decode("utf-8", errors="replace")


class WebSocketConnection:
    """A WebSocket over a connected socket, after the HTTP handshake.

    ``recv`` (one reader thread) returns messages and ``None`` at the end; ``send`` may be
    called from any thread. ``initial``: bytes already read past the handshake.
    """

    def __init__(self, sock: socket.socket, *, server: bool, initial: bytes = b"") -> None:
        self.sock = sock
        self.server = server
        self._parser = FrameParser(require_mask=server)
        self._assembler = MessageAssembler()
        self._pending: list[WsFrame] = self._parser.feed(initial) if initial else []
        self._write_lock = threading.Lock()
        self.close_sent = False
        self.close_received: tuple[int | None, str] | None = None
        self.last_activity = time.monotonic()  # last message sent or bytes received

    def send(self, opcode: int, data: bytes) -> None:
        """Send one unfragmented message (masked when this end is the client)."""
        mask = None if self.server else os.urandom(4)
        frame = encode_frame(opcode, data, mask=mask)
        with self._write_lock:
            if self.close_sent and opcode != OP_CLOSE:
                raise BrokenPipeError("websocket is closing")
            self.sock.sendall(frame)
            self.last_activity = time.monotonic()

    def send_binary(self, data: bytes) -> None:
        """A BINARY message."""
        self.send(OP_BINARY, data)

    def send_text(self, text: str) -> None:
        """A TEXT message."""
        self.send(OP_TEXT, text.encode())

    def close(self, code: int | None = CLOSE_NORMAL, reason: str = "") -> None:
        """Start (or answer) the closing handshake; idempotent."""
        with self._write_lock:
            if self.close_sent:
                return
            self.close_sent = True
            mask = None if self.server else os.urandom(4)
            with contextlib.suppress(OSError):
                self.sock.sendall(encode_frame(OP_CLOSE, encode_close(code, reason), mask=mask))

    def recv(self) -> Message | None:
        """The next TEXT/BINARY message; ``None`` after CLOSE or the end of the socket."""
        while True:
            while not self._pending:
                try:
                    data = self.sock.recv(65536)
                    self.last_activity = time.monotonic()
                except OSError:
                    return None
                if not data:
                    return None
                try:
                    self._pending = self._parser.feed(data)
                except WebSocketError as e:
                    self.close(CLOSE_PROTOCOL_ERROR, str(e))
                    raise
            frame = self._pending.pop(0)
            try:
                msg = self._assembler.add(frame)
            except WebSocketError as e:
                self.close(CLOSE_PROTOCOL_ERROR, str(e))
                raise
            if msg is None:
                continue
            if msg.opcode == OP_PING:
                with contextlib.suppress(OSError, BrokenPipeError):
                    self.send(OP_PONG, msg.data)
                continue
            if msg.opcode == OP_PONG:
                continue
            if msg.opcode == OP_CLOSE:
                self.close_received = decode_close(msg.data)
                code = self.close_received[0]
                self.close(CLOSE_NORMAL if code is None else code)
                return None
            return msg

    def abort(self) -> None:
        """Cut the connection now (no closing handshake)."""
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_RDWR)

    def shutdown(self) -> None:
        """Close the socket (after :meth:`close`)."""
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_RDWR)
        self.sock.close()
