"""Pod volumes on the host: hostPath type checks and creation, emptyDir (dir and tmpfs), the
atomic-writer layout of configMap/secret files with modes and fsGroup, and their removal."""

from __future__ import annotations

import os
import socket
import stat
from pathlib import Path

import pytest

from podkit.errors import InvalidArgumentError
from podkit.kube import VolumePlan
from podkit.kube.hostside import (
    HostPathError,
    check_host_path,
    make_volumes,
    project_files,
    remove_volumes,
    secret_tmpfs_size,
)
from support import require_root


def _host(path: Path | str, kind: str) -> VolumePlan:
    return VolumePlan(name="vol", kind="hostPath", host_path=str(path), host_path_type=kind)


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.lstat().st_mode)


def test_directory_or_create_makes_parents_0755(tmp_path: Path) -> None:
    os.umask(0o077)
    try:
        made = check_host_path(_host(tmp_path / "a" / "b", "DirectoryOrCreate"))
    finally:
        os.umask(0o022)
    assert made == [tmp_path / "a" / "b", tmp_path / "a"]
    assert _mode(tmp_path / "a") == _mode(tmp_path / "a" / "b") == 0o755
    assert check_host_path(_host(tmp_path / "a" / "b", "DirectoryOrCreate")) == []
    assert check_host_path(_host(tmp_path / "a", "Directory")) == []


def test_file_or_create_needs_its_parent(tmp_path: Path) -> None:
    assert check_host_path(_host(tmp_path / "f", "FileOrCreate")) == [tmp_path / "f"]
    assert _mode(tmp_path / "f") == 0o644 and (tmp_path / "f").read_bytes() == b""
    (tmp_path / "f").write_text("kept")
    assert check_host_path(_host(tmp_path / "f", "FileOrCreate")) == []
    assert (tmp_path / "f").read_text() == "kept"
    with pytest.raises(HostPathError, match=f"volume 'vol': hostPath {tmp_path}/no/f "
                       rf"\(type FileOrCreate\): parent directory {tmp_path}/no does not exist"):
        check_host_path(_host(tmp_path / "no" / "f", "FileOrCreate"))
    assert not (tmp_path / "no").exists()


@pytest.mark.parametrize(("kind", "what"), [
    ("Directory", "a directory"), ("File", "a regular file"), ("Socket", "a UNIX socket"),
    ("CharDevice", "a character device"), ("BlockDevice", "a block device"),
    ("DirectoryOrCreate", "a directory"), ("FileOrCreate", "a regular file")])
def test_type_mismatch_names_volume_path_and_type(tmp_path: Path, kind: str, what: str) -> None:
    target = tmp_path / "d" if kind in ("File", "FileOrCreate", "CharDevice") else \
        tmp_path / "f"
    target.mkdir() if target.name == "d" else target.write_text("x")
    with pytest.raises(HostPathError) as info:
        check_host_path(_host(target, kind))
    assert str(info.value) == f"volume 'vol': hostPath {target} (type {kind}): not {what}"


def test_existing_special_files_pass(tmp_path: Path) -> None:
    with socket.socket(socket.AF_UNIX) as s:
        s.bind(str(tmp_path / "sock"))
        assert check_host_path(_host(tmp_path / "sock", "Socket")) == []
    assert check_host_path(_host("/dev/null", "CharDevice")) == []
    assert check_host_path(_host(tmp_path / "anything-missing", "")) == []
    require_root()
    os.mknod(tmp_path / "blk", stat.S_IFBLK | 0o600, os.makedev(7, 200))
    assert check_host_path(_host(tmp_path / "blk", "BlockDevice")) == []


def test_missing_unknown_and_relative(tmp_path: Path) -> None:
    for kind in ("Directory", "File", "Socket", "CharDevice", "BlockDevice"):
        with pytest.raises(HostPathError, match=f"type {kind}\\): does not exist"):
            check_host_path(_host(tmp_path / "missing", kind))
    with pytest.raises(HostPathError, match=r"\(type Dir\): unknown type \(want one of "
                       "Directory, DirectoryOrCreate, File"):
        check_host_path(_host(tmp_path, "Dir"))
    with pytest.raises(HostPathError, match="not an absolute path"):
        check_host_path(_host("rel/path", "Directory"))


def _cm(path: Path, files: tuple[tuple[str, bytes, int], ...],
        fs_group: int | None = None) -> VolumePlan:
    return VolumePlan(name="cfg", kind="configMap", host_path=str(path), files=files,
                      fs_group=fs_group)


def test_projected_files_atomic_writer_layout(tmp_path: Path) -> None:
    root = tmp_path / "cfg"
    project_files(_cm(root, (("app.conf", b"a=1\n", 0o644), ("keys/tls.key", b"k", 0o400))))
    data = root / "..data"
    first = os.readlink(data)
    assert data.is_symlink() and first.startswith("..") and (root / first).is_dir()
    assert os.readlink(root / "app.conf") == "..data/app.conf"
    assert os.readlink(root / "keys") == "..data/keys"
    assert (root / "app.conf").read_bytes() == b"a=1\n"
    assert _mode(root / "keys" / "tls.key") == 0o400 and _mode(root / first / "app.conf") == 0o644
    # an update swaps ..data in one rename; names no longer there go, the old dir too
    project_files(_cm(root, (("app.conf", b"a=2\n", 0o600),)))
    second = os.readlink(data)
    assert second != first and not (root / first).exists()
    assert (root / "app.conf").read_bytes() == b"a=2\n" and _mode(root / second / "app.conf") \
        == 0o600
    assert not (root / "keys").exists() and not (root / "keys").is_symlink()
    assert sorted(p.name for p in root.iterdir()) == sorted(["..data", second, "app.conf"])


def test_projected_files_fs_group(tmp_path: Path) -> None:
    require_root()
    root = tmp_path / "sec"
    project_files(_cm(root, (("a/token", b"t", 0o400),), fs_group=2000))
    real = root / os.readlink(root / "..data")
    token = real / "a" / "token"
    assert token.stat().st_gid == 2000 and _mode(token) == 0o440  # the group may read
    assert (real / "a").stat().st_gid == 2000 and _mode(real / "a") & stat.S_ISGID


@pytest.mark.parametrize("bad", ["/etc/passwd", "../x", "a/../../x", "..data/x", ""])
def test_projected_file_paths_stay_inside(tmp_path: Path, bad: str) -> None:
    with pytest.raises(InvalidArgumentError, match=f"volume 'cfg': file path '{bad}' must be"):
        project_files(_cm(tmp_path / "cfg", ((bad, b"x", 0o644),)))
    assert not (tmp_path / "cfg").exists() or not any((tmp_path / "cfg").iterdir())


def test_make_and_remove_volumes(tmp_path: Path) -> None:
    require_root()
    pod = tmp_path / "pod"
    host = tmp_path / "host"
    host.mkdir()
    (host / "keep").write_text("mine")
    vols = [VolumePlan(name="data", kind="emptyDir", host_path=str(pod / "data"), fs_group=3000),
            _cm(pod / "cfg", (("k", b"v", 0o644),)),
            _host(host, "Directory")]
    assert make_volumes(vols) == []
    assert _mode(pod / "data") == 0o2777 and (pod / "data").stat().st_gid == 3000
    (pod / "data" / "written").write_text("by the app")
    assert sorted(remove_volumes(vols)) == [str(pod / "cfg"), str(pod / "data")]
    assert not pod.exists() and (host / "keep").read_text() == "mine"
    assert remove_volumes(vols) == []  # idempotent


def test_make_volumes_undoes_on_failure(tmp_path: Path) -> None:
    pod = tmp_path / "pod"
    vols = [VolumePlan(name="data", kind="emptyDir", host_path=str(pod / "data")),
            _host(tmp_path / "new", "DirectoryOrCreate"),
            _host(tmp_path / "missing", "File")]
    with pytest.raises(HostPathError, match=r"volume 'vol'.*missing.*does not exist"):
        make_volumes(vols)
    assert not pod.exists() and not (tmp_path / "new").exists()


@pytest.mark.integration
def test_memory_empty_dir_is_a_sized_tmpfs(tmp_path: Path) -> None:
    require_root()
    vol = VolumePlan(name="mem", kind="emptyDir", host_path=str(tmp_path / "pod" / "mem"),
                     medium="Memory", size_limit=4 * 1024 * 1024)
    make_volumes([vol])
    path = tmp_path / "pod" / "mem"
    try:
        assert os.path.ismount(path)
        st = os.statvfs(path)
        assert st.f_blocks * st.f_frsize == 4 * 1024 * 1024
        mounts = [line.split() for line in Path("/proc/self/mounts").read_text().splitlines()]
        assert [m[2] for m in mounts if m[1] == str(path)] == ["tmpfs"]
    finally:
        removed = remove_volumes([vol])
    assert removed == [str(path)] and not os.path.ismount(path) and not path.exists()


def _secret(path: Path) -> VolumePlan:
    return VolumePlan(name="creds", kind="secret", host_path=str(path),
                      files=(("password", b"s3cr3t", 0o400), ("dir/token", b"t" * 5000, 0o440)))


def _mounted(path: Path) -> list[str]:
    """The filesystem types mounted at ``path`` (the mount table of this process)."""
    mounts = [line.split() for line in Path("/proc/self/mounts").read_text().splitlines()]
    return [m[2] for m in mounts if m[1] == str(path)]


def test_secret_tmpfs_size_holds_two_versions_and_a_mib() -> None:
    page = os.sysconf("SC_PAGE_SIZE")
    size = secret_tmpfs_size(_secret(Path("/x")))
    assert size % page == 0 and size - page < 2 * (6 + 5000) + (1 << 20) <= size
    assert secret_tmpfs_size(VolumePlan(name="e", kind="secret", host_path="/x")) == 1 << 20


@pytest.mark.integration
def test_secret_files_live_on_a_tmpfs(tmp_path: Path) -> None:
    require_root()
    path = tmp_path / "pod" / "creds"
    vol = _secret(path)
    make_volumes([vol])
    try:
        assert _mounted(path) == ["tmpfs"]
        st = os.statvfs(path)
        assert st.f_blocks * st.f_frsize == secret_tmpfs_size(vol)
        assert (path / "password").read_bytes() == b"s3cr3t"
        assert _mode(path / "..data" / "password") == 0o400
        assert _mode(path) == 0o755
    finally:
        removed = remove_volumes([vol])
    assert removed == [str(path)] and _mounted(path) == [] and not (tmp_path / "pod").exists()


@pytest.mark.integration
def test_a_failure_after_a_secret_unmounts_it(tmp_path: Path) -> None:
    require_root()
    path = tmp_path / "pod" / "creds"
    with pytest.raises(HostPathError, match=r"missing.*does not exist"):
        make_volumes([_secret(path), _host(tmp_path / "missing", "File")])
    assert _mounted(path) == [] and not (tmp_path / "pod").exists()


def test_remove_takes_the_kubelet_pod_dir_along(tmp_path: Path) -> None:
    pod = tmp_path / "demo_web_uid" / "volumes"
    vols = [VolumePlan(name=n, kind="emptyDir", host_path=str(pod / n)) for n in ("a", "b")]
    make_volumes(vols)
    remove_volumes(vols[:1])
    assert (pod / "b").is_dir()  # the pod dir stays while it holds another volume
    remove_volumes(vols)
    assert list(tmp_path.iterdir()) == []  # <pod>/volumes and <pod> gone; the root stays
