"""Export images of the store as an OCI image layout: a directory, or a tar of one (an OCI
archive, what ``ctr images import``, ``podman load`` and :func:`import_image` read).

Each image is written as its platform manifest (the one this store holds the layers of), named
in ``index.json`` by ``io.containerd.image.name`` (the full reference) and
``org.opencontainers.image.ref.name`` (its tag), as containerd's exporter names them. The
layout is made beside ``path`` and renamed into place: a failed export leaves nothing.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tarfile
import tempfile
from collections.abc import Iterable
from pathlib import Path

from podkit._files import fsync_dir
from podkit.image.descriptor import MEDIA_TYPE_OCI_INDEX, Descriptor, parse_manifest
from podkit.image.errors import ImageError
from podkit.image.layout import ANNOTATION_CONTAINERD_NAME, ANNOTATION_REF_NAME
from podkit.image.reference import parse_reference
from podkit.image.store import Image, ImageStore

__all__ = ["export_image"]

_CHUNK = 1 << 20


def _entry(image: Image) -> Descriptor:
    ref = parse_reference(image.name, default_tag=False)
    annotations = {ANNOTATION_CONTAINERD_NAME: image.name}
    if ref.tag:
        annotations[ANNOTATION_REF_NAME] = ref.tag
    m = image.manifest
    return Descriptor(m.media_type, m.digest, m.size, image.platform, annotations)


def _blobs(store: ImageStore, image: Image) -> list[Descriptor]:
    raw = store.read_blob(image.manifest.digest, image.manifest.size,
                          f" (manifest of {image.name})")
    man = parse_manifest(raw, image.manifest.media_type,
                         f"manifest {image.manifest.digest} of {image.name}")
    return [image.manifest, man.config, *man.layers]


def _write_layout(store: ImageStore, images: list[Image], dest: Path) -> None:
    blob_dir = dest / "blobs" / "sha256"
    blob_dir.mkdir(parents=True)
    for image in images:
        for desc in _blobs(store, image):
            target = blob_dir / desc.digest.partition(":")[2]
            if target.exists():
                continue
            with store.open_blob(desc.digest, desc.size, f" of {image.name}") as src, \
                    open(target, "wb") as out:
                shutil.copyfileobj(src, out, _CHUNK)
    (dest / "oci-layout").write_text(json.dumps({"imageLayoutVersion": "1.0.0"}) + "\n")
    index = {"schemaVersion": 2, "mediaType": MEDIA_TYPE_OCI_INDEX,
             "manifests": [_entry(i).to_dict() for i in images]}
    (dest / "index.json").write_text(json.dumps(index, indent=2) + "\n")


def _tar(layout: Path, dest: Path) -> None:
    """``layout`` as an uncompressed tar at ``dest`` (names sorted, no owners or times)."""
    with open(dest, "wb") as out:
        with tarfile.open(fileobj=out, mode="w", format=tarfile.PAX_FORMAT) as tar:
            for path in sorted(layout.rglob("*")):
                info = tar.gettarinfo(str(path), str(path.relative_to(layout)))
                info.uid = info.gid = 0
                info.uname = info.gname = ""
                info.mtime = 0
                if info.isreg():
                    with open(path, "rb") as f:
                        tar.addfile(info, f)
                else:
                    tar.addfile(info)
        out.flush()
        os.fsync(out.fileno())


def export_image(store: ImageStore, refs: str | Iterable[str],
                 path: str | os.PathLike[str]) -> Path:
    """Write the images ``refs`` (one reference or several) as an OCI image layout at
    ``path``: a tar archive when it ends in ``.tar``, else a new directory. ``path`` must not
    exist. Returns it. Raises ``ImageNotFoundError`` for a reference not in the store,
    ``ImageError`` when ``path`` exists or cannot be written."""
    dest = Path(path)
    images = [store.get(r) for r in ([refs] if isinstance(refs, str) else refs)]
    if not images:
        raise ImageError(f"export to {dest}: no image named")
    if dest.exists() or dest.is_symlink():
        raise ImageError(f"export to {dest}: it exists already")
    parent = dest.absolute().parent
    try:
        work = Path(tempfile.mkdtemp(dir=parent, prefix=f".{dest.name}."))
    except OSError as exc:
        raise ImageError(f"export to {dest}: {exc.strerror or exc}") from None
    try:
        layout = work / "layout"
        with store.hold():
            _write_layout(store, images, layout)
        if dest.name.endswith(".tar"):
            _tar(layout, work / "archive.tar")
            os.replace(work / "archive.tar", dest)
        else:
            os.rename(layout, dest)
        fsync_dir(parent)
    except OSError as exc:
        raise ImageError(f"export to {dest}: {exc.strerror or exc}") from None
    finally:
        with contextlib.suppress(OSError):
            shutil.rmtree(work)
    return dest
