"""Host device lookup for device options, behind ``HostFS`` (``os.stat``/``os.listdir`` by
default) so tests can replace the host.
"""

from __future__ import annotations

import os
import posixpath
import stat as stat_mod
from typing import Protocol

from podkit.oci.opts.core import SpecOptError
from podkit.oci.spec import LinuxDevice

__all__ = ["DeviceStat", "HostFS"]

_SKIP_DEV_DIRS = frozenset({"pts", "shm", "fd", "mqueue", ".lxc", ".lxd-mounts", ".udev"})


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
