"""The two default specs podkit starts from, and the constants they are made of.

``default_spec()`` is containerd's default Unix spec (``populateDefaultUnixSpec`` in containerd
v2.0 / v1.7 ``pkg/oci/spec.go``): what a CRI runtime builds every container from. ``runc_spec()``
is the template ``runc spec`` (runc 1.1.5) writes. Both return a fresh ``Spec`` each call.
"""

from __future__ import annotations

import posixpath

from podkit import _files
from podkit.oci.spec import (
    VERSION,
    Linux,
    LinuxCapabilities,
    LinuxDeviceCgroup,
    LinuxNamespace,
    LinuxResources,
    Mount,
    POSIXRlimit,
    Process,
    Root,
    Spec,
    User,
)
from podkit.oci.values import CAPABILITIES

__all__ = [
    "DEFAULT_MASKED_PATHS",
    "DEFAULT_PATH_ENV",
    "DEFAULT_READONLY_PATHS",
    "DEFAULT_UNIX_CAPABILITIES",
    "DEFAULT_UNIX_NAMESPACES",
    "KNOWN_CAPABILITIES",
    "RUNC_SPEC_VERSION",
    "default_mounts",
    "default_spec",
    "runc_spec",
]

DEFAULT_PATH_ENV = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
"""The ``PATH`` containerd and runc give a process whose image sets none."""

DEFAULT_UNIX_CAPABILITIES: tuple[str, ...] = (
    "CAP_CHOWN",
    "CAP_DAC_OVERRIDE",
    "CAP_FSETID",
    "CAP_FOWNER",
    "CAP_MKNOD",
    "CAP_NET_RAW",
    "CAP_SETGID",
    "CAP_SETUID",
    "CAP_SETFCAP",
    "CAP_SETPCAP",
    "CAP_NET_BIND_SERVICE",
    "CAP_SYS_CHROOT",
    "CAP_KILL",
    "CAP_AUDIT_WRITE",
)
"""containerd v2.0/v1.7 ``defaultUnixCaps``: the bounding/permitted/effective sets by default."""

DEFAULT_MASKED_PATHS: tuple[str, ...] = (
    "/proc/acpi",
    "/proc/asound",
    "/proc/kcore",
    "/proc/keys",
    "/proc/latency_stats",
    "/proc/timer_list",
    "/proc/timer_stats",
    "/proc/sched_debug",
    "/sys/firmware",
    "/sys/devices/virtual/powercap",
    "/proc/scsi",
)
"""Paths containerd hides from the container (``linux.maskedPaths``)."""

DEFAULT_READONLY_PATHS: tuple[str, ...] = (
    "/proc/bus",
    "/proc/fs",
    "/proc/irq",
    "/proc/sys",
    "/proc/sysrq-trigger",
)
"""Paths containerd remounts read-only (``linux.readonlyPaths``)."""

DEFAULT_UNIX_NAMESPACES: tuple[str, ...] = ("pid", "ipc", "uts", "mount", "network")
"""Namespaces a default container gets of its own, in containerd's order (no user, no cgroup)."""

KNOWN_CAPABILITIES: tuple[str, ...] = CAPABILITIES
"""Every Linux capability, indexed by its bit number (``KNOWN_CAPABILITIES[5] == "CAP_KILL"``)."""

RUNC_SPEC_VERSION = "1.0.2-dev"
"""The ``ociVersion`` runc 1.1.5 writes (its vendored runtime-spec), kept in ``runc_spec()``."""

_DEV_MOUNTS: tuple[tuple[str, str, str, tuple[str, ...]], ...] = (
    ("/proc", "proc", "proc", ("nosuid", "noexec", "nodev")),
    ("/dev", "tmpfs", "tmpfs", ("nosuid", "strictatime", "mode=755", "size=65536k")),
    (
        "/dev/pts",
        "devpts",
        "devpts",
        ("nosuid", "noexec", "newinstance", "ptmxmode=0666", "mode=0620", "gid=5"),
    ),
    ("/dev/shm", "tmpfs", "shm", ("nosuid", "noexec", "nodev", "mode=1777", "size=65536k")),
    ("/dev/mqueue", "mqueue", "mqueue", ("nosuid", "noexec", "nodev")),
    ("/sys", "sysfs", "sysfs", ("nosuid", "noexec", "nodev", "ro")),
)


def _mount(destination: str, type_: str, source: str, options: tuple[str, ...]) -> Mount:
    return Mount(destination=destination, type=type_, source=source, options=list(options))


def default_mounts() -> list[Mount]:
    """containerd's ``defaultMounts()``: proc, dev, devpts, shm, mqueue, sysfs (ro) and ``/run``."""
    mounts = [_mount(*m) for m in _DEV_MOUNTS]
    mounts.append(_mount("/run", "tmpfs", "tmpfs", ("nosuid", "strictatime", "mode=755",
                                                    "size=65536k")))
    return mounts


def _deny_all_devices() -> LinuxResources:
    return LinuxResources(devices=[LinuxDeviceCgroup(allow=False, access="rwm")])


def _nofile_1024() -> list[POSIXRlimit]:
    return [POSIXRlimit(type="RLIMIT_NOFILE", hard=1024, soft=1024)]


def default_spec(id: str | None = None, namespace: str = "default") -> Spec:
    """containerd's default Unix spec for container ``id`` in containerd ``namespace``.

    ``ociVersion`` is ``oci.VERSION``: like containerd, podkit writes the runtime-spec version it
    models. ``linux.cgroupsPath`` is ``/<namespace>/<id>``; without an ``id`` it is left out
    (containers must not share a cgroup). No ``env`` is set: add ``with_default_path_env()``.

    >>> default_spec("web", "k8s.io").linux.cgroups_path
    '/k8s.io/web'
    """
    cgroups_path = None
    if id is not None:
        _files.validate_id(id, "container ID")
        _files.validate_id(namespace, "containerd namespace")
        cgroups_path = posixpath.join("/", namespace, id)
    caps = list(DEFAULT_UNIX_CAPABILITIES)
    return Spec(
        oci_version=VERSION,
        root=Root(path="rootfs"),
        process=Process(
            cwd="/",
            no_new_privileges=True,
            user=User(uid=0, gid=0),
            capabilities=LinuxCapabilities(
                bounding=list(caps), permitted=list(caps), effective=list(caps)
            ),
            rlimits=_nofile_1024(),
        ),
        mounts=default_mounts(),
        linux=Linux(
            masked_paths=list(DEFAULT_MASKED_PATHS),
            readonly_paths=list(DEFAULT_READONLY_PATHS),
            cgroups_path=cgroups_path,
            resources=_deny_all_devices(),
            namespaces=[LinuxNamespace(type=t) for t in DEFAULT_UNIX_NAMESPACES],
        ),
    )


_RUNC_CAPS = ("CAP_AUDIT_WRITE", "CAP_KILL", "CAP_NET_BIND_SERVICE")
_RUNC_NAMESPACES = ("pid", "network", "ipc", "uts", "mount")
_RUNC_MASKED = tuple(p for p in DEFAULT_MASKED_PATHS if p != "/sys/devices/virtual/powercap")


def runc_spec() -> Spec:
    """The spec ``runc spec`` (runc 1.1.5) writes: ``sh`` on a terminal, read-only ``rootfs``.

    Kept byte-for-byte in meaning, including ``ociVersion`` ``"1.0.2-dev"`` (``RUNC_SPEC_VERSION``),
    so a podkit user can start from the same template as a runc user.
    """
    caps = _RUNC_CAPS
    mounts = [_mount(*m) for m in _DEV_MOUNTS]
    mounts[0].options = None  # runc's /proc has no options
    mounts.append(
        _mount("/sys/fs/cgroup", "cgroup", "cgroup", ("nosuid", "noexec", "nodev", "relatime",
                                                      "ro"))
    )
    return Spec(
        oci_version=RUNC_SPEC_VERSION,
        process=Process(
            terminal=True,
            user=User(uid=0, gid=0),
            args=["sh"],
            env=[DEFAULT_PATH_ENV, "TERM=xterm"],
            cwd="/",
            capabilities=LinuxCapabilities(
                bounding=list(caps), effective=list(caps), permitted=list(caps),
                ambient=list(caps),
            ),
            rlimits=_nofile_1024(),
            no_new_privileges=True,
        ),
        root=Root(path="rootfs", readonly=True),
        hostname="runc",
        mounts=mounts,
        linux=Linux(
            resources=_deny_all_devices(),
            namespaces=[LinuxNamespace(type=t) for t in _RUNC_NAMESPACES],
            masked_paths=list(_RUNC_MASKED),
            readonly_paths=list(DEFAULT_READONLY_PATHS),
        ),
    )
