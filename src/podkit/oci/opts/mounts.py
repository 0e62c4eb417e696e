"""Options on mounts and the root: add or drop mounts, host files, /dev/shm size, writable
sysfs/cgroupfs, rootfs path and read-only root.
"""

from __future__ import annotations

import copy
import posixpath
from collections.abc import Iterable

from podkit.oci.opts.core import _INT64, SpecOpt, SpecOptError, _int, _str
from podkit.oci.spec import (
    Mount,
    Root,
    Spec,
)

__all__ = [
    "with_dev_shm_size",
    "with_host_hosts_file",
    "with_host_localtime",
    "with_host_resolvconf",
    "with_mounts",
    "with_rootfs_path",
    "with_rootfs_readonly",
    "with_writeable_cgroupfs",
    "with_writeable_sysfs",
    "without_mounts",
    "without_run_mount",
]

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
