"""Registries for tests: a real ``docker-registry`` process and ``FakeRegistry``, an in-memory one
with switches for the error paths. ``registry`` is a fixture: a conftest that wants it imports it.
"""

from __future__ import annotations

import base64
import json
import os
import signal
import socket
import struct
import subprocess
import threading
import time
import urllib.parse
import urllib.request
from collections import Counter
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from image.imagebuild import MTIME, BuiltImage, build_image, write_layout
from support import require_binary, require_isolated

__all__ = ["FakeRegistry", "free_port", "mirror_hosts", "push_image", "registry", "start_registry",
           "stop_registry", "tiny_image"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def start_registry(tmp: Path, tls: tuple[Path, Path] | None = None, *,
                   client_ca: Path | None = None, htpasswd: Path | None = None,
                   ) -> tuple[subprocess.Popen[bytes], str]:
    """Start ``docker-registry`` on 127.0.0.1:<free port> (TLS with ``(cert, key)``; with
    ``client_ca`` it requires client certificates; with ``htpasswd`` (bcrypt) basic auth)."""
    binary = require_binary("docker-registry")
    port = free_port()
    config = tmp / "config.yml"
    tls_conf = f"  tls:\n    certificate: {tls[0]}\n    key: {tls[1]}\n" if tls else ""
    if tls and client_ca:
        tls_conf += f"    clientcas:\n      - {client_ca}\n"
    auth = f"auth:\n  htpasswd:\n    realm: podkit\n    path: {htpasswd}\n" if htpasswd else ""
    config.write_text(
        "version: 0.1\n"
        "log:\n  level: error\n  accesslog:\n    disabled: true\n"
        f"storage:\n  filesystem:\n    rootdirectory: {tmp / 'data'}\n"
        "  delete:\n    enabled: true\n"
        f"http:\n  addr: 127.0.0.1:{port}\n{tls_conf}{auth}"
    )
    log = open(tmp / "registry.log", "wb")  # noqa: SIM115
    proc = subprocess.Popen([binary, "serve", str(config)], stdout=log, stderr=subprocess.STDOUT,
                            env={"PATH": "/usr/bin:/bin"}, start_new_session=True)
    log.close()
    deadline = time.monotonic() + 20
    while True:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                break
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                stop_registry(proc)
                pytest.fail("docker-registry did not start: "
                            + (tmp / "registry.log").read_text()[-2000:])
            time.sleep(0.05)
    return proc, f"127.0.0.1:{port}"


def stop_registry(proc: subprocess.Popen[bytes]) -> None:
    """Stop a registry started by :func:`start_registry` (by PID)."""
    if proc.poll() is None:
        os.kill(proc.pid, signal.SIGTERM)
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()


@pytest.fixture(scope="module")
def registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A real ``docker-registry`` on 127.0.0.1:<free port>; yields ``127.0.0.1:<port>``."""
    require_isolated()
    proc, host = start_registry(tmp_path_factory.mktemp("registry"))
    try:
        urllib.request.urlopen(f"http://{host}/v2/", timeout=5).close()
        yield host
    finally:
        stop_registry(proc)


class _QuietServer(ThreadingHTTPServer):
    """A test HTTP server that does not print the errors of connections a test broke."""

    daemon_threads = True

    def handle_error(self, request: object, client_address: object) -> None:
        pass


class FakeRegistry:
    """A tiny registry serving one image from memory, with switches for the error paths.

    ``auth``: ``None``, ``"basic"`` or ``"bearer"`` (user ``u``, password ``p``);
    ``statuses[path_suffix]``: statuses to answer first (one per hit); ``corrupt`` and
    ``truncate``: blob digests served wrong or cut short; ``delay``: seconds before answering.
    Hostile switches, keyed by manifest reference or blob digest: ``raw[ref]`` a body served
    instead; ``lengths[ref]`` the Content-Length claimed (the connection closes after the
    body; for a ``statuses`` suffix, of the error answer); ``reset``: the connection is reset
    (RST) halfway through the body; ``redirects[ref]``: a 302 to that path.
    """

    def __init__(self, image: BuiltImage, repo: str = "test/app", tag: str = "v1") -> None:
        self.blobs = dict(image.blobs)
        self.manifests = {tag: image.manifest, image.descriptor["digest"]: image.manifest}
        self.repo = repo
        self.auth: str | None = None
        self.statuses: dict[str, list[int]] = {}
        self.corrupt: set[str] = set()
        self.truncate: set[str] = set()
        self.delay = 0.0
        self.raw: dict[str, bytes] = {}
        self.lengths: dict[str, int] = {}
        self.reset: set[str] = set()
        self.redirects: dict[str, str] = {}
        self.hits: Counter[str] = Counter()
        self.server = _QuietServer(("127.0.0.1", 0), self._handler())
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, args=(0.05,), daemon=True)

    @property
    def host(self) -> str:
        return f"127.0.0.1:{self.server.server_address[1]}"

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def _send(self, status: int, body: bytes = b"", headers: dict[str, str] | None = None,
                      length: int | None = None) -> None:
                self.send_response(status)
                for k, v in (headers or {}).items():
                    self.send_header(k, v)
                self.send_header("Content-Length", str(len(body) if length is None else length))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(body)

            def _authorized(self) -> bool:
                header = self.headers.get("Authorization", "")
                if fake.auth is None:
                    return True
                if fake.auth == "basic":
                    if header == "Basic " + base64.b64encode(b"u:p").decode():
                        return True
                    self._send(401, b'{"errors":[{"code":"UNAUTHORIZED","message":"no"}]}',
                               {"WWW-Authenticate": 'Basic realm="fake"'})
                    return False
                if header == "Bearer t0k":
                    return True
                realm = f"http://{fake.host}/token"
                self._send(401, b"{}", {"WWW-Authenticate":
                                        f'Bearer realm="{realm}",service="fake"'})
                return False

            def do_GET(self) -> None:
                path = self.path.split("?")[0]
                fake.hits[path] += 1
                if fake.delay:
                    time.sleep(fake.delay)
                if path == "/token":
                    ok = self.headers.get("Authorization") == \
                        "Basic " + base64.b64encode(b"u:p").decode()
                    if ok:
                        self._send(200, json.dumps({"token": "t0k"}).encode())
                    else:
                        self._send(401, b'{"errors":[{"code":"DENIED","message":"bad"}]}')
                    return
                for suffix, plan in fake.statuses.items():
                    if path.endswith(suffix) and plan:
                        self._send(plan.pop(0), b'{"errors":[{"code":"X","message":"fake"}]}',
                                   length=fake.lengths.get(suffix))
                        self.close_connection = suffix in fake.lengths
                        return
                if not self._authorized():
                    return
                prefix = f"/v2/{fake.repo}/"
                if not path.startswith(prefix):
                    self._send(404)
                    return
                kind, _, ref = path[len(prefix):].partition("/")
                if ref in fake.redirects:
                    self._send(302, headers={"Location": fake.redirects[ref]})
                elif kind == "manifests" and ref in fake.manifests:
                    body = fake.raw.get(ref) or json.dumps(fake.manifests[ref]).encode()
                    self._hostile(ref, body,
                                  {"Content-Type": fake.manifests[ref]["mediaType"]})
                elif kind == "blobs" and ref in fake.blobs:
                    body = fake.raw.get(ref) or fake.blobs[ref]
                    if ref in fake.corrupt:
                        body = b"X" + body[1:]
                    if ref in fake.truncate:
                        self._send(200, body[: len(body) // 2], length=len(body))
                        self.close_connection = True
                        return
                    self._hostile(ref, body)
                else:
                    self._send(404, b'{"errors":[{"code":"MANIFEST_UNKNOWN","message":"nope"}]}')

            def _hostile(self, ref: str, body: bytes,
                         headers: dict[str, str] | None = None) -> None:
                """Serve ``body``, or break the answer the way the switches for ``ref`` say."""
                if ref in fake.reset:
                    self._send(200, b"", headers, length=len(body))
                    self.wfile.write(body[: len(body) // 2])
                    self.wfile.flush()
                    self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                                               struct.pack("ii", 1, 0))
                    self.connection.close()  # RST: "connection reset by peer"
                    self.close_connection = True
                    return
                if ref in fake.lengths:
                    self._send(200, body, headers, length=fake.lengths[ref])
                    self.close_connection = True
                    return
                self._send(200, body, headers)

            do_HEAD = do_GET

            def do_POST(self) -> None:
                """The OAuth2 refresh-token grant at ``/token`` (identity token ``r3fresh``)."""
                size = int(self.headers.get("Content-Length") or 0)
                form = urllib.parse.parse_qs(self.rfile.read(size).decode())
                fake.hits["POST " + self.path] += 1
                if form.get("grant_type") == ["refresh_token"] and \
                        form.get("refresh_token") == ["r3fresh"]:
                    self._send(200, json.dumps({"access_token": "t0k"}).encode())
                else:
                    self._send(401, b'{"errors":[{"code":"DENIED","message":"bad"}]}')

        return Handler

    def __enter__(self) -> FakeRegistry:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(5)


def tiny_image(text: str, arch: str | None = None) -> BuiltImage:
    """A two-layer image (a file, a hard link to it, a dir) whose content says ``text``; for
    ``arch`` (default: this machine's)."""
    import io
    import tarfile

    from podkit.image.descriptor import host_platform

    layers = []
    for n in range(2):
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tf:
            d = tarfile.TarInfo(f"data{n}")
            d.type, d.mode, d.mtime = tarfile.DIRTYPE, 0o755, MTIME
            tf.addfile(d)
            body = (text * 2000).encode()
            f = tarfile.TarInfo(f"data{n}/file")
            f.size, f.mode, f.mtime = len(body), 0o644, MTIME
            tf.addfile(f, io.BytesIO(body))
            link = tarfile.TarInfo(f"data{n}/link")
            link.type, link.linkname, link.mtime = tarfile.LNKTYPE, f"data{n}/file", MTIME
            tf.addfile(link)
        layers.append(buf.getvalue())
    return build_image(layers, ["gzip", ""], {"Cmd": ["/bin/true"], "Env": ["T=" + text]},
                       arch=arch or host_platform().architecture)


def push_image(tmp: Path, image: BuiltImage, ref: str, auth: Any = None) -> None:
    """Push ``image`` as ``ref`` (``127.0.0.1:<port>/repo:tag``) with podkit's client (and
    ``auth``, :class:`~podkit.image.Credentials`, for a registry that wants them)."""
    from podkit.image import ImageStore, Registry, import_image

    work = tmp / f"push-{image.descriptor['digest'][7:19]}"
    src = ImageStore(work / "store")
    layout = write_layout(work / "layout", [(image.descriptor, "v1")], image.blobs)
    import_image(src, layout, ref)
    Registry(auth=auth).push(src, ref)


def mirror_hosts(root: Path, mirror: str, registries: tuple[str, ...] = ("gcr.io",
                 "registry.k8s.io")) -> Path:
    """A hosts dir (containerd's ``hosts.toml`` layout) serving ``registries`` from the
    plain-HTTP ``mirror`` only: the upstream is the mirror too, so nothing leaves 127.0.0.1."""
    for name in registries:
        (root / name).mkdir(parents=True, exist_ok=True)
        (root / name / "hosts.toml").write_text(
            f'server = "http://{mirror}"\n'
            f'[host."http://{mirror}"]\n  capabilities = ["pull", "resolve"]\n')
    return root


@pytest.fixture
def started(tmp_path: Path) -> Iterator[Any]:
    """``start(name, **kw) -> host``: docker-registry processes stopped after the test."""
    require_isolated()
    procs = []

    def start(name: str, **kwargs: Any) -> str:
        d = tmp_path / name
        d.mkdir()
        proc, host = start_registry(d, **kwargs)
        procs.append(proc)
        return host

    try:
        yield start
    finally:
        for proc in procs:
            stop_registry(proc)
