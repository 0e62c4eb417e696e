"""The streaming server on real parts (podkit.cri.streaming.runtime): runc exec, conmon attach,
port-forward into a pinned network namespace, over SPDY/3.1 and WebSocket.

Run inside scripts/isolated (``scripts/isolated .venv/bin/pytest tests/cri``). IDs are
``pk-st-...``; the runc ``--root`` and conmon state live in the pytest tmp dir.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

import _leaks
from podkit import netns
from podkit.cri import streaming as st
from podkit.cri.streaming import client as cl
from podkit.cri.streaming.runtime import ContainerTarget, RuncStreamingRuntime
from podkit.cri.streaming.types import AttachRequest, ExecRequest, PortForwardRequest
from podkit.errors import NotFoundError
from podkit.runtime import Conmon, ConmonSupervisor, Runc
from runtime._bundles import busybox_config
from support import require_binary, require_isolated

pytestmark = pytest.mark.integration

READY = "pk-st-ready"


def _config(rootfs: Path, args: list[str], cid: str, netns_path: str | None) -> dict[str, object]:
    return busybox_config(
        rootfs, args, f"/{cid}", env=["PATH=/bin:/sbin", "TERM=vt100", "PK_STREAM=1"],
        cwd="/tmp", hostname="pk-st",
        mounts=[{"destination": "/tmp", "type": "tmpfs", "source": "tmpfs",
                 "options": ["nosuid", "nodev", "size=16m"]}],
        namespaces=[{"type": "network", "path": netns_path} if netns_path else
                    {"type": "network"}])


class Env:
    """runc + conmon with private state, a pod netns, the containers made, a streaming server."""

    def __init__(self, tmp: Path, rootfs: Path) -> None:
        self.tmp = tmp
        self.rootfs = rootfs
        self.runc = Runc(root=tmp / "rt")
        _leaks.register_runtime_root(tmp / "rt")
        self.conmon = Conmon(self.runc, state_dir=tmp / "cm")
        self.supervisor = ConmonSupervisor(self.conmon)
        self.ids: list[str] = []
        self.ns = netns.create(f"pk-st-{uuid.uuid4().hex[:8]}", loopback_up=True)
        self.pods = {"pod1": self.ns.path, "hostpod": ""}
        runtime = RuncStreamingRuntime(self.resolve, self.resolve_netns)
        self.server = st.StreamingServer(runtime).start()

    def resolve(self, container_id: str) -> ContainerTarget:
        if container_id not in self.ids:
            raise NotFoundError(f"no container {container_id!r}")
        return ContainerTarget(container_id, self.runc, self.supervisor)

    def resolve_netns(self, pod_id: str) -> str:
        try:
            return self.pods[pod_id]
        except KeyError:
            raise NotFoundError(f"no pod sandbox {pod_id!r}") from None

    def run(self, what: str, script: str, *, stdin: bool = False, in_pod: bool = False,
            tty: bool = False) -> str:
        cid = f"pk-st-{what}-{uuid.uuid4().hex[:8]}"
        bundle = self.tmp / f"bundle-{cid}"
        bundle.mkdir()
        config = _config(self.rootfs, ["sh", "-c", script], cid,
                         self.ns.path if in_pod else None)
        config["process"]["terminal"] = tty  # type: ignore[index]
        (bundle / "config.json").write_text(json.dumps(config))
        self.ids.append(cid)
        self.supervisor.start(cid, bundle, log_path=self.tmp / f"{cid}.log", stdin=stdin,
                              tty=tty)
        return cid

    def cleanup(self) -> None:
        self.server.stop()
        for cid in self.ids:
            with contextlib.suppress(Exception):
                self.conmon.delete(cid, force=True)
            subprocess.call(self.runc.command("delete", "--force", cid),
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.ns.remove()


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory, busybox_rootfs: Path) -> Iterator[Env]:
    require_isolated()
    require_binary("runc")
    require_binary("conmon")
    e = Env(tmp_path_factory.mktemp("streaming"), busybox_rootfs)
    try:
        yield e
    finally:
        e.cleanup()


@pytest.fixture(scope="module")
def sleeper(env: Env) -> str:
    return env.run("sleep", "exec sleep 1000")


TRANSPORTS = [("spdy", None), ("websocket", [st.PROTOCOL_V5]), ("websocket", [st.PROTOCOL_V4])]


def _exec(env: Env, cid: str, cmd: list[str], **kw: bool) -> str:
    return env.server.get_exec(ExecRequest(cid, tuple(cmd), **({"stdout": True,
                                                                 "stderr": True} | kw)))


@pytest.mark.parametrize(("transport", "protocols"), TRANSPORTS)
def test_exec_echo_and_exit_code(env: Env, sleeper: str, transport: str,
                                 protocols: list[str] | None) -> None:
    ok = cl.run_remotecommand(_exec(env, sleeper, ["echo", "hi"]), transport=transport,
                              protocols=protocols)
    assert (ok.stdout, ok.stderr, ok.exit_code) == (b"hi\n", b"", 0)
    assert ok.status == st.status_success()
    bad = cl.run_remotecommand(
        _exec(env, sleeper, ["sh", "-c", "echo out; echo err >&2; exit 3"]),
        transport=transport, protocols=protocols)
    assert (bad.stdout, bad.stderr, bad.exit_code) == (b"out\n", b"err\n", 3)
    assert bad.status is not None and bad.status["reason"] == "NonZeroExitCode"


def test_exec_uses_the_container_process_settings(env: Env, sleeper: str) -> None:
    r = cl.run_remotecommand(_exec(env, sleeper, ["sh", "-c", "pwd; echo $PK_STREAM"]))
    assert r.stdout == b"/tmp\n1\n"


@pytest.mark.parametrize(("transport", "protocols"), TRANSPORTS[:2])
def test_exec_stdin_piping(env: Env, sleeper: str, transport: str,
                           protocols: list[str] | None) -> None:
    data = os.urandom(150_000)
    r = cl.run_remotecommand(_exec(env, sleeper, ["cat"], stdin=True), transport=transport,
                             protocols=protocols, stdin=data)
    assert r.stdout == data
    assert r.exit_code == 0


def _stty_until(session: cl.RemoteCommandSession, want: bytes) -> None:
    """Ask ``stty size`` until the answer is ``want`` (a resize is applied asynchronously)."""
    for _ in range(50):
        session.write_stdin(b"stty size\n")
        if want in session.wait_output(want, timeout=0.2):
            return
    raise AssertionError(f"never saw {want!r}: {session.wait_output(want, 0)!r}")


@pytest.mark.parametrize(("transport", "protocols"), TRANSPORTS[:2])
def test_exec_tty_and_resize(env: Env, sleeper: str, transport: str,
                             protocols: list[str] | None) -> None:
    url = env.server.get_exec(ExecRequest(sleeper, ("sh",), tty=True, stdin=True, stdout=True))
    s = cl.connect_remotecommand(url, transport=transport, protocols=protocols, tty=True,
                                 stdin=True, stderr=False)
    s.resize(100, 30)
    _stty_until(s, b"30 100")
    s.resize(120, 40)
    _stty_until(s, b"40 120")
    s.write_stdin(b"tty; echo term=$TERM; exit 7\n")
    r = s.wait()
    assert b"/dev/pts/" in r.stdout
    assert b"term=xterm\r\n" in r.stdout
    assert b"\r\n" in r.stdout  # a terminal: output line discipline
    assert r.exit_code == 7


def test_exec_in_a_missing_container_is_an_internal_error(env: Env) -> None:
    env.ids.append("pk-st-gone")  # resolvable, but runc does not know it
    try:
        r = cl.run_remotecommand(_exec(env, "pk-st-gone", ["true"]))
    finally:
        env.ids.remove("pk-st-gone")
    assert r.status is not None
    assert r.status["reason"] == "InternalError"
    assert "pk-st-gone" in r.status["message"]


@pytest.mark.parametrize(("transport", "protocols"), TRANSPORTS[:2])
def test_attach_to_a_running_container(env: Env, transport: str,
                                       protocols: list[str] | None) -> None:
    cid = env.run("attach", "while read l; do echo got:$l; done", stdin=True)
    url = env.server.get_attach(AttachRequest(cid, stdin=True, stdout=True, stderr=True))
    s = cl.connect_remotecommand(url, transport=transport, protocols=protocols, stdin=True)
    for _ in range(50):  # output flows from the moment conmon accepted the attach
        s.write_stdin(b"ping\n")
        if b"got:ping" in s.wait_output(b"got:ping", 0.2):
            break
    s.write_stdin(b"hello\n")
    assert b"got:hello" in s.wait_output(b"got:hello", 30)
    s.close()  # detach: the container keeps running
    assert env.runc.state(cid).status == "running"


@pytest.fixture(scope="module")
def httpd(env: Env) -> int:
    port = 8080
    env.run("httpd", f"echo hello-from-pod > /tmp/index.html; exec httpd -f -p {port} -h /tmp",
            in_pod=True)

    def probe() -> bool:
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 1):
            return True
        return False

    for _ in range(200):
        if netns.run_in(env.ns.path, probe):
            return port
    raise AssertionError("httpd in the pod never listened")


def test_port_forward_spdy(env: Env, httpd: int) -> None:
    pf = cl.SpdyPortForward(env.server.get_port_forward(PortForwardRequest("pod1", (httpd,))))
    try:
        for _ in range(2):  # two forwarded connections on one SPDY session
            data, error = pf.open(httpd)
            data.write(b"GET /index.html HTTP/1.0\r\n\r\n")
            reply = data.read_all(timeout=30)
            assert reply.startswith(b"HTTP/1.")
            assert reply.endswith(b"hello-from-pod\n")
            assert error.read_all(timeout=30) == b""
        data, error = pf.open(9)  # nothing listens there
        assert b"error forwarding port 9 to pod pod1" in error.read_all(timeout=30)
        assert data.read_all(timeout=30) == b""
    finally:
        pf.close()


def test_port_forward_websocket(env: Env, httpd: int) -> None:
    pf = cl.WsPortForward(env.server.get_port_forward(PortForwardRequest("pod1", (httpd,))))
    try:
        assert pf.port_prefix(0) == (httpd, httpd)
        pf.send(0, b"GET /index.html HTTP/1.0\r\n\r\n")
        assert b"hello-from-pod" in pf.wait_data(0, b"hello-from-pod", 30)
    finally:
        pf.close()


def test_port_forward_unknown_pod(env: Env) -> None:
    pf = cl.SpdyPortForward(env.server.get_port_forward(PortForwardRequest("nopod")))
    try:
        _, error = pf.open(80)
        assert b"no pod sandbox 'nopod'" in error.read_all(timeout=30)
    finally:
        pf.close()


def test_port_forward_host_network_pod(env: Env) -> None:
    # a host-network pod: the connection is made in the server's own namespace (here the
    # private one of scripts/isolated)
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]

    def serve() -> None:
        conn, _ = listener.accept()
        with conn:
            conn.sendall(b"host:" + conn.recv(100))

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    pf = cl.SpdyPortForward(env.server.get_port_forward(PortForwardRequest("hostpod")))
    try:
        data, error = pf.open(port)
        data.write(b"hi")
        data.close()
        assert data.read_all(timeout=30) == b"host:hi"
        assert error.read_all(timeout=30) == b""
    finally:
        pf.close()
        listener.close()
        t.join(10)


@pytest.mark.parametrize(("transport", "protocols"), TRANSPORTS[:2])
def test_exec_is_killed_when_the_client_leaves(env: Env, sleeper: str, transport: str,
                                               protocols: list[str] | None) -> None:
    before = set(env.runc.ps(sleeper))
    s = cl.connect_remotecommand(_exec(env, sleeper, ["sh", "-c", "echo up; exec sleep 997"]),
                                 transport=transport, protocols=protocols)
    assert b"up" in s.wait_output(b"up", 30)
    assert len(set(env.runc.ps(sleeper)) - before) == 1
    s.close()
    for _ in range(300):
        if set(env.runc.ps(sleeper)) == before:
            break
        time.sleep(0.1)
    assert set(env.runc.ps(sleeper)) == before


@pytest.mark.parametrize(("transport", "protocols"), TRANSPORTS[:2])
def test_attach_with_a_tty_and_resize(env: Env, transport: str,
                                      protocols: list[str] | None) -> None:
    cid = env.run("attach-tty", "exec sh", stdin=True, tty=True)
    url = env.server.get_attach(AttachRequest(cid, tty=True, stdin=True, stdout=True))
    s = cl.connect_remotecommand(url, transport=transport, protocols=protocols, tty=True,
                                 stdin=True, stderr=False)
    s.resize(90, 25)
    _stty_until(s, b"25 90")
    s.resize(91, 26)
    _stty_until(s, b"26 91")
    s.close()
    assert env.runc.state(cid).status == "running"
