"""The manager answers List and Status from records that exits keep current (issue 16): one
pidfd per running container, polled instead of asking conmon and /proc. The logic over a fake
runtime and pipe "pidfds" a test makes readable; then real runc and conmon (integration)."""

from __future__ import annotations

import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pidfd_fakes import PipeFds, kill_and_wait
from podkit import oci, procfs
from podkit.pods import processes
from podkit.pods.config import LinuxContainerConfig, LinuxContainerSecurityContext
from podkit.runtime.testing import FakeRuntime
from podkit.sandbox import ContainerFilter, ContainerState, PauseConfig, SandboxManager

from ._fakes import FakeSupervisor, host_pod
from ._pods import copy_rootfs, ctr_config, managed, pod_config

RUNNING, EXITED = ContainerState.CONTAINER_RUNNING, ContainerState.CONTAINER_EXITED


class Counts:
    """How often the slow questions were asked: the supervisor, /proc, the bundle."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.exit_status = self.proc = self.spec_loads = 0
        real_status, real_read, real_load = processes.exit_status, procfs._read, oci.Spec.load

        def exit_status(*a: Any) -> Any:
            self.exit_status += 1
            return real_status(*a)

        def read(*a: Any) -> Any:
            self.proc += 1
            return real_read(*a)

        def load(*a: Any, **kw: Any) -> Any:
            self.spec_loads += 1
            return real_load(*a, **kw)

        monkeypatch.setattr(processes, "exit_status", exit_status)
        monkeypatch.setattr(procfs, "_read", read)
        monkeypatch.setattr(oci.Spec, "load", load)

    def reset(self) -> None:
        self.exit_status = self.proc = self.spec_loads = 0


@pytest.fixture
def rootfs(tmp_path: Path) -> Path:
    r = tmp_path / "rootfs"
    (r / "etc").mkdir(parents=True)
    (r / "etc" / "passwd").write_text("root:x:0:0::/:/bin/sh\napp:x:1000:1000::/:/bin/sh\n")
    return r


@pytest.fixture
def fds() -> Iterator[PipeFds]:
    f = PipeFds()
    yield f
    f.close()


def fake_manager(tmp_path: Path, rootfs: Path, rt: FakeRuntime, fds: PipeFds,
                 monkeypatch: pytest.MonkeyPatch, **kw: Any) -> SandboxManager:
    """A manager over ``rt`` whose made-up pids are watched through ``fds`` (and whose pause
    counts as settled: its pid is in no ``/proc``)."""
    monkeypatch.setattr(processes, "pids_are_host_pids", lambda *a: True)
    monkeypatch.setattr(processes, "settled", lambda pid, timeout: True)
    m = SandboxManager(tmp_path / "root", tmp_path / "state", rt, None,
                       pause=PauseConfig(rootfs=str(rootfs)), supervisor=FakeSupervisor(rt))
    m.registry.exits = procfs.PidWatches(pidfd_open=fds, **kw)
    return m


def start_many(m: SandboxManager, rootfs: Path, n: int) -> list[str]:
    sb = m.run_sandbox(host_pod())
    cids = []
    for i in range(n):
        cid = m.create_container(sb.id, ctr_config(rootfs, f"c{i}", ["sleep", "1"]))
        m.start_container(cid)
        cids.append(cid)
    return cids


def test_many_containers_listed_without_asking_the_supervisor_or_proc(
        tmp_path: Path, rootfs: Path, fds: PipeFds, monkeypatch: pytest.MonkeyPatch) -> None:
    rt = FakeRuntime()
    m = fake_manager(tmp_path, rootfs, rt, fds, monkeypatch)
    cids = start_many(m, rootfs, 30)
    counts = Counts(monkeypatch)
    for _ in range(5):
        assert [c.state for c in m.list_containers()] == [RUNNING] * 30
    for cid in cids:
        assert m.container_status(cid).state == RUNNING
    assert (counts.exit_status, counts.proc) == (0, 0)
    assert len(m.registry.exits) == 30
    m.close()


def test_an_exit_shows_on_the_next_list_and_status(
        tmp_path: Path, rootfs: Path, fds: PipeFds, monkeypatch: pytest.MonkeyPatch) -> None:
    rt = FakeRuntime()
    m = fake_manager(tmp_path, rootfs, rt, fds, monkeypatch)
    cids = start_many(m, rootfs, 3)
    counts = Counts(monkeypatch)
    pid = m.container_status(cids[1]).pid
    rt.exit(cids[1], 3)
    fds.exit(pid)
    by_id = {c.id: c for c in m.list_containers()}
    assert [by_id[c].state for c in cids] == [RUNNING, EXITED, RUNNING]
    assert (by_id[cids[1]].exit_code, by_id[cids[1]].reason) == (3, "Error")
    assert counts.exit_status == 1  # only the one whose pidfd turned readable
    assert fds.closed(pid) and len(m.registry.exits) == 2  # its watch is closed
    rt.exit(cids[2], signal=signal.SIGKILL)
    fds.exit(by_id[cids[2]].pid)
    c = m.container_status(cids[2])
    assert (c.state, c.exit_code, c.reason) == (EXITED, 137, "Error")
    assert m.list_containers(ContainerFilter(state=EXITED)) != []
    m.close()


def test_a_readable_pidfd_whose_exit_is_not_recorded_yet_is_asked_again(
        tmp_path: Path, rootfs: Path, fds: PipeFds, monkeypatch: pytest.MonkeyPatch) -> None:
    rt = FakeRuntime()
    m = fake_manager(tmp_path, rootfs, rt, fds, monkeypatch)
    [cid] = start_many(m, rootfs, 1)
    counts = Counts(monkeypatch)
    fds.exit(m.container_status(cid).pid)  # the process is gone; conmon has not written yet
    assert m.list_containers()[0].state == RUNNING
    assert m.list_containers()[0].state == RUNNING
    assert counts.exit_status == 2  # no stale answer: the supervisor is asked each time
    rt.exit(cid, 0)
    c = m.list_containers()[0]
    assert (c.state, c.exit_code, c.reason) == (EXITED, 0, "Completed")
    m.close()


def test_removed_containers_close_their_pidfds(
        tmp_path: Path, rootfs: Path, fds: PipeFds, monkeypatch: pytest.MonkeyPatch) -> None:
    rt = FakeRuntime()
    m = fake_manager(tmp_path, rootfs, rt, fds, monkeypatch)
    cids = start_many(m, rootfs, 4)
    pids = [m.container_status(c).pid for c in cids]
    m.remove_container(cids[0])
    assert fds.closed(pids[0]) and len(m.registry.exits) == 3
    m.remove_all()
    assert all(fds.closed(p) for p in pids) and len(m.registry.exits) == 0
    m.close()


def test_a_new_manager_rebuilds_the_watches_on_its_first_look(
        tmp_path: Path, rootfs: Path, fds: PipeFds, monkeypatch: pytest.MonkeyPatch) -> None:
    rt = FakeRuntime()
    m = fake_manager(tmp_path, rootfs, rt, fds, monkeypatch)
    cids = start_many(m, rootfs, 3)
    m.close()
    m2 = fake_manager(tmp_path, rootfs, rt, fds, monkeypatch)
    m2.recover()  # looks at each container once: the supervisor answers, the watch starts
    counts = Counts(monkeypatch)
    assert len(m2.registry.exits) == 3
    assert [c.state for c in m2.list_containers()] == [RUNNING] * 3
    assert counts.exit_status == 0
    rt.exit(cids[0], 7)
    fds.exit(m2.container_status(cids[0]).pid)
    assert m2.container_status(cids[0]).exit_code == 7
    m2.close()


def test_past_the_fd_limit_containers_are_asked_the_slow_way(
        tmp_path: Path, rootfs: Path, fds: PipeFds, monkeypatch: pytest.MonkeyPatch) -> None:
    rt = FakeRuntime()
    m = fake_manager(tmp_path, rootfs, rt, fds, monkeypatch, limit=2)
    cids = start_many(m, rootfs, 3)
    assert len(m.registry.exits) == 2
    counts = Counts(monkeypatch)
    assert [c.state for c in m.list_containers()] == [RUNNING] * 3
    assert counts.exit_status == 1  # the unwatched one
    rt.exit(cids[2], 4)
    assert m.container_status(cids[2]).exit_code == 4
    m.close()


def test_the_user_is_kept_from_create(tmp_path: Path, rootfs: Path, fds: PipeFds,
                                      monkeypatch: pytest.MonkeyPatch) -> None:
    rt = FakeRuntime()
    m = fake_manager(tmp_path, rootfs, rt, fds, monkeypatch)
    sb = m.run_sandbox(host_pod())
    cfg = ctr_config(rootfs, "u", ["sleep", "1"], linux=LinuxContainerConfig(
        security_context=LinuxContainerSecurityContext(run_as_username="app")))
    cid = m.create_container(sb.id, cfg)
    counts = Counts(monkeypatch)
    user = m.container_user(cid)
    assert user is not None and (user.uid, user.gid) == (1000, 1000)
    assert counts.spec_loads == 0  # not read back from the bundle
    m.close()
    m2 = fake_manager(tmp_path, rootfs, rt, fds, monkeypatch)
    m2.recover()
    counts.reset()
    for _ in range(3):
        assert m2.container_user(cid) == user
    assert counts.spec_loads == 1  # after a restart: the bundle, once
    m2.remove_all()
    m2.close()


# -- real runc and conmon ----------------------------------------------------------------------

@pytest.fixture
def mgr(bridge: None, busybox_rootfs: Path, tmp_path: Path) -> Iterator[SandboxManager]:
    yield from managed(tmp_path / "m", copy_rootfs(busybox_rootfs, tmp_path / "busybox"))


@pytest.mark.integration
def test_real_exits_show_on_the_next_list_without_a_poller(mgr: SandboxManager) -> None:
    rootfs = Path(mgr.pause.rootfs) if mgr.pause else Path()
    sb = mgr.run_sandbox(pod_config())
    go = "/tmp/pk-list-cache-go"
    own = mgr.create_container(sb.id, ctr_config(rootfs, "own", [
        "sh", "-c", f"while [ ! -e {go} ]; do sleep 0.05; done; exit 3"]))
    killed = mgr.create_container(sb.id, ctr_config(rootfs, "killed", ["sleep", "600"]))
    for cid in (own, killed):
        mgr.start_container(cid)
    assert {c.state for c in mgr.list_containers()} == {RUNNING}
    assert len(mgr.registry.exits) == 2
    (rootfs / go.lstrip("/")).write_text("")
    mgr.supervisor.wait(own, 60)  # conmon has written the exit
    pid = mgr.container_status(killed).pid
    kill_and_wait(pid)
    mgr.supervisor.wait(killed, 60)
    by_id = {c.id: c for c in mgr.list_containers()}
    assert (by_id[own].state, by_id[own].exit_code, by_id[own].reason) == (EXITED, 3, "Error")
    assert (by_id[killed].state, by_id[killed].exit_code) == (EXITED, 137)
    assert len(mgr.registry.exits) == 0
    mgr.remove_sandbox(sb.id)


@pytest.mark.integration
def test_real_lists_read_no_proc_or_conmon_state(mgr: SandboxManager,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    from podkit.runtime import Conmon

    rootfs = Path(mgr.pause.rootfs) if mgr.pause else Path()
    sb = mgr.run_sandbox(pod_config())
    cids = [mgr.create_container(sb.id, ctr_config(rootfs, f"c{i}", ["sleep", "600"]))
            for i in range(4)]
    for cid in cids:
        mgr.start_container(cid)
    counts = Counts(monkeypatch)
    conmon_reads: list[str] = []

    def counting(name: str) -> Any:
        real = getattr(Conmon, name)

        def call(self: Conmon, *a: Any) -> Any:
            conmon_reads.append(name)
            return real(self, *a)
        return call

    for name in ("get", "exit_status", "monitor_alive"):
        monkeypatch.setattr(Conmon, name, counting(name))
    for _ in range(10):
        assert [c.state for c in mgr.list_containers()] == [RUNNING] * 4
        assert mgr.container_status(cids[0]).state == RUNNING
    assert (counts.exit_status, counts.proc, conmon_reads) == (0, 0, [])
    monkeypatch.undo()
    mgr.remove_sandbox(sb.id)
    assert len(mgr.registry.exits) == 0


@pytest.mark.integration
def test_a_dead_conmon_is_still_noticed(mgr: SandboxManager) -> None:
    rootfs = Path(mgr.pause.rootfs) if mgr.pause else Path()
    sb = mgr.run_sandbox(pod_config())
    cid = mgr.create_container(sb.id, ctr_config(rootfs, "app", ["sleep", "600"]))
    mgr.start_container(cid)
    sup: Any = mgr.supervisor
    monitor = sup.conmon.get(cid).conmon_pid
    kill_and_wait(monitor)
    assert mgr.container_status(cid).state == RUNNING  # the container itself still runs
    pid = mgr.container_status(cid).pid
    kill_and_wait(pid)
    c = mgr.list_containers()[0]
    assert (c.state, c.exit_code) == (EXITED, 255)  # nobody wrote its exit code
    mgr.remove_sandbox(sb.id)


def test_lists_and_status_hand_out_copies(tmp_path: Path, rootfs: Path, fds: PipeFds,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    rt = FakeRuntime()
    m = fake_manager(tmp_path, rootfs, rt, fds, monkeypatch)
    [cid] = start_many(m, rootfs, 1)
    listed, status = m.list_containers()[0], m.container_status(cid)
    assert listed == status == m.registry.container(cid)
    listed.state = status.state = EXITED
    assert m.container_status(cid).state == RUNNING and listed is not m.list_containers()[0]
    m.close()
