"""``podkit.image.usage``: disk usage counted as ``du -sx`` counts it (allocated blocks, each
inode once, no other filesystem), and the store's ``usage()``."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from podkit.image import DiskUsage, ImageStore
from podkit.image.usage import disk_usage, mountpoint_of
from support import require_isolated


def _du(paths: list[Path], *flags: str) -> int:
    out = subprocess.run(["du", "-sxc", *flags, *map(str, paths)], check=True,
                         capture_output=True, text=True).stdout
    return int(out.splitlines()[-1].split()[0])


def _tree(root: Path) -> None:
    (root / "a" / "b").mkdir(parents=True)
    (root / "a" / "big").write_bytes(os.urandom(300_000))
    (root / "a" / "small").write_text("x")
    os.link(root / "a" / "big", root / "a" / "b" / "big-link")  # counted once
    (root / "a" / "sym").symlink_to("big")
    (root / "empty").touch()


def test_like_du_with_hard_links_across_paths(tmp_path: Path) -> None:
    one, two = tmp_path / "one", tmp_path / "two"
    _tree(one)
    two.mkdir()
    os.link(one / "a" / "big", two / "same-inode")  # a link from another top dir: once too
    (two / "own").write_bytes(b"y" * 5000)
    paths = [one, two, tmp_path / "missing"]
    got = disk_usage(paths, tmp_path)
    present = [one, two]
    assert got.bytes == _du(present, "--block-size=1")
    assert got.inodes == _du(present, "--inodes")
    assert got.mountpoint == mountpoint_of(tmp_path) and os.path.ismount(got.mountpoint)
    assert disk_usage([tmp_path / "missing"], tmp_path) == DiskUsage(0, 0, got.mountpoint)


def test_other_filesystems_are_not_counted(tmp_path: Path) -> None:
    require_isolated()
    _tree(tmp_path / "store")
    inner = tmp_path / "store" / "mnt"
    inner.mkdir()
    before = disk_usage([tmp_path / "store"], tmp_path)
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(inner)], check=True)
    try:
        (inner / "on-tmpfs").write_bytes(b"z" * 100_000)
        after = disk_usage([tmp_path / "store"], tmp_path)
        assert after.bytes == _du([tmp_path / "store"], "--block-size=1")
        assert after.inodes == _du([tmp_path / "store"], "--inodes")
        # the mount point is now the tmpfs root: neither it nor what it holds counts
        assert after.inodes == before.inodes - 1 and after.bytes < before.bytes + 100_000
        assert mountpoint_of(inner / "on-tmpfs") == str(inner)
    finally:
        subprocess.run(["umount", str(inner)], check=True)


def test_store_usage_counts_content_and_snapshots_only(tmp_path: Path) -> None:
    store = ImageStore(tmp_path)
    empty = store.usage()
    digest = store.put_blob(b"q" * 200_000)
    (store.root / "snapshots" / "abc").mkdir()
    (store.root / "snapshots" / "abc" / "f").write_bytes(b"s" * 10_000)
    (store.root / "containers" / "c1").mkdir()
    (store.root / "containers" / "c1" / "upper").write_bytes(b"c" * 500_000)  # not images'
    got = store.usage()
    dirs = [store.root / d for d in ("blobs", "ingest", "snapshots")]
    assert got.bytes == _du(dirs, "--block-size=1") and got.inodes == _du(dirs, "--inodes")
    assert got.bytes - empty.bytes >= 200_000 + 10_000
    assert got.bytes - empty.bytes < 500_000 and got.inodes == empty.inodes + 3
    assert store.has_blob(digest)


@pytest.mark.parametrize("path", ["/", "/proc/self"])
def test_mountpoint_of(path: str) -> None:
    assert mountpoint_of(path) == ("/" if path == "/" else "/proc")
