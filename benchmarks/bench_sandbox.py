"""Benchmark podkit.sandbox: SandboxManager vs. the raw operations it is made of.

Three operations, each against a floor measured in the same run, interleaved:

* run_sandbox: podkit = ``SandboxManager.run_sandbox`` (records, netns, CNI through
  ``cni.Networks``, pod files + shm tmpfs, pause under the supervisor); raw = ``ip netns add`` +
  the same CNI plugins (loopback, bridge+host-local, portmap) executed directly + ``runc create``
  / ``runc start`` of the same pause bundle.
* create+start: podkit = ``create_container`` + ``start_container``; raw = write the same
  config.json + ``runc create`` + ``runc start``.
* stop+remove: podkit = ``remove_sandbox`` (container, pause, CNI DEL, netns, files, records);
  raw = (``runc kill KILL`` + pidfd wait + ``runc delete``) x2 + the plugins' DEL +
  ``ip netns del``.

podkit runs with both supervisors (conmon, the default, which raw runc does not pay for; and
in-process). Run: ``scripts/isolated .venv/bin/python benchmarks/bench_sandbox.py``.

Same work on both sides: both write a container bundle's config.json durably (temp file,
fsync, rename, directory fsync) on the same filesystem, as the manager must (its records point
at the bundle), and the pause bundle's without fsync (nothing needs it after a power loss).
The manager's state dir (records, conmon and runc state, CNI cache) is on a tmpfs mounted for
the run, as containerd keeps its state in /run; ``--state-on-disk`` keeps it on the
work directory's filesystem instead (then every record fsync is a real one).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import select
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from podkit.container import ContainerConfig, ContainerMetadata
from podkit.runtime import InProcessSupervisor, Runc
from podkit.sandbox import (
    PauseConfig,
    PodSandboxMetadata,
    SandboxConfig,
    SandboxManager,
    default_networks,
)

CNI_PATH = "/usr/lib/cni"
ENV = {"PATH": os.environ.get("PATH", "/usr/sbin:/usr/bin:/sbin:/bin")}
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from containerd.floors import write_durably  # noqa: E402  (benchmarks/ is sys.path[0])


def make_rootfs(dest: Path) -> Path:
    from conftest import make_busybox_rootfs  # type: ignore[import-not-found]

    make_busybox_rootfs(dest)
    return dest


class Raw:
    """The floor: the same parts driven by hand, no records, no checks."""

    def __init__(self, work: Path, runc_root: Path, conflist: Path, pause_spec: dict[str, Any],
                 ctr_spec: dict[str, Any]) -> None:
        self.work = work
        self.root = runc_root  # next to the manager's runc root (same filesystem)
        self.conf = json.loads(conflist.read_text())
        self.pause_spec = pause_spec
        self.ctr_spec = ctr_spec
        self.null = open(os.devnull, "r+b")  # noqa: SIM115 - kept for the run
        self.results: dict[str, Any] = {}  # container ID -> last CNI result
        self.pids: dict[str, int] = {}

    def _runc(self, *args: str) -> None:
        subprocess.run(["runc", "--root", str(self.root), *args], stdin=self.null,
                       stdout=self.null, stderr=self.null, check=True, env=ENV)

    def _plugin(self, command: str, plugin: dict[str, Any], name: str, version: str,
                cid: str, netns: str, ifname: str, prev: Any = None) -> Any:
        conf = {**plugin, "name": name, "cniVersion": version}
        if prev is not None:
            conf["prevResult"] = prev
        env = {**ENV, "CNI_COMMAND": command, "CNI_CONTAINERID": cid, "CNI_NETNS": netns,
               "CNI_IFNAME": ifname, "CNI_PATH": CNI_PATH, "CNI_ARGS": "IgnoreUnknown=1"}
        out = subprocess.run([f"{CNI_PATH}/{plugin['type']}"], input=json.dumps(conf).encode(),
                             capture_output=True, env=env, check=True).stdout
        return json.loads(out) if out.strip() else None

    def _chain(self, command: str, cid: str, netns: str) -> None:
        lo = {"type": "loopback"}
        plugins = self.conf["plugins"]
        if command == "ADD":
            self._plugin("ADD", lo, "cni-loopback", "0.3.1", cid, netns, "lo")
            prev = None
            for p in plugins:
                prev = self._plugin("ADD", p, self.conf["name"], self.conf["cniVersion"], cid,
                                    netns, "eth0", prev) or prev
            self.results[cid] = prev
        else:
            prev = self.results.pop(cid)
            for p in reversed(plugins):
                self._plugin("DEL", p, self.conf["name"], self.conf["cniVersion"], cid, netns,
                             "eth0", prev)
            self._plugin("DEL", lo, "cni-loopback", "0.3.1", cid, netns, "lo")


    def run_sandbox(self, id: str) -> str:
        subprocess.run(["ip", "netns", "add", id], check=True)
        netns = f"/run/netns/{id}"
        self._chain("ADD", id, netns)
        bundle = self.work / "raw" / id
        bundle.mkdir(parents=True)
        spec = json.loads(json.dumps(self.pause_spec))
        for ns in spec["linux"]["namespaces"]:
            if ns["type"] == "network":
                ns["path"] = netns
        spec["linux"]["cgroupsPath"] = f"/podkit/{id}"
        (bundle / "config.json").write_text(json.dumps(spec))  # the pause: no fsync
        self._create_start(bundle, id)
        return netns

    def create_start(self, id: str, pause_pid: int) -> None:
        bundle = self.work / "raw" / id
        bundle.mkdir(parents=True)
        spec = json.loads(json.dumps(self.ctr_spec))
        for ns in spec["linux"]["namespaces"]:
            if ns["type"] in ("network", "ipc", "uts", "pid"):
                ns["path"] = f"/proc/{pause_pid}/ns/{ns['type'].replace('network', 'net')}"
        spec["linux"]["cgroupsPath"] = f"/podkit/{id}"
        write_durably(bundle / "config.json", json.dumps(spec))
        self._create_start(bundle, id)

    def _create_start(self, bundle: Path, id: str) -> None:
        pid_file = bundle / "pid"
        self._runc("create", "--bundle", str(bundle), "--pid-file", str(pid_file), id)
        self.pids[id] = int(pid_file.read_text())
        self._runc("start", id)

    def _kill_delete(self, id: str) -> None:
        pid = self.pids.pop(id)
        fd = os.pidfd_open(pid)
        try:
            self._runc("kill", id, "KILL")
            select.select([fd], [], [], 30)
        finally:
            os.close(fd)
        with contextlib.suppress(ChildProcessError):  # we are its subreaper: reap it
            os.waitpid(pid, 0)
        self._runc("delete", id)

    def stop_remove(self, sandbox: str, ctr: str) -> None:
        self._kill_delete(ctr)
        self._kill_delete(sandbox)
        self._chain("DEL", sandbox, f"/run/netns/{sandbox}")
        subprocess.run(["ip", "netns", "del", sandbox], check=True)

    def pause_pid(self, id: str) -> int:
        return self.pids[id]


OPS = ("run_sandbox", "create+start", "stop+remove")
TARGET = 1.15  # each operation against its raw floor (issue 6)


def make_raw(probe: SandboxManager, work: Path, run: Path, ctr_cfg: ContainerConfig) -> Raw:
    """The floor, on the very specs podkit generated for a probe pod (same bundle content)."""
    sb = probe.run_sandbox(SandboxConfig(metadata=PodSandboxMetadata(name="probe")))
    cid = probe.create_container(sb.id, ctr_cfg)
    probe_dir = str(probe.root_dir / "sandboxes" / sb.id)
    raw_files = work / "raw-files"
    raw_files.mkdir()
    for name in ("hostname", "hosts", "resolv.conf"):
        (raw_files / name).write_text("\n")
    (raw_files / "shm").mkdir()

    def spec_of(path: Path) -> dict[str, Any]:
        # the pod files of the raw pods live in raw_files (without a tmpfs)
        return dict(json.loads(path.read_text().replace(probe_dir, str(raw_files))))

    pause_spec = spec_of(Path(probe_dir) / "bundle" / "config.json")
    ctr_spec = spec_of(probe.root_dir / "containers" / cid / "bundle" / "config.json")
    probe.remove_sandbox(sb.id)
    return Raw(work, run / "raw-runc", run / "conmon" / "net.d" / "podkit.conflist", pause_spec,
               ctr_spec)


def _run_op(op: str, variant: str, round_: str, raw: Raw, managers: dict[str, SandboxManager],
            ctr_cfg: ContainerConfig, pods: dict[str, str]) -> None:
    """One operation of one variant in round ``round_`` (``pods``: its sandbox IDs)."""
    raw_sb, raw_ctr = f"pk-pod-raw-{round_}", f"pk-pod-rawc-{round_}"
    if variant == "raw":
        if op == "run_sandbox":
            raw.run_sandbox(raw_sb)
        elif op == "create+start":
            raw.create_start(raw_ctr, raw.pause_pid(raw_sb))
        else:
            raw.stop_remove(raw_sb, raw_ctr)
        return
    mgr = managers[variant]
    if op == "run_sandbox":
        cfg = SandboxConfig(metadata=PodSandboxMetadata(name=f"b-{variant}-{round_}"))
        pods[variant] = mgr.run_sandbox(cfg).id
    elif op == "create+start":
        mgr.start_container(mgr.create_container(pods[variant], ctr_cfg))
    else:
        mgr.remove_sandbox(pods[variant])


def measure(n: int, managers: dict[str, SandboxManager], raw: Raw, ctr_cfg: ContainerConfig
            ) -> dict[str, dict[str, list[float]]]:
    """n pods per variant. Each operation runs for every variant back to back (raw included),
    in an order rotated every round, so load changes on this shared host hit all alike."""
    variants = ["raw", *managers]
    times: dict[str, dict[str, list[float]]] = {v: {o: [] for o in OPS} for v in variants}
    tag = uuid.uuid4().hex[:8]
    for i in range(n):
        order = variants[i % len(variants):] + variants[:i % len(variants)]
        pods: dict[str, str] = {}
        for op in OPS:
            for variant in order:
                t0 = time.perf_counter()
                _run_op(op, variant, f"{tag}-{i}", raw, managers, ctr_cfg, pods)
                times[variant][op].append(time.perf_counter() - t0)
    return times


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    # medians of 30 (about 20 s): with 8, runs on a shared 2-core host swung by 15% and more
    parser.add_argument("-n", type=int, default=30, help="pods per variant")
    parser.add_argument("--state-on-disk", action="store_true",
                        help="keep the manager's state dir on disk, not on a tmpfs")
    args = parser.parse_args()
    if os.environ.get("PODKIT_ISOLATED") != "1" or os.geteuid() != 0:
        print("run inside scripts/isolated as root", file=sys.stderr)
        return 1
    work = Path(tempfile.mkdtemp(prefix="podkit-bench-sandbox-"))
    # state on tmpfs, as containerd keeps its state dir in /run (a tmpfs on most hosts, not on
    # this one): mounted here, in scripts/isolated's private mount namespace
    run = Path(tempfile.mkdtemp(prefix="pk-pod-bench-", dir=work if args.state_on_disk
                                else "/run"))
    if not args.state_on_disk:
        subprocess.run(["mount", "-t", "tmpfs", "-o", "mode=700", "pk-pod-bench", str(run)],
                       check=True)
    managers: dict[str, SandboxManager] = {}
    raw: Raw | None = None
    ctr_cfg = ContainerConfig(metadata=ContainerMetadata(name="c"), image=str(work / "rootfs"),
                              command=["sleep", "600"])
    try:
        rootfs = make_rootfs(work / "rootfs")
        for variant in ("conmon", "in-process"):
            state = run / variant
            runc = Runc(root=state / "runc")
            sup = InProcessSupervisor(runc) if variant == "in-process" else None
            managers[variant] = SandboxManager(
                work / variant / "root", state, runc, default_networks(state, bridge="pkbench0"),
                pause=PauseConfig(rootfs=str(rootfs)), supervisor=sup, netns_prefix="pk-pod-b-")
        raw = make_raw(managers["conmon"], work, run, ctr_cfg)
        times = measure(args.n, managers, raw, ctr_cfg)
    finally:
        for mgr in managers.values():
            mgr.remove_all()
            mgr.close()
        for cid in list(raw.pids) if raw is not None else []:  # left by a failed iteration
            subprocess.run(["runc", "--root", str(run / "raw-runc"), "delete", "--force", cid],
                           check=False, capture_output=True)
        subprocess.run(["ip", "link", "del", "pkbench0"], check=False, capture_output=True)
        if not args.state_on_disk:
            subprocess.run(["umount", "-l", str(run)], check=False)
        subprocess.run(["rm", "-rf", str(work), str(run)], check=False)
    where = "on disk" if args.state_on_disk else "on tmpfs"
    print(f"SandboxManager vs raw parts, median of {args.n} pods (ms), state dir {where}; "
          "ratio = podkit / raw")
    print(f"{'operation':<14}{'raw':>9}{'conmon':>9}{'ratio':>7}{'in-proc':>9}{'ratio':>7}"
          f"  target")
    for op in OPS:
        raw_ms = statistics.median(times["raw"][op]) * 1000
        row = f"{op:<14}{raw_ms:>9.1f}"
        missed = []
        for variant in managers:
            ms = statistics.median(times[variant][op]) * 1000
            row += f"{ms:>9.1f}{ms / raw_ms:>7.2f}"
            if ms / raw_ms > TARGET:
                missed.append(variant)
        print(row + f"  <= {TARGET}" + (f"  missed ({', '.join(missed)})" if missed else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
