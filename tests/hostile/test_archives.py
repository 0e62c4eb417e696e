"""Hostile image archives and layouts for ``import_image``: broken tars, links that leave the
archive, bad index documents, blobs that do not match. Each is a typed ``ImageError``; nothing
is recorded, nothing unverified stored, nothing written outside the store.
"""

from __future__ import annotations

import gzip
import io
import json
import tarfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from image.imagebuild import BuiltImage, Layer, build_image, tree, write_layout
from image.registry_faults import assert_only_verified_blobs
from podkit import image
from podkit.image import DigestMismatchError, ImageError, ImageStore, ReferenceError

Members = dict[str, bytes | tuple[str, str]]
"""Archive members by name: content, or ``("sym" | "link", target)``."""


@dataclass(frozen=True)
class ArchiveProbe:
    """``edit`` changes the members of a good archive; ``mangle`` its bytes."""

    edit: Callable[[Members, BuiltImage], None] | None = None
    mangle: Callable[[bytes], bytes] | None = None
    error: type[ImageError] = ImageError
    fragment: str = ""
    docker: bool = False


def _img() -> BuiltImage:
    return build_image([Layer().file("f", b"hostile archive").bytes()], ["gzip"],
                       {"Cmd": ["/f"]})


def _oci_members(img: BuiltImage, tmp: Path) -> Members:
    layout = write_layout(tmp / "layout", [(img.descriptor, "v1")], img.blobs)
    return {str(p.relative_to(layout)): p.read_bytes()
            for p in sorted(layout.rglob("*")) if p.is_file()}


def _docker_members(img: BuiltImage) -> Members:
    cfg = img.manifest["config"]["digest"].partition(":")[2]
    return {f"{cfg}.json": img.config_bytes, "layer/layer.tar": img.layers_uncompressed[0],
            "manifest.json": json.dumps([{"Config": f"{cfg}.json", "RepoTags": ["x/y:1"],
                                          "Layers": ["layer/layer.tar"]}]).encode()}


def _tar(members: Members) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tf:
        for name, value in members.items():
            info = tarfile.TarInfo(name)
            if isinstance(value, tuple):
                info.type = tarfile.SYMTYPE if value[0] == "sym" else tarfile.LNKTYPE
                info.linkname = value[1]
                tf.addfile(info)
            else:
                info.size = len(value)
                tf.addfile(info, io.BytesIO(value))
    return buf.getvalue()


def _layer_blob(img: BuiltImage) -> str:
    return "blobs/sha256/" + img.manifest["layers"][0]["digest"].partition(":")[2]


def _set(name: Callable[[BuiltImage], str] | str, value: bytes | tuple[str, str],
         ) -> Callable[[Members, BuiltImage], None]:
    def edit(members: Members, img: BuiltImage) -> None:
        members[name(img) if callable(name) else name] = value
    return edit


def _index_digest(digest: str) -> Callable[[Members, BuiltImage], None]:
    def edit(members: Members, img: BuiltImage) -> None:
        index = json.loads(members["index.json"])  # type: ignore[arg-type]
        index["manifests"][0]["digest"] = digest
        members["index.json"] = json.dumps(index).encode()
    return edit


def _docker_manifest(**entry: object) -> Callable[[Members, BuiltImage], None]:
    def edit(members: Members, img: BuiltImage) -> None:
        manifest = json.loads(members["manifest.json"])  # type: ignore[arg-type]
        manifest[0].update(entry)
        members["manifest.json"] = json.dumps(manifest).encode()
    return edit


def _loop(members: Members, img: BuiltImage) -> None:
    blob = _layer_blob(img)
    members[blob] = ("sym", "loop")
    members["blobs/sha256/loop"] = ("sym", blob.rsplit("/", 1)[1])


def _same_size_garbage(members: Members, img: BuiltImage) -> None:
    blob = members[_layer_blob(img)]
    members[_layer_blob(img)] = bytes(len(blob))  # type: ignore[arg-type]


PROBES: dict[str, ArchiveProbe] = {
    "truncated-tar": ArchiveProbe(mangle=lambda data: data.rstrip(b"\0")[:-100]),
    "truncated-gzip-tar": ArchiveProbe(
        mangle=lambda data: gzip.compress(data)[: len(gzip.compress(data)) // 2],
        fragment="broken"),
    "not-a-tar": ArchiveProbe(mangle=lambda data: b"\x00garbage" * 100,
                              fragment="not a tar archive"),
    "random-bytes": ArchiveProbe(mangle=lambda data: bytes(range(256)) * 40),
    "index-symlink-escape": ArchiveProbe(_set("index.json", ("sym", "../../../etc/passwd")),
                                         fragment="escapes the archive"),
    "blob-symlink-absolute": ArchiveProbe(_set(_layer_blob, ("sym", "/etc/passwd")),
                                          fragment="escapes the archive"),
    "blob-hardlink-escape": ArchiveProbe(_set(_layer_blob, ("link", "../../etc/passwd")),
                                         fragment="escapes the archive"),
    "blob-symlink-loop": ArchiveProbe(_loop, fragment="too many links"),
    "index-bad-json": ArchiveProbe(_set("index.json", b"{nope"), fragment="not valid JSON"),
    "index-not-object": ArchiveProbe(_set("index.json", b"[1, 2]")),
    "index-digest-traversal": ArchiveProbe(_index_digest("sha256:../../../../etc/passwd"),
                                           error=ReferenceError),
    "index-digest-sha512": ArchiveProbe(_index_digest("sha512:" + "a" * 128)),
    "blob-other-size": ArchiveProbe(_set(_layer_blob, b"short"), error=DigestMismatchError),
    "blob-same-size-other-content": ArchiveProbe(_same_size_garbage,
                                                 error=DigestMismatchError),
    "docker-layer-escape": ArchiveProbe(_docker_manifest(Layers=["../../etc/passwd"]),
                                        fragment="escapes the archive", docker=True),
    "docker-config-absolute": ArchiveProbe(_docker_manifest(Config="/etc/passwd"),
                                           fragment="escapes the archive", docker=True),
    "docker-layer-symlink-absolute": ArchiveProbe(_set("layer/layer.tar",
                                                       ("sym", "/etc/passwd")),
                                                  fragment="escapes the archive", docker=True),
    "docker-manifest-not-list": ArchiveProbe(_set("manifest.json", b'{"Config": 1}'),
                                             docker=True),
    "docker-repo-tag-hostile": ArchiveProbe(_docker_manifest(RepoTags=["../../x:1"]),
                                            error=ReferenceError, docker=True),
}


@pytest.mark.parametrize("probe", list(PROBES))
def test_archive_probe(probe: str, tmp_path: Path) -> None:
    p = PROBES[probe]
    img = _img()
    members = _docker_members(img) if p.docker else _oci_members(img, tmp_path)
    if p.edit is not None:
        p.edit(members, img)
    data = _tar(members)
    if p.mangle is not None:
        data = p.mangle(data)
    archive = tmp_path / "archive.tar"
    archive.write_bytes(data)
    before = tree(tmp_path)
    store = ImageStore(tmp_path / "store")
    with pytest.raises(p.error) as err:
        image.import_image(store, archive, None if p.docker else "localhost/hostile/a:1")
    assert str(archive) in str(err.value) and p.fragment in str(err.value), err.value
    assert store.list() == []
    assert_only_verified_blobs(store)
    assert list((store.root / "ingest").iterdir()) == []
    assert {k: v for k, v in tree(tmp_path).items() if not k.startswith("store")} == before
