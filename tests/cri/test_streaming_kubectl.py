"""Interop: the real kubectl (client-go SPDY and WebSocket executors) against the server.

kubectl talks to an API server, which sends exec/attach/port-forward on to kubelet and kubelet to
the CRI streaming server. Here a tiny stand-in API server answers the pod lookups and, like
kubelet, asks the :class:`~podkit.cri.streaming.StreamingServer` for a URL and relays the upgraded
connection to it byte for byte. Containers run under real runc and conmon.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import socket
import subprocess
import threading
import urllib.parse
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

import _leaks
from podkit import netns
from podkit.cri import streaming as st
from podkit.cri.streaming.runtime import ContainerTarget, RuncStreamingRuntime
from podkit.cri.streaming.types import AttachRequest, ExecRequest, PortForwardRequest
from podkit.runtime import Conmon, ConmonSupervisor, Runc
from podkit.runtime.console import set_winsize
from support import require_binary, require_isolated

pytestmark = pytest.mark.integration

POD = "web"


def _config(rootfs: Path, script: str, cid: str, ns: str) -> dict[str, object]:
    return {
        "ociVersion": "1.0.2",
        "process": {"terminal": False, "user": {"uid": 0, "gid": 0},
                    "args": ["sh", "-c", script], "env": ["PATH=/bin:/sbin"], "cwd": "/",
                    "noNewPrivileges": True},
        "root": {"path": os.fspath(rootfs), "readonly": True},
        "mounts": [
            {"destination": "/proc", "type": "proc", "source": "proc"},
            {"destination": "/dev", "type": "tmpfs", "source": "tmpfs",
             "options": ["nosuid", "mode=755", "size=65536k"]},
            {"destination": "/dev/pts", "type": "devpts", "source": "devpts",
             "options": ["nosuid", "noexec", "newinstance", "ptmxmode=0666", "mode=0620"]},
            {"destination": "/tmp", "type": "tmpfs", "source": "tmpfs", "options": ["size=4m"]},
        ],
        "linux": {
            "cgroupsPath": f"/{cid}",
            "resources": {"devices": [{"allow": False, "access": "rwm"}]},
            "namespaces": [{"type": "pid"}, {"type": "ipc"}, {"type": "uts"},
                           {"type": "mount"}, {"type": "network", "path": ns}],
        },
    }


def _pod_json() -> dict[str, object]:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": POD, "namespace": "default", "uid": "u1"},
            "spec": {"containers": [{"name": "main", "image": "busybox"}]},
            "status": {"phase": "Running",
                       "containerStatuses": [{"name": "main", "ready": True, "restartCount": 0,
                                              "image": "busybox", "imageID": "",
                                              "state": {"running": {}}}]}}


_DISCOVERY = {
    "/api": {"kind": "APIVersions", "versions": ["v1"],
             "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0",
                                             "serverAddress": "127.0.0.1"}]},
    "/apis": {"kind": "APIGroupList", "apiVersion": "v1", "groups": []},
    "/api/v1": {"kind": "APIResourceList", "groupVersion": "v1", "resources": [
        {"name": "pods", "singularName": "pod", "namespaced": True, "kind": "Pod",
         "verbs": ["get", "list"], "shortNames": ["po"]},
        {"name": "pods/exec", "singularName": "", "namespaced": True, "kind": "PodExecOptions",
         "verbs": ["create", "get"]},
        {"name": "pods/attach", "singularName": "", "namespaced": True,
         "kind": "PodAttachOptions", "verbs": ["create", "get"]},
        {"name": "pods/portforward", "singularName": "", "namespaced": True,
         "kind": "PodPortForwardOptions", "verbs": ["create", "get"]},
    ]},
}


def _splice(a: socket.socket, b: socket.socket) -> None:
    def one(src: socket.socket, dst: socket.socket) -> None:
        try:
            while chunk := src.recv(65536):
                dst.sendall(chunk)
        except OSError:
            pass
        with contextlib.suppress(OSError):
            dst.shutdown(socket.SHUT_WR)

    t = threading.Thread(target=one, args=(b, a), daemon=True)
    t.start()
    one(a, b)
    t.join(30)


class FakeApiServer:
    """Pods ``web`` (container ``main``); exec/attach/portforward relayed like kubelet does."""

    def __init__(self, streaming: st.StreamingServer, container_id: str, pod_id: str) -> None:
        self.streaming = streaming
        self.container_id = container_id
        self.pod_id = pod_id
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.requests: list[str] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        with conn:
            buf = b""
            while b"\r\n\r\n" not in buf:
                chunk = conn.recv(65536)
                if not chunk:
                    return
                buf += chunk
            head, rest = buf.split(b"\r\n\r\n", 1)
            lines = head.decode("latin-1").split("\r\n")
            method, target, _ = lines[0].split(" ")
            url = urllib.parse.urlsplit(target)
            query = urllib.parse.parse_qs(url.query)
            self.requests.append(f"{method} {url.path}")
            base = f"/api/v1/namespaces/default/pods/{POD}"
            if url.path in _DISCOVERY:
                return self._json(conn, _DISCOVERY[url.path])
            if url.path == base:
                return self._json(conn, _pod_json())
            flag = {k: query.get(k, ["false"])[0] in ("true", "1")
                    for k in ("stdin", "stdout", "stderr", "tty")}
            if url.path == base + "/exec":
                stream_url = self.streaming.get_exec(ExecRequest(
                    self.container_id, tuple(query["command"]), **flag))
            elif url.path == base + "/attach":
                stream_url = self.streaming.get_attach(AttachRequest(self.container_id, **flag))
            elif url.path == base + "/portforward":
                ports = tuple(int(p) for p in query.get("ports", []))
                stream_url = self.streaming.get_port_forward(PortForwardRequest(self.pod_id,
                                                                                ports))
            else:
                conn.sendall(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n")
                return None
            path = urllib.parse.urlsplit(stream_url).path
            upstream = socket.create_connection(self.streaming.server_address, 10)
            with upstream:
                upstream.sendall(f"{method} {path} HTTP/1.1\r\n".encode() +
                                 "\r\n".join(lines[1:]).encode("latin-1") + b"\r\n\r\n" + rest)
                _splice(conn, upstream)
        return None

    @staticmethod
    def _json(conn: socket.socket, obj: object) -> None:
        body = json.dumps(obj).encode()
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                     b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)

    def close(self) -> None:
        self.sock.close()


class Env:
    def __init__(self, tmp: Path, rootfs: Path) -> None:
        self.tmp = tmp
        self.runc = Runc(root=tmp / "rt")
        _leaks.register_runtime_root(tmp / "rt")
        self.conmon = Conmon(self.runc, state_dir=tmp / "cm")
        self.supervisor = ConmonSupervisor(self.conmon)
        self.ns = netns.create(f"pk-st-k-{uuid.uuid4().hex[:8]}", loopback_up=True)
        self.cid = f"pk-st-kubectl-{uuid.uuid4().hex[:8]}"
        bundle = tmp / "bundle"
        bundle.mkdir()
        script = ("echo hello-kubectl > /tmp/index.html; httpd -p 8080 -h /tmp; "
                  "while read l; do echo got:$l; done")
        (bundle / "config.json").write_text(json.dumps(_config(rootfs, script, self.cid,
                                                               self.ns.path)))
        self.supervisor.start(self.cid, bundle, log_path=tmp / "c.log", stdin=True)
        runtime = RuncStreamingRuntime(
            lambda cid: ContainerTarget(cid, self.runc, self.supervisor),
            lambda pod: self.ns.path)
        self.streaming = st.StreamingServer(runtime).start()
        self.api = FakeApiServer(self.streaming, self.cid, "pod-1")
        self.kubeconfig = tmp / "kubeconfig"
        self.kubeconfig.write_text(json.dumps({
            "apiVersion": "v1", "kind": "Config", "current-context": "t",
            "clusters": [{"name": "t", "cluster": {"server": f"http://127.0.0.1:{self.api.port}"}}],
            "contexts": [{"name": "t", "context": {"cluster": "t", "user": "t",
                                                   "namespace": "default"}}],
            "users": [{"name": "t", "user": {}}],
        }))

    def kubectl(self, *args: str, stdin: bytes | None = None, websockets: bool = True,
                timeout: float = 60) -> subprocess.CompletedProcess[bytes]:
        env = dict(os.environ, HOME=os.fspath(self.tmp),
                   KUBECTL_REMOTE_COMMAND_WEBSOCKETS=str(websockets).lower(),
                   KUBECTL_PORT_FORWARD_WEBSOCKETS=str(websockets).lower())
        return subprocess.run(["kubectl", "--kubeconfig", os.fspath(self.kubeconfig),
                               "--request-timeout=30s", *args],
                              input=stdin if stdin is not None else b"", capture_output=True,
                              env=env, timeout=timeout, check=False)

    def cleanup(self) -> None:
        self.api.close()
        self.streaming.stop()
        with contextlib.suppress(Exception):
            self.conmon.delete(self.cid, force=True)
        subprocess.call(self.runc.command("delete", "--force", self.cid),
                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.ns.remove()


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory, busybox_rootfs: Path) -> Iterator[Env]:
    require_isolated()
    require_binary("runc")
    require_binary("conmon")
    require_binary("kubectl")
    e = Env(tmp_path_factory.mktemp("kubectl"), busybox_rootfs)
    try:
        yield e
    finally:
        e.cleanup()


@pytest.mark.parametrize("websockets", [True, False], ids=["websocket", "spdy"])
def test_kubectl_exec(env: Env, websockets: bool) -> None:
    r = env.kubectl("exec", POD, "--", "echo", "hi", websockets=websockets)
    assert (r.returncode, r.stdout) == (0, b"hi\n"), r.stderr
    r = env.kubectl("exec", POD, "--", "sh", "-c", "echo out; echo err >&2; exit 3",
                    websockets=websockets)
    assert r.returncode == 3, r.stderr
    assert r.stdout == b"out\n"
    assert b"err\n" in r.stderr
    assert b"command terminated with exit code 3" in r.stderr


@pytest.mark.parametrize("websockets", [True, False], ids=["websocket", "spdy"])
def test_kubectl_exec_stdin(env: Env, websockets: bool) -> None:
    data = os.urandom(3000).hex().encode() + b"\n"
    r = env.kubectl("exec", "-i", POD, "--", "sh", "-c", "cat; echo done", stdin=data,
                    websockets=websockets)
    assert (r.returncode, r.stdout) == (0, data + b"done\n"), r.stderr


@pytest.mark.parametrize("websockets", [True, False], ids=["websocket", "spdy"])
def test_kubectl_attach(env: Env, websockets: bool) -> None:
    word = f"w{uuid.uuid4().hex[:6]}"
    env_vars = dict(os.environ, HOME=os.fspath(env.tmp),
                    KUBECTL_REMOTE_COMMAND_WEBSOCKETS=str(websockets).lower())
    proc = subprocess.Popen(["kubectl", "--kubeconfig", os.fspath(env.kubeconfig),
                             "attach", "-i", POD, "-c", "main"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, env=env_vars)
    try:
        assert proc.stdin is not None and proc.stdout is not None
        # output reaches the client from the moment the attach is live: repeat until echoed
        seen = threading.Event()

        def feed() -> None:
            assert proc.stdin is not None
            while not seen.wait(0.2):
                with contextlib.suppress(OSError):
                    proc.stdin.write(f"{word}\n".encode())
                    proc.stdin.flush()

        threading.Thread(target=feed, daemon=True).start()
        line = proc.stdout.readline()
        seen.set()
        assert line == f"got:{word}\n".encode()
    finally:
        proc.kill()
        proc.wait(30)
    # the container keeps running after the client went away
    assert env.runc.state(env.cid).status == "running"


@pytest.mark.parametrize("websockets", [True, False], ids=["spdy-in-websocket", "spdy"])
def test_kubectl_port_forward(env: Env, websockets: bool) -> None:
    env.api.requests.clear()
    env_vars = dict(os.environ, HOME=os.fspath(env.tmp),
                    KUBECTL_PORT_FORWARD_WEBSOCKETS=str(websockets).lower())
    proc = subprocess.Popen(["kubectl", "--kubeconfig", os.fspath(env.kubeconfig),
                             "port-forward", f"pod/{POD}", ":8080"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env_vars)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline().decode()
        m = re.search(r"Forwarding from 127\.0\.0\.1:(\d+) -> 8080", line)
        assert m, (line, proc.stderr.read() if proc.poll() is not None and proc.stderr else "")
        for _ in range(2):
            with socket.create_connection(("127.0.0.1", int(m.group(1))), 30) as s:
                s.sendall(b"GET /index.html HTTP/1.0\r\n\r\n")
                reply = b""
                while chunk := s.recv(65536):
                    reply += chunk
            assert reply.startswith(b"HTTP/1."), reply
            assert reply.endswith(b"hello-kubectl\n")
    finally:
        proc.terminate()
        proc.wait(30)
    # websockets: one GET upgraded to the tunnel (no fallback POST); SPDY: one POST
    method = "GET" if websockets else "POST"
    assert [r for r in env.api.requests if r.endswith("/portforward")] == \
        [f"{method} /api/v1/namespaces/default/pods/{POD}/portforward"]


@pytest.mark.parametrize("websockets", [True, False], ids=["websocket", "spdy"])
def test_kubectl_exec_tty_gets_the_terminal_size(env: Env, websockets: bool) -> None:
    master, slave = os.openpty()
    try:
        set_winsize(slave, 33, 111)
        env_vars = dict(os.environ, HOME=os.fspath(env.tmp),
                        KUBECTL_REMOTE_COMMAND_WEBSOCKETS=str(websockets).lower())
        proc = subprocess.Popen(["kubectl", "--kubeconfig", os.fspath(env.kubeconfig),
                                 "exec", "-it", POD, "--", "sh", "-c", "stty size; exit 5"],
                                stdin=slave, stdout=slave, stderr=slave, env=env_vars,
                                start_new_session=True)
        os.close(slave)
        slave = -1
        out = b""
        with contextlib.suppress(OSError):  # EIO once kubectl exited and closed the slave
            while chunk := os.read(master, 4096):
                out += chunk
        assert proc.wait(60) == 5, out
        assert b"33 111" in out
    finally:
        os.close(master)
        if slave >= 0:
            os.close(slave)
