"""Fixtures of the runtime tests (helpers live in plain modules: ``_bundles``, ``_fds``...)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from support import require_binary, require_isolated, require_root

from ._conmon_env import Env


@pytest.fixture(params=["runc", "crun"])
def env(request: pytest.FixtureRequest, tmp_path: Path, busybox_rootfs: Path) -> Iterator[Env]:
    require_root()
    require_binary("conmon")
    if request.param == "crun":
        require_isolated()  # crun refuses hybrid cgroups outside scripts/isolated
    require_binary(request.param)
    e = Env(request.param, tmp_path, busybox_rootfs)
    yield e
    assert e.cleanup() == []
