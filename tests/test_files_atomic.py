"""atomic_write's own temp file: its name, name clashes, short writes, relative paths."""

from __future__ import annotations

import itertools
import os
from pathlib import Path

import pytest

from podkit import _files
from podkit._files import atomic_write, is_atomic_temp


def test_temp_name_is_one_the_sweep_knows(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                          ) -> None:
    seen: list[str] = []
    real = os.replace

    def replace(src: str, dst: str) -> None:
        seen.append(os.path.basename(src))
        real(src, dst)

    monkeypatch.setattr(os, "replace", replace)
    atomic_write(tmp_path / "rec.json", "{}", mode=0o600)
    [name] = seen
    assert name.startswith(".rec.json.") and is_atomic_temp(name)
    assert (tmp_path / "rec.json").read_text() == "{}"
    assert oct((tmp_path / "rec.json").stat().st_mode & 0o777) == oct(0o600)


def test_a_taken_temp_name_is_skipped(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / ".rec.json.aaaaaaaa.tmp").write_text("someone else's")
    (tmp_path / ".rec.json.bbbbbbbb.tmp").symlink_to(tmp_path / "elsewhere")
    names = iter(["aaaaaaaa", "bbbbbbbb", "cccccccc"])
    monkeypatch.setattr(_files.secrets, "token_hex", lambda n: next(names))
    atomic_write(tmp_path / "rec.json", b"new")
    assert (tmp_path / "rec.json").read_bytes() == b"new"
    assert (tmp_path / ".rec.json.aaaaaaaa.tmp").read_text() == "someone else's"
    assert not (tmp_path / "elsewhere").exists()  # never written through the link
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        ".rec.json.aaaaaaaa.tmp", ".rec.json.bbbbbbbb.tmp", "rec.json"]


def test_no_free_temp_name_fails_and_keeps_the_old_file(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "rec.json").write_text("old")
    (tmp_path / ".rec.json.aaaaaaaa.tmp").write_text("x")
    monkeypatch.setattr(_files.secrets, "token_hex", lambda n: "aaaaaaaa")
    with pytest.raises(FileExistsError, match="no free temp file name"):
        atomic_write(tmp_path / "rec.json", "new")
    assert (tmp_path / "rec.json").read_text() == "old"


def test_short_writes_are_continued(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    real = os.write
    calls = itertools.count()

    def write(fd: int, data: bytes) -> int:
        next(calls)
        return real(fd, bytes(data[:3]))

    monkeypatch.setattr(os, "write", write)
    atomic_write(tmp_path / "rec.json", "0123456789")
    assert (tmp_path / "rec.json").read_text() == "0123456789"
    assert next(calls) == 4


def test_a_failed_fsync_removes_the_temp_and_keeps_the_old_file(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "rec.json").write_text("old")

    def fsync(fd: int) -> None:
        raise OSError(5, "I/O error")

    monkeypatch.setattr(os, "fsync", fsync)
    with pytest.raises(OSError, match="I/O error"):
        atomic_write(tmp_path / "rec.json", "new")
    assert [p.name for p in tmp_path.iterdir()] == ["rec.json"]
    assert (tmp_path / "rec.json").read_text() == "old"


def test_relative_path_in_the_working_directory(tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    atomic_write("rec.json", "here")
    assert (tmp_path / "rec.json").read_text() == "here"
    assert [p.name for p in tmp_path.iterdir()] == ["rec.json"]


def test_not_durable_writes_the_same_file_without_fsync(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    synced: list[int] = []
    monkeypatch.setattr(os, "fsync", synced.append)
    atomic_write(tmp_path / "config.json", "{}", 0o600, durable=False)
    assert synced == []
    assert (tmp_path / "config.json").read_text() == "{}"
    assert (tmp_path / "config.json").stat().st_mode & 0o777 == 0o600
    assert [p.name for p in tmp_path.iterdir()] == ["config.json"]
