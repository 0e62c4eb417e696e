"""Bundle: atomic config.json, rootfs as root.path, load, remove."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from podkit import oci
from podkit.errors import ConflictError, InvalidArgumentError, NotFoundError
from podkit.runtime import Bundle


def base_spec() -> oci.Spec:
    return oci.Spec.from_dict({"ociVersion": "1.0.2", "process": {"cwd": "/", "args": ["sh"]}})


def test_create_with_external_rootfs(tmp_path: Path) -> None:
    rootfs = tmp_path / "somewhere" / "rfs"
    rootfs.mkdir(parents=True)
    s = base_spec()
    b = Bundle.create(tmp_path / "b", s, rootfs=rootfs)
    assert b.path == tmp_path / "b"
    assert b.config_path == tmp_path / "b" / "config.json"
    data = json.loads(b.config_path.read_text())
    assert data["root"] == {"path": str(rootfs)}
    assert s.root is None  # the caller's spec is not modified
    assert b.rootfs == rootfs
    assert oct(b.config_path.stat().st_mode & 0o777) == oct(0o600)
    assert [p.name for p in b.path.iterdir()] == ["config.json"]  # no temp files left


def test_rootfs_inside_bundle_is_relative(tmp_path: Path) -> None:
    (tmp_path / "b" / "rootfs").mkdir(parents=True)
    b = Bundle.create(tmp_path / "b", base_spec(), rootfs=tmp_path / "b" / "rootfs")
    assert json.loads(b.config_path.read_text())["root"]["path"] == "rootfs"


def test_load_round_trip(tmp_path: Path) -> None:
    (tmp_path / "r").mkdir()
    b = Bundle.create(tmp_path / "b", base_spec(), rootfs=tmp_path / "r")
    again = Bundle.load(tmp_path / "b")
    assert again.spec == b.spec
    with pytest.raises(NotFoundError, match=r"no config\.json"):
        Bundle.load(tmp_path / "nope")


def test_bundle_is_a_path(tmp_path: Path) -> None:
    (tmp_path / "r").mkdir()
    b = Bundle.create(tmp_path / "b", base_spec(), rootfs=tmp_path / "r")
    assert os.fspath(b) == str(tmp_path / "b")
    assert Path(b) / "config.json" == b.config_path


def test_missing_rootfs_refused_and_nothing_written(tmp_path: Path) -> None:
    with pytest.raises(InvalidArgumentError, match="is not a directory"):
        Bundle.create(tmp_path / "b", base_spec(), rootfs=tmp_path / "missing")
    assert not (tmp_path / "b").exists()
    with pytest.raises(InvalidArgumentError, match=r"no root\.path"):
        Bundle.create(tmp_path / "b", base_spec())


def test_remove_keeps_external_rootfs(tmp_path: Path) -> None:
    rootfs = tmp_path / "r"
    rootfs.mkdir()
    (rootfs / "keep").write_text("x")
    b = Bundle.create(tmp_path / "b", base_spec(), rootfs=rootfs)
    b.remove()
    assert not b.path.exists()
    assert (rootfs / "keep").exists()
    b.remove()  # idempotent


@pytest.mark.integration
def test_remove_refuses_mount_points(tmp_path: Path) -> None:
    import subprocess

    from support import require_isolated

    require_isolated()
    (tmp_path / "b" / "rootfs").mkdir(parents=True)
    b = Bundle.create(tmp_path / "b", base_spec(), rootfs=tmp_path / "b" / "rootfs")
    subprocess.run(["mount", "-t", "tmpfs", "pk-rt-test", str(tmp_path / "b" / "rootfs")],
                   check=True)
    try:
        with pytest.raises(ConflictError, match="mount point"):
            b.remove()
        assert b.config_path.exists()
    finally:
        subprocess.run(["umount", str(tmp_path / "b" / "rootfs")], check=True)
    b.remove()
    assert not b.path.exists()


def mode_of(path: Path) -> int:
    return path.stat().st_mode & 0o777


def test_bundle_dir_is_private_and_config_0600(tmp_path: Path) -> None:
    (tmp_path / "r").mkdir()
    shared = tmp_path / "existing"
    shared.mkdir(mode=0o755)
    os.chmod(shared, 0o755)
    for where in (tmp_path / "new" / "b", shared):
        b = Bundle.create(where, base_spec(), rootfs=tmp_path / "r")
        assert (oct(mode_of(b.path)), oct(mode_of(b.config_path))) == (oct(0o700), oct(0o600))
    assert oct(mode_of(tmp_path / "new")) != oct(0o700)  # parents keep the default mode


def test_bundle_dir_of_a_user_namespace_is_0710_group_root_of_the_container(
    tmp_path: Path,
) -> None:
    if os.geteuid() != 0:
        pytest.skip("chown to another group needs root")
    (tmp_path / "r").mkdir()
    spec = base_spec()
    spec.linux = oci.codec.structure({
        "namespaces": [{"type": "user"}, {"type": "mount"}],
        "uidMappings": [{"containerID": 0, "hostID": 100000, "size": 65536}],
        "gidMappings": [{"containerID": 0, "hostID": 200000, "size": 65536}],
    }, oci.Linux)
    b = Bundle.create(tmp_path / "b", spec, rootfs=tmp_path / "r")
    assert oct(mode_of(b.path)) == oct(0o710)
    assert b.path.stat().st_gid == 200000
    assert oct(mode_of(b.config_path)) == oct(0o600)


@pytest.mark.parametrize("durable", [True, False])
def test_write_needs_no_rootfs_yet_and_is_private(tmp_path: Path, durable: bool) -> None:
    """The container path writes its bundle while the rootfs is still being made."""
    spec = base_spec()
    old = os.umask(0)
    try:
        b = Bundle.write(tmp_path / "c" / "bundle", spec, durable=durable)
    finally:
        os.umask(old)
    assert b.spec is spec
    assert (oct(mode_of(b.path)), oct(mode_of(b.config_path))) == (oct(0o700), oct(0o600))
    assert Bundle.load(b.path).spec == spec


def test_write_makes_an_existing_open_dir_private(tmp_path: Path) -> None:
    (tmp_path / "b").mkdir(mode=0o755)
    (tmp_path / "b" / "config.json").write_text("{}")
    os.chmod(tmp_path / "b" / "config.json", 0o644)
    b = Bundle.write(tmp_path / "b", base_spec())
    assert (oct(mode_of(b.path)), oct(mode_of(b.config_path))) == (oct(0o700), oct(0o600))
