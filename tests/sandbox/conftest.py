"""Fixtures shared by the SandboxManager integration tests (helpers live in ``_pods``)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from ._pods import copy_rootfs, pod_bridge


@pytest.fixture(scope="module")
def rootfs(busybox_rootfs: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A private copy of the busybox rootfs for one test module (containers may write to it)."""
    return copy_rootfs(busybox_rootfs, tmp_path_factory.mktemp("pods") / "rootfs")


@pytest.fixture(scope="module")
def bridge() -> Iterator[None]:
    """Require scripts/isolated, runc and conmon; hold the test bridge for one test module."""
    yield from pod_bridge()
