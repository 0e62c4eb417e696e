"""The server on crun, with CDI devices, host-network pods, and images pulled from a registry."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest

from cri.helpers import BUSYBOX, Harness, container_config, pod_config
from image.registries import registry  # noqa: F401 - the real docker-registry fixture
from podkit import image
from podkit.cri import api_pb2 as pb
from support import require_binary, require_isolated

pytestmark = pytest.mark.integration

CDI_SPEC = {
    "cdiVersion": "0.6.0", "kind": "vendor.example/dev",
    "devices": [
        {"name": "a", "containerEdits": {"env": ["DEV_A=1"]}},
        {"name": "b", "containerEdits": {"env": ["DEV_B=2"]}},
    ],
    "containerEdits": {"env": ["VENDOR=example"]},
}


@pytest.fixture(scope="module")
def crun_harness(bridge: None, image_layouts: dict[str, Path],
                 tmp_path_factory: pytest.TempPathFactory) -> Iterator[Harness]:
    """A server on crun with a CDI spec dir."""
    require_isolated()
    require_binary("crun")
    require_binary("conmon")
    base = tmp_path_factory.mktemp("cri-crun")
    cdi_dir = base / "cdi"
    cdi_dir.mkdir()
    (cdi_dir / "vendor.json").write_text(json.dumps(CDI_SPEC))
    h = Harness(base, image_layouts, runtime="crun", cdi_dirs=[cdi_dir])
    yield h
    h.close()


def _exec(h: Harness, cid: str, *cmd: str) -> str:
    res = h.rt.ExecSync(pb.ExecSyncRequest(container_id=cid, cmd=list(cmd), timeout=10))
    assert res.exit_code == 0, res.stderr
    return res.stdout.decode()


def test_crun_runtime_handler(crun_harness: Harness) -> None:
    h = crun_harness
    st = h.rt.Status(pb.StatusRequest())
    assert {r.name for r in st.runtime_handlers} == {"", "crun"}
    sid = h.rt.RunPodSandbox(pb.RunPodSandboxRequest(
        config=pod_config(), runtime_handler="crun")).pod_sandbox_id
    h.rt.RemovePodSandbox(pb.RemovePodSandboxRequest(pod_sandbox_id=sid))
    with pytest.raises(grpc.RpcError) as exc:
        h.rt.RunPodSandbox(pb.RunPodSandboxRequest(config=pod_config(), runtime_handler="runc"))
    assert exc.value.code() == grpc.StatusCode.INVALID_ARGUMENT


def test_cdi_devices_from_field_and_annotation(crun_harness: Harness) -> None:
    h = crun_harness
    sid = h.rt.RunPodSandbox(pb.RunPodSandboxRequest(config=pod_config())).pod_sandbox_id
    try:
        cfg = container_config("gpu")
        cfg.CDI_devices.add(name="vendor.example/dev=a")
        cfg.annotations["cdi.k8s.io/extra"] = "vendor.example/dev=b"
        cid = h.rt.CreateContainer(pb.CreateContainerRequest(
            pod_sandbox_id=sid, config=cfg)).container_id
        h.rt.StartContainer(pb.StartContainerRequest(container_id=cid))
        env = set(_exec(h, cid, "env").split())
        assert {"DEV_A=1", "DEV_B=2", "VENDOR=example"} <= env

        before = sorted(r.container_id for r in image.list_rootfs(h.store))
        bad = container_config("nogpu")
        bad.CDI_devices.add(name="vendor.example/dev=zzz")
        with pytest.raises(grpc.RpcError) as exc:
            h.rt.CreateContainer(pb.CreateContainerRequest(pod_sandbox_id=sid, config=bad))
        assert exc.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert "vendor.example/dev=zzz" in exc.value.details()
        assert sorted(r.container_id for r in image.list_rootfs(h.store)) == before
        assert [c.metadata.name for c in h.rt.ListContainers(pb.ListContainersRequest(
            filter=pb.ContainerFilter(pod_sandbox_id=sid))).containers] == ["gpu"]
    finally:
        h.rt.RemovePodSandbox(pb.RemovePodSandboxRequest(pod_sandbox_id=sid))


def test_host_network_pod(crun_harness: Harness) -> None:
    h = crun_harness
    cfg = pod_config()
    cfg.hostname = ""
    cfg.linux.security_context.namespace_options.network = pb.NODE
    sid = h.rt.RunPodSandbox(pb.RunPodSandboxRequest(config=cfg)).pod_sandbox_id
    try:
        st = h.rt.PodSandboxStatus(pb.PodSandboxStatusRequest(pod_sandbox_id=sid)).status
        assert st.network.ip == ""
        assert st.linux.namespaces.options.network == pb.NODE
        cid = h.rt.CreateContainer(pb.CreateContainerRequest(
            pod_sandbox_id=sid, config=container_config("hn"))).container_id
        h.rt.StartContainer(pb.StartContainerRequest(container_id=cid))
        assert _exec(h, cid, "hostname").strip() == socket.gethostname()
    finally:
        h.rt.RemovePodSandbox(pb.RemovePodSandboxRequest(pod_sandbox_id=sid))


def test_pull_image_from_registry(crun_harness: Harness, registry: str) -> None:  # noqa: F811
    h = crun_harness
    ref = f"{registry}/pk-cri/bb:pulled"
    image.push(h.store, BUSYBOX, ref)
    want = h.store.get(BUSYBOX).config.digest
    assert ref not in {i.name for i in h.store.list()}  # pushed, not recorded here
    resp = h.img.PullImage(pb.PullImageRequest(image=pb.ImageSpec(image=ref)))
    assert resp.image_ref == want
    st = h.img.ImageStatus(pb.ImageStatusRequest(image=pb.ImageSpec(image=ref))).image
    assert ref in st.repo_tags and st.id == want
    sid = h.rt.RunPodSandbox(pb.RunPodSandboxRequest(config=pod_config())).pod_sandbox_id
    try:
        cid = h.rt.CreateContainer(pb.CreateContainerRequest(
            pod_sandbox_id=sid, config=container_config("pulled", image=ref))).container_id
        h.rt.StartContainer(pb.StartContainerRequest(container_id=cid))
        assert _exec(h, cid, "echo", "ok") == "ok\n"
        status = h.rt.ContainerStatus(pb.ContainerStatusRequest(container_id=cid)).status
        assert status.image.image == ref and status.image_id == want
    finally:
        h.rt.RemovePodSandbox(pb.RemovePodSandboxRequest(pod_sandbox_id=sid))
    with pytest.raises(grpc.RpcError) as exc:
        h.img.PullImage(pb.PullImageRequest(image=pb.ImageSpec(
            image=f"{registry}/pk-cri/absent:1")))
    assert exc.value.code() == grpc.StatusCode.NOT_FOUND
    assert "absent" in exc.value.details()


def test_cni_config_written_after_start(bridge: None, crun_harness: Harness,
                                        tmp_path: Path) -> None:
    """No network config at start: NetworkReady is false, host-network pods still run; once a
    config appears, Status and RunPodSandbox pick it up."""
    import _leaks
    from cri.helpers import BRIDGE, NETWORK, SUBNET
    from podkit import cni
    from podkit.cri.service import CRIService
    from podkit.runtime import Runc
    from podkit.sandbox import SandboxManager, default_network_config

    conf_dir = tmp_path / "net.d"
    conf_dir.mkdir()
    client = cni.CNI(["/usr/lib/cni"], str(tmp_path / "cni-cache"))
    _leaks.register_runtime_root(tmp_path / "runc")
    _leaks.register_ipam_dir(tmp_path / "late" / "ipam")
    def load() -> cni.Networks:
        return cni.Networks.from_dir(client, conf_dir, max_networks=1, loopback=True)

    with SandboxManager(tmp_path / "root", tmp_path / "state", Runc(root=tmp_path / "runc"),
                        None, pause=crun_harness.pause, netns_prefix="pk-cri-",
                        images=crun_harness.store, network_loader=load) as mgr:
        svc = CRIService(mgr, crun_harness.store)
        try:
            cond = {c.type: c for c in svc.Status(pb.StatusRequest()).status.conditions}
            assert not cond["NetworkReady"].status
            assert cond["NetworkReady"].reason == "NetworkPluginNotReady"
            assert str(conf_dir) in cond["NetworkReady"].message
            host = pod_config()
            host.hostname = ""
            host.linux.security_context.namespace_options.network = pb.NODE
            svc.RunPodSandbox(pb.RunPodSandboxRequest(config=host))

            late = default_network_config(tmp_path / "late", name=NETWORK, bridge=BRIDGE,
                                          subnet=SUBNET)
            (conf_dir / "10-late.conflist").write_bytes(
                (tmp_path / "late" / "net.d" / f"{late.name}.conflist").read_bytes())
            sid = svc.RunPodSandbox(pb.RunPodSandboxRequest(config=pod_config())).pod_sandbox_id
            st = svc.PodSandboxStatus(pb.PodSandboxStatusRequest(pod_sandbox_id=sid))
            assert st.status.network.ip.startswith("10.89.")
            cond = {c.type: c for c in svc.Status(pb.StatusRequest()).status.conditions}
            assert cond["NetworkReady"].status
        finally:
            mgr.remove_all()


def test_port_mapping_and_mounts(crun_harness: Harness, tmp_path: Path) -> None:
    h = crun_harness
    www = tmp_path / "www"
    www.mkdir()
    (www / "index.html").write_text("hello over cri\n")
    cfg = pod_config()
    cfg.port_mappings.add(protocol=pb.TCP, container_port=80, host_port=18081)
    sid = h.rt.RunPodSandbox(pb.RunPodSandboxRequest(config=cfg)).pod_sandbox_id
    try:
        ccfg = container_config("httpd", ["httpd", "-f", "-p", "80", "-h", "/www"])
        ccfg.mounts.add(container_path="/www", host_path=str(www), readonly=True)
        cid = h.rt.CreateContainer(pb.CreateContainerRequest(
            pod_sandbox_id=sid, config=ccfg)).container_id
        h.rt.StartContainer(pb.StartContainerRequest(container_id=cid))
        st = h.rt.ContainerStatus(pb.ContainerStatusRequest(container_id=cid)).status
        assert [(m.container_path, m.host_path, m.readonly) for m in st.mounts] == [
            ("/www", str(www), True)]
        ip = h.rt.PodSandboxStatus(pb.PodSandboxStatusRequest(
            pod_sandbox_id=sid)).status.network.ip
        gateway = ip.rsplit(".", 1)[0] + ".1"
        body = b""
        for _ in range(50):  # httpd may not listen yet
            try:
                with socket.create_connection((gateway, 18081), timeout=5) as s:
                    s.sendall(b"GET /index.html HTTP/1.0\r\n\r\n")
                    while chunk := s.recv(4096):
                        body += chunk
                break
            except ConnectionRefusedError:
                import time

                time.sleep(0.1)
        assert body.endswith(b"hello over cri\n"), body
        net = h.rt.PodSandboxStats(pb.PodSandboxStatsRequest(
            pod_sandbox_id=sid)).stats.linux.network
        assert net.default_interface.name == "eth0"
        assert net.default_interface.rx_bytes.value > 0
        assert net.default_interface.tx_bytes.value >= len(body)
        assert [i.name for i in net.interfaces] == ["eth0"]
    finally:
        h.rt.RemovePodSandbox(pb.RemovePodSandboxRequest(pod_sandbox_id=sid))


def test_security_profiles(crun_harness: Harness) -> None:
    """seccomp RuntimeDefault filters the container (and its execs); an AppArmor profile on a
    host without AppArmor is refused before anything exists."""
    h = crun_harness
    sid = h.rt.RunPodSandbox(pb.RunPodSandboxRequest(config=pod_config())).pod_sandbox_id
    try:
        cfg = container_config("filtered", ["sleep", "600"])
        cfg.linux.security_context.seccomp.profile_type = pb.SecurityProfile.RuntimeDefault
        cid = h.rt.CreateContainer(pb.CreateContainerRequest(
            pod_sandbox_id=sid, config=cfg)).container_id
        h.rt.StartContainer(pb.StartContainerRequest(container_id=cid))
        assert _exec(h, cid, "grep", "^Seccomp:", "/proc/self/status").split() == [
            "Seccomp:", "2"]
        res = h.rt.ExecSync(pb.ExecSyncRequest(container_id=cid, cmd=["unshare", "-U", "true"],
                                               timeout=10))
        assert res.exit_code != 0 and b"Operation not permitted" in res.stderr

        enabled = Path("/sys/module/apparmor/parameters/enabled")
        assert not (enabled.exists() and enabled.read_text().strip() == "Y")  # this host
        before = sorted(r.container_id for r in image.list_rootfs(h.store))
        confined = container_config("confined", ["sleep", "600"])
        confined.linux.security_context.apparmor.profile_type = \
            pb.SecurityProfile.RuntimeDefault
        with pytest.raises(grpc.RpcError) as exc:
            h.rt.CreateContainer(pb.CreateContainerRequest(pod_sandbox_id=sid, config=confined))
        assert exc.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert "AppArmor is not enabled" in exc.value.details()
        assert sorted(r.container_id for r in image.list_rootfs(h.store)) == before
        assert [c.metadata.name for c in h.rt.ListContainers(pb.ListContainersRequest(
            filter=pb.ContainerFilter(pod_sandbox_id=sid))).containers] == ["filtered"]
    finally:
        h.rt.RemovePodSandbox(pb.RemovePodSandboxRequest(pod_sandbox_id=sid))
