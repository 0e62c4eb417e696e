"""Many pods at once through one server: kubelet starts pods concurrently."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest

from cri.helpers import Harness, container_config, pod_config
from podkit.cri import api_pb2 as pb

pytestmark = pytest.mark.integration

PODS = 16


def _pod(h: Harness, i: int) -> tuple[str, str, str]:
    sid = h.rt.RunPodSandbox(pb.RunPodSandboxRequest(
        config=pod_config(labels={"batch": "par", "i": str(i)}))).pod_sandbox_id
    cid = h.rt.CreateContainer(pb.CreateContainerRequest(
        pod_sandbox_id=sid, config=container_config(f"c{i}"))).container_id
    h.rt.StartContainer(pb.StartContainerRequest(container_id=cid))
    out = h.rt.ExecSync(pb.ExecSyncRequest(
        container_id=cid, cmd=["sh", "-c", "ip -4 -o addr show eth0"], timeout=30))
    assert out.exit_code == 0, out.stderr
    ip = out.stdout.split()[3].decode().split("/")[0]
    return sid, cid, ip


def test_parallel_pods(harness: Harness) -> None:
    h = harness
    with ThreadPoolExecutor(PODS) as pool:
        results = list(pool.map(lambda i: _pod(h, i), range(PODS)))
    sids = {sid for sid, _, _ in results}
    ips = [ip for _, _, ip in results]
    assert len(sids) == PODS
    assert len(set(ips)) == PODS
    # the IP a container sees is the one the pod status reports
    for sid, _, ip in results:
        st = h.rt.PodSandboxStatus(pb.PodSandboxStatusRequest(pod_sandbox_id=sid)).status
        assert st.network.ip == ip
    listed = h.rt.ListPodSandbox(pb.ListPodSandboxRequest(
        filter=pb.PodSandboxFilter(label_selector={"batch": "par"}))).items
    assert {p.id for p in listed} == sids
    running = h.rt.ListContainers(pb.ListContainersRequest(filter=pb.ContainerFilter(
        state=pb.ContainerStateValue(state=pb.CONTAINER_RUNNING)))).containers
    assert {c.id for c in running} >= {cid for _, cid, _ in results}
    with ThreadPoolExecutor(PODS) as pool:
        list(pool.map(lambda sid: h.rt.RemovePodSandbox(
            pb.RemovePodSandboxRequest(pod_sandbox_id=sid)), sids))
    assert h.rt.ListPodSandbox(pb.ListPodSandboxRequest(
        filter=pb.PodSandboxFilter(label_selector={"batch": "par"}))).items == []
    assert h.rt.ListContainers(pb.ListContainersRequest()).containers == []
