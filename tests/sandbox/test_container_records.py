"""A container's record on disk around create and start (real runc and conmon): the runtime
step is recorded with the bundle, a start writes the record once, and the failure, older-record
and removal paths leave the record right and nothing behind."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from podkit.runtime.errors import OCIRuntimeError
from podkit.sandbox import ContainerState, SandboxManager

from ._pods import ctr_config, managed, pod_config

pytestmark = pytest.mark.integration


@pytest.fixture
def mgr(bridge: None, rootfs: Path, tmp_path: Path) -> Iterator[SandboxManager]:
    yield from managed(tmp_path / "m", rootfs)


def _on_disk(m: SandboxManager, id: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(m.records.path("containers", id).read_text())
    return data


def _record_saves(m: SandboxManager, monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """Each container record the manager writes, as read back from disk right after."""
    saves: list[dict[str, Any]] = []
    real = m.records.save

    def save(obj: Any) -> None:
        real(obj)
        if m.records.path("containers", obj.id).exists():
            saves.append(_on_disk(m, obj.id))

    monkeypatch.setattr(m.records, "save", save)
    return saves


def _steps_at_start(m: SandboxManager, monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    """The steps the record on disk names when the supervisor is asked to start."""
    seen: list[list[str]] = []
    real = m.supervisor.start

    def start(id: str, *args: Any, **kw: Any) -> int:
        seen.append(_on_disk(m, id)["steps"])
        return real(id, *args, **kw)

    monkeypatch.setattr(m.supervisor, "start", start)
    return seen


def test_create_records_the_runtime_step_and_start_writes_once(
        mgr: SandboxManager, rootfs: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    sb = mgr.run_sandbox(pod_config())
    saves = _record_saves(mgr, monkeypatch)
    cid = mgr.create_container(sb.id, ctr_config(rootfs, "app", ["sleep", "60"]))
    assert [(s["steps"], s["phase"]) for s in saves] == [(["bundle", "runtime"], "created")]
    saves.clear()
    at_start = _steps_at_start(mgr, monkeypatch)
    mgr.start_container(cid)
    assert at_start == [["bundle", "runtime"]]
    [after] = saves
    status = mgr.container_status(cid)
    assert status.state == ContainerState.CONTAINER_RUNNING and status.pid > 0
    assert after["state"] == ContainerState.CONTAINER_RUNNING.value
    assert (after["pid"], after["started_at"]) == (status.pid, status.started_at)
    assert _on_disk(mgr, cid) == after


def test_never_started_container_is_removed_with_nothing_left(
        mgr: SandboxManager, rootfs: Path) -> None:
    sb = mgr.run_sandbox(pod_config())
    cid = mgr.create_container(sb.id, ctr_config(rootfs, "app", ["sleep", "60"]))
    mgr.remove_container(cid)
    assert not mgr.records.path("containers", cid).exists()
    assert not (mgr.root_dir / "containers" / cid).exists()
    assert [s.id for s in mgr.runtime.list()] == [sb.id]  # the pause only
    assert mgr.list_containers() == []


def test_a_record_without_the_runtime_step_gets_it_before_the_start(
        mgr: SandboxManager, rootfs: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A container created by an older podkit (its record names no runtime step yet)."""
    sb = mgr.run_sandbox(pod_config())
    cid = mgr.create_container(sb.id, ctr_config(rootfs, "app", ["sleep", "60"]))
    c = mgr.registry.container(cid)
    c.steps = ("bundle",)
    mgr.records.save(c)
    saves = _record_saves(mgr, monkeypatch)
    at_start = _steps_at_start(mgr, monkeypatch)
    mgr.start_container(cid)
    assert at_start == [["bundle", "runtime"]]
    assert [s["state"] for s in saves] == [ContainerState.CONTAINER_CREATED.value,
                                            ContainerState.CONTAINER_RUNNING.value]


def test_a_start_the_runtime_refuses_drops_the_runtime_step(
        mgr: SandboxManager, rootfs: Path) -> None:
    sb = mgr.run_sandbox(pod_config())
    cid = mgr.create_container(sb.id, ctr_config(rootfs, "bad", ["/nonexistent"]))
    with pytest.raises(OCIRuntimeError, match="/nonexistent"):
        mgr.start_container(cid)
    disk = _on_disk(mgr, cid)
    assert disk["steps"] == ["bundle"]
    assert (disk["state"], disk["reason"]) == (ContainerState.CONTAINER_EXITED.value,
                                               "StartError")
    assert [s.id for s in mgr.runtime.list()] == [sb.id]
    mgr.remove_container(cid)
    assert not mgr.records.path("containers", cid).exists()
    assert not (mgr.root_dir / "containers" / cid).exists()
