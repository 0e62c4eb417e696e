"""The CRI service's behaviour over the in-memory pod API (``podkit.pods.testing``): no root, no
runc, no network. The pod and container state machine, List filters, errors and their gRPC
codes, events and their order, runtime status, stats, streaming URLs and the image service over
a temporary store. The integration tests (test_server*.py) run the same RPCs for real.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from cri.helpers import container_config, pod_config
from podkit.cri import api_pb2 as pb
from podkit.cri.service import CRIService, EventBus, status_code_name
from podkit.cri.service.adapter import adapt
from podkit.errors import (
    AlreadyExistsError,
    ConflictError,
    InvalidArgumentError,
    NotFoundError,
    PodkitError,
)
from podkit.image import ImageStore
from podkit.pods.testing import FakeNetworks, FakePodManager
from podkit.runtime import ExecResult


@dataclass
class Rig:
    """A service over a fake manager, with an events subscription from the start."""

    service: CRIService
    manager: FakePodManager
    events: Any = None
    urls: list[str] = field(default_factory=list)

    def run_pod(self, name: str = "", **kw: Any) -> str:
        return self.service.RunPodSandbox(pb.RunPodSandboxRequest(
            config=pod_config(name, **kw))).pod_sandbox_id

    def create(self, sid: str, name: str = "c", **kw: Any) -> str:
        return self.service.CreateContainer(pb.CreateContainerRequest(
            pod_sandbox_id=sid, config=container_config(name, **kw))).container_id

    def start(self, cid: str) -> None:
        self.service.StartContainer(pb.StartContainerRequest(container_id=cid))

    def state(self, cid: str) -> int:
        return self.service.ContainerStatus(
            pb.ContainerStatusRequest(container_id=cid)).status.state

    def pod_state(self, sid: str) -> int:
        return self.service.PodSandboxStatus(
            pb.PodSandboxStatusRequest(pod_sandbox_id=sid)).status.state

    def drain(self) -> list[tuple[str, int]]:
        q = self.events
        return [(e.container_id, e.container_event_type)
                for e in (q.get_nowait() for _ in range(q.qsize())) if e is not None]


class FakeStreaming:
    """Streaming URLs without a server."""

    def get_exec(self, req: pb.ExecRequest) -> str:
        return f"http://streaming/exec/{req.container_id}"

    def get_attach(self, req: pb.AttachRequest) -> str:
        return f"http://streaming/attach/{req.container_id}"

    def get_port_forward(self, req: pb.PortForwardRequest) -> str:
        return f"http://streaming/portforward/{req.pod_sandbox_id}"


@pytest.fixture
def rig(tmp_path: Path) -> Iterator[Rig]:
    store = ImageStore(tmp_path / "images")
    manager = FakePodManager(tmp_path / "root", tmp_path / "state", images=store,
                             networks=FakeNetworks())
    service = CRIService(manager, store, streaming=FakeStreaming(), pause_image="localhost/pause:1")
    r = Rig(service, manager)
    r.events = service.events.subscribe()
    yield r
    service.events.close()


# -- the state machine -------------------------------------------------------------------


def test_pod_lifecycle(rig: Rig) -> None:
    sid = rig.run_pod()
    assert rig.pod_state(sid) == pb.SANDBOX_READY
    st = rig.service.PodSandboxStatus(pb.PodSandboxStatusRequest(pod_sandbox_id=sid))
    assert st.status.network.ip.startswith("10.88.0.")
    rig.service.StopPodSandbox(pb.StopPodSandboxRequest(pod_sandbox_id=sid))
    assert rig.pod_state(sid) == pb.SANDBOX_NOTREADY
    rig.service.StopPodSandbox(pb.StopPodSandboxRequest(pod_sandbox_id=sid))  # again: fine
    rig.service.RemovePodSandbox(pb.RemovePodSandboxRequest(pod_sandbox_id=sid))
    with pytest.raises(NotFoundError):
        rig.pod_state(sid)
    for rpc, req in ((rig.service.StopPodSandbox, pb.StopPodSandboxRequest),
                     (rig.service.RemovePodSandbox, pb.RemovePodSandboxRequest)):
        rpc(req(pod_sandbox_id="unknown"))  # type: ignore[operator]  # unknown IDs succeed


def test_container_lifecycle(rig: Rig) -> None:
    sid = rig.run_pod()
    cid = rig.create(sid)
    assert rig.state(cid) == pb.CONTAINER_CREATED
    rig.start(cid)
    assert rig.state(cid) == pb.CONTAINER_RUNNING
    with pytest.raises(ConflictError, match="not CREATED"):
        rig.start(cid)
    rig.service.StopContainer(pb.StopContainerRequest(container_id=cid, timeout=1))
    st = rig.service.ContainerStatus(pb.ContainerStatusRequest(container_id=cid)).status
    assert (st.state, st.exit_code, st.reason) == (pb.CONTAINER_EXITED, 137, "Error")
    rig.service.StopContainer(pb.StopContainerRequest(container_id=cid))  # stopped: fine
    rig.service.RemoveContainer(pb.RemoveContainerRequest(container_id=cid))
    with pytest.raises(NotFoundError):
        rig.state(cid)
    rig.service.RemoveContainer(pb.RemoveContainerRequest(container_id=cid))  # gone: fine
    rig.service.StopContainer(pb.StopContainerRequest(container_id="unknown"))


def test_status_reports_the_user_the_pod_api_resolved(rig: Rig) -> None:
    sid = rig.run_pod()
    cfg = container_config("u")
    sc = cfg.linux.security_context
    sc.run_as_user.value, sc.run_as_group.value = 1000, 2000
    sc.supplemental_groups.extend([3000, 4000])
    cid = rig.service.CreateContainer(pb.CreateContainerRequest(
        pod_sandbox_id=sid, config=cfg)).container_id
    user = rig.service.ContainerStatus(pb.ContainerStatusRequest(container_id=cid)).status.user
    assert (user.linux.uid, user.linux.gid, list(user.linux.supplemental_groups)) == (
        1000, 2000, [3000, 4000])


def test_a_container_that_exits_on_its_own(rig: Rig) -> None:
    sid = rig.run_pod()
    cid = rig.create(sid)
    rig.start(cid)
    rig.manager.exit(cid, 0)
    st = rig.service.ContainerStatus(pb.ContainerStatusRequest(container_id=cid)).status
    assert (st.state, st.exit_code, st.reason) == (pb.CONTAINER_EXITED, 0, "Completed")
    assert st.finished_at >= st.started_at > 0


def test_stopping_a_pod_stops_its_containers(rig: Rig) -> None:
    sid = rig.run_pod()
    cids = [rig.create(sid, f"c{i}") for i in range(2)]
    rig.start(cids[0])
    rig.service.StopPodSandbox(pb.StopPodSandboxRequest(pod_sandbox_id=sid))
    assert [rig.state(c) for c in cids] == [pb.CONTAINER_EXITED, pb.CONTAINER_CREATED]
    with pytest.raises(ConflictError, match="not ready"):
        rig.create(sid, "late")
    rig.service.RemovePodSandbox(pb.RemovePodSandboxRequest(pod_sandbox_id=sid))
    assert rig.service.ListContainers(pb.ListContainersRequest()).containers == []


def test_names_are_reserved_until_removal(rig: Rig) -> None:
    cfg = pod_config("web")
    sid = rig.service.RunPodSandbox(pb.RunPodSandboxRequest(config=cfg)).pod_sandbox_id
    with pytest.raises(AlreadyExistsError, match="already reserved"):
        rig.service.RunPodSandbox(pb.RunPodSandboxRequest(config=cfg))
    rig.create(sid, "app")
    with pytest.raises(AlreadyExistsError):
        rig.create(sid, "app")
    rig.service.RemovePodSandbox(pb.RemovePodSandboxRequest(pod_sandbox_id=sid))
    rig.service.RunPodSandbox(pb.RunPodSandboxRequest(config=cfg))  # free again


def test_create_checks_the_request_before_the_manager(rig: Rig) -> None:
    sid = rig.run_pod()
    before = list(rig.manager.calls)
    with pytest.raises(NotFoundError, match="no such pod sandbox"):
        rig.create("0" * 64)
    with pytest.raises(InvalidArgumentError, match=r"config\.image\.image: required"):
        rig.create(sid, image="")
    with pytest.raises(NotFoundError, match="no such rootfs directory"):
        rig.create(sid, image="/nonexistent/rootfs")
    with pytest.raises(InvalidArgumentError, match="pod_sandbox_id: required"):
        rig.service.CreateContainer(pb.CreateContainerRequest(config=container_config("c")))
    assert rig.manager.calls == before


def test_runtime_handler_and_pod_network(rig: Rig, tmp_path: Path) -> None:
    with pytest.raises(InvalidArgumentError, match="runtime_handler 'kata'"):
        rig.service.RunPodSandbox(pb.RunPodSandboxRequest(config=pod_config(),
                                                          runtime_handler="kata"))
    rig.service.RunPodSandbox(pb.RunPodSandboxRequest(config=pod_config(),
                                                      runtime_handler="runc"))
    store = ImageStore(tmp_path / "images")
    bare = CRIService(FakePodManager(images=store), store)
    with pytest.raises(InvalidArgumentError, match="no CNI network"):
        bare.RunPodSandbox(pb.RunPodSandboxRequest(config=pod_config()))


# -- List filters ------------------------------------------------------------------------


def test_list_pod_sandbox_filters(rig: Rig) -> None:
    a = rig.run_pod(labels={"app": "a"})
    b = rig.run_pod(labels={"app": "b"})
    rig.service.StopPodSandbox(pb.StopPodSandboxRequest(pod_sandbox_id=b))

    def ids(**kw: Any) -> list[str]:
        req = pb.ListPodSandboxRequest(filter=pb.PodSandboxFilter(**kw)) if kw else \
            pb.ListPodSandboxRequest()
        return [i.id for i in rig.service.ListPodSandbox(req).items]

    assert ids() == [a, b]
    assert ids(id=a[:8]) == [a]
    assert ids(state=pb.PodSandboxStateValue(state=pb.SANDBOX_NOTREADY)) == [b]
    assert ids(state=pb.PodSandboxStateValue(state=pb.SANDBOX_READY)) == [a]
    assert ids(label_selector={"app": "a"}) == [a]
    assert ids(label_selector={"app": "c"}) == []
    streamed = list(rig.service.StreamPodSandboxes(pb.StreamPodSandboxesRequest()))
    assert [[i.id for i in m.pod_sandboxes] for m in streamed] == [[a, b]]


def test_list_containers_filters(rig: Rig) -> None:
    s1, s2 = rig.run_pod(), rig.run_pod()
    c1 = rig.create(s1, "x", labels={"tier": "web"})
    c2 = rig.create(s2, "y", labels={"tier": "db"})
    rig.start(c2)

    def ids(**kw: Any) -> list[str]:
        return [c.id for c in rig.service.ListContainers(
            pb.ListContainersRequest(filter=pb.ContainerFilter(**kw))).containers]

    assert ids() == [c1, c2]
    assert ids(id=c1[:10]) == [c1]
    assert ids(pod_sandbox_id=s2) == [c2]
    assert ids(state=pb.ContainerStateValue(state=pb.CONTAINER_RUNNING)) == [c2]
    assert ids(state=pb.ContainerStateValue(state=pb.CONTAINER_CREATED)) == [c1]
    assert ids(label_selector={"tier": "web"}) == [c1]
    item = rig.service.ListContainers(pb.ListContainersRequest()).containers[0]
    assert (item.pod_sandbox_id, item.metadata.name, item.image.image) == (
        s1, "x", container_config("x").image.image)
    empty = list(rig.service.StreamContainers(pb.StreamContainersRequest(
        filter=pb.ContainerFilter(id="nothing"))))
    assert len(empty) == 1 and list(empty[0].containers) == []  # one message when empty


# -- errors and codes --------------------------------------------------------------------


class Aborted(Exception):
    pass


class FakeContext:
    """What ``adapt`` uses of a grpc ServicerContext."""

    def __init__(self) -> None:
        self.code: Any = None
        self.details = ""

    def abort(self, code: Any, details: str) -> None:
        self.code, self.details = code, details
        raise Aborted

    def is_active(self) -> bool:
        return True


def _call(service: object, name: str, request: Any) -> tuple[str, str]:
    """The status code name and message the gRPC handler answers with ("OK" on success)."""
    ctx = FakeContext()
    try:
        result = adapt(service, name)(request, ctx)
        if name.startswith(("Stream", "Get")):
            list(result)
    except Aborted:
        return ctx.code.name, ctx.details
    return "OK", ""


def test_errors_become_grpc_codes(rig: Rig) -> None:
    pytest.importorskip("grpc")
    cfg = pod_config("coded")
    sid = rig.service.RunPodSandbox(pb.RunPodSandboxRequest(config=cfg)).pod_sandbox_id
    cid = rig.create(sid)
    cases = [
        ("ContainerStatus", pb.ContainerStatusRequest(container_id="nope"), "NOT_FOUND"),
        ("PodSandboxStatus", pb.PodSandboxStatusRequest(pod_sandbox_id="nope"), "NOT_FOUND"),
        ("ContainerStatus", pb.ContainerStatusRequest(), "INVALID_ARGUMENT"),
        ("RunPodSandbox", pb.RunPodSandboxRequest(config=cfg), "ALREADY_EXISTS"),
        ("ExecSync", pb.ExecSyncRequest(container_id=cid, cmd=["true"]), "FAILED_PRECONDITION"),
        ("StopContainer", pb.StopContainerRequest(container_id=cid, timeout=-1),
         "INVALID_ARGUMENT"),
        ("CheckpointContainer", pb.CheckpointContainerRequest(), "UNIMPLEMENTED"),
        ("StartContainer", pb.StartContainerRequest(container_id=cid), "OK"),
        ("StartContainer", pb.StartContainerRequest(container_id=cid), "FAILED_PRECONDITION"),
        ("StreamContainers", pb.StreamContainersRequest(), "OK"),
    ]
    got = [(name, _call(rig.service, name, req)[0]) for name, req, _ in cases]
    assert got == [(name, code) for name, _, code in cases]


def test_no_streaming_server_is_unimplemented(tmp_path: Path) -> None:
    pytest.importorskip("grpc")
    store = ImageStore(tmp_path / "images")
    svc = CRIService(FakePodManager(images=store, networks=FakeNetworks()), store)
    code, detail = _call(svc, "Exec", pb.ExecRequest(container_id="c", cmd=["sh"], stdout=True))
    assert (code, detail) == ("UNIMPLEMENTED", "no streaming server is configured "
                              "(exec/attach/port-forward)")


def test_an_unexpected_error_is_unknown_and_bounded(rig: Rig) -> None:
    pytest.importorskip("grpc")

    class Broken:
        def Version(self, request: Any) -> Any:
            raise RuntimeError("x" * 100_000)

    code, detail = _call(Broken(), "Version", pb.VersionRequest())
    assert code == "UNKNOWN"
    assert detail.startswith("Version: unexpected RuntimeError: xxx") and len(detail) <= 1024


@pytest.mark.parametrize(("exc", "code"), [
    (NotFoundError("x"), "NOT_FOUND"), (AlreadyExistsError("x"), "ALREADY_EXISTS"),
    (InvalidArgumentError("x"), "INVALID_ARGUMENT"), (ConflictError("x"), "FAILED_PRECONDITION"),
    (PodkitError("x"), "UNKNOWN"), (ValueError("x"), "UNKNOWN"),
])
def test_status_code_names(exc: Exception, code: str) -> None:
    assert status_code_name(exc) == code


# -- events ------------------------------------------------------------------------------


def test_events_in_order(rig: Rig) -> None:
    sid = rig.run_pod()
    cid = rig.create(sid)
    rig.start(cid)
    rig.service.StopContainer(pb.StopContainerRequest(container_id=cid))
    rig.service.RemoveContainer(pb.RemoveContainerRequest(container_id=cid))
    rig.service.StopPodSandbox(pb.StopPodSandboxRequest(pod_sandbox_id=sid))
    rig.service.RemovePodSandbox(pb.RemovePodSandboxRequest(pod_sandbox_id=sid))
    assert rig.drain() == [
        (sid, pb.CONTAINER_CREATED_EVENT), (sid, pb.CONTAINER_STARTED_EVENT),
        (cid, pb.CONTAINER_CREATED_EVENT), (cid, pb.CONTAINER_STARTED_EVENT),
        (cid, pb.CONTAINER_STOPPED_EVENT), (cid, pb.CONTAINER_DELETED_EVENT),
        (sid, pb.CONTAINER_STOPPED_EVENT), (sid, pb.CONTAINER_DELETED_EVENT),
    ]


def test_events_carry_statuses(rig: Rig) -> None:
    sid = rig.run_pod()
    cid = rig.create(sid)
    rig.start(cid)
    ev = [e for e in (rig.events.get_nowait() for _ in range(rig.events.qsize()))
          if e.container_id == cid][-1]
    assert ev.pod_sandbox_status.id == sid
    assert [s.state for s in ev.containers_statuses] == [pb.CONTAINER_RUNNING]


def test_removing_a_running_pod_sends_every_event_once(rig: Rig) -> None:
    sid = rig.run_pod()
    cid = rig.create(sid)
    rig.start(cid)
    rig.drain()
    rig.service.RemovePodSandbox(pb.RemovePodSandboxRequest(pod_sandbox_id=sid))
    assert rig.drain() == [
        (cid, pb.CONTAINER_STOPPED_EVENT), (sid, pb.CONTAINER_STOPPED_EVENT),
        (cid, pb.CONTAINER_DELETED_EVENT), (sid, pb.CONTAINER_DELETED_EVENT)]


def test_exit_poller_announces_each_exit_once(rig: Rig) -> None:
    sid = rig.run_pod()
    cid = rig.create(sid)
    rig.start(cid)
    rig.drain()
    rig.service.poll_exits()
    assert rig.drain() == []  # nothing stopped yet
    rig.manager.exit(cid, 2)
    rig.service.poll_exits()
    rig.service.poll_exits()
    rig.service.StopContainer(pb.StopContainerRequest(container_id=cid))
    assert rig.drain() == [(cid, pb.CONTAINER_STOPPED_EVENT)]


def test_recover_notes_what_already_stopped(rig: Rig, tmp_path: Path) -> None:
    sid = rig.run_pod()
    running, done = rig.create(sid, "running"), rig.create(sid, "done")
    rig.start(running)
    rig.start(done)
    rig.manager.exit(done, 0)
    fresh = CRIService(rig.manager, rig.service.store)  # a restarted server
    q = fresh.events.subscribe()
    assert fresh.recover() == []
    fresh.poll_exits()
    assert q.qsize() == 0  # the earlier exit is not announced again
    rig.manager.exit(running, 1)
    fresh.poll_exits()
    assert [q.get_nowait().container_id for _ in range(q.qsize())] == [running]


def test_events_stream_until_the_bus_closes(rig: Rig) -> None:
    stream = rig.service.GetContainerEvents(pb.GetEventsRequest())
    got: list[Any] = []
    reader = threading.Thread(target=lambda: got.extend(stream))
    reader.start()  # the stream subscribes when it is first read
    deadline = time.monotonic() + 10
    while rig.service.events.subscribers < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    sid = rig.run_pod()
    rig.service.events.close()
    reader.join(10)
    assert not reader.is_alive()
    assert [e.container_id for e in got] == [sid, sid]  # CREATED, STARTED; then the end
    assert isinstance(rig.service.events, EventBus)


# -- runtime status, exec, streaming, stats ----------------------------------------------


def test_status_conditions(rig: Rig, tmp_path: Path) -> None:
    def conditions(svc: CRIService) -> dict[str, tuple[bool, str]]:
        st = svc.Status(pb.StatusRequest()).status
        return {c.type: (c.status, c.reason) for c in st.conditions}

    assert conditions(rig.service) == {"RuntimeReady": (True, ""), "NetworkReady": (True, "")}
    rig.manager.runtime.error = PodkitError("runc: gone")
    assert isinstance(rig.manager.networks, FakeNetworks)
    rig.manager.networks.error = PodkitError("STATUS: no bridge")
    assert conditions(rig.service) == {"RuntimeReady": (False, "RuntimeNotReady"),
                                       "NetworkReady": (False, "NetworkPluginNotReady")}
    store = ImageStore(tmp_path / "images")
    late: list[FakeNetworks] = []

    def loader() -> FakeNetworks:
        if not late:
            raise PodkitError("no config in /etc/cni/net.d")
        return late[0]

    m = FakePodManager(images=store, network_loader=loader)
    svc = CRIService(m, store)
    assert conditions(svc)["NetworkReady"] == (False, "NetworkPluginNotReady")
    late.append(FakeNetworks())  # a config dropped in after the start
    assert conditions(svc)["NetworkReady"] == (True, "")
    verbose = svc.Status(pb.StatusRequest(verbose=True))
    assert '"runtimeHandler": "runc"' in verbose.info["config"]


def test_version_and_runtime_config(rig: Rig) -> None:
    v = rig.service.Version(pb.VersionRequest())
    assert (v.runtime_name, v.runtime_api_version) == ("podkit", "v1")
    assert rig.service.RuntimeConfig(pb.RuntimeConfigRequest()).linux.cgroup_driver == \
        pb.CGROUPFS
    req = pb.UpdateRuntimeConfigRequest()
    req.runtime_config.network_config.pod_cidr = "10.88.0.0/16"
    rig.service.UpdateRuntimeConfig(req)
    assert rig.service.pod_cidr == "10.88.0.0/16"


def test_exec_sync_result_is_scripted(rig: Rig) -> None:
    rig.manager.exec_handler = lambda id, cmd, timeout: ExecResult(
        exit_code=3, stdout=" ".join(cmd).encode(), stderr=b"err")
    sid = rig.run_pod()
    cid = rig.create(sid)
    rig.start(cid)
    res = rig.service.ExecSync(pb.ExecSyncRequest(container_id=cid, cmd=["echo", "hi"]))
    assert (res.exit_code, res.stdout, res.stderr) == (3, b"echo hi", b"err")
    with pytest.raises(InvalidArgumentError, match="must not be negative"):
        rig.service.ExecSync(pb.ExecSyncRequest(container_id=cid, cmd=["true"], timeout=-1))


def test_streaming_urls(rig: Rig) -> None:
    sid = rig.run_pod()
    cid = rig.create(sid)
    with pytest.raises(ConflictError, match="CONTAINER_CREATED state, not running"):
        rig.service.Exec(pb.ExecRequest(container_id=cid, cmd=["sh"], stdout=True))
    rig.start(cid)
    assert rig.service.Exec(pb.ExecRequest(container_id=cid, cmd=["sh"], stdout=True)).url \
        == f"http://streaming/exec/{cid}"
    with pytest.raises(InvalidArgumentError, match="one of stdin, stdout or stderr"):
        rig.service.Exec(pb.ExecRequest(container_id=cid, cmd=["sh"]))
    assert rig.service.Attach(pb.AttachRequest(container_id=cid, stdout=True)).url.endswith(cid)
    assert rig.service.PortForward(pb.PortForwardRequest(pod_sandbox_id=sid)).url.endswith(sid)
    rig.service.StopPodSandbox(pb.StopPodSandboxRequest(pod_sandbox_id=sid))
    with pytest.raises(ConflictError, match="is not ready"):
        rig.service.PortForward(pb.PortForwardRequest(pod_sandbox_id=sid))


def test_update_resources_and_reopen_log(rig: Rig) -> None:
    sid = rig.run_pod()
    cid = rig.create(sid)
    req = pb.UpdateContainerResourcesRequest(container_id=cid)
    req.linux.cpu_shares = 512
    with pytest.raises(ConflictError):  # not running
        rig.service.UpdateContainerResources(req)
    rig.start(cid)
    rig.service.UpdateContainerResources(req)
    resources = rig.manager.container_status(cid).config.linux.resources
    assert resources is not None and resources.cpu_shares == 512
    rig.service.ReopenContainerLog(pb.ReopenContainerLogRequest(container_id=cid))
    with pytest.raises(NotFoundError):
        rig.service.UpdatePodSandboxResources(
            pb.UpdatePodSandboxResourcesRequest(pod_sandbox_id="nope"))


def test_stats(rig: Rig) -> None:
    sid = rig.run_pod()
    cids = [rig.create(sid, f"c{i}") for i in range(2)]
    rig.start(cids[0])
    one = rig.service.ContainerStats(pb.ContainerStatsRequest(container_id=cids[0])).stats
    assert one.attributes.id == cids[0]
    listed = rig.service.ListContainerStats(pb.ListContainerStatsRequest()).stats
    assert [s.attributes.id for s in listed] == [cids[0]]  # running ones only
    pod = rig.service.PodSandboxStats(pb.PodSandboxStatsRequest(pod_sandbox_id=sid)).stats
    assert pod.attributes.id == sid
    assert [c.attributes.id for c in pod.linux.containers] == [cids[0]]
    assert [s.attributes.id for s in rig.service.ListPodSandboxStats(
        pb.ListPodSandboxStatsRequest()).stats] == [sid]
    with pytest.raises(NotFoundError):
        rig.service.PodSandboxStats(pb.PodSandboxStatsRequest(pod_sandbox_id="nope"))


# -- the image service over a temporary store --------------------------------------------


def _import_image(store: ImageStore, tmp_path: Path, name: str, user: str = "1000") -> str:
    """A one-file image imported into ``store`` as ``name``; its image ID."""
    from image.imagebuild import Layer, build_image, write_layout
    from podkit.image import import_image

    img = build_image([Layer().file("hello", b"hi").bytes()], ["gzip"], {"User": user})
    layout = write_layout(tmp_path / name.replace("/", "_").replace(":", "_"),
                          [(img.descriptor, None)], img.blobs)
    return import_image(store, layout, name)[0].config.digest


def test_image_service(rig: Rig, tmp_path: Path) -> None:
    svc = rig.service
    assert list(svc.ListImages(pb.ListImagesRequest()).images) == []
    assert not svc.ImageStatus(pb.ImageStatusRequest(
        image=pb.ImageSpec(image="localhost/absent:1"))).HasField("image")
    svc.RemoveImage(pb.RemoveImageRequest(image=pb.ImageSpec(image="localhost/absent:1")))
    id = _import_image(svc.store, tmp_path, "localhost/pk/app:1")
    _import_image(svc.store, tmp_path, "localhost/pk/app:latest")  # the same image, 2nd name
    _import_image(svc.store, tmp_path, "localhost/pause:1", user="65535")
    images = {i.id: i for i in svc.ListImages(pb.ListImagesRequest()).images}
    assert sorted(images[id].repo_tags) == ["localhost/pk/app:1", "localhost/pk/app:latest"]
    assert images[id].uid.value == 1000 and not images[id].pinned
    assert [i.pinned for i in images.values() if i.id != id] == [True]  # the pause image
    st = svc.ImageStatus(pb.ImageStatusRequest(image=pb.ImageSpec(image=id), verbose=True))
    assert st.image.id == id and '"User": "1000"' in st.info["info"]
    f = pb.ListImagesRequest(filter=pb.ImageFilter(
        image=pb.ImageSpec(image="localhost/pk/app:1")))
    assert [i.id for i in svc.ListImages(f).images] == [id]
    with pytest.raises(InvalidArgumentError, match=r"image\.image 'Bad::ref'"):
        svc.ImageStatus(pb.ImageStatusRequest(image=pb.ImageSpec(image="Bad::ref")))
    assert svc.ImageFsInfo(pb.ImageFsInfoRequest()).image_filesystems[0].used_bytes.value > 0
    svc.RemoveImage(pb.RemoveImageRequest(image=pb.ImageSpec(image="localhost/pk/app:1")))
    assert id not in {i.id for i in svc.ListImages(pb.ListImagesRequest()).images}
    batches = list(svc.StreamImages(pb.StreamImagesRequest()))
    assert [len(b.images) for b in batches] == [1]


def test_pull_credentials_are_checked_before_the_registry(rig: Rig) -> None:
    req = pb.PullImageRequest(image=pb.ImageSpec(image="localhost/x:1"))
    req.auth.auth = "%%% not base64"
    with pytest.raises(InvalidArgumentError, match=r"auth\.auth: not base64"):
        rig.service.PullImage(req)
    with pytest.raises(InvalidArgumentError, match=r"image\.image: required"):
        rig.service.PullImage(pb.PullImageRequest())


# -- the seam ----------------------------------------------------------------------------


def _api_methods() -> dict[str, list[str]]:
    """PodAPI's methods and their parameter names (properties left out)."""
    import inspect

    from podkit.cri.service.pods import PodAPI

    return {name: list(inspect.signature(fn).parameters)
            for name, fn in vars(PodAPI).items()
            if inspect.isfunction(fn) and not name.startswith("_")}


@pytest.mark.parametrize("cls_name", ["SandboxManager", "FakePodManager"])
def test_both_managers_have_the_pod_api(cls_name: str, tmp_path: Path) -> None:
    """The real manager and the fake keep PodAPI's methods with the same parameters, so the
    unit tests above exercise the calls the service makes of the real one."""
    import inspect

    from podkit.sandbox import SandboxManager

    cls = {"SandboxManager": SandboxManager, "FakePodManager": FakePodManager}[cls_name]
    for name, params in _api_methods().items():
        assert list(inspect.signature(getattr(cls, name)).parameters) == params, name
    fake = FakePodManager(images=ImageStore(tmp_path))
    for attr in ("root_dir", "state_dir", "runtime", "networks", "pause", "images",
                 "rootfs_mode"):
        assert hasattr(fake, attr), attr
