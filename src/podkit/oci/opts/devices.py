"""Options on devices: one host device or a tree of them, all devices allowed, the default
Unix devices.
"""

from __future__ import annotations

from podkit.oci.opts.core import SpecOpt, SpecOptError, _abs_path, _access, _linux, _resources
from podkit.oci.opts.hostdevices import HostFS, _device, _host_devices, _OSHostFS
from podkit.oci.spec import (
    LinuxDevice,
    LinuxDeviceCgroup,
    Spec,
)

__all__ = [
    "with_all_devices_allowed",
    "with_default_unix_devices",
    "with_devices",
    "with_linux_device",
]


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
