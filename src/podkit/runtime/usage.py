"""A container's stats and process table the same way for runc and crun: stats from its cgroup
(``podkit.cgroups``, v1 or v2), ``top`` as host ``ps`` rows of the runtime's PIDs (what
``runc ps`` does itself; crun's ``ps`` prints PIDs only)."""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Callable, Sequence

from podkit import _proc, cgroups
from podkit.errors import PodkitError
from podkit.runtime.base import RuntimeState
from podkit.runtime.bundle import Bundle
from podkit.runtime.errors import OCIRuntimeError
from podkit.runtime.results import CpuStats, MemoryEntry, MemoryStats, Stats, TopResults, parse_top
from podkit.runtime.stray_cgroups import cgroups_path

__all__ = ["cgroup_stats", "host_top", "stats_of_cgroup"]

PS_TIMEOUT = 10.0


def stats_of_cgroup(sample: cgroups.CgroupStats) -> Stats:
    """``Stats`` (the ``events --stats`` shape) of a cgroup sample; ``Stats.cgroup`` keeps the
    whole sample. Unlimited limits are 0, as runc prints them."""
    out = Stats(cgroup=sample)
    if sample.cpu is not None:
        c = sample.cpu
        out.cpu = CpuStats(total=c.usage_ns, kernel=c.system_ns, user=c.user_ns,
                           throttling_periods=c.nr_periods, throttled_periods=c.nr_throttled,
                           throttled_time=c.throttled_ns)
    if sample.memory is not None:
        m = sample.memory
        out.memory = MemoryStats(
            cache=m.cache, raw=dict(m.stat),
            usage=MemoryEntry(limit=m.limit or 0, usage=m.usage, failcnt=m.oom_events))
    if sample.pids is not None:
        out.pids_current, out.pids_limit = sample.pids.current, sample.pids.limit or 0
    return out


def cgroup_stats(path: str | None, state: Callable[[], RuntimeState]) -> Stats:
    """Stats of the cgroup at ``path`` (a ``linux.cgroupsPath``); without one, of the path
    in the container's bundle, else of the cgroup its init process is in."""
    if path is None:
        st = state()
        with contextlib.suppress(PodkitError, OSError):
            path = cgroups_path(Bundle.load(st.bundle))
        if not path:
            return stats_of_cgroup(cgroups.stats_of_pid(st.pid))
    return stats_of_cgroup(cgroups.stats(path))


def host_top(id: str, pids: Sequence[int], ps_args: Sequence[str] = ()) -> TopResults:
    """Host ``ps`` (``ps_args``, default ``-ef``) rows of ``pids``, as ``runc ps`` prints
    them: the table must have a ``PID`` column."""
    ps = shutil.which("ps") or "ps"
    argv = [ps, *(ps_args or ["-ef"])]
    try:
        res = _proc.run(argv, env=dict(os.environ), timeout=PS_TIMEOUT)
    except (OSError, _proc.ProcTimeout) as e:
        raise OCIRuntimeError(f"top {id}: {' '.join(argv)}: {e}") from e
    if res.returncode != 0:
        raise OCIRuntimeError(f"top {id}: {' '.join(argv)} exited {res.returncode}: "
                              f"{bytes(res.stderr.data).decode(errors='replace').strip()}")
    table = parse_top(bytes(res.stdout.data).decode(errors="replace"))
    if "PID" not in table.headers:
        raise OCIRuntimeError(f"top {id}: {' '.join(argv)} printed no PID column")
    col, wanted = table.headers.index("PID"), {str(p) for p in pids}
    table.processes = [row for row in table.processes
                       if col < len(row) and row[col] in wanted]
    return table
