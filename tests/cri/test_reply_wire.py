"""Replies kept built and sent as bytes (issue 16): ListContainers, ListPodSandbox and
ContainerStatus answer from kept items, and the bytes the gRPC server sends equal the
messages the service builds, after every state change (exit, stop, remove, create) and under
every filter. The logic over the in-memory pod API and the wire helpers; then a real server
over gRPC (runc, conmon, CNI; integration) with its exit poller stopped, so only the calls
themselves can notice an exit."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import attrs
import pytest

from cri.helpers import Harness, container_config, pod_config
from pidfd_fakes import PipeFds, kill_and_wait
from podkit import procfs
from podkit.cri import api_pb2 as pb
from podkit.cri.service import CRIService, adapter, base, wire
from podkit.image import ImageStore
from podkit.pods.containers import _copy as container_copy
from podkit.pods.manager import _copy as sandbox_copy
from podkit.pods.records import Container, Sandbox
from podkit.pods.testing import FakeNetworks, FakePodManager


@pytest.fixture
def service(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[CRIService]:
    store = ImageStore(tmp_path / "images")
    manager = FakePodManager(tmp_path / "root", tmp_path / "state", images=store,
                             networks=FakeNetworks())
    svc = CRIService(manager, store)
    fds = PipeFds()
    svc._pauses = procfs.PidWatches(pidfd_open=fds)
    monkeypatch.setattr(procfs, "alive", lambda pid, **kw: True)  # the made-up pause pids
    yield svc
    svc.close()
    fds.close()


def run_pod(svc: CRIService, name: str, labels: dict[str, str] | None = None,
            ) -> tuple[str, str]:
    """A pod with one running container labelled ``labels``: (pod ID, container ID)."""
    cfg = pod_config()
    cfg.labels.update(labels or {})
    sid = svc.RunPodSandbox(pb.RunPodSandboxRequest(config=cfg)).pod_sandbox_id
    ccfg = container_config(name)
    ccfg.labels.update(labels or {})
    cid = svc.CreateContainer(pb.CreateContainerRequest(pod_sandbox_id=sid, config=ccfg)
                              ).container_id
    svc.StartContainer(pb.StartContainerRequest(container_id=cid))
    return sid, cid


def container_requests(pods: list[tuple[str, str]]) -> list[pb.ListContainersRequest]:
    """No filter, and one of each kind: state, label, id prefix, pod."""
    out = [pb.ListContainersRequest()]
    for state in (pb.CONTAINER_RUNNING, pb.CONTAINER_EXITED, pb.CONTAINER_CREATED):
        req = pb.ListContainersRequest()
        req.filter.state.state = state
        out.append(req)
    req = pb.ListContainersRequest()
    req.filter.label_selector["tier"] = "web"
    out.append(req)
    req = pb.ListContainersRequest()
    req.filter.id = pods[0][1][:12]
    out.append(req)
    req = pb.ListContainersRequest()
    req.filter.pod_sandbox_id = pods[min(1, len(pods) - 1)][0]  # the second pod, if any
    out.append(req)
    return out


def pod_requests(pods: list[tuple[str, str]]) -> list[pb.ListPodSandboxRequest]:
    out = [pb.ListPodSandboxRequest()]
    for state in (pb.SANDBOX_READY, pb.SANDBOX_NOTREADY):
        req = pb.ListPodSandboxRequest()
        req.filter.state.state = state
        out.append(req)
    req = pb.ListPodSandboxRequest()
    req.filter.label_selector["tier"] = "web"
    out.append(req)
    req = pb.ListPodSandboxRequest()
    req.filter.id = pods[0][0][:12]
    out.append(req)
    return out


def listed(svc: CRIService, pods: list[tuple[str, str]]) -> dict[str, Any]:
    """Every List and status both ways; asserts the bytes equal the message, returns the
    messages' (id, state) by request."""
    seen: dict[str, Any] = {}
    for i, req in enumerate(container_requests(pods)):
        msg = svc.ListContainers(req)
        got = svc.list_containers_wire(req)
        assert pb.ListContainersResponse.FromString(got) == msg
        assert got == msg.SerializeToString(deterministic=True)
        seen[f"c{i}"] = sorted((c.id, c.state) for c in msg.containers)
    for i, preq in enumerate(pod_requests(pods)):
        pmsg = svc.ListPodSandbox(preq)
        pgot = svc.list_pod_sandbox_wire(preq)
        assert pb.ListPodSandboxResponse.FromString(pgot) == pmsg
        seen[f"p{i}"] = sorted((p.id, p.state) for p in pmsg.items)
    for _, cid in pods:
        sreq = pb.ContainerStatusRequest(container_id=cid)
        try:
            status = svc.ContainerStatus(sreq)
        except Exception:  # removed
            continue
        assert pb.ContainerStatusResponse.FromString(svc.container_status_wire(sreq)) == status
        seen[cid] = (status.status.state, status.status.exit_code, status.status.reason)
    return seen


def test_every_list_and_status_follows_each_change_at_once(service: CRIService) -> None:
    manager: Any = service.manager
    pods = [run_pod(service, "a", {"tier": "web"}), run_pod(service, "b"),
            run_pod(service, "c", {"tier": "web"})]
    first = listed(service, pods)
    assert first == listed(service, pods)  # unchanged: the same answers from kept items
    assert first["c0"] == sorted((cid, pb.CONTAINER_RUNNING) for _, cid in pods)
    assert [c for c, _ in first["c4"]] == sorted([pods[0][1], pods[2][1]])
    assert first["c5"] == [(pods[0][1], pb.CONTAINER_RUNNING)]
    assert first["c6"] == [(pods[1][1], pb.CONTAINER_RUNNING)]
    assert first["p2"] == [] and len(first["p1"]) == 3

    manager.exit(pods[0][1], 3)  # the exit, seen by the next call
    after = listed(service, pods)
    assert (pods[0][1], pb.CONTAINER_EXITED) in after["c0"]
    assert after["c2"] == [(pods[0][1], pb.CONTAINER_EXITED)]
    assert pods[0][1] not in dict(after["c1"])
    assert after["c4"] == sorted([(pods[0][1], pb.CONTAINER_EXITED),
                                  (pods[2][1], pb.CONTAINER_RUNNING)])
    assert after[pods[0][1]] == (pb.CONTAINER_EXITED, 3, "Error")

    service.StopPodSandbox(pb.StopPodSandboxRequest(pod_sandbox_id=pods[1][0]))
    stopped = listed(service, pods)
    assert stopped["p2"] == [(pods[1][0], pb.SANDBOX_NOTREADY)]
    assert stopped["c6"] == [(pods[1][1], pb.CONTAINER_EXITED)]
    assert stopped[pods[1][1]][0] == pb.CONTAINER_EXITED

    service.RemovePodSandbox(pb.RemovePodSandboxRequest(pod_sandbox_id=pods[2][0]))
    removed = listed(service, pods)
    assert pods[2][1] not in dict(removed["c0"]) and pods[2][0] not in dict(removed["p0"])
    assert pods[2][1] not in removed

    created = service.CreateContainer(pb.CreateContainerRequest(
        pod_sandbox_id=pods[0][0], config=container_config("d"))).container_id
    more = listed(service, [*pods, (pods[0][0], created)])
    assert more["c3"] == [(created, pb.CONTAINER_CREATED)]
    assert more[created][0] == pb.CONTAINER_CREATED
    service.StartContainer(pb.StartContainerRequest(container_id=created))
    assert listed(service, [*pods, (pods[0][0], created)])[created][0] == pb.CONTAINER_RUNNING


def test_a_status_is_built_once_per_record_and_dropped_with_it(
        service: CRIService, monkeypatch: pytest.MonkeyPatch) -> None:
    _, cid = run_pod(service, "a")
    built: list[Any] = []
    real = base.container_status_reply
    monkeypatch.setattr(base, "container_status_reply",
                        lambda *a: built.append(a[0]) or real(*a))
    req = pb.ContainerStatusRequest(container_id=cid)
    one = service.ContainerStatus(req)
    for _ in range(3):
        assert service.ContainerStatus(req) == one
        service.container_status_wire(req)
    assert len(built) == 1
    verbose = service.container_status_wire(pb.ContainerStatusRequest(container_id=cid,
                                                                     verbose=True))
    assert "info" in pb.ContainerStatusResponse.FromString(verbose).info
    manager: Any = service.manager
    manager.exit(cid, 0)
    assert service.ContainerStatus(req).status.reason == "Completed"
    assert len(built) == 2
    service.RemoveContainer(pb.RemoveContainerRequest(container_id=cid))
    assert len(service._statuses) == 0
    with pytest.raises(Exception, match=cid[:12]):
        service.container_status_wire(req)


def test_one_item_encodings_join_into_the_response() -> None:
    items = [pb.Container(id=f"c{i}", state=pb.CONTAINER_RUNNING) for i in range(3)]
    enc = wire.one_item(pb.ListContainersResponse, "containers")
    joined = b"".join(enc(i) for i in items)
    assert pb.ListContainersResponse.FromString(joined) == pb.ListContainersResponse(
        containers=items)
    assert b"".join(enc(i) for i in []) == pb.ListContainersResponse().SerializeToString()
    status = pb.ContainerStatus(id="x", exit_code=2)
    got = wire.one_item(pb.ContainerStatusResponse, "status")(status)
    assert pb.ContainerStatusResponse.FromString(got).status == status


def test_sends_bytes_passes_bytes_and_serializes_messages() -> None:
    ser = wire.sends_bytes(pb.VersionResponse.SerializeToString)
    assert ser(b"\x0a\x01x") == b"\x0a\x01x"
    assert ser(pb.VersionResponse(version="v")) == pb.VersionResponse(version="v"
                                                                      ).SerializeToString()
    with pytest.raises(TypeError):
        ser("text")  # neither bytes nor a message


class _Server:
    def __init__(self) -> None:
        self.generic: list[Any] = []
        self.registered: dict[str, dict[str, Any]] = {}

    def add_generic_rpc_handlers(self, handlers: Any) -> None:
        self.generic.extend(handlers)

    def add_registered_method_handlers(self, service: str, handlers: dict[str, Any]) -> None:
        self.registered[service] = handlers


def test_register_gives_every_method_a_bytes_passing_serializer() -> None:
    from podkit.cri import api_pb2_grpc

    server = _Server()
    servicer = adapter.Servicer(object(), adapter.RUNTIME_METHODS, wire=True)
    wire.register(api_pb2_grpc.add_RuntimeServiceServicer_to_server, servicer, server)
    handlers = server.registered["runtime.v1.RuntimeService"]
    assert len(server.generic) == 1 and set(adapter.RUNTIME_METHODS) <= set(handlers)
    for name in ("ListContainers", "Version"):
        ser = handlers[name].response_serializer
        assert ser(b"raw") == b"raw"
    assert handlers["Version"].response_serializer(pb.VersionResponse(version="1")) \
        == pb.VersionResponse(version="1").SerializeToString()


class _Twins:
    def ListContainers(self, request: Any) -> str:
        return "message"

    def list_containers_wire(self, request: Any) -> str:
        return "bytes"


def test_adapt_calls_the_bytes_twin_only_when_asked() -> None:
    assert adapter.adapt(_Twins(), "ListContainers")(None, None) == "message"
    assert adapter.adapt(_Twins(), "ListContainers", wire=True)(None, None) == "bytes"
    assert set(wire.WIRE_METHODS) <= set(adapter.RUNTIME_METHODS)
    for twin in wire.WIRE_METHODS.values():
        assert callable(getattr(CRIService, twin))


# -- a real server over gRPC (integration) -----------------------------------------------------


@pytest.fixture(scope="module")
def quiet(harness: Harness) -> Iterator[Harness]:
    """The module's server with its exit poller stopped (started again after)."""
    harness.server.service.stop_monitor()
    yield harness
    harness.server.service.start_monitor()


def over_grpc(h: Harness, pods: list[tuple[str, str]]) -> dict[str, Any]:
    """The Lists and statuses over gRPC, each equal to the service's own message."""
    svc = h.server.service
    seen: dict[str, Any] = {}
    mine = {sid for sid, _ in pods}
    calls: list[tuple[str, Callable[[], Any], Callable[[], Any]]] = []
    for i, req in enumerate(container_requests(pods)):
        calls.append((f"c{i}", lambda r=req: h.rt.ListContainers(r),
                      lambda r=req: svc.ListContainers(r)))
    for i, preq in enumerate(pod_requests(pods)):
        calls.append((f"p{i}", lambda r=preq: h.rt.ListPodSandbox(r),
                      lambda r=preq: svc.ListPodSandbox(r)))
    for name, remote, local in calls:
        got = remote()
        assert got == local()
        items = got.containers if name.startswith("c") else got.items
        seen[name] = sorted((x.id, x.state) for x in items
                            if (x.pod_sandbox_id if name.startswith("c") else x.id) in mine)
    for _, cid in pods:
        st = h.rt.ContainerStatus(pb.ContainerStatusRequest(container_id=cid)).status
        seen[cid] = (st.state, st.exit_code, st.reason)
    return seen


@pytest.mark.integration
def test_real_server_answers_every_change_at_once_over_grpc(quiet: Harness) -> None:
    pods = []
    try:
        for i, labels in enumerate(({"tier": "web"}, {})):
            cfg = pod_config(labels=labels)
            sid = quiet.rt.RunPodSandbox(pb.RunPodSandboxRequest(config=cfg)).pod_sandbox_id
            ccfg = container_config(f"c{i}", ["sleep", "600"], labels=labels)
            cid = quiet.rt.CreateContainer(pb.CreateContainerRequest(
                pod_sandbox_id=sid, config=ccfg, sandbox_config=cfg)).container_id
            quiet.rt.StartContainer(pb.StartContainerRequest(container_id=cid))
            pods.append((sid, cid))
        first = over_grpc(quiet, pods)
        assert first == over_grpc(quiet, pods)
        assert first["c0"] == sorted((cid, pb.CONTAINER_RUNNING) for _, cid in pods)
        assert first["c4"] == [(pods[0][1], pb.CONTAINER_RUNNING)]
        assert first["p3"] == [(pods[0][0], pb.SANDBOX_READY)]

        kill_and_wait(quiet.manager.container_status(pods[0][1]).pid)
        quiet.manager.supervisor.wait(pods[0][1], 60)  # conmon has written the exit
        ended = over_grpc(quiet, pods)
        assert ended["c2"] == [(pods[0][1], pb.CONTAINER_EXITED)]
        assert ended["c1"] == [(pods[1][1], pb.CONTAINER_RUNNING)]
        assert ended[pods[0][1]] == (pb.CONTAINER_EXITED, 137, "Error")

        quiet.rt.StopPodSandbox(pb.StopPodSandboxRequest(pod_sandbox_id=pods[1][0]))
        stopped = over_grpc(quiet, pods)
        assert stopped["p2"] == sorted([(pods[1][0], pb.SANDBOX_NOTREADY)])
        assert stopped[pods[1][1]][0] == pb.CONTAINER_EXITED

        quiet.rt.RemovePodSandbox(pb.RemovePodSandboxRequest(pod_sandbox_id=pods[1][0]))
        gone = over_grpc(quiet, pods[:1])
        assert pods[1][0] not in dict(gone["p0"])
        listed_ids = {c.id for c in quiet.rt.ListContainers(pb.ListContainersRequest()
                                                            ).containers}
        assert pods[1][1] not in listed_ids

        new = quiet.rt.CreateContainer(pb.CreateContainerRequest(
            pod_sandbox_id=pods[0][0], config=container_config("d", ["sleep", "600"]),
            sandbox_config=pod_config())).container_id
        assert over_grpc(quiet, [*pods[:1], (pods[0][0], new)])["c3"] == [
            (new, pb.CONTAINER_CREATED)]
    finally:
        for sid, _ in pods:
            quiet.rt.RemovePodSandbox(pb.RemovePodSandboxRequest(pod_sandbox_id=sid))


# -- the manager's record copies (every List copies every record) ------------------------------


@pytest.mark.parametrize(("record", "copy"), [(Container, container_copy),
                                              (Sandbox, sandbox_copy)])
def test_record_copies_keep_every_field(record: Any, copy: Any) -> None:
    values = {a.name: object() for a in attrs.fields(record)}
    original = record(**values)
    got = copy(original)
    assert got is not original
    for name, value in values.items():
        assert getattr(got, name) is value, name
