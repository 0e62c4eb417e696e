"""Conmon.run: the runtime's start is begun before conmon's record is written; a failing start
or a failing record write leaves nothing (no conmon, no state dir, no runtime container)."""

from __future__ import annotations

from typing import Any

import pytest

from podkit.runtime import conmon
from podkit.runtime.alongside import Alongside
from podkit.runtime.errors import NotFoundError, OCIRuntimeError

from ._conmon_env import Env, conmon_pids_for

pytestmark = pytest.mark.integration


def _nothing_left(env: Env, cid: str) -> None:
    assert not env.conmon.container_dir(cid).exists()
    assert conmon_pids_for(cid) == []
    with pytest.raises(NotFoundError):
        env.runc.state(cid)


def test_start_is_begun_before_the_record_is_written(
        env: Env, monkeypatch: pytest.MonkeyPatch) -> None:
    order: list[str] = []
    real_begin, real_write = Alongside.begin, conmon.atomic_write

    def begin(self: Alongside) -> None:
        order.append("begin")
        real_begin(self)

    def write(path: Any, data: Any, mode: int = 0o644) -> None:
        order.append(f"write {path.name}")
        real_write(path, data, mode=mode)

    monkeypatch.setattr(Alongside, "begin", begin)
    monkeypatch.setattr(conmon, "atomic_write", write)
    cid = env.new_id("order")
    record = env.conmon.run(cid, env.bundle(cid, ["sleep", "30"]))
    assert order == ["begin", "write conmon.json"]
    assert env.runc.state(cid).status == "running" and env.conmon.get(cid) == record
    env.conmon.delete(cid, force=True)


def test_a_failing_start_deletes_the_container(env: Env,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    def start(id: str) -> None:
        raise OCIRuntimeError("start refused", ["runc", "start", id])

    monkeypatch.setattr(env.runc, "start", start)
    cid = env.new_id("nostart")
    with pytest.raises(OCIRuntimeError, match="start refused"):
        env.conmon.run(cid, env.bundle(cid, ["sleep", "30"]))
    _nothing_left(env, cid)


def test_a_failing_record_write_waits_for_the_start_then_removes_all(
        env: Env, monkeypatch: pytest.MonkeyPatch) -> None:
    started: list[str] = []
    real_start = env.runc.start

    def start(id: str) -> None:
        real_start(id)
        started.append(id)

    def write(path: Any, data: Any, mode: int = 0o644) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(env.runc, "start", start)
    monkeypatch.setattr(conmon, "atomic_write", write)
    cid = env.new_id("norecord")
    with pytest.raises(OSError, match="No space left"):
        env.conmon.run(cid, env.bundle(cid, ["sleep", "30"]))
    assert started == [cid]  # the start had ended before the cleanup deleted the container
    _nothing_left(env, cid)
