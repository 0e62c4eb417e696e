"""SPDY/3.1 framing and a threaded connection, as Kubernetes streaming uses it (``SPDY/3.1``).

The pure part (frames, the header block codec with the SPDY/3 zlib dictionary, an incremental
:class:`Framer`) does no I/O. :class:`SpdyConnection` drives it over a socket: a reader thread
dispatches frames to :class:`SpdyStream` objects (blocking ``read``/``write``/``close``), answers
PINGs, replies to the peer's SYN_STREAMs and honours RST_STREAM and GOAWAY. Like Kubernetes'
``spdystream`` it does no flow control (WINDOW_UPDATE and SETTINGS are accepted and ignored).

Wire facts (draft-mbelshe-httpbis-spdy-00 / SPDY/3.1): control frames start with the control bit,
version 3 and a 16-bit type; data frames with a 31-bit stream id; both carry 8-bit flags and a
24-bit length. Header blocks are ``u32 count, (u32 len, name, u32 len, value)*``, names in lower
case, several values joined by NUL, compressed with one zlib stream per direction per
connection, primed with :data:`HEADER_DICTIONARY` and flushed with ``Z_SYNC_FLUSH``.
"""

from __future__ import annotations

import contextlib
import socket
import struct
import threading
import time
import zlib
from collections.abc import Callable, Iterable, Sequence
from typing import Protocol

import attrs

from podkit.errors import PodkitError, quote

__all__ = [
    "FLAG_FIN",
    "FLAG_UNIDIRECTIONAL",
    "HEADER_DICTIONARY",
    "VERSION",
    "ByteSocket",
    "DataFrame",
    "Frame",
    "Framer",
    "GoAwayFrame",
    "HeaderBlock",
    "HeadersFrame",
    "PingFrame",
    "RstStreamFrame",
    "SettingsFrame",
    "SpdyConnection",
    "SpdyProtocolError",
    "SpdyStream",
    "SynReplyFrame",
    "SynStreamFrame",
    "WindowUpdateFrame",
    "decode_header_block",
    "encode_header_block",
    "header_value",
]

VERSION = 3
"""The SPDY version in every control frame this module writes and accepts."""

TYPE_SYN_STREAM = 1
TYPE_SYN_REPLY = 2
TYPE_RST_STREAM = 3
TYPE_SETTINGS = 4
TYPE_PING = 6
TYPE_GOAWAY = 7
TYPE_HEADERS = 8
TYPE_WINDOW_UPDATE = 9

FLAG_FIN = 0x01
"""Last frame from the sender on this stream (SYN_STREAM, SYN_REPLY, HEADERS, DATA)."""
FLAG_UNIDIRECTIONAL = 0x02
"""SYN_STREAM: the recipient may not send on this stream."""

RST_PROTOCOL_ERROR = 1
RST_INVALID_STREAM = 2
RST_REFUSED_STREAM = 3
RST_UNSUPPORTED_VERSION = 4
RST_CANCEL = 5
RST_INTERNAL_ERROR = 6
RST_FLOW_CONTROL_ERROR = 7
RST_STREAM_IN_USE = 8
RST_STREAM_ALREADY_CLOSED = 9

GOAWAY_OK = 0
GOAWAY_PROTOCOL_ERROR = 1
GOAWAY_INTERNAL_ERROR = 2

MAX_DATA_LENGTH = (1 << 24) - 1
_CHUNK = 32 * 1024
_MAX_HEADER_BLOCK = 1 << 20

# The SPDY/3 header compression dictionary: length-prefixed header names and values, then a run
# of status codes, reason phrases, dates and content types (1423 bytes, Adler-32 0xe3c6a7c2).
_DICT_WORDS = (
    "options head post put delete trace accept accept-charset accept-encoding accept-language "
    "accept-ranges age allow authorization cache-control connection content-base "
    "content-encoding content-language content-length content-location content-md5 "
    "content-range content-type date etag expect expires from host if-match if-modified-since "
    "if-none-match if-range if-unmodified-since last-modified location max-forwards pragma "
    "proxy-authenticate proxy-authorization range referer retry-after server te trailer "
    "transfer-encoding upgrade user-agent vary via warning www-authenticate method get status "
    "|200 OK| version HTTP/1.1 url public set-cookie keep-alive origin"
)
_DICT_TAIL = (
    "100101201202205206300302303304305306307402405406407408409410411412413414415416417502504505"
    "203 Non-Authoritative Information204 No Content301 Moved Permanently400 Bad Request"
    "401 Unauthorized403 Forbidden404 Not Found500 Internal Server Error501 Not Implemented"
    "503 Service UnavailableJan Feb Mar Apr May Jun Jul Aug Sept Oct Nov Dec 00:00:00 "
    "Mon, Tue, Wed, Thu, Fri, Sat, Sun, GMTchunked,text/html,image/png,image/jpg,image/gif,"
    "application/xml,application/xhtml+xml,text/plain,text/javascript,publicprivatemax-age="
    "gzip,deflate,sdchcharset=utf-8charset=iso-8859-1,utf-,*,enq=0."
)


def _build_dictionary() -> bytes:
    words = []
    for part in _DICT_WORDS.split("|"):
        words += [part] if part.startswith("200") else part.split()
    return b"".join(struct.pack(">I", len(w)) + w.encode() for w in words) + _DICT_TAIL.encode()


HEADER_DICTIONARY: bytes = _build_dictionary()
"""The zlib dictionary both ends prime their header (de)compressors with (SPDY/3 spec 2.6.10.1)."""

HeaderBlock = tuple[tuple[str, str], ...]
"""Name/value pairs of a header block; names lower case, one pair per value."""


class SpdyProtocolError(PodkitError):
    """The peer sent bytes that are not valid SPDY/3.1 (or the connection broke mid-frame)."""


# --- frames ----------------------------------------------------------------------------------


@attrs.frozen
class DataFrame:
    """DATA: ``data`` on ``stream_id``; ``flags`` may carry :data:`FLAG_FIN`."""

    stream_id: int
    data: bytes = b""
    flags: int = 0


@attrs.frozen
class SynStreamFrame:
    """SYN_STREAM: the sender opens ``stream_id`` with ``headers``."""

    stream_id: int
    headers: HeaderBlock = ()
    associated_stream_id: int = 0
    priority: int = 0
    slot: int = 0
    flags: int = 0


@attrs.frozen
class SynReplyFrame:
    """SYN_REPLY: the recipient of a SYN_STREAM accepts it."""

    stream_id: int
    headers: HeaderBlock = ()
    flags: int = 0


@attrs.frozen
class RstStreamFrame:
    """RST_STREAM: abort ``stream_id`` with a status (``RST_CANCEL``, ``RST_REFUSED_STREAM``...)."""

    stream_id: int
    status: int


@attrs.frozen
class SettingsFrame:
    """SETTINGS: ``(flags, id, value)`` entries."""

    entries: tuple[tuple[int, int, int], ...] = ()
    flags: int = 0


@attrs.frozen
class PingFrame:
    """PING: echoed by the recipient; clients use odd ids, servers even ones."""

    id: int


@attrs.frozen
class GoAwayFrame:
    """GOAWAY: the sender takes no new streams after ``last_good_stream_id``."""

    last_good_stream_id: int
    status: int = GOAWAY_OK


@attrs.frozen
class HeadersFrame:
    """HEADERS: more headers for an open stream."""

    stream_id: int
    headers: HeaderBlock = ()
    flags: int = 0


@attrs.frozen
class WindowUpdateFrame:
    """WINDOW_UPDATE: the recipient may send ``delta`` more bytes on ``stream_id``."""

    stream_id: int
    delta: int


Frame = (
    DataFrame | SynStreamFrame | SynReplyFrame | RstStreamFrame | SettingsFrame | PingFrame
    | GoAwayFrame | HeadersFrame | WindowUpdateFrame
)


# --- header blocks ---------------------------------------------------------------------------


def encode_header_block(headers: Iterable[tuple[str, str]]) -> bytes:
    """The uncompressed name/value block: names lowered, repeated names' values NUL-joined."""
    merged: dict[str, list[str]] = {}
    for name, value in headers:
        merged.setdefault(name.lower(), []).append(value)
    out = [struct.pack(">I", len(merged))]
    for name, values in merged.items():
        n = name.encode("utf-8", "surrogateescape")
        v = "\0".join(values).encode("utf-8", "surrogateescape")
        out += [struct.pack(">I", len(n)), n, struct.pack(">I", len(v)), v]
    return b"".join(out)


def decode_header_block(raw: bytes) -> HeaderBlock:
    """Parse an uncompressed name/value block; NUL-joined values become separate pairs."""

    def take(pos: int, what: str) -> tuple[bytes, int]:
        if pos + 4 > len(raw):
            raise SpdyProtocolError(f"header block truncated in the length of {what}")
        (size,) = struct.unpack_from(">I", raw, pos)
        end = pos + 4 + size
        if end > len(raw):
            raise SpdyProtocolError(f"header block truncated in {what} ({size} bytes)")
        return raw[pos + 4 : end], end

    if len(raw) < 4:
        raise SpdyProtocolError("header block shorter than its pair count")
    (count,) = struct.unpack_from(">I", raw, 0)
    pos = 4
    pairs: list[tuple[str, str]] = []
    for i in range(count):
        name_b, pos = take(pos, f"header name {i}")
        value_b, pos = take(pos, f"header value {i}")
        name = name_b.decode("utf-8", "surrogateescape")
        if not name:
            raise SpdyProtocolError(f"header {i} has an empty name")
        if name != name.lower():
            raise SpdyProtocolError(f"header name {quote(name)} is not lower case")
        pairs += [(name, v) for v in value_b.decode("utf-8", "surrogateescape").split("\0")]
    if pos != len(raw):
        raise SpdyProtocolError(f"{len(raw) - pos} stray bytes after the header block")
    return tuple(pairs)


def header_value(headers: HeaderBlock, name: str) -> str:
    """The first value of ``name`` (case-insensitive), ``""`` when absent."""
    want = name.lower()
    for key, value in headers:
        if key == want:
            return value
    return ""


# --- framer ----------------------------------------------------------------------------------


class Framer:
    """Encode frames and parse a byte stream into frames, for one end of one connection.

    It owns that end's header compressor and decompressor (zlib state spans the connection), so
    use one Framer per connection and encode frames in the order they go on the wire.
    """

    def __init__(self) -> None:
        self._compress = zlib.compressobj(9, zlib.DEFLATED, 15, 9, zlib.Z_DEFAULT_STRATEGY,
                                          HEADER_DICTIONARY)
        self._decompress = zlib.decompressobj(15, HEADER_DICTIONARY)
        self._buf = bytearray()

    # encode
    def _headers(self, headers: HeaderBlock) -> bytes:
        raw = encode_header_block(headers)
        return self._compress.compress(raw) + self._compress.flush(zlib.Z_SYNC_FLUSH)

    @staticmethod
    def _control(kind: int, flags: int, payload: bytes) -> bytes:
        if len(payload) > MAX_DATA_LENGTH:
            raise SpdyProtocolError(f"control frame of {len(payload)} bytes is too large")
        return struct.pack(">HHI", 0x8000 | VERSION, kind, (flags << 24) | len(payload)) + payload

    @staticmethod
    def _check_id(stream_id: int, what: str) -> None:
        if not 0 < stream_id < 1 << 31:
            raise SpdyProtocolError(f"{what}: stream id {stream_id} outside 1..2^31-1")

    def encode(self, frame: Frame) -> bytes:
        """The wire bytes of ``frame`` (header blocks compressed with this end's zlib stream)."""
        if isinstance(frame, DataFrame):
            self._check_id(frame.stream_id, "DATA")
            if len(frame.data) > MAX_DATA_LENGTH:
                raise SpdyProtocolError(f"DATA frame of {len(frame.data)} bytes is too large")
            return struct.pack(">II", frame.stream_id, (frame.flags << 24) | len(frame.data)) + \
                frame.data
        if isinstance(frame, SynStreamFrame):
            self._check_id(frame.stream_id, "SYN_STREAM")
            body = struct.pack(">IIBB", frame.stream_id, frame.associated_stream_id,
                               (frame.priority & 7) << 5, frame.slot)
            return self._control(TYPE_SYN_STREAM, frame.flags, body + self._headers(frame.headers))
        if isinstance(frame, SynReplyFrame):
            self._check_id(frame.stream_id, "SYN_REPLY")
            body = struct.pack(">I", frame.stream_id) + self._headers(frame.headers)
            return self._control(TYPE_SYN_REPLY, frame.flags, body)
        if isinstance(frame, HeadersFrame):
            self._check_id(frame.stream_id, "HEADERS")
            body = struct.pack(">I", frame.stream_id) + self._headers(frame.headers)
            return self._control(TYPE_HEADERS, frame.flags, body)
        if isinstance(frame, RstStreamFrame):
            self._check_id(frame.stream_id, "RST_STREAM")
            if frame.status == 0:
                raise SpdyProtocolError("RST_STREAM status 0 is invalid")
            return self._control(TYPE_RST_STREAM, 0, struct.pack(">II", frame.stream_id,
                                                                 frame.status))
        if isinstance(frame, SettingsFrame):
            body = struct.pack(">I", len(frame.entries)) + b"".join(
                struct.pack(">II", (flag << 24) | ident, value)
                for flag, ident, value in frame.entries
            )
            return self._control(TYPE_SETTINGS, frame.flags, body)
        if isinstance(frame, PingFrame):
            return self._control(TYPE_PING, 0, struct.pack(">I", frame.id))
        if isinstance(frame, GoAwayFrame):
            return self._control(TYPE_GOAWAY, 0, struct.pack(">II", frame.last_good_stream_id,
                                                             frame.status))
        if isinstance(frame, WindowUpdateFrame):
            self._check_id(frame.stream_id, "WINDOW_UPDATE")
            return self._control(TYPE_WINDOW_UPDATE, 0, struct.pack(">II", frame.stream_id,
                                                                    frame.delta & 0x7FFFFFFF))
        raise TypeError(f"not a SPDY frame: {frame!r}")

    # decode
    def _read_headers(self, block: bytes, what: str) -> HeaderBlock:
        try:
            raw = self._decompress.decompress(block, _MAX_HEADER_BLOCK)
        except zlib.error as e:
            raise SpdyProtocolError(f"{what}: bad compressed header block: {e}") from None
        if self._decompress.unconsumed_tail:
            raise SpdyProtocolError(f"{what}: header block larger than {_MAX_HEADER_BLOCK} bytes")
        return decode_header_block(raw)

    def feed(self, data: bytes) -> list[Frame]:
        """Add received bytes; return the frames now complete (unknown control types skipped)."""
        self._buf += data
        frames: list[Frame] = []
        while len(self._buf) >= 8:
            (length,) = struct.unpack_from(">I", self._buf, 4)
            flags, length = length >> 24, length & 0xFFFFFF
            if len(self._buf) < 8 + length:
                break
            head = bytes(self._buf[:8])
            payload = bytes(self._buf[8 : 8 + length])
            del self._buf[: 8 + length]
            frame = self._parse(head, flags, payload)
            if frame is not None:
                frames.append(frame)
        return frames

    def _parse(self, head: bytes, flags: int, p: bytes) -> Frame | None:
        (first,) = struct.unpack_from(">I", head, 0)
        if not first & 0x80000000:
            if first == 0:
                raise SpdyProtocolError("DATA frame on stream 0")
            return DataFrame(first, p, flags)
        version, kind = (first >> 16) & 0x7FFF, first & 0xFFFF
        if version != VERSION:
            raise SpdyProtocolError(f"control frame of SPDY version {version}, want {VERSION}")

        def need(n: int, what: str) -> None:
            if len(p) < n:
                raise SpdyProtocolError(f"{what} frame of {len(p)} bytes, want at least {n}")

        if kind == TYPE_SYN_STREAM:
            need(10, "SYN_STREAM")
            sid, assoc, prio, slot = struct.unpack_from(">IIBB", p)
            return SynStreamFrame(sid & 0x7FFFFFFF, self._read_headers(p[10:], "SYN_STREAM"),
                                  assoc & 0x7FFFFFFF, prio >> 5, slot, flags)
        if kind in (TYPE_SYN_REPLY, TYPE_HEADERS):
            name = "SYN_REPLY" if kind == TYPE_SYN_REPLY else "HEADERS"
            need(4, name)
            sid = struct.unpack_from(">I", p)[0] & 0x7FFFFFFF
            headers = self._read_headers(p[4:], name)
            if kind == TYPE_SYN_REPLY:
                return SynReplyFrame(sid, headers, flags)
            return HeadersFrame(sid, headers, flags)
        if kind == TYPE_RST_STREAM:
            need(8, "RST_STREAM")
            sid, status = struct.unpack_from(">II", p)
            return RstStreamFrame(sid & 0x7FFFFFFF, status)
        if kind == TYPE_SETTINGS:
            need(4, "SETTINGS")
            (count,) = struct.unpack_from(">I", p)
            need(4 + 8 * count, "SETTINGS")
            entries = []
            for i in range(count):
                fid, value = struct.unpack_from(">II", p, 4 + 8 * i)
                entries.append((fid >> 24, fid & 0xFFFFFF, value))
            return SettingsFrame(tuple(entries), flags)
        if kind == TYPE_PING:
            need(4, "PING")
            return PingFrame(struct.unpack_from(">I", p)[0])
        if kind == TYPE_GOAWAY:
            need(8, "GOAWAY")
            last, status = struct.unpack_from(">II", p)
            return GoAwayFrame(last & 0x7FFFFFFF, status)
        if kind == TYPE_WINDOW_UPDATE:
            need(8, "WINDOW_UPDATE")
            sid, delta = struct.unpack_from(">II", p)
            return WindowUpdateFrame(sid & 0x7FFFFFFF, delta & 0x7FFFFFFF)
        return None  # unknown control frames are ignored (spec 2.2.1)


# --- connection ------------------------------------------------------------------------------


class ByteSocket(Protocol):
    """What a :class:`SpdyConnection` runs over: a ``socket.socket`` or a tunnel."""

    def recv(self, bufsize: int, /) -> bytes:
        """Up to ``bufsize`` bytes; ``b""`` at the end."""
        ...

    def sendall(self, data: bytes, /) -> None:
        """Send everything."""
        ...

    def shutdown(self, how: int, /) -> None:
        """Half- or fully close (``socket.SHUT_WR`` / ``SHUT_RDWR``)."""
        ...

    def close(self) -> None:
        """Release it."""
        ...


class SpdyStream:
    """One stream of a :class:`SpdyConnection`: a half-closable byte pipe with headers."""

    def __init__(self, conn: SpdyConnection, stream_id: int, headers: HeaderBlock) -> None:
        self.conn = conn
        self.id = stream_id
        self.headers = headers
        self._cond = threading.Condition()
        self._data = bytearray()
        self._remote_closed = False
        self._local_closed = False
        self._reset = False
        self.replied = threading.Event()
        self.accepted = False  # a SYN_REPLY came (or we sent one)
        self.refused = False

    def header(self, name: str) -> str:
        """The first value of the stream header ``name`` (``""`` when absent)."""
        return header_value(self.headers, name)

    # called by the connection's reader
    def _feed(self, data: bytes, fin: bool) -> None:
        with self._cond:
            self._data += data
            if fin:
                self._remote_closed = True
                if self._local_closed:  # forgotten before a reader can see the end
                    self.conn.remove_stream(self)
            self._cond.notify_all()

    def _on_reset(self) -> None:
        with self._cond:
            self._reset = self._remote_closed = self._local_closed = True
            self._cond.notify_all()
        self.replied.set()

    def read(self, size: int = 65536, timeout: float | None = None) -> bytes:
        """Up to ``size`` bytes; ``b""`` once the peer closed (FIN) or reset the stream."""
        with self._cond:
            if not self._cond.wait_for(lambda: self._data or self._remote_closed, timeout):
                raise TimeoutError(f"no data on SPDY stream {self.id} within {timeout}s")
            chunk = bytes(self._data[:size])
            del self._data[:size]
            return chunk

    def read_all(self, timeout: float | None = None) -> bytes:
        """Everything until the peer closes the stream."""
        out = bytearray()
        while chunk := self.read(timeout=timeout):
            out += chunk
        return bytes(out)

    @property
    def closed(self) -> bool:
        """True once this end closed the stream for writing, or it was reset."""
        return self._local_closed or self._reset

    @property
    def is_reset(self) -> bool:
        """True after an RST_STREAM (either side) or the connection's end."""
        return self._reset

    def write(self, data: bytes) -> None:
        """Send ``data`` in DATA frames; raises ``BrokenPipeError`` once closed or reset."""
        if self._local_closed:
            raise BrokenPipeError(f"SPDY stream {self.id} is closed for writing")
        view = memoryview(data)
        while view:
            self.conn.send_frame(DataFrame(self.id, bytes(view[:_CHUNK])))
            view = view[_CHUNK:]

    def close(self) -> None:
        """Half-close: an empty DATA frame with FIN; reading stays possible. Idempotent."""
        with self._cond:
            if self._local_closed:
                return
            self._local_closed = True
            done = self._remote_closed
        with contextlib.suppress(OSError):
            self.conn.send_frame(DataFrame(self.id, b"", FLAG_FIN))
        if done:  # both halves closed: the connection forgets the stream
            self.conn.remove_stream(self)

    def reset(self, status: int = RST_CANCEL) -> None:
        """Abort both directions with RST_STREAM."""
        already = self._reset
        self._on_reset()
        self.conn.remove_stream(self)
        if not already:
            with contextlib.suppress(OSError):
                self.conn.send_frame(RstStreamFrame(self.id, status))


class SpdyConnection:
    """A SPDY/3.1 session over a connected socket (either end), run by a reader thread.

    ``on_stream`` (server side) gets each stream the peer opens, on the reader thread, before
    the SYN_REPLY goes out: return False (or raise) to refuse it with RST_STREAM. ``initial`` is
    data already read from the socket (bytes after the HTTP upgrade response or request).
    """

    def __init__(
        self,
        sock: ByteSocket,
        *,
        server: bool,
        on_stream: Callable[[SpdyStream], bool] | None = None,
        initial: bytes = b"",
    ) -> None:
        self.sock = sock
        self.server = server
        self._on_stream = on_stream
        self._framer = Framer()
        self._write_lock = threading.Lock()
        self._lock = threading.Lock()
        self._streams: dict[int, SpdyStream] = {}
        self._next_id = 2 if server else 1
        self._next_ping = 2 if server else 1
        self._pings: dict[int, threading.Event] = {}
        self._last_peer_stream = 0
        self._initial = initial
        self.closed = threading.Event()
        self.last_activity = time.monotonic()  # last frame sent or bytes received
        self.goaway_received = False
        self.error: Exception | None = None
        self._thread = threading.Thread(target=self._read_loop, name="spdy-reader", daemon=True)

    def start(self) -> SpdyConnection:
        """Start the reader thread."""
        self._thread.start()
        return self

    def send_frame(self, frame: Frame) -> None:
        """Encode and send one frame (serialised with every other writer)."""
        with self._write_lock:
            data = self._framer.encode(frame)
            self.sock.sendall(data)
            self.last_activity = time.monotonic()

    def open_stream(
        self, headers: Sequence[tuple[str, str]], *, timeout: float | None = 30.0, fin: bool = False
    ) -> SpdyStream:
        """Open a stream (SYN_STREAM) and wait for the peer's SYN_REPLY."""
        with self._lock:
            sid = self._next_id
            self._next_id += 2
            stream = SpdyStream(self, sid, tuple((k.lower(), v) for k, v in headers))
            self._streams[sid] = stream
        self.send_frame(SynStreamFrame(sid, stream.headers, flags=FLAG_FIN if fin else 0))
        if fin:
            stream._local_closed = True
        if not stream.replied.wait(timeout):
            raise TimeoutError(f"no SYN_REPLY for SPDY stream {sid} within {timeout}s")
        if not stream.accepted:
            raise ConnectionRefusedError(f"peer refused SPDY stream {sid} ({dict(headers)})")
        return stream

    def ping(self, timeout: float | None = 10.0) -> bool:
        """Send a PING and wait for its echo; False on timeout."""
        with self._lock:
            pid = self._next_ping
            self._next_ping += 2
            event = self._pings[pid] = threading.Event()
        self.send_frame(PingFrame(pid))
        return event.wait(timeout)

    def remove_stream(self, stream: SpdyStream) -> None:
        """Forget a finished stream."""
        with self._lock:
            self._streams.pop(stream.id, None)

    def close(self, status: int = GOAWAY_OK) -> None:
        """Send GOAWAY, half-close the socket, and let the reader drain until the peer closes."""
        with contextlib.suppress(OSError):
            self.send_frame(GoAwayFrame(self._last_peer_stream, status))
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_WR)

    def wait_closed(self, timeout: float | None = None) -> bool:
        """Wait for the reader to see the end of the connection."""
        return self.closed.wait(timeout)

    def abort(self) -> None:
        """Close the socket now (the reader ends)."""
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_RDWR)
        self.sock.close()

    # reader
    def _read_loop(self) -> None:
        try:
            pending = self._initial
            while True:
                for frame in self._framer.feed(pending):
                    self._dispatch(frame)
                pending = self.sock.recv(65536)
                self.last_activity = time.monotonic()
                if not pending:
                    break
        except (OSError, SpdyProtocolError) as e:
            self.error = e
            if isinstance(e, SpdyProtocolError):
                with contextlib.suppress(OSError):
                    self.send_frame(GoAwayFrame(self._last_peer_stream, GOAWAY_PROTOCOL_ERROR))
        finally:
            with self._lock:
                streams = list(self._streams.values())
            for stream in streams:
                stream._on_reset()
            for event in self._pings.values():
                event.set()
            self.closed.set()

    def _dispatch(self, frame: Frame) -> None:
        if isinstance(frame, DataFrame):
            stream = self._streams.get(frame.stream_id)
            if stream is None:
                self.send_frame(RstStreamFrame(frame.stream_id, RST_INVALID_STREAM))
                return
            stream._feed(frame.data, bool(frame.flags & FLAG_FIN))
        elif isinstance(frame, SynStreamFrame):
            self._on_syn_stream(frame)
        elif isinstance(frame, SynReplyFrame):
            stream = self._streams.get(frame.stream_id)
            if stream is not None:
                stream.accepted = True
                stream.replied.set()
                if frame.flags & FLAG_FIN:
                    stream._feed(b"", True)
        elif isinstance(frame, RstStreamFrame):
            stream = self._streams.pop(frame.stream_id, None)
            if stream is not None:
                stream._on_reset()
        elif isinstance(frame, PingFrame):
            if (frame.id % 2 == 0) == self.server:
                event = self._pings.pop(frame.id, None)
                if event is not None:
                    event.set()
            else:
                self.send_frame(PingFrame(frame.id))
        elif isinstance(frame, GoAwayFrame):
            self.goaway_received = True
        elif isinstance(frame, HeadersFrame):
            stream = self._streams.get(frame.stream_id)
            if stream is not None:
                stream.headers += frame.headers
                if frame.flags & FLAG_FIN:
                    stream._feed(b"", True)
        # SETTINGS and WINDOW_UPDATE: no flow control, as in spdystream

    def _on_syn_stream(self, frame: SynStreamFrame) -> None:
        sid = frame.stream_id
        if (sid % 2 == 0) == self.server or sid <= self._last_peer_stream or self.goaway_received:
            self.send_frame(RstStreamFrame(sid, RST_PROTOCOL_ERROR))
            return
        self._last_peer_stream = sid
        stream = SpdyStream(self, sid, frame.headers)
        if frame.flags & FLAG_FIN:
            stream._remote_closed = True
        if frame.flags & FLAG_UNIDIRECTIONAL:
            stream._local_closed = True
        accepted = False
        if self._on_stream is not None:
            try:
                accepted = bool(self._on_stream(stream))
            except Exception:
                accepted = False
        if not accepted:
            stream.refused = True
            stream._on_reset()
            self.send_frame(RstStreamFrame(sid, RST_REFUSED_STREAM))
            return
        with self._lock:
            self._streams[sid] = stream
        self.send_frame(SynReplyFrame(sid, ()))
        stream.accepted = True
        stream.replied.set()
