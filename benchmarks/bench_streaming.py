"""Benchmark podkit.cri.streaming.ws against wsproto: RFC 6455 framing as exec/attach use it.

Why: the streaming server frames WebSocket by hand; ``wsproto`` (sans-IO, by the h11 authors) is
the maintained library. This measures both on the same machine, alternating each round so both
see the same noise, and checks the RFC points kubectl relies on:

* ``stdout``: MiB/s of a large stream server -> client (unmasked 32 KiB BINARY messages with the
  channel byte, fed to the parser in 64 KiB reads, reassembled);
* ``stdin``: the same client -> server (masked, as a client must; the server unmasks);
* ``keystroke``: microseconds of one small round trip (2-byte masked message in, 2-byte echo
  out), in memory and over a socketpair (ours: :class:`WebSocketConnection`; wsproto: a blocking
  wrapper of the same shape);
* conformance: masking required of clients, fragments with an interleaved ping, ping -> pong,
  close codes, 64-bit lengths, bad UTF-8, oversized control frames.

The table shows medians and podkit's speedup over wsproto (> 1: podkit is faster).
wsproto is optional: without it only podkit's column is printed. No root needed.

Usage: ``.venv/bin/python benchmarks/bench_streaming.py [--mib N] [--rounds N] [--json out]``
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import threading
import time
from collections.abc import Callable
from typing import Any

from podkit.cri.streaming import ws

try:
    from wsproto.connection import Connection, ConnectionType  # type: ignore[import-not-found,unused-ignore]
    from wsproto.events import (  # type: ignore[import-not-found,unused-ignore]
        BytesMessage,
        CloseConnection,
        Ping,
        Pong,
        TextMessage,
    )

    HAVE_WSPROTO = True
except ImportError:  # optional: the table then has podkit's column only
    HAVE_WSPROTO = False

CHUNK = 32 * 1024  # kubelet copies stdout/stdin in 32 KiB buffers
READ = 64 * 1024  # what one recv() hands the parser

Event = tuple[str, Any]  # ("message", bytes) ("text", str) ("close", code) ("error", code)


class Ours:
    """One end on podkit's pure framing: encode_frame, FrameParser, MessageAssembler."""

    name = "podkit"

    def __init__(self, server: bool) -> None:
        self.server = server
        self.parser = ws.FrameParser(require_mask=server)
        self.assembler = ws.MessageAssembler()
        self.out = bytearray()  # automatic answers (pongs)

    def _mask(self) -> bytes | None:
        return None if self.server else os.urandom(4)

    def binary(self, data: bytes) -> bytes:
        return ws.encode_frame(ws.OP_BINARY, data, mask=self._mask())

    def ping(self, data: bytes) -> bytes:
        return ws.encode_frame(ws.OP_PING, data, mask=self._mask())

    def close(self, code: int) -> bytes:
        return ws.encode_frame(ws.OP_CLOSE, ws.encode_close(code), mask=self._mask())

    def feed(self, data: bytes) -> list[Event]:
        events: list[Event] = []
        try:
            for frame in self.parser.feed(data):
                msg = self.assembler.add(frame)
                if msg is None:
                    continue
                if msg.opcode == ws.OP_PING:
                    self.out += ws.encode_frame(ws.OP_PONG, msg.data, mask=self._mask())
                    events.append(("ping", msg.data))
                elif msg.opcode == ws.OP_PONG:
                    events.append(("pong", msg.data))
                elif msg.opcode == ws.OP_CLOSE:
                    events.append(("close", ws.decode_close(msg.data)[0]))
                elif msg.opcode == ws.OP_TEXT:
                    events.append(("text", msg.data.decode()))
                else:
                    events.append(("message", msg.data))
        except ws.WebSocketError:
            events.append(("error", ws.CLOSE_PROTOCOL_ERROR))
        return events


class Theirs:
    """One end on wsproto's post-handshake Connection, reassembling partial messages."""

    name = "wsproto"

    def __init__(self, server: bool) -> None:
        kind = ConnectionType.SERVER if server else ConnectionType.CLIENT
        self.conn = Connection(kind)
        self.parts: list[bytes] = []
        self.out = bytearray()

    def binary(self, data: bytes) -> bytes:
        return bytes(self.conn.send(BytesMessage(data=data)))

    def ping(self, data: bytes) -> bytes:
        return bytes(self.conn.send(Ping(payload=data)))

    def close(self, code: int) -> bytes:
        return bytes(self.conn.send(CloseConnection(code=code)))

    def feed(self, data: bytes) -> list[Event]:
        self.conn.receive_data(data)
        events: list[Event] = []
        for ev in self.conn.events():
            if isinstance(ev, BytesMessage | TextMessage):
                text = isinstance(ev, TextMessage)
                self.parts.append(ev.data.encode() if text else bytes(ev.data))
                if ev.message_finished:
                    joined = b"".join(self.parts)
                    self.parts = []
                    if isinstance(ev, TextMessage):
                        events.append(("text", joined.decode()))
                    else:
                        events.append(("message", joined))
            elif isinstance(ev, Ping):
                self.out += self.conn.send(ev.response())
                events.append(("ping", bytes(ev.payload)))
            elif isinstance(ev, Pong):
                events.append(("pong", bytes(ev.payload)))
            elif isinstance(ev, CloseConnection):
                kind = "error" if ev.code in (1002, 1007, 1009) else "close"
                events.append((kind, int(ev.code)))
        return events


Impl = type[Ours] | type[Theirs]


def stream(impl: Impl, total: int, server_sends: bool) -> float:
    """Seconds to frame ``total`` bytes in CHUNK messages and parse them back on the other end."""
    sender, receiver = impl(server=server_sends), impl(server=not server_sends)
    payload = bytes([1]) + os.urandom(CHUNK - 1)  # channel byte (stdout) + data
    got = 0
    start = time.perf_counter()
    pending = bytearray()
    for _ in range(total // CHUNK):
        pending += sender.binary(payload)
        while len(pending) >= READ:
            for kind, data in receiver.feed(bytes(pending[:READ])):
                assert kind == "message" and data[0] == 1, kind
                got += len(data)
            del pending[:READ]
    for _, data in receiver.feed(bytes(pending)):
        got += len(data)
    elapsed = time.perf_counter() - start
    assert got == total // CHUNK * CHUNK, (got, total)
    return elapsed


def keystrokes(impl: Impl, n: int) -> float:
    """Microseconds per in-memory round trip of a 2-byte message and its 2-byte echo."""
    client, server = impl(server=False), impl(server=True)
    start = time.perf_counter()
    for i in range(n):
        key = bytes([0, 97 + i % 26])
        ((_, data),) = server.feed(client.binary(key))
        ((_, echo),) = client.feed(server.binary(bytes([1]) + data[1:]))
        assert echo[1] == key[1]
    return (time.perf_counter() - start) / n * 1e6


class TheirsBlocking:
    """wsproto over a socket with the shape of :class:`ws.WebSocketConnection` (send, recv)."""

    def __init__(self, sock: socket.socket, server: bool) -> None:
        self.sock, self.end, self.lock = sock, Theirs(server), threading.Lock()
        self.ready: list[Event] = []

    def send_binary(self, data: bytes) -> None:
        with self.lock:
            self.sock.sendall(self.end.binary(data))

    def recv(self) -> bytes | None:
        while not self.ready:
            data = self.sock.recv(READ)
            if not data:
                return None
            self.ready = self.end.feed(data)
        return bytes(self.ready.pop(0)[1])


def socket_keystrokes(impl: Impl, n: int) -> float:
    """Microseconds per round trip over a socketpair, an echo thread on the server end."""
    a, b = socket.socketpair()
    if impl is Ours:
        client: Any = ws.WebSocketConnection(a, server=False)
        server: Any = ws.WebSocketConnection(b, server=True)

        def recv_server() -> bytes | None:
            msg = server.recv()
            return None if msg is None else bytes(msg.data)

        def recv_client() -> bytes | None:
            msg = client.recv()
            return None if msg is None else bytes(msg.data)
    else:
        client, server = TheirsBlocking(a, server=False), TheirsBlocking(b, server=True)
        recv_server, recv_client = server.recv, client.recv

    def echo() -> None:
        for _ in range(n):
            data = recv_server()
            assert data is not None
            server.send_binary(bytes([1]) + data[1:])

    thread = threading.Thread(target=echo)
    thread.start()
    start = time.perf_counter()
    for i in range(n):
        client.send_binary(bytes([0, 97 + i % 26]))
        assert recv_client() is not None
    elapsed = time.perf_counter() - start
    thread.join()
    a.close()
    b.close()
    return elapsed / n * 1e6


def conformance(impl: Impl) -> dict[str, bool]:
    """The RFC 6455 points kubectl's channel protocols depend on, each checked by a exchange."""
    checks: dict[str, Callable[[], bool]] = {}

    def unmasked_client_frame_refused() -> bool:
        return impl(server=True).feed(ws.encode_frame(ws.OP_BINARY, b"\x00x"))[0][0] == "error"

    def fragments_with_ping_between() -> bool:
        mask = os.urandom(4)
        wire = (ws.encode_frame(ws.OP_BINARY, b"\x00ab", fin=False, mask=mask)
                + ws.encode_frame(ws.OP_PING, b"p", mask=mask)
                + ws.encode_frame(ws.OP_CONTINUATION, b"cd", mask=mask))
        end = impl(server=True)
        events = end.feed(wire)
        pong = ws.FrameParser().feed(bytes(end.out))
        return (events == [("ping", b"p"), ("message", b"\x00abcd")]
                and [(f.opcode, f.payload) for f in pong] == [(ws.OP_PONG, b"p")])

    def ping_answered_with_pong() -> bool:
        server, client = impl(server=True), impl(server=False)
        server.feed(client.ping(b"keepalive"))
        return client.feed(bytes(server.out)) == [("pong", b"keepalive")]

    def close_code_round_trip() -> bool:
        server, client = impl(server=True), impl(server=False)
        return server.feed(client.close(1000)) == [("close", 1000)]

    def length_64_bit() -> bool:
        big = bytes([1]) + b"x" * 70_000
        return impl(server=False).feed(impl(server=True).binary(big)) == [("message", big)]

    def bad_utf8_text_refused() -> bool:
        wire = ws.encode_frame(ws.OP_TEXT, b"\xff\xfe", mask=os.urandom(4))
        return any(kind == "error" for kind, _ in impl(server=True).feed(wire))

    def oversized_control_refused() -> bool:
        head = bytes([0x89, 0x80 | 126]) + (200).to_bytes(2, "big") + b"mask" + b"x" * 200
        return any(kind == "error" for kind, _ in impl(server=True).feed(head))

    for check in (unmasked_client_frame_refused, fragments_with_ping_between,
                  ping_answered_with_pong, close_code_round_trip, length_64_bit,
                  bad_utf8_text_refused, oversized_control_refused):
        checks[check.__name__] = check
    results = {}
    for name, check in checks.items():
        try:
            results[name] = check()
        except Exception:  # a crash is a failed check, not a failed benchmark
            results[name] = False
    return results


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mib", type=int, default=64, help="size of the large stream")
    parser.add_argument("--small", type=int, default=20000, help="keystrokes per round")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--json", help="write the measurements to this file")
    opts = parser.parse_args()
    impls: list[Impl] = [Ours] + ([Theirs] if HAVE_WSPROTO else [])
    total = opts.mib * 1024 * 1024
    rows: dict[str, dict[str, list[float]]] = {}
    for _ in range(opts.rounds):
        for impl in impls:
            for label, value in (
                ("stdout MiB/s", opts.mib / stream(impl, total, server_sends=True)),
                ("stdin MiB/s", opts.mib / stream(impl, total, server_sends=False)),
                ("keystroke us (memory)", keystrokes(impl, opts.small)),
                ("keystroke us (socket)", socket_keystrokes(impl, opts.small // 4)),
            ):
                rows.setdefault(label, {}).setdefault(impl.name, []).append(value)
    medians = {label: {name: statistics.median(v) for name, v in by.items()}
               for label, by in rows.items()}
    names = [impl.name for impl in impls]
    print(f"{'measure':<24}" + "".join(f"{n:>12}" for n in names)
          + ("   podkit speedup" if len(names) == 2 else ""))
    for label, by in medians.items():
        line = f"{label:<24}" + "".join(f"{by[n]:>12.1f}" for n in names)
        if len(names) == 2:  # throughput: more is better; microseconds: fewer is better
            ratio = by["podkit"] / by["wsproto"]
            line += f"{ratio if 'MiB/s' in label else 1 / ratio:>16.2f}x"
        print(line)
    checks = {impl.name: conformance(impl) for impl in impls}
    print()
    print(f"{'conformance':<32}" + "".join(f"{n:>10}" for n in names))
    for check in checks["podkit"]:
        print(f"{check:<32}" + "".join(f"{'ok' if checks[n][check] else 'FAIL':>10}"
                                       for n in names))
    if opts.json:
        with open(opts.json, "w") as f:
            json.dump({"medians": medians, "raw": rows, "conformance": checks}, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
