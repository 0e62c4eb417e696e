"""Server soak: ``podkit cri serve`` holding pods under a stream of calls, then pod cycles.

The server runs as its own process on a temp root and socket (real runc/crun, conmon, the
bridge + host-local + loopback plugins, busybox images built like the CRI tests build theirs).
``pods`` pods (pause + 1 container) are held; a lister thread calls ListPodSandbox,
ListContainers, PodSandboxStatus and ContainerStatus for the whole run; after ``hold`` seconds
the main thread runs ``cycles`` pod cycles (run, create, start, stop, remove). The server's
open fds, threads and RSS are sampled every ``interval`` seconds.

Flat-line check: after warm-up (the pods up), the fds and threads at the end are at most the
baseline + ``slack`` and never more than the baseline + ``peak_slack``; the RSS grows at most
``rss_growth`` (printed); no call failed. Then every pod is removed and the server stopped:
nothing may stay (containers, conmon, netns, links, IPAM, cgroups, processes, mounts).

Run alone: ``scripts/isolated .venv/bin/python soak/server_soak.py --hold 120 --cycles 500``.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _census

REPO = Path(__file__).resolve().parents[1]
BRIDGE = "pksoak1"
SUBNET = "10.92.0.0/16"
BUSYBOX = "localhost/pk-soak/busybox:1"
PAUSE = "localhost/pk-soak/pause:1"
BUSYBOX_CONFIG = {"Env": ["PATH=/usr/sbin:/usr/bin:/sbin:/bin"], "Cmd": ["sleep", "3600"]}
PAUSE_CONFIG = {"Env": ["PATH=/bin"], "Entrypoint": ["sleep"], "Cmd": ["2147483647"]}
NETNS_PREFIX = "podkit-cri-"


@dataclass
class Sample:
    """One look at the server process."""

    t: float
    phase: str
    fds: int
    threads: int
    rss_kb: int


@dataclass
class SoakResult:
    """What the soak measured and what it judged."""

    samples: list[Sample] = field(default_factory=list)
    calls: int = 0
    failed: list[str] = field(default_factory=list)
    cycles: int = 0
    leftovers: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    baseline: Sample | None = None

    @property
    def ok(self) -> bool:
        return not (self.failed or self.leftovers or self.problems)


def sample(pid: int, phase: str, t0: float) -> Sample | None:
    """Open fds, threads and RSS of ``pid``; None once it is gone."""
    try:
        fds = len(os.listdir(f"/proc/{pid}/fd"))
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None
    fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
    return Sample(time.monotonic() - t0, phase, fds, int(fields["Threads"]),
                  int(fields["VmRSS"].split()[0]))


def build_images(work: Path, store_root: Path) -> None:
    """The busybox and pause images, built from the busybox rootfs and imported."""
    sys.path.insert(0, str(REPO / "tests"))
    from conftest import make_busybox_rootfs
    from image.imagebuild import Layer, build_image, write_layout
    from podkit.image import ImageStore, import_image

    rootfs = make_busybox_rootfs(work / "busybox")
    layer = Layer().tree(rootfs).bytes()
    store = ImageStore(store_root)
    for name, config in ((BUSYBOX, BUSYBOX_CONFIG), (PAUSE, PAUSE_CONFIG)):
        img = build_image([layer], ["gzip"], config)
        layout = write_layout(work / name.rsplit("/", 1)[1].replace(":", "-"),
                              [(img.descriptor, None)], img.blobs)
        import_image(store, layout, name)
    shutil.rmtree(rootfs, ignore_errors=True)


def write_network(net_dir: Path) -> Path:
    """The soak network's conflist; its IPAM lives under ``net_dir/ipam``."""
    from podkit.sandbox import default_network_config

    default_network_config(net_dir, name="pksoak-cri", bridge=BRIDGE, subnet=SUBNET)
    return net_dir / "net.d"


class Client:
    """gRPC stubs on the server's socket, counting calls and failures."""

    def __init__(self, socket_path: Path, result: SoakResult) -> None:
        import grpc

        from podkit.cri import api_pb2 as pb
        from podkit.cri import api_pb2_grpc

        self.pb = pb
        self.channel = grpc.insecure_channel(f"unix://{socket_path}")
        self.rt = api_pb2_grpc.RuntimeServiceStub(self.channel)
        self.result = result
        self.lock = threading.Lock()

    def call(self, name: str, request: Any, timeout: float = 120.0) -> Any:
        """One RPC; a failure is recorded (and None returned), never raised."""
        with self.lock:
            self.result.calls += 1
        try:
            return getattr(self.rt, name)(request, timeout=timeout)
        except Exception as exc:  # every failure counts, whatever its kind
            with self.lock:
                self.result.failed.append(f"{name}: {_describe(exc)}")
            return None

    def run_pod(self, cgroup_parent: str) -> tuple[str, str] | None:
        """A pod with one started busybox container: (pod id, container id)."""
        pb = self.pb
        cfg = pb.PodSandboxConfig(metadata=pb.PodSandboxMetadata(
            name=f"soak-{uuid.uuid4().hex[:8]}", uid=uuid.uuid4().hex, namespace="pk-soak"),
            hostname="soak")
        cfg.linux.cgroup_parent = cgroup_parent
        cfg.linux.security_context.namespace_options.network = pb.POD
        cfg.linux.security_context.namespace_options.pid = pb.CONTAINER
        r = self.call("RunPodSandbox", pb.RunPodSandboxRequest(config=cfg))
        if r is None:
            return None
        ctr = pb.ContainerConfig(metadata=pb.ContainerMetadata(name="app"),
                                 image=pb.ImageSpec(image=BUSYBOX))
        ctr.linux.security_context.namespace_options.pid = pb.CONTAINER
        c = self.call("CreateContainer", pb.CreateContainerRequest(
            pod_sandbox_id=r.pod_sandbox_id, config=ctr, sandbox_config=cfg))
        if c is None:
            return r.pod_sandbox_id, ""
        self.call("StartContainer", pb.StartContainerRequest(container_id=c.container_id))
        return r.pod_sandbox_id, c.container_id

    def remove_pod(self, pod_id: str) -> None:
        pb = self.pb
        self.call("StopPodSandbox", pb.StopPodSandboxRequest(pod_sandbox_id=pod_id))
        self.call("RemovePodSandbox", pb.RemovePodSandboxRequest(pod_sandbox_id=pod_id))

    def look(self, pods: list[tuple[str, str]]) -> None:
        """List pods and containers, and ask for every held one's status."""
        pb = self.pb
        self.call("ListPodSandbox", pb.ListPodSandboxRequest())
        self.call("ListContainers", pb.ListContainersRequest())
        for pod_id, ctr_id in pods:
            self.call("PodSandboxStatus", pb.PodSandboxStatusRequest(pod_sandbox_id=pod_id))
            if ctr_id:
                self.call("ContainerStatus", pb.ContainerStatusRequest(container_id=ctr_id))


def _describe(exc: Exception) -> str:
    """One line for a failed call: the gRPC code and details, else the exception."""
    code, details = getattr(exc, "code", None), getattr(exc, "details", None)
    if callable(code) and callable(details):
        return f"{code().name}: {str(details())[:300]}"
    return f"{type(exc).__name__}: {str(exc)[:300]}"


def start_server(root: Path, sock: Path, conf_dir: Path, runtime: str, log: Path,
                 ) -> subprocess.Popen[bytes]:
    """``podkit cri serve`` as its own process; returns once it answers on ``sock``."""
    argv = [sys.executable, "-c", "import sys; from podkit.cli import main; sys.exit(main())",
            "cri", "serve", "--socket", str(sock), "--root", str(root), "--cni-conf-dir",
            str(conf_dir), "--cni-bin-dir", "/usr/lib/cni", "--runtime", runtime,
            "--pause-image", PAUSE, "--streaming-address", ""]
    with open(log, "wb") as out:
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=out)
    deadline = time.monotonic() + 60
    while b"serving on" not in log.read_bytes():
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            proc.wait()
            raise RuntimeError(f"podkit cri serve did not start: {log.read_text()[-2000:]}")
        time.sleep(0.1)
    return proc


def stop_server(proc: subprocess.Popen[bytes], timeout: float = 60.0) -> None:
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def judge(result: SoakResult, slack: int, peak_slack: int, rss_growth: float) -> None:
    """The flat-line check over the samples taken after the baseline."""
    after = [s for s in result.samples if result.baseline and s.t >= result.baseline.t]
    base = result.baseline
    if base is None or len(after) < 2:
        result.problems.append("too few samples for a flat-line check")
        return
    end = min(after[-3:], key=lambda s: s.fds)
    for what, b, e, peak in (("fds", base.fds, end.fds, max(s.fds for s in after)),
                             ("threads", base.threads, end.threads,
                              max(s.threads for s in after))):
        if e > b + slack:
            result.problems.append(f"{what} grew from {b} to {e} (allowed +{slack})")
        if peak > b + peak_slack:
            result.problems.append(f"{what} peaked at {peak}, baseline {b} "
                                   f"(allowed +{peak_slack})")
    growth = (after[-1].rss_kb - base.rss_kb) / base.rss_kb
    if growth > rss_growth:
        result.problems.append(f"RSS grew {growth:+.0%} ({base.rss_kb} -> "
                               f"{after[-1].rss_kb} KiB; allowed {rss_growth:+.0%})")


def soak(*, pods: int = 20, hold: float = 120.0, cycles: int = 500, interval: float = 2.0,
         warmup: float = 5.0, runtime: str = "runc", slack: int = 8, peak_slack: int = 64,
         rss_growth: float = 0.30, log: Any = print) -> SoakResult:
    """The whole soak (inside scripts/isolated, as root)."""
    result = SoakResult()
    work = Path(tempfile.mkdtemp(prefix="pksoak-cri-"))
    root, sock = work / "root", work / "cri.sock"
    cgroup_parent = f"/pksoak-{work.name.rsplit('-', 1)[-1]}"
    subprocess.run(["ip", "link", "add", BRIDGE, "type", "bridge"], capture_output=True,
                   check=False)
    links_before = frozenset(_census._leaks.links())
    build_images(work, root)
    conf_dir = write_network(work / "net")
    server = start_server(root, sock, conf_dir, runtime, work / "server.log")
    t0 = time.monotonic()
    phase = ["warm-up"]
    done = threading.Event()
    held: list[tuple[str, str]] = []
    client = Client(sock, result)

    def sampler() -> None:
        while not done.is_set():
            s = sample(server.pid, phase[0], t0)
            if s is not None:
                result.samples.append(s)
            done.wait(interval)

    def lister() -> None:
        while not done.is_set():
            client.look(list(held))
            done.wait(0.05)

    threads = [threading.Thread(target=sampler, daemon=True),
               threading.Thread(target=lister, daemon=True)]
    for th in threads:
        th.start()
    try:
        for _ in range(pods):
            pod = client.run_pod(cgroup_parent)
            if pod is not None:
                held.append(pod)
        log(f"  server soak: {len(held)} pods held, pid {server.pid}")
        phase[0] = "hold"
        time.sleep(warmup)
        result.baseline = sample(server.pid, "baseline", t0)
        time.sleep(max(0.0, hold - warmup))
        phase[0] = "cycles"
        for i in range(cycles):
            pod = client.run_pod(cgroup_parent)
            if pod is not None:
                client.remove_pod(pod[0])
            result.cycles = i + 1
            if server.poll() is not None:
                result.problems.append(f"server exited with {server.returncode}")
                break
        last = sample(server.pid, "end", t0)
        if last is not None:
            result.samples.append(last)
    finally:
        done.set()
        for th in threads:
            th.join(30)
        for pod_id, _ in held:
            client.remove_pod(pod_id)
        client.channel.close()
        if server.poll() is None:
            stop_server(server)
        judge(result, slack, peak_slack, rss_growth)
        time.sleep(0.5)
        result.leftovers = server_census(root, work, cgroup_parent, runtime, links_before)
        if result.failed or result.problems:
            log("  server log tail: " + " | ".join(
                (work / "server.log").read_text(errors="replace").splitlines()[-5:]))
        force_clean(root, work, cgroup_parent, runtime, links_before)
        subprocess.run(["ip", "link", "del", BRIDGE], capture_output=True, check=False)
    return result


def server_census(root: Path, work: Path, cgroup_parent: str, runtime: str,
                  links_before: frozenset[str]) -> list[str]:
    """What the stopped server left of its pods (not its image store and records)."""
    state = root / "state" / "cri"
    items = sorted(_census._leaks.runtime_containers([str(state / runtime)]))
    items += sorted(n for n in _census._leaks.pinned_netns([_census.NETNS_DIR])
                    if os.path.basename(n.split(" ", 1)[1]).startswith(NETNS_PREFIX))
    items += _census._leaks.diff(links_before, _census._leaks.links())
    items += sorted(_census._leaks.ipam_reservations([str(work / "net" / "ipam")]))
    items += [f"conmon {pid}" for pid in sorted(_census.conmon_processes(root))]
    items += [f"process {pid}" for pid in sorted(_census.cgroup_processes(cgroup_parent))]
    items += [f"cgroup {d}" for d in _census.cgroup_dirs(cgroup_parent)]
    items += sorted(_census._leaks.mounts(Path("/proc/self/mountinfo").read_text(),
                                          (str(work),)))
    for kind in ("sandboxes", "containers"):
        items += [f"record {p}" for p in sorted((state / kind).glob("*.json"))]
    return items


def force_clean(root: Path, work: Path, cgroup_parent: str, runtime: str,
                links_before: frozenset[str]) -> None:
    """Remove whatever the soak left (by PID, path and name), then the work dir."""
    state_rt = root / "state" / "cri" / runtime
    if state_rt.is_dir():
        for entry in state_rt.iterdir():
            subprocess.run([runtime, "--root", str(state_rt), "delete", "-f", entry.name],
                           capture_output=True, timeout=30, env=_census.RUNTIME_ENV,
                           check=False)
    _census.force_clean(work, NETNS_PREFIX, cgroup_parent, runtime, links_before)
    _census.remove_cgroup_parent(cgroup_parent)
    shutil.rmtree(work, ignore_errors=True)


def report(result: SoakResult) -> list[str]:
    """Human lines: the samples summary and what was judged."""
    lines = []
    base = result.baseline
    if base is not None and result.samples:
        end = result.samples[-1]
        fds = [s.fds for s in result.samples if s.t >= base.t]
        lines.append(f"fds {base.fds} -> {end.fds} (max {max(fds)}), threads {base.threads} -> "
                     f"{end.threads}, RSS {base.rss_kb} -> {end.rss_kb} KiB "
                     f"({(end.rss_kb - base.rss_kb) / base.rss_kb:+.1%}), {result.calls} calls, "
                     f"{result.cycles} cycles, {len(result.samples)} samples")
    lines += result.problems
    lines += [f"failed call: {f}" for f in result.failed[:10]]
    if len(result.failed) > 10:
        lines.append(f"... {len(result.failed) - 10} more failed calls")
    lines += [f"left: {x}" for x in result.leftovers]
    return lines


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--pods", type=int, default=int(os.environ.get("SOAK_PODS", "20")))
    ap.add_argument("--hold", type=float, default=float(os.environ.get("SOAK_SECONDS", "120")))
    ap.add_argument("--cycles", type=int, default=int(os.environ.get("SOAK_CYCLES", "500")))
    ap.add_argument("--runtime", default="runc", choices=("runc", "crun"))
    args = ap.parse_args(argv)
    result = soak(pods=args.pods, hold=args.hold, cycles=args.cycles, runtime=args.runtime)
    for line in report(result):
        print("  " + line)
    return 0 if result.ok else 1


if __name__ == "__main__":
    sys.exit(main())
