"""OCI image-spec wire types: media types, descriptors, platforms, manifests and indexes.

Pure parsing of the JSON documents a layout, archive or registry hands over; every error names
the document it came from. Docker's schema2 types are accepted beside the OCI ones.
"""

from __future__ import annotations

import hashlib
import json
import platform as _platform
from typing import Any

import attrs

from podkit.image.errors import ImageError, UnsupportedMediaTypeError
from podkit.image.reference import parse_digest

__all__ = [
    "CONFIG_TYPES",
    "INDEX_TYPES",
    "LAYER_TYPES",
    "MANIFEST_TYPES",
    "MEDIA_TYPE_DOCKER_CONFIG",
    "MEDIA_TYPE_DOCKER_LAYER_GZIP",
    "MEDIA_TYPE_DOCKER_MANIFEST",
    "MEDIA_TYPE_DOCKER_MANIFEST_LIST",
    "MEDIA_TYPE_OCI_CONFIG",
    "MEDIA_TYPE_OCI_INDEX",
    "MEDIA_TYPE_OCI_LAYER",
    "MEDIA_TYPE_OCI_LAYER_GZIP",
    "MEDIA_TYPE_OCI_LAYER_ZSTD",
    "MEDIA_TYPE_OCI_MANIFEST",
    "Descriptor",
    "Index",
    "Manifest",
    "Platform",
    "digest_of",
    "host_platform",
    "layer_compression",
    "parse_index",
    "parse_manifest",
    "select_platform",
]

MEDIA_TYPE_OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
MEDIA_TYPE_OCI_INDEX = "application/vnd.oci.image.index.v1+json"
MEDIA_TYPE_OCI_CONFIG = "application/vnd.oci.image.config.v1+json"
MEDIA_TYPE_OCI_LAYER = "application/vnd.oci.image.layer.v1.tar"
MEDIA_TYPE_OCI_LAYER_GZIP = "application/vnd.oci.image.layer.v1.tar+gzip"
MEDIA_TYPE_OCI_LAYER_ZSTD = "application/vnd.oci.image.layer.v1.tar+zstd"
MEDIA_TYPE_DOCKER_MANIFEST = "application/vnd.docker.distribution.manifest.v2+json"
MEDIA_TYPE_DOCKER_MANIFEST_LIST = "application/vnd.docker.distribution.manifest.list.v2+json"
MEDIA_TYPE_DOCKER_CONFIG = "application/vnd.docker.container.image.v1+json"
MEDIA_TYPE_DOCKER_LAYER = "application/vnd.docker.image.rootfs.diff.tar"
MEDIA_TYPE_DOCKER_LAYER_GZIP = "application/vnd.docker.image.rootfs.diff.tar.gzip"

MANIFEST_TYPES = frozenset({MEDIA_TYPE_OCI_MANIFEST, MEDIA_TYPE_DOCKER_MANIFEST})
INDEX_TYPES = frozenset({MEDIA_TYPE_OCI_INDEX, MEDIA_TYPE_DOCKER_MANIFEST_LIST})
CONFIG_TYPES = frozenset({MEDIA_TYPE_OCI_CONFIG, MEDIA_TYPE_DOCKER_CONFIG})
# Layer media type -> compression ("" for plain tar).
LAYER_TYPES: dict[str, str] = {
    MEDIA_TYPE_OCI_LAYER: "",
    MEDIA_TYPE_OCI_LAYER_GZIP: "gzip",
    MEDIA_TYPE_OCI_LAYER_ZSTD: "zstd",
    "application/vnd.oci.image.layer.nondistributable.v1.tar": "",
    "application/vnd.oci.image.layer.nondistributable.v1.tar+gzip": "gzip",
    "application/vnd.oci.image.layer.nondistributable.v1.tar+zstd": "zstd",
    MEDIA_TYPE_DOCKER_LAYER: "",
    MEDIA_TYPE_DOCKER_LAYER_GZIP: "gzip",
    "application/vnd.docker.image.rootfs.foreign.diff.tar.gzip": "gzip",
    "application/vnd.docker.image.rootfs.diff.tar.zstd": "zstd",
}

_ARCH = {
    "x86_64": ("amd64", None),
    "amd64": ("amd64", None),
    "aarch64": ("arm64", "v8"),
    "arm64": ("arm64", "v8"),
    "armv7l": ("arm", "v7"),
    "armv6l": ("arm", "v6"),
    "i386": ("386", None),
    "i686": ("386", None),
    "ppc64le": ("ppc64le", None),
    "s390x": ("s390x", None),
    "riscv64": ("riscv64", None),
}


def digest_of(data: bytes) -> str:
    """The ``sha256:<hex>`` digest of ``data``."""
    return "sha256:" + hashlib.sha256(data).hexdigest()


def layer_compression(media_type: str, where: str = "") -> str:
    """The compression (``""``, ``"gzip"``, ``"zstd"``) of a layer media type, else raise."""
    try:
        return LAYER_TYPES[media_type]
    except KeyError:
        raise UnsupportedMediaTypeError(
            f"unsupported layer media type {media_type!r}{where}"
        ) from None


@attrs.frozen(slots=True)
class Platform:
    """An image platform (``os``/``architecture``/``variant``), as in index entries and configs."""

    os: str
    architecture: str
    variant: str | None = None

    def __str__(self) -> str:
        text = f"{self.os}/{self.architecture}"
        return f"{text}/{self.variant}" if self.variant else text

    @classmethod
    def parse(cls, text: str) -> Platform:
        """Parse ``os/arch[/variant]`` (``linux/arm64/v8``)."""
        parts = text.split("/")
        if len(parts) not in (2, 3) or not all(parts):
            raise ImageError(f"invalid platform {text!r}: want os/arch[/variant]")
        return cls(parts[0], parts[1], parts[2] if len(parts) == 3 else None)

    def to_dict(self) -> dict[str, str]:
        """The wire form (``{"os": ..., "architecture": ..., "variant": ...}``)."""
        out = {"architecture": self.architecture, "os": self.os}
        if self.variant:
            out["variant"] = self.variant
        return out

    def matches(self, other: Platform) -> bool:
        """True if an image for ``other`` runs here (variant only compared when both set)."""
        if self.os != other.os or self.architecture != other.architecture:
            return False
        return not (self.variant and other.variant and self.variant != other.variant)


def host_platform() -> Platform:
    """This machine's platform: ``linux`` and the architecture from ``platform.machine()``."""
    machine = _platform.machine()
    arch, variant = _ARCH.get(machine, (machine, None))
    return Platform("linux", arch, variant)


@attrs.frozen(slots=True)
class Descriptor:
    """A content descriptor: media type, digest, size, optional platform and annotations."""

    media_type: str
    digest: str
    size: int
    platform: Platform | None = None
    annotations: dict[str, str] | None = None

    @classmethod
    def from_dict(cls, data: Any, where: str) -> Descriptor:
        """Parse a descriptor object; ``where`` names the document for errors."""
        if not isinstance(data, dict):
            raise ImageError(f"{where}: descriptor must be an object, got {data!r:.80}")
        media_type = data.get("mediaType")
        digest = data.get("digest")
        size = data.get("size")
        if not isinstance(media_type, str) or not media_type:
            raise ImageError(f"{where}: descriptor without mediaType")
        if not isinstance(digest, str):
            raise ImageError(f"{where}: descriptor without digest")
        parse_digest(digest, where=f"digest in {where}")
        if not digest.startswith("sha256:"):
            raise ImageError(f"{where}: only sha256 digests are supported, got {digest}")
        if not isinstance(size, int) or isinstance(size, bool) or size < 0:
            raise ImageError(f"{where}: descriptor {digest} has invalid size {size!r}")
        plat = data.get("platform")
        platform = None
        if isinstance(plat, dict) and plat.get("os") and plat.get("architecture"):
            platform = Platform(str(plat["os"]), str(plat["architecture"]), plat.get("variant"))
        ann = data.get("annotations")
        annotations = {str(k): str(v) for k, v in ann.items()} if isinstance(ann, dict) else None
        return cls(media_type, digest, size, platform, annotations)

    def to_dict(self) -> dict[str, Any]:
        """The wire form with camelCase keys."""
        out: dict[str, Any] = {"mediaType": self.media_type, "digest": self.digest,
                               "size": self.size}
        if self.platform is not None:
            out["platform"] = self.platform.to_dict()
        if self.annotations:
            out["annotations"] = dict(self.annotations)
        return out


@attrs.frozen(slots=True)
class Manifest:
    """An image manifest: the config descriptor and the layer descriptors, base layer first."""

    media_type: str
    config: Descriptor
    layers: tuple[Descriptor, ...]


@attrs.frozen(slots=True)
class Index:
    """An image index (manifest list): one descriptor per platform image."""

    media_type: str
    manifests: tuple[Descriptor, ...]


def _load(raw: bytes, where: str) -> dict[str, Any]:
    try:
        data = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as e:
        raise ImageError(f"{where}: not valid JSON: {e}") from None
    if not isinstance(data, dict):
        raise ImageError(f"{where}: must be a JSON object")
    return data


def parse_manifest(raw: bytes, media_type: str | None, where: str) -> Manifest:
    """Parse an image manifest (OCI or Docker schema2); refuse other kinds by media type."""
    data = _load(raw, where)
    kind = data.get("mediaType") or media_type or MEDIA_TYPE_OCI_MANIFEST
    if data.get("schemaVersion") == 1:
        raise UnsupportedMediaTypeError(f"{where}: Docker schema1 manifests are not supported")
    if kind not in MANIFEST_TYPES:
        raise UnsupportedMediaTypeError(f"{where}: unsupported manifest media type {kind!r}")
    if data.get("schemaVersion") != 2:
        raise ImageError(f"{where}: schemaVersion must be 2")
    config = Descriptor.from_dict(data.get("config"), f"{where} config")
    layers_raw = data.get("layers")
    if not isinstance(layers_raw, list):
        raise ImageError(f"{where}: layers must be a list")
    layers = tuple(
        Descriptor.from_dict(item, f"{where} layers[{i}]") for i, item in enumerate(layers_raw)
    )
    return Manifest(kind, config, layers)


def parse_index(raw: bytes, media_type: str | None, where: str) -> Index:
    """Parse an image index (OCI index or Docker manifest list)."""
    data = _load(raw, where)
    kind = data.get("mediaType") or media_type or MEDIA_TYPE_OCI_INDEX
    if kind not in INDEX_TYPES:
        raise UnsupportedMediaTypeError(f"{where}: unsupported index media type {kind!r}")
    items = data.get("manifests")
    if not isinstance(items, list):
        raise ImageError(f"{where}: manifests must be a list")
    manifests = tuple(
        Descriptor.from_dict(item, f"{where} manifests[{i}]") for i, item in enumerate(items)
    )
    return Index(kind, manifests)


def select_platform(index: Index, want: Platform, where: str) -> Descriptor:
    """The first index entry whose platform runs on ``want`` (entries without one match all)."""
    from podkit.image.errors import PlatformNotFoundError

    candidates = [d for d in index.manifests if d.media_type in MANIFEST_TYPES | INDEX_TYPES]
    for desc in candidates:
        if desc.platform is not None and desc.platform.matches(want):
            return desc
    untyped = [d for d in candidates if d.platform is None]
    if untyped:
        return untyped[0]
    have = ", ".join(str(d.platform) for d in candidates) or "none"
    raise PlatformNotFoundError(f"{where}: no image for platform {want} (available: {have})")
