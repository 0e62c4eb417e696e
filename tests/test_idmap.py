"""podkit.idmap: ID maps (pure), user namespaces made by a holder process, ID-mapped mounts.

The integration tests make real user namespaces (util-linux ``unshare``) and real ID-mapped
mounts on this host's file systems (ext4 under ``/var/tmp``, tmpfs), inside scripts/isolated.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from podkit import idmap
from support import require_binary, require_isolated

R = idmap.IDRange


def test_ranges_map_and_print() -> None:
    ids = idmap.IDMap.single(100000, 65536)
    assert (ids.host_uid(0), ids.host_uid(65535), ids.host_uid(65536)) == (100000, 165535, None)
    assert ids.host_gid(-1) is None and ids.root == (100000, 100000)
    assert ids.uid_map() == ids.gid_map() == "0 100000 65536\n"
    assert ids.describe() == "uids 0 100000 65536; gids 0 100000 65536"
    assert idmap.IDMap([R(container_id=1, host_id=5, size=1)], []).root is None


def test_coalesce_joins_only_ranges_that_continue_each_other() -> None:
    a, b = R(container_id=0, host_id=100, size=10), R(container_id=10, host_id=110, size=5)
    assert idmap.coalesce([b, a]) == (R(container_id=0, host_id=100, size=15),)
    elsewhere = R(container_id=10, host_id=500, size=5)  # contiguous inside, not outside
    assert idmap.coalesce([a, elsewhere]) == (a, elsewhere)
    overlap = R(container_id=5, host_id=105, size=10)
    assert idmap.coalesce([a, overlap]) == (a, overlap)


def test_unreachable_names_the_directory_a_user_may_not_search() -> None:
    top = Path(tempfile.mkdtemp(prefix="podkit-idmap-", dir="/var/tmp"))  # not pytest's: 0700
    try:
        inner = top / "dir" / "inner"
        inner.mkdir(parents=True)
        top.chmod(0o711)
        (top / "dir").chmod(0o700)
        assert idmap.unreachable(inner, 2**31, 2**31) == (
            f"{top / 'dir'} (mode 0700, owner {os.getuid()}:{os.getgid()}) is not searchable "
            f"by uid {2**31} gid {2**31}")
        (top / "dir").chmod(0o710)  # its group may search it
        assert idmap.unreachable(inner, 2**31, os.getgid()) == ""
        assert idmap.unreachable(inner, 2**31, 2**31) != ""
        (top / "dir").chmod(0o711)
        assert idmap.unreachable(inner, 2**31, 2**31) == ""
        assert "No such file" in idmap.unreachable(top / "gone" / "x", 0, 0)
    finally:
        shutil.rmtree(top)


@pytest.fixture
def base() -> Iterator[Path]:
    """A directory on the host's own file system (ext4), not on pytest's temp dirs."""
    require_isolated()
    require_binary("unshare")
    d = Path(tempfile.mkdtemp(prefix="podkit-idmap-", dir="/var/tmp"))
    d.chmod(0o711)  # the users of the tests' namespaces pass through
    try:
        yield d
    finally:
        idmap.unmount_under(d)
        shutil.rmtree(d, ignore_errors=True)


@pytest.mark.integration
def test_holder_makes_a_mapped_user_namespace_owning_a_new_netns() -> None:
    require_isolated()
    ids = idmap.IDMap.single(200000, 1000)
    with idmap.Holder(ids, also=("net",)) as holder:
        assert Path(f"/proc/{holder.pid}/uid_map").read_text().split() == ["0", "200000", "1000"]
        assert Path(f"/proc/{holder.pid}/gid_map").read_text().split() == ["0", "200000", "1000"]
        assert os.readlink(holder.path("net")) != os.readlink("/proc/self/ns/net")
        net = os.open(holder.path("net"), os.O_RDONLY)
        user = os.readlink(holder.path("user"))
        pid = holder.pid
    try:
        owner = idmap.owner(f"/proc/self/fd/{net}")  # the netns outlives the holder
        try:
            assert os.readlink(f"/proc/self/fd/{owner}") == user
        finally:
            os.close(owner)
    finally:
        os.close(net)
    assert not Path(f"/proc/{pid}").exists()  # ended and reaped


@pytest.mark.integration
def test_holder_refuses_maps_the_kernel_refuses() -> None:
    require_isolated()
    overlapping = idmap.IDMap([R(container_id=0, host_id=300000, size=10),
                               R(container_id=5, host_id=400000, size=10)],
                              [R(container_id=0, host_id=300000, size=10)])
    with pytest.raises(idmap.IDMapError, match=r"write uid_map '0 300000 10\\n5 400000 10'"):
        idmap.Holder(overlapping)
    with pytest.raises(ValueError, match="namespace kinds"):
        idmap.Holder(idmap.IDMap.single(300000, 1), also=("time",))


@pytest.mark.integration
def test_open_user_namespace_refuses_other_namespaces() -> None:
    require_isolated()
    with pytest.raises(idmap.IDMapError, match="is not a user namespace"):
        idmap.open_user_namespace("/proc/self/ns/net")
    fd = idmap.open_user_namespace("/proc/self/ns/user")
    os.close(fd)
    with pytest.raises(idmap.IDMapError, match="open namespace /nonexistent"):
        idmap.owner("/nonexistent")


def _userns(ids: idmap.IDMap) -> int:
    with idmap.Holder(ids) as holder:
        return os.open(holder.path("user"), os.O_RDONLY | os.O_CLOEXEC)


@pytest.mark.integration
def test_idmapped_mount_shifts_owners_both_ways(base: Path) -> None:
    src, view = base / "src", base / "view"
    src.mkdir()
    view.mkdir()
    (src / "root-file").write_text("x")
    (src / "user-file").write_text("y")
    os.chown(src / "user-file", 1000, 1000)
    fd = _userns(idmap.IDMap.single(500000, 65536))
    try:
        idmap.mount_idmapped(src, view, fd)
    finally:
        os.close(fd)
    try:
        assert (view / "root-file").stat().st_uid == 500000
        assert (view / "user-file").stat().st_gid == 501000
        assert idmap.mounts_under(base) == [str(view)]
        # a write by the namespace's root lands on disk as root's; by another ID, as its
        subprocess.run(["setpriv", "--reuid=500000", "--regid=500000", "--clear-groups",
                        "sh", "-c", f"echo z > {view}/new && mkdir {view}/d"], check=True)
        assert (src / "new").stat().st_uid == 0 and (src / "d").stat().st_gid == 0
    finally:
        idmap.unmount_under(base)
    assert idmap.mounts_under(base) == [] and (src / "new").exists()


@pytest.mark.integration
def test_a_view_gets_later_mounts_of_its_source_and_its_unmount_spares_them(
        base: Path) -> None:
    """A view is a slave of its source: a volume's submounts made after the container reach
    it (HOST_TO_CONTAINER), and tearing the view down never unmounts the source's."""
    src, view = base / "src", base / "view"
    (src / "sub").mkdir(parents=True)
    view.mkdir()
    subprocess.run(["mount", "--bind", str(src), str(src)], check=True)
    subprocess.run(["mount", "--make-shared", str(src)], check=True)
    try:
        fd = _userns(idmap.IDMap.single(500000, 10))
        try:
            idmap.mount_idmapped(src, view, fd)
        finally:
            os.close(fd)
        subprocess.run(["mount", "-t", "tmpfs", "late", str(src / "sub")], check=True)
        assert str(view / "sub") in idmap.mounts_under(view)
        idmap.unmount_under(view)
        assert idmap.mounts_under(view) == []
        assert str(src / "sub") in idmap.mounts_under(src)  # still the source's
    finally:
        idmap.unmount_under(base)


@pytest.mark.integration
def test_idmapped_mount_of_a_file_and_of_what_cannot_map(base: Path) -> None:
    (base / "f").write_text("f")
    (base / "view-f").touch()
    fd = _userns(idmap.IDMap.single(500000, 10))
    try:
        idmap.mount_idmapped(base / "f", base / "view-f", fd)
        assert (base / "view-f").stat().st_uid == 500000
        (base / "view-proc").mkdir()
        with pytest.raises(idmap.IDMapError, match=r"ID-map the mount of /proc: its file system "
                                                   r"\(0x9fa0\) does not support"):
            idmap.mount_idmapped("/proc", base / "view-proc", fd)
        with pytest.raises(idmap.IDMapError, match="clone the mount at /nonexistent"):
            idmap.mount_idmapped("/nonexistent", base / "view-proc", fd)
    finally:
        os.close(fd)
        idmap.unmount_under(base)
    assert idmap.mounts_under(base) == []


@pytest.mark.integration
def test_supported_answers_per_file_system(base: Path) -> None:
    assert idmap.supported(base) == ""  # ext4
    assert idmap.supported("/dev/shm") == ""  # tmpfs (Linux >= 6.3)
    assert "does not support ID-mapped mounts" in idmap.supported("/proc")
    assert "No such file" in idmap.supported(base / "missing")
    assert idmap.mounts_under(base) == []  # the probe's detached mount is gone


def test_mounts_under_lists_deepest_first(tmp_path: Path) -> None:
    assert idmap.mounts_under(tmp_path) == []
    assert "/proc" in idmap.mounts_under("/proc")
    deep = idmap.mounts_under("/")
    assert deep[-1] == "/" and deep.index("/proc") < len(deep) - 1
