"""Bad requests get kubelet's status codes, a message naming the field, and leave nothing."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import grpc
import pytest

import _leaks
from cri.helpers import Harness, container_config, pod_config
from podkit import image
from podkit.cri import api_pb2 as pb

pytestmark = pytest.mark.integration

LEAK_KINDS = ("netns", "link", "mount")


def _fails(call: Callable[[Any], Any], req: Any, code: grpc.StatusCode, *words: str) -> str:
    with pytest.raises(grpc.RpcError) as exc:
        call(req)
    assert exc.value.code() == code, exc.value.details()
    details: str = exc.value.details()
    for w in words:
        assert w in details, details
    return details


class _State:
    """What the server has: pods, containers, rootfs, records, netns/links/mounts."""

    def __init__(self, h: Harness) -> None:
        self.pods = sorted(p.id for p in h.manager.list_sandboxes())
        self.ctrs = sorted(c.id for c in h.manager.list_containers())
        self.rootfs = sorted(r.container_id for r in image.list_rootfs(h.store))
        self.manager_records = sorted(
            p.name for kind in ("sandboxes", "containers")
            for p in (h.manager.state_dir / kind).glob("*.json"))
        self.sys = _leaks.snapshot(LEAK_KINDS)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _State) and vars(self) == vars(other)


@pytest.fixture
def pod(harness: Harness) -> Iterator[str]:
    sid = harness.rt.RunPodSandbox(pb.RunPodSandboxRequest(config=pod_config())).pod_sandbox_id
    yield sid
    harness.rt.RemovePodSandbox(pb.RemovePodSandboxRequest(pod_sandbox_id=sid))


def test_bad_pod_configs(harness: Harness) -> None:
    h = harness
    before = _State(h)
    run = h.rt.RunPodSandbox
    bad = pb.RunPodSandboxRequest(config=pb.PodSandboxConfig())
    _fails(run, bad, grpc.StatusCode.INVALID_ARGUMENT, "config.metadata")
    cfg = pod_config()
    cfg.metadata.name = "has_underscore"
    _fails(run, pb.RunPodSandboxRequest(config=cfg), grpc.StatusCode.INVALID_ARGUMENT,
           "metadata.name")
    cfg = pod_config()
    cfg.linux.security_context.namespace_options.network = pb.CONTAINER
    _fails(run, pb.RunPodSandboxRequest(config=cfg), grpc.StatusCode.INVALID_ARGUMENT,
           "namespace_options.network")
    cfg = pod_config()
    cfg.linux.security_context.namespace_options.ipc = 42
    _fails(run, pb.RunPodSandboxRequest(config=cfg), grpc.StatusCode.INVALID_ARGUMENT,
           "config.linux.security_context.namespace_options.ipc")
    _fails(run, pb.RunPodSandboxRequest(config=pod_config(), runtime_handler="kata"),
           grpc.StatusCode.INVALID_ARGUMENT, "runtime_handler", "kata")
    cfg = pod_config()
    cfg.port_mappings.add(container_port=70000, host_port=1)
    _fails(run, pb.RunPodSandboxRequest(config=cfg), grpc.StatusCode.INVALID_ARGUMENT,
           "port_mappings")
    cfg = pod_config()
    cfg.annotations["kubernetes.io/ingress-bandwidth"] = "lots"
    _fails(run, pb.RunPodSandboxRequest(config=cfg), grpc.StatusCode.INVALID_ARGUMENT,
           "kubernetes.io/ingress-bandwidth")
    assert _State(h) == before


def test_duplicate_pod_name(harness: Harness) -> None:
    h = harness
    cfg = pod_config()
    sid = h.rt.RunPodSandbox(pb.RunPodSandboxRequest(config=cfg)).pod_sandbox_id
    try:
        before = _State(h)
        _fails(h.rt.RunPodSandbox, pb.RunPodSandboxRequest(config=cfg),
               grpc.StatusCode.ALREADY_EXISTS, cfg.metadata.name)
        assert _State(h) == before
    finally:
        h.rt.RemovePodSandbox(pb.RemovePodSandboxRequest(pod_sandbox_id=sid))
    # the name is free again once the pod is gone
    sid = h.rt.RunPodSandbox(pb.RunPodSandboxRequest(config=cfg)).pod_sandbox_id
    h.rt.RemovePodSandbox(pb.RemovePodSandboxRequest(pod_sandbox_id=sid))


def test_bad_container_configs(harness: Harness, pod: str) -> None:
    h = harness
    before = _State(h)
    create = h.rt.CreateContainer

    def req(cfg: Any, sid: str = pod) -> pb.CreateContainerRequest:
        return pb.CreateContainerRequest(pod_sandbox_id=sid, config=cfg)

    _fails(create, req(container_config("x"), "0" * 64), grpc.StatusCode.NOT_FOUND, "0" * 64)
    _fails(create, req(container_config("x"), ""), grpc.StatusCode.INVALID_ARGUMENT,
           "pod_sandbox_id")
    _fails(create, req(pb.ContainerConfig(image=pb.ImageSpec(image="x"))),
           grpc.StatusCode.INVALID_ARGUMENT, "config.metadata")
    _fails(create, req(container_config("x", image="localhost/pk-cri/absent:1")),
           grpc.StatusCode.NOT_FOUND, "config.image.image", "absent")
    _fails(create, req(container_config("x", image="")), grpc.StatusCode.INVALID_ARGUMENT,
           "config.image.image")
    _fails(create, req(container_config("x", image="UPPER/Case")),
           grpc.StatusCode.INVALID_ARGUMENT, "config.image.image")
    cfg = container_config("x")
    cfg.mounts.add(container_path="relative", host_path="/tmp")
    _fails(create, req(cfg), grpc.StatusCode.INVALID_ARGUMENT, "mounts[0]", "relative")
    cfg = container_config("x")
    cfg.envs.add(key="BAD", value=b"\xff")
    _fails(create, req(cfg), grpc.StatusCode.INVALID_ARGUMENT, "config.envs[0].value")
    cfg = container_config("x")
    cfg.CDI_devices.add(name="vendor.com/gpu=0")
    _fails(create, req(cfg), grpc.StatusCode.INVALID_ARGUMENT, "vendor.com/gpu=0")
    cfg = container_config("x")
    cfg.annotations["cdi.k8s.io/gpu"] = "vendor.com/gpu=1"
    _fails(create, req(cfg), grpc.StatusCode.INVALID_ARGUMENT, "vendor.com/gpu=1")
    cfg = container_config("x")
    cfg.linux.security_context.privileged = True
    _fails(create, req(cfg), grpc.StatusCode.INVALID_ARGUMENT, "privileged")
    cfg = container_config("x")
    cfg.linux.security_context.namespace_options.pid = pb.TARGET
    _fails(create, req(cfg), grpc.StatusCode.INVALID_ARGUMENT, "target_id")
    assert _State(h) == before

    cid = create(req(container_config("dup"))).container_id
    mid = _State(h)
    _fails(create, req(container_config("dup")), grpc.StatusCode.ALREADY_EXISTS, "dup")
    assert _State(h) == mid
    h.rt.RemoveContainer(pb.RemoveContainerRequest(container_id=cid))
    assert _State(h) == before


def test_unknown_ids(harness: Harness, pod: str) -> None:
    h = harness
    nope = "f" * 64
    for call, req in (
        (h.rt.StartContainer, pb.StartContainerRequest(container_id=nope)),
        (h.rt.ContainerStatus, pb.ContainerStatusRequest(container_id=nope)),
        (h.rt.ExecSync, pb.ExecSyncRequest(container_id=nope, cmd=["true"])),
        (h.rt.ContainerStats, pb.ContainerStatsRequest(container_id=nope)),
        (h.rt.UpdateContainerResources, pb.UpdateContainerResourcesRequest(container_id=nope)),
        (h.rt.ReopenContainerLog, pb.ReopenContainerLogRequest(container_id=nope)),
        (h.rt.PodSandboxStatus, pb.PodSandboxStatusRequest(pod_sandbox_id=nope)),
        (h.rt.PodSandboxStats, pb.PodSandboxStatsRequest(pod_sandbox_id=nope)),
    ):
        _fails(call, req, grpc.StatusCode.NOT_FOUND, nope)
    _fails(h.rt.UpdatePodSandboxResources,
           pb.UpdatePodSandboxResourcesRequest(pod_sandbox_id=nope),
           grpc.StatusCode.NOT_FOUND, nope)
    h.rt.UpdatePodSandboxResources(pb.UpdatePodSandboxResourcesRequest(
        pod_sandbox_id=pod, resources=pb.LinuxContainerResources(cpu_shares=512)))
    # idempotent stop/remove of unknown IDs succeed
    h.rt.StopContainer(pb.StopContainerRequest(container_id=nope))
    h.rt.RemoveContainer(pb.RemoveContainerRequest(container_id=nope))
    h.rt.StopPodSandbox(pb.StopPodSandboxRequest(pod_sandbox_id=nope))
    h.rt.RemovePodSandbox(pb.RemovePodSandboxRequest(pod_sandbox_id=nope))
    _fails(h.rt.StopPodSandbox, pb.StopPodSandboxRequest(), grpc.StatusCode.INVALID_ARGUMENT,
           "pod_sandbox_id")


def test_wrong_states(harness: Harness, pod: str) -> None:
    h = harness
    cid = h.rt.CreateContainer(pb.CreateContainerRequest(
        pod_sandbox_id=pod, config=container_config("w"))).container_id
    _fails(h.rt.ExecSync, pb.ExecSyncRequest(container_id=cid, cmd=["true"]),
           grpc.StatusCode.FAILED_PRECONDITION, cid)
    _fails(h.rt.ExecSync, pb.ExecSyncRequest(container_id=cid),
           grpc.StatusCode.INVALID_ARGUMENT, "cmd")
    h.rt.StartContainer(pb.StartContainerRequest(container_id=cid))
    _fails(h.rt.StartContainer, pb.StartContainerRequest(container_id=cid),
           grpc.StatusCode.FAILED_PRECONDITION, cid)
    h.rt.StopPodSandbox(pb.StopPodSandboxRequest(pod_sandbox_id=pod))
    _fails(h.rt.CreateContainer, pb.CreateContainerRequest(
        pod_sandbox_id=pod, config=container_config("late")),
        grpc.StatusCode.FAILED_PRECONDITION, "not ready")


class _FakeStreaming:
    def __init__(self) -> None:
        self.calls: list[Any] = []

    def get_exec(self, req: pb.ExecRequest) -> str:
        self.calls.append(req)
        return "http://127.0.0.1:1/exec/token"

    def get_attach(self, req: pb.AttachRequest) -> str:
        self.calls.append(req)
        return "http://127.0.0.1:1/attach/token"

    def get_port_forward(self, req: pb.PortForwardRequest) -> str:
        self.calls.append(req)
        return "http://127.0.0.1:1/portforward/token"


def test_streaming_urls_come_from_the_streaming_server(harness: Harness, pod: str) -> None:
    h = harness
    fake = _FakeStreaming()
    h.server.service.streaming = fake
    try:
        cid = h.rt.CreateContainer(pb.CreateContainerRequest(
            pod_sandbox_id=pod, config=container_config("s"))).container_id
        _fails(h.rt.Exec, pb.ExecRequest(container_id=cid, cmd=["sh"], stdout=True),
               grpc.StatusCode.FAILED_PRECONDITION, "CONTAINER_CREATED")
        h.rt.StartContainer(pb.StartContainerRequest(container_id=cid))
        assert h.rt.Exec(pb.ExecRequest(container_id=cid, cmd=["sh"], stdout=True)).url \
            == "http://127.0.0.1:1/exec/token"
        _fails(h.rt.Exec, pb.ExecRequest(container_id=cid, cmd=["sh"]),
               grpc.StatusCode.INVALID_ARGUMENT, "stdin")
        assert h.rt.Attach(pb.AttachRequest(container_id=cid, stdout=True)).url.endswith(
            "/attach/token")
        assert h.rt.PortForward(pb.PortForwardRequest(pod_sandbox_id=pod, port=[80])).url \
            .endswith("/portforward/token")
        assert [type(c).__name__ for c in fake.calls] == [
            "ExecRequest", "AttachRequest", "PortForwardRequest"]
        _fails(h.rt.PortForward, pb.PortForwardRequest(pod_sandbox_id="e" * 64),
               grpc.StatusCode.NOT_FOUND, "e" * 64)
    finally:
        h.server.service.streaming = None


def test_rootfs_of_containers_removed_behind_the_servers_back(harness: Harness) -> None:
    """The manager owns a container's rootfs: removing the container behind the server's back
    (a pod removal that failed half-way) frees it, and the retried removal succeeds."""
    h = harness
    before = _State(h)
    sid = h.rt.RunPodSandbox(pb.RunPodSandboxRequest(config=pod_config())).pod_sandbox_id
    cid = h.rt.CreateContainer(pb.CreateContainerRequest(
        pod_sandbox_id=sid, config=container_config("gone"))).container_id
    key = h.server.service._image_of(cid).rootfs_id
    assert key in {r.container_id for r in image.list_rootfs(h.store)}
    h.manager.remove_container(cid)  # as if by the failed first attempt
    assert key not in {r.container_id for r in image.list_rootfs(h.store)}
    h.rt.RemovePodSandbox(pb.RemovePodSandboxRequest(pod_sandbox_id=sid))
    assert _State(h) == before
