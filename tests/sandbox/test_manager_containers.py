"""Containers run by the SandboxManager, checked from inside: sysctls, user, readonly rootfs,
capabilities, cgroup resources (and live updates), mount propagation, CDI devices, log reopen,
bandwidth annotations, and the in-process supervisor."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from podkit import cdi, cgroups
from podkit.pods.config import (
    Capability,
    KeyValue,
    LinuxContainerConfig,
    LinuxContainerResources,
    LinuxContainerSecurityContext,
    LinuxPodSandboxConfig,
    Mount,
    MountPropagation,
    NamespaceMode,
    NamespaceOption,
)
from podkit.runtime import InProcessSupervisor, Runc, Supervisor, read_cri_log
from podkit.sandbox import ContainerState, SandboxManager
from support import require_binary

from ._pods import (
    ctr_config,
    leaked,
    leftovers,
    make_manager,
    managed,
    memory_limit,
    pod_config,
    snapshot,
)

pytestmark = pytest.mark.integration


@pytest.fixture
def cdi_dir(tmp_path: Path) -> Path:
    d = tmp_path / "cdi"
    d.mkdir()
    (d / "pk-pod.yaml").write_text(
        "cdiVersion: 0.5.0\nkind: pk-pod.example/dev\ndevices:\n- name: zero\n"
        "  containerEdits:\n    deviceNodes:\n    - {path: /dev/pk-zero, hostPath: /dev/zero}\n"
        "    env: [PK_DEVICE=zero]\n")
    return d


@pytest.fixture
def mgr(bridge: None, rootfs: Path, tmp_path: Path, cdi_dir: Path) -> Iterator[SandboxManager]:
    yield from managed(tmp_path / "m", rootfs, cdi=cdi.Cache([cdi_dir], auto_refresh=False))


def _sc(**kw: object) -> LinuxContainerSecurityContext:
    return LinuxContainerSecurityContext(
        namespace_options=NamespaceOption(pid=NamespaceMode.CONTAINER), **kw)  # type: ignore[arg-type]


def test_security_resources_and_devices_seen_from_inside(
    mgr: SandboxManager, rootfs: Path, tmp_path: Path
) -> None:
    sb = mgr.run_sandbox(pod_config(
        hostname="pk-pod-sec",
        linux=LinuxPodSandboxConfig(sysctls={"net.ipv4.ip_unprivileged_port_start": "1024",
                                             "kernel.shm_rmid_forced": "1"})))
    cid = mgr.create_container(sb.id, ctr_config(
        rootfs, "sec", ["sleep", "600"],
        envs=[KeyValue(key="GREETING", value="hi")],
        annotations={"cdi.k8s.io/pk": "pk-pod.example/dev=zero"},
        linux=LinuxContainerConfig(
            resources=LinuxContainerResources(memory_limit_in_bytes=64 << 20, cpu_shares=512),
            security_context=_sc(run_as_user=1000, run_as_group=1000, readonly_rootfs=True,
                                 capabilities=Capability(drop_capabilities=["ALL"],
                                                         add_capabilities=["net_raw"])))))
    mgr.start_container(cid)
    script = ("id -u; id -g; echo $GREETING $PK_DEVICE; ls /dev/pk-zero;"
              " cat /proc/sys/net/ipv4/ip_unprivileged_port_start;"
              " grep CapBnd /proc/self/status | cut -f2;"
              " touch /x 2>/dev/null && echo rw || echo ro; hostname")
    res = mgr.exec_sync(cid, ["sh", "-c", script], timeout=10)
    assert res.stdout.decode().split("\n")[:-1] == [
        "1000", "1000", "hi zero", "/dev/pk-zero", "1024", "0000000000002000", "ro",
        "pk-pod-sec"], res.stderr

    c = mgr.container_status(cid)
    assert memory_limit(c.cgroups_path) == 64 << 20  # v1 here, v2 in the guest
    if cgroups.host().mode is cgroups.Mode.UNIFIED:  # runc's shares -> weight conversion
        weight = cgroups.cgroup_dir("cpu", c.cgroups_path) / "cpu.weight"
        assert weight.read_text().strip() == str(1 + (512 - 2) * 9999 // 262142)
    else:
        cpu = cgroups.cgroup_dir("cpu", c.cgroups_path)
        assert (cpu / "cpu.shares").read_text().strip() == "512"
    mgr.update_container_resources(cid, LinuxContainerResources(memory_limit_in_bytes=96 << 20))
    assert memory_limit(c.cgroups_path) == 96 << 20
    assert mgr.container_status(cid).config.linux.resources == LinuxContainerResources(
        memory_limit_in_bytes=96 << 20)


def test_mount_propagation_host_to_container(
    mgr: SandboxManager, rootfs: Path, tmp_path: Path
) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    subprocess.run(["mount", "--bind", str(shared), str(shared)], check=True)
    subprocess.run(["mount", "--make-shared", str(shared)], check=True)
    sub = shared / "sub"
    sub.mkdir()
    try:
        sb = mgr.run_sandbox(pod_config())
        cid = mgr.create_container(sb.id, ctr_config(
            rootfs, "prop", ["sleep", "600"],
            mounts=[Mount(container_path="/mnt", host_path=str(shared),
                          propagation=MountPropagation.PROPAGATION_HOST_TO_CONTAINER)]))
        mgr.start_container(cid)
        subprocess.run(["mount", "-t", "tmpfs", "pk-pod-late", str(sub)], check=True)
        (sub / "late").write_text("mounted after start\n")
        res = mgr.exec_sync(cid, ["cat", "/mnt/sub/late"], timeout=10)
        assert res.stdout == b"mounted after start\n", res.stderr
        mgr.remove_sandbox(sb.id)
    finally:
        subprocess.run(["umount", "-R", str(shared)], check=False)


def test_log_reopen_and_bandwidth(mgr: SandboxManager, rootfs: Path, tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    sb = mgr.run_sandbox(pod_config(log_directory=str(logs), annotations={
        "kubernetes.io/ingress-bandwidth": "10M", "kubernetes.io/egress-bandwidth": "20M"}))
    cid = mgr.create_container(sb.id, ctr_config(
        rootfs, "talk", ["sh", "-c", "i=0; while true; do echo line$i; i=$((i+1)); sleep 0.05;"
                         " done"], log_path="talk.log"))
    mgr.start_container(cid)
    log = logs / "talk.log"
    deadline = time.monotonic() + 10
    while not log.exists() or not log.read_bytes():
        assert time.monotonic() < deadline
        time.sleep(0.05)
    log.rename(logs / "talk.log.1")
    mgr.reopen_container_log(cid)
    deadline = time.monotonic() + 10
    while not log.read_bytes():
        assert time.monotonic() < deadline
        time.sleep(0.05)
    assert next(iter(read_cri_log(log))).content.startswith(b"line")
    assert mgr.container_status(cid).state == ContainerState.CONTAINER_RUNNING


def test_in_process_supervisor(bridge: None, rootfs: Path, tmp_path: Path) -> None:
    before = snapshot()
    base = tmp_path / "m"
    runc = Runc(root=base / "runc")
    m = make_manager(base, rootfs, supervisor=InProcessSupervisor(runc))
    m.runtime = runc
    try:
        sb = m.run_sandbox(pod_config(log_directory=str(tmp_path / "logs")))
        cid = m.create_container(sb.id, ctr_config(rootfs, "c", ["sh", "-c", "echo hi; exit 5"],
                                                   log_path="c.log"))
        m.start_container(cid)
        deadline = time.monotonic() + 10
        while m.container_status(cid).state != ContainerState.CONTAINER_EXITED:
            assert time.monotonic() < deadline
            time.sleep(0.05)
        assert m.container_status(cid).exit_code == 5
        assert [e.content for e in read_cri_log(tmp_path / "logs" / "c.log")] == [b"hi"]
    finally:
        m.remove_all()
        m.close()
    assert leftovers(base, m) == []
    assert leaked(before) == []


def test_attach_to_stdin_and_tty(mgr: SandboxManager, rootfs: Path) -> None:
    sb = mgr.run_sandbox(pod_config())
    cat = mgr.create_container(sb.id, ctr_config(rootfs, "cat", ["cat"], stdin=True))
    mgr.start_container(cat)
    with mgr.attach(cat) as att:  # type: ignore[attr-defined]
        att.send(b"hello pod\n")
        got = b""
        while not got.endswith(b"hello pod\n"):
            item = att.recv(timeout=10)
            assert item is not None
            got += item[1]
    with pytest.raises(Exception, match="has no tty"):
        mgr.resize_tty(cat, 24, 80)
    term = mgr.create_container(sb.id, ctr_config(rootfs, "term", ["sleep", "600"], tty=True))
    mgr.start_container(term)
    mgr.resize_tty(term, 33, 99)
    deadline = time.monotonic() + 10
    size = ["stty", "-F", "/dev/console", "size"]  # the exec has no tty; the init's is there
    while (out := mgr.exec_sync(term, size, timeout=10).stdout) != b"33 99\n":
        assert time.monotonic() < deadline, out
        time.sleep(0.05)


# a shell that doubles a string until the memory limit's OOM killer ends it
GROW = "a=0123456789abcdef; while true; do a=$a$a; done"


@pytest.mark.parametrize(("binary", "in_process"), [
    ("runc", False), ("crun", False), ("runc", True)])
def test_oom_killed_reason(bridge: None, rootfs: Path, tmp_path: Path, binary: str,
                           in_process: bool) -> None:
    # conmon notes an OOM kill itself; the in-process supervisor relies on the cgroup's count
    # (v1 memory.oom_control, v2 memory.events oom_kill): both must say OOMKilled
    require_binary(binary)
    before = snapshot()
    base = tmp_path / "m"
    runc = Runc(binary, root=base / "runc")
    sup: dict[str, Supervisor] = {"supervisor": InProcessSupervisor(runc)} if in_process else {}
    m = make_manager(base, rootfs, binary=binary, **sup)
    if in_process:
        m.runtime = runc
    paths: list[str] = []
    try:
        sb = m.run_sandbox(pod_config(log_directory=str(tmp_path / "logs")))
        cid = m.create_container(sb.id, ctr_config(
            rootfs, "hog", ["sh", "-c", GROW], log_path="hog.log",
            linux=LinuxContainerConfig(
                security_context=_sc(),
                resources=LinuxContainerResources(memory_limit_in_bytes=16 << 20))))
        c = m.container_status(cid)
        paths = [sb.cgroups_path, c.cgroups_path]
        m.start_container(cid)
        assert memory_limit(c.cgroups_path) == 16 << 20  # the cgroup stays until removal
        deadline = time.monotonic() + 60
        while m.container_status(cid).state != ContainerState.CONTAINER_EXITED:
            assert time.monotonic() < deadline, "the memory hog was never OOM-killed"
            time.sleep(0.1)
        c = m.container_status(cid)
        assert (c.exit_code, c.reason) == (137, "OOMKilled")
        assert cgroups.oom_kills(c.cgroups_path) == 1
        other = m.create_container(sb.id, ctr_config(rootfs, "fine", ["sh", "-c", "exit 0"]))
        m.start_container(other)
        while m.container_status(other).state != ContainerState.CONTAINER_EXITED:
            assert time.monotonic() < deadline
            time.sleep(0.05)
        assert m.container_status(other).reason == "Completed"  # no OOM: not OOMKilled
    finally:
        m.remove_all()
        m.close()
    assert leftovers(base, m, paths) == []
    assert leaked(before) == []
