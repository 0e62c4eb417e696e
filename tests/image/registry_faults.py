"""Hostile registry answers: each probe breaks one response of a :class:`FakeRegistry`.

Used by tests/image/test_registry.py (the defect regressions) and by the standing hostile
corpus (tests/hostile/test_registry.py). Every probe must end in a typed ``ImageError`` whose
message names the reference and the digest (or tag) at fault, with nothing half stored.
"""

from __future__ import annotations

import copy
import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from image.imagebuild import BuiltImage, Layer, build_image
from image.registries import FakeRegistry
from podkit import image
from podkit.image import (
    BlobNotFoundError,
    DigestMismatchError,
    ImageError,
    ImageStore,
    RegistryError,
    UnsupportedMediaTypeError,
)

REPO, TAG = "test/app", "v1"


@dataclass(frozen=True)
class Probe:
    """One broken answer: ``setup`` breaks the fake; the pull must raise ``error`` naming
    ``what(img)`` (a digest or the tag); ``resumable`` probes may keep an ingest partial."""

    setup: Callable[[FakeRegistry, BuiltImage], None]
    error: type[ImageError]
    what: Callable[[BuiltImage], str]
    resumable: bool = False


def small_image() -> BuiltImage:
    """A one-layer image whose layer is large enough to be cut in the middle (256 KiB)."""
    data = hashlib.shake_256(b"podkit").digest(256 << 10)  # incompressible, deterministic
    return build_image([Layer().file("blob", data).bytes()], ["gzip"], {"Cmd": ["/blob"]})


def _layer(img: BuiltImage) -> str:
    return str(img.manifest["layers"][0]["digest"])


def _config(img: BuiltImage) -> str:
    return str(img.manifest["config"]["digest"])


def _tag(img: BuiltImage) -> str:
    return f"manifest {TAG} of"


def _manifest(img: BuiltImage) -> str:
    """Errors in a manifest's content name it by its digest (``manifest sha256:...``)."""
    return "manifest sha256:"


def _manifest(img: BuiltImage) -> str:
    """Errors found in a manifest's content name it by digest (``manifest sha256:...``)."""
    return "manifest "


def _edit_manifest(edit: Callable[[dict[str, object]], None],
                   ) -> Callable[[FakeRegistry, BuiltImage], None]:
    """A setup serving, under the tag, a copy of the manifest changed by ``edit``."""
    def setup(fake: FakeRegistry, img: BuiltImage) -> None:
        manifest = copy.deepcopy(img.manifest)
        edit(manifest)
        fake.manifests[TAG] = manifest
    return setup


def _layer_field(key: str, value: object) -> Callable[[dict[str, object]], None]:
    def edit(manifest: dict[str, object]) -> None:
        manifest["layers"][0][key] = value  # type: ignore[index]
    return edit


def _layer_size(delta: int) -> Callable[[dict[str, object]], None]:
    def edit(manifest: dict[str, object]) -> None:
        manifest["layers"][0]["size"] += delta  # type: ignore[index]
    return edit


def _raw(key: Callable[[BuiltImage], str], body: bytes) -> Callable[[FakeRegistry, BuiltImage],
                                                                     None]:
    def setup(fake: FakeRegistry, img: BuiltImage) -> None:
        fake.raw[key(img)] = body
    return setup


def _length(key: Callable[[BuiltImage], str], delta: int) -> Callable[[FakeRegistry, BuiltImage],
                                                                       None]:
    def setup(fake: FakeRegistry, img: BuiltImage) -> None:
        k = key(img)
        body = fake.blobs.get(k, _manifest_bytes(img))
        fake.lengths[k] = len(body) + delta
    return setup


def _manifest_bytes(img: BuiltImage) -> bytes:
    import json

    return json.dumps(img.manifest).encode()


def _status(key: Callable[[BuiltImage], str], *codes: int) -> Callable[[FakeRegistry, BuiltImage],
                                                                        None]:
    def setup(fake: FakeRegistry, img: BuiltImage) -> None:
        fake.statuses[key(img)] = list(codes)
    return setup


def _reset(key: Callable[[BuiltImage], str]) -> Callable[[FakeRegistry, BuiltImage], None]:
    def setup(fake: FakeRegistry, img: BuiltImage) -> None:
        fake.reset.add(key(img))
    return setup


def _redirect_loop(key: Callable[[BuiltImage], str]) -> Callable[[FakeRegistry, BuiltImage],
                                                                 None]:
    def setup(fake: FakeRegistry, img: BuiltImage) -> None:
        k = key(img)
        kind = "blobs" if k.startswith("sha256:") else "manifests"
        fake.redirects[k] = f"/v2/{REPO}/{kind}/{k}"
    return setup


def _tag_key(img: BuiltImage) -> str:
    return TAG


def _tag_suffix(img: BuiltImage) -> str:
    return f"/manifests/{TAG}"


def _both(*setups: Callable[[FakeRegistry, BuiltImage], None],
          ) -> Callable[[FakeRegistry, BuiltImage], None]:
    def setup(fake: FakeRegistry, img: BuiltImage) -> None:
        for one in setups:
            one(fake, img)
    return setup


def _zeroed(key: Callable[[BuiltImage], str]) -> Callable[[FakeRegistry, BuiltImage], None]:
    def setup(fake: FakeRegistry, img: BuiltImage) -> None:
        fake.raw[key(img)] = bytes(len(fake.blobs[key(img)]))
    return setup


def _corrupt(fake: FakeRegistry, img: BuiltImage) -> None:
    fake.corrupt.add(_layer(img))


def _truncate(fake: FakeRegistry, img: BuiltImage) -> None:
    fake.truncate.add(_layer(img))


def _missing(fake: FakeRegistry, img: BuiltImage) -> None:
    del fake.blobs[_layer(img)]


PROBES: dict[str, Probe] = {
    # wrong sizes: in the manifest's descriptor, or in the registry's Content-Length
    "layer-size-larger-than-blob": Probe(_edit_manifest(_layer_size(1000)),
                                         DigestMismatchError, _layer),
    "layer-size-smaller-than-blob": Probe(_edit_manifest(_layer_size(-10)),
                                          DigestMismatchError, _layer),
    "layer-size-huge": Probe(_edit_manifest(_layer_field("size", 1 << 62)),
                             DigestMismatchError, _layer),
    "layer-size-negative": Probe(_edit_manifest(_layer_field("size", -1)), ImageError,
                                 _manifest),
    "layer-digest-traversal": Probe(_edit_manifest(_layer_field("digest", "sha256:../../x")),
                                    ImageError, _manifest),
    "layer-digest-sha512": Probe(_edit_manifest(_layer_field("digest", "sha512:" + "a" * 128)),
                                 ImageError, _manifest),
    "blob-content-length-longer": Probe(_length(_layer, 1000), DigestMismatchError, _layer),
    "blob-content-length-shorter": Probe(_length(_layer, -1000), DigestMismatchError, _layer),
    "config-content-length-longer": Probe(_length(_config, 7), DigestMismatchError, _config),
    "manifest-content-length-longer": Probe(_length(_tag_key, 100), RegistryError, _tag),
    "manifest-content-length-shorter": Probe(_length(_tag_key, -10), ImageError, _manifest),
    "blob-error-body-cut": Probe(_both(_status(_layer, 404), _length(_layer, 1000)),
                                 BlobNotFoundError, _layer),
    "manifest-error-body-cut": Probe(_both(_status(_tag_suffix, 500, 500),
                                           _length(_tag_suffix, 5000)), RegistryError, _tag),
    # cut connections
    "blob-truncated": Probe(_truncate, RegistryError, _layer, resumable=True),
    "blob-connection-reset": Probe(_reset(_layer), RegistryError, _layer, resumable=True),
    "manifest-connection-reset": Probe(_reset(_tag_key), RegistryError, _tag),
    # wrong content
    "blob-wrong-digest": Probe(_corrupt, DigestMismatchError, _layer),
    "blob-other-content-same-size": Probe(_zeroed(_layer), DigestMismatchError, _layer),
    "config-other-content": Probe(_raw(_config, b"{}"), DigestMismatchError, _config),
    "manifest-bad-json": Probe(_raw(_tag_key, b"{not json"), ImageError, _manifest),
    "manifest-json-array": Probe(_raw(_tag_key, b"[]"), ImageError, _manifest),
    "manifest-not-utf8": Probe(_raw(_tag_key, b"\xff\xfe\x00{"), ImageError, _manifest),
    "manifest-html": Probe(_raw(_tag_key, b'{"mediaType": "text/html"}'),
                           UnsupportedMediaTypeError, _tag),
    "manifest-too-large": Probe(_raw(_tag_key, b" " * ((8 << 20) + 1)), RegistryError, _tag),
    # error statuses and redirects
    "blob-404": Probe(_missing, BlobNotFoundError, _layer),
    "blob-403": Probe(_status(_layer, 403), RegistryError, _layer),
    "blob-400": Probe(_status(_layer, 400), RegistryError, _layer),
    "blob-500-persistent": Probe(_status(_layer, 500, 500, 500), RegistryError, _layer),
    "manifest-418": Probe(_status(_tag_suffix, 418), RegistryError, _tag),
    "blob-redirect-loop": Probe(_redirect_loop(_layer), RegistryError, _layer),
    "manifest-redirect-loop": Probe(_redirect_loop(_tag_key), RegistryError, _tag),
}


def run_probe(name: str, fake: FakeRegistry, img: BuiltImage, root: Path) -> ImageError:
    """Break ``fake`` as probe ``name`` says, pull, check the store; returns the error."""
    probe = PROBES[name]
    probe.setup(fake, img)
    ref = f"{fake.host}/{REPO}:{TAG}"
    store = ImageStore(root)
    try:
        image.pull(store, ref, retries=1, backoff=0.01, timeout=5)
    except ImageError as exc:
        err = exc
    else:
        raise AssertionError(f"probe {name}: the pull succeeded")
    assert isinstance(err, probe.error), f"probe {name}: {type(err).__name__}: {err}"
    assert ref in str(err) and probe.what(img) in str(err), f"probe {name}: {err}"
    assert store.list() == [], f"probe {name}: an image was recorded"
    assert_only_verified_blobs(store)
    partials = list((store.root / "ingest").iterdir())
    assert not partials or probe.resumable, f"probe {name}: left {partials}"
    return err


def assert_only_verified_blobs(store: ImageStore) -> None:
    """Every file under ``blobs/`` is named by the sha256 of its content."""
    for path in (store.root / "blobs" / "sha256").iterdir():
        assert hashlib.sha256(path.read_bytes()).hexdigest() == path.name, path
