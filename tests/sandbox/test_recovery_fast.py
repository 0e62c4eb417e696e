"""recover() asks the runtime once (``list``) which pods still run, and ``state`` only about
the pods the list does not show running: the same pods end READY and NOTREADY as with one
``state`` call per pod (issue 16: restart with 100 pods)."""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from podkit.pods.recovery import PendingLiveIds, live_ids
from podkit.runtime import RuntimeState
from podkit.runtime.errors import OCIRuntimeError
from podkit.runtime.testing import FakeRuntime
from podkit.sandbox import PauseConfig, SandboxManager, SandboxState
from support import require_binary

from ._fakes import FakeSupervisor, host_pod
from ._pods import leaked, leftovers, make_manager, pod_config, snapshot


class Counting:
    """A runtime passed through, with the ``state`` and ``list`` calls made on it counted;
    ``list_error`` makes ``list`` fail, ``hide`` drops IDs from what ``list`` returns."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.states: list[str] = []
        self.lists = 0
        self.list_error: Exception | None = None
        self.hide: set[str] = set()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def state(self, id: str) -> RuntimeState:
        self.states.append(id)
        return self.inner.state(id)  # type: ignore[no-any-return]

    def list(self) -> list[RuntimeState]:
        self.lists += 1
        if self.list_error is not None:
            raise self.list_error
        return [s for s in self.inner.list() if s.id not in self.hide]


@pytest.fixture
def rootfs(tmp_path: Path) -> Path:
    r = tmp_path / "rootfs"
    (r / "etc").mkdir(parents=True)
    (r / "etc" / "passwd").write_text("root:x:0:0::/:/bin/sh\n")
    return r


# -- live_ids ---------------------------------------------------------------------------------

def test_live_ids_counts_running_created_and_paused() -> None:
    rt = FakeRuntime()
    for id in ("run", "made", "held", "gone"):
        rt.create(id, "/b")
    for id in ("run", "held", "gone"):
        rt.start(id)
    rt.pause("held")
    rt.exit("gone")
    assert {s.id: s.status for s in rt.list()}["gone"] == "stopped"
    assert live_ids(rt) == frozenset({"run", "made", "held"})


def test_live_ids_is_none_when_the_runtime_cannot_list() -> None:
    rt = Counting(FakeRuntime())
    rt.list_error = OCIRuntimeError("runc list: permission denied")
    assert live_ids(rt) is None
    rt.list_error = OSError(2, "No such file or directory", "runc")
    assert live_ids(rt) is None


def test_live_ids_lets_other_errors_through() -> None:
    rt = Counting(FakeRuntime())
    rt.list_error = RuntimeError("a bug, not a runtime answer")
    with pytest.raises(RuntimeError, match="a bug"):
        live_ids(rt)


# -- PendingLiveIds: the list asked in a thread -----------------------------------------------

class Held(Counting):
    """``list`` waits until ``release`` is set; ``entered`` is set when it starts (and by which
    thread in ``lister``)."""

    def __init__(self, inner: Any) -> None:
        super().__init__(inner)
        self.entered = threading.Event()
        self.release = threading.Event()
        self.lister: threading.Thread | None = None

    def list(self) -> list[RuntimeState]:
        self.lister = threading.current_thread()
        self.entered.set()
        assert self.release.wait(30), "never released"
        return super().list()


def test_pending_live_ids_lists_in_a_thread_before_result_is_asked() -> None:
    rt = Held(FakeRuntime())
    rt.create("made", "/b")
    pending = PendingLiveIds(rt)  # type: ignore[arg-type]
    assert rt.entered.wait(30), "the list never started"
    assert rt.lister is not threading.current_thread()
    rt.release.set()
    assert pending.result() == frozenset({"made"})
    assert pending.result() == frozenset({"made"}) and rt.lists == 1  # asked once


def test_pending_live_ids_answers_as_live_ids_does_on_errors() -> None:
    rt = Counting(FakeRuntime())
    rt.list_error = OCIRuntimeError("runc list: permission denied")
    assert PendingLiveIds(rt).result() is None  # type: ignore[arg-type]
    rt.list_error = RuntimeError("a bug, not a runtime answer")
    pending = PendingLiveIds(rt)  # type: ignore[arg-type]
    with pytest.raises(RuntimeError, match="a bug"):
        pending.result()


# -- recover() with fakes ---------------------------------------------------------------------

def _three_pods_one_dead(tmp_path: Path, rootfs: Path
                         ) -> tuple[Counting, FakeSupervisor, list[str]]:
    """Three pods made by one manager (closed after); the second one's pause has exited."""
    rt = FakeRuntime()
    sup = FakeSupervisor(rt)
    m = SandboxManager(tmp_path / "root", tmp_path / "state", rt, None,
                       pause=PauseConfig(rootfs=str(rootfs)), supervisor=sup)
    ids = [m.run_sandbox(host_pod(f"pk-pod-{i}", )).id for i in range(3)]
    m.close()
    rt.exit(ids[1], exit_code=137)
    return Counting(rt), sup, ids


def _recover(tmp_path: Path, rootfs: Path, rt: Counting, sup: FakeSupervisor
             ) -> SandboxManager:
    m = SandboxManager(tmp_path / "root", tmp_path / "state", rt, None,  # type: ignore[arg-type]
                       pause=PauseConfig(rootfs=str(rootfs)), supervisor=sup)
    report = m.recover()
    assert report.errors == () and report.rolled_back == ()
    return m


def _states(m: SandboxManager, ids: list[str]) -> list[SandboxState]:
    return [m.sandbox_status(id).state for id in ids]


READY, NOTREADY = SandboxState.SANDBOX_READY, SandboxState.SANDBOX_NOTREADY


def test_recover_lists_once_and_asks_state_only_about_the_dead(tmp_path: Path,
                                                               rootfs: Path) -> None:
    rt, sup, ids = _three_pods_one_dead(tmp_path, rootfs)
    m = _recover(tmp_path, rootfs, rt, sup)
    try:
        assert (rt.lists, rt.states) == (1, [ids[1]])
        assert _states(m, ids) == [READY, NOTREADY, READY]
        # the NOTREADY state is on disk: a later manager need not ask again
        m.close()
        m = _recover(tmp_path, rootfs, rt, sup)
        assert _states(m, ids) == [READY, NOTREADY, READY]
    finally:
        m.remove_all()
        m.close()


def test_recover_without_a_list_asks_each_pod(tmp_path: Path, rootfs: Path) -> None:
    rt, sup, ids = _three_pods_one_dead(tmp_path, rootfs)
    rt.list_error = OCIRuntimeError("runc list: boom")
    m = _recover(tmp_path, rootfs, rt, sup)
    try:
        assert sorted(rt.states) == sorted(ids)
        assert _states(m, ids) == [READY, NOTREADY, READY]
    finally:
        m.remove_all()
        m.close()


def test_a_live_pod_the_list_skips_is_asked_and_stays_ready(tmp_path: Path,
                                                            rootfs: Path) -> None:
    rt, sup, ids = _three_pods_one_dead(tmp_path, rootfs)
    rt.hide = {ids[2]}  # runc list skips a container whose state it cannot load
    m = _recover(tmp_path, rootfs, rt, sup)
    try:
        assert sorted(rt.states) == sorted(ids[1:])
        assert _states(m, ids) == [READY, NOTREADY, READY]
    finally:
        m.remove_all()
        m.close()


def test_recover_lists_while_the_records_load(tmp_path: Path, rootfs: Path) -> None:
    rt, sup, ids = _three_pods_one_dead(tmp_path, rootfs)
    held = Held(rt.inner)  # its list ends only once both kinds of records are loaded
    m = SandboxManager(tmp_path / "root", tmp_path / "state", held, None,  # type: ignore[arg-type]
                       pause=PauseConfig(rootfs=str(rootfs)), supervisor=sup)
    load = m.records.load
    listing_during_load: list[bool] = []

    def load_while_listing(kind: str, cls: Any) -> Any:
        listing_during_load.append(held.entered.wait(30) and not held.release.is_set())
        out = load(kind, cls)
        if kind == "containers":
            held.release.set()
        return out

    m.records.load = load_while_listing  # type: ignore[method-assign]
    try:
        report = m.recover()
        assert listing_during_load == [True, True]
        assert report.errors == () and sorted(report.sandboxes) == sorted(ids)
        assert (held.lists, held.states) == (1, [ids[1]])
        assert _states(m, ids) == [READY, NOTREADY, READY]
    finally:
        held.release.set()
        m.remove_all()
        m.close()


# -- recover() against runc and crun ----------------------------------------------------------

def _kill_pause(m: SandboxManager, id: str) -> None:
    pid = m.runtime.state(id).pid
    os.kill(pid, signal.SIGKILL)
    while m.runtime.state(id).status != "stopped":
        os.sched_yield()


@pytest.mark.integration
@pytest.mark.parametrize("binary", ["runc", "crun"])
def test_recover_real_runtime(bridge: None, busybox_rootfs: Path, tmp_path: Path,
                              binary: str) -> None:
    require_binary(binary)
    before = snapshot()
    make: Callable[[], SandboxManager] = lambda: make_manager(  # noqa: E731
        tmp_path, busybox_rootfs, networks=False, binary=binary)
    m = make()
    cgroups: list[str] = []
    try:
        ids = [m.run_sandbox(pod_config(host_network=True)).id for _ in range(4)]
        _kill_pause(m, ids[2])
        m.close()
        m = make()
        counting = Counting(m.runtime)
        m.runtime = counting  # type: ignore[assignment]
        report = m.recover()
        m.runtime = counting.inner
        assert report.errors == () and sorted(report.sandboxes) == sorted(ids)
        assert (counting.lists, counting.states) == (1, [ids[2]])
        assert _states(m, ids) == [READY, READY, NOTREADY, READY]
        cgroups = [s.cgroups_path for s in m.list_sandboxes()]
    finally:
        m.remove_all()
        m.close()
    assert leftovers(tmp_path, m, cgroups) == []
    assert leaked(before) == []


@pytest.mark.integration
def test_pending_live_ids_real_runc(bridge: None, busybox_rootfs: Path, tmp_path: Path) -> None:
    require_binary("runc")
    before = snapshot()
    m = make_manager(tmp_path, busybox_rootfs, networks=False)
    cgroups: list[str] = []
    try:
        ids = [m.run_sandbox(pod_config(host_network=True)).id for _ in range(3)]
        cgroups = [s.cgroups_path for s in m.list_sandboxes()]
        _kill_pause(m, ids[0])
        assert PendingLiveIds(m.runtime).result() == frozenset(ids[1:]) == live_ids(m.runtime)
        root = m.runtime.root  # type: ignore[attr-defined]
        (tmp_path / "not-a-dir").write_text("")
        m.runtime.root = tmp_path / "not-a-dir"  # type: ignore[attr-defined]
        try:  # runc list fails: no answer, as live_ids gives
            assert PendingLiveIds(m.runtime).result() is None is live_ids(m.runtime)
        finally:
            m.runtime.root = root  # type: ignore[attr-defined]
    finally:
        m.remove_all()
        m.close()
    assert leftovers(tmp_path, m, cgroups) == []
    assert leaked(before) == []
