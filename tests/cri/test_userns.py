"""Pods in their own user namespace (CRI ``userns_options`` POD, Kubernetes ``hostUsers:
false``) through the gRPC server, on runc 1.1.5 and crun, which cannot make ID-mapped mounts
themselves: podkit makes them (the rootfs layers, the volumes) before the runtime sees them.

The servers' dirs live under a base every user may search (``support.idmap_dir``): a
container's root in a user namespace must reach its rootfs, and pytest's own temp dirs are
root's only (the Status test uses one to see the feature reported off).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest

from cri.helpers import (
    USERNS_HOST_ID,
    USERNS_SIZE,
    Harness,
    container_config,
    mapped_processes,
    userns_pod,
)
from podkit import idmap
from podkit.cri import api_pb2 as pb
from support import idmap_dir, require_binary, require_isolated

pytestmark = pytest.mark.integration

HOST_ID, SIZE = USERNS_HOST_ID, USERNS_SIZE


@pytest.fixture(scope="module", params=["runc", "crun"])
def userns_harness(request: pytest.FixtureRequest, bridge: None,
                   image_layouts: dict[str, Path]) -> Iterator[Harness]:
    """A server on runc or crun whose dirs the pods' roots can reach."""
    require_isolated()
    require_binary(request.param)
    require_binary("conmon")
    with idmap_dir("podkit-userns-") as base:
        h = Harness(base, image_layouts, runtime=request.param)
        try:
            yield h
        finally:
            h.close()
        assert idmap.mounts_under(base) in ([], [str(base)]), "mounts left under the dirs"


def _exec(h: Harness, cid: str, script: str) -> str:
    res = h.rt.ExecSync(pb.ExecSyncRequest(container_id=cid, cmd=["sh", "-c", script],
                                           timeout=20))
    assert res.exit_code == 0, (script, res.stdout, res.stderr)
    return res.stdout.decode()


def _pid(h: Harness, cid: str) -> int:
    st = h.rt.ContainerStatus(pb.ContainerStatusRequest(container_id=cid, verbose=True))
    return int(json.loads(st.info["info"])["pid"])


def _host_ids(pid: int) -> tuple[int, int]:
    lines = Path(f"/proc/{pid}/status").read_text().splitlines()
    uid = next(int(x.split()[1]) for x in lines if x.startswith("Uid:"))
    gid = next(int(x.split()[1]) for x in lines if x.startswith("Gid:"))
    return uid, gid


def _start(h: Harness, sid: str, cfg: pb.PodSandboxConfig, name: str,
           **kw: Any) -> str:
    cc = container_config(name, ["sleep", "3600"], **kw)
    cid = h.rt.CreateContainer(pb.CreateContainerRequest(
        pod_sandbox_id=sid, config=cc, sandbox_config=cfg)).container_id
    h.rt.StartContainer(pb.StartContainerRequest(container_id=cid))
    return cid


def test_pod_runs_in_its_own_user_namespace(userns_harness: Harness) -> None:
    h = userns_harness
    vol = h.base / "volume"
    vol.mkdir()
    (vol / "from-host").write_text("host file\n")
    cfg = userns_pod()
    sid = h.rt.RunPodSandbox(pb.RunPodSandboxRequest(config=cfg)).pod_sandbox_id
    try:
        mount = pb.Mount(container_path="/vol", host_path=str(vol))
        cid = _start(h, sid, cfg, "app", mounts=[mount])
        assert _exec(h, cid, "cat /proc/self/uid_map").split() == ["0", str(HOST_ID), str(SIZE)]
        assert _exec(h, cid, "cat /proc/self/gid_map").split() == ["0", str(HOST_ID), str(SIZE)]
        assert _host_ids(_pid(h, cid)) == (HOST_ID, HOST_ID)
        # the image's files are root's, readable; / and /tmp writable, as without a userns
        assert _exec(h, cid, "stat -c '%u:%g' /bin/busybox /etc /").split() == ["0:0"] * 3
        assert "root:x:0:0" in _exec(h, cid, "cat /etc/passwd")
        _exec(h, cid, "echo t > /tmp/t && echo r > /rootfile && cat /tmp/t /rootfile")
        # the pod's files: root's and writable
        for f in ("/etc/hosts", "/etc/resolv.conf", "/etc/hostname"):
            assert _exec(h, cid, f"stat -c '%u:%g' {f} && echo '# w' >> {f}").strip() == "0:0"
        # a host-path volume: the host's owners inside, the container's writes keep theirs
        assert _exec(h, cid, "stat -c '%u:%g' /vol/from-host").strip() == "0:0"
        _exec(h, cid, "echo c > /vol/by-root && echo d > /vol/by-app && chown 1000:1000 "
                      "/vol/by-app")
        assert (os.stat(vol / "by-root").st_uid, os.stat(vol / "by-root").st_gid) == (0, 0)
        assert os.stat(vol / "by-app").st_uid == 1000
        # another container of the pod shares the user namespace, as a user of the image
        cc_user = container_config("user", ["sleep", "3600"])
        cc_user.linux.security_context.run_as_user.value = 1000
        other = h.rt.CreateContainer(pb.CreateContainerRequest(
            pod_sandbox_id=sid, config=cc_user, sandbox_config=cfg)).container_id
        h.rt.StartContainer(pb.StartContainerRequest(container_id=other))
        assert _host_ids(_pid(h, other))[0] == HOST_ID + 1000
        assert (os.readlink(f"/proc/{_pid(h, other)}/ns/user")
                == os.readlink(f"/proc/{_pid(h, cid)}/ns/user"))
        assert {_pid(h, cid), _pid(h, other)} < set(mapped_processes(HOST_ID))  # + the pause
    finally:
        h.rt.RemovePodSandbox(pb.RemovePodSandboxRequest(pod_sandbox_id=sid))
    assert _pod_mounts(h) == []
    assert h.manager.runtime.list() == []
    assert mapped_processes(HOST_ID) == []  # the pause, containers and the holder are gone
    assert not (h.base / "root" / "sandboxes" / sid).exists()
    assert [n for n in os.listdir("/run/netns") if n.startswith("pk-cri-")] == []


def _pod_mounts(h: Harness) -> list[str]:
    """What is mounted under the server's dirs but the shared pause rootfs (kept for the
    next pod until the server closes) and the dirs' own file system (an ext4 image)."""
    return [m for m in idmap.mounts_under(h.base) if "/cri-pause-" not in m and m != str(h.base)]


def test_status_reports_user_namespaces_where_they_work(
        userns_harness: Harness, image_layouts: dict[str, Path],
        tmp_path_factory: pytest.TempPathFactory) -> None:
    st = userns_harness.rt.Status(pb.StatusRequest(verbose=True))
    assert {h.name: h.features.user_namespaces for h in st.runtime_handlers} == {
        "": True, userns_harness.manager.runtime.binary.rsplit("/", 1)[-1]: True}
    assert '"userNamespaces": "supported"' in st.info["config"]
    # pytest's temp dirs are root's only: a pod's root could not reach its rootfs there (and
    # in the cgroup-v2 guest they are tmpfs, which Linux 6.1 cannot ID-map)
    private = Harness(tmp_path_factory.mktemp("cri-private"), image_layouts)
    try:
        st = private.rt.Status(pb.StatusRequest(verbose=True))
        assert [h.features.user_namespaces for h in st.runtime_handlers] == [False, False]
        info = st.info["config"]
        assert "is not searchable by uid" in info or \
            "its file system (tmpfs) does not support ID-mapped mounts" in info, info
        with pytest.raises(grpc.RpcError) as exc:
            private.rt.RunPodSandbox(pb.RunPodSandboxRequest(config=userns_pod()))
        assert exc.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert "userns_options: mode POD cannot run here" in exc.value.details()
        assert private.manager.list_sandboxes() == []
    finally:
        private.close()


def _refused(h: Harness, cfg: pb.PodSandboxConfig) -> str:
    with pytest.raises(grpc.RpcError) as exc:
        h.rt.RunPodSandbox(pb.RunPodSandboxRequest(config=cfg))
    assert exc.value.code() == grpc.StatusCode.INVALID_ARGUMENT, exc.value.details()
    return str(exc.value.details())


_FIELD = "config: linux.security_context.namespace_options.userns_options"


def _mapping(cfg: pb.PodSandboxConfig) -> Any:
    return cfg.linux.security_context.namespace_options.userns_options


def _bad_configs() -> list[tuple[str, pb.PodSandboxConfig, str]]:
    out = []
    for mode in (pb.CONTAINER, pb.TARGET):
        cfg = userns_pod()
        _mapping(cfg).mode = mode
        out.append((f"mode {mode}", cfg, f"{_FIELD}.mode: "))
    cfg = userns_pod()
    _mapping(cfg).mode = pb.NODE
    out.append(("NODE with maps", cfg, f"{_FIELD}: mode NODE (the host's users) takes no"))
    cfg = userns_pod()
    del _mapping(cfg).uids[:]
    out.append(("no uids", cfg, f"{_FIELD}.uids: mode POD needs a mapping"))
    cfg = userns_pod()
    _mapping(cfg).uids.add(host_id=HOST_ID * 2, container_id=SIZE, length=10)
    out.append(("two ranges", cfg, "not one contiguous range"))
    cfg = userns_pod()
    _mapping(cfg).uids[0].container_id = 1
    _mapping(cfg).gids[0].container_id = 1
    out.append(("not from 0", cfg, "starts at container ID 1, not 0"))
    cfg = userns_pod()
    _mapping(cfg).gids[0].host_id = HOST_ID + SIZE
    out.append(("uids != gids", cfg, "and the gid mapping"))
    cfg = userns_pod()
    _mapping(cfg).uids[0].length = 0
    out.append(("empty range", cfg, f"{_FIELD}.uids[0].length 0: must be at least 1"))
    cfg = userns_pod()
    _mapping(cfg).uids[0].host_id = 2**32 - 10
    out.append(("past 32 bits", cfg, f"{_FIELD}.uids[0]: host_id"))
    for kind in ("network", "pid", "ipc"):
        cfg = userns_pod()
        setattr(cfg.linux.security_context.namespace_options, kind, pb.NODE)
        out.append((f"host {kind}", cfg, f"cannot go with namespace_options.{kind} NODE"))
    cfg = userns_pod()
    cfg.linux.security_context.run_as_user.value = SIZE + 5
    out.append(("unmapped run_as_user", cfg,
                f"config: linux.security_context.run_as_user {SIZE + 5}: not mapped"))
    return out


def test_every_refusal_names_the_field(userns_harness: Harness) -> None:
    h = userns_harness
    for what, cfg, message in _bad_configs():
        assert message in _refused(h, cfg), what
    assert h.manager.list_sandboxes() == []
    assert _pod_mounts(h) == []
    assert [n for n in os.listdir("/run/netns") if n.startswith("pk-cri-")] == []
    assert mapped_processes(HOST_ID) == []


def test_container_refusals_name_the_field(userns_harness: Harness) -> None:
    h = userns_harness
    cfg = userns_pod()
    sid = h.rt.RunPodSandbox(pb.RunPodSandboxRequest(config=cfg)).pod_sandbox_id
    try:
        bad = []
        cc = container_config("other-map", ["true"])
        u = cc.linux.security_context.namespace_options.userns_options
        u.mode = pb.POD
        u.uids.add(host_id=HOST_ID * 2, container_id=0, length=SIZE)
        u.gids.add(host_id=HOST_ID * 2, container_id=0, length=SIZE)
        bad.append((cc, f"{_FIELD}: POD 0 {HOST_ID * 2} {SIZE}"))
        cc = container_config("far-user", ["true"])
        cc.linux.security_context.run_as_user.value = SIZE
        bad.append((cc, f"config: linux.security_context.run_as_user {SIZE}: not mapped"))
        cc = container_config("mapped-mount", ["true"], mounts=[pb.Mount(
            container_path="/m", host_path=str(h.base),
            uidMappings=[pb.IDMapping(host_id=1, container_id=0, length=1)])])
        bad.append((cc, "config: mounts[0].uid_mappings: 0 1 1 is not the pod's map"))
        cc = container_config("no-source", ["true"], mounts=[pb.Mount(
            container_path="/m", host_path=str(h.base / "missing"))])
        bad.append((cc, f"config: mounts[0].host_path '{h.base / 'missing'}': does not exist"))
        for c, message in bad:
            with pytest.raises(grpc.RpcError) as exc:
                h.rt.CreateContainer(pb.CreateContainerRequest(
                    pod_sandbox_id=sid, config=c, sandbox_config=cfg))
            assert exc.value.code() == grpc.StatusCode.INVALID_ARGUMENT, exc.value.details()
            assert message in exc.value.details()
        assert h.rt.ListContainers(pb.ListContainersRequest()).containers == []
        assert idmap.mounts_under(h.base / "root" / "mounts") == []
    finally:
        h.rt.RemovePodSandbox(pb.RemovePodSandboxRequest(pod_sandbox_id=sid))

