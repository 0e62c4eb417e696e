"""File helpers every layer shares: atomic writes, advisory locks, ID validation, safe joins."""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import re
import secrets
from collections.abc import Iterator
from pathlib import Path

from podkit.errors import ConflictError, InvalidArgumentError

__all__ = [
    "MAX_ID_LENGTH",
    "atomic_write",
    "file_lock",
    "fsync_dir",
    "is_atomic_temp",
    "make_dirs",
    "safe_join",
    "sweep_atomic_temps",
    "validate_id",
]

MAX_ID_LENGTH = 128
_ID_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*\Z")
_TEMP_SUFFIX = ".tmp"
# ".<target name>.<8 characters of mkstemp>.tmp": what atomic_write leaves if killed mid-write
_TEMP_RE = re.compile(r"\..+\.[a-z0-9_]{8}\.tmp\Z")

StrPath = str | os.PathLike[str]


def validate_id(value: str, what: str = "ID") -> str:
    """Return ``value`` if it is safe as a single path component, else raise.

    IDs become directory and file names, so they must match ``[A-Za-z0-9][A-Za-z0-9_.-]*``,
    be at most ``MAX_ID_LENGTH`` characters and never be ``.`` or ``..``.
    """
    if not isinstance(value, str):
        raise InvalidArgumentError(f"invalid {what} {value!r}: must be a string")
    if not value:
        raise InvalidArgumentError(f"invalid {what}: must not be empty")
    if len(value) > MAX_ID_LENGTH:
        raise InvalidArgumentError(
            f"invalid {what} {value[:32]!r}...: longer than {MAX_ID_LENGTH} characters"
        )
    if not _ID_RE.match(value):
        raise InvalidArgumentError(
            f"invalid {what} {value!r}: must match [A-Za-z0-9][A-Za-z0-9_.-]*"
        )
    return value


def safe_join(base: StrPath, *parts: str) -> Path:
    """Join ``parts`` under ``base``, refusing separators, ``..`` and empty parts."""
    path = Path(base)
    for part in parts:
        if not part or part in (".", "..") or "/" in part or "\0" in part:
            raise InvalidArgumentError(f"unsafe path component {part!r} under {os.fspath(base)}")
        path = path / part
    return path


def make_dirs(path: StrPath, mode: int) -> Path:
    """``mkdir -p`` where every directory it creates gets ``mode`` (``os.makedirs`` gives it
    to the last only); directories that exist are left as they are."""
    path = Path(path).absolute()
    missing = []
    for d in (path, *path.parents):
        if d.is_dir():
            break
        missing.append(d)
    for d in reversed(missing):
        try:
            os.mkdir(d, mode)
        except FileExistsError:
            if not d.is_dir():
                raise
            continue
        os.chmod(d, mode)  # exactly, whatever the umask
    return path


def fsync_dir(directory: StrPath) -> None:
    """fsync a directory so a rename or unlink inside it survives a crash."""
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def atomic_write(path: StrPath, data: bytes | str, mode: int = 0o644, *,
                 durable: bool = True) -> None:
    """Write ``data`` to ``path`` so readers see the old file or the new one, never a part.

    Temp file (0600 from the start) in the same directory, chmod ``mode``, fsync, rename over
    ``path``, fsync the directory. On any error the temp file is removed and ``path`` is
    untouched. Not ``durable``: no fsyncs, for files read at once and never needed after a
    power loss (a bundle's ``config.json``).
    """
    target = os.fspath(path)
    directory, name = os.path.split(target)
    raw = data.encode() if isinstance(data, str) else data
    fd, tmp = _open_temp(directory, name)
    try:
        try:
            view = memoryview(raw)
            while view:
                view = view[os.write(fd, view):]
            os.fchmod(fd, mode)
            if durable:
                os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    if durable:
        fsync_dir(directory or ".")


def _open_temp(directory: str, name: str) -> tuple[int, str]:
    """A new private temp file ``.<name>.<8 random hex digits>.tmp`` in ``directory``
    (what ``tempfile.mkstemp`` does, without its Python-level name generator and file
    object: every record write pays for it)."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    for _ in range(100):
        tmp = os.path.join(directory, f".{name}.{secrets.token_hex(4)}{_TEMP_SUFFIX}")
        try:
            return os.open(tmp, flags, 0o600), tmp
        except FileExistsError:
            continue
    raise FileExistsError(errno.EEXIST, "no free temp file name", os.path.join(directory, name))


def is_atomic_temp(name: str) -> bool:
    """Whether ``name`` is an :func:`atomic_write` temp file (``.<name>.XXXXXXXX.tmp``)."""
    return _TEMP_RE.match(name) is not None


def sweep_atomic_temps(directory: StrPath, *, older_than: float) -> list[Path]:
    """Remove :func:`atomic_write` temp files in ``directory`` last modified before
    ``older_than`` (a ``time.time()``); the removed paths. A missing directory is fine."""
    removed: list[Path] = []
    try:
        entries = list(os.scandir(directory))
    except (FileNotFoundError, NotADirectoryError):
        return removed
    for entry in entries:
        if not is_atomic_temp(entry.name) or not entry.is_file(follow_symlinks=False):
            continue
        with contextlib.suppress(FileNotFoundError):
            if entry.stat(follow_symlinks=False).st_mtime < older_than:
                os.unlink(entry.path)
                removed.append(Path(entry.path))
    return removed


@contextlib.contextmanager
def file_lock(path: StrPath, *, shared: bool = False, blocking: bool = True) -> Iterator[int]:
    """Hold an advisory ``flock`` on ``path`` (created if missing) for the ``with`` block.

    Serialises processes and threads alike (each call opens its own file description).
    With ``blocking=False`` a held lock raises ``ConflictError`` instead of waiting.
    """
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        op = fcntl.LOCK_SH if shared else fcntl.LOCK_EX
        if not blocking:
            op |= fcntl.LOCK_NB
        try:
            fcntl.flock(fd, op)
        except OSError as e:
            if e.errno in (errno.EWOULDBLOCK, errno.EAGAIN):
                raise ConflictError(f"{os.fspath(path)} is locked by another process") from e
            raise
        yield fd
    finally:
        os.close(fd)  # closing the last descriptor releases the lock
