"""Benchmark podkit.oci: codec load+dump, validate, and generate() with 20 spec options.

Every row is compared with plain ``json.loads`` + ``json.dumps`` of the same ~4 KB
containerd-style ``config.json`` measured in the same run (interleaved, best of N):

* ``Spec.from_json`` + ``to_json`` (target: <= 8x plain json);
* ``Spec.from_json`` alone, ``to_json`` alone, ``validate``;
* ``generate(default_spec(), <20 options>)`` ("n/a" if the spec options are not available).

Usage: ``python benchmarks/bench_oci.py [--json out.json]`` (default: benchmarks/results/oci.json).
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from podkit import oci

CAPS = [
    "CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_FSETID", "CAP_FOWNER", "CAP_MKNOD", "CAP_NET_RAW",
    "CAP_SETGID", "CAP_SETUID", "CAP_SETFCAP", "CAP_SETPCAP", "CAP_NET_BIND_SERVICE",
    "CAP_SYS_CHROOT", "CAP_KILL", "CAP_AUDIT_WRITE",
]  # fmt: skip


def containerd_spec() -> dict[str, Any]:
    """A containerd/CRI-style config.json (no seccomp profile), about 4 KB of compact JSON."""
    return {
        "ociVersion": "1.1.0",
        "process": {
            "user": {"uid": 1000, "gid": 1000, "additionalGids": [1000, 10]},
            "args": ["/usr/local/bin/server", "--listen", ":8080", "--config", "/etc/app.yaml"],
            "env": [
                "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
                "HOSTNAME=web-0", "APP_ENV=production", "KUBERNETES_SERVICE_HOST=10.96.0.1",
                "KUBERNETES_SERVICE_PORT=443", "KUBERNETES_PORT=tcp://10.96.0.1:443",
                "WEB_SERVICE_HOST=10.96.12.7", "WEB_SERVICE_PORT=8080",
            ],
            "cwd": "/srv",
            "capabilities": {k: list(CAPS) for k in ("bounding", "effective", "permitted")},
            "rlimits": [{"type": "RLIMIT_NOFILE", "hard": 1048576, "soft": 1048576}],
            "noNewPrivileges": True,
            "apparmorProfile": "cri-containerd.apparmor.d",
            "oomScoreAdj": 936,
        },
        "root": {"path": "rootfs", "readonly": True},
        "hostname": "web-0",
        "mounts": [
            {"destination": "/proc", "type": "proc", "source": "proc",
             "options": ["nosuid", "noexec", "nodev"]},
            {"destination": "/dev", "type": "tmpfs", "source": "tmpfs",
             "options": ["nosuid", "strictatime", "mode=755", "size=65536k"]},
            {"destination": "/dev/pts", "type": "devpts", "source": "devpts",
             "options": ["nosuid", "noexec", "newinstance", "ptmxmode=0666", "mode=0620",
                         "gid=5"]},
            {"destination": "/dev/mqueue", "type": "mqueue", "source": "mqueue",
             "options": ["nosuid", "noexec", "nodev"]},
            {"destination": "/sys", "type": "sysfs", "source": "sysfs",
             "options": ["nosuid", "noexec", "nodev", "ro"]},
            {"destination": "/sys/fs/cgroup", "type": "cgroup", "source": "cgroup",
             "options": ["nosuid", "noexec", "nodev", "relatime", "ro"]},
            {"destination": "/etc/hosts", "type": "bind",
             "source": "/var/lib/containerd/sandboxes/5f0c/hosts",
             "options": ["rbind", "rprivate", "rw"]},
            {"destination": "/etc/resolv.conf", "type": "bind",
             "source": "/var/lib/containerd/sandboxes/5f0c/resolv.conf",
             "options": ["rbind", "rprivate", "rw"]},
            {"destination": "/dev/shm", "type": "bind",
             "source": "/run/containerd/sandboxes/5f0c/shm",
             "options": ["rbind", "rprivate", "rw"]},
        ],
        "annotations": {
            "io.kubernetes.cri.container-type": "container",
            "io.kubernetes.cri.container-name": "web",
            "io.kubernetes.cri.sandbox-id": "5f0c2b9e7d4a",
            "io.kubernetes.cri.sandbox-name": "web-0",
            "io.kubernetes.cri.sandbox-namespace": "default",
            "io.kubernetes.cri.image-name": "registry.example.com/web:1.2.3",
        },
        "linux": {
            "resources": {
                "devices": [{"allow": False, "access": "rwm"}],
                "memory": {"limit": 536870912, "swap": 536870912},
                "cpu": {"shares": 512, "quota": 50000, "period": 100000},
                "pids": {"limit": 4096},
                "hugepageLimits": [{"pageSize": "2MB", "limit": 0}],
                "unified": {"memory.oom.group": "1"},
            },
            "cgroupsPath": "kubepods-burstable-pod1234.slice:cri-containerd:5f0c2b9e7d4a",
            "namespaces": [
                {"type": "pid"}, {"type": "ipc", "path": "/proc/4242/ns/ipc"},
                {"type": "uts", "path": "/proc/4242/ns/uts"}, {"type": "mount"},
                {"type": "network", "path": "/var/run/netns/cni-5f0c2b9e"},
            ],
            "maskedPaths": [
                "/proc/acpi", "/proc/asound", "/proc/kcore", "/proc/keys", "/proc/latency_stats",
                "/proc/timer_list", "/proc/timer_stats", "/proc/sched_debug", "/sys/firmware",
                "/sys/devices/virtual/powercap", "/proc/scsi",
            ],
            "readonlyPaths": ["/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys",
                              "/proc/sysrq-trigger"],
            "sysctl": {"net.ipv4.ip_unprivileged_port_start": "0"},
        },
    }  # fmt: skip


def best_pair(a: Callable[[], Any], b: Callable[[], Any], repeat: int, inner: int
              ) -> tuple[float, float]:
    """Best per-call time of ``a`` and ``b`` (``inner`` calls per sample), interleaved."""
    ta, tb = [], []
    for _ in range(repeat):
        for fn, times in ((a, ta), (b, tb)):
            t0 = time.perf_counter()
            for _ in range(inner):
                fn()
            times.append((time.perf_counter() - t0) / inner)
    return min(ta), min(tb)


def twenty_options() -> list[Any] | None:
    """20 generic spec options (containerd pkg/oci style), or None if opts are not available."""
    names = ("generate", "default_spec", "with_process_args", "with_env", "with_hostname",
             "with_process_cwd", "with_uid_gid", "with_added_capabilities",
             "with_dropped_capabilities", "with_rootfs_readonly", "with_memory_limit",
             "with_cpu_shares", "with_cpu_cfs", "with_pids_limit", "with_annotations",
             "with_sysctls", "with_rlimit", "with_oom_score_adj", "with_no_new_privileges",
             "with_cgroup", "with_masked_paths", "with_mounts", "with_linux_namespace")
    if not all(hasattr(oci, n) for n in names):
        return None
    return [
        oci.with_process_args("/usr/local/bin/server", "--listen", ":8080"),
        oci.with_env({"APP_ENV": "production", "HOSTNAME": "web-0"}),
        oci.with_hostname("web-0"),
        oci.with_process_cwd("/srv"),
        oci.with_uid_gid(1000, 1000),
        oci.with_added_capabilities(["CAP_NET_ADMIN"]),
        oci.with_dropped_capabilities(["CAP_MKNOD"]),
        oci.with_rootfs_readonly(),
        oci.with_memory_limit(512 << 20),
        oci.with_cpu_shares(512),
        oci.with_cpu_cfs(50000, 100000),
        oci.with_pids_limit(4096),
        oci.with_annotations({"io.kubernetes.cri.container-name": "web"}),
        oci.with_sysctls({"net.ipv4.ip_unprivileged_port_start": "0"}),
        oci.with_rlimit("RLIMIT_NOFILE", 1048576, 1048576),
        oci.with_oom_score_adj(936),
        oci.with_no_new_privileges(),
        oci.with_cgroup("/kubepods/burstable/pod1234/5f0c"),
        oci.with_masked_paths(["/proc/kcore", "/proc/keys"]),
        oci.with_mounts([oci.Mount(destination="/etc/hosts", type="bind",
                                   source="/var/lib/podkit/hosts", options=["rbind", "ro"])]),
    ]


def run(repeat: int) -> dict[str, Any]:
    doc = containerd_spec()
    text = json.dumps(doc)
    spec = oci.Spec.from_json(text)
    assert spec.to_dict() == doc and oci.validate(spec) == []

    def plain() -> None:
        json.dumps(json.loads(text))

    def load_dump() -> None:
        oci.Spec.from_json(text).to_json()

    rows: list[dict[str, Any]] = []

    def row(name: str, fn: Callable[[], Any], target: str = "", inner: int = 200) -> None:
        t, raw = best_pair(fn, plain, repeat, inner)
        rows.append({"op": name, "seconds": t, "raw_seconds": raw, "ratio": t / raw,
                     "target": target})

    row("Spec.from_json + to_json", load_dump, "<= 8x")
    row("Spec.from_json", lambda: oci.Spec.from_json(text))
    row("Spec.to_json", spec.to_json)
    row("validate(spec)", lambda: oci.validate(spec))
    opts = twenty_options()
    if opts is None:
        rows.append({"op": "generate(default_spec(), 20 opts)", "seconds": None,
                     "raw_seconds": None, "ratio": None, "target": "n/a"})
    else:
        generated = oci.generate(oci.default_spec(), *opts)
        assert oci.validate(generated) == [], oci.validate(generated)
        row("generate(default_spec(), 20 opts)",
            lambda: oci.generate(oci.default_spec(), *opts), inner=50)
    return {"document_bytes": len(text), "python": platform.python_version(), "rows": rows}


def print_table(result: dict[str, Any]) -> None:
    print(f"podkit.oci benchmark: {result['document_bytes']} byte containerd-style config.json, "
          f"Python {result['python']}; raw = json.loads + json.dumps of the same document")
    print(f"{'operation':<36} {'podkit':>11} {'raw':>11} {'ratio':>8}  target")
    for r in result["rows"]:
        if r["seconds"] is None:
            print(f"{r['op']:<36} {'n/a':>11} {'n/a':>11} {'n/a':>8}  {r['target']}")
            continue
        print(f"{r['op']:<36} {r['seconds'] * 1e6:>9.1f}us {r['raw_seconds'] * 1e6:>9.1f}us "
              f"{r['ratio']:>7.1f}x  {r['target']}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", type=Path,
                        default=Path(__file__).resolve().parent / "results" / "oci.json")
    parser.add_argument("--repeat", type=int, default=15)
    args = parser.parse_args(argv)
    result = run(args.repeat)
    print_table(result)
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
