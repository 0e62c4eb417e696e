"""``pod logs``/``exec``/``attach`` logic without containers: durations, CRI log following
(rotation, truncation, partial lines), --since/--tail, detach keys, the local terminal."""

from __future__ import annotations

import os
import pty
import signal
import termios
from pathlib import Path

import pytest

from podkit._cli.pod_logs import LogFilter, initial_lines, select_lines
from podkit._cli.pod_term import forward_resize, raw_terminal, terminal_size
from podkit._cli.pod_time import parse_duration, parse_since
from podkit.errors import InvalidArgumentError
from podkit.runtime import parse_detach_keys
from podkit.runtime.console import set_winsize
from podkit.runtime.log_follow import CRILogFollower, LineJoiner, follow_cri_log
from podkit.runtime.logs import CRILogEntry, format_cri_log_entry

T0 = 1_700_000_000_000_000_000


def rec(t: int, content: bytes, stream: str = "stdout", partial: bool = False) -> bytes:
    return format_cri_log_entry(T0 + t, stream, content, partial)


# -- durations ------------------------------------------------------------------------------

@pytest.mark.parametrize(("text", "seconds"), [
    ("60s", 60.0), ("2m", 120.0), ("500ms", 0.5), ("1h30m", 5400.0), ("1.5s", 1.5),
    ("10", 10.0), ("0.25", 0.25), ("250us", 0.00025), ("1m0.5s", 60.5), ("0s", 0.0),
])
def test_parse_duration(text: str, seconds: float) -> None:
    assert parse_duration(text, "--timeout") == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["", "s", "-5s", "5 s", "5x", "1h-2m", "60sec", "ms5", "1e3"])
def test_parse_duration_refuses_and_names_the_option(text: str) -> None:
    with pytest.raises(InvalidArgumentError, match=r"--timeout .*not a duration"):
        parse_duration(text, "--timeout")


def test_parse_since_duration_ago_or_rfc3339() -> None:
    now = T0 + 600 * 10**9
    assert parse_since("10m", "--since", now) == T0
    assert parse_since("2023-11-14T22:13:20Z", "--since", now) == T0
    assert parse_since("2023-11-14T23:13:20+01:00", "--since", now) == T0
    with pytest.raises(InvalidArgumentError, match="--since '2023-13-01T00:00:00Z'"):
        parse_since("2023-13-01T00:00:00Z", "--since", now)
    with pytest.raises(InvalidArgumentError, match="--since 'yesterday'"):
        parse_since("yesterday", "--since", now)


# -- detach keys ----------------------------------------------------------------------------

def test_detach_keys() -> None:
    assert parse_detach_keys("ctrl-p,ctrl-q") == b"\x10\x11"
    assert parse_detach_keys("a,ctrl-@,ctrl-[") == b"a\x00\x1b"
    for bad in ("ctrl-pq", "ctrl-1", "ab", "a,,b"):
        with pytest.raises(InvalidArgumentError, match=f"invalid detach key.*{bad!r}"):
            parse_detach_keys(bad)


# -- following ------------------------------------------------------------------------------

def test_follower_reads_whole_records_only(tmp_path: Path) -> None:
    log = tmp_path / "c.log"
    with CRILogFollower(log) as f:
        assert f.read() == []  # no file yet
        two = rec(2, b"two")
        log.write_bytes(rec(1, b"one") + two[:-3])
        first = f.read()
        assert [e.content for e in first] == [b"one"]
        with open(log, "ab") as fh:  # the rest of record 2 arrives later
            fh.write(two[-3:])
        assert [e.content for e in f.read()] == [b"two"]
        assert f.read() == []


def test_follower_across_rename_and_reopen(tmp_path: Path) -> None:
    log = tmp_path / "c.log"
    log.write_bytes(rec(1, b"a"))
    with CRILogFollower(log) as f:
        assert [e.content for e in f.read()] == [b"a"]
        with open(log, "ab") as fh:
            fh.write(rec(2, b"b"))
        log.rename(tmp_path / "c.log.1")  # rotated: the writer has not reopened yet
        with open(tmp_path / "c.log.1", "ab") as fh:
            fh.write(rec(3, b"c"))  # still written to the old file
        assert [e.content for e in f.read()] == [b"b", b"c"]
        log.write_bytes(rec(4, b"d"))  # the reopened file
        with open(tmp_path / "c.log.1", "ab") as fh:
            fh.write(rec(3, b"c2"))  # the old file's last words come first
        assert [e.content for e in f.read()] == [b"c2", b"d"]
        with open(log, "ab") as fh:
            fh.write(rec(5, b"e"))
        assert [e.content for e in f.read()] == [b"e"]


def test_follower_after_truncation_starts_over(tmp_path: Path) -> None:
    log = tmp_path / "c.log"
    log.write_bytes(rec(1, b"first long line") + rec(2, b"second"))
    with CRILogFollower(log) as f:
        assert len(f.read()) == 2
        with open(log, "r+b") as fh:
            fh.truncate(0)
            fh.write(rec(3, b"x"))
        assert [e.content for e in f.read()] == [b"x"]


def test_follower_names_the_bad_record(tmp_path: Path) -> None:
    log = tmp_path / "c.log"
    log.write_bytes(rec(1, b"ok") + b"garbage here\n")
    with CRILogFollower(log) as f, pytest.raises(InvalidArgumentError,
                                                 match=f"record 2 of {log}"):
        f.read()


def test_follow_stops_once_done_and_drained(tmp_path: Path) -> None:
    log = tmp_path / "c.log"
    log.write_bytes(rec(1, b"a"))
    looks: list[int] = []
    sleeps: list[float] = []

    def done() -> bool:
        looks.append(1)
        if len(looks) == 2:  # written while the first sleep ran
            with open(log, "ab") as fh:
                fh.write(rec(2, b"b"))
        if len(looks) == 3:  # the writer writes its last record and finishes
            with open(log, "ab") as fh:
                fh.write(rec(3, b"c"))
        return len(looks) >= 3

    got = [e.content for e in follow_cri_log(log, done, sleep=sleeps.append)]
    assert got == [b"a", b"b", b"c"]
    assert len(looks) == 4  # a last look after "done" found the file drained


def test_line_joiner_partial_records_per_stream() -> None:
    j = LineJoiner()
    parts = [CRILogEntry(T0 + 1, "stdout", True, b"hel"),
             CRILogEntry(T0 + 2, "stderr", False, b"err"),
             CRILogEntry(T0 + 3, "stdout", False, b"lo"),
             CRILogEntry(T0 + 4, "stderr", True, b"cut")]
    lines = [line for e in parts if (line := j.feed(e)) is not None]
    assert [(x.stream, x.content, x.time_ns) for x in lines] == [
        ("stderr", b"err", T0 + 2), ("stdout", b"hello", T0 + 1)]
    rest = j.flush()
    assert [(x.content, x.complete) for x in rest] == [(b"cut", False)]
    assert j.flush() == []


def test_since_tail_and_stream_on_a_recorded_log(tmp_path: Path) -> None:
    log = tmp_path / "c.log"
    log.write_bytes(b"".join([
        rec(1, b"one"), rec(2, b"e1", "stderr"), rec(3, b"two-", partial=True),
        rec(4, b"end"), rec(5, b"e2", "stderr"), rec(6, b"three"), rec(7, b"pend", partial=True),
    ]))
    with CRILogFollower(log) as f:
        j = LineJoiner()
        lines = initial_lines(f.read(), j)
    texts = [x.content for x in lines]
    assert texts == [b"one", b"e1", b"two-end", b"e2", b"three"]
    assert [x.content for x in j.flush()] == [b"pend"]  # unfinished: not in the initial lines
    assert [x.content for x in select_lines(lines, LogFilter(tail=2))] == [b"e2", b"three"]
    assert select_lines(lines, LogFilter(tail=0)) == []
    assert [x.content for x in select_lines(lines, LogFilter(tail=99))] == texts
    assert [x.content for x in select_lines(lines, LogFilter(stream="stderr"))] == [b"e1", b"e2"]
    # a joined line has its first chunk's time
    assert [x.content for x in select_lines(lines, LogFilter(since_ns=T0 + 3))] == [
        b"two-end", b"e2", b"three"]
    assert [x.content for x in select_lines(
        lines, LogFilter(since_ns=T0 + 4, stream="stdout", tail=1))] == [b"three"]


# -- the local terminal ---------------------------------------------------------------------

def test_raw_terminal_restores_the_settings() -> None:
    master, slave = pty.openpty()
    try:
        before = termios.tcgetattr(slave)
        with raw_terminal(slave) as raw:
            assert raw
            assert not termios.tcgetattr(slave)[3] & termios.ECHO
        assert termios.tcgetattr(slave) == before
        with pytest.raises(RuntimeError), raw_terminal(slave):
            raise RuntimeError("boom")
        assert termios.tcgetattr(slave) == before
    finally:
        os.close(master)
        os.close(slave)
    r, w = os.pipe()
    try:
        with raw_terminal(r) as raw:
            assert not raw  # not a terminal: left alone
    finally:
        os.close(r)
        os.close(w)


def test_forward_resize_on_sigwinch() -> None:
    master, slave = pty.openpty()
    seen: list[tuple[int, int]] = []
    try:
        set_winsize(slave, 24, 80)
        assert terminal_size(slave) == (24, 80)
        old = signal.getsignal(signal.SIGWINCH)
        with forward_resize(lambda r, c: seen.append((r, c)), slave):
            set_winsize(slave, 40, 120)
            os.kill(os.getpid(), signal.SIGWINCH)
        assert seen == [(40, 120)]
        assert signal.getsignal(signal.SIGWINCH) == old
    finally:
        os.close(master)
        os.close(slave)
    r, w = os.pipe()
    try:
        assert terminal_size(r) is None
        with forward_resize(lambda r, c: seen.append((r, c)), r):
            os.kill(os.getpid(), signal.SIGWINCH)
        assert seen == [(40, 120)]
    finally:
        os.close(r)
        os.close(w)
