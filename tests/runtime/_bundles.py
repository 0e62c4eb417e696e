"""Shared helper for the tests that run busybox under real runtimes: the bundle config."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

DEFAULT_ENV = ("PATH=/bin:/sbin", "TERM=xterm")


def busybox_config(
    rootfs: Path, args: list[str], cgroup: str, terminal: bool = False, *,
    env: Sequence[str] = DEFAULT_ENV, cwd: str = "/", hostname: str = "pk",
    mounts: Sequence[dict[str, object]] = (), namespaces: Sequence[dict[str, str]] = (),
) -> dict[str, object]:
    """The ``runc spec`` default config, pointed at the shared read-only busybox rootfs.

    ``mounts`` and ``namespaces`` are added after the default ones (proc, dev, devpts; pid,
    ipc, uts, mount).
    """
    return {
        "ociVersion": "1.0.2",
        "process": {
            "terminal": terminal,
            "user": {"uid": 0, "gid": 0},
            "args": args,
            "env": list(env),
            "cwd": cwd,
            "noNewPrivileges": True,
        },
        "root": {"path": os.fspath(rootfs), "readonly": True},
        "hostname": hostname,
        "mounts": [
            {"destination": "/proc", "type": "proc", "source": "proc"},
            {"destination": "/dev", "type": "tmpfs", "source": "tmpfs",
             "options": ["nosuid", "strictatime", "mode=755", "size=65536k"]},
            {"destination": "/dev/pts", "type": "devpts", "source": "devpts",
             "options": ["nosuid", "noexec", "newinstance", "ptmxmode=0666", "mode=0620"]},
            *mounts,
        ],
        "linux": {
            "cgroupsPath": cgroup,
            "resources": {"devices": [{"allow": False, "access": "rwm"}]},
            "namespaces": [*({"type": t} for t in ("pid", "ipc", "uts", "mount")), *namespaces],
        },
    }
