"""Composable spec options: tiny functions that each change one concept of a ``Spec``.

A ``SpecOpt`` is ``Callable[[Spec], None]`` that edits the spec in place. ``generate(base, *opts)``
applies options in order to a copy of ``base`` (later options win), so building a container
spec reads top to bottom, as with containerd's ``pkg/oci`` ``SpecOpts``::

    spec = generate(default_spec("web"), with_process_args("sh", "-c", "id"), with_hostname("web"))

Every ``with_*`` function checks its arguments when called and returns the option; an option
that cannot apply raises a ``SpecOptError`` (an ``InvalidArgumentError``) naming the value. The
spec sections an option needs (``process``, ``linux``, ``linux.resources``, ...) are created when
absent. Options that read the host (devices, current capabilities) or the container's rootfs
(user and group names) take the thing they read as a parameter, so tests can replace it.
"""

from __future__ import annotations

import copy
import os
import posixpath
import re
import stat as stat_mod
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Protocol

from podkit.errors import InvalidArgumentError, NotFoundError
from podkit.oci.defaults import DEFAULT_PATH_ENV, KNOWN_CAPABILITIES
from podkit.oci.spec import (
    Box,
    Linux,
    LinuxBlockIO,
    LinuxCapabilities,
    LinuxCPU,
    LinuxDevice,
    LinuxDeviceCgroup,
    LinuxHugepageLimit,
    LinuxIDMapping,
    LinuxIntelRdt,
    LinuxMemory,
    LinuxNamespace,
    LinuxPids,
    LinuxResources,
    Mount,
    POSIXRlimit,
    Process,
    Root,
    Spec,
    User,
)
from podkit.oci.validate import NAMESPACE_TYPES, RLIMITS, minimum_version

__all__ = [
    "DeviceStat",
    "HostFS",
    "SpecOpt",
    "SpecOptError",
    "UserLookupError",
    "compose",
    "current_capabilities",
    "generate",
    "with_added_capabilities",
    "with_additional_gids",
    "with_all_current_capabilities",
    "with_all_devices_allowed",
    "with_all_known_capabilities",
    "with_ambient_capabilities",
    "with_annotations",
    "with_apparmor_profile",
    "with_append_additional_groups",
    "with_blockio",
    "with_capabilities",
    "with_cgroup",
    "with_cpu_burst",
    "with_cpu_cfs",
    "with_cpu_rt",
    "with_cpu_shares",
    "with_cpus",
    "with_cpus_mems",
    "with_default_path_env",
    "with_default_unix_devices",
    "with_dev_shm_size",
    "with_devices",
    "with_domainname",
    "with_dropped_capabilities",
    "with_env",
    "with_host_hosts_file",
    "with_host_localtime",
    "with_host_namespace",
    "with_host_resolvconf",
    "with_hostname",
    "with_hugepage_limits",
    "with_linux_device",
    "with_linux_namespace",
    "with_masked_paths",
    "with_memory_limit",
    "with_memory_swap",
    "with_minimum_oci_version",
    "with_mounts",
    "with_namespace_path",
    "with_new_privileges",
    "with_no_new_privileges",
    "with_oci_version",
    "with_oom_score_adj",
    "with_pids_limit",
    "with_privileged",
    "with_process_args",
    "with_process_cwd",
    "with_rdt",
    "with_readonly_paths",
    "with_resources",
    "with_rlimit",
    "with_rlimits",
    "with_rootfs_path",
    "with_rootfs_readonly",
    "with_seccomp_unconfined",
    "with_selinux_label",
    "with_sysctls",
    "with_tty",
    "with_tty_size",
    "with_uid_gid",
    "with_umask",
    "with_unified",
    "with_user",
    "with_user_id",
    "with_user_namespace",
    "with_username",
    "with_writeable_cgroupfs",
    "with_writeable_sysfs",
    "without_mounts",
    "without_namespace",
    "without_run_mount",
]

SpecOpt = Callable[[Spec], None]
"""An option: edits the spec it is given in place (``generate`` hands it a copy)."""

_INT64 = (-(2**63), 2**63 - 1)
_UINT64 = (0, 2**64 - 1)
_UINT32 = (0, 2**32 - 1)
_ID_MAX = 2**31 - 1  # runc refuses uids/gids above MaxInt32, containerd follows
_CPU_LIST = re.compile(r"\d+(-\d+)?(,\d+(-\d+)?)*\Z")
_SEMVER = re.compile(r"\d+\.\d+\.\d+(-[0-9A-Za-z.-]+)?(\+[0-9A-Za-z.-]+)?\Z")
_PAGE_SIZE = re.compile(r"[1-9][0-9]*[KMG]B\Z")
_SKIP_DEV_DIRS = frozenset({"pts", "shm", "fd", "mqueue", ".lxc", ".lxd-mounts", ".udev"})


class SpecOptError(InvalidArgumentError):
    """A spec option got a bad value, or cannot apply to the spec it was given."""


class UserLookupError(SpecOptError, NotFoundError):
    """A user or group name is not in the container rootfs' ``/etc/passwd`` / ``/etc/group``."""


# --- composition ---------------------------------------------------------------------------


def generate(base: Spec, *opts: SpecOpt) -> Spec:
    """Apply ``opts`` in order to a copy of ``base`` and return it; ``base`` is never touched.

    If an option raises, the error propagates and no spec is returned.
    """
    spec = base.copy()
    for opt in opts:
        opt(spec)
    return spec


def compose(*opts: SpecOpt) -> SpecOpt:
    """Combine options into one that applies them in order."""
    chain = tuple(opts)

    def opt(spec: Spec) -> None:
        for o in chain:
            o(spec)

    return opt


def with_oci_version(version: str) -> SpecOpt:
    """Set ``ociVersion`` (a SemVer string such as ``"1.0.2"``)."""
    value = _str(version, "ociVersion")
    if not _SEMVER.match(value):
        raise SpecOptError(f"invalid ociVersion {value!r}: expected a SemVer such as '1.0.2'")

    def opt(s: Spec) -> None:
        s.oci_version = value

    return opt


def with_minimum_oci_version() -> SpecOpt:
    """Set ``ociVersion`` to the oldest release whose fields the spec uses; apply it last.

    Older runtimes refuse newer versions: crun 1.8 accepts only 1.0.x and 1.1.x.
    """

    def opt(s: Spec) -> None:
        s.oci_version = minimum_version(s)

    return opt


# --- small helpers ---------------------------------------------------------------------------


def _process(s: Spec) -> Process:
    if s.process is None:
        s.process = Process()
    return s.process


def _user(s: Spec) -> User:
    p = _process(s)
    if p.user is None:
        p.user = User(uid=0, gid=0)
    return p.user


def _linux(s: Spec) -> Linux:
    if s.linux is None:
        s.linux = Linux()
    return s.linux


def _resources(s: Spec) -> LinuxResources:
    lx = _linux(s)
    if lx.resources is None:
        lx.resources = LinuxResources()
    return lx.resources


def _cpu(s: Spec) -> LinuxCPU:
    r = _resources(s)
    if r.cpu is None:
        r.cpu = LinuxCPU()
    return r.cpu


def _memory(s: Spec) -> LinuxMemory:
    r = _resources(s)
    if r.memory is None:
        r.memory = LinuxMemory()
    return r.memory


def _caps(s: Spec) -> LinuxCapabilities:
    p = _process(s)
    if p.capabilities is None:
        p.capabilities = LinuxCapabilities()
    return p.capabilities


def _int(value: object, what: str, lo: int, hi: int) -> int:
    if type(value) is not int:
        raise SpecOptError(f"invalid {what} {value!r}: must be an integer")
    if not lo <= value <= hi:
        raise SpecOptError(f"invalid {what} {value}: must be in [{lo}, {hi}]")
    return value


def _str(value: object, what: str, *, empty: bool = False) -> str:
    if not isinstance(value, str):
        raise SpecOptError(f"invalid {what} {value!r}: must be a string")
    if not empty and not value:
        raise SpecOptError(f"invalid {what}: must not be empty")
    if "\0" in value:
        raise SpecOptError(f"invalid {what} {value!r}: contains a NUL byte")
    return value


def _abs_path(value: object, what: str) -> str:
    path = _str(value, what)
    if not path.startswith("/"):
        raise SpecOptError(f"invalid {what} {path!r}: must be an absolute path")
    return path


def _strings(values: Iterable[str] | None, what: str) -> list[str]:
    if values is None:
        return []
    if isinstance(values, str):
        raise SpecOptError(f"invalid {what} {values!r}: expected a list of strings, not a string")
    return [_str(v, what) for v in values]


def _str_map(values: Mapping[str, str], what: str) -> dict[str, str]:
    if not isinstance(values, Mapping):
        raise SpecOptError(f"invalid {what} {values!r}: expected a mapping of strings")
    return {_str(k, f"{what} key"): _str(v, f"{what} value for {k!r}", empty=True)
            for k, v in values.items()}


def _cap_names(caps: Iterable[str] | None) -> list[str]:
    names = _strings(caps, "capability")
    for c in names:
        if c not in KNOWN_CAPABILITIES:
            raise SpecOptError(f"unknown capability {c!r}: expected a CAP_* name such as CAP_KILL")
    return list(dict.fromkeys(names))


def _namespace_type(value: object) -> str:
    t = _str(value, "namespace type")
    if t not in NAMESPACE_TYPES:
        raise SpecOptError(
            f"unknown namespace type {t!r}: expected one of {', '.join(sorted(NAMESPACE_TYPES))}"
        )
    return t


def _access(value: object) -> str:
    perms = _str(value, "device permissions")
    if len(set(perms)) != len(perms) or not set(perms) <= set("rwm"):
        raise SpecOptError(f"invalid device permissions {perms!r}: use letters of 'rwm' once each")
    return perms


# --- process: env, args, cwd, terminal -------------------------------------------------------


def _merge_env(current: list[str], updates: list[str]) -> list[str]:
    out = list(current)
    index = {e.partition("=")[0]: i for i, e in enumerate(out)}
    drop: set[int] = set()
    for value in updates:
        key, eq, _ = value.partition("=")
        i = index.get(key)
        if not eq:  # "KEY" without "=" unsets KEY (containerd semantics)
            if i is not None:
                drop.add(i)
        elif i is None:
            index[key] = len(out)
            out.append(value)
        else:
            out[i] = value
            drop.discard(i)
    return [e for i, e in enumerate(out) if i not in drop]


def with_env(env: Iterable[str] | Mapping[str, str]) -> SpecOpt:
    """Set environment variables, replacing by key; ``"KEY"`` without ``=`` unsets ``KEY``."""
    if isinstance(env, Mapping):
        values = [f"{k}={v}" for k, v in _str_map(env, "environment variable").items()]
    else:
        values = _strings(env, "environment variable")
    for v in values:
        if v.startswith("="):
            raise SpecOptError(f"invalid environment variable {v!r}: empty name")

    def opt(s: Spec) -> None:
        p = _process(s)
        if values:
            p.env = _merge_env(p.env or [], values)

    return opt


def with_default_path_env() -> SpecOpt:
    """Set ``PATH`` to the default Unix path (containerd's ``WithDefaultPathEnv``)."""
    return with_env([DEFAULT_PATH_ENV])


def with_process_args(*args: str) -> SpecOpt:
    """Replace ``process.args`` (and drop a Windows ``commandLine``)."""
    values = _strings(args, "process argument") if args else []
    if not values:
        raise SpecOptError("invalid process args (): at least one argument is required")

    def opt(s: Spec) -> None:
        p = _process(s)
        p.args = list(values)
        p.command_line = None

    return opt


def with_process_cwd(cwd: str) -> SpecOpt:
    """Set ``process.cwd`` (an absolute path inside the container)."""
    path = _abs_path(cwd, "process cwd")

    def opt(s: Spec) -> None:
        _process(s).cwd = path

    return opt


def with_tty() -> SpecOpt:
    """Give the process a terminal and ``TERM=xterm``."""
    set_term = with_env(["TERM=xterm"])

    def opt(s: Spec) -> None:
        _process(s).terminal = True
        set_term(s)

    return opt


def with_tty_size(width: int, height: int) -> SpecOpt:
    """Set ``process.consoleSize`` in characters."""
    w = _int(width, "console width", *_UINT32)
    h = _int(height, "console height", *_UINT32)

    def opt(s: Spec) -> None:
        _process(s).console_size = Box(width=w, height=h)

    return opt


def with_hostname(name: str) -> SpecOpt:
    """Set the container's hostname (needs its own UTS namespace)."""
    value = _str(name, "hostname")
    if len(value.encode()) > 64:
        raise SpecOptError(f"invalid hostname {value!r}: longer than 64 bytes")

    def opt(s: Spec) -> None:
        s.hostname = value

    return opt


def with_domainname(name: str) -> SpecOpt:
    """Set the container's NIS domain name (runtime-spec 1.1.0; runc 1.1 ignores it)."""
    value = _str(name, "domainname")
    if len(value.encode()) > 64:
        raise SpecOptError(f"invalid domainname {value!r}: longer than 64 bytes")

    def opt(s: Spec) -> None:
        s.domainname = value

    return opt


# --- mounts -------------------------------------------------------------------------------


def with_mounts(mounts: Iterable[Mount]) -> SpecOpt:
    """Append mounts (copies of the given ``Mount`` objects), mounted in order."""
    items = list(mounts)
    for m in items:
        if not isinstance(m, Mount):
            raise SpecOptError(f"invalid mount {m!r}: expected an oci.Mount")
        _str(m.destination, "mount destination")

    def opt(s: Spec) -> None:
        s.mounts = [*(s.mounts or []), *copy.deepcopy(items)]

    return opt


def without_mounts(*destinations: str) -> SpecOpt:
    """Remove the mounts whose (cleaned) destination is one of ``destinations``."""
    dests = {posixpath.normpath(_str(d, "mount destination")) for d in destinations}

    def opt(s: Spec) -> None:
        if s.mounts is not None:
            s.mounts = [m for m in s.mounts if posixpath.normpath(m.destination) not in dests]

    return opt


def without_run_mount() -> SpecOpt:
    """Remove the ``/run`` tmpfs of the default spec (as the CRI plugin does)."""
    return without_mounts("/run")


def _host_file(path: str) -> SpecOpt:
    def opt(s: Spec) -> None:
        m = Mount(destination=path, type="bind", source=path, options=["rbind", "ro"])
        s.mounts = [*(s.mounts or []), m]

    return opt


def with_host_hosts_file() -> SpecOpt:
    """Bind the host's ``/etc/hosts`` read-only into the container."""
    return _host_file("/etc/hosts")


def with_host_resolvconf() -> SpecOpt:
    """Bind the host's ``/etc/resolv.conf`` read-only into the container."""
    return _host_file("/etc/resolv.conf")


def with_host_localtime() -> SpecOpt:
    """Bind the host's ``/etc/localtime`` read-only into the container."""
    return _host_file("/etc/localtime")


def with_dev_shm_size(kb: int) -> SpecOpt:
    """Set the ``size=`` of the ``/dev/shm`` tmpfs, in KiB; error if the spec has none."""
    size = _int(kb, "/dev/shm size (KiB)", 1, _INT64[1])

    def opt(s: Spec) -> None:
        for m in s.mounts or []:
            if posixpath.normpath(m.destination) == "/dev/shm" and m.type == "tmpfs" and (
                m.source == "shm"
            ):
                kept = [o for o in m.options or [] if not o.startswith("size=")]
                m.options = [*kept, f"size={size}k"]
                return
        raise SpecOptError("cannot set /dev/shm size: the spec has no /dev/shm shm tmpfs mount")

    return opt


def _writeable(fstype: str) -> SpecOpt:
    def opt(s: Spec) -> None:
        for m in s.mounts or []:
            if m.type == fstype and m.options:
                m.options = ["rw" if o == "ro" else o for o in m.options]

    return opt


def with_writeable_sysfs() -> SpecOpt:
    """Turn ``ro`` into ``rw`` on every sysfs mount."""
    return _writeable("sysfs")


def with_writeable_cgroupfs() -> SpecOpt:
    """Turn ``ro`` into ``rw`` on every cgroup mount."""
    return _writeable("cgroup")


# --- root ---------------------------------------------------------------------------------


def with_rootfs_path(path: str) -> SpecOpt:
    """Set ``root.path`` (absolute, or relative to the bundle)."""
    value = _str(path, "rootfs path")

    def opt(s: Spec) -> None:
        if s.root is None:
            s.root = Root(path=value)
        else:
            s.root.path = value

    return opt


def with_rootfs_readonly() -> SpecOpt:
    """Mount the container's root filesystem read-only."""

    def opt(s: Spec) -> None:
        if s.root is None:
            raise SpecOptError("cannot make the rootfs read-only: the spec has no root")
        s.root.readonly = True

    return opt


# --- namespaces -----------------------------------------------------------------------------


def with_host_namespace(type: str) -> SpecOpt:
    """Drop the ``type`` namespace entry, so the container shares the host's."""
    t = _namespace_type(type)

    def opt(s: Spec) -> None:
        lx = _linux(s)
        if lx.namespaces is not None:
            lx.namespaces = [n for n in lx.namespaces if n.type != t]

    return opt


def without_namespace(type: str) -> SpecOpt:
    """Remove the ``type`` namespace entry (CRI name for ``with_host_namespace``)."""
    return with_host_namespace(type)


def with_linux_namespace(type: str, path: str | None = None) -> SpecOpt:
    """Add a namespace (new, or joined via ``path``), replacing an entry of the same type."""
    t = _namespace_type(type)
    p = None if path is None else _abs_path(path, f"{t} namespace path")

    def opt(s: Spec) -> None:
        lx = _linux(s)
        entry = LinuxNamespace(type=t, path=p)
        namespaces = list(lx.namespaces or [])
        for i, n in enumerate(namespaces):
            if n.type == t:
                namespaces[i] = entry
                break
        else:
            namespaces.append(entry)
        lx.namespaces = namespaces

    return opt


def with_namespace_path(type: str, path: str) -> SpecOpt:
    """Join an existing namespace by path; error if the spec has no ``type`` entry."""
    t = _namespace_type(type)
    p = _abs_path(path, f"{t} namespace path")

    def opt(s: Spec) -> None:
        for n in (s.linux.namespaces if s.linux else None) or []:
            if n.type == t:
                n.path = p
                return
        raise SpecOptError(f"cannot join {t} namespace {p!r}: the spec has no {t} namespace")

    return opt


def _id_mapping(m: LinuxIDMapping | tuple[int, int, int], what: str) -> LinuxIDMapping:
    if isinstance(m, LinuxIDMapping):
        m = (m.container_id, m.host_id, m.size)
    if not isinstance(m, tuple) or len(m) != 3:
        raise SpecOptError(f"invalid {what} {m!r}: expected (container_id, host_id, size)")
    c, h, n = (_int(v, what, *_UINT32) for v in m)
    return LinuxIDMapping(container_id=c, host_id=h, size=n)


def with_user_namespace(
    uid_maps: Iterable[LinuxIDMapping | tuple[int, int, int]],
    gid_maps: Iterable[LinuxIDMapping | tuple[int, int, int]],
) -> SpecOpt:
    """Add a user namespace (if missing) and append uid/gid mappings."""
    uids = [_id_mapping(m, "uid mapping") for m in uid_maps]
    gids = [_id_mapping(m, "gid mapping") for m in gid_maps]

    def opt(s: Spec) -> None:
        lx = _linux(s)
        if not any(n.type == "user" for n in lx.namespaces or []):
            lx.namespaces = [*(lx.namespaces or []), LinuxNamespace(type="user")]
        lx.uid_mappings = [*(lx.uid_mappings or []), *copy.deepcopy(uids)]
        lx.gid_mappings = [*(lx.gid_mappings or []), *copy.deepcopy(gids)]

    return opt


# --- user and groups ------------------------------------------------------------------------


def _resolve_in_root(root: Path, rel: str) -> Path:
    """``root/rel`` with symlinks resolved as if ``root`` were ``/`` (never escapes ``root``)."""
    parts = [p for p in rel.split("/") if p not in ("", ".")]
    done: list[str] = []
    hops = 0
    while parts:
        part = parts.pop(0)
        if part == "..":
            if done:
                done.pop()
            continue
        candidate = root.joinpath(*done, part)
        if candidate.is_symlink():
            hops += 1
            if hops > 40:
                raise SpecOptError(f"too many symlinks resolving {rel!r} in rootfs {root}")
            target = os.readlink(candidate)
            if target.startswith("/"):
                done = []
            parts = [p for p in target.split("/") if p not in ("", ".")] + parts
            continue
        done.append(part)
    return root.joinpath(*done)


def _rootfs(s: Spec, rootfs: str | os.PathLike[str] | None) -> Path:
    if rootfs is not None:
        return Path(rootfs)
    path = s.root.path if s.root else None
    if not path or not path.startswith("/"):
        raise SpecOptError(
            f"cannot look up users: root.path {path!r} is not absolute; pass rootfs=<path>"
        )
    return Path(path)


def _read_db(root: Path, name: str) -> tuple[Path, list[list[str]] | None]:
    """Lines of ``/etc/passwd`` or ``/etc/group`` split on ``:``; ``None`` if the file is absent."""
    path = _resolve_in_root(root, f"etc/{name}")
    try:
        text = path.read_text(errors="replace")
    except FileNotFoundError:
        return root / "etc" / name, None
    except OSError as e:
        raise SpecOptError(f"cannot read {path}: {e.strerror}") from None
    rows = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            rows.append(line.split(":"))
    return path, rows


def _passwd(root: Path) -> tuple[Path, list[tuple[str, int, int]] | None]:
    path, rows = _read_db(root, "passwd")
    if rows is None:
        return path, None
    users = []
    for r in rows:
        if len(r) >= 4 and r[2].isdigit() and r[3].isdigit():
            users.append((r[0], int(r[2]), int(r[3])))
    return path, users


def _groups(root: Path) -> tuple[Path, list[tuple[str, int, list[str]]] | None]:
    path, rows = _read_db(root, "group")
    if rows is None:
        return path, None
    groups = []
    for r in rows:
        if len(r) >= 3 and r[2].isdigit():
            members = [m for m in (r[3].split(",") if len(r) > 3 else []) if m]
            groups.append((r[0], int(r[2]), members))
    return path, groups


def _lookup_user(root: Path, name: str) -> tuple[int, int]:
    path, users = _passwd(root)
    if users is None:
        raise UserLookupError(f"cannot look up user {name!r}: {path} does not exist")
    for uname, uid, gid in users:
        if uname == name:
            return uid, gid
    raise UserLookupError(f"user {name!r} not found in {path}")


def _lookup_group(root: Path, name: str) -> int:
    path, groups = _groups(root)
    if groups is None:
        raise UserLookupError(f"cannot look up group {name!r}: {path} does not exist")
    for gname, gid, _ in groups:
        if gname == name:
            return gid
    raise UserLookupError(f"group {name!r} not found in {path}")


def _ensure_primary_gid(u: User) -> None:
    """containerd puts the primary gid first in additionalGids unless it is already there."""
    gids = u.additional_gids or []
    if u.gid is not None and u.gid not in gids:
        gids = [u.gid, *gids]
    u.additional_gids = gids


def _parse_id(text: str, what: str, user: str) -> int | None:
    if not text.isdigit():
        return None
    value = int(text)
    if value > _ID_MAX:
        raise SpecOptError(f"invalid user {user!r}: {what} {value} out of range [0, {_ID_MAX}]")
    return value


def with_uid_gid(uid: int, gid: int) -> SpecOpt:
    """Run as numeric ``uid``/``gid`` (no lookup); additional gids reset to ``[gid]``."""
    u_ = _int(uid, "uid", 0, _ID_MAX)
    g_ = _int(gid, "gid", 0, _ID_MAX)

    def opt(s: Spec) -> None:
        u = _user(s)
        u.uid, u.gid, u.additional_gids = u_, g_, None
        _ensure_primary_gid(u)

    return opt


def with_user_id(uid: int, *, rootfs: str | os.PathLike[str] | None = None) -> SpecOpt:
    """Run as ``uid`` with its gid from the rootfs ``/etc/passwd`` (gid 0 if not listed)."""
    u_ = _int(uid, "uid", 0, _ID_MAX)

    def opt(s: Spec) -> None:
        _, users = _passwd(_rootfs(s, rootfs))
        gid = next((g for _, i, g in users or [] if i == u_), 0)
        u = _user(s)
        u.uid, u.gid, u.additional_gids = u_, gid, None
        _ensure_primary_gid(u)

    return opt


def with_username(name: str, *, rootfs: str | os.PathLike[str] | None = None) -> SpecOpt:
    """Run as user ``name``: uid and gid from the rootfs ``/etc/passwd``; error if absent."""
    n = _str(name, "user name")

    def opt(s: Spec) -> None:
        uid, gid = _lookup_user(_rootfs(s, rootfs), n)
        u = _user(s)
        u.uid, u.gid, u.additional_gids = uid, gid, None
        _ensure_primary_gid(u)

    return opt


def with_user(user: str, *, rootfs: str | os.PathLike[str] | None = None) -> SpecOpt:
    """Run as ``"uid"``, ``"name"``, ``"uid:gid"``, ``"name:group"`` (or mixed), like an image USER.

    Names are looked up in ``rootfs`` (default: an absolute ``root.path``).
    """
    value = _str(user, "user")
    parts = value.split(":")
    if len(parts) > 2 or not all(parts):
        raise SpecOptError(f"invalid user {value!r}: expected uid, name, uid:gid or name:group")
    uid = _parse_id(parts[0], "uid", value)
    if len(parts) == 1:
        return with_user_id(uid, rootfs=rootfs) if uid is not None else with_username(
            value, rootfs=rootfs
        )
    gid = _parse_id(parts[1], "gid", value)
    if uid is not None and gid is not None:
        return with_uid_gid(uid, gid)

    def opt(s: Spec) -> None:
        root = _rootfs(s, rootfs)
        u_ = uid if uid is not None else _lookup_user(root, parts[0])[0]
        g_ = gid if gid is not None else _lookup_group(root, parts[1])
        u = _user(s)
        u.uid, u.gid, u.additional_gids = u_, g_, None
        _ensure_primary_gid(u)

    return opt


def with_additional_gids(user: str, *, rootfs: str | os.PathLike[str] | None = None) -> SpecOpt:
    """Set additional gids to the groups listing ``user`` (a name or uid) in ``/etc/group``."""
    value = _str(user, "user")

    def opt(s: Spec) -> None:
        root = _rootfs(s, rootfs)
        u = _user(s)
        u.additional_gids = None
        name: str | None = value
        if value.isdigit():
            _, users = _passwd(root)
            name = next((n for n, i, _ in users or [] if i == int(value)), None)
        _, groups = _groups(root)
        if name is not None and groups is not None:
            u.additional_gids = [g for gn, g, members in groups if gn != name and name in members]
        _ensure_primary_gid(u)

    return opt


def with_append_additional_groups(
    *groups: str, rootfs: str | os.PathLike[str] | None = None
) -> SpecOpt:
    """Append groups (gids or names looked up in the rootfs ``/etc/group``) to additional gids."""
    values = [_str(g, "group") for g in groups]
    for g in values:
        if g.isdigit():
            _int(int(g), "gid", 0, _UINT32[1])

    def opt(s: Spec) -> None:
        gids: list[int] = []
        root: Path | None = None
        for g in values:
            if g.isdigit():
                gids.append(int(g))
            else:
                root = root or _rootfs(s, rootfs)
                gids.append(_lookup_group(root, g))
        u = _user(s)
        u.additional_gids = [*(u.additional_gids or []), *gids]
        _ensure_primary_gid(u)

    return opt


def with_umask(umask: int) -> SpecOpt:
    """Set ``process.user.umask`` (e.g. ``0o022``)."""
    value = _int(umask, "umask", 0, 0o777)

    def opt(s: Spec) -> None:
        _user(s).umask = value

    return opt


# --- capabilities and security --------------------------------------------------------------


def with_capabilities(caps: Iterable[str] | None) -> SpecOpt:
    """Set bounding, effective and permitted to ``caps``; filter inheritable to them."""
    names = _cap_names(caps)

    def opt(s: Spec) -> None:
        c = _caps(s)
        c.bounding, c.effective, c.permitted = list(names), list(names), list(names)
        if not names:
            c.inheritable = None
        elif c.inheritable:
            c.inheritable = [x for x in c.inheritable if x in names]

    return opt


def with_added_capabilities(caps: Iterable[str]) -> SpecOpt:
    """Add ``caps`` to the bounding, effective and permitted sets."""
    names = _cap_names(caps)

    def opt(s: Spec) -> None:
        c = _caps(s)
        c.bounding = [*(c.bounding or []), *(n for n in names if n not in (c.bounding or []))]
        c.effective = [*(c.effective or []), *(n for n in names if n not in (c.effective or []))]
        c.permitted = [*(c.permitted or []), *(n for n in names if n not in (c.permitted or []))]

    return opt


def with_dropped_capabilities(caps: Iterable[str]) -> SpecOpt:
    """Remove ``caps`` from the bounding, effective, permitted and inheritable sets."""
    names = set(_cap_names(caps))

    def opt(s: Spec) -> None:
        c = _caps(s)
        c.bounding = [x for x in c.bounding or [] if x not in names]
        c.effective = [x for x in c.effective or [] if x not in names]
        c.permitted = [x for x in c.permitted or [] if x not in names]
        if c.inheritable is not None:
            c.inheritable = [x for x in c.inheritable if x not in names]

    return opt


def with_ambient_capabilities(caps: Iterable[str]) -> SpecOpt:
    """Set the ambient and inheritable sets to ``caps`` (for non-root processes)."""
    names = _cap_names(caps)

    def opt(s: Spec) -> None:
        c = _caps(s)
        c.ambient, c.inheritable = list(names), list(names)

    return opt


def with_all_known_capabilities() -> SpecOpt:
    """Grant every capability podkit knows (``KNOWN_CAPABILITIES``)."""
    return with_capabilities(KNOWN_CAPABILITIES)


def _capability_masks(text: str) -> dict[str, int]:
    """The ``Cap*`` hex masks of a ``/proc/<pid>/status`` text (bad lines are left out)."""
    masks = {}
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.startswith("Cap"):
            try:
                masks[key] = int(value.strip(), 16)
            except ValueError:
                continue
    return masks


def current_capabilities(status_path: str = "/proc/self/status") -> list[str]:
    """The capabilities a runtime started by this process can grant: ``CapEff`` ∩ ``CapBnd``.

    containerd's ``cap.Current()`` reads ``CapEff``; a child that execs (runc) only gets what
    is also in the bounding set, so a reduced bounding set narrows it too.
    """
    path = _str(status_path, "status path")
    try:
        text = Path(path).read_text()
    except OSError as e:
        raise SpecOptError(f"cannot read capabilities from {path}: {e.strerror}") from None
    masks = _capability_masks(text)
    if "CapEff" not in masks:
        raise SpecOptError(f"no valid CapEff line in {path}")
    mask = masks["CapEff"] & masks.get("CapBnd", masks["CapEff"])
    return [c for bit, c in enumerate(KNOWN_CAPABILITIES) if mask >> bit & 1]


def with_all_current_capabilities(status_path: str = "/proc/self/status") -> SpecOpt:
    """Grant what this process can pass on (:func:`current_capabilities` of ``status_path``)."""
    path = _str(status_path, "status path")

    def opt(s: Spec) -> None:
        with_capabilities(current_capabilities(path))(s)

    return opt


def with_masked_paths(paths: Iterable[str] | None) -> SpecOpt:
    """Replace ``linux.maskedPaths`` (``None`` removes the list)."""
    values = None if paths is None else [_abs_path(p, "masked path") for p in _strings(
        paths, "masked path")]

    def opt(s: Spec) -> None:
        _linux(s).masked_paths = None if values is None else list(values)

    return opt


def with_readonly_paths(paths: Iterable[str] | None) -> SpecOpt:
    """Replace ``linux.readonlyPaths`` (``None`` removes the list)."""
    values = None if paths is None else [_abs_path(p, "readonly path") for p in _strings(
        paths, "readonly path")]

    def opt(s: Spec) -> None:
        _linux(s).readonly_paths = None if values is None else list(values)

    return opt


def with_selinux_label(label: str) -> SpecOpt:
    """Set the process SELinux label (``""`` removes it)."""
    value = _str(label, "SELinux label", empty=True)

    def opt(s: Spec) -> None:
        _process(s).selinux_label = value or None

    return opt


def with_apparmor_profile(profile: str) -> SpecOpt:
    """Set the process AppArmor profile (``""`` removes it)."""
    value = _str(profile, "AppArmor profile", empty=True)

    def opt(s: Spec) -> None:
        _process(s).apparmor_profile = value or None

    return opt


def with_seccomp_unconfined() -> SpecOpt:
    """Remove the seccomp filter."""

    def opt(s: Spec) -> None:
        _linux(s).seccomp = None

    return opt


def with_privileged(status_path: str = "/proc/self/status") -> SpecOpt:
    """A privileged container: caller's capabilities, no masks, writable sys/cgroup, no LSMs."""
    return compose(
        with_all_current_capabilities(status_path),
        with_masked_paths(None),
        with_readonly_paths(None),
        with_writeable_sysfs(),
        with_writeable_cgroupfs(),
        with_selinux_label(""),
        with_apparmor_profile(""),
        with_seccomp_unconfined(),
    )


def with_new_privileges() -> SpecOpt:
    """Allow gaining privileges through setuid binaries (``noNewPrivileges: false``)."""

    def opt(s: Spec) -> None:
        _process(s).no_new_privileges = False

    return opt


def with_no_new_privileges() -> SpecOpt:
    """Forbid gaining privileges through setuid binaries (``noNewPrivileges: true``)."""

    def opt(s: Spec) -> None:
        _process(s).no_new_privileges = True

    return opt


def with_oom_score_adj(adj: int) -> SpecOpt:
    """Set ``process.oomScoreAdj`` (-1000..1000; lowering it needs CAP_SYS_RESOURCE)."""
    value = _int(adj, "oomScoreAdj", -1000, 1000)

    def opt(s: Spec) -> None:
        _process(s).oom_score_adj = value

    return opt


def _rlimit(type: str, soft: int, hard: int) -> POSIXRlimit:
    t = _str(type, "rlimit type")
    if t not in RLIMITS:
        raise SpecOptError(f"unknown rlimit type {t!r}: expected one of {sorted(RLIMITS)}")
    s_ = _int(soft, f"{t} soft limit", *_UINT64)
    h_ = _int(hard, f"{t} hard limit", *_UINT64)
    if s_ > h_:
        raise SpecOptError(f"invalid {t}: soft limit {s_} is above hard limit {h_}")
    return POSIXRlimit(type=t, soft=s_, hard=h_)


def with_rlimit(type: str, soft: int, hard: int) -> SpecOpt:
    """Set one rlimit, replacing an entry of the same type."""
    return with_rlimits([(type, soft, hard)])


def with_rlimits(rlimits: Iterable[POSIXRlimit | tuple[str, int, int]]) -> SpecOpt:
    """Set several rlimits (``POSIXRlimit`` or ``(type, soft, hard)``), replacing by type."""
    items = [
        _rlimit(r.type, r.soft, r.hard) if isinstance(r, POSIXRlimit) else _rlimit(*r)
        for r in rlimits
    ]

    def opt(s: Spec) -> None:
        p = _process(s)
        current = list(p.rlimits or [])
        for r in items:
            for i, old in enumerate(current):
                if old.type == r.type:
                    current[i] = copy.deepcopy(r)
                    break
            else:
                current.append(copy.deepcopy(r))
        p.rlimits = current

    return opt


def with_sysctls(sysctls: Mapping[str, str]) -> SpecOpt:
    """Merge ``linux.sysctl`` entries (``{"net.ipv4.ip_forward": "1"}``)."""
    values = _str_map(sysctls, "sysctl")

    def opt(s: Spec) -> None:
        lx = _linux(s)
        lx.sysctl = {**(lx.sysctl or {}), **values}

    return opt


def with_annotations(annotations: Mapping[str, str]) -> SpecOpt:
    """Merge annotations into the spec (a later value for a key wins)."""
    values = _str_map(annotations, "annotation")

    def opt(s: Spec) -> None:
        s.annotations = {**(s.annotations or {}), **values}

    return opt


# --- devices --------------------------------------------------------------------------------


class DeviceStat(Protocol):
    """The part of ``os.stat_result`` device options read."""

    @property
    def st_mode(self) -> int: ...
    @property
    def st_rdev(self) -> int: ...
    @property
    def st_uid(self) -> int: ...
    @property
    def st_gid(self) -> int: ...


class HostFS(Protocol):
    """Host filesystem access used by device options; replace it in tests."""

    def stat(self, path: str, *, follow_symlinks: bool) -> DeviceStat:
        """``os.stat`` / ``os.lstat``."""
        ...

    def listdir(self, path: str) -> list[str]:
        """``os.listdir``."""
        ...


class _OSHostFS:
    def stat(self, path: str, *, follow_symlinks: bool) -> DeviceStat:
        return os.stat(path, follow_symlinks=follow_symlinks)

    def listdir(self, path: str) -> list[str]:
        return sorted(os.listdir(path))


def _device(fs: HostFS, path: str, *, follow: bool) -> LinuxDevice | None:
    """The device at ``path``; ``None`` if it is not a block/char device or fifo."""
    st = fs.stat(path, follow_symlinks=follow)
    mode = st.st_mode
    if stat_mod.S_ISBLK(mode):
        type_ = "b"
    elif stat_mod.S_ISCHR(mode):
        type_ = "c"
    elif stat_mod.S_ISFIFO(mode):
        type_ = "p"
    else:
        return None
    return LinuxDevice(
        path=path,
        type=type_,
        major=os.major(st.st_rdev),
        minor=os.minor(st.st_rdev),
        file_mode=stat_mod.S_IMODE(mode),
        uid=st.st_uid,
        gid=st.st_gid,
    )


def _host_devices(fs: HostFS, path: str, container_path: str | None) -> list[LinuxDevice]:
    try:
        st = fs.stat(path, follow_symlinks=True)
    except OSError as e:
        raise SpecOptError(f"cannot stat device path {path!r}: {e.strerror}") from None
    if not stat_mod.S_ISDIR(st.st_mode):
        dev = _device(fs, path, follow=True)
        if dev is None:
            raise SpecOptError(f"device path {path!r} is not a device node")
        if container_path:
            dev.path = container_path
        return [dev]
    out: list[LinuxDevice] = []
    for name in fs.listdir(path):
        full = posixpath.join(path, name)
        sub = posixpath.join(container_path, name) if container_path else None
        try:
            entry = fs.stat(full, follow_symlinks=False)
        except FileNotFoundError:
            continue
        if stat_mod.S_ISDIR(entry.st_mode):
            if name not in _SKIP_DEV_DIRS:
                out.extend(_host_devices(fs, full, sub))
            continue
        if name == "console":
            continue
        dev = _device(fs, full, follow=False)
        if dev is None or dev.type == "p":
            continue
        if sub:
            dev.path = sub
        out.append(dev)
    return out


def _add_devices(s: Spec, devices: list[LinuxDevice], access: str) -> None:
    lx = _linux(s)
    res = _resources(s)
    lx.devices = [*(lx.devices or []), *devices]
    res.devices = [
        *(res.devices or []),
        *(
            LinuxDeviceCgroup(allow=True, type=d.type, major=d.major, minor=d.minor, access=access)
            for d in devices
        ),
    ]


def with_linux_device(path: str, permissions: str = "rwm", *, fs: HostFS | None = None) -> SpecOpt:
    """Add the host device node at ``path`` (not following symlinks) and allow it in the cgroup."""
    p = _abs_path(path, "device path")
    access = _access(permissions)
    host = fs or _OSHostFS()

    def opt(s: Spec) -> None:
        try:
            dev = _device(host, p, follow=False)
        except OSError as e:
            raise SpecOptError(f"cannot stat device path {p!r}: {e.strerror}") from None
        if dev is None:
            raise SpecOptError(f"device path {p!r} is not a device node")
        _add_devices(s, [dev], access)

    return opt


def with_devices(
    host_path: str,
    container_path: str | None = None,
    permissions: str = "rwm",
    *,
    fs: HostFS | None = None,
) -> SpecOpt:
    """Add the device at ``host_path``, or every device below it if it is a directory.

    Each device gets an allow rule in the device cgroup. ``container_path`` renames the device
    (or the directory) inside the container; by default it keeps its host path.
    """
    hp = _abs_path(host_path, "device host path")
    cp = None if container_path is None else _abs_path(container_path, "device container path")
    access = _access(permissions)
    host = fs or _OSHostFS()

    def opt(s: Spec) -> None:
        _add_devices(s, _host_devices(host, hp, cp), access)

    return opt


def with_all_devices_allowed() -> SpecOpt:
    """Allow read, write and mknod on every device in the device cgroup."""

    def opt(s: Spec) -> None:
        _resources(s).devices = [LinuxDeviceCgroup(allow=True, access="rwm")]

    return opt


_DEFAULT_UNIX_DEVICES: tuple[tuple[int, int | None], ...] = (
    (1, 3),  # /dev/null
    (1, 8),  # /dev/random
    (1, 7),  # /dev/full
    (5, 0),  # /dev/tty
    (1, 5),  # /dev/zero
    (1, 9),  # /dev/urandom
    (5, 1),  # /dev/console
    (136, None),  # /dev/pts/*
    (5, 2),  # /dev/ptmx
)


def with_default_unix_devices() -> SpecOpt:
    """Append cgroup allow rules for null, random, full, tty, zero, urandom, console, pts, ptmx."""

    def opt(s: Spec) -> None:
        res = _resources(s)
        res.devices = [
            *(res.devices or []),
            *(
                LinuxDeviceCgroup(allow=True, type="c", major=ma, minor=mi, access="rwm")
                for ma, mi in _DEFAULT_UNIX_DEVICES
            ),
        ]

    return opt


# --- resources and cgroups ------------------------------------------------------------------


def with_memory_limit(limit: int) -> SpecOpt:
    """Set the memory limit in bytes (-1: unlimited)."""
    value = _int(limit, "memory limit", -1, _INT64[1])

    def opt(s: Spec) -> None:
        _memory(s).limit = value

    return opt


def with_memory_swap(swap: int) -> SpecOpt:
    """Set the memory+swap limit in bytes (-1: unlimited)."""
    value = _int(swap, "memory swap", -1, _INT64[1])

    def opt(s: Spec) -> None:
        _memory(s).swap = value

    return opt


def with_cpu_shares(shares: int) -> SpecOpt:
    """Set the relative CPU weight (cgroup v1 ``cpu.shares``)."""
    value = _int(shares, "cpu shares", *_UINT64)

    def opt(s: Spec) -> None:
        _cpu(s).shares = value

    return opt


def _cpu_list(value: object, what: str) -> str:
    text = _str(value, what)
    if not _CPU_LIST.match(text):
        raise SpecOptError(f"invalid {what} {text!r}: expected a list like '0-2,4'")
    return text


def with_cpus(cpus: str) -> SpecOpt:
    """Pin to CPUs (cpuset list, e.g. ``"0-1,3"``)."""
    value = _cpu_list(cpus, "cpuset cpus")

    def opt(s: Spec) -> None:
        _cpu(s).cpus = value

    return opt


def with_cpus_mems(mems: str) -> SpecOpt:
    """Restrict to memory nodes (cpuset list, e.g. ``"0"``)."""
    value = _cpu_list(mems, "cpuset mems")

    def opt(s: Spec) -> None:
        _cpu(s).mems = value

    return opt


def with_cpu_cfs(quota: int, period: int) -> SpecOpt:
    """Set the CFS quota and period in microseconds (quota -1: unlimited)."""
    q = _int(quota, "cpu quota", -1, _INT64[1])
    p = _int(period, "cpu period", *_UINT64)

    def opt(s: Spec) -> None:
        cpu = _cpu(s)
        cpu.quota, cpu.period = q, p

    return opt


def with_cpu_burst(burst: int) -> SpecOpt:
    """Set the CFS burst in microseconds (runtime-spec 1.1.0)."""
    value = _int(burst, "cpu burst", *_UINT64)

    def opt(s: Spec) -> None:
        _cpu(s).burst = value

    return opt


def with_cpu_rt(runtime: int, period: int) -> SpecOpt:
    """Set the realtime runtime and period in microseconds."""
    r = _int(runtime, "cpu realtime runtime", *_INT64)
    p = _int(period, "cpu realtime period", *_UINT64)

    def opt(s: Spec) -> None:
        cpu = _cpu(s)
        cpu.realtime_runtime, cpu.realtime_period = r, p

    return opt


def with_pids_limit(limit: int) -> SpecOpt:
    """Set the maximum number of processes (-1: unlimited)."""
    value = _int(limit, "pids limit", -1, _INT64[1])

    def opt(s: Spec) -> None:
        _resources(s).pids = LinuxPids(limit=value)

    return opt


def with_blockio(blockio: LinuxBlockIO | None) -> SpecOpt:
    """Set (or with ``None`` remove) ``linux.resources.blockIO``."""
    if blockio is not None and not isinstance(blockio, LinuxBlockIO):
        raise SpecOptError(f"invalid blockIO {blockio!r}: expected an oci.LinuxBlockIO")
    value = copy.deepcopy(blockio)

    def opt(s: Spec) -> None:
        _resources(s).block_io = copy.deepcopy(value)

    return opt


def with_hugepage_limits(limits: Mapping[str, int]) -> SpecOpt:
    """Set hugetlb limits in bytes per page size (``{"2MB": 1 << 30}``), replacing by size."""
    if not isinstance(limits, Mapping):
        raise SpecOptError(f"invalid hugepage limits {limits!r}: expected a mapping")
    items = []
    for size, limit in limits.items():
        if not isinstance(size, str) or not _PAGE_SIZE.match(size):
            raise SpecOptError(f"invalid hugepage size {size!r}: expected e.g. '2MB' or '1GB'")
        items.append(LinuxHugepageLimit(page_size=size,
                                        limit=_int(limit, f"{size} hugepage limit", *_UINT64)))

    def opt(s: Spec) -> None:
        res = _resources(s)
        sizes = {h.page_size for h in items}
        kept = [h for h in res.hugepage_limits or [] if h.page_size not in sizes]
        res.hugepage_limits = [*kept, *copy.deepcopy(items)]

    return opt


def with_unified(unified: Mapping[str, str]) -> SpecOpt:
    """Merge cgroup v2 ``unified`` settings (file name -> value; runtime-spec 1.1.0)."""
    values = _str_map(unified, "unified cgroup setting")
    for key in values:
        if "/" in key or "." not in key:
            raise SpecOptError(f"invalid unified cgroup key {key!r}: expected e.g. 'memory.high'")

    def opt(s: Spec) -> None:
        res = _resources(s)
        res.unified = {**(res.unified or {}), **values}

    return opt


def with_resources(resources: LinuxResources) -> SpecOpt:
    """Set every field of ``resources`` that is not ``None`` on ``linux.resources``."""
    if not isinstance(resources, LinuxResources):
        raise SpecOptError(f"invalid resources {resources!r}: expected an oci.LinuxResources")
    value = copy.deepcopy(resources)

    def opt(s: Spec) -> None:
        res = _resources(s)
        for name in ("devices", "memory", "cpu", "pids", "block_io", "hugepage_limits",
                     "network", "rdma", "unified"):
            v = getattr(value, name)
            if v is not None:
                setattr(res, name, copy.deepcopy(v))
        res.extra.update(copy.deepcopy(value.extra))

    return opt


def with_cgroup(path: str) -> SpecOpt:
    """Set ``linux.cgroupsPath`` (``/parent/name``, relative, or systemd ``slice:prefix:name``)."""
    value = _str(path, "cgroups path")
    if ".." in value.replace(":", "/").split("/"):
        raise SpecOptError(f"invalid cgroups path {value!r}: must not contain '..'")

    def opt(s: Spec) -> None:
        _linux(s).cgroups_path = value

    return opt


def with_rdt(clos_id: str = "", l3_cache_schema: str = "", mem_bw_schema: str = "") -> SpecOpt:
    """Set Intel RDT class of service and schemata (empty strings are left out)."""
    c = _str(clos_id, "intelRdt closID", empty=True)
    l3 = _str(l3_cache_schema, "intelRdt l3CacheSchema", empty=True)
    mb = _str(mem_bw_schema, "intelRdt memBwSchema", empty=True)
    if mb and not mb.startswith("MB:"):
        raise SpecOptError(f"invalid intelRdt memBwSchema {mb!r}: must start with 'MB:'")

    def opt(s: Spec) -> None:
        _linux(s).intel_rdt = LinuxIntelRdt(
            clos_id=c or None, l3_cache_schema=l3 or None, mem_bw_schema=mb or None
        )

    return opt
