"""CPU accounting for bench_vs_containerd: each server in a cgroup of its own (cgroup v1
``cpuacct``, or cgroup v2 ``cpu.stat``), so the server and every helper it starts (conmon or
the shims, runc, CNI plugins, iptables) are counted together, and the server process's own
share from ``/proc/<pid>/stat``. The parsers are pure (unit tested in
tests/test_bench_vs_containerd.py); :class:`CpuGroup` makes, reads and removes the cgroup."""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Sequence
from pathlib import Path

__all__ = [
    "CpuGroup",
    "busy_fraction",
    "cpu_stat_seconds",
    "enter_argv",
    "proc_stat_busy",
    "process_seconds",
]

TICKS = os.sysconf("SC_CLK_TCK")


def cpu_stat_seconds(text: str) -> float:
    """``usage_usec`` of a cgroup v2 ``cpu.stat``, in seconds."""
    for line in text.splitlines():
        key, _, value = line.partition(" ")
        if key == "usage_usec":
            return int(value) / 1e6
    raise ValueError("cpu.stat: no usage_usec line")


def process_seconds(stat: str, ticks: int = TICKS) -> float:
    """utime + stime of a ``/proc/<pid>/stat`` line (every thread of the process, not its
    children), in seconds. The command name may hold spaces and parentheses."""
    fields = stat[stat.rindex(")") + 2:].split()
    return (int(fields[11]) + int(fields[12])) / ticks  # fields 14 and 15 of proc(5)


def proc_stat_busy(text: str) -> tuple[int, int]:
    """(busy, total) jiffies of the ``cpu`` line of ``/proc/stat`` (idle and iowait idle)."""
    for line in text.splitlines():
        parts = line.split()
        if parts and parts[0] == "cpu":
            values = [int(v) for v in parts[1:9]]  # user .. steal; guest is inside user
            idle = values[3] + values[4]
            return sum(values) - idle, sum(values)
    raise ValueError("/proc/stat: no cpu line")


def busy_fraction(before: tuple[int, int], after: tuple[int, int]) -> float:
    """The machine's busy share of all CPUs between two :func:`proc_stat_busy` readings."""
    total = after[1] - before[1]
    return (after[0] - before[0]) / total if total > 0 else 0.0


def enter_argv(procs: Path, argv: Sequence[str]) -> list[str]:
    """``argv`` run by a shell that first moves itself into the cgroup whose ``cgroup.procs``
    is ``procs`` (the same PID then execs the program: it and its children are counted)."""
    return ["sh", "-c", 'echo $$ > "$0" && exec "$@"', str(procs), *argv]


class CpuGroup:
    """A cgroup under this process's own (``cpuacct`` on v1, the unified one on v2) whose CPU
    time is read in seconds; removed by :meth:`remove` once its processes are gone."""

    def __init__(self, name: str) -> None:
        from podkit import cgroups

        here = cgroups.locate_pid(os.getpid())
        unified = here.mode is cgroups.Mode.UNIFIED
        parent = here.controller_dir("cpu" if unified else "cpuacct")
        if parent is None:
            raise RuntimeError("no cpuacct (cgroup v1) or cgroup2 hierarchy to count CPU in")
        self.v2 = unified
        self.path = parent / name
        self.path.mkdir(exist_ok=True)
        self.parent = parent

    @property
    def procs(self) -> Path:
        return self.path / "cgroup.procs"

    def seconds(self) -> float:
        """CPU time of everything that ran in the group (those gone included)."""
        if self.v2:
            return cpu_stat_seconds((self.path / "cpu.stat").read_text())
        return int((self.path / "cpuacct.usage").read_text()) / 1e9

    def remove(self) -> None:
        """Move what is left to the parent and remove the group (tries for 5 s)."""
        for _ in range(50):
            with contextlib.suppress(OSError):
                for pid in self.procs.read_text().split():
                    with contextlib.suppress(OSError):
                        (self.parent / "cgroup.procs").write_text(pid)
                self.path.rmdir()
            if not self.path.exists():
                return
            time.sleep(0.1)
