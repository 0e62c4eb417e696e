"""``podkit pod stats [POD] [--watch [INTERVAL]]`` (CPU, memory, pids per container, from the
manager's container stats) and ``podkit pod top POD CTR`` (the runtime's ``ps -ef`` rows)."""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from podkit.errors import InvalidArgumentError, NotFoundError
from podkit.runtime import Runc
from podkit.sandbox import ContainerFilter, ContainerState, ContainerStats, SandboxManager

from .output import Column, add_output_options, emit, short_id
from .pod_time import parse_duration
from .podctx import add_common, find_container, find_pod, manager

__all__ = ["STATS_COLUMNS", "cmd_stats", "cmd_top", "cpu_percent", "register", "sample",
           "stats_records"]

_ONE_SHOT = 0.5  # seconds between the two samples of a stats without --watch
_DEFAULT_WATCH = "2s"

Sample = dict[str, tuple[str, str, str, ContainerStats]]
"""container ID -> (pod name, pod ID, container name, stats)."""


def _mib(value: Any) -> str:
    return f"{int(value) / 2**20:.1f}MiB"


STATS_COLUMNS = (
    Column("pod", "POD"), Column("container", "CONTAINER"),
    Column("container_id", "CONTAINER ID", short_id),
    Column("cpu_percent", "CPU %", lambda v: f"{v:.2f}"),
    Column("cpu_usage_core_nano_seconds", "CPU TIME", lambda v: f"{int(v) / 1e9:.3f}s"),
    Column("memory_working_set_bytes", "MEM", _mib),
    Column("process_count", "PIDS"),
)


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``pod stats`` and ``pod top``."""
    st = sub.add_parser("stats", help="CPU, memory and pids of running containers")
    st.add_argument("pod", nargs="?", default="", help="pod ID prefix or name (default: all)")
    st.add_argument("--watch", nargs="?", const=_DEFAULT_WATCH, default=None,
                    metavar="INTERVAL", help=f"print again every INTERVAL (default "
                    f"{_DEFAULT_WATCH}) until interrupted or nothing runs")
    add_output_options(st, quiet=False)
    add_common(st)
    st.set_defaults(func=cmd_stats)

    top = sub.add_parser("top", help="the processes of a container (ps -ef columns)")
    top.add_argument("pod", help="pod ID prefix or name")
    top.add_argument("container", help="container name")
    add_output_options(top, quiet=False)
    add_common(top)
    top.set_defaults(func=cmd_top)


def sample(mgr: SandboxManager, pod_ref: str) -> Sample:
    """The stats of every running container (of ``pod_ref`` when given)."""
    pods = [find_pod(mgr, pod_ref)] if pod_ref else mgr.list_sandboxes()
    out: Sample = {}
    for sb in pods:
        running = ContainerFilter(pod_sandbox_id=sb.id, state=ContainerState.CONTAINER_RUNNING)
        for c in mgr.list_containers(running):
            try:
                stats = mgr.container_stats(c.id)
            except (NotFoundError, OSError):  # exited between the list and the read
                continue
            out[c.id] = (sb.config.metadata.name, sb.id, c.config.metadata.name, stats)
    return out


def cpu_percent(before: ContainerStats | None, after: ContainerStats) -> float:
    """CPU use between two samples, in percent of one core (200: two cores busy)."""
    if before is None or after.timestamp <= before.timestamp:
        return 0.0
    used = after.cpu_usage_core_nano_seconds - before.cpu_usage_core_nano_seconds
    return max(0.0, used / (after.timestamp - before.timestamp) * 100)


def stats_records(before: Sample, after: Sample) -> list[dict[str, Any]]:
    """One record per container of ``after`` (stable JSON field names, see docs/cli-pod.md)."""
    records = []
    for cid, (pod, pod_id, name, s) in after.items():
        prev = before.get(cid)
        records.append({
            "pod": pod, "pod_id": pod_id, "container": name, "container_id": cid,
            "timestamp": s.timestamp,
            "cpu_usage_core_nano_seconds": s.cpu_usage_core_nano_seconds,
            "cpu_percent": round(cpu_percent(prev[3] if prev else None, s), 2),
            "memory_working_set_bytes": s.memory_working_set_bytes,
            "memory_usage_bytes": s.memory_usage_bytes,
            "memory_rss_bytes": s.memory_rss_bytes,
            "process_count": s.process_count,
        })
    return records


def _sample(args: argparse.Namespace) -> Sample:
    with manager(args) as mgr:
        return sample(mgr, args.pod)


def cmd_stats(args: argparse.Namespace, *, sleep: Callable[[float], object] = time.sleep) -> int:
    """One table (or JSON array) of the containers' numbers; with ``--watch`` one per interval,
    until interrupted or nothing of the selection runs any more."""
    interval = parse_duration(args.watch, "--watch") if args.watch is not None else _ONE_SHOT
    if interval <= 0:
        raise InvalidArgumentError(f"--watch {args.watch!r}: the interval must be > 0")
    before = _sample(args)
    while True:
        sleep(interval)
        after = _sample(args)
        _show(args, stats_records(before, after))
        if args.watch is None or not after:
            return 0
        before = after


def _show(args: argparse.Namespace, records: Sequence[Mapping[str, Any]]) -> None:
    emit(args, records, STATS_COLUMNS, id_key="container_id")
    if args.output == "table" and args.watch is not None:
        print(flush=True)


def cmd_top(args: argparse.Namespace) -> int:
    """The container's processes as the runtime's ``ps`` shows them."""
    with manager(args) as mgr:
        c = find_container(mgr, find_pod(mgr, args.pod), args.container)
        runtime = mgr.runtime
        if not isinstance(runtime, Runc):
            raise InvalidArgumentError(f"top needs runc or crun, not {runtime!r}")
        top = runtime.top(c.id)
    keys = [h.lower() for h in top.headers]
    records = [dict(zip(keys, row, strict=False)) for row in top.processes]
    emit(args, records, [Column(k, h) for k, h in zip(keys, top.headers, strict=True)],
         id_key="pid")
    return 0
