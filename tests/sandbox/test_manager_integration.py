"""SandboxManager end to end: real runc + conmon, the Debian CNI plugins, pinned netns.

Runs inside scripts/isolated (its namespace plays the host). Every test checks that nothing is
left: netns, links, mounts (leak snapshot), runtime containers, IPAM entries, records, cgroups.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from podkit import netns
from podkit.errors import AlreadyExistsError, NotFoundError
from podkit.pods.config import (
    DNSConfig,
    LinuxContainerConfig,
    LinuxContainerSecurityContext,
    LinuxPodSandboxConfig,
    NamespaceMode,
    NamespaceOption,
    PortMapping,
)
from podkit.runtime import read_cri_log
from podkit.sandbox import (
    ContainerState,
    PauseConfig,
    SandboxFilter,
    SandboxManager,
    SandboxState,
)
from support import require_binary

from ._pods import (
    ctr_config,
    leaked,
    leftovers,
    make_manager,
    managed,
    pod_config,
    snapshot,
)

pytestmark = pytest.mark.integration


@pytest.fixture
def mgr(bridge: None, rootfs: Path, tmp_path: Path) -> Iterator[SandboxManager]:
    yield from managed(tmp_path / "m", rootfs)


def _wait_for(fn: object, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not fn():  # type: ignore[operator]
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {timeout}s")
        time.sleep(0.05)


def test_pod_network_sandbox_and_containers_share_namespaces(
    mgr: SandboxManager, rootfs: Path, tmp_path: Path
) -> None:
    logs = tmp_path / "logs"
    dns = DNSConfig(servers=["10.88.0.53"], searches=["pk.test"], options=["ndots:3"])
    sb = mgr.run_sandbox(pod_config(hostname="pk-pod-web", dns_config=dns,
                                    log_directory=str(logs)))
    assert sb.state == SandboxState.SANDBOX_READY
    assert sb.ip.startswith("10.88.") and netns.exists(sb.netns_path)
    st = mgr.sandbox_status(sb.id)
    assert st.pid > 0 and st.ips == sb.ips

    own = mgr.create_container(sb.id, ctr_config(rootfs, "own", ["sleep", "600"],
                                                 log_path="own.log"))
    shared = mgr.create_container(sb.id, ctr_config(
        rootfs, "shared", ["sleep", "600"], pid=NamespaceMode.POD))
    assert mgr.container_status(own).state == ContainerState.CONTAINER_CREATED
    mgr.start_container(own)
    mgr.start_container(shared)

    def ns_of(pid: int, kind: str) -> str:
        return str(Path(f"/proc/{pid}/ns/{kind}").readlink())

    pause_pid = st.pid
    for cid, same_pid in ((own, False), (shared, True)):
        c = mgr.container_status(cid)
        assert c.state == ContainerState.CONTAINER_RUNNING and c.pid > 0
        for kind in ("net", "ipc", "uts"):
            assert ns_of(c.pid, kind) == ns_of(pause_pid, kind)
        assert (ns_of(c.pid, "pid") == ns_of(pause_pid, "pid")) is same_pid

    res = mgr.exec_sync(own, ["sh", "-c",
                              "hostname; cat /etc/resolv.conf; ip -4 -o addr show eth0;"
                              " df -k /dev/shm | tail -1; echo oops >&2; exit 3"], timeout=10)
    out = res.stdout.decode()
    assert res.exit_code == 3 and res.stderr == b"oops\n"
    lines = out.splitlines()
    assert lines[0] == "pk-pod-web"
    assert lines[1:4] == ["search pk.test", "nameserver 10.88.0.53", "options ndots:3"]
    assert f"inet {sb.ip}/" in lines[4]
    assert lines[5].split()[1] == "65536"  # the pod's 64 MiB tmpfs

    # CRI log: <log_directory>/<log_path>
    echo = mgr.create_container(sb.id, ctr_config(
        rootfs, "echo", ["sh", "-c", "echo to-out; echo to-err >&2; exit 7"], log_path="e.log"))
    mgr.start_container(echo)
    _wait_for(lambda: mgr.container_status(echo).state == ContainerState.CONTAINER_EXITED)
    c = mgr.container_status(echo)
    assert (c.exit_code, c.reason) == (7, "Error")
    assert c.log_path == str(logs / "e.log") and c.finished_at >= c.started_at > 0
    entries = {(e.stream, e.content) for e in read_cri_log(c.log_path)}
    assert entries == {("stdout", b"to-out"), ("stderr", b"to-err")}

    stats = mgr.container_stats(own)
    assert stats.process_count == 1 and stats.memory_usage_bytes > 0
    assert stats.cpu_usage_core_nano_seconds > 0 and stats.memory_working_set_bytes > 0
    assert stats.memory_rss_bytes > 0 and stats.memory_page_faults > 0
    pod_stats = mgr.sandbox_stats(sb.id)
    assert pod_stats.process_count >= 3 and len(pod_stats.containers) == 3

    mgr.stop_container(shared, timeout=5)  # not pid 1 (pod pid ns): SIGTERM kills it
    assert mgr.container_status(shared).exit_code == 143
    mgr.stop_container(own, timeout=0)  # SIGKILL at once
    c = mgr.container_status(own)
    assert c.state == ContainerState.CONTAINER_EXITED and c.exit_code == 137
    mgr.stop_container(own, timeout=5)  # idempotent
    mgr.remove_container(own)
    mgr.remove_container(own)
    assert [x.id for x in mgr.list_containers()] == [shared, echo]

    mgr.stop_sandbox(sb.id)
    assert not netns.exists(sb.netns_path)
    assert mgr.sandbox_status(sb.id).state == SandboxState.SANDBOX_NOTREADY
    assert mgr.container_status(shared).state == ContainerState.CONTAINER_EXITED
    mgr.stop_sandbox(sb.id)
    mgr.remove_sandbox(sb.id)
    mgr.remove_sandbox(sb.id)
    assert mgr.list_sandboxes() == [] and mgr.list_containers() == []


def test_host_network_sandbox_never_touches_cni(
    bridge: None, rootfs: Path, tmp_path: Path
) -> None:
    before = snapshot()
    m = make_manager(tmp_path / "m", rootfs, networks=False)
    try:
        with pytest.raises(Exception, match="must be empty for a host-network pod"):
            m.run_sandbox(pod_config(host_network=True, hostname="pk-pod-h"))
        sb = m.run_sandbox(pod_config(host_network=True))
        assert sb.netns_path == "" and sb.ips == ()
        cid = m.create_container(sb.id, ctr_config(rootfs, "c", ["sleep", "60"]))
        m.start_container(cid)
        res = m.exec_sync(cid, ["hostname"], timeout=10)
        assert res.stdout.decode().strip() == socket.gethostname()
        pid = m.container_status(cid).pid
        assert Path(f"/proc/{pid}/ns/net").readlink() == Path("/proc/self/ns/net").readlink()
        with pytest.raises(Exception, match="needs networks"):
            m.run_sandbox(pod_config())
        m.remove_sandbox(sb.id)
    finally:
        m.remove_all()
        m.close()
    assert leftovers(tmp_path / "m", m) == []
    assert leaked(before) == []


def test_duplicate_pod_name_fails_before_anything_is_created(
    mgr: SandboxManager,
) -> None:
    cfg = pod_config()
    sb = mgr.run_sandbox(cfg)
    before = snapshot()
    with pytest.raises(AlreadyExistsError, match=cfg.metadata.name):
        mgr.run_sandbox(cfg)
    assert snapshot() == before
    assert [s.id for s in mgr.list_sandboxes()] == [sb.id]
    assert [s.id for s in mgr.list_sandboxes(SandboxFilter(id=sb.id[:6]))] == [sb.id]


def test_two_pods_reach_each_other_and_port_mapping_from_host(
    mgr: SandboxManager, rootfs: Path, tmp_path: Path
) -> None:
    www = tmp_path / "www"
    www.mkdir()
    (www / "index.html").write_text("hello from pk-pod-server\n")
    from podkit.pods.config import Mount

    server = mgr.run_sandbox(pod_config(port_mappings=[PortMapping(container_port=80,
                                                                   host_port=18080)]))
    httpd = mgr.create_container(server.id, ctr_config(
        rootfs, "httpd", ["httpd", "-f", "-p", "80", "-h", "/www"],
        mounts=[Mount(container_path="/www", host_path=str(www), readonly=True)]))
    mgr.start_container(httpd)
    client = mgr.run_sandbox(pod_config())
    cid = mgr.create_container(client.id, ctr_config(rootfs, "client", ["sleep", "600"]))
    mgr.start_container(cid)
    res = mgr.exec_sync(cid, ["wget", "-q", "-O", "-",  # no -T: busybox 1.35 wget -T segfaults
                              f"http://{server.ip}/index.html"], timeout=20)
    assert (res.exit_code, res.stdout) == (0, b"hello from pk-pod-server\n"), res.stderr

    # the host port, from the test's "host" namespace (portmap DNAT on OUTPUT)
    gateway = server.ip.rsplit(".", 1)[0] + ".1"
    with socket.create_connection((gateway, 18080), timeout=5) as s:
        s.sendall(b"GET /index.html HTTP/1.0\r\n\r\n")
        body = b""
        while chunk := s.recv(4096):
            body += chunk
    assert body.endswith(b"hello from pk-pod-server\n"), body


def test_parallel_pods(mgr: SandboxManager, rootfs: Path) -> None:
    # 10 at once: 20 took a minute in the emulated cgroup-v2 guest (scripts/vm), where on a
    # loaded host a conmon came past its 60 s report timeout
    n = 10

    def one(i: int) -> str:
        sb = mgr.run_sandbox(pod_config(f"pk-pod-par-{i}"))
        cid = mgr.create_container(sb.id, ctr_config(rootfs, "c", ["sleep", "60"]))
        mgr.start_container(cid)
        return sb.ip

    with ThreadPoolExecutor(n) as pool:
        ips = list(pool.map(one, range(n)))
    assert len(set(ips)) == n
    assert len(mgr.list_sandboxes(SandboxFilter(state=SandboxState.SANDBOX_READY))) == n
    with ThreadPoolExecutor(n) as pool:
        list(pool.map(mgr.remove_sandbox, [s.id for s in mgr.list_sandboxes()]))
    assert mgr.list_sandboxes() == []


@pytest.mark.parametrize("host_network", [False, True])
def test_infraless_pod(bridge: None, rootfs: Path, tmp_path: Path, host_network: bool) -> None:
    """pause=None: IPC and UTS pinned by bind mounts; the first container owns the pod pid ns."""
    before = snapshot()
    base = tmp_path / "m"
    m = make_manager(base, rootfs, infraless=True)
    cgroups: list[str] = []
    try:
        extra: dict[str, object] = {} if host_network else {
            "hostname": "pk-pod-nopause",
            "linux": LinuxPodSandboxConfig(
                sysctls={"net.ipv4.ip_unprivileged_port_start": "1000"})}
        sb = m.run_sandbox(pod_config(host_network=host_network, **extra))
        assert sb.pid == 0 and "pause" not in sb.steps
        first = m.create_container(sb.id, ctr_config(rootfs, "first", ["sleep", "600"],
                                                     pid=NamespaceMode.POD))
        m.start_container(first)
        second = m.create_container(sb.id, ctr_config(rootfs, "second", ["sleep", "600"],
                                                      pid=NamespaceMode.POD))
        m.start_container(second)
        p1, p2 = (m.container_status(c).pid for c in (first, second))
        for kind in ("net", "ipc", "uts", "pid"):
            assert Path(f"/proc/{p1}/ns/{kind}").readlink() == \
                Path(f"/proc/{p2}/ns/{kind}").readlink(), kind
        host = Path("/proc/self/ns/ipc").readlink()
        assert Path(f"/proc/{p1}/ns/ipc").readlink() != host
        res = m.exec_sync(second, ["sh", "-c", "hostname; ps -o comm | grep -c sleep;"
                                   " cat /proc/sys/net/ipv4/ip_unprivileged_port_start"],
                          timeout=10)
        lines = res.stdout.decode().split()
        assert lines[1] == "2"  # both sleeps in one pid namespace
        if host_network:
            assert lines[0] == socket.gethostname()
        else:
            assert lines[0] == "pk-pod-nopause" and lines[2] == "1000"
            assert m.sandbox_status(sb.id).state == SandboxState.SANDBOX_READY
        cgroups = [c.cgroups_path for c in m.list_containers()]
        assert m.sandbox_stats(sb.id).process_count == 2
        m.stop_sandbox(sb.id)
        assert m.sandbox_status(sb.id).state == SandboxState.SANDBOX_NOTREADY
        m.remove_sandbox(sb.id)
    finally:
        m.remove_all()
        m.close()
    assert leftovers(base, m, cgroups) == []
    assert leaked(before) == []


def test_pod_with_crun(bridge: None, rootfs: Path, tmp_path: Path) -> None:
    require_binary("crun")
    before = snapshot()
    base = tmp_path / "m"
    m = make_manager(base, rootfs, binary="crun")
    try:
        sb = m.run_sandbox(pod_config(hostname="pk-pod-crun"))
        cid = m.create_container(sb.id, ctr_config(rootfs, "c", ["sleep", "600"]))
        m.start_container(cid)
        assert m.exec_sync(cid, ["hostname"], timeout=10).stdout == b"pk-pod-crun\n"
        m.stop_container(cid, 0)
        assert m.container_status(cid).exit_code == 137
        m.remove_sandbox(sb.id)
    finally:
        m.remove_all()
        m.close()
    assert leftovers(base, m) == []
    assert leaked(before) == []


def test_container_whose_conmon_was_killed(
    mgr: SandboxManager, rootfs: Path
) -> None:
    """conmon SIGKILLed: no exit file; status and stop fall back to the runtime."""
    import os
    import signal

    from podkit.runtime import ConmonSupervisor

    sb = mgr.run_sandbox(pod_config())
    cid = mgr.create_container(sb.id, ctr_config(rootfs, "c", ["sleep", "600"]))
    mgr.start_container(cid)
    sup = mgr.supervisor
    assert isinstance(sup, ConmonSupervisor)
    os.kill(sup.conmon.get(cid).conmon_pid, signal.SIGKILL)  # the conmon this test started
    _wait_for(lambda: not sup.conmon.monitor_alive(cid))
    assert mgr.container_status(cid).state == ContainerState.CONTAINER_RUNNING
    mgr.stop_container(cid, 0)
    c = mgr.container_status(cid)
    assert (c.state, c.exit_code) == (ContainerState.CONTAINER_EXITED, 255)
    mgr.remove_sandbox(sb.id)


def test_cni_arguments_and_capabilities(bridge: None, rootfs: Path, tmp_path: Path) -> None:
    """What the plugins get: Kubernetes CNI_ARGS, portMappings, bandwidth, dns, cgroupPath,
    pod annotations (a scripted fake exec behind the real client, a real netns)."""
    import json

    from podkit import cni
    from podkit.cni.testing import FakeExec
    from podkit.runtime.testing import FakeRuntime

    from .test_manager import FakeSupervisor

    fake = FakeExec()
    fake.on("bridge", "ADD", result={
        "cniVersion": "1.0.0", "interfaces": [{"name": "eth0", "sandbox": "/x"}],
        "ips": [{"address": "10.88.77.5/24", "interface": 0},
                {"address": "fd00::5/64", "interface": 0}]})
    caps = {k: True for k in ("portMappings", "bandwidth", "dns", "cgroupPath",
                              "io.kubernetes.cri.pod-annotations")}
    conf = cni.NetworkConfigList.from_bytes(json.dumps({
        "cniVersion": "1.0.0", "name": "pk-pod-fake",
        "plugins": [{"type": "bridge", "capabilities": caps}]}).encode())
    nets = cni.Networks(cni.CNI(plugin_dirs=["/nonexistent"], cache_dir=str(tmp_path / "c"),
                                exec=fake), [conf], loopback=True)
    rt = FakeRuntime()
    before = snapshot()
    m = SandboxManager(tmp_path / "root", tmp_path / "state", rt, nets,
                       pause=PauseConfig(rootfs=str(rootfs)), supervisor=FakeSupervisor(rt),
                       netns_prefix="pk-pod-")
    try:
        cfg = pod_config(
            "pk-pod-args",
            port_mappings=[PortMapping(container_port=80, host_port=8080),
                           PortMapping(container_port=53, host_port=0)],
            dns_config=DNSConfig(servers=["10.0.0.10"], searches=["svc"]),
            annotations={"kubernetes.io/ingress-bandwidth": "1M", "team": "pk"},
            linux=LinuxPodSandboxConfig(cgroup_parent="/kubepods"))
        sb = m.run_sandbox(cfg)
        assert sb.ips == ("10.88.77.5", "fd00::5")
        [add] = [c for c in fake.calls_for("ADD") if c.plugin == "bridge"]
        assert add.env["CNI_ARGS"] == (
            f"IgnoreUnknown=1;K8S_POD_NAMESPACE=pk-test;K8S_POD_NAME=pk-pod-args;"
            f"K8S_POD_INFRA_CONTAINER_ID={sb.id};K8S_POD_UID={cfg.metadata.uid}")
        assert add.config["runtimeConfig"] == {
            "portMappings": [{"hostPort": 8080, "containerPort": 80, "protocol": "tcp"}],
            "bandwidth": {"ingressRate": 1_000_000, "ingressBurst": 2**32 - 1},
            "dns": {"servers": ["10.0.0.10"], "searches": ["svc"]},
            "cgroupPath": "/kubepods",
            "io.kubernetes.cri.pod-annotations": dict(cfg.annotations),
        }
        assert add.env["CNI_NETNS"] == sb.netns_path
        m.remove_sandbox(sb.id)
        assert [c.plugin for c in fake.calls_for("DEL")] == ["bridge", "loopback"]
    finally:
        m.remove_all()
        m.close()
    assert leaked(before) == []


def test_container_user_is_the_resolved_user_of_its_bundle(
    mgr: SandboxManager, rootfs: Path
) -> None:
    sb = mgr.run_sandbox(pod_config())
    sc = LinuxContainerSecurityContext(namespace_options=NamespaceOption(),
                                       run_as_user=1000, supplemental_groups=[3000])
    cid = mgr.create_container(sb.id, ctr_config(rootfs, "u", ["sleep", "600"],
                                                 linux=LinuxContainerConfig(security_context=sc)))
    user = mgr.container_user(cid)
    assert user is not None
    # gid from the rootfs passwd entry of uid 1000 (app); the group file adds 2000 (extra)
    assert (user.uid, user.gid) == (1000, 1000)
    assert user.additional_gids is not None and {2000, 3000} <= set(user.additional_gids)
    with pytest.raises(NotFoundError):
        mgr.container_user("0" * 64)
