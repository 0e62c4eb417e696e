"""Import of OCI layouts, OCI archives and docker-save archives (no root needed)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from image.imagebuild import (
    BuiltImage,
    Layer,
    build_image,
    build_index,
    tar_dir,
    write_docker_save,
    write_layout,
)
from podkit.image import (
    BlobNotFoundError,
    DigestMismatchError,
    ImageError,
    ImageStore,
    Platform,
    PlatformNotFoundError,
    ReferenceError,
    UnsupportedMediaTypeError,
    host_platform,
    import_image,
)


def _check(store: ImageStore, name: str, sample: BuiltImage) -> None:
    image = store.get(name)
    assert image.diff_ids == tuple(sample.config["rootfs"]["diff_ids"])
    assert image.config.digest == sample.manifest["config"]["digest"]
    for layer in image.layers:
        assert store.has_blob(layer.digest)
    assert store.config(name).cmd == ("/app/hello",)


def test_import_oci_layout_dir(store: ImageStore, sample: BuiltImage, tmp_path: Path) -> None:
    layout = write_layout(tmp_path / "l", [(sample.descriptor, "v1")], sample.blobs)
    events = []
    images = import_image(store, layout, "localhost/podkit/app", progress=events.append)
    assert [i.name for i in images] == ["localhost/podkit/app:v1"]
    assert images[0].manifest.digest == sample.descriptor["digest"]
    _check(store, "localhost/podkit/app:v1", sample)
    assert {e.digest for e in events if e.status == "done"} == {
        d["digest"] for d in [sample.manifest["config"], *sample.manifest["layers"]]}
    again = []
    import_image(store, layout, "localhost/podkit/app", progress=again.append)
    assert {e.status for e in again} == {"exists"}


def test_import_oci_archive(store: ImageStore, sample: BuiltImage, tmp_path: Path) -> None:
    layout = write_layout(tmp_path / "l", [(sample.descriptor, "example.com/team/app:v2")],
                          sample.blobs)
    archive = tar_dir(layout, tmp_path / "app.tar")
    images = import_image(store, archive)
    assert [i.name for i in images] == ["example.com/team/app:v2"]
    _check(store, "example.com/team/app:v2", sample)


def test_import_docker_save(store: ImageStore, sample: BuiltImage, tmp_path: Path) -> None:
    archive = write_docker_save(tmp_path / "save.tar", sample, ["podkit/app:v1", "podkit/app:v2"])
    images = import_image(store, archive)
    assert [i.name for i in images] == ["docker.io/podkit/app:v1", "docker.io/podkit/app:v2"]
    image = store.get("podkit/app:v1")
    # docker save holds uncompressed layers: their digests are the diff_ids
    assert [layer.digest for layer in image.layers] == list(image.diff_ids)
    _check(store, "podkit/app:v2", sample)
    renamed = import_image(store, archive, "localhost/renamed:x")
    assert [i.name for i in renamed] == ["localhost/renamed:x"]


def test_multi_platform_index_resolves_host(store: ImageStore, sample_layers_raw: list[bytes],
                                            tmp_path: Path) -> None:
    here = host_platform()
    other_arch = "s390x" if here.architecture != "s390x" else "amd64"
    mine = build_image(sample_layers_raw[:1], ["gzip"], {"Cmd": ["mine"]}, arch=here.architecture)
    other = build_image([Layer().file("other", b"o").bytes()], [""], {"Cmd": ["other"]},
                        arch=other_arch)
    desc, raw = build_index([other, mine])
    blobs = {**mine.blobs, **other.blobs, desc["digest"]: raw}
    layout = write_layout(tmp_path / "l", [(desc, "multi")], blobs)
    [image] = import_image(store, layout, "localhost/multi")
    assert image.target.digest == desc["digest"]
    assert image.manifest.digest == mine.descriptor["digest"]
    assert store.config(image).cmd == ("mine",)
    assert not store.has_blob(other.manifest["layers"][0]["digest"])
    [image2] = import_image(store, layout, "localhost/multi-other",
                            platform=Platform("linux", other_arch))
    assert store.config(image2).cmd == ("other",)
    with pytest.raises(PlatformNotFoundError, match=r"linux/mips64.*available: linux/"):
        import_image(store, layout, "localhost/x", platform=Platform.parse("linux/mips64"))
    assert store.gc().blobs == ()


def test_unnamed_entry_needs_a_reference(store: ImageStore, sample: BuiltImage,
                                         tmp_path: Path) -> None:
    layout = write_layout(tmp_path / "l", [(sample.descriptor, "v1")], sample.blobs)
    with pytest.raises(ReferenceError, match=r"named only by tag 'v1': pass a reference"):
        import_image(store, layout)
    layout2 = write_layout(tmp_path / "l2", [(sample.descriptor, None)], sample.blobs)
    with pytest.raises(ReferenceError, match=r"has no name"):
        import_image(store, layout2)
    assert store.list() == []


def test_missing_blob_records_nothing(store: ImageStore, sample: BuiltImage,
                                      tmp_path: Path) -> None:
    layer = sample.manifest["layers"][1]["digest"]
    blobs = {k: v for k, v in sample.blobs.items() if k != layer}
    layout = write_layout(tmp_path / "l", [(sample.descriptor, "v1")], blobs)
    with pytest.raises(BlobNotFoundError, match=f"blob {layer} .*localhost/a:v1"):
        import_image(store, layout, "localhost/a")
    assert store.list() == []


def test_corrupt_blob_is_refused(store: ImageStore, sample: BuiltImage, tmp_path: Path) -> None:
    layer = sample.manifest["layers"][0]["digest"]
    blobs = dict(sample.blobs)
    blobs[layer] = b"\0" + blobs[layer][1:]
    layout = write_layout(tmp_path / "l", [(sample.descriptor, "v1")], blobs)
    with pytest.raises(DigestMismatchError, match=f"blob {layer} of localhost/a:v1"):
        import_image(store, layout, "localhost/a")
    assert store.list() == [] and not store.has_blob(layer)
    assert list((store.root / "ingest").iterdir()) == []


def test_unsupported_manifest_types(store: ImageStore, tmp_path: Path) -> None:
    raw = json.dumps({"schemaVersion": 1, "name": "x", "fsLayers": []}).encode()
    from image.imagebuild import sha

    desc = {"mediaType": "application/vnd.docker.distribution.manifest.v1+prettyjws",
            "digest": sha(raw), "size": len(raw)}
    layout = write_layout(tmp_path / "l", [(desc, "v1")], {sha(raw): raw})
    with pytest.raises(UnsupportedMediaTypeError, match=r"manifest.v1.prettyjws"):
        import_image(store, layout, "localhost/a")
    assert store.list() == []


def test_not_an_image(store: ImageStore, tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    with pytest.raises(ImageError, match=r"neither an OCI layout"):
        import_image(store, tmp_path / "empty")
    (tmp_path / "junk.tar").write_bytes(b"junk" * 100)
    with pytest.raises(ImageError, match=r"junk.tar: not a tar archive"):
        import_image(store, tmp_path / "junk.tar")
    with pytest.raises(ImageError, match=r"no such file"):
        import_image(store, tmp_path / "missing")


def test_truncated_compressed_archive_is_a_typed_error(tmp_path: Path) -> None:
    """A gzip'd OCI archive cut in half once escaped as a raw EOFError from tarfile."""
    import gzip

    from image.imagebuild import Layer, build_image, tar_dir

    img = build_image([Layer().file("f", b"x").bytes()], ["gzip"], {"Cmd": ["/f"]})
    layout = write_layout(tmp_path / "l", [(img.descriptor, "v1")], img.blobs)
    data = gzip.compress(tar_dir(layout, tmp_path / "a.tar").read_bytes())
    archive = tmp_path / "a.tar.gz"
    archive.write_bytes(data[: len(data) // 2])
    store = ImageStore(tmp_path / "store")
    with pytest.raises(ImageError, match=rf"{archive}: broken tar archive \(truncated"):
        import_image(store, archive, "localhost/cut:1")
    assert store.list() == []
