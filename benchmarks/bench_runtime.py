"""Benchmark podkit.runtime: a container lifecycle through ``Runc`` vs. the bare CLI.

One cycle = create + start + kill(SIGKILL) + wait for the init's exit + delete of a busybox
``sleep`` container. "podkit" runs it through ``Runc`` (typed errors, per-call JSON log, monitor
reaping); "direct" runs the same commands with ``subprocess.call`` (no timeout, stdio
to /dev/null, ``--log`` JSON file, ``--pid-file``), waits for the init with a pidfd, in-process,
on the same bundle, interleaved, so both see the same machine load. Target: podkit/direct <= 1.10.

crun needs a private mount namespace with the cgroup2 ``unified`` mount hidden on this host:
run it as ``scripts/isolated .venv/bin/python benchmarks/bench_runtime.py [--json out.json]``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import select
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from podkit.oci.defaults import runc_spec
from podkit.runtime import Bundle, Runc
from podkit.runtime.monitor import default_monitor

N = 60
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))


def make_rootfs(dest: Path) -> Path:
    from conftest import make_busybox_rootfs  # type: ignore[import-not-found]

    make_busybox_rootfs(dest)
    return dest


def bundle_for(tmp: Path, rootfs: Path, cgroup: str) -> Bundle:
    spec = runc_spec()
    assert spec.process is not None and spec.linux is not None
    spec.process.terminal = False
    spec.process.args = ["sleep", "1000"]
    spec.linux.cgroups_path = f"/{cgroup}"
    return Bundle.create(tmp / "bundle", spec, rootfs=rootfs)


def podkit_cycle(rt: Runc, cid: str, bundle: Bundle) -> float:
    t0 = time.perf_counter()
    rt.create(cid, bundle)
    rt.start(cid)
    rt.kill(cid, signal.SIGKILL)
    rt.wait(cid, 30)
    rt.delete(cid)
    return time.perf_counter() - t0


def direct_cycle(binary: str, root: Path, tmp: Path, cid: str, bundle: Bundle) -> float:
    glob_args = [binary, "--root", str(root), "--log", str(tmp / "direct-log.json"),
                 "--log-format", "json"]
    pid_file = tmp / "direct.pid"
    env = {"PATH": os.environ.get("PATH", "/usr/sbin:/usr/bin:/sbin:/bin")}
    with open(os.devnull, "r+b") as null:
        def call(*args: str) -> None:
            rc = subprocess.call([*glob_args, *args], stdin=null, stdout=null, stderr=null,
                                 env=env)
            if rc != 0:
                raise SystemExit(f"{binary} {' '.join(args)} failed: rc {rc}")

        t0 = time.perf_counter()
        call("create", "--bundle", str(bundle.path), "--pid-file", str(pid_file), cid)
        pid = int(pid_file.read_text())
        fd = os.pidfd_open(pid)
        call("start", cid)
        call("kill", cid, "9")
        poller = select.poll()
        poller.register(fd, select.POLLIN)
        poller.poll(30_000)
        os.close(fd)
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, 0)  # the monitor may have reaped this orphan already
        call("delete", cid)
        return time.perf_counter() - t0


def bench(binary: str, tmp: Path, rootfs: Path) -> dict[str, Any]:
    root = tmp / f"state-{binary}"
    cid = f"pk-rt-bench-{binary}-{os.getpid()}"
    (tmp / binary).mkdir()
    bundle = bundle_for(tmp / binary, rootfs, cid)
    rt = Runc(binary, root=root)
    # warm-up (features/version lookups, page cache) for both paths
    podkit_cycle(rt, cid, bundle)
    direct_cycle(binary, root, tmp, cid, bundle)
    pk: list[float] = []
    direct: list[float] = []
    for i in range(N):
        if i % 2 == 0:
            pk.append(podkit_cycle(rt, cid, bundle))
            direct.append(direct_cycle(binary, root, tmp, cid, bundle))
        else:
            direct.append(direct_cycle(binary, root, tmp, cid, bundle))
            pk.append(podkit_cycle(rt, cid, bundle))
    p, d = statistics.median(pk), statistics.median(direct)
    return {"runtime": binary, "n": N, "podkit_ms": p * 1e3, "direct_ms": d * 1e3,
            "podkit_min_ms": min(pk) * 1e3, "direct_min_ms": min(direct) * 1e3,
            "ratio": p / d, "ratio_min": min(pk) / min(direct)}


def crun_usable() -> bool:
    """False when a cgroup2 ``unified`` mount is visible (crun 1.8.1 refuses hybrid hosts)."""
    fstype = ""
    with open("/proc/self/mountinfo") as f:
        for line in f:
            fields = line.split()
            if fields[4] == "/sys/fs/cgroup/unified":
                fstype = fields[fields.index("-") + 1]  # the last (topmost) mount wins
    return fstype != "cgroup2"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", help="write the results here")
    args = parser.parse_args()
    default_monitor().start()
    rows: list[dict[str, Any]] = []
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="pk-rt-bench-") as d:
        tmp = Path(d)
        rootfs = make_rootfs(tmp / "rootfs")
        for binary in ("runc", "crun"):
            if shutil.which(binary) is None:
                print(f"{binary}: not installed, skipped", file=sys.stderr)
                continue
            if binary == "crun" and not crun_usable():
                print("crun: cgroup2 'unified' is mounted (hybrid host); run under "
                      "scripts/isolated to include crun", file=sys.stderr)
                continue
            rows.append(bench(binary, tmp, rootfs))
    print(f"\ncreate+start+kill+wait+delete of a busybox container, median of {N} "
          f"(total {time.perf_counter() - started:.1f} s)\n")
    print("| runtime | podkit ms | direct ms | podkit min | direct min | ratio | ratio of mins |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['runtime']} | {r['podkit_ms']:.1f} | {r['direct_ms']:.1f} | "
              f"{r['podkit_min_ms']:.1f} | {r['direct_min_ms']:.1f} | {r['ratio']:.2f} | "
              f"{r['ratio_min']:.2f} |")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
