"""The CRI container log format: writer (with rotation), line parser and reader.

Kubernetes reads container logs from files the runtime writes, one record per line::

    2016-10-06T00:17:09.669794202Z stdout F hello world
    2016-10-06T00:17:09.669794202Z stderr P a long line, first chunk
    2016-10-06T00:17:09.669800000Z stderr F , and its end

``<timestamp> <stream> <tag> <content>\\n``: the timestamp is RFC 3339 with nanoseconds, the
stream ``stdout`` or ``stderr``, the tag ``F`` for a full line (its newline is the record's
newline) or ``P`` for a partial chunk (a line longer than the buffer, or output cut at EOF; the
record's newline is not part of the content). Further tags may follow the first after ``:``.

Timestamps: podkit writes UTC with a ``Z`` suffix and exactly nine fraction digits. conmon
writes local time with a numeric offset (``+00:00``) and containerd Go's ``RFC3339Nano``
(trailing zeros trimmed); kubelet parses with Go's ``time.RFC3339Nano``, which accepts all of
them, and so does :func:`parse_cri_log_line`.

Rotation (:class:`CRILogWriter` with ``max_size``) follows the logrotate naming, not kubelet's
timestamped names: ``file.log`` is current, ``file.log.1`` the previous one, up to
``max_files - 1`` old files; ``max_files == 1`` truncates in place like conmon's
``--log-size-max``.
"""

from __future__ import annotations

import datetime as _dt
import os
import re
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

import attrs

from podkit.errors import InvalidArgumentError

__all__ = [
    "DEFAULT_MAX_LINE",
    "STDERR",
    "STDOUT",
    "CRILogEntry",
    "CRILogLine",
    "CRILogWriter",
    "format_cri_log_entry",
    "format_cri_timestamp",
    "parse_cri_log_line",
    "parse_cri_timestamp",
    "read_cri_log",
    "reassemble",
    "rotated_paths",
]

STDOUT = "stdout"
STDERR = "stderr"
_STREAMS = (STDOUT, STDERR)
TAG_PARTIAL = "P"
TAG_FULL = "F"

DEFAULT_MAX_LINE = 16 * 1024
"""Longest line kept whole (containerd's CRI logger buffer); longer lines become P chunks."""

_READ_CHUNK = 32 * 1024

_TS_RE = re.compile(
    r"(\d{4})-(\d{2})-(\d{2})[Tt](\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,9}))?"
    r"(?:([Zz])|([+-])(\d{2}):(\d{2}))\Z"
)


def format_cri_timestamp(time_ns: int) -> str:
    """RFC 3339 UTC timestamp with nine fraction digits, e.g. ``2016-10-06T00:17:09.669794202Z``."""
    secs, nanos = divmod(time_ns, 1_000_000_000)
    moment = _dt.datetime.fromtimestamp(secs, tz=_dt.UTC)
    return f"{moment:%Y-%m-%dT%H:%M:%S}.{nanos:09d}Z"


def parse_cri_timestamp(text: str) -> int:
    """Nanoseconds since the epoch from an RFC 3339 timestamp as kubelet accepts it.

    Accepts ``Z`` or ``±HH:MM`` offsets and 0-9 fraction digits (conmon, containerd, podkit).
    """
    m = _TS_RE.match(text)
    if m is None:
        raise InvalidArgumentError(f"invalid CRI log timestamp {text!r}: not RFC 3339")
    year, month, day, hour, minute, sec = (int(g) for g in m.group(1, 2, 3, 4, 5, 6))
    fraction = (m.group(7) or "").ljust(9, "0")
    if m.group(8):
        offset = 0
    else:
        offset = int(m.group(10)) * 3600 + int(m.group(11)) * 60
        if m.group(9) == "-":
            offset = -offset
    try:
        base = _dt.datetime(year, month, day, hour, minute, sec, tzinfo=_dt.UTC)
    except ValueError as exc:
        raise InvalidArgumentError(f"invalid CRI log timestamp {text!r}: {exc}") from None
    seconds = int(base.timestamp()) - offset
    return seconds * 1_000_000_000 + int(fraction)


@attrs.frozen(slots=True)
class CRILogEntry:
    """One record of a CRI log file: a full line (``partial=False``) or a chunk of one.

    ``content`` never includes the record's newline.
    """

    time_ns: int
    stream: str
    partial: bool
    content: bytes
    tags: tuple[str, ...] = ()

    @property
    def timestamp(self) -> _dt.datetime:
        """The record time as an aware UTC datetime (microsecond precision)."""
        return _dt.datetime.fromtimestamp(self.time_ns / 1e9, tz=_dt.UTC)


@attrs.frozen(slots=True)
class CRILogLine:
    """A reassembled line: the content of consecutive P records plus their closing F record.

    ``complete`` is False when the log ended before the line's F record (output cut at EOF);
    ``time_ns`` is the time of the first chunk.
    """

    time_ns: int
    stream: str
    content: bytes
    complete: bool = True


def format_cri_log_entry(time_ns: int, stream: str, content: bytes, partial: bool) -> bytes:
    """Encode one record: ``<timestamp> <stream> <P|F> <content>\\n``.

    ``content`` must not contain a newline: split lines before calling.
    """
    if stream not in _STREAMS:
        raise InvalidArgumentError(f"invalid CRI log stream {stream!r}: want stdout or stderr")
    if b"\n" in content:
        raise InvalidArgumentError("CRI log record content must not contain a newline")
    tag = TAG_PARTIAL if partial else TAG_FULL
    return b"%s %s %s %s\n" % (
        format_cri_timestamp(time_ns).encode(),
        stream.encode(),
        tag.encode(),
        content,
    )


def parse_cri_log_line(line: bytes | str, where: str = "CRI log line") -> CRILogEntry:
    """Parse one record (with or without its trailing newline), as kubelet's ``parseCRILog``.

    Raises :class:`podkit.errors.InvalidArgumentError` naming ``where`` for a malformed line.
    """
    raw = line.encode() if isinstance(line, str) else line
    if raw.endswith(b"\n"):
        raw = raw[:-1]
    parts = raw.split(b" ", 3)
    if len(parts) < 3:
        raise InvalidArgumentError(
            f"invalid {where} {raw[:80]!r}: want '<time> <stream> <tag> <content>'"
        )
    ts_raw, stream_raw, tag_raw = parts[0], parts[1], parts[2]
    content = parts[3] if len(parts) == 4 else b""
    try:
        time_ns = parse_cri_timestamp(ts_raw.decode("ascii"))
    except (UnicodeDecodeError, InvalidArgumentError):
        raise InvalidArgumentError(
            f"invalid {where} {raw[:80]!r}: timestamp {ts_raw[:40]!r} is not RFC 3339"
        ) from None
    stream = stream_raw.decode("ascii", errors="replace")
    if stream not in _STREAMS:
        raise InvalidArgumentError(f"invalid {where} {raw[:80]!r}: unexpected stream {stream!r}")
    tags = tuple(t.decode("ascii", errors="replace") for t in tag_raw.split(b":"))
    if tags[0] not in (TAG_PARTIAL, TAG_FULL):
        raise InvalidArgumentError(f"invalid {where} {raw[:80]!r}: unexpected tag {tags[0]!r}")
    return CRILogEntry(time_ns, stream, tags[0] == TAG_PARTIAL, content, tags[1:])


def reassemble(entries: Iterable[CRILogEntry]) -> Iterator[CRILogLine]:
    """Join P chunks with the F record that ends them, per stream (streams may interleave).

    A stream's pending chunks at the end become one line with ``complete=False``.
    """
    pending: dict[str, list[CRILogEntry]] = {}
    for entry in entries:
        chunks = pending.setdefault(entry.stream, [])
        chunks.append(entry)
        if entry.partial:
            continue
        yield CRILogLine(chunks[0].time_ns, entry.stream, b"".join(c.content for c in chunks))
        chunks.clear()
    for stream, chunks in pending.items():
        if chunks:
            yield CRILogLine(
                chunks[0].time_ns, stream, b"".join(c.content for c in chunks), complete=False
            )


def rotated_paths(path: str | os.PathLike[str]) -> list[Path]:
    """Existing rotated files of ``path`` (``path.1``, ``path.2``, ...), oldest first."""
    base = Path(path)
    found: list[tuple[int, Path]] = []
    if base.parent.is_dir():
        prefix = base.name + "."
        for child in base.parent.iterdir():
            suffix = child.name[len(prefix):]
            if child.name.startswith(prefix) and suffix.isdigit():
                found.append((int(suffix), child))
    return [p for _, p in sorted(found, reverse=True)]


def read_cri_log(
    path: str | os.PathLike[str], *, include_rotated: bool = False
) -> list[CRILogLine]:
    """Read a CRI log file (and, optionally, its rotated files first) into whole lines."""
    files = [*rotated_paths(path), Path(path)] if include_rotated else [Path(path)]
    entries: list[CRILogEntry] = []
    for file in files:
        with open(file, "rb") as fh:
            for number, line in enumerate(fh, 1):
                if line.strip():
                    entries.append(parse_cri_log_line(line, where=f"line {number} of {file}"))
    return list(reassemble(entries))


class CRILogWriter:
    """Write container output to a CRI log file, with partial lines and size rotation.

    ``write(stream, data)`` buffers per stream until a newline; a line longer than
    ``max_line`` is written as P chunks, and whatever is pending at ``flush``/``close`` or at
    the end of a pumped fd becomes a P record. ``pump(fd, stream)`` copies a pipe (the
    container's stdout or stderr) into the log on a thread: the in-process counterpart of what
    conmon does. With ``max_size`` the file is rotated before a record would take it past the
    limit (see the module docstring); ``reopen()`` is for rotation done by someone else.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        max_size: int = 0,
        max_files: int = 1,
        max_line: int = DEFAULT_MAX_LINE,
        clock: Callable[[], int] = time.time_ns,
    ) -> None:
        if max_size < 0:
            raise InvalidArgumentError(f"invalid log max_size {max_size}: must be >= 0")
        if max_files < 1:
            raise InvalidArgumentError(f"invalid log max_files {max_files}: must be >= 1")
        if max_line < 1:
            raise InvalidArgumentError(f"invalid log max_line {max_line}: must be >= 1")
        self.path = Path(path)
        self.max_size = max_size
        self.max_files = max_files
        self.max_line = max_line
        self._clock = clock
        self._lock = threading.Lock()
        self._pending: dict[str, bytearray] = {STDOUT: bytearray(), STDERR: bytearray()}
        self._threads: list[threading.Thread] = []
        self._fd = -1
        self._size = 0
        self._open()

    # -- file handling -------------------------------------------------------------------

    def _open(self) -> None:
        self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o640)
        self._size = os.fstat(self._fd).st_size

    def _rotate_locked(self) -> None:
        os.close(self._fd)
        self._fd = -1
        if self.max_files == 1:
            os.truncate(self.path, 0)
        else:
            oldest = Path(f"{self.path}.{self.max_files - 1}")
            if oldest.exists():
                oldest.unlink()
            for index in range(self.max_files - 2, 0, -1):
                src = Path(f"{self.path}.{index}")
                if src.exists():
                    src.rename(f"{self.path}.{index + 1}")
            if self.path.exists():
                self.path.rename(f"{self.path}.1")
        self._open()

    def rotate(self) -> None:
        """Rotate now (``file.log`` becomes ``file.log.1``, ...) and continue in a new file."""
        with self._lock:
            self._check_open()
            self._rotate_locked()

    def reopen(self) -> None:
        """Close and reopen the path (after an external rotation moved the file away)."""
        with self._lock:
            self._check_open()
            os.close(self._fd)
            self._fd = -1
            self._open()

    def _check_open(self) -> None:
        if self._fd < 0:
            raise InvalidArgumentError(f"CRI log writer for {self.path} is closed")

    def _emit_locked(self, stream: str, content: bytes, partial: bool) -> None:
        record = format_cri_log_entry(self._clock(), stream, content, partial)
        if self.max_size and self._size and self._size + len(record) > self.max_size:
            self._rotate_locked()
        view = memoryview(record)
        while view:
            written = os.write(self._fd, view)
            view = view[written:]
        self._size += len(record)

    # -- data ----------------------------------------------------------------------------

    def write(self, stream: str, data: bytes) -> None:
        """Add output of ``stream``; complete lines are written at once, the rest is held."""
        if stream not in _STREAMS:
            raise InvalidArgumentError(f"invalid CRI log stream {stream!r}: want stdout or stderr")
        with self._lock:
            self._check_open()
            buf = self._pending[stream]
            buf += data
            while True:
                newline = buf.find(b"\n", 0, self.max_line + 1)
                if newline >= 0:
                    self._emit_locked(stream, bytes(buf[:newline]), partial=False)
                    del buf[: newline + 1]
                elif len(buf) > self.max_line:
                    self._emit_locked(stream, bytes(buf[: self.max_line]), partial=True)
                    del buf[: self.max_line]
                else:
                    break

    def flush(self, stream: str | None = None) -> None:
        """Write held partial output (of one stream or both) as P records."""
        with self._lock:
            if self._fd < 0:
                return
            for name in (stream,) if stream else _STREAMS:
                buf = self._pending[name]
                if buf:
                    self._emit_locked(name, bytes(buf), partial=True)
                    buf.clear()

    def pump(self, fd: int, stream: str) -> threading.Thread:
        """Copy ``fd`` into the log on a daemon thread until EOF, then flush and close ``fd``.

        The thread owns ``fd``. :meth:`join` waits for every pump of this writer.
        """
        if stream not in _STREAMS:
            raise InvalidArgumentError(f"invalid CRI log stream {stream!r}: want stdout or stderr")

        def run() -> None:
            try:
                while True:
                    try:
                        chunk = os.read(fd, _READ_CHUNK)
                    except OSError:  # EIO from a pty whose other side is gone
                        break
                    if not chunk:
                        break
                    self.write(stream, chunk)
                self.flush(stream)
            finally:
                os.close(fd)

        thread = threading.Thread(target=run, name=f"cri-log-{stream}", daemon=True)
        with self._lock:
            self._threads.append(thread)
        thread.start()
        return thread

    def join(self, timeout: float | None = None) -> bool:
        """Wait for the pump threads; True when all finished."""
        deadline = None if timeout is None else time.monotonic() + timeout
        for thread in list(self._threads):
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            thread.join(left)
        return not any(t.is_alive() for t in self._threads)

    def close(self) -> None:
        """Flush held partial output and close the file (pumps should have finished)."""
        self.flush()
        with self._lock:
            if self._fd >= 0:
                os.close(self._fd)
                self._fd = -1

    def __enter__(self) -> CRILogWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
