"""Build small OCI images in tests with tarfile, and write them as layout / archive / docker save.

Nothing here comes from podkit: the images are made from the spec, so podkit is tested against
independently written content.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import os
import tarfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
OCI_INDEX = "application/vnd.oci.image.index.v1+json"
OCI_CONFIG = "application/vnd.oci.image.config.v1+json"
LAYER_TYPES = {
    "": "application/vnd.oci.image.layer.v1.tar",
    "gzip": "application/vnd.oci.image.layer.v1.tar+gzip",
    "zstd": "application/vnd.oci.image.layer.v1.tar+zstd",
}
MTIME = 1_700_000_000


def sha(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


class Layer:
    """An uncompressed layer tar built entry by entry."""

    def __init__(self) -> None:
        self.buf = io.BytesIO()
        self.tar = tarfile.open(  # noqa: SIM115 - closed by bytes()
            fileobj=self.buf, mode="w", format=tarfile.PAX_FORMAT
        )

    def _info(self, name: str, kind: bytes, mode: int, uid: int = 0,
              gid: int = 0) -> tarfile.TarInfo:
        info = tarfile.TarInfo(name)
        info.type = kind
        info.mode = mode
        info.uid, info.gid = uid, gid
        info.mtime = MTIME
        return info

    def dir(self, name: str, mode: int = 0o755, uid: int = 0, gid: int = 0) -> Layer:
        self.tar.addfile(self._info(name, tarfile.DIRTYPE, mode, uid, gid))
        return self

    def file(self, name: str, data: bytes = b"", mode: int = 0o644, uid: int = 0, gid: int = 0,
             xattrs: dict[str, str] | None = None) -> Layer:
        info = self._info(name, tarfile.REGTYPE, mode, uid, gid)
        info.size = len(data)
        if xattrs:
            info.pax_headers = {f"SCHILY.xattr.{k}": v for k, v in xattrs.items()}
        self.tar.addfile(info, io.BytesIO(data))
        return self

    def symlink(self, name: str, target: str) -> Layer:
        info = self._info(name, tarfile.SYMTYPE, 0o777)
        info.linkname = target
        self.tar.addfile(info)
        return self

    def hardlink(self, name: str, target: str) -> Layer:
        info = self._info(name, tarfile.LNKTYPE, 0o644)
        info.linkname = target
        self.tar.addfile(info)
        return self

    def chardev(self, name: str, major: int, minor: int, mode: int = 0o666) -> Layer:
        info = self._info(name, tarfile.CHRTYPE, mode)
        info.devmajor, info.devminor = major, minor
        self.tar.addfile(info)
        return self

    def fifo(self, name: str, mode: int = 0o600) -> Layer:
        self.tar.addfile(self._info(name, tarfile.FIFOTYPE, mode))
        return self

    def whiteout(self, path: str) -> Layer:
        parent, _, base = path.rpartition("/")
        return self.file(f"{parent}/.wh.{base}" if parent else f".wh.{base}")

    def opaque(self, directory: str) -> Layer:
        return self.file(f"{directory}/.wh..wh..opq")

    def tree(self, root: Path, prefix: str = "") -> Layer:
        """Add a directory tree from disk (symlinks kept as symlinks)."""
        for dirpath, dirnames, filenames in os.walk(root):
            dirnames.sort()
            rel = os.path.relpath(dirpath, root)
            arc = prefix + ("" if rel == "." else rel)
            if arc:
                self.dir(arc, os.stat(dirpath).st_mode & 0o7777)
            for name in sorted(filenames + [d for d in dirnames
                                            if os.path.islink(os.path.join(dirpath, d))]):
                path = os.path.join(dirpath, name)
                member = f"{arc}/{name}" if arc else name
                if os.path.islink(path):
                    self.symlink(member, os.readlink(path))
                else:
                    self.file(member, Path(path).read_bytes(), os.stat(path).st_mode & 0o7777)
        return self

    def raw(self, info: tarfile.TarInfo, data: bytes | None = None) -> Layer:
        self.tar.addfile(info, io.BytesIO(data) if data is not None else None)
        return self

    def bytes(self) -> bytes:
        self.tar.close()
        return self.buf.getvalue()


def compress(data: bytes, compression: str) -> bytes:
    if compression == "gzip":
        return gzip.compress(data, compresslevel=1, mtime=0)
    if compression == "zstd":
        import zstandard

        return zstandard.ZstdCompressor().compress(data)
    return data


@dataclass
class BuiltImage:
    """Blobs of one platform image plus its manifest descriptor."""

    blobs: dict[str, bytes] = field(default_factory=dict)
    manifest: dict[str, Any] = field(default_factory=dict)
    config: dict[str, Any] = field(default_factory=dict)
    layers_uncompressed: list[bytes] = field(default_factory=list)
    descriptor: dict[str, Any] = field(default_factory=dict)

    @property
    def config_bytes(self) -> bytes:
        return self.blobs[self.manifest["config"]["digest"]]


def build_image(layers: list[bytes], compressions: list[str] | None = None,
                config: dict[str, Any] | None = None, arch: str = "amd64") -> BuiltImage:
    compressions = compressions or [""] * len(layers)
    img = BuiltImage()
    descs = []
    for raw, comp in zip(layers, compressions, strict=True):
        blob = compress(raw, comp)
        img.blobs[sha(blob)] = blob
        descs.append({"mediaType": LAYER_TYPES[comp], "digest": sha(blob), "size": len(blob)})
        img.layers_uncompressed.append(raw)
    cfg = {
        "architecture": arch,
        "os": "linux",
        "config": dict(config or {}),
        "rootfs": {"type": "layers", "diff_ids": [sha(raw) for raw in layers]},
        "history": [{"created_by": "podkit tests"} for _ in layers],
    }
    img.config = cfg
    cfg_raw = json.dumps(cfg, sort_keys=True).encode()
    img.blobs[sha(cfg_raw)] = cfg_raw
    img.manifest = {
        "schemaVersion": 2,
        "mediaType": OCI_MANIFEST,
        "config": {"mediaType": OCI_CONFIG, "digest": sha(cfg_raw), "size": len(cfg_raw)},
        "layers": descs,
    }
    man_raw = json.dumps(img.manifest).encode()
    img.blobs[sha(man_raw)] = man_raw
    img.descriptor = {"mediaType": OCI_MANIFEST, "digest": sha(man_raw), "size": len(man_raw),
                      "platform": {"architecture": arch, "os": "linux"}}
    return img


def build_index(images: list[BuiltImage]) -> tuple[dict[str, Any], bytes]:
    index = {"schemaVersion": 2, "mediaType": OCI_INDEX,
             "manifests": [img.descriptor for img in images]}
    raw = json.dumps(index).encode()
    return ({"mediaType": OCI_INDEX, "digest": sha(raw), "size": len(raw)}, raw)


def write_layout(dest: Path, entries: list[tuple[dict[str, Any], str | None]],
                 blobs: dict[str, bytes]) -> Path:
    """An OCI image layout with ``entries`` (descriptor, ref.name annotation) in index.json."""
    (dest / "blobs" / "sha256").mkdir(parents=True, exist_ok=True)
    for digest, data in blobs.items():
        (dest / "blobs" / "sha256" / digest.partition(":")[2]).write_bytes(data)
    (dest / "oci-layout").write_text(json.dumps({"imageLayoutVersion": "1.0.0"}))
    manifests = []
    for desc, name in entries:
        d = {k: v for k, v in desc.items() if k != "platform"}
        if name:
            d["annotations"] = {"org.opencontainers.image.ref.name": name}
        manifests.append(d)
    (dest / "index.json").write_text(json.dumps({"schemaVersion": 2, "mediaType": OCI_INDEX,
                                                 "manifests": manifests}))
    return dest


def tar_dir(src: Path, dest: Path) -> Path:
    with tarfile.open(dest, "w") as tf:
        for name in sorted(os.listdir(src)):
            tf.add(src / name, arcname=name)
    return dest


def write_docker_save(dest: Path, img: BuiltImage, repo_tags: list[str]) -> Path:
    """A ``docker save`` archive (legacy format: <id>/layer.tar, <config>.json, manifest.json)."""
    files: dict[str, bytes] = {}
    cfg_hex = img.manifest["config"]["digest"].partition(":")[2]
    files[f"{cfg_hex}.json"] = img.config_bytes
    layer_paths = []
    for raw in img.layers_uncompressed:
        lid = hashlib.sha256(b"id" + raw).hexdigest()
        files[f"{lid}/VERSION"] = b"1.0"
        files[f"{lid}/layer.tar"] = raw
        files[f"{lid}/json"] = json.dumps({"id": lid}).encode()
        layer_paths.append(f"{lid}/layer.tar")
    files["manifest.json"] = json.dumps(
        [{"Config": f"{cfg_hex}.json", "RepoTags": repo_tags, "Layers": layer_paths}]).encode()
    repos: dict[str, dict[str, str]] = {}
    for tag in repo_tags:
        repo, _, t = tag.rpartition(":")
        repos.setdefault(repo, {})[t] = layer_paths[-1].split("/")[0]
    files["repositories"] = json.dumps(repos).encode()
    with tarfile.open(dest, "w") as tf:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            info.mtime = MTIME
            tf.addfile(info, io.BytesIO(data))
    return dest


def tree(root: Path) -> dict[str, tuple[Any, ...]]:
    """A comparable description of a file tree: type, mode, owner, content / link / device."""
    out: dict[str, tuple[Any, ...]] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            path = os.path.join(dirpath, name)
            rel = os.path.relpath(path, root)
            st = os.lstat(path)
            mode = st.st_mode
            if os.path.islink(path):
                out[rel] = ("l", os.readlink(path), st.st_uid, st.st_gid)
            elif os.path.isdir(path):
                out[rel] = ("d", oct(mode & 0o7777), st.st_uid, st.st_gid)
            elif os.path.isfile(path):
                out[rel] = ("f", oct(mode & 0o7777), st.st_uid, st.st_gid,
                            hashlib.sha256(Path(path).read_bytes()).hexdigest(),
                            sorted(os.listxattr(path)))
            else:
                out[rel] = ("s", oct(mode), st.st_rdev, st.st_uid, st.st_gid)
    return out


def sample_layers(busybox_rootfs: Path) -> list[Layer]:
    """Three layers over busybox with deletions, an opaque dir, links, devices and xattrs."""
    base = Layer().tree(busybox_rootfs)
    base.dir("data").file("data/keep.txt", b"keep\n").file("data/gone.txt", b"gone\n")
    base.dir("opq").file("opq/old1", b"1").dir("opq/sub").file("opq/sub/old2", b"2")
    base.dir("app").file("app/hello", b"#!/bin/sh\necho hello from layer 1\n", 0o755)
    second = Layer()
    second.whiteout("data/gone.txt")
    second.dir("opq").opaque("opq").file("opq/new", b"new\n")
    second.dir("app").file("app/hello", b"#!/bin/sh\necho hello from layer 2\n", 0o750, 1000, 1000)
    second.hardlink("app/hello-link", "app/hello")
    second.symlink("app/sh", "/bin/busybox")
    second.dir("dev").chardev("dev/podkit-null", 1, 3)
    second.fifo("app/fifo")
    second.file("app/attr", b"x", xattrs={"user.podkit": "yes"})
    second.dir("home/app", 0o700, 1000, 1000).file("home/app/.profile", b"", 0o600, 1000, 1000)
    third = Layer()
    third.dir("etc").file("etc/motd", b"welcome\n", 0o444)
    third.whiteout("bin/vi")
    third.dir("data").file("data/new.txt", b"third\n")
    third.hardlink("data/keep-link", "data/keep.txt")  # target lives in layer 1
    return [base, second, third]
