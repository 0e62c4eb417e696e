"""examples/policy_cri.py as a team runs it: its own process on a socket, a real gRPC client,
real runc, conmon and CNI, and a CDI spec this test writes. Every policy holds: the refusals
arrive as PERMISSION_DENIED with their reason and leave nothing, the pod annotation's CDI
devices and POD_IP reach every container."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest

from cri.helpers import BRIDGE, PAUSE, SUBNET, container_config, pod_config
from podkit.cri import api_pb2 as pb
from podkit.cri.api_pb2_grpc import RuntimeServiceStub
from podkit.image import ImageStore, import_image
from podkit.sandbox import default_network_config
from support import require_binary, require_isolated

pytestmark = pytest.mark.integration

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "policy_cri.py"
ANNOTATION = "example.com/cdi-devices"
CDI_SPEC = {"cdiVersion": "0.5.0", "kind": "example.com/dev", "devices": [
    {"name": "one", "containerEdits": {
        "env": ["DEV_ONE=1"],
        "deviceNodes": [{"path": "/dev/example-one", "hostPath": "/dev/null"}]}},
    {"name": "two", "containerEdits": {"env": ["DEV_TWO=1"]}},
]}


class TeamCRI:
    """The example server as a child process, and a RuntimeService client of it."""

    def __init__(self, base: Path, layouts: dict[str, Path]) -> None:
        self.root = base / "root"
        store = ImageStore(self.root)
        for name, layout in layouts.items():
            import_image(store, layout, name)
        default_network_config(base / "net", name="teamcri-net", bridge=BRIDGE, subnet=SUBNET)
        (base / "cdi").mkdir()
        (base / "cdi" / "example.com-dev.json").write_text(json.dumps(CDI_SPEC))
        sock = base / "cri.sock"
        config = base / "teamcri.toml"  # a node config as a team writes one (docs/config.md)
        config.write_text(f"""root = "{self.root}"
[network]
conf_dir = "{base / 'net' / 'net.d'}"
bin_dirs = ["/usr/lib/cni"]
[cdi]
spec_dirs = ["{base / 'cdi'}"]
[pause]
image = "{PAUSE}"
[cri]
socket = "{sock}"
streaming_address = ""
""")
        self.proc = subprocess.Popen(
            [sys.executable, str(EXAMPLE), "--config", str(config)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.channel = grpc.insecure_channel(f"unix://{sock}")
        try:
            grpc.channel_ready_future(self.channel).result(timeout=60)
        except grpc.FutureTimeoutError:
            self.proc.kill()
            raise AssertionError(f"teamcri did not come up: {self.proc.communicate()}") from None
        self.rt = RuntimeServiceStub(self.channel)

    def stop(self) -> None:
        """Remove every pod, stop the server with SIGTERM; it exits 0 and runc has nothing."""
        try:
            for p in self.rt.ListPodSandbox(pb.ListPodSandboxRequest()).items:
                self.rt.RemovePodSandbox(pb.RemovePodSandboxRequest(pod_sandbox_id=p.id))
        finally:
            self.channel.close()
            self.proc.send_signal(signal.SIGTERM)
            out, err = self.proc.communicate(timeout=60)
        assert self.proc.returncode == 0, err
        assert "teamcri: serving on unix://" in out
        runc = subprocess.run(["runc", "--root", str(self.root / "state" / "cri" / "runc"), "list",
                               "-q"], capture_output=True, text=True, check=True)
        assert runc.stdout == ""

    def run_pod(self, **kw: Any) -> str:
        cfg = pod_config(**kw)
        return str(self.rt.RunPodSandbox(pb.RunPodSandboxRequest(config=cfg)).pod_sandbox_id)

    def start(self, sid: str, cfg: Any) -> str:
        cid = self.rt.CreateContainer(pb.CreateContainerRequest(
            pod_sandbox_id=sid, config=cfg)).container_id
        self.rt.StartContainer(pb.StartContainerRequest(container_id=cid))
        return str(cid)

    def sh(self, cid: str, script: str) -> str:
        res = self.rt.ExecSync(pb.ExecSyncRequest(container_id=cid, cmd=["sh", "-c", script],
                                                  timeout=10))
        assert res.exit_code == 0, res.stderr
        return res.stdout.decode()


@pytest.fixture(scope="module")
def teamcri(bridge: None, image_layouts: dict[str, Path],
            tmp_path_factory: pytest.TempPathFactory) -> Iterator[TeamCRI]:
    require_isolated()
    require_binary("runc")
    require_binary("conmon")
    server = TeamCRI(tmp_path_factory.mktemp("teamcri"), image_layouts)
    yield server
    server.stop()


def test_it_fits_in_100_lines() -> None:
    assert len(EXAMPLE.read_text().splitlines()) <= 100


def _refused(call: Any, request: Any) -> str:
    with pytest.raises(grpc.RpcError) as exc:
        call(request, timeout=30)
    assert exc.value.code() == grpc.StatusCode.PERMISSION_DENIED, exc.value.details()
    return str(exc.value.details())


def _what_exists(server: TeamCRI) -> tuple[Any, ...]:
    rt = server.rt
    files = {os.path.relpath(os.path.join(d, f), server.root)
             for d, dirs, names in os.walk(server.root) for f in (*dirs, *names)}
    return (sorted(p.id for p in rt.ListPodSandbox(pb.ListPodSandboxRequest()).items),
            sorted(c.id for c in rt.ListContainers(pb.ListContainersRequest()).containers),
            files, sorted(os.listdir("/run/netns")))


@pytest.mark.parametrize(("field", "value"), [
    ("privileged", True),
    ("add_capabilities", ["CAP_SYS_ADMIN"]),
    ("add_capabilities", ["NET_RAW", " sys_admin "]),
    ("add_capabilities", ["Cap_Sys_Admin"]),
    ("add_capabilities", ["all"]),
    ("add_ambient_capabilities", ["SYS_ADMIN"]),
])
def test_privileges_are_refused_and_leave_nothing(teamcri: TeamCRI, field: str,
                                                  value: Any) -> None:
    sid = teamcri.run_pod()
    before = _what_exists(teamcri)
    cfg = container_config("greedy", ["sleep", "60"])
    sc = cfg.linux.security_context
    if field == "privileged":
        sc.privileged = True
    else:
        getattr(sc.capabilities, field).extend(value)
    reason = "privileged" if field == "privileged" else "CAP_SYS_ADMIN"
    assert _refused(teamcri.rt.CreateContainer, pb.CreateContainerRequest(
        pod_sandbox_id=sid, config=cfg)) == f"container greedy: {reason} is not allowed"
    assert _what_exists(teamcri) == before
    teamcri.rt.RemovePodSandbox(pb.RemovePodSandboxRequest(pod_sandbox_id=sid))


def test_host_network_pods_are_refused_and_leave_nothing(teamcri: TeamCRI) -> None:
    before = _what_exists(teamcri)
    cfg = pod_config("hostnet")
    cfg.linux.security_context.namespace_options.network = pb.NODE
    assert _refused(teamcri.rt.RunPodSandbox, pb.RunPodSandboxRequest(config=cfg)) == \
        "pod hostnet: host network is not allowed"
    assert _what_exists(teamcri) == before


def test_annotated_devices_and_pod_ip_reach_every_container(teamcri: TeamCRI) -> None:
    rt = teamcri.rt
    assert rt.Version(pb.VersionRequest()).runtime_name == "teamcri"
    sid = teamcri.run_pod(annotations={ANNOTATION: "example.com/dev=one, example.com/dev=two"})
    ip = rt.PodSandboxStatus(pb.PodSandboxStatusRequest(pod_sandbox_id=sid)).status.network.ip
    assert ip.startswith("10.89.")
    allowed = container_config("netadmin", ["sleep", "60"])
    allowed.linux.security_context.capabilities.add_capabilities.append("NET_ADMIN")
    for cid in (teamcri.start(sid, container_config("app", ["sleep", "60"])),
                teamcri.start(sid, allowed)):
        env = teamcri.sh(cid, "env").splitlines()
        assert {f"POD_IP={ip}", "DEV_ONE=1", "DEV_TWO=1"} <= set(env)
        assert teamcri.sh(cid, "test -c /dev/example-one && echo device") == "device\n"
    plain = teamcri.run_pod()
    ip = rt.PodSandboxStatus(pb.PodSandboxStatusRequest(pod_sandbox_id=plain)
                             ).status.network.ip
    cid = teamcri.start(plain, container_config("app", ["sleep", "60"]))
    env = teamcri.sh(cid, "env; ls /dev").splitlines()
    assert f"POD_IP={ip}" in env and "DEV_ONE=1" not in env and "example-one" not in env
