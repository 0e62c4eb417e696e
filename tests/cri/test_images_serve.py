"""``podkit cri serve --registry-config-dir`` against real docker-registry processes on
127.0.0.1: public names (``gcr.io``, ``registry.k8s.io``) pulled from a local mirror with no
connection anywhere else, an htpasswd registry with the request's AuthConfig, and the real
server's pinned pause image, ImageFsInfo against ``du`` and concurrent identical pulls.
"""

from __future__ import annotations

import socket
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from cri.helpers import start_cri_serve, stop_cri_serve
from image.certs import bcrypt_htpasswd
from image.registries import (
    mirror_hosts,
    push_image,
    tiny_image,
)
from podkit.cri import api_pb2 as pb
from podkit.image import Credentials, ImageStore, RegistryHosts
from podkit.pods.testing import FakeNetworks, FakePodManager
from support import require_isolated

grpc = pytest.importorskip("grpc")
pytestmark = pytest.mark.integration

SECRET = "Htp4sswd-s3cret"
PAUSE = "registry.k8s.io/pause/pause:3.9"
APP = "gcr.io/podkit-test/app:v1"


@pytest.fixture
def connections(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, int]]:
    """Every (host, port) this process's registry client connects to during the test."""
    seen: list[tuple[str, int]] = []
    real = socket.create_connection

    def record(address: tuple[str, int], *args: Any, **kwargs: Any) -> socket.socket:
        seen.append((address[0], int(address[1])))
        return real(address, *args, **kwargs)

    monkeypatch.setattr(socket, "create_connection", record)
    return seen


def _mirror(started: Any, tmp_path: Path) -> tuple[str, Path, dict[str, str]]:
    """A mirror holding the pause and app images under their public paths; the hosts dir
    sending gcr.io and registry.k8s.io there; the config digests by name."""
    mirror = started("mirror")
    images = {PAUSE: tiny_image("pause"), APP: tiny_image("app")}
    for name, img in images.items():
        push_image(tmp_path, img, f"{mirror}/{name.split('/', 1)[1]}")
    hosts = mirror_hosts(tmp_path / "certs.d", mirror)
    return mirror, hosts, {n: i.manifest["config"]["digest"] for n, i in images.items()}


class _InProcess:
    """``serve()`` as ``cri serve`` wires it (hosts dir loaded), over the fake pod API."""

    def __init__(self, base: Path, hosts: Path, **kw: Any) -> None:
        from podkit.cri import api_pb2_grpc
        from podkit.cri.service import CRIService, serve

        store = ImageStore(base / "root")
        manager = FakePodManager(base / "pods", base / "state", images=store,
                                 networks=FakeNetworks())
        self.server = serve(base / "cri.sock", CRIService(
            manager, store, registry_hosts=RegistryHosts.load(hosts), **kw))
        self.channel = grpc.insecure_channel(self.server.address)
        self.img = api_pb2_grpc.ImageServiceStub(self.channel)

    def close(self) -> None:
        self.channel.close()
        self.server.stop()


def _pull(img: Any, ref: str, **auth: str) -> str:
    req = pb.PullImageRequest(image=pb.ImageSpec(image=ref))
    if auth:
        req.auth.CopyFrom(pb.AuthConfig(**auth))
    return str(img.PullImage(req, timeout=120).image_ref)


def test_public_names_from_a_local_mirror_stay_local(
        started: Any, tmp_path: Path, connections: list[tuple[str, int]]) -> None:
    mirror, hosts, ids = _mirror(started, tmp_path)
    connections.clear()
    srv = _InProcess(tmp_path / "srv", hosts)
    try:
        assert _pull(srv.img, APP) == ids[APP]
        assert _pull(srv.img, PAUSE) == ids[PAUSE]
        assert _pull(srv.img, "gcr.io/podkit-test/app@" + _digest(srv.img, APP)) == ids[APP]
        with pytest.raises(grpc.RpcError) as info:
            _pull(srv.img, "gcr.io/podkit-test/missing:v1")
        assert info.value.code() == grpc.StatusCode.NOT_FOUND
    finally:
        srv.close()
    assert connections and {f"{h}:{p}" for h, p in connections} == {mirror}


def _digest(img: Any, ref: str) -> str:
    st = img.ImageStatus(pb.ImageStatusRequest(image=pb.ImageSpec(image=ref)))
    return str(st.image.repo_digests[0].rpartition("@")[2])


def test_htpasswd_registry_with_auth_config(started: Any, tmp_path: Path,
                                            caplog: pytest.LogCaptureFixture) -> None:
    htpasswd = bcrypt_htpasswd(tmp_path / "htpasswd", "kube", SECRET)
    locked = started("locked", htpasswd=htpasswd)
    app = tiny_image("locked")
    push_image(tmp_path, app, f"{locked}/podkit-test/app:v1", Credentials("kube", SECRET))
    hosts = mirror_hosts(tmp_path / "certs.d", locked, ("registry.k8s.io",))
    srv = _InProcess(tmp_path / "srv", hosts)
    ref = "registry.k8s.io/podkit-test/app:v1"
    try:
        with pytest.raises(grpc.RpcError) as info:
            _pull(srv.img, ref, username="kube", password=SECRET + "-wrong")
        details = info.value.details()
        assert "UNAUTHORIZED" in details and ref in details and SECRET not in details, details
        with pytest.raises(grpc.RpcError, match="UNAUTHORIZED"):
            _pull(srv.img, ref)  # no credentials anywhere
        assert _pull(srv.img, ref, username="kube", password=SECRET) == \
            app.manifest["config"]["digest"]
    finally:
        srv.close()
    assert SECRET not in caplog.text


class _Serve:
    """``podkit cri serve`` as a child process, with an ImageService stub."""

    def __init__(self, root: Path, hosts: Path, tmp: Path) -> None:
        from podkit.cri import api_pb2_grpc

        (tmp / "net.d").mkdir()
        sock = tmp / "cri.sock"
        self.proc, self.channel = start_cri_serve(
            sock, "--root", str(root), "--cni-conf-dir", str(tmp / "net.d"),
            "--streaming-address", "", "--pause-image", PAUSE,
            "--registry-config-dir", str(hosts), "--authfile", str(tmp / "auth.json"))
        self.img = api_pb2_grpc.ImageServiceStub(self.channel)

    def stop(self) -> None:
        stop_cri_serve(self.proc, self.channel)


def _du(store: ImageStore, *flags: str) -> int:
    dirs = [str(store.root / d) for d in ("blobs", "ingest", "snapshots")]
    out = subprocess.run(["du", "-sxc", *flags, *dirs], check=True, capture_output=True,
                         text=True).stdout
    return int(out.splitlines()[-1].split()[0])


def test_cri_serve_with_a_registry_config_dir(started: Any, tmp_path: Path) -> None:
    from podkit.cli import main

    _, hosts, ids = _mirror(started, tmp_path)
    root = tmp_path / "root"
    assert main(["image", "pull", "-q", "--root", str(root), "--registry-config-dir",
                 str(hosts), PAUSE]) == 0
    srv = _Serve(root, hosts, tmp_path)
    try:
        results: list[str] = []
        threads = [threading.Thread(target=lambda: results.append(_pull(srv.img, APP)))
                   for _ in range(3)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
        assert results == [ids[APP]] * 3
        images = {i.id: i for i in srv.img.ListImages(pb.ListImagesRequest()).images}
        assert images[ids[PAUSE]].pinned and not images[ids[APP]].pinned
        assert PAUSE in images[ids[PAUSE]].repo_tags
        store = ImageStore(root)
        fs = srv.img.ImageFsInfo(pb.ImageFsInfoRequest()).image_filesystems[0]
        assert fs.used_bytes.value == _du(store, "--block-size=1")
        assert fs.inodes_used.value == _du(store, "--inodes")
        srv.img.RemoveImage(pb.RemoveImageRequest(image=pb.ImageSpec(image=APP)))
        assert ids[APP] not in {i.id for i in srv.img.ListImages(pb.ListImagesRequest()).images}
        after = srv.img.ImageFsInfo(pb.ImageFsInfoRequest()).image_filesystems[0]
        assert after.used_bytes.value < fs.used_bytes.value  # its blobs were collected
    finally:
        srv.stop()


def test_cri_serve_refuses_a_bad_hosts_file_at_start(tmp_path: Path) -> None:
    require_isolated()
    bad = tmp_path / "certs.d" / "gcr.io"
    bad.mkdir(parents=True)
    (bad / "hosts.toml").write_text('[host."http://127.0.0.1:5000"]\n'
                                    '  capabilities = ["pull", "fetch"]\n')
    (tmp_path / "net.d").mkdir()
    argv = [sys.executable, "-m", "podkit.cli", "cri", "serve", "--socket",
            str(tmp_path / "cri.sock"), "--root", str(tmp_path / "root"), "--cni-conf-dir",
            str(tmp_path / "net.d"), "--streaming-address", "", "--pause-image", PAUSE,
            "--registry-config-dir", str(tmp_path / "certs.d")]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2  # bad input (docs/cli.md exit codes)
    assert str(bad / "hosts.toml") in done.stderr and "unknown capability 'fetch'" in done.stderr
    assert not (tmp_path / "root").exists()  # refused before any work
