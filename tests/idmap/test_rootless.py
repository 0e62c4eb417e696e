"""podkit.idmap.rootless: where a user's podkit keeps its files (``default_dirs``, with a fake
environment and a fake ``lstat``; the fallback runtime dir under a ``TMPDIR`` the test owns).

The holder of a rootless user's namespace runs as a real user: tests/idmap/test_rootless_user.py.
"""

from __future__ import annotations

import os
import pwd
import stat
from collections.abc import Callable
from pathlib import Path

import pytest

from podkit import idmap

UID = 4242


def _dir(uid: int, mode: int = 0o700) -> os.stat_result:
    return os.stat_result((stat.S_IFDIR | mode, 1, 1, 2, uid, uid, 4096, 0, 0, 0))


def lstat_of(table: dict[str, os.stat_result]) -> Callable[[str], os.stat_result | None]:
    return table.get


def test_root_uses_the_system_dirs_whatever_the_environment() -> None:
    env = {"XDG_DATA_HOME": "/x", "XDG_RUNTIME_DIR": "/y", "HOME": "/root"}
    assert idmap.default_dirs(0, env) == idmap.Dirs(data="/var/lib/podkit", runtime="/run/podkit")


def test_a_user_gets_the_xdg_dirs() -> None:
    env = {"XDG_DATA_HOME": "/home/a/data", "XDG_RUNTIME_DIR": "/run/user/4242", "HOME": "/h"}
    got = idmap.default_dirs(UID, env, lstat=lstat_of({"/run/user/4242": _dir(UID)}))
    assert got == idmap.Dirs(data="/home/a/data/podkit", runtime="/run/user/4242/podkit")


def test_data_defaults_to_home_and_a_relative_xdg_data_home_is_ignored() -> None:
    fs = lstat_of({"/r": _dir(UID)})
    for env in ({"HOME": "/home/a", "XDG_RUNTIME_DIR": "/r"},
                {"HOME": "/home/a", "XDG_DATA_HOME": "rel", "XDG_RUNTIME_DIR": "/r"}):
        assert idmap.default_dirs(UID, env, lstat=fs).data == "/home/a/.local/share/podkit"
    nobody = pwd.getpwnam("nobody")
    fs = lstat_of({"/r": _dir(nobody.pw_uid)})
    from_pwd = idmap.default_dirs(nobody.pw_uid, {"XDG_RUNTIME_DIR": "/r"}, lstat=fs)
    assert from_pwd.data == f"{nobody.pw_dir}/.local/share/podkit"
    with pytest.raises(idmap.IDMapError, match=r"uid 2147483655: HOME is not set and the "
                                               r"password database has no entry"):
        idmap.default_dirs(2**31 + 7, {"XDG_RUNTIME_DIR": "/r"}, lstat=fs)


def test_a_runtime_dir_not_the_users_falls_back_to_run_user_and_says_why() -> None:
    env = {"HOME": "/h", "XDG_RUNTIME_DIR": "/run/user/0"}
    fs = lstat_of({"/run/user/0": _dir(0), f"/run/user/{UID}": _dir(UID)})
    got = idmap.default_dirs(UID, env, lstat=fs)
    assert got.runtime == f"/run/user/{UID}/podkit"
    assert got.note == (f"XDG_RUNTIME_DIR '/run/user/0' is not a directory of uid {UID} "
                        f"(owner 0): using /run/user/{UID}/podkit")


def test_without_a_runtime_dir_podmans_fallback_in_tmp_is_made_0700_and_checked(
        tmp_path: Path) -> None:
    env = {"HOME": "/h", "TMPDIR": str(tmp_path)}
    me = os.geteuid()
    if me == 0:  # root's own dirs are the system ones: play a user whose dir root prepared
        (tmp_path / f"podkit-run-{UID}").mkdir(0o700)
        os.chown(tmp_path / f"podkit-run-{UID}", UID, UID)
    uid = UID if me == 0 else me
    got = idmap.default_dirs(uid, env, lstat=lstat_of({}))
    assert got.runtime == f"{tmp_path}/podkit-run-{uid}"
    assert got.note == f"XDG_RUNTIME_DIR is not set: using {tmp_path}/podkit-run-{uid}"
    st = os.lstat(got.runtime)
    assert (st.st_uid, stat.S_IMODE(st.st_mode)) == (uid, 0o700)


@pytest.mark.parametrize("make", ["foreign", "mode", "symlink", "file"])
def test_a_fallback_dir_that_is_not_the_users_own_0700_dir_is_refused(
        tmp_path: Path, make: str) -> None:
    path = tmp_path / f"podkit-run-{UID}"
    if make == "symlink":
        (tmp_path / "elsewhere").mkdir(0o700)
        path.symlink_to(tmp_path / "elsewhere")
    elif make == "file":
        path.write_text("")
    else:
        path.mkdir(0o755 if make == "mode" else 0o700)
        if os.geteuid() == 0:
            os.chown(path, UID if make == "mode" else UID + 1, 0)
    with pytest.raises(idmap.IDMapError, match=rf"runtime dir {path} is not a 0700 directory "
                                               rf"of uid {UID} \(.*\): set XDG_RUNTIME_DIR"):
        idmap.default_dirs(UID, {"HOME": "/h", "TMPDIR": str(tmp_path)}, lstat=lstat_of({}))
