"""What the cgroup driver integration tests (manager and CRI) share: the systemd requirement,
a container's limits read from its cgroup files under either driver, and systemd's units.

systemd-driver tests need systemd as PID 1 (the cgroup-v2 guest's ``--systemd`` pass): they
skip without it, unless ``PODKIT_REQUIRE_SYSTEMD=1`` (set by that pass) makes it a failure.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import uuid
from pathlib import Path

import pytest

from podkit import cgroups

REQUIRE_SYSTEMD = os.environ.get("PODKIT_REQUIRE_SYSTEMD") == "1"
MEMORY_LIMIT = 64 << 20
CPU_QUOTA, CPU_PERIOD = 50_000, 100_000
BUSY = ["sh", "-c", "i=0; while [ $i -lt 20000 ]; do i=$((i+1)); done; exec sleep 600"]


def require_systemd() -> None:
    """Skip (fail with ``PODKIT_REQUIRE_SYSTEMD=1``) unless systemd is PID 1 with systemctl."""
    if cgroups.systemd_running() and shutil.which("systemctl"):
        return
    reason = "needs systemd as PID 1 (scripts/vm run --systemd; make test-cgroupv2 " \
             "CGROUPV2_VM_ARGS=--systemd)"
    if REQUIRE_SYSTEMD:
        pytest.fail(f"missing prerequisite (PODKIT_REQUIRE_SYSTEMD=1): {reason}")
    pytest.skip(reason)


def systemctl(*args: str) -> str:
    """``systemctl args`` (no pager); its stdout, whatever its exit code."""
    return subprocess.run(["systemctl", "--no-pager", *args], capture_output=True, text=True,
                          timeout=60, check=False).stdout


def podkit_units(id: str = "") -> list[str]:
    """The ``cri-podkit-<id>*`` units systemd has loaded, in any state."""
    out = systemctl("list-units", "--all", "--plain", "--no-legend", "--full",
                    f"cri-podkit-{id}*")
    return [line.split()[0] for line in out.splitlines() if line.strip()]


def stop_slices(*names: str) -> None:
    """Stop the parent slices a test made systemd create (kubelet would own them)."""
    if names:
        systemctl("stop", *names)


def fresh_parent() -> tuple[str, str]:
    """A fresh cgroupfs-form pod parent, and the top slice the systemd driver makes of it."""
    tag = f"pk_cgd{uuid.uuid4().hex[:8]}"
    return f"/{tag}/pod1", f"{tag}.slice"


def limit_dir(cgroups_path: str, controller: str) -> Path:
    """The directory holding a container's ``controller`` limits: its cgroup, or crun's
    ``container`` child under the systemd driver (crun leaves the scope itself at ``max``)."""
    d = cgroups.cgroup_dir(controller, cgroups_path)
    inner = d / "container"
    return inner if inner.is_dir() else d


def limits(cgroups_path: str) -> tuple[int, tuple[int, int]]:
    """(memory limit, (cpu quota, period)) from the cgroup files, v2 or v1."""
    mem, cpu = limit_dir(cgroups_path, "memory"), limit_dir(cgroups_path, "cpu")
    if (mem / "memory.max").exists():
        quota, period = (cpu / "cpu.max").read_text().split()
        return int((mem / "memory.max").read_text()), (int(quota), int(period))
    return (int((mem / "memory.limit_in_bytes").read_text()),
            (int((cpu / "cpu.cfs_quota_us").read_text()),
             int((cpu / "cpu.cfs_period_us").read_text())))


def remove_parent_dirs(parent: str, root: str = "/sys/fs/cgroup") -> None:
    """rmdir a cgroupfs parent a test gave (runtimes leave parents), deepest first, in every
    hierarchy (v1's named ``systemd`` one too)."""
    tops = [root] if os.path.exists(os.path.join(root, "cgroup.procs")) else [
        str(p) for p in sorted(Path(root).iterdir())
        if not p.is_symlink() and (p / "cgroup.procs").exists()]
    elements = [e for e in parent.split("/") if e]
    for top in tops:
        for depth in range(len(elements), 0, -1):
            d = Path(top, *elements[:depth])
            if d.is_dir():
                with contextlib.suppress(OSError):  # in use: the leftovers check says so
                    d.rmdir()
