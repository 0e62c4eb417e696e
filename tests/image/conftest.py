"""Fixtures for the image tests: sample images, a real docker-registry, a fake registry.

The registries live in ``registries.py``; ``registry`` is imported from there to be a fixture here.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from image.imagebuild import BuiltImage, build_image, sample_layers
from image.registries import FakeRegistry, registry, started  # noqa: F401 - fixtures
from podkit.image import ImageStore
from support import require_isolated

SAMPLE_CONFIG = {
    "Env": ["PATH=/usr/bin:/bin", "GREETING=hi"],
    "Cmd": ["/app/hello"],
    "WorkingDir": "/data",
    "User": "app",
    "ExposedPorts": {"80/tcp": {}},
    "Volumes": {"/data": {}},
    "Labels": {"org.example": "podkit"},
    "StopSignal": "SIGTERM",
}


@pytest.fixture(scope="session")
def sample_layers_raw(busybox_rootfs: Path) -> list[bytes]:
    """The uncompressed tars of the three sample layers."""
    return [layer.bytes() for layer in sample_layers(busybox_rootfs)]


@pytest.fixture(scope="session")
def sample(sample_layers_raw: list[bytes]) -> BuiltImage:
    """busybox + deletions, opaque dir, links, devices, xattrs: gzip, plain and gzip layers."""
    return build_image(sample_layers_raw, ["gzip", "", "gzip"], SAMPLE_CONFIG)


@pytest.fixture
def store(tmp_path: Path) -> ImageStore:
    return ImageStore(tmp_path / "state")


@pytest.fixture
def fake_registry(sample: BuiltImage) -> Iterator[FakeRegistry]:
    """A :class:`FakeRegistry` serving the sample image as ``test/app:v1``."""
    require_isolated()
    with FakeRegistry(sample) as fake:
        yield fake
