"""Recorded cgroup trees for the parsing tests: mount tables of a v1, a hybrid and a unified
host, and the files of one container cgroup on each version (numbers from real hosts)."""

from __future__ import annotations

from pathlib import Path

V1_MOUNTINFO = """\
23 1 0:22 / /sys rw,nosuid - sysfs sysfs rw
31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
32 31 0:29 / /sys/fs/cgroup/cpu,cpuacct rw,relatime - cgroup cgroup rw,cpu,cpuacct
35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
39 31 0:36 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids
40 31 0:37 / /sys/fs/cgroup/systemd rw,relatime - cgroup cgroup rw,xattr,name=systemd
"""

# this machine kind: controllers on separate mounts, pids not mounted, a cgroup2 beside them
HYBRID_MOUNTINFO = """\
31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu
33 31 0:30 / /sys/fs/cgroup/cpuacct rw,relatime - cgroup cgroup rw,cpuacct
35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
"""

UNIFIED_MOUNTINFO = """\
25 23 0:23 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime - cgroup2 cgroup2 rw,nsdelegate
"""

# a container's view: its own cgroup is the mount's root
NESTED_MOUNTINFO = """\
25 23 0:23 /kubepods/pod1/abc /sys/fs/cgroup ro,relatime - cgroup2 cgroup2 rw
"""

V2_FILES = {
    "cgroup.controllers": "cpu io memory pids\n",
    "cpu.stat": ("usage_usec 3330615\nuser_usec 3000000\nsystem_usec 330615\n"
                 "nr_periods 10\nnr_throttled 2\nthrottled_usec 1500\n"),
    "memory.current": "466944\n",
    "memory.stat": ("anon 131072\nfile 200704\ninactive_file 65536\nactive_file 135168\n"
                    "pgfault 1234\npgmajfault 5\n"),
    "memory.max": "max\n",
    "memory.events": "low 0\nhigh 0\nmax 3\noom 2\noom_kill 1\n",
    "pids.current": "1\n",
    "pids.max": "max\n",
    "cpu.pressure": ("some avg10=1.50 avg60=0.25 avg300=0.05 total=12345\n"
                     "full avg10=0.00 avg60=0.00 avg300=0.00 total=0\n"),
    "memory.pressure": ("some avg10=0.00 avg60=0.00 avg300=0.00 total=7\n"
                        "full avg10=0.00 avg60=0.00 avg300=0.00 total=3\n"),
    "io.pressure": ("some avg10=0.10 avg60=0.00 avg300=0.00 total=99\n"
                    "full avg10=0.00 avg60=0.00 avg300=0.00 total=42\n"),
}

V1_FILES = {
    "cpuacct": {"cpuacct.usage": "5000000000\n", "cpuacct.stat": "user 300\nsystem 100\n"},
    "cpu": {"cpu.stat": "nr_periods 4\nnr_throttled 1\nthrottled_time 2000000\n",
            "cpu.shares": "1024\n"},
    "memory": {
        "memory.usage_in_bytes": "10485760\n",
        "memory.stat": ("cache 4096\nrss 8192\ntotal_cache 2097152\ntotal_rss 4194304\n"
                        "total_inactive_file 1048576\ntotal_pgfault 321\n"
                        "total_pgmajfault 7\n"),
        "memory.limit_in_bytes": "9223372036854771712\n",
        "memory.oom_control": "oom_kill_disable 0\nunder_oom 0\noom_kill 2\n",
        "memory.failcnt": "4\n",
    },
    "pids": {"pids.current": "3\n", "pids.max": "50\n"},
}


def write(d: Path, files: dict[str, str]) -> Path:
    """Write ``files`` (name -> text) into directory ``d`` (created)."""
    d.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (d / name).write_text(text)
    return d


def v1_tree(root: Path, cgroup: str, controllers: dict[str, str]) -> None:
    """The files of ``cgroup`` under each v1 controller mount (``controllers``: controller
    -> mount directory name under ``root/sys/fs/cgroup``)."""
    for ctl, mount in controllers.items():
        write(root / "sys/fs/cgroup" / mount / cgroup.strip("/"), V1_FILES[ctl])
