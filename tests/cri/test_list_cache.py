"""ListContainers and ListPodSandbox from what the service already built and watches (issue 16):
list items kept per record and rebuilt when it changes, pause processes watched by pidfd. The
logic over the in-memory pod API; then a real server's manager (runc, conmon, CNI;
integration), with its exit poller stopped so only the Lists themselves can notice an exit."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import attrs
import pytest

from cri.helpers import Harness, container_config, pod_config
from pidfd_fakes import PipeFds, kill_and_wait
from podkit import oci, procfs
from podkit.cri import api_pb2 as pb
from podkit.cri.service import CRIService, base
from podkit.cri.service.reply_cache import ReplyCache
from podkit.image import ImageStore
from podkit.pods import processes
from podkit.pods.testing import FakeNetworks, FakePodManager
from podkit.sandbox import SandboxState

# -- ReplyCache --------------------------------------------------------------------------------


def test_reply_cache_builds_again_only_when_the_key_or_source_changes() -> None:
    cache: ReplyCache[str] = ReplyCache()
    built: list[str] = []

    def build(what: str) -> Any:
        def make() -> str:
            built.append(what)
            return what
        return make

    src = object()
    assert cache.get("a", (1,), src, build("a1")) == "a1"
    assert cache.get("a", (1,), src, build("again")) == "a1"
    assert cache.get("a", (2,), src, build("a2")) == "a2"  # new key (a new state)
    assert cache.get("a", (2,), object(), build("a3")) == "a3"  # another config object
    assert cache.get("b", (1,), src, build("b1")) == "b1"
    assert built == ["a1", "a2", "a3", "b1"]
    cache.retain({"b"})
    assert len(cache) == 1
    cache.forget("b")
    cache.forget("unknown")
    assert len(cache) == 0


# -- the service over the in-memory pod API ----------------------------------------------------


@pytest.fixture
def fds() -> Iterator[PipeFds]:
    f = PipeFds()
    yield f
    f.close()


@pytest.fixture
def service(tmp_path: Path, fds: PipeFds, monkeypatch: pytest.MonkeyPatch,
            ) -> Iterator[CRIService]:
    store = ImageStore(tmp_path / "images")
    manager = FakePodManager(tmp_path / "root", tmp_path / "state", images=store,
                             networks=FakeNetworks())
    svc = CRIService(manager, store)
    svc._pauses = procfs.PidWatches(pidfd_open=fds)
    monkeypatch.setattr(procfs, "alive", lambda pid, **kw: True)  # the made-up pause pids
    yield svc
    svc.close()


def run_pods(svc: CRIService, n: int) -> list[tuple[str, str]]:
    """``n`` pods with one running container each: (pod ID, container ID)."""
    out = []
    for i in range(n):
        sid = svc.RunPodSandbox(pb.RunPodSandboxRequest(config=pod_config())).pod_sandbox_id
        cid = svc.CreateContainer(pb.CreateContainerRequest(
            pod_sandbox_id=sid, config=container_config(f"c{i}"))).container_id
        svc.StartContainer(pb.StartContainerRequest(container_id=cid))
        out.append((sid, cid))
    return out


def counted(monkeypatch: pytest.MonkeyPatch, module: Any, name: str) -> list[Any]:
    """Count the calls of ``module.name`` (the list of their first arguments)."""
    calls: list[Any] = []
    real = getattr(module, name)

    def wrapper(*a: Any, **kw: Any) -> Any:
        calls.append(a[0] if a else None)
        return real(*a, **kw)

    monkeypatch.setattr(module, name, wrapper)
    return calls


def test_list_items_are_built_once_per_state(service: CRIService,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    pods = run_pods(service, 5)
    built = counted(monkeypatch, base, "container_to_cri")
    first = service.ListContainers(pb.ListContainersRequest())
    for _ in range(3):
        assert service.ListContainers(pb.ListContainersRequest()) == first
    assert len(built) == 5
    assert {c.state for c in first.containers} == {pb.CONTAINER_RUNNING}
    assert {c.image.image for c in first.containers} == {"localhost/pk-cri/busybox:1"}
    manager: Any = service.manager
    manager.exit(pods[2][1], 3)
    items = {c.id: c for c in service.ListContainers(pb.ListContainersRequest()).containers}
    assert items[pods[2][1]].state == pb.CONTAINER_EXITED
    assert len(built) == 6  # only the one whose state changed
    service.RemoveContainer(pb.RemoveContainerRequest(container_id=pods[2][1]))
    assert len(service._listed_containers) == 4
    manager.remove_container(pods[3][1])  # past the service: the next full List drops it
    assert len(service.ListContainers(pb.ListContainersRequest()).containers) == 3
    assert len(service._listed_containers) == 3


def test_filtered_lists_use_the_same_items(service: CRIService) -> None:
    pods = run_pods(service, 3)
    req = pb.ListContainersRequest()
    req.filter.pod_sandbox_id = pods[1][0]
    got = service.ListContainers(req).containers
    assert [c.id for c in got] == [pods[1][1]]
    whole = {c.id: c for c in service.ListContainers(pb.ListContainersRequest()).containers}
    assert got[0] == whole[pods[1][1]]


def test_pods_listed_from_pause_pidfds(service: CRIService, fds: PipeFds,
                                       monkeypatch: pytest.MonkeyPatch) -> None:
    pods = run_pods(service, 4)
    manager: Any = service.manager
    service.ListPodSandbox(pb.ListPodSandboxRequest())
    status = counted(monkeypatch, manager, "sandbox_status")
    alive = counted(monkeypatch, procfs, "alive")
    for _ in range(5):
        items = service.ListPodSandbox(pb.ListPodSandboxRequest()).items
        assert [i.state for i in items] == [pb.SANDBOX_READY] * 4
    assert (status, alive) == ([], [])
    assert len(service._pauses) == 4
    # the pause of the second pod dies: the next List asks the manager, for that pod only
    gone = pods[1][0]
    fds.exit(manager.sandbox_status(gone).pid)
    status.clear()
    real = FakePodManager.sandbox_status

    def dead(id: str) -> Any:
        status.append(id)
        sb = real(manager, id)
        return attrs.evolve(sb, state=SandboxState.SANDBOX_NOTREADY) if id == gone else sb

    monkeypatch.setattr(manager, "sandbox_status", dead)
    states = {i.id: i.state for i in service.ListPodSandbox(pb.ListPodSandboxRequest()).items}
    assert states[gone] == pb.SANDBOX_NOTREADY and status == [gone]
    assert len(service._pauses) == 3  # its watch is closed
    service.RemovePodSandbox(pb.RemovePodSandboxRequest(pod_sandbox_id=pods[0][0]))
    assert len(service._pauses) == 2
    service.close()
    assert len(service._pauses) == 0


# -- a real server's manager (integration) ----------------------------------------------------


@pytest.fixture(scope="module")
def quiet(harness: Harness) -> Iterator[Harness]:
    """The module's server with its exit poller stopped (started again after)."""
    harness.server.service.stop_monitor()
    yield harness
    harness.server.service.start_monitor()


@pytest.mark.integration
def test_real_lists_and_status_read_nothing_and_see_exits_next(
        quiet: Harness, monkeypatch: pytest.MonkeyPatch) -> None:
    svc = quiet.server.service
    pods = []
    for i in range(2):
        sid = quiet.rt.RunPodSandbox(pb.RunPodSandboxRequest(config=pod_config())).pod_sandbox_id
        cid = quiet.rt.CreateContainer(pb.CreateContainerRequest(
            pod_sandbox_id=sid, config=container_config(f"c{i}", ["sleep", "600"]),
            sandbox_config=pod_config())).container_id
        quiet.rt.StartContainer(pb.StartContainerRequest(container_id=cid))
        pods.append((sid, cid))
    try:
        svc.ListPodSandbox(pb.ListPodSandboxRequest())
        proc = counted(monkeypatch, procfs, "_read")
        asked = counted(monkeypatch, processes, "exit_status")
        loads = counted(monkeypatch, oci.Spec, "load")
        for _ in range(5):
            assert {i.state for i in svc.ListPodSandbox(pb.ListPodSandboxRequest()).items
                    if i.id in dict(pods)} == {pb.SANDBOX_READY}
            assert {c.state for c in svc.ListContainers(pb.ListContainersRequest()).containers
                    if c.pod_sandbox_id in dict(pods)} == {pb.CONTAINER_RUNNING}
            st = svc.ContainerStatus(pb.ContainerStatusRequest(container_id=pods[0][1]))
            assert st.status.HasField("user")
        assert (proc, asked, loads) == ([], [], [])
        monkeypatch.undo()
        pause = quiet.manager.sandbox_status(pods[0][0]).pid
        kill_and_wait(pause)
        app = quiet.manager.container_status(pods[1][1]).pid
        kill_and_wait(app)
        quiet.manager.supervisor.wait(pods[1][1], 60)  # conmon has written the exit
        states = {i.id: i.state for i in svc.ListPodSandbox(pb.ListPodSandboxRequest()).items}
        assert (states[pods[0][0]], states[pods[1][0]]) == (pb.SANDBOX_NOTREADY,
                                                             pb.SANDBOX_READY)
        got = {c.id: c for c in svc.ListContainers(pb.ListContainersRequest()).containers}
        assert got[pods[1][1]].state == pb.CONTAINER_EXITED
        ended = svc.ContainerStatus(pb.ContainerStatusRequest(container_id=pods[1][1])).status
        assert (ended.exit_code, ended.reason) == (137, "Error")
    finally:
        for sid, _ in pods:
            quiet.rt.RemovePodSandbox(pb.RemovePodSandboxRequest(pod_sandbox_id=sid))
    assert not any(sid in svc._pauses for sid, _ in pods)
