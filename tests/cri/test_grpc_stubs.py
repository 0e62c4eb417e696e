"""The generated gRPC stubs over a real Unix socket: method paths, streaming, UNIMPLEMENTED."""

from __future__ import annotations

from collections.abc import Iterator
from concurrent import futures
from pathlib import Path
from typing import Any

import grpc
import pytest

from podkit.cri import api_pb2 as pb
from podkit.cri import api_pb2_grpc as pb_grpc


class _Runtime(pb_grpc.RuntimeServiceServicer):
    def Version(self, request: pb.VersionRequest, context: Any) -> pb.VersionResponse:
        return pb.VersionResponse(version=request.version, runtime_name="podkit-test",
                                  runtime_api_version="v1")

    def GetContainerEvents(
        self, request: pb.GetEventsRequest, context: Any
    ) -> Iterator[pb.ContainerEventResponse]:
        for i, kind in enumerate((pb.CONTAINER_CREATED_EVENT, pb.CONTAINER_STARTED_EVENT,
                                  pb.CONTAINER_STOPPED_EVENT)):
            yield pb.ContainerEventResponse(container_id="c1", container_event_type=kind,
                                            created_at=i)


class _Images(pb_grpc.ImageServiceServicer):
    def ListImages(self, request: pb.ListImagesRequest, context: Any) -> pb.ListImagesResponse:
        return pb.ListImagesResponse(images=[pb.Image(id="sha256:1", repo_tags=["busybox:1"])])


@pytest.fixture
def channel(tmp_path: Path) -> Iterator[grpc.Channel]:
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    pb_grpc.add_RuntimeServiceServicer_to_server(_Runtime(), server)
    pb_grpc.add_ImageServiceServicer_to_server(_Images(), server)
    address = f"unix://{tmp_path}/cri.sock"
    server.add_insecure_port(address)
    server.start()
    ch = grpc.insecure_channel(address)
    try:
        yield ch
    finally:
        ch.close()
        server.stop(None).wait(10)


def test_unary_call(channel: grpc.Channel) -> None:
    reply = pb_grpc.RuntimeServiceStub(channel).Version(pb.VersionRequest(version="v1"))
    assert (reply.version, reply.runtime_name) == ("v1", "podkit-test")


def test_full_method_path_is_the_cri_one(channel: grpc.Channel) -> None:
    """What a Go kubelet sends: ``/runtime.v1.RuntimeService/Version``, bytes on the wire."""
    call = channel.unary_unary("/runtime.v1.RuntimeService/Version")
    raw = call(pb.VersionRequest(version="0.1.0").SerializeToString())
    assert pb.VersionResponse.FromString(raw).runtime_api_version == "v1"


def test_server_streaming_call(channel: grpc.Channel) -> None:
    events = list(pb_grpc.RuntimeServiceStub(channel).GetContainerEvents(pb.GetEventsRequest()))
    assert [e.container_event_type for e in events] == [
        pb.CONTAINER_CREATED_EVENT, pb.CONTAINER_STARTED_EVENT, pb.CONTAINER_STOPPED_EVENT]


def test_image_service(channel: grpc.Channel) -> None:
    reply = pb_grpc.ImageServiceStub(channel).ListImages(pb.ListImagesRequest())
    assert [i.repo_tags[0] for i in reply.images] == ["busybox:1"]


def test_unwritten_rpcs_answer_unimplemented(channel: grpc.Channel) -> None:
    stub = pb_grpc.RuntimeServiceStub(channel)
    with pytest.raises(grpc.RpcError) as info:
        stub.RunPodSandbox(pb.RunPodSandboxRequest())
    assert info.value.code() == grpc.StatusCode.UNIMPLEMENTED
    with pytest.raises(grpc.RpcError) as info:
        list(stub.StreamContainers(pb.StreamContainersRequest()))
    assert info.value.code() == grpc.StatusCode.UNIMPLEMENTED


def test_every_rpc_has_a_stub_and_servicer_method() -> None:
    with grpc.insecure_channel("unix:///nowhere") as idle:
        for service in pb.DESCRIPTOR.services_by_name.values():
            stub = getattr(pb_grpc, f"{service.name}Stub")(idle)
            servicer = getattr(pb_grpc, f"{service.name}Servicer")
            for method in service.methods:
                assert callable(getattr(stub, method.name)), method.full_name
                assert callable(getattr(servicer, method.name)), method.full_name
