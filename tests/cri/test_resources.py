"""CRI CreateContainer resources through the reference server under runc and crun, read back
from the container's cgroup (v1 on this host, v2 in the make test-cgroupv2 guest); a resource
the host cannot give is INVALID_ARGUMENT at CreateContainer, naming the field."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest

from cri.helpers import Harness, container_config, pod_config
from podkit import cgroups
from podkit.cri import api_pb2 as pb
from support import require_binary, require_isolated

pytestmark = pytest.mark.integration

V2 = cgroups.host().mode is cgroups.Mode.UNIFIED
MiB = 1 << 20


@pytest.fixture(params=["runc", "crun"])
def served(request: pytest.FixtureRequest, bridge: None, image_layouts: dict[str, Path],
           tmp_path: Path) -> Iterator[Harness]:
    require_isolated()
    require_binary(request.param)
    require_binary("conmon")
    h = Harness(tmp_path / "cri", image_layouts, runtime=request.param)
    yield h
    h.close()


def _pod(h: Harness) -> tuple[str, pb.PodSandboxConfig]:
    cfg = pod_config()
    cfg.linux.security_context.namespace_options.network = pb.NODE
    cfg.hostname = ""
    return h.rt.RunPodSandbox(pb.RunPodSandboxRequest(config=cfg)).pod_sandbox_id, cfg


def _file(cgroups_path: str, controller: str, name: str) -> str:
    return (cgroups.cgroup_dir(controller, cgroups_path) / name).read_text().strip()


def test_create_container_resources_reach_the_cgroup(served: Harness) -> None:
    h = served
    sid, cfg = _pod(h)
    ccfg = container_config("res", ["sleep", "600"])
    res = ccfg.linux.resources
    res.cpu_shares, res.cpu_quota, res.cpu_period = 1024, 40000, 100000
    res.memory_limit_in_bytes = 48 * MiB
    res.cpuset_cpus = "0"
    if V2:
        res.unified["memory.high"] = str(40 * MiB)
    cid = h.rt.CreateContainer(pb.CreateContainerRequest(
        pod_sandbox_id=sid, config=ccfg, sandbox_config=cfg)).container_id
    h.rt.StartContainer(pb.StartContainerRequest(container_id=cid))
    path = h.manager.container_status(cid).cgroups_path
    assert _file(path, "cpuset", "cpuset.cpus") == "0"
    if V2:
        assert _file(path, "cpu", "cpu.weight") == str(1 + (1024 - 2) * 9999 // 262142)
        assert _file(path, "cpu", "cpu.max") == "40000 100000"
        assert _file(path, "memory", "memory.max") == str(48 * MiB)
        assert _file(path, "memory", "memory.swap.max") == "0"  # swap = limit: none
        assert _file(path, "memory", "memory.high") == str(40 * MiB)
    else:
        assert _file(path, "cpu", "cpu.shares") == "1024"
        assert _file(path, "cpu", "cpu.cfs_quota_us") == "40000"
        assert _file(path, "memory", "memory.limit_in_bytes") == str(48 * MiB)
        assert _file(path, "memory", "memory.memsw.limit_in_bytes") == str(48 * MiB)
    status = h.rt.ContainerStatus(pb.ContainerStatusRequest(container_id=cid)).status
    assert status.resources.linux.memory_limit_in_bytes == 48 * MiB
    h.rt.StopPodSandbox(pb.StopPodSandboxRequest(pod_sandbox_id=sid))
    h.rt.RemovePodSandbox(pb.RemovePodSandboxRequest(pod_sandbox_id=sid))


def test_an_unavailable_resource_is_invalid_argument_at_create(served: Harness) -> None:
    h = served
    sid, cfg = _pod(h)
    ccfg = container_config("bad", ["true"])
    key = "memory.high" if not V2 else "memory.hgih"
    ccfg.linux.resources.unified[key] = "1M"
    with pytest.raises(grpc.RpcError) as err:
        h.rt.CreateContainer(pb.CreateContainerRequest(
            pod_sandbox_id=sid, config=ccfg, sandbox_config=cfg))
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert f"$.linux.resources.unified[{key!r}]" in str(err.value.details())
    listed = h.rt.ListContainers(pb.ListContainersRequest()).containers
    assert [c.id for c in listed] == []
    h.rt.StopPodSandbox(pb.StopPodSandboxRequest(pod_sandbox_id=sid))
    h.rt.RemovePodSandbox(pb.RemovePodSandboxRequest(pod_sandbox_id=sid))
