"""ID maps: which host IDs a user namespace's IDs stand for (``/proc/<pid>/uid_map`` lines).

Pure models. ``IDMap.single(100000, 65536)`` is what kubelet gives a pod: container IDs
0-65535 are host IDs 100000-165535, for users and groups alike.
"""

from __future__ import annotations

from collections.abc import Iterable

import attrs

__all__ = ["MAX_ID", "IDMap", "IDRange", "coalesce"]

MAX_ID = 2**32 - 1
"""IDs are 32-bit; ``(uid_t) -1`` itself is never a valid ID."""


@attrs.frozen(kw_only=True)
class IDRange:
    """``size`` IDs from ``container_id`` inside the namespace are those from ``host_id``
    outside it."""

    container_id: int
    host_id: int
    size: int

    def host(self, id: int) -> int | None:
        """The host ID of namespace ID ``id``, or ``None`` outside this range."""
        offset = id - self.container_id
        return self.host_id + offset if 0 <= offset < self.size else None

    def line(self) -> str:
        """The range as a ``uid_map`` line: ``"<container_id> <host_id> <size>"``."""
        return f"{self.container_id} {self.host_id} {self.size}"


def coalesce(ranges: Iterable[IDRange]) -> tuple[IDRange, ...]:
    """``ranges`` by container ID, neighbours that continue each other on both sides joined
    (``0 100000 10`` + ``10 100010 20`` is ``0 100000 30``)."""
    out: list[IDRange] = []
    for r in sorted(ranges, key=lambda r: r.container_id):
        last = out[-1] if out else None
        if (last is not None and last.container_id + last.size == r.container_id
                and last.host_id + last.size == r.host_id):
            out[-1] = IDRange(container_id=last.container_id, host_id=last.host_id,
                              size=last.size + r.size)
        else:
            out.append(r)
    return tuple(out)


def _ranges(value: Iterable[IDRange]) -> tuple[IDRange, ...]:
    return tuple(value)


@attrs.frozen
class IDMap:
    """The uid and gid ranges of a user namespace."""

    uids: tuple[IDRange, ...] = attrs.field(converter=_ranges)
    gids: tuple[IDRange, ...] = attrs.field(converter=_ranges)

    @classmethod
    def single(cls, host_id: int, size: int) -> IDMap:
        """Container IDs ``0..size-1`` are host IDs ``host_id..host_id+size-1``, for users
        and groups alike (the shape kubelet gives a pod)."""
        ranges = (IDRange(container_id=0, host_id=host_id, size=size),)
        return cls(ranges, ranges)

    def host_uid(self, uid: int) -> int | None:
        """The host uid of namespace uid ``uid`` (``None``: not mapped)."""
        return _host(self.uids, uid)

    def host_gid(self, gid: int) -> int | None:
        """The host gid of namespace gid ``gid`` (``None``: not mapped)."""
        return _host(self.gids, gid)

    @property
    def root(self) -> tuple[int, int] | None:
        """The host uid and gid of the namespace's root (``None`` when 0 is not mapped)."""
        uid, gid = self.host_uid(0), self.host_gid(0)
        return None if uid is None or gid is None else (uid, gid)

    def uid_map(self) -> str:
        """The ``/proc/<pid>/uid_map`` text."""
        return "".join(r.line() + "\n" for r in self.uids)

    def gid_map(self) -> str:
        """The ``/proc/<pid>/gid_map`` text."""
        return "".join(r.line() + "\n" for r in self.gids)

    def describe(self) -> str:
        """``uids 0 100000 65536, gids 0 100000 65536`` (for messages)."""
        return (f"uids {', '.join(r.line() for r in self.uids) or '-'}; "
                f"gids {', '.join(r.line() for r in self.gids) or '-'}")


def _host(ranges: tuple[IDRange, ...], id: int) -> int | None:
    for r in ranges:
        host = r.host(id)
        if host is not None:
            return host
    return None
