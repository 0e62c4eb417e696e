"""Probes: the kubelet's state machine (delays, periods, thresholds, startup gating) and one
run of each kind against real local servers (httpGet with redirects and headers, tcpSocket)."""

from __future__ import annotations

import http.server
import socket
import ssl
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

from podkit.kube import ProbeSpec
from podkit.kube.probes import ContainerProbes, Health, Outcome, ProbeResult, ProbeState, run_probe

OK, BAD = ProbeResult(True), ProbeResult(False, "nope")


def test_due_after_the_initial_delay_then_every_period() -> None:
    p = ProbeState.start("readiness", ProbeSpec(kind="exec", initial_delay_seconds=5,
                                                period_seconds=3), started=100.0)
    assert not p.due(104.9) and p.due(105.0)
    p.record(OK, 105.0)
    assert not p.due(107.9) and p.due(108.0)


def test_initial_outcomes_as_the_kubelet() -> None:
    spec = ProbeSpec(kind="exec")
    assert [ProbeState.start(k, spec, 0).outcome for k in ("readiness", "liveness", "startup")
            ] == [Outcome.FAILURE, Outcome.SUCCESS, Outcome.UNKNOWN]


def test_thresholds_count_consecutive_results() -> None:
    p = ProbeState.start("readiness", ProbeSpec(kind="exec", success_threshold=2,
                                                failure_threshold=3), 0)
    assert [p.record(r, 0).value for r in (OK, BAD, OK, OK)] == [
        "Failure", "Failure", "Failure", "Success"]
    assert [p.record(r, 0).value for r in (BAD, BAD, OK, BAD, BAD, BAD)] == [
        "Success", "Success", "Success", "Success", "Success", "Failure"]
    assert p.last == BAD and p.streak == 3


def test_startup_gates_the_others_and_failures_mean_restart() -> None:
    spec = ProbeSpec(kind="exec", period_seconds=1, failure_threshold=1)
    probes = ContainerProbes.start(0, startup=spec, liveness=spec, readiness=spec)
    assert [p.kind for p in probes.due(0)] == ["startup"]
    assert probes.health() == Health.NOT_READY
    assert probes.startup is not None and probes.readiness is not None
    probes.startup.record(OK, 0)
    assert [p.kind for p in probes.due(1)] == ["liveness", "readiness"]
    assert probes.health() == Health.NOT_READY  # readiness has not passed yet
    probes.readiness.record(OK, 1)
    assert probes.health() == Health.READY
    assert probes.liveness is not None
    probes.liveness.record(BAD, 2)
    assert probes.health() == Health.FAILED
    assert "liveness probe Failure (nope)" in probes.describe()
    assert ContainerProbes.start(0).health() == Health.READY  # no probes: running is ready


def test_exec_probe_by_exit_code() -> None:
    calls: list[tuple[Sequence[str], float]] = []

    def exec_fn(cmd: Sequence[str], timeout: float) -> tuple[int, bytes]:
        calls.append((cmd, timeout))
        return (0 if cmd[0] == "ok" else 2), b"some output\n"

    assert run_probe(ProbeSpec(kind="exec", command=("ok",), timeout_seconds=4), pod_ip="",
                     exec_fn=exec_fn) == ProbeResult(True, "exit code 0: some output")
    assert not run_probe(ProbeSpec(kind="exec", command=("no",)), pod_ip="",
                         exec_fn=exec_fn).ok
    assert calls == [(("ok",), 4.0), (("no",), 1.0)]

    def broken(cmd: Sequence[str], timeout: float) -> tuple[int, bytes]:
        raise TimeoutError("timed out after 1s")

    res = run_probe(ProbeSpec(kind="exec", command=("x",)), pod_ip="", exec_fn=broken)
    assert res == ProbeResult(False, "exec ['x']: timed out after 1s")


class _Handler(http.server.BaseHTTPRequestHandler):
    seen: list[dict[str, str]] = []

    def do_GET(self) -> None:
        _Handler.seen.append({"path": self.path, **{k.lower(): v for k, v in self.headers.items()}})
        routes = {"/ok": (200, ""), "/fail": (500, ""), "/here": (302, "/ok"),
                  "/away": (301, "http://elsewhere.invalid/ok"), "/loop": (302, "/loop")}
        status, location = routes.get(self.path.split("?")[0], (404, ""))
        self.send_response(status)
        if location:
            self.send_header("Location", location)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def server() -> Iterator[int]:
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    _Handler.seen.clear()
    try:
        yield srv.server_address[1]
    finally:
        srv.shutdown()
        srv.server_close()
        t.join()


def _get(port: int, path: str, **kw: object) -> ProbeResult:
    spec = ProbeSpec(kind="httpGet", port=port, path=path, **kw)  # type: ignore[arg-type]
    return run_probe(spec, pod_ip="127.0.0.1", exec_fn=lambda c, t: (0, b""))


def test_http_get_status_and_redirects(server: int) -> None:
    assert _get(server, "/ok") == ProbeResult(True, f"GET http://127.0.0.1:{server}/ok: HTTP 200")
    assert not _get(server, "/fail").ok and not _get(server, "/missing").ok
    res = _get(server, "/here")  # same host: followed
    assert res.ok and res.message.endswith("/ok: HTTP 200")
    assert [s["path"] for s in _Handler.seen[-2:]] == ["/here", "/ok"]
    res = _get(server, "/away")  # another host: not followed, the redirect counts as success
    assert res.ok and "redirect to another host http://elsewhere.invalid/ok not followed" in \
        res.message
    assert _Handler.seen[-1]["path"] == "/away"
    assert _get(server, "/loop") == ProbeResult(
        False, f"GET http://127.0.0.1:{server}/loop: more than 10 redirects")


def test_http_get_headers(server: int) -> None:
    assert _get(server, "/ok?x=1").ok
    sent = _Handler.seen[-1]
    assert (sent["path"], sent["user-agent"], sent["accept"]) == (
        "/ok?x=1", "kube-probe/1.31", "*/*")
    assert _get(server, "/ok", http_headers=(("Host", "web.example"), ("X-Probe", "1"),
                                             ("User-Agent", "mine"))).ok
    sent = _Handler.seen[-1]
    assert (sent["host"], sent["x-probe"], sent["user-agent"]) == ("web.example", "1", "mine")


def test_http_get_and_tcp_to_a_closed_port_fail() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # bound, not listening: connections are refused
        res = _get(port, "/")
        assert not res.ok and "refused" in res.message.lower()
        tcp = run_probe(ProbeSpec(kind="tcpSocket", port=port), pod_ip="127.0.0.1",
                        exec_fn=lambda c, t: (0, b""))
        assert not tcp.ok and tcp.message.startswith(f"tcp 127.0.0.1:{port}: ")


def test_tcp_socket_connects() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        res = run_probe(ProbeSpec(kind="tcpSocket", port=port), pod_ip="127.0.0.1",
                        exec_fn=lambda c, t: (0, b""))
        assert res == ProbeResult(True, f"tcp 127.0.0.1:{port} connected")


def test_https_get_does_not_verify_the_certificate(tmp_path: Path) -> None:
    from image.certs import make_pki

    pki = make_pki(tmp_path / "pki")  # a private CA nobody trusts
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ctx.load_cert_chain(pki.server_cert, pki.server_key)
    srv.socket = ctx.wrap_socket(srv.socket, server_side=True)
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    try:
        port = srv.server_address[1]
        assert _get(port, "/ok", scheme="HTTPS") == ProbeResult(
            True, f"GET https://127.0.0.1:{port}/ok: HTTP 200")
        assert not _get(port, "/fail", scheme="HTTPS").ok
    finally:
        srv.shutdown()
        srv.server_close()
        t.join()
