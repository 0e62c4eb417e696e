"""Errors of the image layer; each names the reference, digest, file or entry at fault."""

from __future__ import annotations

from podkit.errors import ConflictError, InvalidArgumentError, NotFoundError, PodkitError

__all__ = [
    "BlobNotFoundError",
    "DigestMismatchError",
    "HostsConfigError",
    "ImageError",
    "ImageInUseError",
    "ImageNotFoundError",
    "PlatformNotFoundError",
    "RegistryError",
    "UnsafeLayerError",
    "UnsupportedMediaTypeError",
]


class ImageError(PodkitError):
    """Base of the errors podkit.image raises."""


class ImageNotFoundError(ImageError, NotFoundError):
    """No image record (or registry manifest) for a reference."""


class BlobNotFoundError(ImageError, NotFoundError):
    """A blob named by digest is missing from the store, an archive or a registry."""


class DigestMismatchError(ImageError, InvalidArgumentError):
    """Content whose digest or size differs from its descriptor (corrupt or truncated)."""


class UnsupportedMediaTypeError(ImageError, InvalidArgumentError):
    """A manifest, config or layer media type podkit does not understand."""


class PlatformNotFoundError(ImageError, NotFoundError):
    """A multi-platform index without an entry for the requested platform."""


class UnsafeLayerError(ImageError, InvalidArgumentError):
    """A layer entry that would escape the snapshot (absolute, ``..``, through a symlink)."""


class ImageInUseError(ImageError, ConflictError):
    """A snapshot or rootfs that is still mounted or used by a container."""


class RegistryError(ImageError):
    """A registry answered with an error status, or could not be reached.

    ``status`` is the HTTP status (``None`` for connection errors and timeouts).
    """

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


class HostsConfigError(ImageError, InvalidArgumentError):
    """A registry hosts configuration (``hosts.toml``) that cannot be used; names file and key."""
