"""ImageStore: verified blobs, atomic records, tag/remove, gc, concurrency across processes."""

from __future__ import annotations

import hashlib
import multiprocessing
import os
import threading
from pathlib import Path

import pytest

from image.imagebuild import BuiltImage, sha, write_layout
from podkit.image import (
    BlobNotFoundError,
    DigestMismatchError,
    ImageNotFoundError,
    ImageStore,
    chain_ids,
    import_image,
)
from podkit.image.errors import ImageError


def _leftovers(store: ImageStore) -> list[str]:
    return sorted(p.name for p in (store.root / "ingest").iterdir())


def test_ingest_verifies_digest_and_size(store: ImageStore) -> None:
    data = b"hello blob"
    digest = sha(data)
    assert store.ingest(digest, len(data), [data[:4], data[4:]])
    assert store.has_blob(digest)
    assert store.read_blob(digest, len(data)) == data
    assert not store.ingest(digest, len(data), [data])  # already there: skipped
    oct_mode = store.blob_path(digest).stat().st_mode & 0o777
    assert oct_mode == 0o444


def test_ingest_wrong_content_leaves_nothing(store: ImageStore) -> None:
    digest = sha(b"right")
    with pytest.raises(DigestMismatchError, match=f"{digest} of test.*content is sha256:"):
        store.ingest(digest, 5, [b"wrong"], " of test")
    assert not store.has_blob(digest)
    assert _leftovers(store) == []


def test_ingest_truncated_and_oversized(store: ImageStore) -> None:
    digest = sha(b"123456")
    with pytest.raises(DigestMismatchError, match=r"got 3 bytes, expected 6 .truncated"):
        store.ingest(digest, 6, [b"123"])
    with pytest.raises(DigestMismatchError, match=r"more than the expected 6 bytes"):
        store.ingest(digest, 6, [b"1234567"])
    assert not store.has_blob(digest) and _leftovers(store) == []


def test_read_verifies_content(store: ImageStore) -> None:
    digest = store.put_blob(b'{"a": 1}')
    path = store.blob_path(digest)
    path.chmod(0o644)
    path.write_bytes(b'{"a": 2}')
    with pytest.raises(DigestMismatchError, match=f"blob {digest}.*content is"):
        store.read_blob(digest)
    with pytest.raises(BlobNotFoundError, match=r"sha256:" + "0" * 64):
        store.read_blob("sha256:" + "0" * 64)


def test_put_stream_computes_digest(store: ImageStore) -> None:
    digest, size = store.put_stream([b"ab", b"cd"])
    assert (digest, size) == (sha(b"abcd"), 4)
    assert store.read_blob(digest) == b"abcd"
    assert store.put_stream([b"abcd"]) == (digest, 4)
    assert _leftovers(store) == []


def test_chain_ids() -> None:
    a, b = sha(b"a"), sha(b"b")
    expect = "sha256:" + hashlib.sha256(f"{a} {b}".encode()).hexdigest()
    assert chain_ids([a, b]) == [a, expect]
    assert chain_ids([]) == []


@pytest.fixture
def imported(store: ImageStore, sample: BuiltImage, tmp_path: Path) -> ImageStore:
    layout = write_layout(tmp_path / "layout", [(sample.descriptor, "v1")], sample.blobs)
    import_image(store, layout, "localhost/podkit/app")
    return store


def test_records_get_list_tag_remove(imported: ImageStore, sample: BuiltImage) -> None:
    store = imported
    image = store.get("localhost/podkit/app:v1")
    assert image.manifest.digest == sample.descriptor["digest"]
    assert image.diff_ids == tuple(sample.config["rootfs"]["diff_ids"])
    assert store.get(sample.descriptor["digest"]).name == image.name
    store.tag("localhost/podkit/app:v1", "copy")
    assert [i.name for i in store.list()] == ["docker.io/library/copy:latest",
                                              "localhost/podkit/app:v1"]
    assert store.get("docker.io/library/copy").manifest == image.manifest
    assert [i.name for i in store.remove("copy")] == ["docker.io/library/copy:latest"]
    with pytest.raises(ImageNotFoundError, match=r"docker.io/library/copy:latest"):
        store.get("copy")
    with pytest.raises(ImageNotFoundError, match=r"docker.io/library/copy:latest"):
        store.remove("copy")
    with pytest.raises(ImageError, match=r"invalid reference"):
        store.get("Bad Name")


def test_gc_keeps_referenced_and_drops_the_rest(imported: ImageStore, sample: BuiltImage) -> None:
    store = imported
    stray = store.put_blob(b"stray")
    (store.root / "ingest" / "sha256-abc.partial").write_bytes(b"x")
    result = store.gc()
    assert result.blobs == (stray,)
    assert result.bytes_freed == 6
    for digest in sample.blobs:
        assert store.has_blob(digest)
    store.tag("localhost/podkit/app:v1", "other")
    store.remove("localhost/podkit/app:v1")
    assert store.gc().blobs == ()  # still referenced by "other"
    store.remove("other")
    assert set(store.gc().blobs) == set(sample.blobs)
    assert list((store.root / "blobs" / "sha256").iterdir()) == []


def test_corrupt_record_is_reported(imported: ImageStore) -> None:
    store = imported
    record = next((store.root / "images").glob("*.json"))
    record.write_text("{not json")
    with pytest.raises(ImageError, match=f"corrupt image record {record}"):
        store.get("localhost/podkit/app:v1")


def test_gc_waits_for_writers(imported: ImageStore) -> None:
    store = imported
    stray = store.put_blob(b"about to be referenced")
    entered, release = threading.Event(), threading.Event()

    def writer() -> None:
        with store.hold():
            entered.set()
            release.wait(10)

    w = threading.Thread(target=writer)
    w.start()
    entered.wait(10)
    result: list[object] = []
    g = threading.Thread(target=lambda: result.append(store.gc()))
    g.start()
    g.join(0.3)
    assert g.is_alive() and not result  # blocked while the writer holds the store
    assert store.has_blob(stray)
    release.set()
    w.join(10)
    g.join(10)
    assert not g.is_alive() and not store.has_blob(stray)


def _writer(root: str, data: bytes, q: multiprocessing.Queue[bool]) -> None:
    store = ImageStore(root)
    q.put(store.ingest(sha(data), len(data), [data[i:i + 4096]
                                              for i in range(0, len(data), 4096)]))


def test_concurrent_ingest_from_processes_writes_once(tmp_path: Path) -> None:
    data = os.urandom(1 << 20)
    ctx = multiprocessing.get_context("fork")
    q: multiprocessing.Queue[bool] = ctx.Queue()
    procs = [ctx.Process(target=_writer, args=(str(tmp_path), data, q)) for _ in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(30)
        assert p.exitcode == 0
    results = [q.get(timeout=5) for _ in procs]
    assert results.count(True) == 1
    store = ImageStore(tmp_path)
    assert store.read_blob(sha(data)) == data
    assert _leftovers(store) == []
