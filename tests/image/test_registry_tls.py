"""Pulls through registry hosts, TLS and credentials against real docker-registry processes.

All on 127.0.0.1: a plain-HTTP mirror serving public names (``gcr.io/...``), a TLS registry
with a private CA made by openssl here, one that requires a client certificate, an htpasswd
(bcrypt) one, fall-through between mirrors, a mirror that lies about content, a credential
helper. Every connection the client opens is recorded: none may leave 127.0.0.1.
"""

from __future__ import annotations

import io
import json
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from image.certs import Pki, bcrypt_htpasswd, make_pki
from image.imagebuild import BuiltImage, write_layout
from image.registries import free_port
from podkit.cli import main
from podkit.image import (
    AuthFile,
    Credentials,
    DigestMismatchError,
    ImageStore,
    Registry,
    RegistryError,
    RegistryHost,
    RegistryHosts,
    import_image,
)

pytestmark = pytest.mark.integration

SECRET = "pa55-Wr0ng-or-right"
UNROUTABLE = "https://192.0.2.1"  # TEST-NET-1: any attempt to reach it would show up


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return make_pki(tmp_path_factory.mktemp("pki"))


@pytest.fixture
def connections(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, int]]:
    """Every (host, port) the client connects to during the test."""
    seen: list[tuple[str, int]] = []
    real = socket.create_connection

    def record(address: tuple[str, int], *args: Any, **kwargs: Any) -> socket.socket:
        seen.append((address[0], int(address[1])))
        return real(address, *args, **kwargs)

    monkeypatch.setattr(socket, "create_connection", record)
    return seen


def _hosts(root: Path, files: dict[str, str]) -> RegistryHosts:
    for registry, text in files.items():
        (root / registry).mkdir(parents=True, exist_ok=True)
        (root / registry / "hosts.toml").write_text(text)
    return RegistryHosts.load(root)


def _push(tmp: Path, image: BuiltImage, ref: str, registry: Registry) -> None:
    src = ImageStore(tmp / "push-src")
    layout = write_layout(tmp / "push-layout", [(image.descriptor, "v1")], image.blobs)
    import_image(src, layout, ref)
    registry.push(src, ref)


def _assert_pulled(store: ImageStore, ref: str, image: BuiltImage) -> None:
    got = store.get(ref)
    assert got.manifest.digest == image.descriptor["digest"]
    for digest, blob in image.blobs.items():
        if store.has_blob(digest):
            assert store.read_blob(digest) == blob


def test_public_names_through_a_local_mirror_stay_local(
        started: Any, sample: BuiltImage, tmp_path: Path, connections: list[tuple[str, int]],
        capsys: pytest.CaptureFixture[str]) -> None:
    mirror = started("mirror")
    _push(tmp_path, sample, f"{mirror}/pause/pause:v1", Registry())
    entry = (f'server = "{UNROUTABLE}"\ncapabilities = ["push"]\n'
             f'[host."http://{mirror}"]\n  capabilities = ["pull", "resolve"]\n'
             '  header = {x-podkit-test = "mirror"}\n')
    hosts = _hosts(tmp_path / "certs.d", {"gcr.io": entry, "registry.k8s.io": entry})
    connections.clear()
    store = ImageStore(tmp_path / "dst")
    reg = Registry(hosts=hosts, retries=0)
    for ref in ("gcr.io/pause/pause:v1", "registry.k8s.io/pause/pause:v1",
                f"gcr.io/pause/pause@{sample.descriptor['digest']}"):
        reg.pull(store, ref)
        _assert_pulled(store, ref, sample)
    # the CLI with the same directory; then a broken file is refused, naming file and key
    root = str(tmp_path / "cli-root")
    assert main(["image", "pull", "-q", "--root", root, "--registry-config-dir",
                 str(tmp_path / "certs.d"), "registry.k8s.io/pause/pause:v1"]) == 0
    assert capsys.readouterr().out.split() == ["registry.k8s.io/pause/pause:v1",
                                               sample.descriptor["digest"]]
    assert connections and {h for h, _ in connections} == {"127.0.0.1"}
    assert {f"127.0.0.1:{p}" for _, p in connections} == {mirror}
    broken = tmp_path / "certs.d" / "gcr.io" / "hosts.toml"
    broken.write_text(entry.replace('"resolve"]', '"resolve", "fetch"]'))
    assert main(["image", "pull", "-q", "--root", root, "--registry-config-dir",
                 str(tmp_path / "certs.d"), "gcr.io/pause/pause:v1"]) == 2  # bad input
    err = capsys.readouterr().err
    assert str(broken) in err and "capabilities: unknown capability 'fetch'" in err


def test_fall_through_between_mirrors(started: Any, sample: BuiltImage, tmp_path: Path,
                                      connections: list[tuple[str, int]]) -> None:
    empty, full = started("empty"), started("full")
    _push(tmp_path, sample, f"{full}/app/sample:v1", Registry())
    hosts = _hosts(tmp_path / "certs.d", {"quay.io": (
        f'server = "{UNROUTABLE}"\ncapabilities = ["push"]\n'
        f'[host."http://{empty}"]\n[host."http://{full}"]\n')})
    connections.clear()
    store = ImageStore(tmp_path / "dst")
    reg = Registry(hosts=hosts, retries=0)
    reg.pull(store, "quay.io/app/sample:v1")
    _assert_pulled(store, "quay.io/app/sample:v1", sample)
    ports = [f"127.0.0.1:{p}" for _, p in connections]
    assert ports[0] == empty and full in ports  # the first mirror was asked first
    # a dead mirror first: asked once, then last (not once per blob)
    dead = f"127.0.0.1:{free_port()}"
    dead_first = RegistryHosts({"quay.io": [RegistryHost.from_url(f"http://{dead}"),
                                            *hosts.hosts("quay.io")[1:2]]})
    connections.clear()
    Registry(hosts=dead_first, retries=0).pull(ImageStore(tmp_path / "d2"),
                                               "quay.io/app/sample:v1")
    assert [f"127.0.0.1:{p}" for _, p in connections].count(dead) == 1
    # nothing anywhere: the not-found error of the first host, naming the reference
    with pytest.raises(Exception, match=r"quay.io/app/missing:v1") as err:
        reg.pull(store, "quay.io/app/missing:v1")
    assert "404" in str(err.value)
    # a registry without any host for the capability
    pull_only = RegistryHosts({"quay.io": [RegistryHost.from_url(
        f"http://{full}", capabilities=frozenset({"pull", "resolve"}))]})
    with pytest.raises(RegistryError, match=r"no host of quay\.io has the push capability"):
        Registry(hosts=pull_only).push(store, "quay.io/app/sample:v1", "quay.io/app/other:v1")


class _LyingMirror:
    """An HTTP server that answers every manifest and blob with wrong content of the right
    size (``sizes[digest]``), and records each request's path and headers."""

    def __init__(self, sizes: dict[str, int]) -> None:
        self.requests: list[tuple[str, dict[str, str]]] = []
        lying = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def do_GET(self) -> None:
                lying.requests.append((self.path, dict(self.headers.items())))
                name = self.path.rsplit("/", 1)[-1]
                body = b"\0" * sizes.get(name, 2)
                self.send_response(200)
                self.send_header("Content-Type",
                                 "application/vnd.oci.image.manifest.v1+json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, args=(0.05,),
                                       daemon=True)
        self.thread.start()
        self.host = f"127.0.0.1:{self.server.server_address[1]}"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(5)


def test_a_mirror_serving_other_content_is_refused(started: Any, sample: BuiltImage,
                                                   tmp_path: Path) -> None:
    real = started("real")
    _push(tmp_path, sample, f"{real}/app/sample:v1", Registry())
    sizes = {d: len(b) for d, b in sample.blobs.items()}
    sizes[sample.descriptor["digest"]] = sample.descriptor["size"]
    liar = _LyingMirror(sizes)
    try:
        hosts = _hosts(tmp_path / "certs.d", {"ghcr.io": (
            f'server = "http://{real}"\n'
            f'[host."http://{liar.host}/mirror/api"]\n  capabilities = ["pull"]\n'
            '  override_path = true\n  header = {x-token = ["a", "b"]}\n')})
        store = ImageStore(tmp_path / "dst")
        reg = Registry(hosts=hosts, retries=0)
        by_digest = f"ghcr.io/app/sample@{sample.descriptor['digest']}"
        reg.pull(store, by_digest)  # the liar answers first, is refused, the real one serves
        _assert_pulled(store, by_digest, sample)
        paths = [p for p, _ in liar.requests]
        assert f"/mirror/api/app/sample/manifests/{sample.descriptor['digest']}" in paths
        assert any("/mirror/api/app/sample/blobs/" in p for p in paths)
        assert all(h.get("X-Token") == "a, b" for _, h in liar.requests)
        only_liar = RegistryHosts({"ghcr.io": hosts.hosts("ghcr.io")[:1]})
        with pytest.raises(DigestMismatchError, match=r"content is sha256:.* \(served by"):
            Registry(hosts=only_liar, retries=0).pull(ImageStore(tmp_path / "d2"), by_digest)
    finally:
        liar.close()


def test_tls_registry_with_a_private_ca(started: Any, sample: BuiltImage, tmp_path: Path,
                                        pki: Pki) -> None:
    host = started("tls", tls=(pki.server_cert, pki.server_key))
    ref = f"{host}/secure/sample:v1"
    good = _hosts(tmp_path / "good", {host: f'server = "https://{host}"\nca = "{pki.ca}"\n'})
    _push(tmp_path, sample, ref, Registry(hosts=good))
    store = ImageStore(tmp_path / "dst")
    Registry(hosts=good).pull(store, ref)
    _assert_pulled(store, ref, sample)
    wrong = _hosts(tmp_path / "wrong",
                   {host: f'server = "https://{host}"\nca = "{pki.other_ca}"\n'})
    with pytest.raises(RegistryError, match=r"CERTIFICATE_VERIFY_FAILED|certificate verify"):
        Registry(hosts=wrong, retries=0).pull(ImageStore(tmp_path / "d2"), ref)
    # containerd's port dir spelling, skip_verify
    _hosts(tmp_path / "skip", {host.replace(":", "_") + "_":
                               f'server = "https://{host}"\nskip_verify = true\n'})
    skip = RegistryHosts.load(tmp_path / "skip")
    Registry(hosts=skip, retries=0).pull(ImageStore(tmp_path / "d3"), ref)


def test_registry_requiring_a_client_certificate(started: Any, sample: BuiltImage,
                                                 tmp_path: Path, pki: Pki) -> None:
    host = started("mtls", tls=(pki.server_cert, pki.server_key), client_ca=pki.ca)
    ref = f"{host}/mtls/sample:v1"
    with_cert = _hosts(tmp_path / "with", {host: (
        f'server = "https://{host}"\nca = "{pki.ca}"\n'
        f'client = [["{pki.client_cert}", "{pki.client_key}"]]\n')})
    _push(tmp_path, sample, ref, Registry(hosts=with_cert))
    store = ImageStore(tmp_path / "dst")
    Registry(hosts=with_cert).pull(store, ref)
    _assert_pulled(store, ref, sample)
    without = _hosts(tmp_path / "without", {host: f'server = "https://{host}"\nca = "{pki.ca}"\n'})
    with pytest.raises(RegistryError, match=f"cannot reach {host}"):
        Registry(hosts=without, retries=0).pull(ImageStore(tmp_path / "d2"), ref)


def test_htpasswd_registry_and_credentials(started: Any, sample: BuiltImage, tmp_path: Path,
                                           monkeypatch: pytest.MonkeyPatch,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    htpasswd = bcrypt_htpasswd(tmp_path / "htpasswd", "alice", SECRET)
    host = started("auth", htpasswd=htpasswd)
    ref = f"{host}/private/sample:v1"
    _push(tmp_path, sample, ref, Registry(auth=Credentials("alice", SECRET)))
    # no or wrong credentials: the registry's code and the reference, never the secret
    for auth in (None, Credentials("alice", SECRET + "x"), Credentials("mallory", SECRET)):
        with pytest.raises(RegistryError, match="UNAUTHORIZED") as err:
            Registry(auth=auth, retries=0).pull(ImageStore(tmp_path / "no"), ref)
        assert err.value.status == 401 and ref in str(err.value)
        assert SECRET not in str(err.value) and SECRET not in repr(err.value)
    # the library with an auth file; the CLI's login, pull --authfile, pull --creds, logout
    authfile = tmp_path / "auth" / "config.json"
    AuthFile(authfile).login(host, Credentials("alice", SECRET))
    store = ImageStore(tmp_path / "dst")
    Registry(auth=AuthFile(authfile)).pull(store, ref)
    _assert_pulled(store, ref, sample)
    cli_auth = tmp_path / "cli" / "auth.json"
    conf = str(tmp_path / "no-certs.d")
    monkeypatch.setattr("sys.stdin", io.StringIO(SECRET + "x\n"))
    assert main(["image", "login", host, "-u", "alice", "--password-stdin",
                 "--authfile", str(cli_auth), "--registry-config-dir", conf]) == 1
    err_text = capsys.readouterr().err
    assert "UNAUTHORIZED" in err_text and SECRET not in err_text and not cli_auth.exists()
    monkeypatch.setattr("sys.stdin", io.StringIO(SECRET + "\n"))
    assert main(["image", "login", host, "-u", "alice", "--password-stdin",
                 "--authfile", str(cli_auth), "--registry-config-dir", conf]) == 0
    assert "Login Succeeded" in capsys.readouterr().out
    assert set(json.loads(cli_auth.read_text())["auths"]) == {host}
    root = str(tmp_path / "cli-root")
    assert main(["image", "pull", "-q", "--root", root, "--authfile", str(cli_auth),
                 "--registry-config-dir", conf, ref]) == 0
    assert capsys.readouterr().out.split() == [ref, sample.descriptor["digest"]]
    assert main(["image", "pull", "-q", "--root", str(tmp_path / "r2"), "--creds",
                 f"alice:{SECRET}", "--registry-config-dir", conf, ref]) == 0
    capsys.readouterr()
    assert main(["image", "logout", host, "--authfile", str(cli_auth)]) == 0
    assert main(["image", "logout", host, "--authfile", str(cli_auth)]) == 1
    assert "not logged in" in capsys.readouterr().err
    # the secret is nowhere in the store
    for path in (tmp_path / "dst").rglob("*"):
        if path.is_file() and path.stat().st_size < 1 << 20:
            assert SECRET.encode() not in path.read_bytes(), path


def test_credential_helper_against_htpasswd(started: Any, sample: BuiltImage,
                                            tmp_path: Path) -> None:
    htpasswd = bcrypt_htpasswd(tmp_path / "htpasswd", "helped", SECRET)
    host = started("helper", htpasswd=htpasswd)
    ref = f"{host}/helped/sample:v1"
    _push(tmp_path, sample, ref, Registry(auth=Credentials("helped", SECRET)))
    bindir = tmp_path / "bin"
    bindir.mkdir()
    log = tmp_path / "helper.log"
    helper = bindir / "docker-credential-podkit-test"
    helper.write_text("#!/bin/sh\nread server\n"
                      f'echo "$1 $server" >> {log}\n'
                      f'echo \'{{"Username":"helped","Secret":"{SECRET}"}}\'\n')
    helper.chmod(0o755)
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"credHelpers": {host: "podkit-test"}}))
    env = {"PATH": f"{bindir}:/usr/bin:/bin", "HOME": str(tmp_path)}
    store = ImageStore(tmp_path / "dst")
    Registry(auth=AuthFile(config, env=env)).pull(store, ref)
    _assert_pulled(store, ref, sample)
    assert log.read_text().splitlines()[0] == f"get {host}"
