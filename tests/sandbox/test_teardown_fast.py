"""The fast paths of run_sandbox and remove_sandbox (issue 16): one record write per step
group, a removal that does not stop a stopped pod again, and the pod's deletes at once; the
pod's files deleted after the removal returns (issue 22).

Unit tests drive the manager over ``FakeRuntime``; the integration tests use real runc,
conmon and CNI plugins and fail on anything left behind.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import attrs
import pytest

from podkit import _trash
from podkit.errors import PodkitError
from podkit.pods.config import ContainerConfig, ContainerMetadata
from podkit.pods.steps import at_once
from podkit.runtime.testing import FakeRuntime
from podkit.sandbox import (
    Container,
    ContainerState,
    PauseConfig,
    Sandbox,
    SandboxManager,
    SandboxState,
)

from ._fakes import FakeSupervisor, host_pod
from ._pods import ctr_config, do_then_fail, managed, pod_config


class Injected(PodkitError):
    """The fault a test injects."""


# -- unit: at_once ----------------------------------------------------------------------------


def test_at_once_runs_every_job_and_returns_their_errors_in_order() -> None:
    ran: list[tuple[int, str]] = []
    lock = threading.Lock()

    def job(i: int, fail: bool = False) -> Callable[[], None]:
        def run() -> None:
            with lock:
                ran.append((i, threading.current_thread().name))
            if fail:
                raise Injected(f"job {i}")
        return run

    errors = at_once([job(0), job(1, fail=True), job(2)])
    assert sorted(i for i, _ in ran) == [0, 1, 2]  # a failure stops none of the others
    assert [str(e) if e else None for e in errors] == [None, "job 1", None]
    names = dict(ran)
    assert names[2] == threading.current_thread().name  # the last runs on the caller
    assert len({names[0], names[1], names[2]}) == 3
    assert at_once([]) == []


# -- unit: what run_sandbox and remove_sandbox write ------------------------------------------


@pytest.fixture
def parts(tmp_path: Path) -> Iterator[tuple[SandboxManager, FakeRuntime, list[Any]]]:
    """A manager over FakeRuntime whose record writes are logged (a copy of each record)."""
    rootfs = tmp_path / "rootfs"
    (rootfs / "etc").mkdir(parents=True)
    rt = FakeRuntime()
    m = SandboxManager(tmp_path / "root", tmp_path / "state", rt, None,
                       pause=PauseConfig(rootfs=str(rootfs)), supervisor=FakeSupervisor(rt))
    saved: list[Any] = []
    real = m.records.save

    def save(obj: Sandbox | Container) -> None:
        saved.append(attrs.evolve(obj))
        real(obj)

    m.records.save = save  # type: ignore[method-assign]
    yield m, rt, saved
    m.close()


def _ctr(rootfs: Path) -> ContainerConfig:
    return ContainerConfig(metadata=ContainerMetadata(name="c"), image=str(rootfs),
                           command=["sleep", "1"])


def test_run_records_every_step_before_the_first_then_created(parts: Any) -> None:
    """Two writes: every planned step (and the pause's cgroups path) before any is taken,
    then the created pod; the record in memory lists only the steps taken."""
    m, _, saved = parts
    sb = m.run_sandbox(host_pod())
    pods = [s for s in saved if isinstance(s, Sandbox)]
    assert [(s.steps, s.phase) for s in pods] == [
        (("files", "pause"), "creating"), (("files", "pause"), "created")]
    assert pods[0].cgroups_path and pods[0].cgroups_path == sb.cgroups_path


def test_run_failure_undoes_only_the_steps_taken(parts: Any, tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """The record on disk lists the pause before the files fail; the undo in this process
    does not touch the pause (never started) and leaves nothing."""
    m, _, _ = parts
    undone: list[str] = []
    for name in ("files", "pause"):
        step = m.steps[name]
        monkeypatch.setitem(m.steps, name, attrs.evolve(
            step, undo=lambda sb, step=step: (undone.append(step.name), step.undo(sb))[-1]))
    monkeypatch.setitem(m.steps, "files", do_then_fail(m.steps["files"], Injected("disk")))
    with pytest.raises(Injected):
        m.run_sandbox(host_pod())
    assert undone == ["files"]
    assert m.list_sandboxes() == []
    assert not any((tmp_path / "state" / "sandboxes").iterdir())
    assert not any((tmp_path / "root" / "sandboxes").iterdir())


def test_remove_moves_the_pod_and_container_dirs_away_and_deletes_them_after(
    parts: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 22: the removal renames the dirs into root/.trash at once (no wait for one disk
    write per file) and the trash thread deletes them; close() waits for it."""
    m, _, _ = parts
    sb = m.run_sandbox(host_pod())
    cid = m.create_container(sb.id, _ctr(tmp_path / "rootfs"))
    m.start_container(cid)
    root = tmp_path / "root"
    pod_dir, ctr_dir = root / "sandboxes" / sb.id, root / "containers" / cid
    assert pod_dir.is_dir() and ctr_dir.is_dir()
    held = threading.Event()
    real_empty = _trash._empty
    monkeypatch.setattr(_trash, "_empty", lambda trash: (held.wait(30), real_empty(trash))[-1])
    m.stop_sandbox(sb.id)
    m.remove_sandbox(sb.id)
    assert not pod_dir.exists() and not ctr_dir.exists()
    trash = root / _trash.TRASH
    assert sorted(p.name.split(".")[0] for p in trash.iterdir()) == sorted([sb.id, cid])
    held.set()
    m.close()  # waits for the deletes
    assert not trash.exists()


def test_recover_empties_the_trash_a_killed_process_left(tmp_path: Path) -> None:
    rootfs = tmp_path / "rootfs"
    (rootfs / "etc").mkdir(parents=True)
    left = tmp_path / "root" / _trash.TRASH / "0123abcd.deadbeef" / "bundle"
    left.mkdir(parents=True)
    (left / "config.json").write_text("{}")
    rt = FakeRuntime()
    m = SandboxManager(tmp_path / "root", tmp_path / "state", rt, None,
                       pause=PauseConfig(rootfs=str(rootfs)), supervisor=FakeSupervisor(rt))
    try:
        m.recover()
        assert _trash.wait(30)
        assert not (tmp_path / "root" / _trash.TRASH).exists()
    finally:
        m.close()


def test_remove_writes_the_pod_record_once_and_no_container_record(
    parts: Any, tmp_path: Path
) -> None:
    m, rt, saved = parts
    sb = m.run_sandbox(host_pod())
    cid = m.create_container(sb.id, _ctr(tmp_path / "rootfs"))
    m.start_container(cid)
    m.stop_sandbox(sb.id)
    assert rt.containers == {}  # deleted by the stop
    assert m.container_status(cid).state == ContainerState.CONTAINER_EXITED
    saved.clear()
    m.remove_sandbox(sb.id)
    assert [(type(s).__name__, s.phase) for s in saved] == [("Sandbox", "removing")]
    assert saved[0].steps == ("files",)  # the pause went with the stop
    assert rt.containers == {}
    assert not any((tmp_path / "state" / "sandboxes").iterdir())
    assert not any((tmp_path / "state" / "containers").iterdir())


def test_remove_failing_leaves_the_pod_removing_and_a_retry_finishes(
    parts: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A container whose delete fails: the pause is still deleted, the error names the
    container, the pod stays listed NOTREADY (recorded ``removing``: recover() would undo
    it); removing again finishes."""
    m, rt, _ = parts
    sb = m.run_sandbox(host_pod())
    cid = m.create_container(sb.id, _ctr(tmp_path / "rootfs"))
    m.start_container(cid)
    real = m.supervisor.delete

    def delete(id: str, force: bool = False) -> None:
        if id == cid:
            raise Injected(f"delete {id}: device busy")
        real(id, force)

    monkeypatch.setattr(m.supervisor, "delete", delete)
    with pytest.raises(Injected, match=f"delete {cid}: device busy"):
        m.remove_sandbox(sb.id)
    assert sb.id not in rt.containers and cid in rt.containers
    [listed] = m.list_sandboxes()
    assert listed.id == sb.id and listed.state == SandboxState.SANDBOX_NOTREADY
    record = json.loads((tmp_path / "state" / "sandboxes" / f"{sb.id}.json").read_text())
    assert record["phase"] == "removing"
    monkeypatch.undo()
    m.remove_sandbox(sb.id)
    assert m.list_sandboxes() == [] and rt.containers == {}
    assert not any((tmp_path / "state" / "containers").iterdir())


# -- integration: real runc, conmon and CNI -----------------------------------------------------


@pytest.fixture
def mgr(bridge: None, rootfs: Path, tmp_path: Path) -> Iterator[SandboxManager]:
    yield from managed(tmp_path / "m", rootfs)


def _log_calls(monkeypatch: pytest.MonkeyPatch, obj: object, method: str,
               calls: list[tuple[str, str]]) -> None:
    """Log ``(container ID, thread name)`` of each call of ``obj.method``."""
    real = getattr(obj, method)

    def call(id: str, *args: Any, **kwargs: Any) -> Any:
        calls.append((id, threading.current_thread().name))
        return real(id, *args, **kwargs)

    monkeypatch.setattr(obj, method, call)


@pytest.mark.integration
def test_stop_deletes_at_once_and_remove_then_kills_and_deletes_nothing(
    mgr: SandboxManager, rootfs: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The stop deletes the killed container and pause from runc (each on its own thread);
    the exit code stays recorded; the removal runs no runc kill or delete at all."""
    sb = mgr.run_sandbox(pod_config())
    cid = mgr.create_container(sb.id, ctr_config(rootfs, "app", ["sleep", "600"]))
    mgr.start_container(cid)
    kills: list[tuple[str, str]] = []
    deletes: list[tuple[str, str]] = []
    _log_calls(monkeypatch, mgr.runtime, "kill", kills)
    _log_calls(monkeypatch, mgr.runtime, "delete", deletes)
    mgr.stop_sandbox(sb.id)
    threads = dict(deletes)
    assert set(threads) == {sb.id, cid} and threads[sb.id] != threads[cid]
    assert mgr.runtime.list() == []
    status = mgr.container_status(cid)
    assert (status.state, status.exit_code) == (ContainerState.CONTAINER_EXITED, 137)
    assert mgr.sandbox_status(sb.id).state == SandboxState.SANDBOX_NOTREADY
    mgr.stop_sandbox(sb.id)  # idempotent: nothing left to kill or delete
    kills.clear()
    deletes.clear()
    mgr.remove_sandbox(sb.id)
    assert kills == [] and deletes == []
    assert mgr.list_sandboxes() == [] and mgr.list_containers() == []


@pytest.mark.integration
def test_remove_of_a_running_pod_still_kills_it(
    mgr: SandboxManager, rootfs: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sb = mgr.run_sandbox(pod_config())
    cid = mgr.create_container(sb.id, ctr_config(rootfs, "app", ["sleep", "600"]))
    mgr.start_container(cid)
    kills: list[tuple[str, str]] = []
    _log_calls(monkeypatch, mgr.runtime, "kill", kills)
    mgr.remove_sandbox(sb.id)
    assert {id for id, _ in kills} == {sb.id, cid}
    assert mgr.runtime.list() == [] and mgr.list_containers() == []


@pytest.mark.integration
def test_run_records_every_step_first_with_real_parts(
    mgr: SandboxManager, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first record names the netns path, the pause's cgroups path and every step, so
    recover() after a kill at any step finds all it may have to undo."""
    first: list[dict[str, Any]] = []
    real = mgr.records.save

    def save(obj: Sandbox | Container) -> None:
        real(obj)
        if isinstance(obj, Sandbox) and not first:
            first.append(json.loads(mgr.records.path("sandboxes", obj.id).read_text()))

    monkeypatch.setattr(mgr.records, "save", save)
    sb = mgr.run_sandbox(pod_config())
    [record] = first
    assert record["steps"] == ["netns", "network", "files", "pause"]
    assert record["phase"] == "creating"
    assert record["netns_path"] == sb.netns_path and record["cgroups_path"] == sb.cgroups_path
    mgr.remove_sandbox(sb.id)


@pytest.mark.integration
def test_remove_failing_delete_leaves_it_removable(
    mgr: SandboxManager, rootfs: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A container delete that fails while the pause's runs: the pause is gone, the error
    names the container, and the next remove_sandbox leaves nothing (the fixture checks)."""
    sb = mgr.run_sandbox(pod_config())
    cid = mgr.create_container(sb.id, ctr_config(rootfs, "app", ["sleep", "600"]))
    mgr.start_container(cid)
    real = mgr.supervisor.delete

    def delete(id: str, force: bool = False) -> None:
        if id == cid:
            raise Injected(f"delete {id}: device busy")
        real(id, force)

    monkeypatch.setattr(mgr.supervisor, "delete", delete)
    with pytest.raises(Injected, match=cid):
        mgr.remove_sandbox(sb.id)
    assert [s.id for s in mgr.runtime.list()] == [cid]
    assert [s.state for s in mgr.list_sandboxes()] == [SandboxState.SANDBOX_NOTREADY]
    monkeypatch.undo()
    mgr.remove_sandbox(sb.id)
    assert mgr.runtime.list() == [] and mgr.list_sandboxes() == []
