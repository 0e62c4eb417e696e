"""Benchmark podkit.cni: ADD and DEL of a pod's networks (bridge+portmap on eth0, loopback on lo).

Each round runs, in alternation so both see the same machine noise:

* podkit: ``CNI.add`` of both networks, then ``CNI.delete`` (with everything podkit adds: version
  pre-flight from its VERSION cache, attachment lock, atomic cache write, process groups);
* direct: the same plugin binaries executed with ``subprocess.run`` and the same stdin (built the
  same way, prevResult chained from the previous plugin's output) and the same environment.

The table shows medians and the ratio podkit / direct (target <= 1.10). Needs root and
``scripts/isolated`` (bridges and iptables rules live in the private network namespace).

Usage: ``scripts/isolated .venv/bin/python benchmarks/bench_cni.py [--rounds N] [--json out]``
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from podkit import cni, netns
from podkit.cni.invoke import build_request, plugin_env

CNI_BIN = "/usr/lib/cni"


def network(data_dir: str) -> cni.NetworkConfigList:
    doc = {"cniVersion": "1.0.0", "name": "pk-cni-bench", "plugins": [
        {"type": "bridge", "bridge": "pk-cni-brb", "isGateway": True, "ipMasq": True,
         "ipam": {"type": "host-local", "dataDir": data_dir,
                  "ranges": [[{"subnet": "10.88.230.0/24"}]],
                  "routes": [{"dst": "0.0.0.0/0"}]}},
        {"type": "portmap", "capabilities": {"portMappings": True}}]}
    return cni.NetworkConfigList.from_bytes(json.dumps(doc).encode())


LOOPBACK = cni.NetworkConfigList.from_bytes(
    b'{"cniVersion":"1.0.0","name":"pk-cni-bench-lo","plugins":[{"type":"loopback"}]}')


def direct_chain(conf: cni.NetworkConfigList, rt: cni.RuntimeConf, command: str,
                 prev: cni.AnyResult | None) -> cni.AnyResult | None:
    """Run the list's plugins straight from subprocess with libcni's stdin."""
    env = plugin_env(command, container_id=rt.container_id, netns=rt.netns, ifname=rt.ifname,
                     args=rt.args, path=[CNI_BIN])
    plugins = conf.plugins if command == "ADD" else tuple(reversed(conf.plugins))
    for plugin in plugins:
        stdin = build_request(plugin, conf.name, conf.cni_version, prev, rt.capability_args)
        proc = subprocess.run([os.path.join(CNI_BIN, plugin.type)], input=stdin, env=env,
                              capture_output=True, check=False)
        if proc.returncode != 0:
            raise RuntimeError(f"{plugin.type} {command} failed: {proc.stdout!r} "
                               f"{proc.stderr!r}")
        if command == "ADD":
            prev = cni.parse_result(proc.stdout, conf.cni_version)
    return prev


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--json", help="write the measurements to this file")
    opts = parser.parse_args()
    if os.environ.get("PODKIT_ISOLATED") != "1" or os.geteuid() != 0:
        print("run as root under scripts/isolated", file=sys.stderr)
        return 2
    tmp = tempfile.mkdtemp(prefix="pk-cni-bench-")
    conf = network(os.path.join(tmp, "ipam"))
    client = cni.CNI([CNI_BIN], cache_dir=os.path.join(tmp, "cache"))
    caps = cni.capability_args(port_mappings=[cni.PortMapping(18080, 80)])
    ns_a = netns.create("pk-cni-bench-a")
    ns_b = netns.create("pk-cni-bench-b")
    times: dict[str, list[float]] = {k: [] for k in ("podkit ADD", "direct ADD",
                                                      "podkit DEL", "direct DEL")}
    try:
        rt_a = cni.RuntimeConf("pk-cni-bench-a", ns_a.path, "eth0", (), caps)
        lo_a = cni.RuntimeConf("pk-cni-bench-a", ns_a.path, "lo")
        rt_b = cni.RuntimeConf("pk-cni-bench-b", ns_b.path, "eth0", (), caps)
        lo_b = cni.RuntimeConf("pk-cni-bench-b", ns_b.path, "lo")
        def podkit_add() -> None:
            client.add(conf, rt_a)
            client.add(LOOPBACK, lo_a)

        def podkit_del() -> None:
            client.delete(LOOPBACK, lo_a)
            client.delete(conf, rt_a)

        state: dict[str, cni.AnyResult | None] = {}

        def direct_add() -> None:
            state["eth0"] = direct_chain(conf, rt_b, "ADD", None)
            state["lo"] = direct_chain(LOOPBACK, lo_b, "ADD", None)

        def direct_del() -> None:
            direct_chain(LOOPBACK, lo_b, "DEL", state["lo"])
            direct_chain(conf, rt_b, "DEL", state["eth0"])

        for i in range(opts.rounds + 1):  # round 0 warms caches (VERSION, page cache)
            # alternate who goes first so neither side always runs right after the other's DEL
            order = [("podkit", podkit_add, podkit_del), ("direct", direct_add, direct_del)]
            if i % 2:
                order.reverse()
            for name, add, _ in order:
                t0 = time.perf_counter()
                add()
                if i:
                    times[f"{name} ADD"].append(time.perf_counter() - t0)
            for name, _, delete in order:
                t0 = time.perf_counter()
                delete()
                if i:
                    times[f"{name} DEL"].append(time.perf_counter() - t0)
    finally:
        netns.remove(ns_a.path)
        netns.remove(ns_b.path)
        subprocess.run(["ip", "link", "del", "pk-cni-brb"], capture_output=True, check=False)
        shutil.rmtree(tmp, ignore_errors=True)

    med = {k: statistics.median(v) * 1000 for k, v in times.items()}
    rows: list[dict[str, Any]] = []
    print(f"podkit.cni: bridge+portmap (eth0) + loopback (lo), {opts.rounds} rounds, medians")
    print(f"{'operation':<10} {'podkit ms':>10} {'direct ms':>10} {'ratio':>7} {'target':>7}")
    for op in ("ADD", "DEL"):
        ratio = med[f"podkit {op}"] / med[f"direct {op}"]
        rows.append({"operation": op, "podkit_ms": med[f"podkit {op}"],
                     "direct_ms": med[f"direct {op}"], "ratio": ratio, "target": 1.10})
        print(f"{op:<10} {med[f'podkit {op}']:>10.1f} {med[f'direct {op}']:>10.1f} "
              f"{ratio:>7.3f} {'<= 1.10':>7}")
    if opts.json:
        Path(opts.json).write_text(json.dumps({"rounds": opts.rounds, "results": rows},
                                              indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
