"""podkit._linux: the libc calls raise OSError with the errno and the path they were about."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from podkit import _linux
from support import require_root

PROC_SUPER_MAGIC = 0x9FA0
TMPFS_MAGIC = 0x01021994


def test_fs_type_names_the_file_system() -> None:
    assert _linux.fs_type("/proc") == PROC_SUPER_MAGIC
    with pytest.raises(OSError) as e:
        _linux.fs_type("/no/such/path")
    assert e.value.errno == errno.ENOENT and e.value.filename == "/no/such/path"


def test_umount_of_what_is_no_mount_point_says_so(tmp_path: Path) -> None:
    require_root()
    with pytest.raises(OSError) as e:
        _linux.umount(tmp_path)
    assert e.value.errno == errno.EINVAL and e.value.filename == str(tmp_path)
    assert "umount" in str(e.value)


def test_mount_and_umount_a_tmpfs(tmp_path: Path) -> None:
    require_root()
    _linux.mount("t", tmp_path, "tmpfs", _linux.MS_NOSUID, "size=1m")
    try:
        assert os.path.ismount(tmp_path) and _linux.fs_type(tmp_path) == TMPFS_MAGIC
    finally:
        _linux.umount(tmp_path, _linux.MNT_DETACH)
    assert not os.path.ismount(tmp_path)


def test_subreaper_round_trip() -> None:
    was = _linux.is_child_subreaper()
    _linux.set_child_subreaper(True)
    try:
        assert _linux.is_child_subreaper()
    finally:
        _linux.set_child_subreaper(was)
