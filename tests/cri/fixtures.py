"""The CRI test fixtures (test images, the test bridge, a served harness), defined once and
registered by ``tests/cri/conftest.py`` and ``tests/hostile/conftest.py``."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from cri.helpers import BRIDGE, BUSYBOX, BUSYBOX_CONFIG, PAUSE, PAUSE_CONFIG, Harness
from image.imagebuild import Layer, build_image, write_layout
from support import require_binary, require_isolated

__all__ = ["bridge", "harness", "image_layouts"]


@pytest.fixture(scope="session")
def image_layouts(busybox_rootfs: Path, tmp_path_factory: pytest.TempPathFactory,
                  ) -> dict[str, Path]:
    """OCI layouts of the busybox and pause test images (one shared layer)."""
    layer = Layer().tree(busybox_rootfs).bytes()
    out = {}
    base = tmp_path_factory.mktemp("cri-images")
    for name, config in ((BUSYBOX, BUSYBOX_CONFIG), (PAUSE, PAUSE_CONFIG)):
        img = build_image([layer], ["gzip"], config)
        out[name] = write_layout(base / name.rsplit("/", 1)[1].replace(":", "-"),
                                 [(img.descriptor, None)], img.blobs)
    return out


@pytest.fixture(scope="module")
def bridge() -> Iterator[None]:
    """The test bridge, made up front (the bridge plugin never deletes it) and deleted after."""
    require_isolated()
    subprocess.run(["ip", "link", "add", BRIDGE, "type", "bridge"], check=False,
                   capture_output=True)
    yield
    subprocess.run(["ip", "link", "del", BRIDGE], check=False, capture_output=True)


@pytest.fixture(scope="module")
def harness(bridge: None, image_layouts: dict[str, Path],
            tmp_path_factory: pytest.TempPathFactory) -> Iterator[Harness]:
    """One server per test module (tests clean up their pods)."""
    require_isolated()
    require_binary("runc")
    require_binary("conmon")
    h = Harness(tmp_path_factory.mktemp("cri"), image_layouts)
    yield h
    h.close()
