"""Benchmark podkit's CRI server side by side with containerd's (issues 16, 22), one gRPC client.

Both servers run as child processes with the same kind of pod network (loopback + bridge +
portmap, no masquerade, each on its own bridge and subnet), the same busybox-based images
(imported from the same OCI layouts) and runc; the client (podkit's ``runtime.v1`` stubs) drives
both, alternating who goes first each round:

* per round, for pods shaped as kubelet 1.36 sends a Deployment's replica
  (``containerd/kubelet.py``: labels, annotations, log dir and log path, DNS, a hostPort, the
  Burstable pod's cgroup parent, ``RuntimeDefault`` seccomp, resources, envs, kubelet's
  mounts), then for the minimal pod of issue 16, then kubelet's shape again with a CPU burner
  spinning on every CPU (the loaded rows): RunPodSandbox, CreateContainer+StartContainer,
  StopPodSandbox, RemovePodSandbox; PullImage of a ~30 MB image from a docker-registry on
  127.0.0.1 (removed after each pull on both sides), and the floor "download + sha256";
* with ``BENCH_SCALE_PODS`` (100) kubelet-shaped pods held on each server (made with
  concurrency 10): wall time to make them, ListPodSandbox, ListContainers, ContainerStatus,
  ExecSync (``true``), ContainerStats, ListContainerStats; server RSS with 10 pods and with all
  of them (and a bare grpcio server's, the floor), open fds, per-pod helper RSS (conmon vs
  containerd-shim-runc-v2); each server restarted with the pods present (time to the first
  ListPodSandbox with all of them); time to tear them all down.

It prints one table: median/p90 per call, the ratio podkit / containerd (or the floor) and the
goal. containerd (Debian's, installed when missing) runs from a temp dir and is stopped and
removed at the end with everything it made. Knobs: ``BENCH_ROUNDS`` (20),
``BENCH_SCALE_PODS`` (100), ``--profile DIR`` (py-spy of the podkit server: ``rounds.txt``
during the per-round calls, ``held.txt`` during the reads at scale, collapsed stacks).

Usage: ``scripts/isolated .venv/bin/python benchmarks/bench_vs_containerd.py [--json out]``
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, NamedTuple

sys.path.insert(0, str(Path(__file__).resolve().parent))
from containerd import instance as ctrd
from containerd import kubelet
from containerd.cpu import (
    CpuGroup,
    busy_fraction,
    enter_argv,
    proc_stat_busy,
    process_seconds,
)
from containerd.floors import RawContainers, floor_spec
from containerd.images import (
    BIG,
    BUSYBOX,
    PAUSE,
    archive,
    build_images,
    hosts_dir,
    pull_floor,
    registry,
)
from containerd.load import Burner
from containerd.report import Row, as_json, env_int, render, warm_median

NETWORKS = {"podkit": ("pk-vs-podkit", "pkvs0", "10.91.0.0/16"),
            "containerd": ("pk-vs-containerd", "pkvs1", "10.92.0.0/16")}
CONCURRENCY = 10
FEW_PODS = 10  # the RSS row with a few pods held (issue 22's measurement)

# ---- the servers

class Side:
    """One CRI server (a child process) and the client's stubs for it."""

    name = ""

    def __init__(self, base: Path) -> None:
        self.base = base
        self.channel: Any = None
        self.rt: Any = None
        self.img: Any = None
        self.cpu: CpuGroup | None = None  # the cgroup the server and its helpers run in
        self.image_id = ""  # the busybox image's ID on this server (kubelet's imageRef)

    def argv(self, argv: list[str]) -> list[str]:
        """The server's command line, entering its CPU cgroup first when it has one."""
        return argv if self.cpu is None else enter_argv(self.cpu.procs, argv)

    @property
    def address(self) -> str:
        raise NotImplementedError

    @property
    def pid(self) -> int:
        raise NotImplementedError

    def start(self) -> None:
        raise NotImplementedError

    def stop(self) -> None:
        raise NotImplementedError

    def helper_pids(self) -> list[int]:
        raise NotImplementedError

    def connect(self) -> None:
        import grpc

        from podkit.cri import api_pb2_grpc

        self.channel = grpc.insecure_channel(self.address)
        grpc.channel_ready_future(self.channel).result(timeout=120)
        self.rt = api_pb2_grpc.RuntimeServiceStub(self.channel)
        self.img = api_pb2_grpc.ImageServiceStub(self.channel)
        if not self.image_id:
            self.image_id = image_id(self, BUSYBOX)

    def disconnect(self) -> None:
        if self.channel is not None:
            self.channel.close()
            self.channel = None


class PodkitSide(Side):
    """``podkit cri serve`` over its own root, conf dir and bridge."""

    name = "podkit"

    def __init__(self, base: Path, conf_dir: Path, hosts: Path) -> None:
        super().__init__(base)
        self.root = base / "root"
        self.socket = base / "cri.sock"
        self.conf_dir = conf_dir
        self.hosts = hosts
        self.proc: subprocess.Popen[bytes] | None = None
        self.python_args: list[str] = []  # e.g. ["-m", "cProfile", "-o", FILE]
        self.raw = RawContainers(base / "floor")  # the floors' bare runc containers

    @property
    def address(self) -> str:
        return f"unix://{self.socket}"

    @property
    def runc_root(self) -> Path:
        """Where ``podkit cri serve --root`` keeps runc's state (``podkit._cli.cri``)."""
        return self.root / "state" / "cri" / "runc"

    def container_spec(self, container_id: str) -> dict[str, Any]:
        """The container's ``config.json`` as podkit wrote it."""
        path = self.root / "cri" / "containers" / container_id / "bundle"
        return dict(json.loads((path / "config.json").read_text()))

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def env(self) -> dict[str, str]:
        """This environment, with bytecode caching on (in a temp prefix, nothing written to
        the checkout): an installed podkit has its .pyc files; compiling ~200 modules from
        source on every start (PYTHONDONTWRITEBYTECODE) would triple the restart time."""
        env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        env["PYTHONPYCACHEPREFIX"] = str(self.base / "pycache")
        return env

    def start(self) -> None:
        log = open(self.base / "podkit.log", "ab")  # noqa: SIM115
        self.proc = subprocess.Popen(self.argv(
            [sys.executable, *self.python_args, "-m", "podkit.cli", "cri", "serve",
             "--socket", str(self.socket), "--root", str(self.root),
             "--cni-conf-dir", str(self.conf_dir), "--cni-bin-dir", ctrd.CNI_BIN,
             "--pause-image", PAUSE, "--registry-config-dir", str(self.hosts)]),
            stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True,
            env=self.env())
        log.close()
        for _ in range(1200):
            if self.socket.exists():
                return
            if self.proc.poll() is not None:
                break
            time.sleep(0.05)
        raise RuntimeError("podkit cri serve did not start: "
                           + (self.base / "podkit.log").read_text()[-3000:])

    def stop(self) -> None:
        self.disconnect()
        if self.proc is None:
            return
        ctrd.terminate(self.proc)
        self.proc = None

    def helper_pids(self) -> list[int]:
        return ctrd.pids_matching("conmon", str(self.root))

    def cleanup(self, bridge: str) -> None:
        """End what a failed run left: conmons (by PID), runc containers, mounts, the bridge."""
        self.stop()
        ctrd.kill_all(self.helper_pids())
        runc_root = self.root / "state" / "cri" / "runc"
        for ctr in runc_root.iterdir() if runc_root.is_dir() else ():
            subprocess.run(["runc", "--root", str(runc_root), "delete", "--force", ctr.name],
                           capture_output=True, check=False)
        for netns in Path("/run/netns").glob("podkit-cri-*"):
            subprocess.run(["umount", "-l", str(netns)], capture_output=True, check=False)
            netns.unlink(missing_ok=True)
        ctrd.unmount_under(self.base)
        subprocess.run(["ip", "link", "del", bridge], capture_output=True, check=False)


class ContainerdSide(Side):
    """The private containerd of :mod:`_containerd`."""

    name = "containerd"

    def __init__(self, base: Path, instance: ctrd.Containerd) -> None:
        super().__init__(base)
        self.instance = instance

    @property
    def address(self) -> str:
        return self.instance.address

    @property
    def pid(self) -> int:
        assert self.instance.proc is not None
        return self.instance.proc.pid

    def start(self) -> None:
        self.instance.start(self.argv)

    def stop(self) -> None:
        self.disconnect()
        self.instance.stop()

    def helper_pids(self) -> list[int]:
        return self.instance.shim_pids()


# ---- the calls

def image_id(side: Side, ref: str) -> str:
    """The image's ID as ``side`` reports it: what kubelet puts in CreateContainer's image
    (``EnsureImageExists`` hands on the ImageStatus ID, not the name)."""
    from podkit.cri import api_pb2 as pb

    got = side.img.ImageStatus(pb.ImageStatusRequest(image=pb.ImageSpec(image=ref)), timeout=60)
    if not got.image.id:
        raise RuntimeError(f"{side.name}: ImageStatus({ref}) has no image")
    return str(got.image.id)


def pod_config() -> Any:
    """The minimal PodSandboxConfig of issue 16 (pod network, own PID namespace per ctr)."""
    from podkit.cri import api_pb2 as pb

    cfg = pb.PodSandboxConfig(metadata=pb.PodSandboxMetadata(
        name=f"pk-vs-{uuid.uuid4().hex[:10]}", uid=uuid.uuid4().hex, namespace="pk-vs"),
        hostname="pk-vs")
    cfg.linux.security_context.namespace_options.network = pb.POD
    cfg.linux.security_context.namespace_options.pid = pb.CONTAINER
    return cfg


def container_config() -> Any:
    """The minimal ContainerConfig of issue 16 (busybox by name, ``sleep 3600``)."""
    from podkit.cri import api_pb2 as pb

    cfg = pb.ContainerConfig(metadata=pb.ContainerMetadata(name="c"),
                             image=pb.ImageSpec(image=BUSYBOX), command=["sleep", "3600"])
    cfg.linux.security_context.namespace_options.pid = pb.CONTAINER
    return cfg


class Plan(NamedTuple):
    """One pod to make: its configs, and what to do once it is removed."""

    pod: Any
    container: Any
    release: Callable[[], None]


def kubelet_plan(node: kubelet.KubeletNode, side: Side) -> Plan:
    """A Deployment replica as kubelet sends it, its node files made first."""
    pod = node.new_pod()
    return Plan(kubelet.sandbox_config(pod, node.host),
                kubelet.container_config(pod, node.host, side.image_id, BUSYBOX),
                lambda: node.release(pod))


def minimal_plan(side: Side) -> Plan:
    del side
    return Plan(pod_config(), container_config(), lambda: None)


class Recorder:
    """Samples per (side, call); warm-up rounds run the calls without keeping them."""

    def __init__(self) -> None:
        self.times: dict[tuple[str, str], list[float]] = {}

    def timed(self, side: str, call: str, fn: Callable[[], Any], keep: bool = True) -> Any:
        t0 = time.perf_counter()
        out = fn()
        if keep:
            self.times.setdefault((side, call), []).append(time.perf_counter() - t0)
        return out

    def add(self, side: str, call: str, value: float) -> None:
        self.times.setdefault((side, call), []).append(value)


def run_pod(side: Side, plan: Plan) -> tuple[str, str]:
    """RunPodSandbox + CreateContainer + StartContainer; (pod id, container id)."""
    from podkit.cri import api_pb2 as pb

    sid = side.rt.RunPodSandbox(pb.RunPodSandboxRequest(config=plan.pod),
                                timeout=300).pod_sandbox_id
    cid = side.rt.CreateContainer(pb.CreateContainerRequest(
        pod_sandbox_id=sid, config=plan.container, sandbox_config=plan.pod),
        timeout=300).container_id
    side.rt.StartContainer(pb.StartContainerRequest(container_id=cid), timeout=300)
    return sid, cid


def remove_pod(side: Side, sid: str) -> None:
    from podkit.cri import api_pb2 as pb

    side.rt.StopPodSandbox(pb.StopPodSandboxRequest(pod_sandbox_id=sid), timeout=300)
    side.rt.RemovePodSandbox(pb.RemovePodSandboxRequest(pod_sandbox_id=sid), timeout=300)


def pod_round(side: Side, rec: Recorder, keep: bool, plan: Plan, variant: str = "",
              floor: bool = False) -> None:
    """One pod through its life, each call timed as ``<call><variant>``; with ``floor``, the
    bare runc create+start of the container's own spec right after podkit's."""
    from podkit.cri import api_pb2 as pb

    n, pod = side.name, plan.pod
    sid = rec.timed(n, "RunPodSandbox" + variant, lambda: side.rt.RunPodSandbox(
        pb.RunPodSandboxRequest(config=pod), timeout=300).pod_sandbox_id, keep)

    def create_start() -> str:
        cid: str = side.rt.CreateContainer(pb.CreateContainerRequest(
            pod_sandbox_id=sid, config=plan.container, sandbox_config=pod),
            timeout=300).container_id
        side.rt.StartContainer(pb.StartContainerRequest(container_id=cid), timeout=300)
        return cid

    cid = rec.timed(n, "CreateContainer+StartContainer" + variant, create_start, keep)
    if floor and isinstance(side, PodkitSide):  # bare runc beside it, with its own spec
        spec = floor_spec(side.container_spec(cid), f"floor-{cid[:12]}")
        try:
            rec.timed("floor", "CreateContainer+StartContainer",
                      lambda: side.raw.create_start(spec, f"floor-{cid[:12]}"), keep)
        finally:
            side.raw.remove()
    rec.timed(n, "StopPodSandbox" + variant, lambda: side.rt.StopPodSandbox(
        pb.StopPodSandboxRequest(pod_sandbox_id=sid), timeout=300), keep)
    rec.timed(n, "RemovePodSandbox" + variant, lambda: side.rt.RemovePodSandbox(
        pb.RemovePodSandboxRequest(pod_sandbox_id=sid), timeout=300), keep)
    plan.release()


def pull_round(side: Side, rec: Recorder, ref: str, keep: bool) -> None:
    """PullImage timed, then RemoveImage so the next pull downloads again."""
    from podkit.cri import api_pb2 as pb

    spec = pb.ImageSpec(image=ref)
    rec.timed(side.name, "PullImage", lambda: side.img.PullImage(
        pb.PullImageRequest(image=spec), timeout=600), keep)
    side.img.RemoveImage(pb.RemoveImageRequest(image=spec), timeout=300)


def held_round(side: Side, rec: Recorder, pods: Sequence[tuple[str, str]], i: int,
               keep: bool) -> None:
    """The read calls and ExecSync with the scale pods present."""
    from podkit.cri import api_pb2 as pb

    n, rt = side.name, side.rt
    cid = pods[i % len(pods)][1]
    got = rec.timed(n, "ListPodSandbox", lambda: rt.ListPodSandbox(
        pb.ListPodSandboxRequest(), timeout=60).items, keep)
    if len(got) < len(pods):
        raise RuntimeError(f"{n}: ListPodSandbox has {len(got)} pods, want {len(pods)}")
    rec.timed(n, "ListContainers", lambda: rt.ListContainers(pb.ListContainersRequest(),
                                                             timeout=60), keep)
    rec.timed(n, "ContainerStatus", lambda: rt.ContainerStatus(
        pb.ContainerStatusRequest(container_id=cid), timeout=60), keep)
    out = rec.timed(n, "ExecSync", lambda: rt.ExecSync(
        pb.ExecSyncRequest(container_id=cid, cmd=["true"], timeout=30), timeout=60), keep)
    if out.exit_code != 0:
        raise RuntimeError(f"{n}: ExecSync true exited {out.exit_code}: {out.stderr!r}")
    if isinstance(side, PodkitSide):
        # the floor: a bare runc exec into another of podkit's containers, one no exec has
        # touched yet (as the ExecSync's: the first exec into a container is the slower)
        other = pods[(i + len(pods) // 2) % len(pods)][1]
        rec.timed("floor", "ExecSync", lambda: side.raw.exec(side.runc_root, other), keep)
    rec.timed(n, "ContainerStats", lambda: rt.ContainerStats(
        pb.ContainerStatsRequest(container_id=cid), timeout=60), keep)
    rec.timed(n, "ListContainerStats", lambda: rt.ListContainerStats(
        pb.ListContainerStatsRequest(), timeout=60), keep)
    rec.timed(n, "Version (no-op: the gRPC floor)", lambda: rt.Version(
        pb.VersionRequest(), timeout=60), keep)
    warm_round(side, rec, cid, keep)


def warm_name(call: str) -> str:
    return f"{call}, warm ({WARM} back-to-back)"


def warm_round(side: Side, rec: Recorder, cid: str, keep: bool) -> None:
    """The read calls :data:`WARM` times back to back each; the median of each is one sample
    (the warm gRPC floor of each server beside the single cold call)."""
    from podkit.cri import api_pb2 as pb

    rt = side.rt
    calls: dict[str, Callable[[], Any]] = {
        "Version": lambda: rt.Version(pb.VersionRequest(), timeout=60),
        "ContainerStatus": lambda: rt.ContainerStatus(
            pb.ContainerStatusRequest(container_id=cid), timeout=60),
        "ListContainers": lambda: rt.ListContainers(pb.ListContainersRequest(), timeout=60),
        "ListPodSandbox": lambda: rt.ListPodSandbox(pb.ListPodSandboxRequest(), timeout=60),
    }
    for call, fn in calls.items():
        value = warm_median(fn, WARM)
        if keep:
            rec.add(side.name, warm_name(call), value)


def _readings(side: Side) -> tuple[float, float, tuple[int, int]]:
    """CPU seconds of the server's cgroup and of the server process, and /proc/stat."""
    group = side.cpu.seconds() if side.cpu is not None else 0.0
    own = process_seconds(Path(f"/proc/{side.pid}/stat").read_text())
    return group, own, proc_stat_busy(Path("/proc/stat").read_text())


class Made(NamedTuple):
    """Pods made by :func:`make_pods` and what the make cost."""

    wall: float  # seconds
    pods: list[tuple[str, str]]
    group: float  # CPU seconds of the server's cgroup (server and helpers)
    own: float  # CPU seconds of the server process
    busy: tuple[int, int]  # busy and total jiffies of the machine over the make


def make_pods(side: Side, plans: Sequence[Plan]) -> Made:
    """The planned pods (pause + 1 container each) made with concurrency 10."""
    before = _readings(side)
    t0 = time.perf_counter()
    with ThreadPoolExecutor(CONCURRENCY) as pool:
        pods = list(pool.map(lambda plan: run_pod(side, plan), plans))
    wall = time.perf_counter() - t0
    after = _readings(side)
    return Made(wall, pods, after[0] - before[0], after[1] - before[1],
                (after[2][0] - before[2][0], after[2][1] - before[2][1]))


def make_cost(made: Sequence[Made]) -> dict[str, float]:
    """The make rows of several makes together: wall seconds, CPU per pod (ms: server with
    its helpers, server alone), the machine's busy share (%)."""
    count = sum(len(m.pods) for m in made)
    busy = (sum(m.busy[0] for m in made), sum(m.busy[1] for m in made))
    return {SCALE_CALLS[0]: sum(m.wall for m in made),
            CPU_CALLS[0]: sum(m.group for m in made) / count,
            CPU_CALLS[1]: sum(m.own for m in made) / count,
            CPU_CALLS[2]: 100 * busy_fraction((0, 0), busy)}


def tear_down(side: Side, pods: Sequence[tuple[str, str]]) -> float:
    t0 = time.perf_counter()
    with ThreadPoolExecutor(CONCURRENCY) as pool:
        list(pool.map(lambda p: remove_pod(side, p[0]), pods))
    return time.perf_counter() - t0


def rss_mb(pid: int) -> float:
    return ctrd.rss_kib(pid) / 1024


def memory(side: Side, pods: int) -> dict[str, float]:
    """Server RSS (MB), its open fds, and the per-pod RSS of its helpers (MB)."""
    helpers = side.helper_pids()
    return {"server RSS": rss_mb(side.pid),
            "server open fds": float(ctrd.open_fds(side.pid)),
            "per-pod helper RSS": sum(ctrd.rss_kib(p) for p in helpers) / 1024 / pods,
            "helpers": float(len(helpers))}


def floor_rss(base: Path, env: dict[str, str], calls: int = 20) -> float:
    """RSS (MB) of a bare grpcio server with the CRI stubs (``containerd/grpc_floor.py``)
    after ``calls`` Version calls: the floor of any CRI server in Python."""
    import grpc

    from podkit.cri import api_pb2 as pb
    from podkit.cri import api_pb2_grpc

    sock = base / "floor.sock"
    script = Path(__file__).resolve().parent / "containerd" / "grpc_floor.py"
    proc = subprocess.Popen([sys.executable, str(script), str(sock)], env=env,
                            stdin=subprocess.DEVNULL, start_new_session=True)
    try:
        with grpc.insecure_channel(f"unix://{sock}") as channel:
            grpc.channel_ready_future(channel).result(timeout=120)
            stub = api_pb2_grpc.RuntimeServiceStub(channel)
            for _ in range(calls):
                stub.Version(pb.VersionRequest(), timeout=60)
            return rss_mb(proc.pid)
    finally:
        ctrd.terminate(proc)
        sock.unlink(missing_ok=True)


def restart(side: Side, pods: int) -> float:
    """Stop the server (its pods keep running), start it: seconds to the first ListPodSandbox
    answering with all ``pods``."""
    import grpc

    from podkit.cri import api_pb2 as pb

    side.stop()
    t0 = time.perf_counter()
    side.start()
    side.connect()
    while True:
        try:
            if len(side.rt.ListPodSandbox(pb.ListPodSandboxRequest(), timeout=60).items) >= pods:
                return time.perf_counter() - t0
        except grpc.RpcError:
            pass
        time.sleep(0.01)


def remove_everything(side: Side) -> None:
    """Stop and remove every pod and image the bench left on a server still answering."""
    from podkit.cri import api_pb2 as pb

    if side.rt is None:
        return
    with contextlib.suppress(Exception):
        items = side.rt.ListPodSandbox(pb.ListPodSandboxRequest(), timeout=60).items
        tear_down(side, [(p.id, "") for p in items])


# ---- the run

POD_CALLS = ("RunPodSandbox", "CreateContainer+StartContainer", "StopPodSandbox",
             "RemovePodSandbox")
LOADED = " (loaded)"  # kubelet's shape with a CPU burner on every CPU
MINIMAL = " (minimal pod)"  # issue 16's pod: no labels, log dir, DNS, ports, cgroup parent...
VARIANTS = ("", LOADED, MINIMAL)  # the row-name suffixes; "": kubelet's shape, quiet
ROUND_CALLS = (*POD_CALLS, *(c + v for v in VARIANTS[1:] for c in POD_CALLS), "PullImage")
HELD_CALLS = ("ExecSync", "ContainerStatus", "ListPodSandbox", "ListContainers",
              "ContainerStats", "ListContainerStats", "Version (no-op: the gRPC floor)")
STOP_REMOVE = "StopPodSandbox+RemovePodSandbox"
EXEC_FLOOR = "ExecSync vs floor runc exec"
CREATE_FLOOR = "CreateContainer+StartContainer vs floor runc create+start"
SCALE_CALLS = ("create pods, concurrency 10", "restart: first full List",
               "tear down pods, concurrency 10")
CPU_CALLS = ("create pods: CPU per pod, server + helpers",
             "create pods: CPU per pod, server process", "create pods: machine CPU busy")
WARM = 20
WARM_CALLS = ("Version", "ContainerStatus", "ListContainers", "ListPodSandbox")
RSS_IDLE = "server RSS, idle (no pod yet)"
RSS_FLOOR = "server RSS (10 pods) vs floor bare grpcio server"


def rss_name(pods: int) -> str:
    return f"server RSS ({pods} pods)"


def per_round(sides: Sequence[Side], rec: Recorder, rounds: int, ref: str,
              floor: Callable[[], None], node: kubelet.KubeletNode) -> None:
    """Pods (kubelet's shape, the minimal one, kubelet's under load) and pulls, alternating
    who goes first; round 0 warms both up."""
    for i in range(rounds + 1):
        keep = i > 0
        order = list(sides) if i % 2 == 0 else list(reversed(sides))
        for side in order:
            pod_round(side, rec, keep, kubelet_plan(node, side), floor=True)
        for side in order:
            pod_round(side, rec, keep, minimal_plan(side), MINIMAL)
        with Burner():
            for side in order:
                pod_round(side, rec, keep, kubelet_plan(node, side), LOADED)
        for side in order:
            pull_round(side, rec, ref, keep)
        rec.timed("floor", "PullImage", floor, keep)


def at_scale(sides: Sequence[Side], rec: Recorder, rounds: int, count: int,
             prof: Profiler, node: kubelet.KubeletNode) -> dict[str, dict[str, float]]:
    """``count`` kubelet-shaped pods held on each server: make (RSS with the first 10),
    read, measure, restart, tear down.

    containerd's pods are made first and torn down last, so podkit's side always works with
    the other server's pods present too (the harder case)."""
    pods: dict[str, list[tuple[str, str]]] = {}
    mem: dict[str, dict[str, float]] = {side.name: {} for side in sides}
    few = min(FEW_PODS, count)
    for side in reversed(sides):
        first = make_pods(side, [kubelet_plan(node, side) for _ in range(few)])
        mem[side.name][rss_name(few)] = rss_mb(side.pid)
        rest = make_pods(side, [kubelet_plan(node, side) for _ in range(count - few)])
        pods[side.name] = first.pods + rest.pods
        for call, value in make_cost([first, rest] if rest.pods else [first]).items():
            rec.add(side.name, call, value)
    with prof.phase(sides[0], "held"):
        for i in range(rounds + 1):
            order = list(sides) if i % 2 == 0 else list(reversed(sides))
            for side in order:
                held_round(side, rec, pods[side.name], i, i > 0)
    for side in sides:
        mem[side.name].update(memory(side, count))
        mem[side.name][rss_name(count)] = mem[side.name].pop("server RSS")
    for side in sides:
        prof.restart_args(side)
        rec.add(side.name, SCALE_CALLS[1], restart(side, count))
    for side in sides:
        rec.add(side.name, SCALE_CALLS[2], tear_down(side, pods[side.name]))
    return mem


def stop_remove(t: dict[tuple[str, str], list[float]], side: str, variant: str) -> list[float]:
    """StopPodSandbox + RemovePodSandbox per pod: the servers split a pod's teardown
    differently (containerd deletes its tasks in the stop), kubelet always makes both."""
    return [a + b for a, b in zip(t[(side, "StopPodSandbox" + variant)],
                                  t[(side, "RemovePodSandbox" + variant)], strict=True)]


def build_rows(rec: Recorder, mem: dict[str, dict[str, float]], scale: int) -> list[Row]:
    """The table: per-round pod calls (kubelet's shape quiet, loaded, minimal; each with
    stop+remove summed), the pull, the reads at scale, the floors, the warm reads, the scale
    rows, CPU, memory. ``mem``: per side, the memory readings (RSS idle, with 10 pods, with
    ``scale`` pods, fds, helper RSS) and ``floor``: the bare grpcio server's RSS."""
    t = rec.times

    def row(call: str, **kw: Any) -> Row:
        return Row(call, t[("podkit", call)], t[("containerd", call)], **kw)

    rows = []
    for variant in VARIANTS:
        rows += [row(c + variant) for c in POD_CALLS]
        rows.append(Row(STOP_REMOVE + variant, stop_remove(t, "podkit", variant),
                        stop_remove(t, "containerd", variant)))
    rows += [row(c) for c in ("PullImage", *HELD_CALLS)]
    rows.append(Row("PullImage vs floor fetch+sha256", t[("podkit", "PullImage")],
                    t[("floor", "PullImage")], second="floor"))
    rows.append(Row(EXEC_FLOOR, t[("podkit", "ExecSync")], t[("floor", "ExecSync")],
                    second="floor"))
    rows.append(Row(CREATE_FLOOR, t[("podkit", "CreateContainer+StartContainer")],
                    t[("floor", "CreateContainer+StartContainer")], second="floor"))
    rows += [row(warm_name(c)) for c in WARM_CALLS]
    rows += [row(c, unit="s") for c in SCALE_CALLS]
    rows += [row(c, unit=u) for c, u in zip(CPU_CALLS, ("ms", "ms", "%"), strict=True)]
    few = rss_name(min(FEW_PODS, scale))
    pk, cd = mem["podkit"], mem["containerd"]
    rows += [Row(RSS_IDLE, [pk[RSS_IDLE]], [cd[RSS_IDLE]], unit="MB"),
             Row(few, [pk[few]], [cd[few]], unit="MB", goal=1.0),
             Row(rss_name(scale), [pk[rss_name(scale)]], [cd[rss_name(scale)]], unit="MB",
                 goal=1.0),
             Row(RSS_FLOOR, [pk[few]], [mem["floor"][RSS_IDLE]], unit="MB", second="floor")]
    rows += [Row(k, [pk[k]], [cd[k]], unit=u)
             for k, u in (("per-pod helper RSS", "MB"), ("server open fds", "fds"))]
    return rows


class Profiler:
    """py-spy (installed into this venv when missing) sampling the podkit server during a
    phase, idle threads too (wall time: filter the stacks by the call's frame); collapsed
    stacks to ``<dir>/<phase>.txt``. Off when ``dir`` is None."""

    def __init__(self, dir: Path | None) -> None:
        self.dir = dir
        self.spy = Path(sys.executable).parent / "py-spy"
        if dir is not None and not self.spy.exists():
            subprocess.run([sys.executable, "-m", "pip", "install", "-q", "py-spy"], check=True)

    def restart_args(self, side: Side) -> None:
        """Run the restarted podkit server under cProfile (py-spy would attach too late to
        see its start): ``<dir>/restart.prof``, written when it stops."""
        if self.dir is not None and isinstance(side, PodkitSide):
            self.dir.mkdir(parents=True, exist_ok=True)
            side.python_args = ["-m", "cProfile", "-o", str(self.dir / "restart.prof")]

    @contextlib.contextmanager
    def phase(self, side: Side, name: str) -> Iterator[None]:
        if self.dir is None or side.name != "podkit":
            yield
            return
        self.dir.mkdir(parents=True, exist_ok=True)
        proc = subprocess.Popen([str(self.spy), "record", "-p", str(side.pid), "-r", "250",
                                 "-f", "raw", "-o", str(self.dir / f"{name}.txt"),
                                 "--nonblocking", "--idle"], stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL)
        try:
            yield
        finally:
            proc.send_signal(signal.SIGINT)
            proc.wait(60)


def setup(base: Path, host: str, layouts: dict[str, Path]) -> tuple[PodkitSide, ContainerdSide]:
    """Both servers' dirs, networks and images (the same layouts); neither started yet."""
    from podkit.image import ImageStore, import_image

    hosts = hosts_dir(base, host)
    name, bridge, subnet = NETWORKS["podkit"]
    pk_base = base / "podkit"
    pk_conf = pk_base / "net.d"
    ctrd.write_conflist(pk_conf, ctrd.conflist(name, bridge, subnet, pk_base / "ipam"))
    podkit = PodkitSide(pk_base, pk_conf, hosts)
    store = ImageStore(podkit.root)
    for ref in (PAUSE, BUSYBOX):
        import_image(store, layouts[ref], ref)
    name, bridge, subnet = NETWORKS["containerd"]
    c_base = base / "containerd"
    c_conf = c_base / "net.d"
    ctrd.write_conflist(c_conf, ctrd.conflist(name, bridge, subnet, c_base / "ipam"))
    instance = ctrd.Containerd(c_base, ctrd.config_toml(
        c_base, sandbox_image=PAUSE, cni_conf_dir=c_conf, registry_config_dir=hosts))
    return podkit, ContainerdSide(c_base, instance)


def run(base: Path, rounds: int, scale: int, profile: Path | None) -> list[Row]:
    from podkit.image import ImageStore, import_image, push

    layouts = build_images(base / "images")
    rec = Recorder()
    with registry(base) as host:
        ref = f"{host}/{BIG}"
        src = ImageStore(base / "push")
        import_image(src, layouts[BIG], ref)
        push(src, ref)
        podkit, containerd = setup(base, host, layouts)
        instance = containerd.instance
        node = kubelet.KubeletNode(base / "kubelet", kubelet.host_facts())
        try:
            for server in (podkit, containerd):
                server.cpu = CpuGroup(f"pk-vs-{server.name}-{os.getpid()}")
            instance.cover_shim_dir()
            containerd.start()
            for name in (PAUSE, BUSYBOX):
                instance.import_archive(archive(layouts[name], base / "images" /
                                                f"{name.rsplit('/', 1)[1]}.tar"))
            podkit.start()
            sides: list[Side] = [podkit, containerd]
            for side in sides:
                side.connect()
            idle = {side.name: rss_mb(side.pid) for side in sides}
            floor = pull_floor(host, layouts[BIG], base / "floor")
            prof = Profiler(profile)
            with prof.phase(podkit, "rounds"):
                per_round(sides, rec, rounds, ref, floor, node)
            mem = at_scale(sides, rec, rounds, scale, prof, node)
            for name, value in idle.items():
                mem[name][RSS_IDLE] = value
            mem["floor"] = {RSS_IDLE: floor_rss(base, podkit.env())}
        except BaseException:
            print(f"containerd log:\n{instance.log_tail()}", file=sys.stderr)
            raise
        finally:
            for side in (podkit, containerd):
                remove_everything(side)
            podkit.cleanup(NETWORKS["podkit"][1])
            instance.cleanup(NETWORKS["containerd"][1], NETWORKS["containerd"][0])
            for server in (podkit, containerd):
                if server.cpu is not None:
                    server.cpu.remove()
            node.cleanup()
    print(f"helpers with {scale} pods: podkit {mem['podkit']['helpers']:.0f} conmon, "
          f"containerd {mem['containerd']['helpers']:.0f} containerd-shim-runc-v2")
    return build_rows(rec, mem, scale)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", help="write the rows to this file")
    parser.add_argument("--profile", type=Path,
                        help="py-spy collapsed stacks of the podkit server (per-round calls)")
    opts = parser.parse_args()
    if os.environ.get("PODKIT_ISOLATED") != "1" or os.geteuid() != 0:
        print("run as root under scripts/isolated", file=sys.stderr)
        return 2
    rounds = env_int("BENCH_ROUNDS", 20)
    scale = env_int("BENCH_SCALE_PODS", 100)
    ctrd.ensure_installed()
    version = subprocess.run(["containerd", "--version"], capture_output=True, text=True,
                             check=True).stdout.split()[2]
    base = Path(tempfile.mkdtemp(prefix="pk-vs-containerd-"))
    try:
        rows = run(base, rounds, scale, opts.profile)
    finally:
        ctrd.unmount_under(base)
        shutil.rmtree(base, ignore_errors=True)
    print(render(rows, f"podkit vs containerd {version} (CRI over gRPC, runc; {rounds} rounds, "
                       f"{scale} pods at scale; pods shaped as kubelet sends them unless "
                       "marked minimal)"))
    if opts.json:
        Path(opts.json).write_text(json.dumps({"rounds": rounds, "scale_pods": scale,
                                               "containerd": version,
                                               "rows": as_json(rows)}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
