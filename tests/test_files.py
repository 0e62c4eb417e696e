"""Tests for podkit._files: atomic writes, locks, ID validation, safe joins."""

from __future__ import annotations

import multiprocessing
import os
import stat
from pathlib import Path
from typing import Any

import pytest

from podkit import _files
from podkit.errors import ConflictError, InvalidArgumentError, PodkitError


@pytest.mark.parametrize("value", ["a", "abc-123", "A.b_c-d", "0", "x" * _files.MAX_ID_LENGTH])
def test_validate_id_accepts(value: str) -> None:
    assert _files.validate_id(value) == value


@pytest.mark.parametrize(
    "value",
    ["", ".", "..", "-a", "_a", ".hidden", "a/b", "../x", "a b", "a\0b", "é", "x" * 129],
)
def test_validate_id_rejects_with_value_in_message(value: str) -> None:
    with pytest.raises(InvalidArgumentError) as exc:
        _files.validate_id(value, "container ID")
    assert "container ID" in str(exc.value)
    assert isinstance(exc.value, PodkitError) and isinstance(exc.value, ValueError)


def test_validate_id_rejects_non_string() -> None:
    with pytest.raises(InvalidArgumentError, match="must be a string"):
        _files.validate_id(123)  # type: ignore[arg-type]


def test_safe_join(tmp_path: Path) -> None:
    assert _files.safe_join(tmp_path, "a", "b") == tmp_path / "a" / "b"
    for bad in ("..", ".", "", "a/b", "/abs"):
        with pytest.raises(InvalidArgumentError, match="unsafe path component"):
            _files.safe_join(tmp_path, "ok", bad)


def test_atomic_write_creates_with_mode(tmp_path: Path) -> None:
    target = tmp_path / "f.json"
    _files.atomic_write(target, "hello", mode=0o600)
    assert target.read_text() == "hello"
    assert stat.S_IMODE(target.stat().st_mode) == 0o600
    _files.atomic_write(target, b"bytes")
    assert target.read_bytes() == b"bytes"
    assert stat.S_IMODE(target.stat().st_mode) == 0o644
    assert os.listdir(tmp_path) == ["f.json"]  # no temp file left


def test_atomic_write_failure_keeps_old_content_and_leaves_no_temp(tmp_path: Path) -> None:
    target = tmp_path / "f"
    target.write_text("old")
    with pytest.raises(TypeError):
        _files.atomic_write(target, 12345)  # type: ignore[arg-type]
    assert target.read_text() == "old"
    assert os.listdir(tmp_path) == ["f"]


def test_atomic_write_into_missing_dir_raises(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        _files.atomic_write(tmp_path / "missing" / "f", "x")


def _hold_lock(path: str, ready: Any, done: Any) -> None:
    with _files.file_lock(path):
        ready.set()
        done.wait(10)


def test_file_lock_excludes_other_processes(tmp_path: Path) -> None:
    lock = str(tmp_path / "lock")
    ctx = multiprocessing.get_context("fork")
    ready, done = ctx.Event(), ctx.Event()
    proc = ctx.Process(target=_hold_lock, args=(lock, ready, done))
    proc.start()
    try:
        assert ready.wait(10)
        with pytest.raises(ConflictError, match="locked"), _files.file_lock(lock, blocking=False):
            pass
    finally:
        done.set()
        proc.join(10)
    with _files.file_lock(lock, blocking=False):
        pass


def test_shared_locks_coexist(tmp_path: Path) -> None:
    lock = tmp_path / "lock"
    with _files.file_lock(lock, shared=True), _files.file_lock(lock, shared=True, blocking=False):
        pass


def test_sweep_atomic_temps_removes_only_old_temp_files(tmp_path: Path) -> None:
    """What a write killed inside atomic_write leaves (``.<name>.XXXXXXXX.tmp``), and only
    when older than the given time; other files, names and directories stay."""
    import tempfile

    fd, made = tempfile.mkstemp(dir=tmp_path, prefix=".rec.json.", suffix=".tmp")
    os.close(fd)  # exactly the name atomic_write's mkstemp gives
    others = ["rec.json", ".rec.json.tmp", "x.abcdefgh.tmp", ".rec.json.ABCDEFGH.tmp"]
    for name in others:
        (tmp_path / name).write_text("x")
    (tmp_path / ".dir.abcdefgh.tmp").mkdir()
    for p in tmp_path.iterdir():
        os.utime(p, (1, 1))
    fresh = tmp_path / ".new.json.abcdefgh.tmp"
    fresh.write_text("x")
    assert _files.is_atomic_temp(Path(made).name)
    assert _files.sweep_atomic_temps(tmp_path, older_than=100.0) == [Path(made)]
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        [*others, ".dir.abcdefgh.tmp", fresh.name])
    assert _files.sweep_atomic_temps(tmp_path / "missing", older_than=100.0) == []
    assert _files.sweep_atomic_temps(tmp_path / "rec.json", older_than=100.0) == []


def test_make_dirs_gives_every_new_dir_the_mode(tmp_path: Path) -> None:
    old = os.umask(0o077)
    try:
        made = _files.make_dirs(tmp_path / "a" / "b" / "c", 0o711)
    finally:
        os.umask(old)
    assert made == tmp_path / "a" / "b" / "c"
    for d in (tmp_path / "a", tmp_path / "a" / "b", made):
        assert stat.S_IMODE(d.stat().st_mode) == 0o711
    os.chmod(tmp_path / "a", 0o755)
    _files.make_dirs(tmp_path / "a" / "d", 0o700)  # an existing dir is left as it is
    assert stat.S_IMODE((tmp_path / "a").stat().st_mode) == 0o755
    assert stat.S_IMODE((tmp_path / "a" / "d").stat().st_mode) == 0o700


def test_make_dirs_refuses_a_file_in_the_way(tmp_path: Path) -> None:
    (tmp_path / "f").write_text("")
    with pytest.raises(OSError):
        _files.make_dirs(tmp_path / "f" / "d", 0o700)
