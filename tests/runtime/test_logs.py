"""Unit tests for podkit.runtime.logs: the CRI log format, partial lines, rotation, parsing."""

from __future__ import annotations

import datetime as dt
import os
import threading
from pathlib import Path

import pytest

from podkit.errors import InvalidArgumentError
from podkit.runtime.logs import (
    CRILogEntry,
    CRILogLine,
    CRILogWriter,
    format_cri_log_entry,
    format_cri_timestamp,
    parse_cri_log_line,
    parse_cri_timestamp,
    read_cri_log,
    reassemble,
    rotated_paths,
)

T0 = 1_475_713_029_669_794_202  # 2016-10-06T00:17:09.669794202Z


class Clock:
    """A fake clock advancing one nanosecond per reading."""

    def __init__(self, start: int = T0) -> None:
        self.now = start

    def __call__(self) -> int:
        self.now += 1
        return self.now - 1


def raw_records(path: Path) -> list[bytes]:
    return path.read_bytes().splitlines(keepends=True)


# -- timestamps --------------------------------------------------------------------------


def test_timestamp_format_is_rfc3339_nano_utc() -> None:
    assert format_cri_timestamp(T0) == "2016-10-06T00:17:09.669794202Z"
    assert format_cri_timestamp(T0 - 669_794_202) == "2016-10-06T00:17:09.000000000Z"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2016-10-06T00:17:09.669794202Z", T0),
        ("2016-10-06T00:17:09.669794202+00:00", T0),  # conmon: local time with offset
        ("2016-10-06T02:17:09.669794202+02:00", T0),
        ("2016-10-05T22:17:09.669794202-02:00", T0),
        ("2016-10-06T00:17:09.6697942Z", T0 - 2),  # containerd: trailing zeros trimmed
        ("2016-10-06T00:17:09Z", T0 - 669_794_202),
    ],
)
def test_timestamp_parse_accepts_what_kubelet_accepts(text: str, expected: int) -> None:
    assert parse_cri_timestamp(text) == expected


@pytest.mark.parametrize(
    "text", ["", "2016-10-06 00:17:09Z", "2016-10-06T00:17:09", "2016-13-06T00:17:09Z", "x"]
)
def test_timestamp_parse_rejects_garbage(text: str) -> None:
    with pytest.raises(InvalidArgumentError, match="timestamp"):
        parse_cri_timestamp(text)


# -- records -----------------------------------------------------------------------------


def test_format_and_parse_round_trip() -> None:
    record = format_cri_log_entry(T0, "stderr", b"hello world", partial=True)
    assert record == b"2016-10-06T00:17:09.669794202Z stderr P hello world\n"
    entry = parse_cri_log_line(record)
    assert entry == CRILogEntry(T0, "stderr", True, b"hello world")
    assert entry.timestamp == dt.datetime(2016, 10, 6, 0, 17, 9, 669794, tzinfo=dt.UTC)


def test_format_refuses_newline_and_bad_stream() -> None:
    with pytest.raises(InvalidArgumentError, match="newline"):
        format_cri_log_entry(T0, "stdout", b"a\nb", partial=False)
    with pytest.raises(InvalidArgumentError, match="'stdin'"):
        format_cri_log_entry(T0, "stdin", b"a", partial=False)


def test_parse_keeps_spaces_in_content_and_extra_tags() -> None:
    entry = parse_cri_log_line("2016-10-06T00:17:09.669794202Z stdout F:x:y  two  spaces \n")
    assert entry.content == b" two  spaces "
    assert entry.partial is False
    assert entry.tags == ("x", "y")


def test_parse_empty_content() -> None:
    assert parse_cri_log_line(b"2016-10-06T00:17:09Z stdout F \n").content == b""
    assert parse_cri_log_line(b"2016-10-06T00:17:09Z stdout F\n").content == b""


def test_parse_conmon_line() -> None:
    # A record exactly as conmon 2.1.6 writes it (k8s-file driver).
    entry = parse_cri_log_line(b"2026-12-02T10:20:31.123456789+00:00 stdout P abc\n")
    assert (entry.stream, entry.partial, entry.content) == ("stdout", True, b"abc")


@pytest.mark.parametrize(
    ("line", "what"),
    [
        (b"garbage\n", "want"),
        (b"notatime stdout F x\n", "timestamp"),
        (b"2016-10-06T00:17:09Z stdin F x\n", "stream 'stdin'"),
        (b"2016-10-06T00:17:09Z stdout X x\n", "tag 'X'"),
    ],
)
def test_parse_rejects_malformed_lines_naming_the_source(line: bytes, what: str) -> None:
    with pytest.raises(InvalidArgumentError, match=what) as info:
        parse_cri_log_line(line, where="line 7 of /x.log")
    assert "line 7 of /x.log" in str(info.value)


def test_reassemble_joins_partials_per_stream() -> None:
    entries = [
        CRILogEntry(1, "stdout", True, b"he"),
        CRILogEntry(2, "stderr", False, b"err line"),
        CRILogEntry(3, "stdout", True, b"ll"),
        CRILogEntry(4, "stdout", False, b"o"),
        CRILogEntry(5, "stderr", True, b"cut at eof"),
    ]
    assert list(reassemble(entries)) == [
        CRILogLine(2, "stderr", b"err line"),
        CRILogLine(1, "stdout", b"hello"),
        CRILogLine(5, "stderr", b"cut at eof", complete=False),
    ]


# -- writer ------------------------------------------------------------------------------


def test_writer_full_lines_and_partial_at_flush(tmp_path: Path) -> None:
    log = tmp_path / "c.log"
    with CRILogWriter(log, clock=Clock()) as writer:
        writer.write("stdout", b"one\ntw")
        writer.write("stderr", b"oops\n")
        writer.write("stdout", b"o\nthree")
    assert raw_records(log) == [
        b"2016-10-06T00:17:09.669794202Z stdout F one\n",
        b"2016-10-06T00:17:09.669794203Z stderr F oops\n",
        b"2016-10-06T00:17:09.669794204Z stdout F two\n",
        b"2016-10-06T00:17:09.669794205Z stdout P three\n",
    ]
    assert [(ln.stream, ln.content, ln.complete) for ln in read_cri_log(log)] == [
        ("stdout", b"one", True),
        ("stderr", b"oops", True),
        ("stdout", b"two", True),
        ("stdout", b"three", False),
    ]


def test_writer_splits_long_lines_into_partials(tmp_path: Path) -> None:
    log = tmp_path / "c.log"
    with CRILogWriter(log, max_line=4, clock=Clock()) as writer:
        writer.write("stdout", b"abcdefghij\nwxyz\n12")
        writer.write("stdout", b"345\n")
    tags = [parse_cri_log_line(r) for r in raw_records(log)]
    assert [(e.partial, e.content) for e in tags] == [
        (True, b"abcd"),
        (True, b"efgh"),
        (False, b"ij"),
        (False, b"wxyz"),  # exactly max_line bytes: still one full line
        (True, b"1234"),
        (False, b"5"),
    ]
    assert [ln.content for ln in read_cri_log(log)] == [b"abcdefghij", b"wxyz", b"12345"]


def test_writer_empty_lines(tmp_path: Path) -> None:
    log = tmp_path / "c.log"
    with CRILogWriter(log, clock=Clock()) as writer:
        writer.write("stdout", b"\n\nx\n")
    assert [ln.content for ln in read_cri_log(log)] == [b"", b"", b"x"]


def test_writer_appends_to_existing_file(tmp_path: Path) -> None:
    log = tmp_path / "c.log"
    for word in (b"first", b"second"):
        with CRILogWriter(log) as writer:
            writer.write("stdout", word + b"\n")
    assert [ln.content for ln in read_cri_log(log)] == [b"first", b"second"]


def test_writer_rotates_by_size_and_count(tmp_path: Path) -> None:
    log = tmp_path / "c.log"
    record_len = len(format_cri_log_entry(T0, "stdout", b"line-0", partial=False))
    with CRILogWriter(log, max_size=2 * record_len, max_files=3, clock=Clock()) as writer:
        for i in range(7):
            writer.write("stdout", b"line-%d\n" % i)
    assert rotated_paths(log) == [tmp_path / "c.log.2", tmp_path / "c.log.1"]
    assert not (tmp_path / "c.log.3").exists()
    for path in [log, *rotated_paths(log)]:
        assert path.stat().st_size <= 2 * record_len
    assert [ln.content for ln in read_cri_log(log)] == [b"line-6"]
    assert [ln.content for ln in read_cri_log(log, include_rotated=True)] == [
        b"line-2", b"line-3", b"line-4", b"line-5", b"line-6"
    ]


def test_writer_max_files_one_truncates(tmp_path: Path) -> None:
    log = tmp_path / "c.log"
    record_len = len(format_cri_log_entry(T0, "stdout", b"line-0", partial=False))
    with CRILogWriter(log, max_size=record_len, clock=Clock()) as writer:
        for i in range(3):
            writer.write("stdout", b"line-%d\n" % i)
    assert rotated_paths(log) == []
    assert [ln.content for ln in read_cri_log(log)] == [b"line-2"]


def test_writer_reopen_after_external_rotation(tmp_path: Path) -> None:
    log = tmp_path / "c.log"
    with CRILogWriter(log, clock=Clock()) as writer:
        writer.write("stdout", b"before\n")
        log.rename(tmp_path / "c.log.old")
        writer.reopen()
        writer.write("stdout", b"after\n")
    assert [ln.content for ln in read_cri_log(log)] == [b"after"]
    assert [ln.content for ln in read_cri_log(tmp_path / "c.log.old")] == [b"before"]


def test_writer_rejects_bad_arguments(tmp_path: Path) -> None:
    with pytest.raises(InvalidArgumentError, match="max_size"):
        CRILogWriter(tmp_path / "a.log", max_size=-1)
    with pytest.raises(InvalidArgumentError, match="max_files"):
        CRILogWriter(tmp_path / "a.log", max_files=0)
    writer = CRILogWriter(tmp_path / "a.log")
    with pytest.raises(InvalidArgumentError, match="'stdin'"):
        writer.write("stdin", b"x")
    writer.close()
    with pytest.raises(InvalidArgumentError, match="closed"):
        writer.write("stdout", b"x\n")


def test_writer_pump_copies_pipe_until_eof(tmp_path: Path) -> None:
    log = tmp_path / "c.log"
    writer = CRILogWriter(log, max_line=8)
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    writer.pump(out_r, "stdout")
    writer.pump(err_r, "stderr")
    os.write(out_w, b"hello ")
    os.write(err_w, b"bad\n")
    os.write(out_w, b"world, a long line\nno newline at eof")
    os.close(out_w)
    os.close(err_w)
    assert writer.join(timeout=30)
    writer.close()
    lines = read_cri_log(log)
    by_stream = {s: [(ln.content, ln.complete) for ln in lines if ln.stream == s] for s in
                 ("stdout", "stderr")}
    assert by_stream == {
        "stdout": [(b"hello world, a long line", True), (b"no newline at eof", False)],
        "stderr": [(b"bad", True)],
    }
    with pytest.raises(OSError):
        os.fstat(out_r)  # the pump closed its fd


def test_writer_is_thread_safe(tmp_path: Path) -> None:
    log = tmp_path / "c.log"
    writer = CRILogWriter(log)

    def spam(stream: str) -> None:
        for i in range(200):
            writer.write(stream, b"%s-%d\n" % (stream.encode(), i))

    threads = [threading.Thread(target=spam, args=(s,)) for s in ("stdout", "stderr")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    writer.close()
    lines = read_cri_log(log)
    assert len(lines) == 400
    assert [ln.content for ln in lines if ln.stream == "stderr"] == [
        b"stderr-%d" % i for i in range(200)
    ]
