"""PullImage and the image lifecycle through the gRPC client, over the in-memory pod API and a
fake registry on 127.0.0.1: request credentials (never echoed), the auth file fallback, one
download for concurrent identical pulls, multi-platform indexes, the pinned pause image,
ImageFsInfo against ``du``, and RemoveImage of an image a container uses (as containerd).
"""

from __future__ import annotations

import base64
import json
import logging
import os
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from image.imagebuild import build_index
from image.registries import FakeRegistry, tiny_image
from podkit import image as _image
from podkit.cri import api_pb2 as pb
from podkit.image import AuthFile, Credentials, ImageStore
from podkit.pods.testing import FakeNetworks, FakePodManager

grpc = pytest.importorskip("grpc")

SECRET = "s3cret-Never-Shown"


class Rig:
    """A CRI server (fake pods, real image store and gRPC) and an ImageService client."""

    def __init__(self, base: Path, **serve_kw: Any) -> None:
        from podkit.cri import api_pb2_grpc
        from podkit.cri.service import CRIService, serve

        self.store = ImageStore(base / "root")
        self.manager = FakePodManager(base / "pods", base / "state", images=self.store,
                                      networks=FakeNetworks())
        self.server = serve(base / "cri.sock", CRIService(self.manager, self.store, **serve_kw))
        self.channel = grpc.insecure_channel(self.server.address)
        self.img = api_pb2_grpc.ImageServiceStub(self.channel)

    def pull(self, ref: str, **auth: str) -> str:
        req = pb.PullImageRequest(image=pb.ImageSpec(image=ref))
        if auth:
            req.auth.CopyFrom(pb.AuthConfig(**auth))
        return str(self.img.PullImage(req, timeout=60).image_ref)

    def images(self) -> dict[str, pb.Image]:
        return {i.id: i for i in self.img.ListImages(pb.ListImagesRequest()).images}

    def close(self) -> None:
        self.channel.close()
        self.server.stop()


@pytest.fixture
def fake() -> Iterator[FakeRegistry]:
    with FakeRegistry(tiny_image("app")) as f:
        yield f


@pytest.fixture
def make_rig(tmp_path: Path) -> Iterator[Any]:
    rigs: list[Rig] = []

    def make(**kw: Any) -> Rig:
        rigs.append(Rig(tmp_path / f"rig{len(rigs)}", **kw))
        return rigs[-1]

    yield make
    for r in rigs:
        r.close()


def _ref(fake: FakeRegistry, tag: str = "v1") -> str:
    return f"{fake.host}/{fake.repo}:{tag}"


def _config_digest(fake: FakeRegistry, tag: str = "v1") -> str:
    return str(fake.manifests[tag]["config"]["digest"])


def _blob_hits(fake: FakeRegistry) -> dict[str, int]:
    return {p: n for p, n in fake.hits.items() if "/blobs/" in p}


def test_concurrent_identical_pulls_download_once(fake: FakeRegistry, make_rig: Any) -> None:
    rig = make_rig()
    fake.delay = 0.3  # every answer is slow: the pulls overlap for sure
    results: list[str] = []
    errors: list[BaseException] = []

    def pull() -> None:
        try:
            results.append(rig.pull(_ref(fake)))
        except BaseException as e:
            errors.append(e)

    threads = [threading.Thread(target=pull) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors and results == [_config_digest(fake)] * 4
    layers = [d["digest"] for d in fake.manifests["v1"]["layers"]]
    want = {f"/v2/{fake.repo}/blobs/{d}": 1 for d in (*layers, _config_digest(fake))}
    assert _blob_hits(fake) == want
    assert fake.hits[f"/v2/{fake.repo}/manifests/v1"] == 1
    # a later pull of the same name is a new pull (resolved again), blobs are not fetched again
    rig.pull(_ref(fake))
    assert fake.hits[f"/v2/{fake.repo}/manifests/v1"] == 2 and _blob_hits(fake) == want


@pytest.mark.parametrize("fields", [
    {"username": "u", "password": "p"},
    {"auth": base64.b64encode(b"u:p").decode()},
    {"registry_token": "t0k"},
    {"identity_token": "r3fresh"},
])
def test_pull_with_auth_config(fake: FakeRegistry, make_rig: Any, fields: dict[str, str]
                               ) -> None:
    fake.auth = "bearer"
    rig = make_rig()
    assert rig.pull(_ref(fake), **fields) == _config_digest(fake)
    with pytest.raises(grpc.RpcError) as info:  # no credentials: refused by the registry
        rig.pull(_ref(fake, "v1"))
    assert "401" in info.value.details() and _ref(fake) in info.value.details()


@pytest.mark.parametrize(("scheme", "code"), [("bearer", "DENIED"), ("basic", "UNAUTHORIZED")])
def test_failed_auth_names_code_and_reference_never_the_secret(
        fake: FakeRegistry, make_rig: Any, tmp_path: Path, caplog: pytest.LogCaptureFixture,
        scheme: str, code: str) -> None:
    fake.auth = scheme
    rig = make_rig()
    caplog.set_level(logging.DEBUG)
    encoded = base64.b64encode(f"u:{SECRET}".encode()).decode()
    for fields in ({"username": "u", "password": SECRET}, {"auth": encoded}):
        with pytest.raises(grpc.RpcError) as info:
            rig.pull(_ref(fake), **fields)
        details = info.value.details()
        assert code in details and _ref(fake) in details, details
        assert SECRET not in details and encoded not in details
    assert SECRET not in caplog.text and encoded not in caplog.text
    for dirpath, _, files in os.walk(tmp_path):
        for name in files:
            path = Path(dirpath, name)
            if path.is_file() and not path.is_socket():
                data = path.read_bytes()
                assert SECRET.encode() not in data and encoded.encode() not in data, path


def test_auth_file_is_the_fallback_and_server_address_scopes_request_creds(
        fake: FakeRegistry, make_rig: Any, tmp_path: Path) -> None:
    fake.auth = "basic"
    auth = AuthFile(tmp_path / "config.json")
    auth.login(fake.host, Credentials("u", "p"))
    rig = make_rig(auth=auth)
    assert rig.pull(_ref(fake)) == _config_digest(fake)  # no AuthConfig: the file's
    # request credentials for another registry are not sent here: the file's are
    assert rig.pull(_ref(fake), username="u", password=SECRET,
                    server_address="https://other.example") == _config_digest(fake)
    with pytest.raises(grpc.RpcError, match="UNAUTHORIZED"):  # for this host: they are used
        rig.pull(_ref(fake), username="u", password=SECRET, server_address=fake.host)
    with pytest.raises(grpc.RpcError) as info:
        rig.pull(_ref(fake), auth="%%% not base64")
    assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT


def test_multi_platform_index_picks_this_platform_or_names_those_there_are(
        make_rig: Any) -> None:
    here = tiny_image("here")
    others = [tiny_image("s390x", "s390x"), tiny_image("ppc", "ppc64le")]
    if here.config["architecture"] in ("s390x", "ppc64le"):
        pytest.skip("this machine is one of the foreign platforms")
    both_desc, both_raw = build_index([others[0], here])
    _, foreign_raw = build_index(others)
    with FakeRegistry(here) as fake:
        for img in others:
            fake.blobs.update(img.blobs)
            fake.manifests[img.descriptor["digest"]] = img.manifest
        fake.manifests["multi"] = json.loads(both_raw)
        fake.manifests["foreign"] = json.loads(foreign_raw)
        assert json.dumps(fake.manifests["multi"]).encode() == both_raw
        rig = make_rig()
        assert rig.pull(_ref(fake, "multi")) == here.manifest["config"]["digest"]
        st = rig.img.ImageStatus(pb.ImageStatusRequest(image=pb.ImageSpec(
            image=_ref(fake, "multi"))))
        assert f"{fake.host}/{fake.repo}@{both_desc['digest']}" in st.image.repo_digests
        with pytest.raises(grpc.RpcError) as info:
            rig.pull(_ref(fake, "foreign"))
        assert info.value.code() == grpc.StatusCode.NOT_FOUND
        details = info.value.details()
        assert "linux/s390x" in details and "linux/ppc64le" in details, details
        assert _ref(fake, "foreign") in details


def _du(store: ImageStore, *flags: str) -> int:
    dirs = [str(store.root / d) for d in ("blobs", "ingest", "snapshots")]
    out = subprocess.run(["du", "-sxc", *flags, *dirs], check=True, capture_output=True,
                         text=True).stdout
    return int(out.splitlines()[-1].split()[0])


def test_pinned_pause_and_image_fs_info_against_du(make_rig: Any) -> None:
    pause, app = tiny_image("pause"), tiny_image("other")
    with FakeRegistry(pause, repo="pause") as fp, FakeRegistry(app) as fa:
        rig = make_rig(pause_image=f"{fp.host}/pause:v1")
        pause_id, app_id = rig.pull(f"{fp.host}/pause:v1"), rig.pull(_ref(fa))
    _image.unpack(rig.store, f"{fp.host}/pause:v1")  # snapshots, with a hard link in each
    imgs = rig.images()
    assert imgs[pause_id].pinned and not imgs[app_id].pinned
    st = rig.img.ImageStatus(pb.ImageStatusRequest(image=pb.ImageSpec(image=pause_id)))
    assert st.image.pinned
    fs = rig.img.ImageFsInfo(pb.ImageFsInfoRequest()).image_filesystems
    assert len(fs) == 1
    assert fs[0].used_bytes.value == _du(rig.store, "--block-size=1")
    assert fs[0].inodes_used.value == _du(rig.store, "--inodes")
    assert os.path.ismount(fs[0].fs_id.mountpoint)
    assert str(rig.store.root).startswith(fs[0].fs_id.mountpoint)
    assert fs[0].used_bytes.value >= sum(len(b) for b in pause.blobs.values())


def test_remove_image_a_container_uses(fake: FakeRegistry, make_rig: Any) -> None:
    """containerd's RemoveImage deletes the image however many containers use it; the
    containers keep their root filesystems (their snapshots are spared by gc)."""
    rig = make_rig()
    image_id = rig.pull(_ref(fake))
    rootfs = _image.create_rootfs(rig.store, _ref(fake), "c1", mode="copy")
    chains = rig.store.get(_ref(fake)).chain_ids
    rig.img.RemoveImage(pb.RemoveImageRequest(image=pb.ImageSpec(image=image_id)))
    assert image_id not in rig.images()
    assert not rig.img.ImageStatus(pb.ImageStatusRequest(
        image=pb.ImageSpec(image=_ref(fake)))).HasField("image")
    assert _image.get_rootfs(rig.store, "c1").path == rootfs.path
    assert all((rig.store.root / "snapshots" / c[7:]).is_dir() for c in chains)
    _image.remove_rootfs(rig.store, "c1")
    rig.store.gc()
    assert not any((rig.store.root / "snapshots" / c[7:]).exists() for c in chains)


@pytest.mark.parametrize(("server", "host", "scoped"), [
    ("", "mirror.local:5000", True),  # no server_address: every host of the pull
    ("https://index.docker.io/v1/", "registry-1.docker.io", True),  # kubelet's Docker Hub key
    ("gcr.io", "gcr.io", True),
    ("https://gcr.io", "mirror.local:5000", False),
])
def test_request_credentials_go_where_server_address_says(tmp_path: Path, server: str,
                                                          host: str, scoped: bool) -> None:
    from podkit.cri.service.pulls import Puller

    from_file = Credentials("file-user", "file-pass")
    puller = Puller(ImageStore(tmp_path), auth=lambda h: from_file)
    mine = Credentials("kube", SECRET)
    registry = puller._registry(mine, server)
    assert registry is not puller._registry(None, "") and registry.hosts is puller.hosts
    assert registry.transport.credentials(host) == (mine if scoped else from_file)
