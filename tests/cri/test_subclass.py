"""A CRIService subclass served over real gRPC, against runc, conmon and CNI: an override of
every RPC of RuntimeService and ImageService runs (the kept-bytes fast paths of
ListContainers, ListPodSandbox and ContainerStatus included), and admission hooks refuse with
PERMISSION_DENIED and the hook's reason, leaving nothing behind."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest

import _leaks
from cri.helpers import BUSYBOX, Harness, container_config, pod_config
from podkit.container import ContainerConfig
from podkit.cri import CRIService
from podkit.cri import api_pb2 as pb
from podkit.cri.service.adapter import IMAGE_METHODS, RUNTIME_METHODS, STREAMING_METHODS
from podkit.errors import PermissionDeniedError
from podkit.sandbox import NamespaceMode, Sandbox, SandboxConfig
from support import require_binary, require_isolated

pytestmark = pytest.mark.integration

SERVICES = {name: pb.DESCRIPTOR.services_by_name[name]
            for name in ("RuntimeService", "ImageService")}


def _recording(name: str) -> Callable[..., Any]:
    """An override of RPC ``name`` that notes the call, then does what podkit does (or, for
    an RPC podkit lacks, answers an empty response)."""
    method = next(s.methods_by_name[name] for s in SERVICES.values()
                  if name in s.methods_by_name)
    response = getattr(pb, method.output_type.name)
    base = getattr(CRIService, name, None)
    if method.server_streaming:
        def stream(self: Any, request: Any, is_active: Callable[[], bool]) -> Any:
            self.calls.append(name)
            return base(self, request, is_active) if base else iter([response()])
        return stream

    def unary(self: Any, request: Any) -> Any:
        self.calls.append(name)
        return base(self, request) if base else response()
    return unary


class Recording(CRIService):
    """Every RPC overridden (see :func:`_recording`)."""

    def __init__(self, *args: Any, **kw: Any) -> None:
        super().__init__(*args, **kw)
        self.calls: list[str] = []


for _name in (*RUNTIME_METHODS, *IMAGE_METHODS):
    setattr(Recording, _name, _recording(_name))


class Hiding(Recording):
    """A policy server's filters on the RPCs podkit answers from kept bytes."""

    def ListContainers(self, request: pb.ListContainersRequest) -> pb.ListContainersResponse:
        out = super().ListContainers(request)
        keep = [c for c in out.containers if "secret" not in c.labels]
        del out.containers[:]
        out.containers.extend(keep)
        return out

    def ListPodSandbox(self, request: pb.ListPodSandboxRequest) -> pb.ListPodSandboxResponse:
        out = super().ListPodSandbox(request)
        keep = [p for p in out.items if "secret" not in p.labels]
        del out.items[:]
        out.items.extend(keep)
        return out

    def ContainerStatus(self, request: pb.ContainerStatusRequest,
                        ) -> pb.ContainerStatusResponse:
        out = super().ContainerStatus(request)
        out.status.annotations.clear()
        return out


def no_host_network(pod: SandboxConfig) -> None:
    if pod.linux.security_context.namespace_options.network == NamespaceMode.NODE:
        raise PermissionDeniedError(f"pod {pod.metadata.name}: host network is not allowed")


def no_privileged(ctr: ContainerConfig, pod: Sandbox) -> None:
    if ctr.linux.security_context.privileged:
        raise PermissionDeniedError(f"container {ctr.metadata.name}: privileged is not allowed")


@pytest.fixture(scope="module")
def served(bridge: None, image_layouts: dict[str, Path],
           tmp_path_factory: pytest.TempPathFactory) -> Iterator[Harness]:
    require_isolated()
    require_binary("runc")
    require_binary("conmon")
    h = Harness(tmp_path_factory.mktemp("cri-subclass"), image_layouts, service=Hiding,
                admit_pod=[no_host_network], admit_container=[no_privileged],
                runtime_name="teamcri", runtime_version="7.0")
    yield h
    h.close()


def _code(call: Callable[..., Any], request: Any, streaming: bool) -> str:
    try:
        answer = call(request, timeout=30 if not streaming else 2)
        if streaming:
            list(answer)
    except grpc.RpcError as exc:
        return str(exc.code().name)
    return "OK"


def test_an_override_of_every_rpc_runs(served: Harness) -> None:
    h = served
    h.service.calls.clear()
    rt, img = h.rt, h.img
    sid = rt.RunPodSandbox(pb.RunPodSandboxRequest(config=pod_config())).pod_sandbox_id
    cid = rt.CreateContainer(pb.CreateContainerRequest(
        pod_sandbox_id=sid, config=container_config("c", ["sleep", "60"]))).container_id
    rt.StartContainer(pb.StartContainerRequest(container_id=cid))
    io = {"stdout": True}
    requests: list[tuple[str, Any]] = [
        ("Version", pb.VersionRequest()),
        ("Status", pb.StatusRequest()),
        ("RuntimeConfig", pb.RuntimeConfigRequest()),
        ("UpdateRuntimeConfig", pb.UpdateRuntimeConfigRequest()),
        ("PodSandboxStatus", pb.PodSandboxStatusRequest(pod_sandbox_id=sid)),
        ("ListPodSandbox", pb.ListPodSandboxRequest()),
        ("StreamPodSandboxes", pb.StreamPodSandboxesRequest()),
        ("UpdatePodSandboxResources", pb.UpdatePodSandboxResourcesRequest(pod_sandbox_id=sid)),
        ("ContainerStatus", pb.ContainerStatusRequest(container_id=cid)),
        ("ListContainers", pb.ListContainersRequest()),
        ("StreamContainers", pb.StreamContainersRequest()),
        ("UpdateContainerResources", pb.UpdateContainerResourcesRequest(container_id=cid)),
        ("ReopenContainerLog", pb.ReopenContainerLogRequest(container_id=cid)),
        ("ExecSync", pb.ExecSyncRequest(container_id=cid, cmd=["true"], timeout=10)),
        ("Exec", pb.ExecRequest(container_id=cid, cmd=["true"], **io)),
        ("Attach", pb.AttachRequest(container_id=cid, **io)),
        ("PortForward", pb.PortForwardRequest(pod_sandbox_id=sid)),
        ("ContainerStats", pb.ContainerStatsRequest(container_id=cid)),
        ("ListContainerStats", pb.ListContainerStatsRequest()),
        ("StreamContainerStats", pb.StreamContainerStatsRequest()),
        ("PodSandboxStats", pb.PodSandboxStatsRequest(pod_sandbox_id=sid)),
        ("ListPodSandboxStats", pb.ListPodSandboxStatsRequest()),
        ("StreamPodSandboxStats", pb.StreamPodSandboxStatsRequest()),
        ("CheckpointContainer", pb.CheckpointContainerRequest(container_id=cid)),
        ("GetContainerEvents", pb.GetEventsRequest()),
        ("ListMetricDescriptors", pb.ListMetricDescriptorsRequest()),
        ("ListPodSandboxMetrics", pb.ListPodSandboxMetricsRequest()),
        ("StreamPodSandboxMetrics", pb.StreamPodSandboxMetricsRequest()),
        ("ListImages", pb.ListImagesRequest()),
        ("StreamImages", pb.StreamImagesRequest()),
        ("ImageStatus", pb.ImageStatusRequest(image=pb.ImageSpec(image=BUSYBOX))),
        ("PullImage", pb.PullImageRequest(image=pb.ImageSpec(image="127.0.0.1:1/none:1"))),
        ("RemoveImage", pb.RemoveImageRequest(image=pb.ImageSpec(image="localhost/none:1"))),
        ("ImageFsInfo", pb.ImageFsInfoRequest()),
        ("StopContainer", pb.StopContainerRequest(container_id=cid, timeout=1)),
        ("RemoveContainer", pb.RemoveContainerRequest(container_id=cid)),
        ("StopPodSandbox", pb.StopPodSandboxRequest(pod_sandbox_id=sid)),
        ("RemovePodSandbox", pb.RemovePodSandboxRequest(pod_sandbox_id=sid)),
    ]
    codes = {}
    for name, request in requests:
        stub = rt if name in RUNTIME_METHODS else img
        codes[name] = _code(getattr(stub, name), request, name in STREAMING_METHODS)
    assert sorted(set(h.service.calls)) == sorted({*RUNTIME_METHODS, *IMAGE_METHODS})
    # podkit's answers came through the overrides (super()); the RPCs podkit lacks answered
    # what the subclass defined
    assert {n: c for n, c in codes.items() if c != "OK"} == {
        "Exec": "UNIMPLEMENTED", "Attach": "UNIMPLEMENTED", "PortForward": "UNIMPLEMENTED",
        "GetContainerEvents": "DEADLINE_EXCEEDED", "PullImage": "UNKNOWN"}
    v = rt.Version(pb.VersionRequest())
    assert (v.runtime_name, v.runtime_version) == ("teamcri", "7.0")
    assert h.manager.list_sandboxes() == []


def test_overrides_of_the_kept_bytes_rpcs_filter_what_goes_out(served: Harness) -> None:
    h, rt = served, served.rt
    shown = rt.RunPodSandbox(pb.RunPodSandboxRequest(config=pod_config())).pod_sandbox_id
    hidden = rt.RunPodSandbox(pb.RunPodSandboxRequest(
        config=pod_config(labels={"secret": "1"}))).pod_sandbox_id
    try:
        cids = [rt.CreateContainer(pb.CreateContainerRequest(
            pod_sandbox_id=shown, config=container_config(
                name, labels=labels, annotations={"token": "s3cret"}))).container_id
            for name, labels in (("open", {}), ("closed", {"secret": "1"}))]
        for _ in range(2):  # the second time from podkit's kept replies, if it used them
            listed = rt.ListContainers(pb.ListContainersRequest()).containers
            assert [c.id for c in listed] == cids[:1]
            streamed = [c.id for r in rt.StreamContainers(pb.StreamContainersRequest())
                        for c in r.containers]
            assert streamed == cids[:1]
            pods = [p.id for p in rt.ListPodSandbox(pb.ListPodSandboxRequest()).items]
            assert pods == [shown]
            status = rt.ContainerStatus(pb.ContainerStatusRequest(container_id=cids[0]))
            assert status.status.id == cids[0] and dict(status.status.annotations) == {}
        assert h.manager.container_status(cids[0]).config.annotations == {"token": "s3cret"}
    finally:
        for sid in (shown, hidden):
            rt.RemovePodSandbox(pb.RemovePodSandboxRequest(pod_sandbox_id=sid))


def _tree(root: Path) -> set[str]:
    return {os.path.relpath(os.path.join(d, f), root)
            for d, dirs, files in os.walk(root) for f in (*dirs, *files)}


def _refused(call: Callable[..., Any], request: Any) -> str:
    with pytest.raises(grpc.RpcError) as exc:
        call(request, timeout=30)
    assert exc.value.code() == grpc.StatusCode.PERMISSION_DENIED
    return str(exc.value.details())


def test_refusals_arrive_as_permission_denied_and_leave_nothing(served: Harness) -> None:
    h, rt = served, served.rt
    sid = rt.RunPodSandbox(pb.RunPodSandboxRequest(config=pod_config())).pod_sandbox_id
    try:
        before = (_tree(h.base), _leaks.snapshot(("netns", "link", "mount")),
                  h.manager.list_sandboxes(), h.manager.list_containers())
        host = pod_config("hostnet")
        host.linux.security_context.namespace_options.network = pb.NODE
        assert _refused(rt.RunPodSandbox, pb.RunPodSandboxRequest(config=host)) == \
            "pod hostnet: host network is not allowed"
        root = container_config("root")
        root.linux.security_context.privileged = True
        assert _refused(rt.CreateContainer, pb.CreateContainerRequest(
            pod_sandbox_id=sid, config=root)) == "container root: privileged is not allowed"
        after = (_tree(h.base), _leaks.snapshot(("netns", "link", "mount")),
                 h.manager.list_sandboxes(), h.manager.list_containers())
        assert after == before
        # nothing reserved: the same names, admitted, run
        host.linux.security_context.namespace_options.network = pb.POD
        admitted = rt.RunPodSandbox(pb.RunPodSandboxRequest(config=host)).pod_sandbox_id
        rt.RemovePodSandbox(pb.RemovePodSandboxRequest(pod_sandbox_id=admitted))
        root.linux.security_context.privileged = False
        rt.CreateContainer(pb.CreateContainerRequest(pod_sandbox_id=sid, config=root))
    finally:
        rt.RemovePodSandbox(pb.RemovePodSandboxRequest(pod_sandbox_id=sid))
