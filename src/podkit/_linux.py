"""The Linux calls the standard library lacks, on one ctypes handle of libc.

``mount``, ``umount2``, ``unshare``, ``setns``, ``sethostname``, ``prctl`` (child subreaper),
``statfs`` (file system type), ``sync_file_range``, glibc's ``mallopt`` (the arena cap,
the mmap threshold) and ``malloc_trim``, and the new mount API calls ID-mapped mounts need
(``open_tree``, ``mount_setattr``, ``move_mount``, through ``syscall``: glibc 2.36 has no
wrappers).
Each raises ``OSError`` with the errno and the path it was about; callers turn that into their
own error kinds.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os

MS_NOSUID, MS_NODEV, MS_NOEXEC = 0x2, 0x4, 0x8
MS_BIND, MS_REC, MS_SLAVE, MS_SHARED = 0x1000, 0x4000, 1 << 19, 1 << 20
MNT_DETACH, UMOUNT_NOFOLLOW = 0x2, 0x8
CLONE_NEWUTS, CLONE_NEWIPC, CLONE_NEWNET = 0x04000000, 0x08000000, 0x40000000
PR_SET_CHILD_SUBREAPER, PR_GET_CHILD_SUBREAPER = 36, 37
SYNC_FILE_RANGE_WRITE = 2
M_MMAP_THRESHOLD, M_ARENA_MAX = -3, -8  # glibc's malloc.h
CLONE_NEWUSER = 0x10000000
AT_FDCWD, AT_EMPTY_PATH, AT_RECURSIVE = -100, 0x1000, 0x8000
OPEN_TREE_CLONE = 1
MOVE_MOUNT_F_EMPTY_PATH = 0x4
MOUNT_ATTR_IDMAP = 0x100000
# the same numbers on every architecture but alpha (asm-generic/unistd.h, from Linux 5.2/5.12)
_SYS_OPEN_TREE, _SYS_MOVE_MOUNT, _SYS_MOUNT_SETATTR = 428, 429, 442


def _load_libc() -> ctypes.CDLL:
    """glibc by its soname; else whatever ``find_library`` names (it runs ``ldconfig -p``,
    milliseconds on every start, so only when the soname is not there)."""
    try:
        return ctypes.CDLL("libc.so.6", use_errno=True)
    except OSError:
        return ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)


libc = _load_libc()
libc.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong,
                       ctypes.c_char_p]
libc.umount2.argtypes = [ctypes.c_char_p, ctypes.c_int]
libc.unshare.argtypes = [ctypes.c_int]
libc.setns.argtypes = [ctypes.c_int, ctypes.c_int]
libc.sethostname.argtypes = [ctypes.c_char_p, ctypes.c_size_t]
libc.statfs.argtypes = [ctypes.c_char_p, ctypes.c_void_p]
libc.sync_file_range.argtypes = [ctypes.c_int, ctypes.c_int64, ctypes.c_int64, ctypes.c_uint]
libc.syscall.restype = ctypes.c_long


class _MountAttr(ctypes.Structure):
    """``struct mount_attr`` (``MOUNT_ATTR_SIZE_VER0``, 32 bytes)."""

    _fields_ = [("attr_set", ctypes.c_uint64), ("attr_clr", ctypes.c_uint64),
                ("propagation", ctypes.c_uint64), ("userns_fd", ctypes.c_uint64)]


def _check(ret: int, what: str, path: str | os.PathLike[str] | None = None) -> None:
    if ret != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}", None if path is None else str(path))


def _bytes(value: str | os.PathLike[str] | None) -> bytes | None:
    return None if value is None else os.fsencode(value)


def mount(source: str | None, target: str | os.PathLike[str], fstype: str | None, flags: int,
          data: str | None = None) -> None:
    """``mount(2)``."""
    _check(libc.mount(_bytes(source), _bytes(target), _bytes(fstype), flags, _bytes(data)),
           f"mount {fstype or source or ''}".rstrip(), target)


def umount(target: str | os.PathLike[str], flags: int = 0) -> None:
    """``umount2(2)``."""
    _check(libc.umount2(_bytes(target), flags), "umount", target)


def unshare(flags: int) -> None:
    """``unshare(2)`` for the calling thread."""
    _check(libc.unshare(flags), f"unshare({flags:#x})")


def setns(fd: int, nstype: int, path: str = "") -> None:
    """``setns(2)`` for the calling thread; ``path`` only names the namespace in errors."""
    _check(libc.setns(fd, nstype), f"setns({nstype:#x})", path or None)


def sethostname(name: str) -> None:
    """``sethostname(2)`` in the calling thread's UTS namespace."""
    raw = name.encode()
    _check(libc.sethostname(raw, len(raw)), f"sethostname {name!r}")


def set_child_subreaper(enable: bool) -> None:
    """``prctl(PR_SET_CHILD_SUBREAPER)``."""
    _check(libc.prctl(PR_SET_CHILD_SUBREAPER, 1 if enable else 0, 0, 0, 0),
           "prctl(PR_SET_CHILD_SUBREAPER)")


def is_child_subreaper() -> bool:
    """``prctl(PR_GET_CHILD_SUBREAPER)``; False when it cannot be asked."""
    value = ctypes.c_int(0)
    if libc.prctl(PR_GET_CHILD_SUBREAPER, ctypes.byref(value), 0, 0, 0) != 0:
        return False
    return value.value != 0


def fs_type(path: str | os.PathLike[str]) -> int:
    """The ``f_type`` magic number of the file system holding ``path`` (``statfs(2)``)."""
    buf = ctypes.create_string_buffer(256)
    _check(libc.statfs(_bytes(path), buf), "statfs", path)
    return int.from_bytes(buf.raw[:8], "little", signed=True)


def start_writeback(fd: int, offset: int, length: int) -> None:
    """Ask the kernel to start writing a range back (``sync_file_range``; async, best effort)."""
    libc.sync_file_range(fd, offset, length, SYNC_FILE_RANGE_WRITE)


def _mallopt(param: int, value: int) -> bool:
    """glibc's ``mallopt``; False when the C library has none or refuses (not glibc)."""
    mallopt = getattr(libc, "mallopt", None)
    if mallopt is None:
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    return bool(mallopt(param, value))


def set_malloc_arena_max(count: int) -> bool:
    """Cap glibc's malloc arenas at ``count`` (``mallopt(M_ARENA_MAX)``): threads that
    allocate share them instead of keeping one each with its freed memory. False when the C
    library has no ``mallopt`` or refuses (not glibc)."""
    if isinstance(count, bool) or not isinstance(count, int) or count < 1:
        raise ValueError(f"malloc arena cap {count!r}: want a whole number >= 1")
    return _mallopt(M_ARENA_MAX, count)


def set_malloc_mmap_threshold(size: int) -> bool:
    """Give each malloc block of ``size`` bytes or more its own mapping, returned to the
    system when freed (``mallopt(M_MMAP_THRESHOLD)``). Setting it also stops glibc from
    raising the threshold to the size of every such block freed (up to 32 MiB), after which
    big short-lived buffers (a module's bytecode, a JSON document) come from the heap and
    leave it fragmented. False when the C library has no ``mallopt`` or refuses."""
    if isinstance(size, bool) or not isinstance(size, int) or size < 1:
        raise ValueError(f"malloc mmap threshold {size!r}: want a whole number of bytes >= 1")
    return _mallopt(M_MMAP_THRESHOLD, size)


def malloc_trim() -> bool:
    """Return the free pages of every malloc arena to the system (``malloc_trim(0)``, which
    also releases free pages inside the heap); whether any went. False without glibc."""
    trim = getattr(libc, "malloc_trim", None)
    if trim is None:
        return False
    trim.argtypes = [ctypes.c_size_t]
    return bool(trim(0))


def _syscall(number: int, *args: object) -> int:
    return int(libc.syscall(ctypes.c_long(number), *args))


def open_tree(path: str | os.PathLike[str], flags: int) -> int:
    """``open_tree(AT_FDCWD, path, flags)``: with ``OPEN_TREE_CLONE`` a detached copy of the
    mount at ``path`` (and its submounts with ``AT_RECURSIVE``), as a new file descriptor."""
    fd = _syscall(_SYS_OPEN_TREE, ctypes.c_int(AT_FDCWD), _bytes(path),
                  ctypes.c_uint(flags | os.O_CLOEXEC))
    if fd < 0:
        _check(fd, "open_tree", path)
    return fd


def mount_setattr_idmap(fd: int, userns_fd: int, *, recursive: bool,
                        path: str | os.PathLike[str] = "") -> None:
    """``mount_setattr(fd, "", AT_EMPTY_PATH, {MOUNT_ATTR_IDMAP, userns_fd, MS_SLAVE})``:
    ID-map the detached mount ``fd`` (and its submounts when ``recursive``) by the maps of
    ``userns_fd``, and make it a slave of its source's peer group (mounts made later under the
    source reach it; nothing done under it reaches the source, an unmount included); ``path``
    only names the mount in errors."""
    attr = _MountAttr(attr_set=MOUNT_ATTR_IDMAP, userns_fd=userns_fd, propagation=MS_SLAVE)
    flags = AT_EMPTY_PATH | (AT_RECURSIVE if recursive else 0)
    _check(_syscall(_SYS_MOUNT_SETATTR, ctypes.c_int(fd), b"", ctypes.c_uint(flags),
                    ctypes.byref(attr), ctypes.c_size_t(ctypes.sizeof(attr))),
           "mount_setattr(MOUNT_ATTR_IDMAP)", path or None)


def move_mount(fd: int, target: str | os.PathLike[str]) -> None:
    """``move_mount(fd, "", AT_FDCWD, target, MOVE_MOUNT_F_EMPTY_PATH)``: attach the detached
    mount ``fd`` at ``target``."""
    _check(_syscall(_SYS_MOVE_MOUNT, ctypes.c_int(fd), b"", ctypes.c_int(AT_FDCWD),
                    _bytes(target), ctypes.c_uint(MOVE_MOUNT_F_EMPTY_PATH)),
           "move_mount", target)
