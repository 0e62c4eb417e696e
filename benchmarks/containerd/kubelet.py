"""What kubelet 1.36 sends for a typical Deployment pod: the CRI configs (pure) and the files
kubelet makes on its node before it calls the runtime (:class:`KubeletNode`).

The configs follow ``pkg/kubelet/kuberuntime`` in kubernetes: ``generatePodSandboxConfig`` and
``generatePodSandboxLinuxConfig`` (kuberuntime_sandbox.go, ``applySandboxResources``),
``generateContainerConfig`` and ``makeMounts`` (kuberuntime_container.go),
``generateLinuxContainerConfig`` / ``calculateLinuxResources`` / ``ConfigureNoSwap``
(kuberuntime_container_linux.go), ``determineEffectiveSecurityContext`` (security_context.go),
``newPodLabels`` / ``newContainerAnnotations`` (labels.go), ``NamespacesForPod``
(kuberuntime/util), the default masked and read-only paths (pkg/securitycontext) and the
Burstable OOM score (pkg/kubelet/qos). The pod is one replica of a Deployment ``web`` in
namespace ``default``: one container, cpu 100m/500m and memory 64Mi/128Mi (Burstable), port 80
with a hostPort, the service account token, ClusterFirst DNS, ``RuntimeDefault`` seccomp (the
pod's securityContext, as the restricted Pod Security level asks), no other security settings.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
from pathlib import Path
from typing import Any

import attrs

__all__ = [
    "CONTAINER",
    "DEPLOYMENT",
    "MASKED_PATHS",
    "NAMESPACE",
    "READONLY_PATHS",
    "HostFacts",
    "KubeletNode",
    "KubeletPod",
    "burstable_oom_score_adj",
    "container_config",
    "container_hash",
    "host_facts",
    "hugepage_size_name",
    "linux_resources",
    "milli_cpu_to_quota",
    "milli_cpu_to_shares",
    "sandbox_config",
]

NAMESPACE = "default"
DEPLOYMENT = "web"
TEMPLATE_HASH = "7d4b9c8f6"  # the ReplicaSet's pod-template-hash
CONTAINER = "web"
CPU_REQUEST_MILLI, CPU_LIMIT_MILLI = 100, 500
MEMORY_REQUEST, MEMORY_LIMIT = 64 << 20, 128 << 20
CONTAINER_PORT = 80
TERMINATION_MESSAGE_PATH = "/dev/termination-log"
TERMINATION_GRACE_PERIOD = 30
CLUSTER_DNS = "10.96.0.10"
CLUSTER_DOMAIN = "cluster.local"
KUBERNETES_SERVICE = ("10.96.0.1", 443)  # the master service every pod gets env vars for
SERVICE_ACCOUNT_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"
USER_ENV = (("APP_MODE", "bench"),)
QUOTA_PERIOD = 100_000  # kubelet's cpuCFSQuotaPeriod, microseconds

# pkg/securitycontext: what kubelet masks and makes read-only for the default proc mount
MASKED_PATHS = ("/proc/asound", "/proc/acpi", "/proc/kcore", "/proc/keys", "/proc/latency_stats",
                "/proc/timer_list", "/proc/timer_stats", "/proc/sched_debug", "/proc/scsi",
                "/sys/firmware", "/sys/devices/virtual/powercap")
READONLY_PATHS = ("/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger")


# ---- the node ---------------------------------------------------------------------------------

@attrs.frozen
class HostFacts:
    """What kubelet reads of its node that changes the configs it sends."""

    cgroup_v2: bool = False
    swap_controller: bool = True  # cgroup v1 memory.memsw.* present
    hugepage_sizes: tuple[str, ...] = ()  # kubelet names: "2MB", "1GB"
    memory_capacity: int = 16 << 30


def hugepage_size_name(sysfs_name: str) -> str:
    """``hugepages-2048kB`` -> ``2MB`` (libcontainer's ``HugePageSizes`` naming)."""
    if not sysfs_name.startswith("hugepages-") or not sysfs_name.endswith("kB"):
        raise ValueError(f"hugepage dir {sysfs_name!r}: not hugepages-<N>kB")
    kib = int(sysfs_name[len("hugepages-"):-2])
    for unit, size in (("GB", 1 << 20), ("MB", 1 << 10)):
        if kib >= size and kib % size == 0:
            return f"{kib // size}{unit}"
    return f"{kib}KB"


def host_facts(cgroup_root: Path = Path("/sys/fs/cgroup"),
               hugepages: Path = Path("/sys/kernel/mm/hugepages"),
               meminfo: Path = Path("/proc/meminfo")) -> HostFacts:
    """This node's facts. Hugepage limits go only where a hugetlb controller is mounted: a
    kubelet node has one (runc cannot set a hugetlb limit without it)."""
    v2 = (cgroup_root / "cgroup.controllers").exists()
    if v2:
        controllers = (cgroup_root / "cgroup.controllers").read_text().split()
        hugetlb, swap = "hugetlb" in controllers, True
    else:
        hugetlb = (cgroup_root / "hugetlb").is_dir()
        swap = (cgroup_root / "memory" / "memory.memsw.limit_in_bytes").exists()
    sizes = tuple(hugepage_size_name(p.name) for p in sorted(hugepages.iterdir())) \
        if hugetlb and hugepages.is_dir() else ()
    total = next(int(line.split()[1]) * 1024 for line in meminfo.read_text().splitlines()
                 if line.startswith("MemTotal:"))
    return HostFacts(cgroup_v2=v2, swap_controller=swap, hugepage_sizes=sizes,
                     memory_capacity=total)


@attrs.frozen
class KubeletPod:
    """One replica: its identity, its host port and where kubelet keeps its files."""

    name: str
    uid: str
    host_port: int
    log_root: Path  # kubelet's --pod-logs-dir (/var/log/pods)
    pod_root: Path  # kubelet's <root-dir>/pods (/var/lib/kubelet/pods)
    seen: str = "2026-01-01T00:00:00.000000000Z"  # kubernetes.io/config.seen: first sight
    token_volume: str = "kube-api-access-bench"
    termination_log: str = "00000000"  # kubelet's random name of the container's file
    namespace: str = NAMESPACE

    @classmethod
    def new(cls, host_port: int, log_root: Path, pod_root: Path) -> KubeletPod:
        """A replica with a fresh name and UID (as the ReplicaSet controller makes them)."""
        import datetime
        import uuid

        now = datetime.datetime.now(datetime.UTC)
        suffix = "".join(secrets.choice("bcdfghjklmnpqrstvwxz2456789") for _ in range(5))
        return cls(name=f"{DEPLOYMENT}-{TEMPLATE_HASH}-{suffix}", uid=str(uuid.uuid4()),
                   host_port=host_port, log_root=log_root, pod_root=pod_root,
                   seen=now.strftime("%Y-%m-%dT%H:%M:%S.%f000Z"),
                   token_volume=f"kube-api-access-{secrets.token_hex(3)[:5]}",
                   termination_log=secrets.token_hex(4))

    @property
    def log_directory(self) -> Path:
        """``BuildPodLogsDirectory``: ``<logs>/<namespace>_<name>_<uid>``."""
        return self.log_root / f"{self.namespace}_{self.name}_{self.uid}"

    @property
    def pod_dir(self) -> Path:
        return self.pod_root / self.uid

    @property
    def etc_hosts(self) -> Path:
        return self.pod_dir / "etc-hosts"

    @property
    def termination_log_path(self) -> Path:
        return self.pod_dir / "containers" / CONTAINER / self.termination_log

    @property
    def token_dir(self) -> Path:
        return self.pod_dir / "volumes" / "kubernetes.io~projected" / self.token_volume

    @property
    def cgroup_parent(self) -> str:
        """The Burstable pod's cgroup, cgroupfs driver."""
        return f"/kubepods/burstable/pod{self.uid}"


# ---- kubelet's arithmetic ---------------------------------------------------------------------

def milli_cpu_to_shares(milli: int) -> int:
    """``cm.MilliCPUToShares``: 1024 shares per CPU, at least 2, at most 262144."""
    if milli == 0:
        return 2
    return max(2, min(262144, milli * 1024 // 1000))


def milli_cpu_to_quota(milli: int, period: int = QUOTA_PERIOD) -> int:
    """``milliCPUToQuota``: 0 without a limit, at least 1000 microseconds."""
    if milli == 0:
        return 0
    return max(1000, milli * period // 1000)


def burstable_oom_score_adj(memory_request: int, memory_capacity: int) -> int:
    """``qos.GetContainerOOMScoreAdjust`` of a Burstable container: 1000 - 1000 * request /
    capacity, kept within (3, 999]."""
    adj = 1000 - (1000 * memory_request) // memory_capacity
    if adj < 3:
        return 3
    return adj - 1 if adj == 1000 else adj


def container_hash(spec: dict[str, Any]) -> str:
    """``HashContainer``'s shape: FNV-1a 32 of the container's JSON, in hex."""
    h = 0x811C9DC5
    for byte in json.dumps(spec, sort_keys=True).encode():
        h = ((h ^ byte) * 0x01000193) & 0xFFFFFFFF
    return f"{h:x}"


def linux_resources(host: HostFacts, *, oom_score_adj: int | None) -> Any:
    """``calculateLinuxResources`` of the pod's one container (the sandbox's resources are
    the pod's sums: the same here), with ``ConfigureNoSwap`` and, for a container, its OOM
    score and hugepage limits (0 for every size the node has)."""
    from podkit.cri import api_pb2 as pb

    res = pb.LinuxContainerResources(
        cpu_period=QUOTA_PERIOD, cpu_quota=milli_cpu_to_quota(CPU_LIMIT_MILLI),
        cpu_shares=milli_cpu_to_shares(CPU_REQUEST_MILLI), memory_limit_in_bytes=MEMORY_LIMIT)
    if host.cgroup_v2:
        res.unified["memory.oom.group"] = "1"  # singleProcessOOMKill defaults to false on v2
    if oom_score_adj is None:
        return res
    res.oom_score_adj = oom_score_adj
    for size in host.hugepage_sizes:
        res.hugepage_limits.add(page_size=size, limit=0)
    if host.cgroup_v2:
        res.unified["memory.swap.max"] = "0"
    elif host.swap_controller:
        res.memory_swap_limit_in_bytes = res.memory_limit_in_bytes
    return res


def _namespaces(pb: Any) -> Any:
    """``NamespacesForPod`` of a pod with no host namespaces: network and IPC of the pod,
    PID per container, the node's user namespace (hostUsers unset)."""
    return pb.NamespaceOption(network=pb.POD, pid=pb.CONTAINER, ipc=pb.POD,
                              userns_options=pb.UserNamespace(mode=pb.NODE))


def _runtime_default(pb: Any) -> Any:
    return pb.SecurityProfile(profile_type=pb.SecurityProfile.ProfileType.RuntimeDefault)


# ---- the configs ------------------------------------------------------------------------------

def pod_labels(pod: KubeletPod) -> dict[str, str]:
    """``newPodLabels``: the pod's own labels plus kubelet's three."""
    return {"app": DEPLOYMENT, "pod-template-hash": TEMPLATE_HASH,
            "io.kubernetes.pod.name": pod.name, "io.kubernetes.pod.namespace": pod.namespace,
            "io.kubernetes.pod.uid": pod.uid}


def sandbox_config(pod: KubeletPod, host: HostFacts) -> Any:
    """``generatePodSandboxConfig`` of the replica (attempt 0)."""
    from podkit.cri import api_pb2 as pb

    cfg = pb.PodSandboxConfig(
        metadata=pb.PodSandboxMetadata(name=pod.name, uid=pod.uid, namespace=pod.namespace,
                                       attempt=0),
        hostname=pod.name, log_directory=str(pod.log_directory),
        dns_config=pb.DNSConfig(
            servers=[CLUSTER_DNS],
            searches=[f"{pod.namespace}.svc.{CLUSTER_DOMAIN}", f"svc.{CLUSTER_DOMAIN}",
                      CLUSTER_DOMAIN],
            options=["ndots:5"]),
        port_mappings=[pb.PortMapping(protocol=pb.TCP, container_port=CONTAINER_PORT,
                                      host_port=pod.host_port)],
        labels=pod_labels(pod),
        annotations={"kubernetes.io/config.seen": pod.seen,
                     "kubernetes.io/config.source": "api"})
    linux = cfg.linux
    linux.cgroup_parent = pod.cgroup_parent
    sc = linux.security_context
    sc.privileged = False
    sc.seccomp.CopyFrom(_runtime_default(pb))  # always, for the sandbox (kubernetes #84623)
    sc.namespace_options.CopyFrom(_namespaces(pb))
    linux.resources.CopyFrom(linux_resources(host, oom_score_adj=None))
    linux.overhead.SetInParent()  # no RuntimeClass overhead: an empty message
    return cfg


def _container_spec() -> dict[str, Any]:
    """The container of the Deployment's pod template (hashed into the annotations)."""
    return {"name": CONTAINER, "image": "busybox",
            "ports": [{"containerPort": CONTAINER_PORT, "protocol": "TCP"}],
            "env": [{"name": k, "value": v} for k, v in USER_ENV],
            "resources": {"requests": {"cpu": f"{CPU_REQUEST_MILLI}m", "memory": "64Mi"},
                          "limits": {"cpu": f"{CPU_LIMIT_MILLI}m", "memory": "128Mi"}},
            "terminationMessagePath": TERMINATION_MESSAGE_PATH,
            "terminationMessagePolicy": "File", "imagePullPolicy": "IfNotPresent"}


def service_env() -> list[tuple[str, str]]:
    """The docker-links-style variables of the ``kubernetes`` service (enableServiceLinks)."""
    ip, port = KUBERNETES_SERVICE
    url = f"tcp://{ip}:{port}"
    return [("KUBERNETES_SERVICE_HOST", ip), ("KUBERNETES_SERVICE_PORT", str(port)),
            ("KUBERNETES_SERVICE_PORT_HTTPS", str(port)), ("KUBERNETES_PORT", url),
            (f"KUBERNETES_PORT_{port}_TCP", url), (f"KUBERNETES_PORT_{port}_TCP_PROTO", "tcp"),
            (f"KUBERNETES_PORT_{port}_TCP_PORT", str(port)),
            (f"KUBERNETES_PORT_{port}_TCP_ADDR", ip)]


def container_config(pod: KubeletPod, host: HostFacts, image_ref: str, user_image: str) -> Any:
    """``generateContainerConfig`` of the replica's container (first attempt): ``image_ref``
    is the image's ID as the runtime reported it, ``user_image`` the name in the pod spec;
    no command (the image's), the image's user (root: ``RunAsUser`` 0)."""
    from podkit.cri import api_pb2 as pb

    spec = _container_spec()
    ports = [{"hostPort": pod.host_port, **spec["ports"][0]}]
    cfg = pb.ContainerConfig(
        metadata=pb.ContainerMetadata(name=CONTAINER, attempt=0),
        image=pb.ImageSpec(image=image_ref, user_specified_image=user_image),
        envs=[pb.KeyValue(key=k, value=v.encode()) for k, v in (*USER_ENV, *service_env())],
        mounts=[
            pb.Mount(container_path=SERVICE_ACCOUNT_DIR, host_path=str(pod.token_dir),
                     readonly=True),
            pb.Mount(container_path="/etc/hosts", host_path=str(pod.etc_hosts)),
            pb.Mount(container_path=TERMINATION_MESSAGE_PATH,
                     host_path=str(pod.termination_log_path)),
        ],
        labels={"io.kubernetes.pod.name": pod.name,
                "io.kubernetes.pod.namespace": pod.namespace,
                "io.kubernetes.pod.uid": pod.uid, "io.kubernetes.container.name": CONTAINER},
        annotations={
            "io.kubernetes.container.hash": container_hash(spec),
            "io.kubernetes.container.restartCount": "0",
            "io.kubernetes.container.terminationMessagePath": TERMINATION_MESSAGE_PATH,
            "io.kubernetes.container.terminationMessagePolicy": "File",
            "io.kubernetes.pod.terminationGracePeriod": str(TERMINATION_GRACE_PERIOD),
            "io.kubernetes.container.ports": json.dumps(ports, separators=(",", ":")),
        },
        log_path=f"{CONTAINER}/0.log")
    linux = cfg.linux
    linux.resources.CopyFrom(linux_resources(
        host, oom_score_adj=burstable_oom_score_adj(MEMORY_REQUEST, host.memory_capacity)))
    sc = linux.security_context
    sc.namespace_options.CopyFrom(_namespaces(pb))
    sc.run_as_user.value = 0
    sc.seccomp.CopyFrom(_runtime_default(pb))
    sc.no_new_privs = False
    sc.masked_paths.extend(MASKED_PATHS)
    sc.readonly_paths.extend(READONLY_PATHS)
    return cfg


# ---- kubelet's side effects -----------------------------------------------------------------

ETC_HOSTS = ("# Kubernetes-managed hosts file.\n127.0.0.1\tlocalhost\n::1\tlocalhost "
             "ip6-localhost ip6-loopback\nfe00::0\tip6-localnet\nfe00::0\tip6-mcastprefix\n"
             "fe00::1\tip6-allnodes\nfe00::2\tip6-allrouters\n")


class KubeletNode:
    """The files kubelet makes for a pod before it calls the runtime (log dirs, the pod's
    ``etc-hosts``, the termination-log file, the token volume) under ``base``, and what it
    removes once the pod is gone (those files, the pod's cgroup under ``/kubepods``)."""

    def __init__(self, base: Path, host: HostFacts,
                 cgroup_root: Path = Path("/sys/fs/cgroup")) -> None:
        self.base = base
        self.host = host
        self.cgroup_root = cgroup_root
        self.log_root = base / "var-log-pods"
        self.pod_root = base / "kubelet-pods"
        self.pods: dict[str, KubeletPod] = {}  # uid -> pod, until released
        self._next_port = 30000

    def new_pod(self) -> KubeletPod:
        """A replica with its files made (``createPodSandbox``'s log dir, the volumes)."""
        pod = KubeletPod.new(self._next_port, self.log_root, self.pod_root)
        self._next_port += 1
        self.pods[pod.uid] = pod
        pod.log_directory.mkdir(parents=True, mode=0o755)
        (pod.log_directory / CONTAINER).mkdir(mode=0o755)
        pod.token_dir.mkdir(parents=True, mode=0o755)
        for name, text in (("token", secrets.token_urlsafe(48)), ("namespace", pod.namespace),
                           ("ca.crt", "-----BEGIN CERTIFICATE-----\n")):
            (pod.token_dir / name).write_text(text)
        pod.etc_hosts.write_text(ETC_HOSTS + f"10.0.0.1\t{pod.name}\n")
        pod.termination_log_path.parent.mkdir(parents=True)
        pod.termination_log_path.touch()
        pod.termination_log_path.chmod(0o666)
        return pod

    def release(self, pod: KubeletPod) -> None:
        """Remove the pod's files and its cgroup (kubelet's pod cleanup)."""
        self.pods.pop(pod.uid, None)
        shutil.rmtree(pod.log_directory, ignore_errors=True)
        shutil.rmtree(pod.pod_dir, ignore_errors=True)
        for d in pod_cgroup_dirs(self.cgroup_root, pod.cgroup_parent, self.host.cgroup_v2):
            _rmdir_tree(d)

    def cleanup(self) -> None:
        """Release every pod left, then the ``kubepods`` dirs when nothing else is in them."""
        for pod in list(self.pods.values()):
            self.release(pod)
        for d in pod_cgroup_dirs(self.cgroup_root, "/kubepods/burstable", self.host.cgroup_v2):
            for parent in (d, d.parent):
                with contextlib.suppress(OSError):
                    parent.rmdir()


def pod_cgroup_dirs(root: Path, path: str, v2: bool) -> list[Path]:
    """Where cgroup ``path`` lives on every hierarchy of ``root`` (v1: one per controller
    dir, named hierarchies and the ``unified`` one included; v2: the one tree)."""
    rel = path.strip("/")
    if v2:
        return [root / rel]
    out = []
    for hierarchy in sorted(root.iterdir()) if root.is_dir() else ():
        if hierarchy.is_dir() and not hierarchy.is_symlink():
            out.append(hierarchy / rel)
    return out


def _rmdir_tree(path: Path) -> None:
    """rmdir ``path`` and its sub-cgroups, deepest first (a cgroup dir holds no files one
    can delete; a cgroup with processes stays)."""
    if not path.is_dir():
        return
    for top in sorted((t for t, _, _ in os.walk(path)), key=lambda t: -t.count("/")):
        with contextlib.suppress(OSError):
            os.rmdir(top)
