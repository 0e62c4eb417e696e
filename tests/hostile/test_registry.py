"""Hostile registry answers (wrong sizes, digests, cut connections, bad manifests, statuses):
each pull fails with a typed ImageError naming the reference and digest, storing nothing."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from image.imagebuild import BuiltImage
from image.registries import FakeRegistry
from image.registry_faults import PROBES, run_probe, small_image
from support import require_isolated

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def img() -> BuiltImage:
    return small_image()


@pytest.fixture
def fake(img: BuiltImage) -> Iterator[FakeRegistry]:
    require_isolated()
    with FakeRegistry(img) as registry:
        yield registry


@pytest.mark.parametrize("probe", sorted(PROBES))
def test_registry_probe(probe: str, fake: FakeRegistry, img: BuiltImage, tmp_path: Path) -> None:
    run_probe(probe, fake, img, tmp_path)
