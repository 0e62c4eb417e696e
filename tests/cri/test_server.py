"""The reference CRI server driven over gRPC like kubelet: the pod and container lifecycle."""

from __future__ import annotations

import contextlib
import json
import os
import queue
import signal
import threading
import time
from pathlib import Path
from typing import Any

import grpc
import pytest

from cri.helpers import BUSYBOX, PAUSE, Harness, container_config, import_images, pod_config
from podkit import cgroups
from podkit.cri import api_pb2 as pb
from podkit.runtime import read_cri_log

pytestmark = pytest.mark.integration


def _run_pod(h: Harness, **kw: Any) -> tuple[str, Any]:
    cfg = pod_config(**kw)
    resp = h.rt.RunPodSandbox(pb.RunPodSandboxRequest(config=cfg))
    return resp.pod_sandbox_id, cfg


def _wait_state(h: Harness, cid: str, state: int) -> Any:
    for _ in range(200):
        st = h.rt.ContainerStatus(pb.ContainerStatusRequest(container_id=cid)).status
        if st.state == state:
            return st
        time.sleep(0.05)
    raise AssertionError(f"container {cid} never reached state {state}: {st}")


def test_version_status_runtime_config(harness: Harness) -> None:
    v = harness.rt.Version(pb.VersionRequest(version="v1"))
    assert (v.runtime_name, v.runtime_api_version) == ("podkit", "v1")
    st = harness.rt.Status(pb.StatusRequest(verbose=True))
    conds = {c.type: c.status for c in st.status.conditions}
    assert conds == {"RuntimeReady": True, "NetworkReady": True}
    assert "config" in st.info
    rc = harness.rt.RuntimeConfig(pb.RuntimeConfigRequest())
    assert rc.linux.cgroup_driver == pb.CGROUPFS
    harness.rt.UpdateRuntimeConfig(pb.UpdateRuntimeConfigRequest(
        runtime_config=pb.RuntimeConfig(network_config=pb.NetworkConfig(pod_cidr="10.89.0.0/16"))))
    assert harness.server.service.pod_cidr == "10.89.0.0/16"


def test_kubelet_sequence(harness: Harness, tmp_path: Path) -> None:
    h = harness
    logs = tmp_path / "logs"
    sid, cfg = _run_pod(h, log_directory=str(logs), labels={"app": "seq"})
    st = h.rt.PodSandboxStatus(pb.PodSandboxStatusRequest(pod_sandbox_id=sid, verbose=True))
    assert st.status.state == pb.SANDBOX_READY
    assert st.status.network.ip.startswith("10.89.")
    assert st.status.metadata.name == cfg.metadata.name
    assert st.status.labels["app"] == "seq"
    assert st.status.linux.namespaces.options.pid == pb.CONTAINER

    ccfg = container_config("app", ["sh", "-c", "trap 'exit 7' TERM; echo out; echo err >&2; "
                                    "while true; do sleep 0.1; done"],
                            log_path="app/0.log", labels={"tier": "web"})
    ccfg.envs.add(key="FROM_CONFIG", value=b"1")
    cid = h.rt.CreateContainer(pb.CreateContainerRequest(
        pod_sandbox_id=sid, config=ccfg, sandbox_config=cfg)).container_id
    status = h.rt.ContainerStatus(pb.ContainerStatusRequest(container_id=cid)).status
    assert status.state == pb.CONTAINER_CREATED
    assert status.image.image == BUSYBOX
    assert status.image_id.startswith("sha256:")
    assert status.image_ref.startswith("localhost/pk-cri/busybox@sha256:")
    assert status.log_path == str(logs / "app/0.log")
    assert status.stop_signal == pb.SIGTERM  # from the image config

    h.rt.StartContainer(pb.StartContainerRequest(container_id=cid))
    status = _wait_state(h, cid, pb.CONTAINER_RUNNING)
    assert status.started_at >= status.created_at > 0
    assert status.user.linux.uid == 0

    # The image config's env, working dir; the config's env; the pod's network namespace.
    res = h.rt.ExecSync(pb.ExecSyncRequest(
        container_id=cid, cmd=["sh", "-c", "echo $FROM_IMAGE $FROM_CONFIG; pwd; hostname"],
        timeout=10))
    assert res.exit_code == 0
    assert res.stdout.decode().split() == ["yes", "1", "/tmp", "pk-cri-pod"]
    res = h.rt.ExecSync(pb.ExecSyncRequest(container_id=cid, cmd=["sh", "-c", "exit 3"]))
    assert res.exit_code == 3

    # Logs in CRI format where kubelet looks for them.
    path = logs / "app" / "0.log"
    for _ in range(100):
        if path.exists() and len(read_cri_log(path)) >= 2:
            break
        time.sleep(0.05)
    lines = {(ln.stream, ln.content) for ln in read_cri_log(path)}
    assert {("stdout", b"out"), ("stderr", b"err")} <= lines

    stats = h.rt.ContainerStats(pb.ContainerStatsRequest(container_id=cid)).stats
    assert stats.attributes.id == cid and stats.attributes.labels["tier"] == "web"
    assert stats.memory.working_set_bytes.value > 0
    # every number the cgroup gives (v1 here, v2 in the guest), no zeros
    assert stats.memory.usage_bytes.value >= stats.memory.working_set_bytes.value
    assert stats.memory.rss_bytes.value > 0 and stats.memory.page_faults.value > 0
    assert stats.cpu.usage_core_nano_seconds.value > 0
    psi = cgroups.host().mode is cgroups.Mode.UNIFIED and Path("/proc/pressure").exists()
    assert stats.cpu.HasField("psi") == stats.memory.HasField("psi") == psi
    assert stats.writable_layer.fs_id.mountpoint
    ls = h.rt.ListContainerStats(pb.ListContainerStatsRequest(
        filter=pb.ContainerStatsFilter(pod_sandbox_id=sid)))
    assert [s.attributes.id for s in ls.stats] == [cid]
    # the second sample has a CPU rate (kubelet's usage_nano_cores)
    assert not stats.cpu.HasField("usage_nano_cores")
    again = h.rt.ContainerStats(pb.ContainerStatsRequest(container_id=cid)).stats
    assert again.cpu.HasField("usage_nano_cores")
    assert again.cpu.usage_core_nano_seconds.value >= stats.cpu.usage_core_nano_seconds.value
    pstats = h.rt.PodSandboxStats(pb.PodSandboxStatsRequest(pod_sandbox_id=sid)).stats
    assert pstats.attributes.id == sid
    assert pstats.linux.process.process_count.value >= 2
    assert pstats.linux.cpu.usage_core_nano_seconds.value > 0
    assert pstats.linux.memory.working_set_bytes.value > 0
    assert pstats.linux.memory.usage_bytes.value >= pstats.linux.memory.working_set_bytes.value
    assert [c.attributes.id for c in pstats.linux.containers] == [cid]
    lps = h.rt.ListPodSandboxStats(pb.ListPodSandboxStatsRequest(
        filter=pb.PodSandboxStatsFilter(id=sid)))
    assert [s.attributes.id for s in lps.stats] == [sid]

    h.rt.UpdateContainerResources(pb.UpdateContainerResourcesRequest(
        container_id=cid, linux=pb.LinuxContainerResources(memory_limit_in_bytes=64 << 20)))
    status = h.rt.ContainerStatus(pb.ContainerStatusRequest(container_id=cid)).status
    assert status.resources.linux.memory_limit_in_bytes == 64 << 20

    # Log rotation: kubelet moves the file away and asks for a new one.
    os.rename(path, str(path) + ".1")
    h.rt.ReopenContainerLog(pb.ReopenContainerLogRequest(container_id=cid))
    assert path.exists()

    h.rt.StopContainer(pb.StopContainerRequest(container_id=cid, timeout=10))
    status = _wait_state(h, cid, pb.CONTAINER_EXITED)
    assert status.reason == "Error"
    assert status.finished_at >= status.started_at
    # sh got SIGTERM (the image's StopSignal) and exited by its trap, not by SIGKILL.
    assert status.exit_code == 7

    rootfs = h.server.service._image_of(cid).rootfs
    assert Path(rootfs).is_dir()
    h.rt.RemoveContainer(pb.RemoveContainerRequest(container_id=cid))
    assert not Path(rootfs).exists()
    assert h.rt.ListContainers(pb.ListContainersRequest(
        filter=pb.ContainerFilter(pod_sandbox_id=sid))).containers == []
    h.rt.RemoveContainer(pb.RemoveContainerRequest(container_id=cid))  # idempotent

    h.rt.StopPodSandbox(pb.StopPodSandboxRequest(pod_sandbox_id=sid))
    after = h.rt.PodSandboxStatus(pb.PodSandboxStatusRequest(pod_sandbox_id=sid)).status
    assert after.state == pb.SANDBOX_NOTREADY
    h.rt.StopPodSandbox(pb.StopPodSandboxRequest(pod_sandbox_id=sid))  # idempotent
    h.rt.RemovePodSandbox(pb.RemovePodSandboxRequest(pod_sandbox_id=sid))
    h.rt.RemovePodSandbox(pb.RemovePodSandboxRequest(pod_sandbox_id=sid))  # idempotent
    with pytest.raises(grpc.RpcError) as exc:
        h.rt.PodSandboxStatus(pb.PodSandboxStatusRequest(pod_sandbox_id=sid))
    assert exc.value.code() == grpc.StatusCode.NOT_FOUND


def test_filters(harness: Harness) -> None:
    h = harness
    a, _ = _run_pod(h, labels={"group": "a", "k": "1"})
    b, _ = _run_pod(h, labels={"group": "b", "k": "1"})
    try:
        ca = h.rt.CreateContainer(pb.CreateContainerRequest(
            pod_sandbox_id=a, config=container_config("one", labels={"c": "x"}))).container_id
        cb = h.rt.CreateContainer(pb.CreateContainerRequest(
            pod_sandbox_id=b, config=container_config("two", labels={"c": "y"}))).container_id
        h.rt.StartContainer(pb.StartContainerRequest(container_id=cb))

        def pods(**f: Any) -> list[str]:
            return [p.id for p in h.rt.ListPodSandbox(pb.ListPodSandboxRequest(
                filter=pb.PodSandboxFilter(**f))).items]

        def ctrs(**f: Any) -> list[str]:
            return [c.id for c in h.rt.ListContainers(pb.ListContainersRequest(
                filter=pb.ContainerFilter(**f))).containers]

        assert set(pods(label_selector={"k": "1"})) == {a, b}
        assert pods(label_selector={"group": "a"}) == [a]
        assert pods(id=b[:12]) == [b]
        assert pods(label_selector={"group": "c"}) == []
        assert set(pods(state=pb.PodSandboxStateValue(state=pb.SANDBOX_READY))) >= {a, b}
        h.rt.StopPodSandbox(pb.StopPodSandboxRequest(pod_sandbox_id=a))
        assert a in pods(state=pb.PodSandboxStateValue(state=pb.SANDBOX_NOTREADY))
        assert a not in pods(state=pb.PodSandboxStateValue(state=pb.SANDBOX_READY))

        # the v0.36 Stream* variants give the same, in batches
        from podkit.cri.service import requests as srv

        batch = srv.STREAM_BATCH
        srv.STREAM_BATCH = 1
        try:
            msgs = list(h.rt.StreamPodSandboxes(pb.StreamPodSandboxesRequest(
                filter=pb.PodSandboxFilter(label_selector={"k": "1"}))))
            assert [len(m.pod_sandboxes) for m in msgs] == [1, 1]
            assert {m.pod_sandboxes[0].id for m in msgs} == {a, b}
            msgs = list(h.rt.StreamContainers(pb.StreamContainersRequest(
                filter=pb.ContainerFilter(pod_sandbox_id=b))))
            assert [c.id for m in msgs for c in m.containers] == [cb]
            msgs = list(h.rt.StreamContainerStats(pb.StreamContainerStatsRequest(
                filter=pb.ContainerStatsFilter(pod_sandbox_id=b))))
            assert [c.attributes.id for m in msgs for c in m.container_stats] == [cb]
            msgs = list(h.rt.StreamPodSandboxStats(pb.StreamPodSandboxStatsRequest(
                filter=pb.PodSandboxStatsFilter(id=b))))
            assert [p.attributes.id for m in msgs for p in m.pod_sandbox_stats] == [b]
            msgs = list(h.rt.StreamPodSandboxes(pb.StreamPodSandboxesRequest(
                filter=pb.PodSandboxFilter(label_selector={"k": "none"}))))
            assert [len(m.pod_sandboxes) for m in msgs] == [0]
        finally:
            srv.STREAM_BATCH = batch

        assert ctrs(pod_sandbox_id=a) == [ca]
        assert ctrs(label_selector={"c": "y"}) == [cb]
        assert ctrs(id=ca[:10]) == [ca]
        assert ctrs(state=pb.ContainerStateValue(state=pb.CONTAINER_RUNNING),
                    pod_sandbox_id=b) == [cb]
        assert ctrs(state=pb.ContainerStateValue(state=pb.CONTAINER_CREATED),
                    pod_sandbox_id=b) == []
        listed = h.rt.ListContainers(pb.ListContainersRequest(
            filter=pb.ContainerFilter(id=cb))).containers[0]
        assert (listed.pod_sandbox_id, listed.metadata.name, listed.image.image) == (
            b, "two", BUSYBOX)
    finally:
        for sid in (a, b):
            h.rt.RemovePodSandbox(pb.RemovePodSandboxRequest(pod_sandbox_id=sid))


def test_events_stream(harness: Harness) -> None:
    h = harness
    events: queue.Queue[Any] = queue.Queue()
    stream = h.rt.GetContainerEvents(pb.GetEventsRequest())

    def consume() -> None:
        try:
            for ev in stream:
                events.put(ev)
        except grpc.RpcError:
            pass

    t = threading.Thread(target=consume, daemon=True)
    t.start()
    for _ in range(100):
        if h.server.service.events.subscribers:
            break
        time.sleep(0.02)
    sid, _ = _run_pod(h)
    cid = h.rt.CreateContainer(pb.CreateContainerRequest(
        pod_sandbox_id=sid, config=container_config("ev"))).container_id
    h.rt.StartContainer(pb.StartContainerRequest(container_id=cid))
    h.rt.StopContainer(pb.StopContainerRequest(container_id=cid, timeout=0))
    h.rt.RemoveContainer(pb.RemoveContainerRequest(container_id=cid))
    h.rt.RemovePodSandbox(pb.RemovePodSandboxRequest(pod_sandbox_id=sid))
    want = [
        (sid, pb.CONTAINER_CREATED_EVENT), (sid, pb.CONTAINER_STARTED_EVENT),
        (cid, pb.CONTAINER_CREATED_EVENT), (cid, pb.CONTAINER_STARTED_EVENT),
        (cid, pb.CONTAINER_STOPPED_EVENT), (cid, pb.CONTAINER_DELETED_EVENT),
        (sid, pb.CONTAINER_STOPPED_EVENT), (sid, pb.CONTAINER_DELETED_EVENT),
    ]
    got: list[Any] = []
    while len(got) < len(want):
        try:
            got.append(events.get(timeout=10))
        except queue.Empty:
            break
    stream.cancel()
    assert [(e.container_id, e.container_event_type) for e in got] == want
    assert all(e.created_at > 0 for e in got)
    assert got[0].pod_sandbox_status.id == sid
    started = got[3]
    assert started.containers_statuses[0].state == pb.CONTAINER_RUNNING
    t.join(10)
    for _ in range(100):
        if not h.server.service.events.subscribers:
            break
        time.sleep(0.05)
    assert h.server.service.events.subscribers == 0


def test_images(harness: Harness) -> None:
    h = harness
    images = h.img.ListImages(pb.ListImagesRequest()).images
    by_tag = {t: i for i in images for t in i.repo_tags}
    assert set(by_tag) >= {BUSYBOX, PAUSE}
    assert by_tag[PAUSE].pinned and not by_tag[BUSYBOX].pinned
    bb = by_tag[BUSYBOX]
    assert bb.id.startswith("sha256:") and bb.size > 0
    assert bb.repo_digests[0].startswith("localhost/pk-cri/busybox@sha256:")
    st = h.img.ImageStatus(pb.ImageStatusRequest(image=pb.ImageSpec(image=BUSYBOX),
                                                 verbose=True))
    assert st.image.id == bb.id and "info" in st.info
    assert h.img.ImageStatus(pb.ImageStatusRequest(image=pb.ImageSpec(image=bb.id))).image.id \
        == bb.id
    missing = h.img.ImageStatus(pb.ImageStatusRequest(
        image=pb.ImageSpec(image="localhost/pk-cri/missing:1")))
    assert not missing.HasField("image")
    filtered = h.img.ListImages(pb.ListImagesRequest(
        filter=pb.ImageFilter(image=pb.ImageSpec(image=BUSYBOX)))).images
    assert [i.id for i in filtered] == [bb.id]
    streamed = [i for m in h.img.StreamImages(pb.StreamImagesRequest()) for i in m.images]
    assert sorted(i.id for i in streamed) == sorted(i.id for i in images)
    fs = h.img.ImageFsInfo(pb.ImageFsInfoRequest()).image_filesystems
    assert fs[0].used_bytes.value > 0 and fs[0].inodes_used.value > 0

    # Tag, then remove by ID: every name goes; removing again succeeds.
    h.store.tag(BUSYBOX, "localhost/pk-cri/extra:1")
    ids = {i.id: list(i.repo_tags) for i in h.img.ListImages(pb.ListImagesRequest()).images}
    assert sorted(ids[bb.id]) == sorted([BUSYBOX, "localhost/pk-cri/extra:1"])
    config_blob = h.store.blob_path(bb.id)
    assert config_blob.exists()
    h.img.RemoveImage(pb.RemoveImageRequest(image=pb.ImageSpec(image="localhost/pk-cri/extra:1")))
    assert not h.img.ImageStatus(pb.ImageStatusRequest(
        image=pb.ImageSpec(image=BUSYBOX))).HasField("image")
    assert not config_blob.exists()  # collected; the layer shared with the pause image stays
    assert h.img.ImageStatus(pb.ImageStatusRequest(
        image=pb.ImageSpec(image=PAUSE))).image.pinned
    h.img.RemoveImage(pb.RemoveImageRequest(image=pb.ImageSpec(image=BUSYBOX)))
    import_images(h.base, {BUSYBOX: h.layouts[BUSYBOX]})
    assert h.img.ImageStatus(pb.ImageStatusRequest(
        image=pb.ImageSpec(image=BUSYBOX))).image.id == bb.id


def test_remove_image_in_use(harness: Harness) -> None:
    """As containerd: RemoveImage of an image a container uses succeeds; the container keeps
    its rootfs (the manager's) and its status keeps the image's name, ID and repo digest."""
    h = harness
    sid, _ = _run_pod(h)
    try:
        cid = h.rt.CreateContainer(pb.CreateContainerRequest(
            pod_sandbox_id=sid, config=container_config("inuse", ["sleep", "60"]))).container_id
        before = h.rt.ContainerStatus(pb.ContainerStatusRequest(container_id=cid)).status
        h.img.RemoveImage(pb.RemoveImageRequest(image=pb.ImageSpec(image=BUSYBOX)))
        assert not h.img.ImageStatus(pb.ImageStatusRequest(
            image=pb.ImageSpec(image=BUSYBOX))).HasField("image")
        h.rt.StartContainer(pb.StartContainerRequest(container_id=cid))
        res = h.rt.ExecSync(pb.ExecSyncRequest(container_id=cid, cmd=["echo", "ok"]))
        assert (res.exit_code, res.stdout) == (0, b"ok\n")
        st = h.rt.ContainerStatus(pb.ContainerStatusRequest(container_id=cid)).status
        assert (st.image.image, st.image_id, st.image_ref) == (
            before.image.image, before.image_id, before.image_ref)
    finally:
        h.rt.RemovePodSandbox(pb.RemovePodSandboxRequest(pod_sandbox_id=sid))
        import_images(h.base, {BUSYBOX: h.layouts[BUSYBOX]})


def test_pull_image_not_pullable(harness: Harness) -> None:
    with pytest.raises(grpc.RpcError) as exc:
        harness.img.PullImage(pb.PullImageRequest(image=pb.ImageSpec(image="Bad Ref")))
    assert exc.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "image.image" in exc.value.details()


def test_exec_attach_port_forward_unimplemented(harness: Harness) -> None:
    calls: list[tuple[Any, Any]] = [
                     (harness.rt.Exec, pb.ExecRequest(container_id="x", cmd=["sh"])),
                      (harness.rt.Attach, pb.AttachRequest(container_id="x")),
                      (harness.rt.PortForward, pb.PortForwardRequest(pod_sandbox_id="x")),
                      (harness.rt.CheckpointContainer, pb.CheckpointContainerRequest()),
                      (harness.rt.ListMetricDescriptors, pb.ListMetricDescriptorsRequest())]
    for call, req in calls:
        with pytest.raises(grpc.RpcError) as exc:
            call(req)
        assert exc.value.code() == grpc.StatusCode.UNIMPLEMENTED, call


def test_exec_and_attach_through_the_streaming_server(harness: Harness) -> None:
    from podkit.cri.service import manager_streaming
    from podkit.cri.streaming.client import run_remotecommand

    h = harness
    streaming = manager_streaming(h.manager)
    h.server.service.streaming = streaming
    sid, _ = _run_pod(h)
    try:
        cid = h.rt.CreateContainer(pb.CreateContainerRequest(
            pod_sandbox_id=sid, config=container_config("st"))).container_id
        h.rt.StartContainer(pb.StartContainerRequest(container_id=cid))
        url = h.rt.Exec(pb.ExecRequest(container_id=cid, cmd=["sh", "-c", "echo hi; exit 4"],
                                       stdout=True, stderr=True)).url
        assert url.startswith(streaming.base_url + "/exec/")
        res = run_remotecommand(url, transport="spdy")
        assert res.stdout == b"hi\n"
        assert res.exit_code == 4
    finally:
        h.server.service.streaming = None
        streaming.stop()
        h.rt.RemovePodSandbox(pb.RemovePodSandboxRequest(pod_sandbox_id=sid))


def test_exit_of_a_container_is_an_event(harness: Harness) -> None:
    h = harness
    events: queue.Queue[Any] = queue.Queue()
    stream = h.rt.GetContainerEvents(pb.GetEventsRequest())

    def consume() -> None:
        with contextlib.suppress(grpc.RpcError):
            for e in stream:
                events.put(e)

    t = threading.Thread(target=consume, daemon=True)
    t.start()
    for _ in range(100):
        if h.server.service.events.subscribers:
            break
        time.sleep(0.02)
    sid, _ = _run_pod(h)
    try:
        cid = h.rt.CreateContainer(pb.CreateContainerRequest(
            pod_sandbox_id=sid, config=container_config("quits", ["sh", "-c", "exit 3"]))
        ).container_id
        h.rt.StartContainer(pb.StartContainerRequest(container_id=cid))
        while True:  # the exit monitor notices within its poll interval
            ev = events.get(timeout=20)
            if ev.container_id == cid and ev.container_event_type == pb.CONTAINER_STOPPED_EVENT:
                break
        st = ev.containers_statuses[0]
        assert (st.state, st.exit_code, st.reason) == (pb.CONTAINER_EXITED, 3, "Error")
        # StopContainer of the exited container sends no second STOPPED
        h.rt.StopContainer(pb.StopContainerRequest(container_id=cid))
        h.rt.RemoveContainer(pb.RemoveContainerRequest(container_id=cid))
        ev = events.get(timeout=10)
        assert (ev.container_id, ev.container_event_type) == (cid, pb.CONTAINER_DELETED_EVENT)
    finally:
        stream.cancel()
        h.rt.RemovePodSandbox(pb.RemovePodSandboxRequest(pod_sandbox_id=sid))


def test_pod_whose_pause_died_is_not_ready(harness: Harness) -> None:
    import json
    import signal

    h = harness
    sid, _ = _run_pod(h)
    try:
        info = h.rt.PodSandboxStatus(pb.PodSandboxStatusRequest(
            pod_sandbox_id=sid, verbose=True)).info["info"]
        pid = json.loads(info)["pid"]
        assert pid > 0
        os.kill(pid, signal.SIGKILL)
        for _ in range(100):
            items = h.rt.ListPodSandbox(pb.ListPodSandboxRequest(filter=pb.PodSandboxFilter(
                id=sid, state=pb.PodSandboxStateValue(state=pb.SANDBOX_NOTREADY)))).items
            if items:
                break
            time.sleep(0.05)
        assert [p.id for p in items] == [sid]
        assert h.rt.PodSandboxStatus(pb.PodSandboxStatusRequest(
            pod_sandbox_id=sid)).status.state == pb.SANDBOX_NOTREADY
        # no container can be created in it
        with pytest.raises(grpc.RpcError) as exc:
            h.rt.CreateContainer(pb.CreateContainerRequest(
                pod_sandbox_id=sid, config=container_config("late")))
        assert exc.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    finally:
        h.rt.RemovePodSandbox(pb.RemovePodSandboxRequest(pod_sandbox_id=sid))
    assert h.rt.ListPodSandbox(pb.ListPodSandboxRequest(
        filter=pb.PodSandboxFilter(id=sid))).items == []


def test_exec_sync_timeout_is_deadline_exceeded(harness: Harness) -> None:
    h = harness
    sid, _ = _run_pod(h)
    try:
        cid = h.rt.CreateContainer(pb.CreateContainerRequest(
            pod_sandbox_id=sid, config=container_config("slow"))).container_id
        h.rt.StartContainer(pb.StartContainerRequest(container_id=cid))
        with pytest.raises(grpc.RpcError) as exc:
            h.rt.ExecSync(pb.ExecSyncRequest(container_id=cid, cmd=["sleep", "30"], timeout=1))
        assert exc.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
        # the timed-out sleep is already gone (killed and reaped, no zombie): only the init
        ps = h.rt.ExecSync(pb.ExecSyncRequest(container_id=cid, cmd=["ps", "-o", "pid,comm"],
                                              timeout=10))
        sleeps = [line.split()[0] for line in ps.stdout.decode().splitlines()[1:]
                  if line.split()[1:] == ["sleep"]]
        assert sleeps == ["1"], ps.stdout
    finally:
        h.rt.RemovePodSandbox(pb.RemovePodSandboxRequest(pod_sandbox_id=sid))


def test_create_by_image_id_as_kubelet_does(harness: Harness) -> None:
    """kubelet pulls (or asks ImageStatus), then creates with the image ID it got back and the
    name from the pod spec as user_specified_image."""
    h = harness
    image_id = h.img.ImageStatus(pb.ImageStatusRequest(image=pb.ImageSpec(image=BUSYBOX))) \
        .image.id
    sid, _ = _run_pod(h)
    try:
        cfg = container_config("byid", image=image_id)
        cfg.image.user_specified_image = "pk-cri/busybox:1"
        cid = h.rt.CreateContainer(pb.CreateContainerRequest(
            pod_sandbox_id=sid, config=cfg)).container_id
        h.rt.StartContainer(pb.StartContainerRequest(container_id=cid))
        st = h.rt.ContainerStatus(pb.ContainerStatusRequest(container_id=cid)).status
        assert st.state == pb.CONTAINER_RUNNING
        assert (st.image.image, st.image_id) == ("pk-cri/busybox:1", image_id)
        assert st.image_ref.startswith("localhost/pk-cri/busybox@sha256:")
        # the manager resolved the ID: its own rootfs in the store, the image's name (not the
        # rootfs path) in the image-name annotation
        spec = json.loads((h.manager.root_dir / "containers" / cid / "bundle" /
                           "config.json").read_text())
        assert spec["root"]["path"] == str(h.store.root / "containers" / cid / "rootfs")
        assert spec["annotations"]["io.kubernetes.cri.image-name"] == h.store.get(BUSYBOX).name
        # the manifest digest works too
        manifest = h.store.get(BUSYBOX).target.digest
        cid2 = h.rt.CreateContainer(pb.CreateContainerRequest(
            pod_sandbox_id=sid, config=container_config("bydigest", image=manifest))).container_id
        st = h.rt.ContainerStatus(pb.ContainerStatusRequest(container_id=cid2)).status
        assert (st.image.image, st.image_id) == (BUSYBOX, image_id)
    finally:
        h.rt.RemovePodSandbox(pb.RemovePodSandboxRequest(pod_sandbox_id=sid))


def test_stop_signal_from_the_request(harness: Harness) -> None:
    """The CRI Signal (SIGUSR1 is 29 there) becomes the Linux number the manager keeps and the
    runtime sends (10); the status gives the CRI one back."""
    h = harness
    sid, _ = _run_pod(h)
    try:
        cfg = container_config("usr1", ["sh", "-c", "trap 'exit 9' USR1; touch /tmp/ready; "
                                        "while true; do sleep 0.1; done"],
                               stop_signal=pb.SIGUSR1)
        cid = h.rt.CreateContainer(pb.CreateContainerRequest(
            pod_sandbox_id=sid, config=cfg)).container_id
        assert h.server.service.manager.container_status(cid).config.stop_signal == \
            signal.SIGUSR1
        assert h.rt.ContainerStatus(pb.ContainerStatusRequest(
            container_id=cid)).status.stop_signal == pb.SIGUSR1
        h.rt.StartContainer(pb.StartContainerRequest(container_id=cid))
        for _ in range(200):  # stop only once the trap is set
            if h.rt.ExecSync(pb.ExecSyncRequest(container_id=cid, cmd=["test", "-e", "/tmp/ready"],
                                                timeout=5)).exit_code == 0:
                break
            time.sleep(0.05)
        h.rt.StopContainer(pb.StopContainerRequest(container_id=cid, timeout=10))
        st = _wait_state(h, cid, pb.CONTAINER_EXITED)
        assert st.stop_signal == pb.SIGUSR1
        assert st.exit_code == 9  # the trap ran: USR1, not SIGTERM (143) nor SIGKILL (137)
    finally:
        h.rt.RemovePodSandbox(pb.RemovePodSandboxRequest(pod_sandbox_id=sid))
