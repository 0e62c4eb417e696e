"""Pods in their own user namespace through ``podkit cri serve`` as a child process (a real
gRPC client over the unix socket): a pod survives the server's restart, and a container the
new server creates joins its user namespace. (Apart from tests/cri/test_userns.py: a server
process starting takes too long for the cgroup-v2 guest's emulated CPU, as
test_server_restart.py's does.)"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import _leaks
from cri.helpers import (
    BUSYBOX,
    PAUSE,
    USERNS_HOST_ID,
    USERNS_SIZE,
    container_config,
    import_images,
    mapped_processes,
    start_cri_serve,
    stop_cri_serve,
    userns_pod,
    write_cni_conf,
)
from podkit import idmap
from podkit.cri import api_pb2 as pb
from podkit.cri import api_pb2_grpc
from support import idmap_dir, require_binary, require_isolated

pytestmark = pytest.mark.integration


def test_podkit_cri_serve_restart_keeps_the_pods_user_namespace(
        bridge: None, image_layouts: dict[str, Path]) -> None:
    """``podkit cri serve`` as a child process: a userns pod survives the server's restart,
    and a container created by the new server joins the pod's user namespace (its pin)."""
    require_isolated()
    require_binary("runc")
    require_binary("conmon")
    with idmap_dir("podkit-userns-cli-") as base:
        root = base / "root"
        import_images(root, image_layouts)
        conf = write_cni_conf(base / "net")
        _leaks.register_runtime_root(root / "cri" / "state" / "runc")
        _leaks.register_ipam_dir(base / "net" / "ipam")
        sock = base / "cri.sock"
        args = ["--root", str(root), "--cni-conf-dir", str(conf), "--cni-bin-dir",
                "/usr/lib/cni", "--runtime", "runc", "--pause-image", PAUSE]
        proc, channel = start_cri_serve(sock, *args)
        try:
            rt = api_pb2_grpc.RuntimeServiceStub(channel)
            st = rt.Status(pb.StatusRequest())
            assert all(h.features.user_namespaces for h in st.runtime_handlers)
            cfg = userns_pod()
            sid = rt.RunPodSandbox(pb.RunPodSandboxRequest(config=cfg)).pod_sandbox_id
            first = rt.CreateContainer(pb.CreateContainerRequest(
                pod_sandbox_id=sid, config=container_config("first", ["sleep", "3600"]),
                sandbox_config=cfg)).container_id
            rt.StartContainer(pb.StartContainerRequest(container_id=first))
        finally:
            stop_cri_serve(proc, channel)
        proc, channel = start_cri_serve(sock, *args)
        try:
            rt = api_pb2_grpc.RuntimeServiceStub(channel)
            second = rt.CreateContainer(pb.CreateContainerRequest(
                pod_sandbox_id=sid, config=container_config("second", ["sleep", "3600"],
                                                            image=BUSYBOX),
                sandbox_config=cfg)).container_id
            rt.StartContainer(pb.StartContainerRequest(container_id=second))
            for cid in (first, second):
                res = rt.ExecSync(pb.ExecSyncRequest(
                    container_id=cid, cmd=["cat", "/proc/self/uid_map"], timeout=20))
                assert res.stdout.split() == [b"0", str(USERNS_HOST_ID).encode(),
                                              str(USERNS_SIZE).encode()]
            users = {os.readlink(f"/proc/{p}/ns/user") for p in mapped_processes(USERNS_HOST_ID)}
            assert len(users) == 1  # pause, first and second: one user namespace
            rt.RemovePodSandbox(pb.RemovePodSandboxRequest(pod_sandbox_id=sid))
            assert mapped_processes(USERNS_HOST_ID) == []
            assert [m for m in idmap.mounts_under(root) if "/cri-pause-" not in m] == []
        finally:
            stop_cri_serve(proc, channel)
