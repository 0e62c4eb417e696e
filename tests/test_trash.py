"""podkit._trash: directories gone from their place at once, deleted on a background thread."""

from __future__ import annotations

import errno
import logging
import os
import shutil
import stat
from pathlib import Path
from typing import Any

import pytest

from podkit import _trash


def _tree(path: Path) -> Path:
    (path / "a" / "b").mkdir(parents=True)
    (path / "a" / "b" / "file").write_text("x")
    (path / "top").write_text("y")
    return path


def test_a_removed_dir_is_gone_at_once_and_deleted_after(tmp_path: Path) -> None:
    d = _tree(tmp_path / "kind" / "id1")
    trash = tmp_path / _trash.TRASH
    _trash.remove_later(d, trash)
    assert not d.exists()
    assert (tmp_path / "kind").is_dir() and list((tmp_path / "kind").iterdir()) == []
    assert stat.S_IMODE(trash.stat().st_mode) == 0o700
    assert _trash.wait(30)
    assert not trash.exists()  # emptied, then removed


def test_a_missing_dir_is_fine(tmp_path: Path) -> None:
    _trash.remove_later(tmp_path / "nothing", tmp_path / _trash.TRASH)
    assert _trash.wait(30)
    assert not (tmp_path / _trash.TRASH).exists()


def test_leftovers_of_a_killed_process_go_with_the_next_removal(tmp_path: Path) -> None:
    trash = tmp_path / _trash.TRASH
    _tree(trash / "old.0badc0de")
    (trash / "stray-file").write_text("z")
    _trash.remove_later(_tree(tmp_path / "id2"), trash)
    assert _trash.wait(30)
    assert not trash.exists()
    _tree(trash / "older.12345678")
    _trash.empty_later(trash)
    assert _trash.wait(30)
    assert not trash.exists()


def test_a_trash_removed_between_mkdir_and_rename_is_made_again(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    trash = tmp_path / _trash.TRASH
    real_rename, calls = os.rename, []

    def rename(src: object, dst: object) -> None:
        calls.append(dst)
        if len(calls) == 1:  # the thread emptied and removed it just now
            trash.rmdir()
        real_rename(src, dst)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "rename", rename)
    d = _tree(tmp_path / "id6")
    _trash.remove_later(d, trash)
    assert len(calls) == 2 and not d.exists()
    assert _trash.wait(30)
    assert not trash.exists()


def test_a_dir_that_cannot_move_is_deleted_in_the_call(tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    def cross_device(src: object, dst: object) -> None:
        raise OSError(errno.EXDEV, "Invalid cross-device link")

    monkeypatch.setattr(os, "rename", cross_device)
    d = _tree(tmp_path / "id3")
    _trash.remove_later(d, tmp_path / _trash.TRASH)
    assert not d.exists()


def test_a_dir_that_can_neither_move_nor_go_is_an_error(tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(src: object, dst: object) -> None:
        raise OSError(errno.EBUSY, "Device or resource busy")

    monkeypatch.setattr(os, "rename", refuse)
    monkeypatch.setattr(shutil, "rmtree", lambda path, ignore_errors=False: None if
                        ignore_errors else (_ for _ in ()).throw(OSError(errno.EBUSY, "busy")))
    d = _tree(tmp_path / "id4")
    with pytest.raises(OSError, match="busy"):
        _trash.remove_later(d, tmp_path / _trash.TRASH)
    assert d.exists()


def test_what_cannot_be_deleted_is_logged_and_left(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                   caplog: pytest.LogCaptureFixture) -> None:
    trash = tmp_path / _trash.TRASH
    monkeypatch.setattr(shutil, "rmtree", lambda path, ignore_errors=False: None)
    with caplog.at_level(logging.WARNING, logger="podkit.trash"):
        _trash.remove_later(_tree(tmp_path / "id5"), trash)
        assert _trash.wait(30)
    [left] = trash.iterdir()
    assert left.name.startswith("id5.")
    assert f"could not delete {left}" in caplog.text


def test_a_trash_removed_inside_mkdir_is_made_again(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """mkdir finds the trash, the thread removes it (emptied), is_dir() then fails: retried."""
    (tmp_path / "pod").mkdir()
    real, raised = Path.mkdir, []

    def mkdir(self: Path, *args: Any, **kw: Any) -> None:
        if not raised:
            raised.append(self)
            raise FileExistsError(17, "File exists", str(self))
        real(self, *args, **kw)

    monkeypatch.setattr(Path, "mkdir", mkdir)
    _trash.remove_later(tmp_path / "pod", tmp_path / ".trash")
    assert _trash.wait(10)
    assert raised == [tmp_path / ".trash"] and not (tmp_path / "pod").exists()
