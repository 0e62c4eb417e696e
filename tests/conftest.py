"""Session fixtures: the hypothesis profile, the busybox rootfs, the shared fixtures dir, the
leak check. Helpers that test modules import live in ``support.py`` (never import conftest).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import settings

import _leaks
from support import BUSYBOX, make_busybox_rootfs, require, shared_dir

# CI replays the same examples every run (a property found false is fixed where it was found,
# not discovered by chance in a later CI run); locally every run explores new ones.
settings.register_profile("ci", derandomize=True, database=None)
if os.environ.get("CI") == "true":
    settings.load_profile("ci")


@pytest.fixture(scope="session")
def shared() -> Path:
    return shared_dir()


@pytest.fixture(scope="session")
def busybox_rootfs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A session-wide busybox rootfs; treat it as read-only (copy it to modify)."""
    require(BUSYBOX.exists(), "busybox-static not installed (/bin/busybox)")
    yield make_busybox_rootfs(tmp_path_factory.mktemp("busybox") / "rootfs")


@pytest.fixture(scope="session", autouse=True)
def _no_leaks() -> Iterator[None]:
    """Fail the session if tests left a container, netns, link, IPAM entry, cgroup or mount.

    ``PODKIT_LEAK_CHECK=0`` turns it off (e.g. while other sessions share the host).
    """
    if os.environ.get("PODKIT_LEAK_CHECK") == "0":
        yield
        return
    before = _leaks.snapshot()
    yield
    leaked = _leaks.leaked_since(before)
    if leaked:
        pytest.fail(
            "resources leaked by the test session:\n  " + "\n  ".join(leaked), pytrace=False
        )
