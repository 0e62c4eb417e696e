"""WebSocket framing (podkit.cri.streaming.ws): RFC 6455 byte vectors, masking, fragments, close."""

from __future__ import annotations

import contextlib
import socket

import pytest
from hypothesis import given, settings
from hypothesis import strategies as hs

from podkit.cri.streaming import ws
from podkit.cri.streaming.ws import (
    FrameParser,
    Message,
    MessageAssembler,
    WebSocketConnection,
    WebSocketError,
    WsFrame,
)

MASK = bytes.fromhex("37fa213d")


def test_accept_key_rfc6455_example() -> None:
    # RFC 6455 section 1.3
    assert ws.accept_key("dGhlIHNhbXBsZSBub25jZQ==") == "s3pPLMBiTxaQ9kYGzzhZRbK+xOo="


@pytest.mark.parametrize(
    ("opcode", "payload", "mask", "fin", "wire"),
    [  # RFC 6455 section 5.7
        (ws.OP_TEXT, b"Hello", None, True, "810548656c6c6f"),
        (ws.OP_TEXT, b"Hello", MASK, True, "818537fa213d7f9f4d5158"),
        (ws.OP_TEXT, b"Hel", None, False, "010348656c"),
        (ws.OP_CONTINUATION, b"lo", None, True, "80026c6f"),
        (ws.OP_PING, b"Hello", None, True, "890548656c6c6f"),
        (ws.OP_PONG, b"Hello", MASK, True, "8a8537fa213d7f9f4d5158"),
    ],
)
def test_frame_byte_vectors(opcode: int, payload: bytes, mask: bytes | None, fin: bool,
                            wire: str) -> None:
    raw = bytes.fromhex(wire)
    assert ws.encode_frame(opcode, payload, fin=fin, mask=mask) == raw
    assert FrameParser().feed(raw) == [WsFrame(opcode, payload, fin, mask is not None)]


def test_extended_lengths() -> None:
    mid = ws.encode_frame(ws.OP_BINARY, b"\x01" * 256)
    assert mid[:4] == bytes.fromhex("827e0100") and len(mid) == 4 + 256
    big = ws.encode_frame(ws.OP_BINARY, b"\x02" * 65536)
    assert big[:10] == bytes.fromhex("827f0000000000010000") and len(big) == 10 + 65536
    parser = FrameParser()
    frames = []
    data = mid + big
    for i in range(0, len(data), 1000):  # arbitrary chunking
        frames += parser.feed(data[i : i + 1000])
    assert [len(f.payload) for f in frames] == [256, 65536]


def test_fragmented_message_with_interleaved_ping() -> None:
    parser, asm = FrameParser(), MessageAssembler()
    raw = bytes.fromhex("010348656c") + bytes.fromhex("890548656c6c6f") + bytes.fromhex("80026c6f")
    out = [asm.add(f) for f in parser.feed(raw)]
    assert out == [None, Message(ws.OP_PING, b"Hello"), Message(ws.OP_TEXT, b"Hello")]


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ("c10548656c6c6f", "reserved bits"),
        ("830548656c6c6f", "unknown opcode"),
        ("097e0100", "control frame"),
        ("0905", "control frame"),
    ],
)
def test_parser_errors(raw: str, message: str) -> None:
    with pytest.raises(WebSocketError, match=message):
        FrameParser().feed(bytes.fromhex(raw) + b"\0" * 300)


def test_server_requires_masked_frames_and_limits_size() -> None:
    with pytest.raises(WebSocketError, match="not masked"):
        FrameParser(require_mask=True).feed(bytes.fromhex("810548656c6c6f"))
    with pytest.raises(WebSocketError, match="exceeds"):
        FrameParser(max_size=10).feed(ws.encode_frame(ws.OP_BINARY, b"x" * 11))


def test_assembler_errors() -> None:
    with pytest.raises(WebSocketError, match="continuation frame without"):
        MessageAssembler().add(WsFrame(ws.OP_CONTINUATION, b"x"))
    asm = MessageAssembler()
    asm.add(WsFrame(ws.OP_TEXT, b"a", fin=False))
    with pytest.raises(WebSocketError, match="before the fragmented message ended"):
        asm.add(WsFrame(ws.OP_BINARY, b"b"))
    with pytest.raises(WebSocketError, match="UTF-8"):
        MessageAssembler().add(WsFrame(ws.OP_TEXT, b"\xff"))


def test_encoder_errors() -> None:
    with pytest.raises(WebSocketError, match="125 bytes"):
        ws.encode_frame(ws.OP_PING, b"x" * 126)
    with pytest.raises(WebSocketError, match="mask of 3 bytes"):
        ws.encode_frame(ws.OP_TEXT, b"x", mask=b"abc")


def test_close_payload() -> None:
    assert ws.encode_close(1000, "bye") == b"\x03\xe8bye"
    assert ws.decode_close(b"\x03\xe8bye") == (1000, "bye")
    assert ws.decode_close(b"") == (None, "")
    assert ws.encode_close(None) == b""
    with pytest.raises(WebSocketError):
        ws.decode_close(b"\x03")


def test_connection_ping_pong_and_closing_handshake() -> None:
    a, b = socket.socketpair()
    server = WebSocketConnection(a, server=True)
    client = WebSocketConnection(b, server=False)
    try:
        client.send(ws.OP_PING, b"p")
        client.send_binary(b"\x00data")
        assert server.recv() == Message(ws.OP_BINARY, b"\x00data")  # ping answered on the way
        b.settimeout(10)
        pong = FrameParser().feed(b.recv(100))
        assert pong == [WsFrame(ws.OP_PONG, b"p")]
        server.send_text("hi")
        assert client.recv() == Message(ws.OP_TEXT, b"hi")
        client.close(1000, "done")
        assert server.recv() is None
        assert server.close_received == (1000, "done")
        assert client.recv() is None  # the server echoed the close
        assert client.close_received == (1000, "")
        with pytest.raises(BrokenPipeError):
            server.send_binary(b"late")
    finally:
        server.shutdown()
        client.shutdown()


def test_connection_unmasked_client_frame_closes_with_1002() -> None:
    a, b = socket.socketpair()
    server = WebSocketConnection(a, server=True)
    try:
        b.sendall(ws.encode_frame(ws.OP_BINARY, b"x"))  # no mask
        with pytest.raises(WebSocketError, match="not masked"):
            server.recv()
        b.settimeout(10)
        frames = FrameParser().feed(b.recv(200))
        assert frames[0].opcode == ws.OP_CLOSE
        assert ws.decode_close(frames[0].payload)[0] == 1002
    finally:
        b.close()
        server.shutdown()


# --- properties ------------------------------------------------------------------------------



@settings(max_examples=200, deadline=None)
@given(hs.lists(hs.binary(max_size=70_000), min_size=1, max_size=4),
       hs.one_of(hs.none(), hs.binary(min_size=4, max_size=4)), hs.integers(1, 5000))
def test_fragmented_binary_message_round_trips(parts: list[bytes], mask: bytes | None,
                                               chunk: int) -> None:
    wire = b"".join(
        ws.encode_frame(ws.OP_BINARY if i == 0 else ws.OP_CONTINUATION, p,
                        fin=i == len(parts) - 1, mask=mask)
        for i, p in enumerate(parts))
    parser, asm = FrameParser(require_mask=mask is not None), MessageAssembler()
    msgs = []
    for i in range(0, len(wire), chunk):
        for frame in parser.feed(wire[i : i + chunk]):
            if (m := asm.add(frame)) is not None:
                msgs.append(m)
    assert msgs == [Message(ws.OP_BINARY, b"".join(parts))]


@settings(max_examples=300, deadline=None)
@given(hs.binary(max_size=200))
def test_garbage_raises_only_websocket_errors(data: bytes) -> None:
    asm = MessageAssembler()
    with contextlib.suppress(WebSocketError):
        for frame in FrameParser(max_size=1 << 20).feed(data):
            asm.add(frame)


@pytest.mark.parametrize("size", [1, 3, 4, 5, 511, 512, 513, 4096, 70_001])
def test_masking_matches_the_rfc_on_both_sides_of_the_short_cutoff(size: int) -> None:
    """Short payloads XOR as one integer, long ones through translate tables: same bytes."""
    payload, mask = (bytes(range(256)) * (size // 256 + 1))[:size], b"\x12\x34\xab\xcd"
    wire = ws.encode_frame(ws.OP_BINARY, payload, mask=mask)
    masked = wire[-size:]
    assert masked == bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
    assert FrameParser(require_mask=True).feed(wire) == [WsFrame(ws.OP_BINARY, payload, True, True)]
