"""The mapping against the real thing: plans run by SandboxManager with runc, conmon and the
CNI plugins; what the kubelet's numbers and rules mean is read back from the kernel."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import attrs
import pytest

from podkit import cgroups
from podkit.kube import PodPlan, plan_pods
from podkit.runtime import ExecResult
from podkit.sandbox import SandboxManager
from sandbox._pods import copy_rootfs, managed, memory_limit, pod_bridge

from .helpers import NODE_MEMORY, from_text, plans

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def bridge() -> Iterator[None]:
    yield from pod_bridge()


@pytest.fixture(scope="module")
def rootfs(busybox_rootfs: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return copy_rootfs(busybox_rootfs, tmp_path_factory.mktemp("kube") / "rootfs")


@pytest.fixture
def mgr(bridge: None, rootfs: Path, tmp_path: Path) -> Iterator[SandboxManager]:
    yield from managed(tmp_path / "m", rootfs)


def _materialize(plan: PodPlan) -> None:
    """What kube play does on the host for the volumes these tests use."""
    for vol in plan.volumes:
        if vol.kind == "hostPath":
            continue
        Path(vol.host_path).mkdir(parents=True, exist_ok=True)
        if vol.kind == "emptyDir":
            Path(vol.host_path).chmod(0o777)  # the kubelet's mode for emptyDir
        for rel, content, mode in vol.files:
            f = Path(vol.host_path) / rel
            f.parent.mkdir(parents=True, exist_ok=True)
            f.write_bytes(content)
            f.chmod(mode)


def _start(mgr: SandboxManager, plan: PodPlan, rootfs: Path) -> dict[str, str]:
    """Run the sandbox and start its app containers (images swapped for the local rootfs)."""
    _materialize(plan)
    Path(plan.sandbox.log_directory).mkdir(parents=True, exist_ok=True)
    sb = mgr.run_sandbox(plan.sandbox)
    ids = {}
    for c in plan.containers:
        cid = mgr.create_container(sb.id, attrs.evolve(c.config, image=str(rootfs)))
        mgr.start_container(cid)
        ids[c.name] = cid
    return ids


def _cpu(cgroups_path: str) -> tuple[int, str]:
    """(shares, quota) of a container's cgroup; on cgroup v2 (weight, quota)."""
    cpu = cgroups.locate(cgroups_path).controller_dir("cpu")
    assert cpu is not None
    if (cpu / "cpu.shares").exists():
        return (int((cpu / "cpu.shares").read_text()),
                (cpu / "cpu.cfs_quota_us").read_text().strip())
    return int((cpu / "cpu.weight").read_text()), (cpu / "cpu.max").read_text().split()[0]


def _v1(shares: int) -> int:
    return shares


def _v2(shares: int) -> int:
    """The cgroup v2 weight runc writes for CPU shares."""
    return 1 + ((shares - 2) * 9999) // 262142


def test_qos_classes_in_the_cgroup_and_oom_score(mgr: SandboxManager, rootfs: Path,
                                                 tmp_path: Path) -> None:
    got = {}
    for plan in plans("qos.yaml", volumes_root=str(tmp_path / "v"),
                      log_root=str(tmp_path / "logs")):
        cid = _start(mgr, plan, rootfs)["main"]
        st = mgr.container_status(cid)
        oom = int(Path(f"/proc/{st.pid}/oom_score_adj").read_text())
        got[plan.name] = (oom, *_cpu(st.cgroups_path), memory_limit(st.cgroups_path))
    cpu_dir = cgroups.locate(st.cgroups_path).controller_dir("cpu")
    v1 = cpu_dir is not None and (cpu_dir / "cpu.shares").exists()
    unlimited = "-1" if v1 else "max"
    shares = _v1 if v1 else _v2
    # -997, or the manager's floor where the host does not allow lowering (no CAP_SYS_RESOURCE).
    assert got["guaranteed"][:3] == (max(-997, mgr.oom_score_floor), shares(256), "25000")
    assert got["guaranteed"][3] == 32 << 20
    # Burstable: 1000 - 1000 * 16Mi / node memory (8Gi in the plan) = 999.
    assert got["burstable"][:3] == (999, shares(102), unlimited)
    assert got["burstable"][3] == 64 << 20
    assert got["besteffort"][:3] == (1000, shares(2), unlimited)


MANIFEST = """
apiVersion: v1
kind: ConfigMap
metadata: {name: cfg}
data: {greeting: hello}
---
apiVersion: v1
kind: Pod
metadata: {name: secure, labels: {app: secure}}
spec:
  hostname: kube-host
  securityContext:
    runAsUser: 1000
    runAsGroup: 1000
    supplementalGroups: [4000]
    sysctls: [{name: kernel.shm_rmid_forced, value: "1"}]
  volumes:
  - {name: scratch, emptyDir: {}}
  - {name: conf, configMap: {name: cfg}}
  - name: info
    downwardAPI:
      items: [{path: labels, fieldRef: {fieldPath: metadata.labels}}]
  containers:
  - name: app
    image: busybox:1.36
    command: ["sh", "-c", "echo $(GREETING)-$(POD) > /scratch/out; sleep 600"]
    env:
    - {name: GREETING, valueFrom: {configMapKeyRef: {name: cfg, key: greeting}}}
    - {name: POD, valueFrom: {fieldRef: {fieldPath: metadata.name}}}
    securityContext:
      runAsUser: 2000
      readOnlyRootFilesystem: true
      allowPrivilegeEscalation: false
      capabilities: {drop: [ALL], add: [NET_BIND_SERVICE]}
    volumeMounts:
    - {name: scratch, mountPath: /scratch}
    - {name: conf, mountPath: /etc/conf}
    - {name: info, mountPath: /etc/info}
"""


def _status(mgr: SandboxManager, cid: str) -> dict[str, str]:
    out = mgr.exec_sync(cid, ["cat", "/proc/self/status"]).stdout.decode()
    return dict(line.split(":\t", 1) for line in out.splitlines() if ":\t" in line)


def test_env_security_volumes_hostname_and_sysctls(mgr: SandboxManager, rootfs: Path,
                                                   tmp_path: Path) -> None:
    (plan,) = plan_pods(from_text(MANIFEST), volumes_root=str(tmp_path / "v"),
                        log_root=str(tmp_path / "logs"), node_memory=NODE_MEMORY)
    cid = _start(mgr, plan, rootfs)["app"]

    def run(*cmd: str) -> ExecResult:
        return mgr.exec_sync(cid, list(cmd))

    # $(VAR) expanded in the command (sh is PID 1 of the container's own PID namespace) ...
    # $(VAR) expanded in the command: it wrote the configMap value and the pod name.
    wrote = mgr.exec_sync(cid, ["sh", "-c", "until [ -s /scratch/out ]; do sleep 0.1; done; "
                                "cat /scratch/out"], timeout=60)
    assert wrote.stdout == b"hello-secure\n"
    # ... and the env from the configMap and the fieldRef is the container's.
    assert run("sh", "-c", "echo $GREETING-$POD").stdout == b"hello-secure\n"
    scratch = next(v.host_path for v in plan.volumes if v.name == "scratch")
    assert run("touch", "/scratch/made-inside").exit_code == 0
    assert (Path(scratch) / "made-inside").stat().st_uid == 2000
    status = _status(mgr, cid)
    assert status["Uid"].split()[0] == "2000"       # the container's runAsUser wins
    assert status["Gid"].split()[0] == "1000"       # the pod's runAsGroup
    assert "4000" in status["Groups"].split()
    assert status["NoNewPrivs"].strip() == "1"      # allowPrivilegeEscalation: false
    assert int(status["CapBnd"], 16) == 1 << 10     # only CAP_NET_BIND_SERVICE
    assert run("touch", "/rootfs-file").exit_code != 0        # readOnlyRootFilesystem
    assert run("touch", "/etc/conf/new").exit_code != 0       # configMap mounts are read-only
    assert run("cat", "/etc/conf/greeting").stdout == b"hello"
    assert run("cat", "/etc/info/labels").stdout == b'app="secure"'
    assert run("hostname").stdout.decode().strip() == "kube-host"
    assert run("cat", "/proc/sys/kernel/shm_rmid_forced").stdout.strip() == b"1"
    assert plan.sandbox.labels["app"] == "secure"


def test_pod_pid_namespace_is_per_container_unless_shared(mgr: SandboxManager, rootfs: Path,
                                                          tmp_path: Path) -> None:
    text = ("apiVersion: v1\nkind: Pod\nmetadata: {name: pids}\nspec:\n  containers:\n"
            "  - {name: a, image: busybox, command: [sleep, '600']}\n"
            "  - {name: b, image: busybox, command: [sleep, '600']}\n")
    (plan,) = plan_pods(from_text(text), volumes_root=str(tmp_path / "v"),
                        log_root=str(tmp_path / "logs"), node_memory=NODE_MEMORY)
    ids = _start(mgr, plan, rootfs)
    # kubelet's default: each container has its own PID namespace, so sleep is PID 1 in each.
    for cid in ids.values():
        assert mgr.exec_sync(cid, ["cat", "/proc/1/comm"]).stdout.strip() == b"sleep"
        assert mgr.exec_sync(cid, ["sh", "-c", "ls -d /proc/[0-9]* | wc -l"]).stdout.strip() \
            in (b"3", b"4")  # sleep, sh and ls (and wc): never the other container's sleep
