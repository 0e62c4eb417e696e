"""Pull and push against a real ``docker-registry`` (127.0.0.1, random port) and a fake one.

The real registry proves the wire protocol (negotiation, uploads, ranges); the fake one, a tiny
``http.server``, drives the error paths: auth challenges, 404, 5xx, timeouts, corrupt and
truncated blobs.
"""

from __future__ import annotations

import copy
import json
import multiprocessing
import os
import ssl
import subprocess
from pathlib import Path

import pytest

from image.imagebuild import BuiltImage, Layer, build_image, build_index, write_layout
from image.registries import FakeRegistry, free_port, start_registry, stop_registry
from image.registry_faults import assert_only_verified_blobs, run_probe, small_image
from podkit.image import (
    BlobNotFoundError,
    Credentials,
    DigestMismatchError,
    ImageNotFoundError,
    ImageStore,
    Progress,
    Registry,
    RegistryError,
    import_image,
    pull,
    push,
)
from support import require_binary, require_isolated

pytestmark = pytest.mark.integration


def _blob_digests(img: BuiltImage) -> set[str]:
    return {img.manifest["config"]["digest"], *(d["digest"] for d in img.manifest["layers"])}


@pytest.fixture
def pushed(registry: str, sample: BuiltImage, tmp_path: Path) -> str:
    """The sample image pushed to the real registry as <registry>/podkit/sample:v1."""
    src = ImageStore(tmp_path / "src")
    layout = write_layout(tmp_path / "layout", [(sample.descriptor, "v1")], sample.blobs)
    ref = f"{registry}/podkit/sample:v1"
    import_image(src, layout, ref)
    push(src, ref)
    return ref


def test_push_then_pull_roundtrip(pushed: str, sample: BuiltImage, tmp_path: Path) -> None:
    store = ImageStore(tmp_path / "dst")
    events: list[Progress] = []
    image = pull(store, pushed, progress=events.append)
    assert image.name == pushed
    assert image.manifest.digest == sample.descriptor["digest"]
    for digest in _blob_digests(sample):
        assert store.read_blob(digest) == sample.blobs[digest]
    assert {e.digest for e in events if e.status == "done"} == _blob_digests(sample)
    assert store.config(pushed).user == "app"
    again: list[Progress] = []
    pull(store, pushed, progress=again.append)
    assert {e.status for e in again if e.status != "waiting"} == {"exists"}
    by_digest = pull(ImageStore(tmp_path / "d2"),
                     pushed.rsplit(":", 1)[0] + "@" + sample.descriptor["digest"])
    assert by_digest.manifest.digest == sample.descriptor["digest"]


def test_push_skips_existing_blobs(pushed: str, tmp_path: Path, registry: str) -> None:
    store = ImageStore(tmp_path / "s")
    pull(store, pushed)
    events: list[Progress] = []
    push(store, pushed, f"{registry}/podkit/other:v2", progress=events.append)
    assert {e.status for e in events} == {"done"}  # new repository: uploaded
    events.clear()
    push(store, pushed, progress=events.append)
    assert {e.status for e in events} == {"exists"}
    assert pull(ImageStore(tmp_path / "t"), f"{registry}/podkit/other:v2").name.endswith(":v2")


def test_multi_platform_index_pull(registry: str, sample_layers_raw: list[bytes],
                                   tmp_path: Path) -> None:
    """An index pushed by hand (manifests by digest, then the index) resolves to this host."""
    from podkit.image import host_platform

    here = host_platform()
    mine = build_image(sample_layers_raw[:1], ["gzip"], {"Cmd": ["mine"]},
                       arch=here.architecture)
    other = build_image([Layer().file("o", b"o").bytes()], [""], {"Cmd": ["other"]},
                        arch="s390x" if here.architecture != "s390x" else "amd64")
    src = ImageStore(tmp_path / "src")
    for img, name in ((mine, "mine"), (other, "other")):
        import_image(src, write_layout(tmp_path / name, [(img.descriptor, "v1")], img.blobs),
                     f"{registry}/podkit/multi:{name}")
        push(src, f"{registry}/podkit/multi:{name}")
    desc, raw = build_index([mine, other])
    reg = Registry()
    from podkit.image.reference import parse_reference

    ref = parse_reference(f"{registry}/podkit/multi:index")
    with reg._request(ref, "PUT", "/v2/podkit/multi/manifests/index", "index", push=True,
                      ok=(201,), body=lambda: raw,
                      headers={"Content-Type": desc["mediaType"]}):
        pass
    store = ImageStore(tmp_path / "dst")
    image = pull(store, ref)
    assert image.target.digest == desc["digest"]
    assert image.manifest.digest == mine.descriptor["digest"]
    assert store.config(image).cmd == ("mine",)
    assert not store.has_blob(other.manifest["layers"][0]["digest"])


def test_https_registry_with_custom_ca(sample: BuiltImage, tmp_path: Path) -> None:
    require_isolated()
    openssl = require_binary("openssl")
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run([openssl, "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
                    "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
                    "-keyout", str(key), "-out", str(cert)], check=True, capture_output=True,
                   timeout=60)
    (tmp_path / "reg").mkdir()
    proc, host = start_registry(tmp_path / "reg", tls=(cert, key))
    try:
        ref = f"{host}/podkit/tls:v1"
        src = ImageStore(tmp_path / "src")
        import_image(src, write_layout(tmp_path / "l", [(sample.descriptor, "v1")],
                                       sample.blobs), ref)
        ctx = ssl.create_default_context(cafile=str(cert))
        push(src, ref, plain_http=False, ssl_context=ctx)
        image = pull(ImageStore(tmp_path / "dst"), ref, plain_http=False, ssl_context=ctx)
        assert image.manifest.digest == sample.descriptor["digest"]
        with pytest.raises(RegistryError, match=r"CERTIFICATE_VERIFY_FAILED"):
            pull(ImageStore(tmp_path / "untrusted"), ref, plain_http=False, retries=0)
    finally:
        stop_registry(proc)


def _pull_in_process(root: str, ref: str, q: multiprocessing.Queue[int]) -> None:
    done: list[str] = []
    pull(ImageStore(root), ref, progress=lambda e: done.append(e.digest)
         if e.status == "done" else None)
    q.put(len(done))


def test_concurrent_pulls_store_each_blob_once(pushed: str, sample: BuiltImage,
                                               tmp_path: Path) -> None:
    ctx = multiprocessing.get_context("fork")
    q: multiprocessing.Queue[int] = ctx.Queue()
    procs = [ctx.Process(target=_pull_in_process, args=(str(tmp_path), pushed, q))
             for _ in range(3)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    downloads = [q.get(timeout=5) for _ in procs]
    assert sum(downloads) == len(_blob_digests(sample))  # every blob fetched exactly once
    store = ImageStore(tmp_path)
    assert store.get(pushed).manifest.digest == sample.descriptor["digest"]
    assert list((store.root / "ingest").iterdir()) == []


class _Stop(Exception):
    pass


def test_interrupted_pull_resumes_with_range(registry: str, tmp_path: Path) -> None:
    big = os.urandom(3 << 20)  # incompressible: several 1 MiB chunks on the wire
    img = build_image([Layer().file("big", big).bytes()], ["gzip"], {"Cmd": ["x"]})
    ref = f"{registry}/podkit/big:v1"
    src = ImageStore(tmp_path / "src")
    import_image(src, write_layout(tmp_path / "l", [(img.descriptor, "v1")], img.blobs), ref)
    push(src, ref)
    layer = img.manifest["layers"][0]["digest"]
    store = ImageStore(tmp_path / "dst")

    def stop_midway(event: Progress) -> None:
        if event.digest == layer and event.status == "copying" and event.done >= 1 << 20:
            raise _Stop

    with pytest.raises(_Stop):
        pull(store, ref, progress=stop_midway)
    partial = store.root / "ingest" / f"sha256-{layer.partition(':')[2]}.partial"
    assert partial.stat().st_size >= 1 << 20
    with pytest.raises(ImageNotFoundError):
        store.get(ref)  # nothing recorded
    first: list[int] = []

    def watch(event: Progress) -> None:
        if event.digest == layer and event.status == "copying" and not first:
            first.append(event.done)

    pull(store, ref, progress=watch)
    assert first and first[0] >= 1 << 20  # continued where it stopped (206 Partial Content)
    assert store.read_blob(img.manifest["config"]["digest"])
    assert not partial.exists()


def test_bearer_token_auth(fake_registry: FakeRegistry, tmp_path: Path) -> None:
    fake_registry.auth = "bearer"
    ref = f"{fake_registry.host}/test/app:v1"
    image = pull(ImageStore(tmp_path / "a"), ref, auth=Credentials("u", "p"))
    assert image.name == ref
    assert fake_registry.hits["/token"] == 1  # one token, cached for every request
    with pytest.raises(RegistryError, match=rf"manifest v1 of {ref}.*token request.*401") as err:
        pull(ImageStore(tmp_path / "b"), ref, auth=Credentials("u", "wrong"))
    assert err.value.status == 401


def test_basic_auth(fake_registry: FakeRegistry, tmp_path: Path) -> None:
    fake_registry.auth = "basic"
    ref = f"{fake_registry.host}/test/app:v1"
    assert pull(ImageStore(tmp_path / "a"), ref, auth={fake_registry.host: Credentials("u", "p")})
    with pytest.raises(RegistryError, match=r"answered 401.*UNAUTHORIZED") as err:
        pull(ImageStore(tmp_path / "b"), ref)
    assert err.value.status == 401


def test_not_found(fake_registry: FakeRegistry, tmp_path: Path) -> None:
    ref = f"{fake_registry.host}/test/app:nope"
    with pytest.raises(ImageNotFoundError, match=rf"manifest nope of {ref}.*404.*MANIFEST_UNKNOWN"):
        pull(ImageStore(tmp_path), ref)


def test_server_errors_are_retried(fake_registry: FakeRegistry, sample: BuiltImage,
                                   tmp_path: Path) -> None:
    layer = sample.manifest["layers"][0]["digest"]
    fake_registry.statuses = {"/manifests/v1": [503, 500], layer: [502]}
    ref = f"{fake_registry.host}/test/app:v1"
    assert pull(ImageStore(tmp_path / "a"), ref, backoff=0.01).name == ref
    assert fake_registry.hits["/v2/test/app/manifests/v1"] == 3


def test_persistent_5xx_fails_with_status(fake_registry: FakeRegistry, tmp_path: Path) -> None:
    fake_registry.statuses = {"/manifests/v1": [503] * 10}
    ref = f"{fake_registry.host}/test/app:v1"
    with pytest.raises(RegistryError, match=rf"manifest v1 of {ref}: .* answered 503") as err:
        pull(ImageStore(tmp_path), ref, retries=2, backoff=0.01)
    assert err.value.status == 503
    assert fake_registry.hits["/v2/test/app/manifests/v1"] == 3


def test_timeout(fake_registry: FakeRegistry, tmp_path: Path) -> None:
    fake_registry.delay = 1.0
    ref = f"{fake_registry.host}/test/app:v1"
    with pytest.raises(RegistryError, match=rf"manifest v1 of {ref}: cannot reach .*timed out"):
        pull(ImageStore(tmp_path), ref, timeout=0.2, retries=1, backoff=0.01)


def test_unreachable_registry(tmp_path: Path) -> None:
    ref = f"127.0.0.1:{free_port()}/test/app:v1"
    with pytest.raises(RegistryError, match=rf"{ref}: cannot reach 127.0.0.1.*after 2 attempts"):
        pull(ImageStore(tmp_path), ref, retries=1, backoff=0.01)


def test_corrupt_blob_nothing_half_stored(fake_registry: FakeRegistry, sample: BuiltImage,
                                          tmp_path: Path) -> None:
    layer = sample.manifest["layers"][1]["digest"]
    fake_registry.corrupt = {layer}
    store = ImageStore(tmp_path)
    ref = f"{fake_registry.host}/test/app:v1"
    with pytest.raises(DigestMismatchError, match=rf"blob {layer} of {ref}: content is"):
        pull(store, ref)
    assert not store.has_blob(layer)
    assert store.list() == []
    assert list((store.root / "ingest").iterdir()) == []


def test_truncated_blob(fake_registry: FakeRegistry, sample: BuiltImage, tmp_path: Path) -> None:
    layer = sample.manifest["layers"][0]["digest"]
    fake_registry.truncate = {layer}
    store = ImageStore(tmp_path)
    ref = f"{fake_registry.host}/test/app:v1"
    with pytest.raises(RegistryError, match=rf"blob {layer} of {ref}: .*truncated"):
        pull(store, ref, retries=1, backoff=0.01)
    assert not store.has_blob(layer) and store.list() == []
    fake_registry.truncate = set()
    assert pull(store, ref).name == ref  # the partial download is resumed or replaced


def test_missing_blob_on_registry(fake_registry: FakeRegistry, sample: BuiltImage,
                                  tmp_path: Path) -> None:
    layer = sample.manifest["layers"][2]["digest"]
    del fake_registry.blobs[layer]
    with pytest.raises(BlobNotFoundError, match=rf"blob {layer} of .*404"):
        pull(ImageStore(tmp_path), f"{fake_registry.host}/test/app:v1")


def test_manifest_digest_mismatch(fake_registry: FakeRegistry, sample: BuiltImage,
                                  tmp_path: Path) -> None:
    wrong = "sha256:" + "1" * 64
    fake_registry.manifests[wrong] = sample.manifest
    ref = f"{fake_registry.host}/test/app@{wrong}"
    with pytest.raises(DigestMismatchError, match=rf"manifest {wrong} of .*content is sha256:"):
        pull(ImageStore(tmp_path), ref)


# -- issue 11 defect 10: every pull failure is a typed ImageError naming reference and digest ---


@pytest.mark.parametrize("probe", ["blob-error-body-cut", "manifest-error-body-cut",
                                   "manifest-connection-reset", "layer-size-larger-than-blob",
                                   "blob-content-length-shorter", "blob-404"])
def test_broken_answers_are_typed_errors(probe: str, tmp_path: Path) -> None:
    """Error answers cut short (once a raw IncompleteRead), resets while reading a manifest,
    and wrong sizes: typed errors, nothing half stored (the full set: tests/hostile)."""
    require_isolated()
    img = small_image()
    with FakeRegistry(img) as fake:
        run_probe(probe, fake, img, tmp_path)


def test_wrong_layer_size_in_real_registry(registry: str, tmp_path: Path) -> None:
    """A manifest in docker-registry whose layer size is wrong: DigestMismatchError naming the
    layer and the reference; no blob, no partial, no record; the right manifest still pulls."""
    img = small_image()
    src = ImageStore(tmp_path / "src")
    ref = f"{registry}/podkit/wrongsize:good"
    import_image(src, write_layout(tmp_path / "l", [(img.descriptor, "v1")], img.blobs), ref)
    push(src, ref)
    bad = copy.deepcopy(img.manifest)
    bad["layers"][0]["size"] += 4096
    raw = json.dumps(bad).encode()
    from podkit.image.reference import parse_reference

    bad_ref = parse_reference(f"{registry}/podkit/wrongsize:bad")
    with Registry()._request(bad_ref, "PUT", "/v2/podkit/wrongsize/manifests/bad", "bad",
                             push=True, ok=(201,), body=lambda: raw,
                             headers={"Content-Type": bad["mediaType"]}):
        pass
    store = ImageStore(tmp_path / "dst")
    layer = bad["layers"][0]["digest"]
    with pytest.raises(DigestMismatchError, match=rf"blob {layer} of {bad_ref}: .*serves"):
        pull(store, bad_ref, retries=1, backoff=0.01)
    assert store.list() == [] and not store.has_blob(layer)
    assert list((store.root / "ingest").iterdir()) == []
    assert_only_verified_blobs(store)
    assert pull(store, ref).name == ref
