"""Helpers shared by test modules: real-part prerequisites, the busybox rootfs, the repo paths.

Integration tests need root and real binaries. Locally a missing prerequisite skips the test;
with ``PODKIT_REQUIRE_INTEGRATION=1`` (CI) it fails instead, so nothing is hidden.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
REQUIRE_INTEGRATION = os.environ.get("PODKIT_REQUIRE_INTEGRATION") == "1"
ISOLATED = os.environ.get("PODKIT_ISOLATED") == "1"
BUSYBOX = Path("/bin/busybox")
_SBIN_PATH = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin"}


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


@contextlib.contextmanager
def idmap_dir(prefix: str) -> Iterator[Path]:
    """A new directory every user may search (a pod's root in a user namespace must reach its
    rootfs; pytest's temp dirs are root's only), on a file system that takes ID-mapped mounts:
    under /var/tmp, or, where that cannot map (the cgroup-v2 guest: tmpfs before Linux 6.3), an
    ext4 image mounted there (``PODKIT_TEST_IDMAP_LOOP=1`` forces it). Removed afterwards,
    whatever is still mounted inside unmounted first."""
    from podkit import idmap

    d = Path(tempfile.mkdtemp(prefix=prefix, dir="/var/tmp"))
    d.chmod(0o711)
    image = d.with_name(d.name + ".ext4")
    try:
        if idmap.supported(d) or os.environ.get("PODKIT_TEST_IDMAP_LOOP") == "1":
            require_root()
            with open(image, "wb") as f:
                f.truncate(2 << 30)  # sparse
            subprocess.run(["mkfs.ext4", "-q", "-F", str(image)], check=True, env=_SBIN_PATH)
            kernel = Path("/proc/sys/kernel/modprobe")  # the helper the kernel loads modules by
            helper = kernel.read_text().strip() if kernel.exists() else ""
            for module in ("loop", "ext4") if helper and os.path.exists(helper) else ():
                subprocess.run([helper, module], capture_output=True, env=_SBIN_PATH)
            subprocess.run(["mount", "-t", "ext4", "-o", "loop", str(image), str(d)], check=True,
                           env=_SBIN_PATH)
            d.chmod(0o711)
            require(idmap.supported(d) == "", f"ID-mapped mounts on ext4: {idmap.supported(d)}")
        yield d
    finally:
        idmap.unmount_under(d)
        shutil.rmtree(d, ignore_errors=True)
        image.unlink(missing_ok=True)


def walk(top: Path) -> list[Path]:
    """Every path below ``top``, as ``rglob("*")`` but passing over a directory that goes while
    it is read (a manager's trash thread empties and removes ``.trash`` in the background)."""
    return [Path(d, n) for d, dirs, files in os.walk(top) for n in (*dirs, *files)]
