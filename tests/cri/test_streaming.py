"""The streaming server (podkit.cri.streaming) with an in-memory runtime: protocols, tokens, errors.

The real-runtime sessions (runc exec/attach, port-forward into a netns) are in
test_streaming_runtime.py.
"""

from __future__ import annotations

import base64
import json
import os
import socket
import struct
import time
from collections.abc import Iterator, Sequence

import pytest

from podkit.cri import streaming as st
from podkit.cri.streaming import client as cl
from podkit.cri.streaming import spdy, ws
from podkit.cri.streaming.types import (
    AttachRequest,
    DuplexStream,
    ExecRequest,
    InputStream,
    OutputStream,
    PortForwardRequest,
    ResizeQueue,
    StreamingRuntime,
)
from podkit.errors import InvalidArgumentError, PodkitError


class FakeRuntime:
    """Commands: ``echo ARGS``, ``exit N``, ``cat``, ``err TEXT``, ``sizes N``, ``boom``."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str]] = []

    def exec(self, container_id: str, cmd: Sequence[str], stdin: InputStream | None,
             stdout: OutputStream | None, stderr: OutputStream | None, tty: bool,
             resize: ResizeQueue | None) -> int:
        self.calls.append(("exec", container_id))
        name, *args = cmd
        if name == "echo":
            assert stdout is not None
            stdout.write((" ".join(args) + "\n").encode())
            return 0
        if name == "exit":
            return int(args[0])
        if name == "cat":
            assert stdin is not None and stdout is not None
            while chunk := stdin.read():
                stdout.write(chunk)
            return 0
        if name == "err":
            assert stderr is not None
            stderr.write(args[0].encode())
            return 1
        if name == "sizes":
            assert resize is not None and stdout is not None
            for _ in range(int(args[0])):
                size = resize.get(30)
                assert size is not None
                stdout.write(f"{size.height} {size.width}\n".encode())
            return 0
        raise RuntimeError(f"no such command {name!r}")

    def attach(self, container_id: str, stdin: InputStream | None,
               stdout: OutputStream | None, stderr: OutputStream | None, tty: bool,
               resize: ResizeQueue | None) -> None:
        self.calls.append(("attach", container_id))
        assert stdout is not None
        stdout.write(b"attached\n")
        if stdin is not None:
            while chunk := stdin.read():
                stdout.write(chunk.upper())

    def port_forward(self, pod_sandbox_id: str, port: int, stream: DuplexStream) -> None:
        self.calls.append(("portforward", pod_sandbox_id))
        if port == 1:
            raise ConnectionRefusedError("connection refused")
        data = bytearray()
        while chunk := stream.read():
            data += chunk
            if data.endswith(b"\n"):
                break
        stream.write(f"{port}:".encode() + bytes(data).upper())


@pytest.fixture()
def fake() -> FakeRuntime:
    return FakeRuntime()


@pytest.fixture()
def server(fake: FakeRuntime) -> Iterator[st.StreamingServer]:
    with st.StreamingServer(fake) as s:
        yield s


def _exec(server: st.StreamingServer, cmd: Sequence[str], **kw: bool) -> str:
    flags = {"stdout": True, "stderr": True} | kw
    return server.get_exec(ExecRequest("c1", tuple(cmd), **flags))


def test_fake_runtime_is_a_streaming_runtime(fake: FakeRuntime) -> None:
    assert isinstance(fake, StreamingRuntime)


def test_url_shape_and_token(server: st.StreamingServer) -> None:
    url = _exec(server, ["echo", "hi"])
    host, port = server.server_address
    prefix = f"http://{host}:{port}/exec/"
    assert url.startswith(prefix)
    token = url[len(prefix):]
    assert len(token) == 11 and base64.urlsafe_b64decode(token + "=")
    assert server.get_attach(AttachRequest("c1", stdout=True)).split("/")[-2] == "attach"
    assert server.get_port_forward(PortForwardRequest("p1", (80,))).split("/")[-2] == \
        "portforward"


@pytest.mark.parametrize("protocol", list(st.REMOTECOMMAND_PROTOCOLS))
def test_spdy_exec_each_protocol(server: st.StreamingServer, protocol: str) -> None:
    ok = cl.run_remotecommand(_exec(server, ["echo", "hi"]), protocols=[protocol])
    assert ok.protocol == protocol
    assert ok.stdout == b"hi\n"
    assert ok.exit_code == 0
    bad = cl.run_remotecommand(_exec(server, ["exit", "3"]), protocols=[protocol])
    if protocol == st.PROTOCOL_V4:
        assert bad.exit_code == 3
        assert bad.error == (
            b'{"metadata":{},"status":"Failure","message":"command terminated with non-zero '
            b'exit code: error executing command [exit 3], exit code 3","reason":'
            b'"NonZeroExitCode","details":{"causes":[{"reason":"ExitCode","message":"3"}]}}'
        )
        assert ok.error == b'{"metadata":{},"status":"Success"}'
    else:  # pre-v4: plain text on failure, nothing on success; no exit code on the wire
        assert bad.error.startswith(b"command terminated with non-zero exit code")
        assert ok.error == b""
        with pytest.raises(PodkitError, match="exit code 3"):
            bad.exit_code  # noqa: B018


@pytest.mark.parametrize("protocol", [st.PROTOCOL_V5, st.PROTOCOL_V4, st.WS_V4_BASE64,
                                      st.PROTOCOL_V1, st.WS_BASE64])
def test_websocket_exec_each_protocol(server: st.StreamingServer, protocol: str) -> None:
    ok = cl.run_remotecommand(_exec(server, ["echo", "hi"]), transport="websocket",
                              protocols=[protocol])
    assert ok.protocol == protocol
    assert ok.stdout == b"hi\n"
    assert ok.exit_code == 0
    bad = cl.run_remotecommand(_exec(server, ["exit", "3"]), transport="websocket",
                               protocols=[protocol])
    err = cl.run_remotecommand(_exec(server, ["err", "oops"]), transport="websocket",
                               protocols=[protocol])
    assert err.stderr == b"oops"
    if protocol in (st.PROTOCOL_V5, st.PROTOCOL_V4, st.WS_V4_BASE64):
        assert bad.exit_code == 3
        assert err.exit_code == 1
    else:
        assert bad.error.endswith(b"exit code 3")


def test_websocket_first_message_is_empty_on_stdout(server: st.StreamingServer) -> None:
    session = cl.connect_remotecommand(_exec(server, ["echo", "x"]), transport="websocket")
    result = session.wait()
    assert isinstance(session, cl._WsSession)
    assert session.first == (1, b"")
    assert result.stdout == b"x\n"


def test_websocket_without_subprotocol_is_binary_v1(server: st.StreamingServer) -> None:
    r = cl.run_remotecommand(_exec(server, ["exit", "2"]), transport="websocket", protocols=[])
    assert r.protocol == ""
    assert r.error.startswith(b"command terminated with non-zero exit code")


@pytest.mark.parametrize("transport", ["spdy", "websocket"])
def test_stdin_is_piped_and_closed(server: st.StreamingServer, transport: str) -> None:
    protocols = [st.PROTOCOL_V5] if transport == "websocket" else None
    data = os.urandom(200_000)
    r = cl.run_remotecommand(_exec(server, ["cat"], stdin=True), transport=transport,
                             protocols=protocols, stdin=data)
    assert r.stdout == data
    assert r.exit_code == 0


@pytest.mark.parametrize("transport", ["spdy", "websocket"])
def test_tty_resize_events(server: st.StreamingServer, transport: str) -> None:
    url = server.get_exec(ExecRequest("c1", ("sizes", "2"), tty=True, stdout=True))
    s = cl.connect_remotecommand(url, transport=transport, tty=True, stderr=False)
    s.resize(80, 24)
    s.resize(100, 30)
    r = s.wait()
    assert r.stdout == b"24 80\n30 100\n"
    assert r.exit_code == 0


def test_runtime_error_is_an_internal_error_status(server: st.StreamingServer) -> None:
    r = cl.run_remotecommand(_exec(server, ["nope"]))
    status = r.status
    assert status is not None
    assert status["reason"] == "InternalError" and status["code"] == 500
    assert status["message"] == ("Internal error occurred: error executing command in "
                                 "container: no such command 'nope'")
    with pytest.raises(InvalidArgumentError, match="no such command"):
        r.exit_code  # noqa: B018


@pytest.mark.parametrize("transport", ["spdy", "websocket"])
def test_attach(server: st.StreamingServer, fake: FakeRuntime, transport: str) -> None:
    url = server.get_attach(AttachRequest("c9", stdin=True, stdout=True))
    r = cl.run_remotecommand(url, transport=transport, stdin=b"abc", stderr=False,
                             protocols=[st.PROTOCOL_V5] if transport == "websocket" else None)
    assert r.stdout == b"attached\nABC"
    assert r.exit_code == 0
    assert ("attach", "c9") in fake.calls


def test_token_is_single_use(server: st.StreamingServer) -> None:
    url = _exec(server, ["echo", "once"])
    assert cl.run_remotecommand(url).stdout == b"once\n"
    with pytest.raises(cl.UpgradeRejectedError) as e:
        cl.run_remotecommand(url)
    assert e.value.code == 404


def test_token_of_another_kind_is_404(server: st.StreamingServer) -> None:
    url = _exec(server, ["echo"]).replace("/exec/", "/attach/")
    with pytest.raises(cl.UpgradeRejectedError) as e:
        cl.run_remotecommand(url)
    assert e.value.code == 404


@pytest.mark.parametrize("path", ["/exec/nosuchtoken", "/exec/", "/other/x", "/exec/a/b"])
def test_bad_paths_are_404(server: st.StreamingServer, path: str) -> None:
    with pytest.raises(cl.UpgradeRejectedError) as e:
        cl.run_remotecommand(server.base_url + path)
    assert e.value.code == 404


def test_token_expiry_with_a_fake_clock() -> None:
    now = [1000.0]
    cache = st.TokenCache(ttl=60, clock=lambda: now[0])
    t1 = cache.insert(AttachRequest("a", stdout=True))
    t2 = cache.insert(AttachRequest("b", stdout=True))
    now[0] += 59.9
    assert cache.consume(t1) == AttachRequest("a", stdout=True)
    now[0] += 0.2
    assert cache.consume(t2) is None  # expired
    assert cache.consume("never") is None


def test_token_cache_limit() -> None:
    cache = st.TokenCache(max_in_flight=2, clock=lambda: 0.0)
    cache.insert(AttachRequest("a", stdout=True))
    cache.insert(AttachRequest("a", stdout=True))
    with pytest.raises(st.StreamingError, match="too many in-flight"):
        cache.insert(AttachRequest("a", stdout=True))


def test_expired_token_over_http_is_404(fake: FakeRuntime) -> None:
    now = [0.0]
    with st.StreamingServer(fake, cache=st.TokenCache(clock=lambda: now[0])) as s:
        url = s.get_exec(ExecRequest("c", ("echo",), stdout=True))
        now[0] = 61.0
        with pytest.raises(cl.UpgradeRejectedError) as e:
            cl.run_remotecommand(url)
        assert e.value.code == 404


def test_unsupported_spdy_protocol_is_403_with_accepted_list(server: st.StreamingServer) -> None:
    with pytest.raises(cl.UpgradeRejectedError) as e:
        cl.run_remotecommand(_exec(server, ["echo"]), protocols=["v9.channel.k8s.io"])
    assert e.value.code == 403
    assert "unable to negotiate protocol: client supports [v9.channel.k8s.io]" in e.value.body
    assert e.value.headers["x-accepted-stream-protocol-versions"] == \
        list(st.REMOTECOMMAND_PROTOCOLS)


def test_unsupported_websocket_protocol_is_403(server: st.StreamingServer) -> None:
    with pytest.raises(cl.UpgradeRejectedError) as e:
        cl.run_remotecommand(_exec(server, ["echo"]), transport="websocket",
                             protocols=["v9.channel.k8s.io"])
    assert e.value.code == 403
    assert "requested protocol(s) are not supported: [v9.channel.k8s.io]" in e.value.body


def _raw(server: st.StreamingServer, url: str, headers: Sequence[tuple[str, str]]) -> str:
    path = url[len(server.base_url):]
    host, port = server.server_address
    with socket.create_connection((host, port), 10) as s:
        lines = [f"GET {path} HTTP/1.1", "Host: x", *[f"{k}: {v}" for k, v in headers]]
        s.sendall(("\r\n".join(lines) + "\r\n\r\n").encode())
        out = b""
        while chunk := s.recv(4096):
            out += chunk
    return out.decode()


def test_missing_protocol_header_is_400(server: st.StreamingServer) -> None:
    resp = _raw(server, _exec(server, ["echo"]),
                [("Connection", "Upgrade"), ("Upgrade", "SPDY/3.1")])
    assert resp.startswith("HTTP/1.1 400 ")
    assert "X-Stream-Protocol-Version is required" in resp


def test_plain_get_without_upgrade_is_400(server: st.StreamingServer) -> None:
    resp = _raw(server, _exec(server, ["echo"]),
                [("X-Stream-Protocol-Version", "v4.channel.k8s.io")])
    assert resp.startswith("HTTP/1.1 400 ")
    assert "missing upgrade headers" in resp


def test_bad_websocket_version_is_400(server: st.StreamingServer) -> None:
    resp = _raw(server, _exec(server, ["echo"]),
                [("Connection", "Upgrade"), ("Upgrade", "websocket"),
                 ("Sec-WebSocket-Version", "8"), ("Sec-WebSocket-Key", "x")])
    assert resp.startswith("HTTP/1.1 400 ")
    assert "Sec-WebSocket-Version: 13" in resp


def test_malformed_request_is_400(server: st.StreamingServer) -> None:
    host, port = server.server_address
    with socket.create_connection((host, port), 10) as s:
        s.sendall(b"garbage\r\n\r\n")
        assert s.recv(4096).startswith(b"HTTP/1.1 400 ")


@pytest.mark.parametrize(
    ("req", "message"),
    [
        (ExecRequest("", ("x",), stdout=True), "missing required container_id"),
        (ExecRequest("c", ("x",), tty=True, stdout=True, stderr=True), "tty and stderr"),
        (ExecRequest("c", ("x",)), "one of stdin, stdout, or stderr"),
        (ExecRequest("c", (), stdout=True), "cmd must not be empty"),
    ],
)
def test_get_exec_validation(server: st.StreamingServer, req: ExecRequest, message: str) -> None:
    with pytest.raises(InvalidArgumentError, match=message):
        server.get_exec(req)
    assert len(server.cache) == 0


def test_get_port_forward_validation(server: st.StreamingServer) -> None:
    with pytest.raises(InvalidArgumentError, match="pod_sandbox_id"):
        server.get_port_forward(PortForwardRequest(""))
    with pytest.raises(InvalidArgumentError, match="port 70000"):
        server.get_port_forward(PortForwardRequest("p", (70000,)))


def test_protobuf_requests_are_accepted(server: st.StreamingServer) -> None:
    pb = pytest.importorskip("podkit.cri.api_pb2")
    url = server.get_exec(pb.ExecRequest(container_id="c1", cmd=["echo", "pb"], stdout=True))
    assert cl.run_remotecommand(url, stderr=False).stdout == b"pb\n"
    assert server.get_port_forward(pb.PortForwardRequest(pod_sandbox_id="p", port=[80]))


@pytest.mark.parametrize("tunnel", [False, True], ids=["spdy", "spdy-in-websocket"])
def test_spdy_port_forward_pairs_and_errors(server: st.StreamingServer, fake: FakeRuntime,
                                            tunnel: bool) -> None:
    pf = cl.SpdyPortForward(server.get_port_forward(PortForwardRequest("pod1")), tunnel=tunnel)
    try:
        conns = [pf.open(8080), pf.open(9090)]
        for i, (data, _) in enumerate(conns):
            data.write(f"hello {i}\n".encode())
        assert conns[1][0].read_all(timeout=30) == b"9090:HELLO 1\n"
        assert conns[0][0].read_all(timeout=30) == b"8080:HELLO 0\n"
        assert conns[0][1].read_all(timeout=30) == b""  # error stream: closed, empty
        _, err = pf.open(1)
        assert err.read_all(timeout=30) == (b"error forwarding port 1 to pod pod1, uid : "
                                            b"connection refused")
        # a stream without a port header is refused
        with pytest.raises(ConnectionRefusedError):
            pf.conn.open_stream([("streamtype", "data")])
    finally:
        pf.close()
    assert fake.calls.count(("portforward", "pod1")) == 3


def test_spdy_port_forward_without_request_id(server: st.StreamingServer) -> None:
    pf = cl.SpdyPortForward(server.get_port_forward(PortForwardRequest("pod1")))
    try:  # old clients: error stream N, data stream N+2
        err = pf.conn.open_stream([("streamtype", "error"), ("port", "7")])
        data = pf.conn.open_stream([("streamtype", "data"), ("port", "7")])
        data.write(b"x\n")
        assert data.read_all(timeout=30) == b"7:X\n"
        assert err.read_all(timeout=30) == b""
    finally:
        pf.close()


def test_websocket_port_forward(server: st.StreamingServer) -> None:
    url = server.get_port_forward(PortForwardRequest("pod1", (8080, 1)))
    pf = cl.WsPortForward(url)
    try:
        assert pf.port_prefix(0) == (8080, 8080)
        assert pf.port_prefix(1) == (1, 1)
        pf.send(0, b"abc\n")
        assert pf.wait_data(0, b"ABC") == struct.pack("<H", 8080) + b"8080:ABC\n"
        err = pf._chan(3).wait_for(b"refused", 30)
        assert err == struct.pack("<H", 1) + (b"error forwarding port 1 to pod pod1, uid : "
                                              b"connection refused")
    finally:
        pf.close()


def test_websocket_port_forward_ports_from_query(server: st.StreamingServer) -> None:
    url = server.get_port_forward(PortForwardRequest("pod1"))
    pf = cl.WsPortForward(url + "?port=5000")
    try:
        assert pf.port_prefix(0) == (5000, 5000)
    finally:
        pf.close()
    url = server.get_port_forward(PortForwardRequest("pod1"))
    with pytest.raises(cl.UpgradeRejectedError) as e:
        cl.WsPortForward(url)
    assert e.value.code == 400 and "'port' is required" in e.value.body


def test_stream_creation_timeout_closes_the_connection(fake: FakeRuntime) -> None:
    with st.StreamingServer(fake, stream_creation_timeout=0.5) as s:
        url = s.get_exec(ExecRequest("c", ("echo",), stdout=True))
        sock, _, rest = cl.http_upgrade(url, [("Connection", "Upgrade"),
                                              ("Upgrade", "SPDY/3.1"),
                                              ("X-Stream-Protocol-Version", "v4.channel.k8s.io")])
        conn = spdy.SpdyConnection(sock, server=False, initial=rest).start()
        conn.open_stream([("streamtype", "error")])  # stdout never comes
        assert conn.wait_closed(30)
        assert conn.goaway_received
        assert fake.calls == []
        conn.abort()


def test_resize_stream_json_split_across_frames(server: st.StreamingServer) -> None:
    url = server.get_exec(ExecRequest("c1", ("sizes", "3"), tty=True, stdout=True))
    s = cl.connect_remotecommand(url, tty=True, stderr=False)
    assert isinstance(s, cl._SpdySession)
    stream = s.streams["resize"]
    doc = b'{"Width":80,"Height":24}\n{"width":1,' + b'"height":2} {"Width":3,"Height":4}'
    for i in range(0, len(doc), 7):
        stream.write(doc[i : i + 7])
    assert s.wait().stdout == b"24 80\n2 1\n4 3\n"


def test_server_stop_cuts_sessions(fake: FakeRuntime) -> None:
    s = st.StreamingServer(fake).start()
    url = s.get_exec(ExecRequest("c1", ("cat",), stdin=True, stdout=True))
    session = cl.connect_remotecommand(url, stdin=True, stderr=False)
    session.write_stdin(b"x")
    assert session.wait_output(b"x") == b"x"
    s.stop()
    result = session.wait(30)
    assert result.stdout == b"x"


def test_status_helpers() -> None:
    assert st.exit_code_from_status(st.status_success()) == 0
    assert st.exit_code_from_status(st.status_exit_code(7, ["a"])) == 7
    with pytest.raises(InvalidArgumentError):
        st.exit_code_from_status(st.status_internal_error("x"))
    assert json.dumps(st.status_internal_error("x"), separators=(",", ":")) == (
        '{"metadata":{},"status":"Failure","message":"Internal error occurred: x",'
        '"reason":"InternalError","details":{"causes":[{"message":"x"}]},"code":500}')


def test_websocket_rejects_unmasked_frames_from_the_client(server: st.StreamingServer) -> None:
    url = _exec(server, ["cat"], stdin=True)
    key = base64.b64encode(os.urandom(16)).decode()
    sock, _, rest = cl.http_upgrade(url, [("Connection", "Upgrade"), ("Upgrade", "websocket"),
                                          ("Sec-WebSocket-Version", "13"),
                                          ("Sec-WebSocket-Key", key),
                                          ("Sec-WebSocket-Protocol", "v4.channel.k8s.io")])
    try:
        sock.sendall(ws.encode_frame(ws.OP_BINARY, b"\x00abc"))  # unmasked: protocol error
        sock.settimeout(30)
        data = rest
        while chunk := sock.recv(4096):
            data += chunk
        frames = ws.FrameParser().feed(data)
        closes = [f for f in frames if f.opcode == ws.OP_CLOSE]
        assert closes and ws.decode_close(closes[0].payload)[0] == 1002
    finally:
        sock.close()


def test_streams_of_the_wrong_kinds_do_not_start_the_session(fake: FakeRuntime) -> None:
    with st.StreamingServer(fake, stream_creation_timeout=0.5) as s:
        url = s.get_exec(ExecRequest("c", ("echo", "x"), stdout=True))
        sock, _, rest = cl.http_upgrade(url, [("Connection", "Upgrade"),
                                              ("Upgrade", "SPDY/3.1"),
                                              ("X-Stream-Protocol-Version", "v4.channel.k8s.io")])
        conn = spdy.SpdyConnection(sock, server=False, initial=rest).start()
        conn.open_stream([("streamtype", "error")])
        conn.open_stream([("streamtype", "resize")])  # not asked for; stdout never comes
        conn.open_stream([("streamtype", "bogus")])  # replied to, ignored (as kubelet)
        assert conn.wait_closed(30)
        assert fake.calls == []
        conn.abort()


@pytest.mark.parametrize("transport", ["spdy", "websocket"])
def test_idle_sessions_are_cut(fake: FakeRuntime, transport: str) -> None:
    with st.StreamingServer(fake, stream_idle_timeout=0.2) as s:
        url = s.get_exec(ExecRequest("c1", ("cat",), stdin=True, stdout=True))
        session = cl.connect_remotecommand(url, transport=transport, stdin=True, stderr=False,
                                           protocols=[st.PROTOCOL_V5]
                                           if transport == "websocket" else None)
        result = session.wait(30)  # nobody types: the server cuts the connection
        assert result.error == b""  # no status: the session was cut, not finished
        assert ("exec", "c1") in fake.calls
        for _ in range(500):  # the handler thread finishes after the client saw the end
            if not s._live:
                break
            time.sleep(0.01)
        assert s._live == set()
