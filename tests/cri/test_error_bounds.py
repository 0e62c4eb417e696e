"""Error replies stay small whatever the request quotes (issue 11, defect 9).

A 10,000-character ID used to come back whole in the gRPC status message, past the 8 KiB
metadata limit, so the client saw RESOURCE_EXHAUSTED instead of NOT_FOUND.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest

from cri.helpers import Harness, container_config, pod_config
from podkit.cri import api_pb2 as pb

pytestmark = pytest.mark.integration

LONG = "a" * 10_000
BOUND = 2048
"""The longest status message a hostile request may produce (characters)."""

OK = grpc.StatusCode.OK
NOT_FOUND = grpc.StatusCode.NOT_FOUND
INVALID = grpc.StatusCode.INVALID_ARGUMENT


def _code(call: Callable[[Any], Any], req: Any) -> tuple[grpc.StatusCode, str]:
    """The status code and message of one call (OK and '' when it succeeds)."""
    try:
        result = call(req)
        if hasattr(result, "__next__"):
            list(result)
    except grpc.RpcError as exc:
        return exc.code(), exc.details() or ""
    return OK, ""


def _id_calls(h: Harness, id_: str) -> list[tuple[str, Callable[[Any], Any], Any]]:
    """Every RPC that takes a pod or container ID (or image reference), called with ``id_``."""
    rt, img = h.rt, h.img
    return [
        ("StopPodSandbox", rt.StopPodSandbox, pb.StopPodSandboxRequest(pod_sandbox_id=id_)),
        ("RemovePodSandbox", rt.RemovePodSandbox,
         pb.RemovePodSandboxRequest(pod_sandbox_id=id_)),
        ("PodSandboxStatus", rt.PodSandboxStatus,
         pb.PodSandboxStatusRequest(pod_sandbox_id=id_)),
        ("PodSandboxStats", rt.PodSandboxStats, pb.PodSandboxStatsRequest(pod_sandbox_id=id_)),
        ("UpdatePodSandboxResources", rt.UpdatePodSandboxResources,
         pb.UpdatePodSandboxResourcesRequest(pod_sandbox_id=id_)),
        ("PortForward", rt.PortForward, pb.PortForwardRequest(pod_sandbox_id=id_, port=[80])),
        ("CreateContainer", rt.CreateContainer,
         pb.CreateContainerRequest(pod_sandbox_id=id_, config=container_config("x"))),
        ("StartContainer", rt.StartContainer, pb.StartContainerRequest(container_id=id_)),
        ("StopContainer", rt.StopContainer, pb.StopContainerRequest(container_id=id_)),
        ("RemoveContainer", rt.RemoveContainer, pb.RemoveContainerRequest(container_id=id_)),
        ("ContainerStatus", rt.ContainerStatus, pb.ContainerStatusRequest(container_id=id_)),
        ("ContainerStats", rt.ContainerStats, pb.ContainerStatsRequest(container_id=id_)),
        ("UpdateContainerResources", rt.UpdateContainerResources,
         pb.UpdateContainerResourcesRequest(container_id=id_)),
        ("ReopenContainerLog", rt.ReopenContainerLog,
         pb.ReopenContainerLogRequest(container_id=id_)),
        ("ExecSync", rt.ExecSync, pb.ExecSyncRequest(container_id=id_, cmd=["true"])),
        ("Exec", rt.Exec, pb.ExecRequest(container_id=id_, cmd=["true"], stdout=True)),
        ("Attach", rt.Attach, pb.AttachRequest(container_id=id_, stdout=True)),
        ("CheckpointContainer", rt.CheckpointContainer,
         pb.CheckpointContainerRequest(container_id=id_, location="/tmp/x.tar")),
        ("ListContainers", rt.ListContainers,
         pb.ListContainersRequest(filter=pb.ContainerFilter(id=id_, pod_sandbox_id=id_))),
        ("ListPodSandbox", rt.ListPodSandbox,
         pb.ListPodSandboxRequest(filter=pb.PodSandboxFilter(id=id_))),
        ("ListContainerStats", rt.ListContainerStats,
         pb.ListContainerStatsRequest(filter=pb.ContainerStatsFilter(id=id_))),
        ("ListPodSandboxStats", rt.ListPodSandboxStats,
         pb.ListPodSandboxStatsRequest(filter=pb.PodSandboxStatsFilter(id=id_))),
        ("ImageStatus", img.ImageStatus, pb.ImageStatusRequest(image=pb.ImageSpec(image=id_))),
        ("RemoveImage", img.RemoveImage, pb.RemoveImageRequest(image=pb.ImageSpec(image=id_))),
        ("PullImage", img.PullImage, pb.PullImageRequest(image=pb.ImageSpec(image=id_))),
    ]


def _names(h: Harness) -> list[str]:
    return [name for name, _, _ in _id_calls(h, "x")]


@pytest.fixture
def pod(harness: Harness) -> Iterator[str]:
    sid = harness.rt.RunPodSandbox(pb.RunPodSandboxRequest(config=pod_config())).pod_sandbox_id
    yield sid
    harness.rt.RemovePodSandbox(pb.RemovePodSandboxRequest(pod_sandbox_id=sid))


def test_long_ids_answer_like_unknown_ids(harness: Harness) -> None:
    """Each ID-taking RPC: a 10k-character ID gets the code of an unknown short ID (or
    INVALID_ARGUMENT), never RESOURCE_EXHAUSTED, and a bounded message."""
    h = harness
    short = dict((n, _code(c, r)) for n, c, r in _id_calls(h, "f" * 64))
    wrong = []
    for name, call, req in _id_calls(h, LONG):
        code, details = _code(call, req)
        expected = short[name][0]
        if code not in (expected, INVALID) or len(details) > BOUND:
            wrong.append(f"{name}: {code.name} ({len(details)} chars), an unknown short ID "
                         f"gets {expected.name}")
    assert not wrong, "\n".join(wrong)
    assert len(short) == len(_names(h))


def test_long_bad_names_are_refused_briefly(harness: Harness, pod: str) -> None:
    """A refused 10k-character pod or container name is INVALID_ARGUMENT, message bounded."""
    h = harness
    bad = LONG + "_"
    code, details = _code(h.rt.RunPodSandbox, pb.RunPodSandboxRequest(
        config=pod_config(name=bad)))
    assert code == INVALID and len(details) <= BOUND, (code, len(details))
    assert "metadata.name" in details
    code, details = _code(h.rt.CreateContainer, pb.CreateContainerRequest(
        pod_sandbox_id=pod, config=container_config(bad)))
    assert code == INVALID and len(details) <= BOUND, (code, len(details))
    assert "metadata.name" in details
    assert [p.id for p in h.manager.list_sandboxes()] == [pod]
    assert list(h.manager.list_containers()) == []


def test_long_values_in_other_fields(harness: Harness, pod: str) -> None:
    """Long bad values where no ID is expected (runtime handler, image) stay bounded."""
    h = harness
    cases = [
        (h.rt.RunPodSandbox, pb.RunPodSandboxRequest(config=pod_config(), runtime_handler=LONG)),
        (h.rt.CreateContainer, pb.CreateContainerRequest(
            pod_sandbox_id=pod, config=container_config("x", image=LONG))),
        (h.rt.CreateContainer, pb.CreateContainerRequest(
            pod_sandbox_id=pod, config=container_config("x", image="/" + LONG))),
        (h.img.PullImage, pb.PullImageRequest(image=pb.ImageSpec(image="\x00" * 5000))),
        (h.img.PullImage, pb.PullImageRequest(image=pb.ImageSpec(image="\u00e9" * 5000))),
    ]
    for call, req in cases:
        code, details = _code(call, req)
        assert code in (INVALID, NOT_FOUND), (code, details[:200])
        assert len(details) <= BOUND, len(details)
    assert list(h.manager.list_containers()) == []


# -- the pieces, without gRPC ---------------------------------------------------------------


def test_quote_bounds_long_values() -> None:
    from podkit.errors import QUOTE_LIMIT, quote

    assert quote("abc") == "'abc'"
    cut = quote(LONG)
    assert len(cut) < QUOTE_LIMIT + 30 and cut.endswith("... (10000 characters)")
    assert quote(b"\0" * 5000).endswith("(5000 characters)")
    assert quote(list(range(5000))).endswith("characters)")


@pytest.mark.parametrize("text", [
    "x" * 10_000, "\0" * 10_000, "\u00e9" * 10_000, "\U0001f600" * 3000, "%" * 5000,
    "\udcff" * 2000,  # a lone surrogate (from a surrogateescape'd file name)
], ids=["ascii", "nul", "latin", "emoji", "percent", "surrogate"])
def test_status_detail_fits_the_wire(text: str) -> None:
    from podkit.cri.service.errors import STATUS_DETAIL_BYTES, STATUS_DETAIL_CHARS, status_detail

    out = status_detail(text)
    wire = sum(1 if " " <= c <= "~" and c != "%" else 3 * len(c.encode()) for c in out)
    assert len(out) <= STATUS_DETAIL_CHARS and wire <= STATUS_DETAIL_BYTES
    assert out.endswith(" characters, cut)")


def test_status_detail_keeps_short_messages() -> None:
    from podkit.cri.service.errors import status_detail

    assert status_detail("container 'x': not found") == "container 'x': not found"


def test_streaming_request_errors_are_bounded() -> None:
    """A malformed 10k-character request line or header is quoted briefly in the 400."""
    import socket as _socket

    from podkit.cri.streaming.wire import BadRequest, read_request

    for head in (b"GET " + b"x" * 10_000 + b"\r\n\r\n",
                 b"GET / HTTP/1.1\r\n" + b"y" * 10_000 + b"\r\n\r\n"):
        a, b = _socket.socketpair()
        with a, b:
            a.sendall(head)
            with pytest.raises(BadRequest) as err:
                read_request(b)
        assert len(str(err.value)) < 200, len(str(err.value))


def test_unexpected_errors_are_bounded_too(tmp_path: Path) -> None:
    """A non-podkit exception quoting a 10k value: UNKNOWN with a bounded message (grpc's own
    handler would quote it whole and the client would see RESOURCE_EXHAUSTED)."""
    import concurrent.futures

    from podkit.cri import api_pb2_grpc
    from podkit.cri.service.adapter import RUNTIME_METHODS, Servicer

    class _Broken:
        def Version(self, request: Any) -> Any:
            raise ValueError(f"bad value {LONG}")

        def ListContainers(self, request: Any) -> Any:
            raise ValueError("\0" * 5000)

    server = grpc.server(concurrent.futures.ThreadPoolExecutor(2))
    api_pb2_grpc.add_RuntimeServiceServicer_to_server(
        Servicer(_Broken(), RUNTIME_METHODS), server)  # type: ignore[arg-type]
    sock = tmp_path / "s.sock"
    server.add_insecure_port(f"unix://{sock}")
    server.start()
    try:
        with grpc.insecure_channel(f"unix://{sock}") as channel:
            rt = api_pb2_grpc.RuntimeServiceStub(channel)
            for call, req in ((rt.Version, pb.VersionRequest()),
                              (rt.ListContainers, pb.ListContainersRequest())):
                code, details = _code(call, req)
                assert code == grpc.StatusCode.UNKNOWN, (code, details[:100])
                assert len(details) <= BOUND and "unexpected ValueError" in details
    finally:
        server.stop(None)
