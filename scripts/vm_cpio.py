"""A writer for the newc (SVR4, "070701") cpio format the Linux kernel unpacks as initramfs.

Debian's ``cpio`` is not installed on the machines podkit tests on, and the format is small:
a fixed 110-byte ASCII header, the NUL-terminated name and the data, each padded to 4 bytes.
Entries are written in the order given (a directory before what it holds); mtimes are 0 so
the same inputs make the same bytes.
"""

from __future__ import annotations

import stat
from typing import BinaryIO

MAGIC = b"070701"
TRAILER = "TRAILER!!!"
HEADER_LEN = 110


def _pad(n: int) -> bytes:
    return b"\0" * (-n % 4)


def header(*, ino: int, mode: int, nlink: int, size: int, namesize: int,
           rdev: tuple[int, int] = (0, 0)) -> bytes:
    """The 110-byte header: magic and 13 eight-digit hex fields (uid, gid, mtime are 0)."""
    fields = (ino, mode, 0, 0, nlink, 0, size, 0, 0, rdev[0], rdev[1], namesize, 0)
    for f in fields:
        if not 0 <= f <= 0xFFFFFFFF:
            raise ValueError(f"cpio header field out of range: {f}")
    out = MAGIC + b"".join(b"%08X" % f for f in fields)
    assert len(out) == HEADER_LEN
    return out


class NewcWriter:
    """Append entries to a binary stream; ``close()`` writes the trailer (and is required)."""

    def __init__(self, out: BinaryIO) -> None:
        self._out = out
        self._ino = 0
        self._names: set[str] = set()
        self._closed = False

    def _entry(self, name: str, mode: int, data: bytes = b"",
               rdev: tuple[int, int] = (0, 0), nlink: int = 1) -> None:
        if self._closed:
            raise ValueError("cpio archive already closed")
        name = name.strip("/") if name != TRAILER else name
        if not name or name in self._names or ".." in name.split("/"):
            raise ValueError(f"bad or duplicate cpio entry name: {name!r}")
        self._names.add(name)
        self._ino += 1
        raw = name.encode() + b"\0"
        head = header(ino=self._ino if name != TRAILER else 0, mode=mode, nlink=nlink,
                      size=len(data), namesize=len(raw), rdev=rdev)
        self._out.write(head + raw + _pad(HEADER_LEN + len(raw)))
        self._out.write(data + _pad(len(data)))

    def add_dir(self, name: str, perm: int = 0o755) -> None:
        self._entry(name, stat.S_IFDIR | perm, nlink=2)

    def add_file(self, name: str, data: bytes, perm: int = 0o644) -> None:
        self._entry(name, stat.S_IFREG | perm, data)

    def add_symlink(self, name: str, target: str) -> None:
        self._entry(name, stat.S_IFLNK | 0o777, target.encode())

    def add_char_device(self, name: str, major: int, minor: int, perm: int = 0o600) -> None:
        self._entry(name, stat.S_IFCHR | perm, rdev=(major, minor))

    def close(self) -> None:
        self._entry(TRAILER, 0, nlink=1)
        self._closed = True


def read_newc(data: bytes) -> list[tuple[str, int, bytes]]:
    """(name, mode, data) of each entry up to the trailer: the inverse, for tests and checks."""
    out: list[tuple[str, int, bytes]] = []
    pos = 0
    while True:
        head = data[pos:pos + HEADER_LEN]
        if head[:6] != MAGIC:
            raise ValueError(f"no newc header at offset {pos}")
        fields = [int(head[6 + 8 * i:14 + 8 * i], 16) for i in range(13)]
        mode, size, namesize = fields[1], fields[6], fields[11]
        pos += HEADER_LEN
        name = data[pos:pos + namesize - 1].decode()
        pos += namesize + len(_pad(HEADER_LEN + namesize))
        if name == TRAILER:
            return out
        out.append((name, mode, data[pos:pos + size]))
        pos += size + len(_pad(size))
