"""A rootless user's own user namespace, and where a user's podkit keeps its files.

:func:`user_holder` starts a :class:`~podkit.idmap.Holder` for a user without root: a process
in a new user namespace mapped by a :class:`~podkit.idmap.UserMap`, its maps written as
podman writes them for its pause process: ``newuidmap``/``newgidmap`` (shadow's setuid
helpers, Debian package ``uidmap``) for the user's subordinate ranges, or, with only the
user's own ID, ``uid_map`` directly and ``setgroups`` ``deny`` before ``gid_map``. While it
lives, other processes of the user join the namespace by its files (``holder.path("user")``,
``nsenter --user --target <pid>``, ``setns``), with every capability inside it.

    m = idmap.user_map()                    # this process's user, /etc/subuid, /etc/subgid
    with idmap.user_holder(m) as holder:
        fd = idmap.open_user_namespace(holder.path("user"))

:func:`default_dirs` answers where podkit keeps data and runtime state for a user: as podman,
``$XDG_DATA_HOME/podkit`` and ``$XDG_RUNTIME_DIR/podkit`` (root: ``/var/lib/podkit`` and
``/run/podkit``).
"""

from __future__ import annotations

import os
import pwd
import shutil
import stat
from collections.abc import Callable, Mapping, Sequence

import attrs

from podkit import _proc
from podkit.idmap.maps import IDMap, IDRange
from podkit.idmap.subid import UserMap
from podkit.idmap.userns import Holder, IDMapError, write_proc

__all__ = ["Dirs", "default_dirs", "user_holder", "write_user_maps"]

_PATH = "/usr/bin:/bin:/usr/sbin:/sbin"
ROOT_DATA = "/var/lib/podkit"
ROOT_RUNTIME = "/run/podkit"


def _tool(name: str, m: UserMap, kind: str) -> str:
    found = shutil.which(name, path=_PATH)
    if found is None:
        raise IDMapError(f"{name} not found in {_PATH}: mapping the subordinate {kind}s of "
                         f"{m.describe()} needs it (Debian package uidmap)")
    return found


def _run_tool(name: str, pid: int, ranges: Sequence[IDRange], m: UserMap, kind: str,
              timeout: float) -> None:
    argv = [_tool(name, m, kind), str(pid)]
    for r in ranges:
        argv += [str(r.container_id), str(r.host_id), str(r.size)]
    what = f"{' '.join([name, *argv[1:]])} for {m.describe()}"
    try:
        result = _proc.run(argv, env={"PATH": _PATH, "LC_ALL": "C"}, timeout=timeout,
                           cap=4096)
    except _proc.ProcTimeout:
        raise IDMapError(f"{what}: still running after {timeout:g} s (killed)") from None
    except OSError as exc:
        raise IDMapError(f"{what}: cannot run {argv[0]}: {exc.strerror}") from None
    if result.returncode != 0:
        why = result.stderr.data.decode(errors="replace").strip() or "no message"
        raise IDMapError(f"{what}: exited {result.returncode}: {why}")


def write_user_maps(pid: int, m: UserMap, *, timeout: float = 10.0) -> None:
    """Write the maps of the new user namespace of process ``pid`` (a process of ``m``'s
    user) as ``m`` says: ``newuidmap``/``newgidmap`` for subordinate ranges, else the user's
    own ID directly (``setgroups`` denied first for ``gid_map``, as the kernel wants)."""
    if m.single_uid:
        write_proc(pid, "uid_map", m.ids.uid_map())
    else:
        _run_tool("newuidmap", pid, m.ids.uids, m, "uid", timeout)
    if m.single_gid:
        write_proc(pid, "setgroups", "deny")
        write_proc(pid, "gid_map", m.ids.gid_map())
    else:
        _run_tool("newgidmap", pid, m.ids.gids, m, "gid", timeout)


def user_holder(m: UserMap, *, also: Sequence[str] = (), timeout: float = 10.0) -> Holder:
    """A :class:`~podkit.idmap.Holder` of a new user namespace mapped by ``m``, for a process
    of ``m``'s user (not root): the maps written by :func:`write_user_maps`. It lives until
    ``close()`` (or until this process ends); on a failed start nothing is left running."""
    def writer(pid: int, ids: IDMap) -> None:
        write_user_maps(pid, m, timeout=timeout)
    return Holder(m.ids, also=also, timeout=timeout, writer=writer)


@attrs.frozen(kw_only=True)
class Dirs:
    """Where podkit keeps its files for one user: ``data`` (images, pods: kept across boots),
    ``runtime`` (runtime state, sockets: gone at reboot); ``note`` says why a fallback was
    taken (``""`` when none was)."""

    data: str
    runtime: str
    note: str = ""


def _owned_dir(st: os.stat_result | None, uid: int) -> bool:
    return st is not None and stat.S_ISDIR(st.st_mode) and st.st_uid == uid


def _lstat(path: str) -> os.stat_result | None:
    try:
        return os.lstat(path)
    except OSError:
        return None


def _home(uid: int, env: Mapping[str, str]) -> str:
    home = env.get("HOME", "")
    if os.path.isabs(home):
        return home
    try:
        return pwd.getpwuid(uid).pw_dir
    except KeyError:
        raise IDMapError(f"uid {uid}: HOME is not set and the password database has no "
                         f"entry for it: set XDG_DATA_HOME or HOME") from None


def _fallback_runtime(uid: int, env: Mapping[str, str]) -> str:
    """``$TMPDIR/podkit-run-<uid>`` (``/tmp``), made 0700, checked to be the user's own."""
    tmp = env.get("TMPDIR", "")
    path = os.path.join(tmp if os.path.isabs(tmp) else "/tmp", f"podkit-run-{uid}")
    try:
        os.mkdir(path, 0o700)
    except FileExistsError:
        pass
    except OSError as exc:
        raise IDMapError(f"runtime dir {path}: {exc.strerror}") from None
    st = _lstat(path)
    if st is None or not _owned_dir(st, uid) or stat.S_IMODE(st.st_mode) != 0o700:
        seen = "missing" if st is None else (
            f"{'a directory' if stat.S_ISDIR(st.st_mode) else 'not a directory'}, mode "
            f"{stat.S_IMODE(st.st_mode):04o}, owner {st.st_uid}")
        raise IDMapError(f"runtime dir {path} is not a 0700 directory of uid {uid} ({seen}): "
                         f"set XDG_RUNTIME_DIR to a directory of the user's own")
    return path


def default_dirs(uid: int | None = None, env: Mapping[str, str] | None = None, *,
                 lstat: Callable[[str], os.stat_result | None] | None = None) -> Dirs:
    """Where podkit keeps its files for user ``uid`` (default: this process's effective uid)
    with the environment ``env`` (default ``os.environ``), by podman's rules.

    Root: ``/var/lib/podkit`` and ``/run/podkit``. Another user: data in
    ``$XDG_DATA_HOME/podkit`` (``~/.local/share/podkit`` when unset or not absolute); runtime
    state in ``$XDG_RUNTIME_DIR/podkit`` when that is a directory of the user's own, else
    ``/run/user/<uid>/podkit`` when that is, else ``$TMPDIR/podkit-run-<uid>`` (``/tmp``),
    made 0700 and checked to be the user's (an ``IDMapError`` if not). Nothing is made but
    that fallback; ``lstat`` (a path's ``os.lstat``, ``None`` when it has none) is the seam
    for tests.
    """
    uid = os.geteuid() if uid is None else uid
    env = os.environ if env is None else env
    lstat = lstat or _lstat
    if uid == 0:
        return Dirs(data=ROOT_DATA, runtime=ROOT_RUNTIME)
    data_home = env.get("XDG_DATA_HOME", "")
    if not os.path.isabs(data_home):
        data_home = os.path.join(_home(uid, env), ".local", "share")
    data = os.path.join(data_home, "podkit")
    xdg = env.get("XDG_RUNTIME_DIR", "")
    st = lstat(xdg) if os.path.isabs(xdg) else None
    if _owned_dir(st, uid):
        return Dirs(data=data, runtime=os.path.join(xdg, "podkit"))
    if not xdg:
        why = "XDG_RUNTIME_DIR is not set"
    else:
        seen = "missing" if st is None else f"owner {st.st_uid}"
        why = f"XDG_RUNTIME_DIR {xdg!r} is not a directory of uid {uid} ({seen})"
    run_user = f"/run/user/{uid}"
    if _owned_dir(lstat(run_user), uid):
        return Dirs(data=data, runtime=os.path.join(run_user, "podkit"),
                    note=f"{why}: using {run_user}/podkit")
    runtime = _fallback_runtime(uid, env)
    return Dirs(data=data, runtime=runtime, note=f"{why}: using {runtime}")
