"""SPDY/3.1 framing (podkit.cri.streaming.spdy): byte vectors, header compression, a session."""

from __future__ import annotations

import contextlib
import socket
import struct
import threading
import zlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as hs

from podkit.cri.streaming import spdy
from podkit.cri.streaming.spdy import (
    DataFrame,
    Framer,
    GoAwayFrame,
    HeadersFrame,
    PingFrame,
    RstStreamFrame,
    SettingsFrame,
    SpdyConnection,
    SpdyProtocolError,
    SynReplyFrame,
    SynStreamFrame,
    WindowUpdateFrame,
)


def test_dictionary_is_the_spdy3_one() -> None:
    # SPDY/3 section 2.6.10.1: 1423 bytes; its Adler-32 is the DICTID in every header block
    d = spdy.HEADER_DICTIONARY
    assert len(d) == 1423
    assert zlib.adler32(d) == 0xE3C6A7C2
    assert d.startswith(b"\x00\x00\x00\x07options\x00\x00\x00\x04head\x00\x00\x00\x04post")
    assert b"\x00\x00\x00\x06200 OK\x00\x00\x00\x07version\x00\x00\x00\x08HTTP/1.1" in d
    assert d.endswith(b"charset=utf-8charset=iso-8859-1,utf-,*,enq=0.")


@pytest.mark.parametrize(
    ("frame", "wire"),
    [
        (PingFrame(1), "80030006 00000004 00000001"),
        (RstStreamFrame(1, spdy.RST_CANCEL), "80030003 00000008 00000001 00000005"),
        (GoAwayFrame(7, spdy.GOAWAY_OK), "80030007 00000008 00000007 00000000"),
        (WindowUpdateFrame(3, 65536), "80030009 00000008 00000003 00010000"),
        (DataFrame(1, b"hi", spdy.FLAG_FIN), "00000001 01000002 6869"),
        (DataFrame(5, b""), "00000005 00000000"),
        (SettingsFrame(((0, 7, 65536),)), "80030004 0000000c 00000001 00000007 00010000"),
    ],
)
def test_fixed_frames_byte_vectors(frame: spdy.Frame, wire: str) -> None:
    raw = bytes.fromhex(wire.replace(" ", ""))
    assert Framer().encode(frame) == raw
    assert Framer().feed(raw) == [frame]


def test_header_block_uncompressed_layout() -> None:
    raw = spdy.encode_header_block([("streamType", "error"), ("port", "80"), ("port", "81")])
    assert raw == (
        b"\x00\x00\x00\x02"
        b"\x00\x00\x00\x0astreamtype\x00\x00\x00\x05error"
        b"\x00\x00\x00\x04port\x00\x00\x00\x0580\x0081"
    )
    assert spdy.decode_header_block(raw) == (("streamtype", "error"), ("port", "80"),
                                             ("port", "81"))


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        (b"\x00\x00", "shorter than its pair count"),
        (b"\x00\x00\x00\x01\x00\x00\x00\x05ab", "truncated in header name 0"),
        (b"\x00\x00\x00\x01\x00\x00\x00\x01A\x00\x00\x00\x00", "not lower case"),
        (b"\x00\x00\x00\x01\x00\x00\x00\x00\x00\x00\x00\x00", "empty name"),
        (b"\x00\x00\x00\x00junk", "stray bytes"),
    ],
)
def test_header_block_errors(raw: bytes, message: str) -> None:
    with pytest.raises(SpdyProtocolError, match=message):
        spdy.decode_header_block(raw)


def test_syn_stream_compressed_with_the_dictionary() -> None:
    frame = SynStreamFrame(1, (("streamtype", "stdout"),), priority=0)
    wire = Framer().encode(frame)
    # control bit + version 3, type 1; flags 0; length = 10 + compressed block
    assert wire[:4] == b"\x80\x03\x00\x01"
    (length,) = struct.unpack(">I", wire[4:8])
    assert length == len(wire) - 8
    sid, assoc, prio, slot = struct.unpack(">IIBB", wire[8:18])
    assert (sid, assoc, prio, slot) == (1, 0, 0, 0)
    block = wire[18:]
    # zlib header with FDICT set, then the dictionary's Adler-32
    assert block[0] & 0x0F == 8 and block[1] & 0x20
    assert block[2:6] == bytes.fromhex("e3c6a7c2")
    # an independent zlib decoder with the dictionary reads it
    d = zlib.decompressobj(zdict=spdy.HEADER_DICTIONARY)
    assert spdy.decode_header_block(d.decompress(block)) == (("streamtype", "stdout"),)
    assert Framer().feed(wire) == [frame]


def test_header_compression_state_spans_frames() -> None:
    sender, receiver = Framer(), Framer()
    frames = [SynStreamFrame(i, (("streamtype", t),)) for i, t in
              ((1, "error"), (3, "stdout"), (5, "stderr"))]
    wire = b"".join(sender.encode(f) for f in frames)
    second = sender.encode(SynReplyFrame(7, ()))
    got = []
    for i in range(len(wire)):  # byte by byte: the parser waits for whole frames
        got += receiver.feed(wire[i : i + 1])
    assert got == frames
    assert receiver.feed(second) == [SynReplyFrame(7, ())]
    # a fresh decoder cannot read a mid-stream header block
    with pytest.raises(SpdyProtocolError, match="header block"):
        Framer().feed(second)


def test_syn_reply_headers_and_flags_round_trip() -> None:
    a, b = Framer(), Framer()
    for frame in (SynReplyFrame(1, (("x", "1"),), spdy.FLAG_FIN),
                  HeadersFrame(3, (("a", "b"),)),
                  SynStreamFrame(9, (("port", "80"),), associated_stream_id=0, priority=7,
                                 flags=spdy.FLAG_UNIDIRECTIONAL)):
        assert b.feed(a.encode(frame)) == [frame]


def test_parser_rejects_and_skips() -> None:
    with pytest.raises(SpdyProtocolError, match="version 2"):
        Framer().feed(bytes.fromhex("80020006000000040000000 1".replace(" ", "")))
    with pytest.raises(SpdyProtocolError, match="stream 0"):
        Framer().feed(bytes.fromhex("0000000000000000"))
    with pytest.raises(SpdyProtocolError, match="PING frame of 2 bytes"):
        Framer().feed(bytes.fromhex("80030006000000020000"))
    # unknown control type 0x0a (CREDENTIAL) is skipped; the next frame still parses
    unknown = bytes.fromhex("8003000a00000002abcd")
    assert Framer().feed(unknown + Framer().encode(PingFrame(2))) == [PingFrame(2)]


def test_encoder_rejects_bad_frames() -> None:
    with pytest.raises(SpdyProtocolError, match="stream id 0"):
        Framer().encode(DataFrame(0, b"x"))
    with pytest.raises(SpdyProtocolError, match="status 0"):
        Framer().encode(RstStreamFrame(1, 0))


# --- a session over a socket pair ------------------------------------------------------------


def _pair(on_stream: object = None) -> tuple[SpdyConnection, SpdyConnection]:
    a, b = socket.socketpair()
    accepted: list[spdy.SpdyStream] = []

    def accept(stream: spdy.SpdyStream) -> bool:
        accepted.append(stream)
        return stream.header("streamtype") != "refuse"

    server = SpdyConnection(a, server=True, on_stream=on_stream or accept).start()  # type: ignore[arg-type]
    client = SpdyConnection(b, server=False).start()
    server.accepted = accepted  # type: ignore[attr-defined]
    return server, client


def test_session_streams_both_ways_fin_and_reset() -> None:
    server, client = _pair()
    try:
        out = client.open_stream([("streamType", "stdout")])
        assert out.id == 1
        got = server.accepted[0]  # type: ignore[attr-defined]
        assert got.header("streamType") == "stdout"  # header lookup is case-insensitive
        got.write(b"hello ")
        got.write(b"world")
        got.close()
        assert out.read_all(timeout=10) == b"hello world"
        out.write(b"up")
        out.close()
        assert got.read_all(timeout=10) == b"up"
        # both halves closed on both ends: neither connection keeps the stream
        assert out.id not in client._streams
        assert got.id not in server._streams
        second = client.open_stream([("streamtype", "stdin")])
        assert second.id == 3
        srv_second = server.accepted[1]  # type: ignore[attr-defined]
        second.reset()
        assert srv_second.read(timeout=10) == b""
        assert srv_second.is_reset or srv_second.closed
        with pytest.raises(BrokenPipeError):
            second.write(b"x")
    finally:
        client.abort()
        server.abort()


def test_session_refused_stream_and_ping() -> None:
    server, client = _pair()
    try:
        with pytest.raises(ConnectionRefusedError, match="refused"):
            client.open_stream([("streamtype", "refuse")])
        assert client.ping(10)
        assert server.ping(10)
    finally:
        client.abort()
        server.abort()


def test_session_goaway_and_end_reset_streams() -> None:
    server, client = _pair()
    s = client.open_stream([("streamtype", "x")])
    server.close()  # GOAWAY + half-close
    assert s.read(timeout=10) == b""
    client.abort()
    assert server.wait_closed(10)
    assert client.wait_closed(10)
    assert s.is_reset


def test_session_protocol_error_sends_goaway() -> None:
    a, b = socket.socketpair()
    server = SpdyConnection(a, server=True, on_stream=lambda s: True).start()
    try:
        b.sendall(bytes.fromhex("8002000600000004000000ff"))  # SPDY/2 PING
        framer = Framer()
        frames: list[spdy.Frame] = []
        b.settimeout(10)
        while not frames:
            chunk = b.recv(4096)
            assert chunk
            frames += framer.feed(chunk)
        assert frames[0] == GoAwayFrame(0, spdy.GOAWAY_PROTOCOL_ERROR)
        assert server.wait_closed(10)
        assert isinstance(server.error, SpdyProtocolError)
    finally:
        b.close()
        server.abort()


def test_data_for_unknown_stream_is_reset() -> None:
    a, b = socket.socketpair()
    server = SpdyConnection(a, server=True, on_stream=lambda s: True).start()
    try:
        b.sendall(Framer().encode(DataFrame(41, b"x")))
        b.settimeout(10)
        framer = Framer()
        frames: list[spdy.Frame] = []
        while not frames:
            frames += framer.feed(b.recv(4096))
        assert frames == [RstStreamFrame(41, spdy.RST_INVALID_STREAM)]
    finally:
        b.close()
        server.abort()


def test_many_writers_interleave_whole_frames() -> None:
    server, client = _pair()
    try:
        streams = [client.open_stream([("streamtype", f"s{i}")]) for i in range(4)]
        remote = server.accepted  # type: ignore[attr-defined]
        payload = bytes(range(256)) * 600  # several DATA frames each

        def send(s: spdy.SpdyStream) -> None:
            s.write(payload)
            s.close()

        threads = [threading.Thread(target=send, args=(s,)) for s in remote]
        for t in threads:
            t.start()
        for s in streams:
            assert s.read_all(timeout=30) == payload
        for t in threads:
            t.join()
    finally:
        client.abort()
        server.abort()


# --- properties ------------------------------------------------------------------------------


_ids = hs.integers(1, 2**31 - 1)
_names = hs.text("abcdefghijklmnopqrstuvwxyz-", min_size=1, max_size=12)
_headers = hs.lists(hs.tuples(_names, hs.text(hs.characters(min_codepoint=1, max_codepoint=255),
                                               max_size=20)), max_size=5)


def _merged(pairs: list[tuple[str, str]]) -> tuple[tuple[str, str], ...]:
    # what a header block can express: one entry per name, values NUL-joined then split again
    order: dict[str, list[str]] = {}
    for k, v in pairs:
        order.setdefault(k, []).append(v)
    return tuple((k, part) for k, vs in order.items() for part in "\0".join(vs).split("\0"))


_frames = hs.one_of(
    hs.builds(DataFrame, _ids, hs.binary(max_size=300), hs.sampled_from([0, 1])),
    hs.builds(lambda i, h, f: SynStreamFrame(i, _merged(h), flags=f), _ids, _headers,
              hs.sampled_from([0, 1, 2, 3])),
    hs.builds(lambda i, h: SynReplyFrame(i, _merged(h)), _ids, _headers),
    hs.builds(lambda i, h: HeadersFrame(i, _merged(h)), _ids, _headers),
    hs.builds(RstStreamFrame, _ids, hs.integers(1, 11)),
    hs.builds(PingFrame, hs.integers(0, 2**32 - 1)),
    hs.builds(GoAwayFrame, hs.integers(0, 2**31 - 1), hs.integers(0, 2)),
    hs.builds(WindowUpdateFrame, _ids, hs.integers(0, 2**31 - 1)),
)


@settings(max_examples=200, deadline=None)
@given(hs.lists(_frames, max_size=8), hs.integers(1, 50))
def test_any_frame_sequence_round_trips_in_any_chunking(frames: list[spdy.Frame],
                                                        chunk: int) -> None:
    sender, receiver = Framer(), Framer()
    wire = b"".join(sender.encode(f) for f in frames)
    got: list[spdy.Frame] = []
    for i in range(0, len(wire), chunk):
        got += receiver.feed(wire[i : i + chunk])
    assert got == frames


@settings(max_examples=300, deadline=None)
@given(hs.binary(max_size=200))
def test_garbage_raises_only_protocol_errors(data: bytes) -> None:
    with contextlib.suppress(SpdyProtocolError):
        Framer().feed(data)
