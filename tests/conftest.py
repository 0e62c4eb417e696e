"""Shared test fixtures: real-part prerequisites, the busybox rootfs, the shared fixtures dir.

Integration tests need root and real binaries. Locally a missing prerequisite skips the test;
with ``PODKIT_REQUIRE_INTEGRATION=1`` (CI) it fails instead, so nothing is hidden.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import settings

import _leaks

REPO = Path(__file__).resolve().parents[1]
REQUIRE_INTEGRATION = os.environ.get("PODKIT_REQUIRE_INTEGRATION") == "1"
ISOLATED = os.environ.get("PODKIT_ISOLATED") == "1"
BUSYBOX = Path("/bin/busybox")

# CI replays the same examples every run (a property found false is fixed where it was found,
# not discovered by chance in a later CI run); locally every run explores new ones.
settings.register_profile("ci", derandomize=True, database=None)
if os.environ.get("CI") == "true":
    settings.load_profile("ci")


def require(condition: object, reason: str) -> None:
    """Skip (locally) or fail (CI) when a prerequisite of an integration test is missing."""
    if condition:
        return
    if REQUIRE_INTEGRATION:
        pytest.fail(f"missing prerequisite (PODKIT_REQUIRE_INTEGRATION=1): {reason}")
    pytest.skip(reason)


def require_root() -> None:
    require(os.geteuid() == 0, "needs root")


def require_isolated() -> None:
    """Network-changing tests run only inside the namespace made by scripts/isolated."""
    require_root()
    require(ISOLATED, "needs the private net+mount namespace of scripts/isolated (make test)")


def require_binary(name: str) -> str:
    path = shutil.which(name)
    require(path, f"{name} not installed")
    assert path is not None
    return path


def shared_dir() -> Path:
    """``../shared`` beside the checkout (fixtures and schemas); overridable by PODKIT_SHARED."""
    path = Path(os.environ.get("PODKIT_SHARED", REPO.parent / "shared"))
    if not path.is_dir():
        pytest.fail(f"shared fixtures dir {path} is missing")
    return path


@pytest.fixture(scope="session")
def shared() -> Path:
    return shared_dir()


def make_busybox_rootfs(dest: Path) -> Path:
    """A minimal rootfs: static busybox with its applets, /etc/passwd and /etc/group."""
    for d in ("bin", "sbin", "etc", "proc", "sys", "dev", "tmp", "root", "home/app", "var", "run"):
        (dest / d).mkdir(parents=True, exist_ok=True)
    shutil.copy2(BUSYBOX, dest / "bin" / "busybox")
    applets = subprocess.run(
        [str(BUSYBOX), "--list"], check=True, capture_output=True, text=True
    ).stdout.split()
    for applet in applets:
        link = dest / "bin" / applet
        if applet != "busybox" and not link.exists():
            link.symlink_to("busybox")
    (dest / "etc" / "passwd").write_text(
        "root:x:0:0:root:/root:/bin/sh\n"
        "app:x:1000:1000:app:/home/app:/bin/sh\n"
        "nobody:x:65534:65534:nobody:/nonexistent:/bin/false\n"
    )
    (dest / "etc" / "group").write_text(
        "root:x:0:\nwheel:x:10:app\napp:x:1000:\nextra:x:2000:app\nnogroup:x:65534:\n"
    )
    (dest / "tmp").chmod(0o1777)
    return dest


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
