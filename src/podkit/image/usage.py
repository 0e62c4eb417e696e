"""Disk usage of the image store, counted as ``du -x`` does: allocated bytes and inodes,
each inode once (hard links), never crossing into another filesystem.

Kubelet's image garbage collection compares these numbers with the filesystem's capacity, so
they must be what is really used, not the sum of the images' compressed sizes.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

import attrs

__all__ = ["DiskUsage", "disk_usage", "mountpoint_of"]


@attrs.frozen(slots=True)
class DiskUsage:
    """Bytes (allocated blocks) and inodes used, and the mount point of their filesystem."""

    bytes: int
    inodes: int
    mountpoint: str


def mountpoint_of(path: str | os.PathLike[str]) -> str:
    """The mount point of the filesystem holding ``path`` (which must exist)."""
    current = Path(os.path.realpath(path))
    while not os.path.ismount(current) and current != current.parent:
        current = current.parent
    return str(current)


def disk_usage(paths: Iterable[str | os.PathLike[str]], where: str | os.PathLike[str],
               ) -> DiskUsage:
    """What ``du -sx --block-size=1`` and ``du -sx --inodes`` report for ``paths`` together
    (the dirs themselves included, missing ones skipped); the mount point is ``where``'s."""
    seen: set[tuple[int, int]] = set()
    used = 0
    for top in paths:
        try:
            dev = os.lstat(top).st_dev
        except FileNotFoundError:
            continue
        for dirpath, dirnames, filenames in os.walk(top):
            keep = []
            for name in (os.curdir, *dirnames, *filenames):
                try:
                    st = os.lstat(os.path.join(dirpath, name))
                except FileNotFoundError:
                    continue  # removed while we walk (gc, a finished download)
                if st.st_dev != dev:
                    continue
                if name in dirnames:
                    keep.append(name)
                if (st.st_dev, st.st_ino) in seen:
                    continue
                seen.add((st.st_dev, st.st_ino))
                used += st.st_blocks * 512
            dirnames[:] = keep
    return DiskUsage(used, len(seen), mountpoint_of(where))
