"""Which cgroup version a host runs, read from its mount table: v1, hybrid or unified (v2).

``host()`` parses ``/proc/self/mountinfo`` once and caches it; tests build a ``Hierarchy``
from recorded mountinfo text with ``Hierarchy.parse(text, root=...)`` instead.
"""

from __future__ import annotations

import enum
import functools
from pathlib import Path, PurePosixPath

import attrs

__all__ = ["Hierarchy", "Mode", "Mount", "host"]

MOUNTINFO = "/proc/self/mountinfo"
# v1 controller names as they appear in a cgroup mount's options (the rest: xattr, noprefix,
# name=..., release_agent=... are options, not controllers)
V1_CONTROLLERS = frozenset({"blkio", "cpu", "cpuacct", "cpuset", "devices", "freezer", "hugetlb",
                            "memory", "misc", "net_cls", "net_prio", "perf_event", "pids",
                            "rdma"})


class Mode(enum.Enum):
    """How the host mounts cgroups."""

    V1 = "v1"  # controllers on cgroup v1 hierarchies only
    HYBRID = "hybrid"  # v1 controllers plus a controller-less cgroup2 mount (systemd's hybrid)
    UNIFIED = "unified"  # cgroup2 alone: every controller on one hierarchy


@attrs.frozen
class Mount:
    """One cgroup mount: where it is, which cgroup it shows (``root``), its controllers."""

    mountpoint: Path
    root: str
    controllers: frozenset[str]

    def dir(self, cgroup: str) -> Path | None:
        """The directory of ``cgroup`` (an absolute cgroup path) under this mount; ``None``
        when the mount does not show it."""
        inside = PurePosixPath("/" + cgroup.strip("/"))
        try:
            rel = inside.relative_to(PurePosixPath(self.root))
        except ValueError:
            return None
        return self.mountpoint / rel if str(rel) != "." else self.mountpoint


@attrs.frozen
class Hierarchy:
    """The host's cgroup mounts: v1 controller mounts by controller, the cgroup2 mount, and
    the v1 hierarchies without a controller by name (``name=systemd``: ``systemd``)."""

    mode: Mode
    v1: dict[str, Mount] = attrs.field(factory=dict)
    unified: Mount | None = None
    named: dict[str, Mount] = attrs.field(factory=dict)

    @classmethod
    def parse(cls, text: str, root: str | Path | None = None) -> Hierarchy:
        """The hierarchy of mountinfo ``text``; ``root`` (for tests) re-roots every mount
        point under that directory."""
        v1: dict[str, Mount] = {}
        named: dict[str, Mount] = {}
        unified: Mount | None = None
        for line in text.splitlines():
            head, sep, tail = line.partition(" - ")
            fields, rest = head.split(), tail.split()
            if not sep or len(fields) < 5 or len(rest) < 3:
                continue
            point = _unescape(fields[4])
            where = Path(point) if root is None else Path(root) / point.lstrip("/")
            if rest[0] == "cgroup2":
                unified = Mount(where, _unescape(fields[3]), frozenset())
            elif rest[0] == "cgroup":
                options = rest[2].split(",")
                names = frozenset(options) & V1_CONTROLLERS
                mount = Mount(where, _unescape(fields[3]), names)
                for name in names:
                    v1.setdefault(name, mount)
                for option in options:
                    if option.startswith("name="):
                        named.setdefault(option.removeprefix("name="), mount)
        if v1:
            return cls(Mode.HYBRID if unified is not None else Mode.V1, v1, unified, named)
        return cls(Mode.UNIFIED, {}, unified, named)

    @classmethod
    def read(cls, mountinfo: str | Path = MOUNTINFO, root: str | Path | None = None,
             ) -> Hierarchy:
        """The hierarchy of a mountinfo file."""
        return cls.parse(Path(mountinfo).read_text(), root)


def _unescape(field: str) -> str:
    """mountinfo's octal escapes (``\\040`` for a space) undone."""
    if "\\" not in field:
        return field
    return field.encode().decode("unicode_escape")


@functools.cache
def host() -> Hierarchy:
    """This host's hierarchy (``/proc/self/mountinfo``, read once)."""
    return Hierarchy.read()
