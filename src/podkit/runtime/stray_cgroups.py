"""A workaround for crun on hybrid cgroup hosts: remove the plain directory it leaves behind.

crun 1.8.1 on a hybrid host whose cgroup2 mount was hidden (as ``scripts/isolated`` does)
creates ``/sys/fs/cgroup/unified/<cgroupsPath>`` on the cgroup tmpfs, with a ``cgroup.procs``
*file*, and never removes it. ``Runc`` calls ``remove_stray_unified_dir`` after a container is
deleted or its create failed; nothing but such a directory is ever touched.
"""

from __future__ import annotations

import contextlib
import os

from podkit import _linux
from podkit.runtime.bundle import Bundle

__all__ = ["cgroups_path", "remove_stray_unified_dir", "stray_dirs_possible"]

UNIFIED = "/sys/fs/cgroup/unified"
TMPFS_MAGIC = 0x01021994


def cgroups_path(b: Bundle) -> str | None:
    """The bundle's ``linux.cgroupsPath`` (``None`` when it sets none)."""
    return b.spec.linux.cgroups_path if b.spec.linux is not None else None


def remove_stray_unified_dir(cgroups_path: str | None) -> None:
    """Remove ``/sys/fs/cgroup/unified/<path>`` when it is a plain tmpfs dir, not a cgroup.

    Only a directory on tmpfs holding nothing but ``cgroup.procs`` is removed; a systemd-style
    path (``slice:prefix:name``) or one that climbs up is ignored.
    """
    if not cgroups_path or ":" in cgroups_path:
        return
    rel = cgroups_path.strip("/")
    if not rel or ".." in rel.split("/"):
        return
    path = os.path.join(UNIFIED, rel)
    if not os.path.isdir(path):
        return
    try:
        if _linux.fs_type(path) != TMPFS_MAGIC or set(os.listdir(path)) - {"cgroup.procs"}:
            return
        with contextlib.suppress(FileNotFoundError):
            os.unlink(os.path.join(path, "cgroup.procs"))
        os.rmdir(path)
    except OSError:
        return


def stray_dirs_possible() -> bool:
    """Whether ``UNIFIED`` may hold a stray directory: a tmpfs (not cgroup2) with entries.

    Lets ``delete`` skip the ``state`` call that finds a foreign container's cgroupsPath
    when there is nothing ``remove_stray_unified_dir`` could remove.
    """
    try:
        if _linux.fs_type(UNIFIED) != TMPFS_MAGIC:
            return False
        with os.scandir(UNIFIED) as entries:
            return any(True for _ in entries)
    except OSError:
        return False
