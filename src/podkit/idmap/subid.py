"""Subordinate IDs (``/etc/subuid``, ``/etc/subgid``) and a rootless user's ID map.

Pure, but for :func:`read_subids` and :func:`user_map`, which read the files and the password
database. Each line of the files is ``<user name or uid>:<first ID>:<count>``: host IDs the
user may map into a user namespace of its own (``newuidmap``/``newgidmap`` check them). A
rootless user's namespace is mapped the way podman maps it: container ID 0 is the user's own
ID, container IDs from 1 are the subordinate ranges in file order; with no subordinate range
only the user's own ID is mapped (:attr:`UserMap.note` says what then cannot work).

    m = idmap.rootless_map("alice", 1000, 1000,
                           idmap.parse_subids("alice:100000:65536\\n", "/etc/subuid"),
                           idmap.parse_subids("1000:100000:65536\\n", "/etc/subgid"))
    m.ids.uid_map()   # '0 1000 1\\n1 100000 65536\\n'
"""

from __future__ import annotations

import itertools
import os
import pwd
from collections.abc import Iterable

import attrs

from podkit.idmap.maps import MAX_ID, IDMap, IDRange
from podkit.idmap.userns import IDMapError

__all__ = ["SubID", "UserMap", "owned_subids", "parse_subids", "read_subids", "rootless_map",
           "user_map"]

SUBUID = "/etc/subuid"
SUBGID = "/etc/subgid"
MAX_LINES = 340
"""The most lines a ``uid_map`` may have (Linux >= 4.15): the user's own ID and 339 ranges."""


@attrs.frozen(kw_only=True)
class SubID:
    """One line of a subordinate ID file: ``count`` host IDs from ``start`` for ``owner`` (a
    user name or a uid, as written); ``where`` is ``<file>:<line>``."""

    owner: str
    start: int
    count: int
    where: str

    @property
    def end(self) -> int:
        """The first host ID after the range."""
        return self.start + self.count

    def describe(self) -> str:
        """``300000:65536 (/etc/subuid:3)`` (for messages)."""
        return f"{self.start}:{self.count} ({self.where})"


def _number(field: str, what: str) -> int:
    if not field.isascii() or not field.isdigit():
        raise ValueError(f"{what} {field!r} is not a decimal number")
    return int(field)


def parse_subids(text: str, source: str) -> tuple[SubID, ...]:
    """The lines of a subordinate ID file's ``text`` (read from ``source``, which messages
    name); blank lines and ``#`` comments skipped. A bad line is an ``IDMapError`` naming
    ``source:line`` and the line."""
    out = []
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        try:
            parts = line.split(":")
            if len(parts) != 3 or not parts[0]:
                raise ValueError("want <user name or uid>:<first ID>:<count>")
            start = _number(parts[1], "first ID")
            count = _number(parts[2], "count")
            if count == 0:
                raise ValueError("count is 0")
            if start + count > MAX_ID:
                raise ValueError(f"the range ends past the last ID {MAX_ID - 1}")
        except ValueError as exc:
            raise IDMapError(f"{source}:{number}: {line!r}: {exc}") from None
        out.append(SubID(owner=parts[0], start=start, count=count, where=f"{source}:{number}"))
    return tuple(out)


def read_subids(path: str | os.PathLike[str]) -> tuple[SubID, ...]:
    """The lines of the subordinate ID file ``path`` (none when it does not exist)."""
    p = os.fspath(path)
    try:
        with open(p, encoding="utf-8", errors="surrogateescape") as f:
            text = f.read()
    except FileNotFoundError:
        return ()
    except OSError as exc:
        raise IDMapError(f"read {p}: {exc.strerror}") from None
    return parse_subids(text, p)


def owned_subids(entries: Iterable[SubID], user: str, uid: int) -> tuple[SubID, ...]:
    """The ranges of ``entries`` that belong to ``user`` (by name) or ``uid`` (by number), in
    file order, as newuidmap matches them."""
    return tuple(e for e in entries if e.owner in (user, str(uid)))


@attrs.frozen(kw_only=True)
class UserMap:
    """The ID map of a rootless user's namespace (:func:`rootless_map`).

    ``ids``: container 0 is ``uid``/``gid``, container IDs from 1 the ranges ``subuids`` and
    ``subgids``. ``note`` is ``""`` when both have subordinate ranges, else what cannot work
    with only the user's own ID mapped.
    """

    user: str
    uid: int
    gid: int
    ids: IDMap
    subuids: tuple[SubID, ...]
    subgids: tuple[SubID, ...]
    note: str

    @property
    def single_uid(self) -> bool:
        """Only the user's own uid is mapped (no ``newuidmap``: ``uid_map`` written directly)."""
        return not self.subuids

    @property
    def single_gid(self) -> bool:
        """Only the user's own gid is mapped (``setgroups`` denied, ``gid_map`` written
        directly)."""
        return not self.subgids

    def describe(self) -> str:
        """``user alice (uid 1000, gid 1000); subordinate uids 100000:65536 (/etc/subuid:1);
        ...`` (for messages)."""
        def ranges(found: tuple[SubID, ...]) -> str:
            return ", ".join(s.describe() for s in found) or "none"
        return (f"user {self.user} (uid {self.uid}, gid {self.gid}); subordinate uids "
                f"{ranges(self.subuids)}; subordinate gids {ranges(self.subgids)}")


def _ranges(kind: str, own: int, subs: tuple[SubID, ...], user: str) -> tuple[IDRange, ...]:
    out = [IDRange(container_id=0, host_id=own, size=1)]
    if len(subs) + 1 > MAX_LINES:
        raise IDMapError(f"{user} has {len(subs)} subordinate {kind} ranges: a user namespace "
                         f"takes at most {MAX_LINES - 1} besides the user's own {kind}")
    taken = sorted(subs, key=lambda s: s.start)
    for a, b in itertools.pairwise(taken):
        if b.start < a.end:
            raise IDMapError(f"subordinate {kind}s of {user} overlap: {a.describe()} and "
                             f"{b.describe()}")
    nxt = 1
    for s in subs:
        if s.start <= own < s.end:
            raise IDMapError(f"{user}'s own {kind} {own} is in its subordinate range "
                             f"{s.describe()}: it is mapped as container {kind} 0 already")
        out.append(IDRange(container_id=nxt, host_id=s.start, size=s.count))
        nxt += s.count
    return tuple(out)


def _note(user: str, uid: int, gid: int, no_uids: bool, no_gids: bool) -> str:
    if not (no_uids or no_gids):
        return ""
    missing = " and ".join(k for k, none in (("uids", no_uids), ("gids", no_gids)) if none)
    files = " and ".join(f for f, none in ((SUBUID, no_uids), (SUBGID, no_gids)) if none)
    own = ", ".join(f"{k} {v}" for k, v, none in (("uid", uid, no_uids), ("gid", gid, no_gids))
                    if none)
    lines = [f"{user} has no subordinate {missing} ({files}): only its own {own} is mapped "
             f"(as container ID 0), so images with files owned by other IDs cannot be "
             f"unpacked, chown to other users or groups fails, and setuid/setgid programs "
             f"cannot change to other IDs"]
    if no_gids:
        lines.append("setgroups(2) is denied in the namespace (su, sudo, initgroups fail)")
    lines.append(f"root can add a range no other user has with: usermod --add-subuids "
                 f"<first>-<last> --add-subgids <first>-<last> {user}")
    return "; ".join(lines)


def rootless_map(user: str, uid: int, gid: int, subuids: Iterable[SubID],
                 subgids: Iterable[SubID]) -> UserMap:
    """The user namespace map of ``user`` (``uid``, primary ``gid``) from the lines of
    ``/etc/subuid`` and ``/etc/subgid`` (all of them: the user's are picked by name or uid).

    As podman: container 0 is the user's own ID, container IDs 1.. the user's ranges in file
    order. Ranges that overlap, or hold the user's own ID, are an ``IDMapError`` (the kernel
    would refuse the map).
    """
    mine_u = owned_subids(subuids, user, uid)
    mine_g = owned_subids(subgids, user, uid)
    ids = IDMap(_ranges("uid", uid, mine_u, user), _ranges("gid", gid, mine_g, user))
    return UserMap(user=user, uid=uid, gid=gid, ids=ids, subuids=mine_u, subgids=mine_g,
                   note=_note(user, uid, gid, not mine_u, not mine_g))


def user_map(uid: int | None = None, gid: int | None = None, *, subuid: str = SUBUID,
             subgid: str = SUBGID) -> UserMap:
    """:func:`rootless_map` of user ``uid`` (default: this process's effective uid and gid;
    another uid's primary gid from the password database), read from the files."""
    if uid is None:
        uid = os.geteuid()
        gid = os.getegid() if gid is None else gid
    try:
        entry = pwd.getpwuid(uid)
        name, primary = entry.pw_name, entry.pw_gid
    except KeyError:  # no name: only numeric lines can match
        name, primary = str(uid), uid
    return rootless_map(name, uid, primary if gid is None else gid, read_subids(subuid),
                        read_subids(subgid))
