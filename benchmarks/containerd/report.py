"""The side-by-side table of bench_vs_containerd (pure): samples per call, the ratio
podkit / containerd against the goals of issue 16, rendering and JSON."""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Callable, Sequence
from typing import Any

import attrs

# The goals (podkit / containerd, or / the floor); None: measured, no goal. Issue 22: the pod
# calls on kubelet-shaped pods (the rows without a suffix), RSS with 10 and with all pods held,
# create+start and ExecSync within 1.15x of bare runc; the rest from issue 16.
GOALS: dict[str, float | None] = {
    "RunPodSandbox": 0.75, "CreateContainer+StartContainer": 0.75, "StopPodSandbox": 0.75,
    "RemovePodSandbox": 0.75, "ExecSync": 0.75, "ContainerStatus": 0.75,
    "ListContainers": 0.75, "ListPodSandbox": 0.75, "ListContainerStats": 0.75,
    "ContainerStats": None, "PullImage": 1.0, "PullImage vs floor fetch+sha256": 1.15,
    "server RSS (10 pods)": 1.0, "server RSS (100 pods)": 1.0, "per-pod helper RSS": 0.35,
    "server open fds": None, "server RSS, idle (no pod yet)": None,
    "server RSS (10 pods) vs floor bare grpcio server": None,
    "create pods, concurrency 10": 0.75, "restart: first full List": 1.0,
    "tear down pods, concurrency 10": None, "StopPodSandbox+RemovePodSandbox": None,
    "Version (no-op: the gRPC floor)": None, "ExecSync vs floor runc exec": 1.15,
    "CreateContainer+StartContainer vs floor runc create+start": 1.15,
    # measured, no goal: the warm rows (median of 20 back-to-back calls) and the CPU rows
    "Version, warm (20 back-to-back)": None, "ContainerStatus, warm (20 back-to-back)": None,
    "ListContainers, warm (20 back-to-back)": None,
    "ListPodSandbox, warm (20 back-to-back)": None,
    "create pods: CPU per pod, server + helpers": None,
    "create pods: CPU per pod, server process": None, "create pods: machine CPU busy": None,
}
# the same pod calls under a CPU burner and on the minimal pod: measured beside the goal rows
for _variant in (" (loaded)", " (minimal pod)"):
    for _call in ("RunPodSandbox", "CreateContainer+StartContainer", "StopPodSandbox",
                  "RemovePodSandbox", "StopPodSandbox+RemovePodSandbox"):
        GOALS[_call + _variant] = None


@attrs.define(slots=True)
class Row:
    """One line of the table: samples (seconds, or one value in ``unit``) for both sides."""

    call: str
    podkit: list[float]
    containerd: list[float]
    unit: str = "ms"
    second: str = "containerd"  # what the right-hand column is (a floor for some rows)
    goal: float | None = attrs.field(  # GOALS' entry unless given (a row named at run time)
        default=attrs.Factory(lambda self: GOALS.get(self.call), takes_self=True))

    @property
    def ratio(self) -> float:
        other = median(self.containerd)
        return median(self.podkit) / other if other else float("inf")

    @property
    def met(self) -> str:
        if self.goal is None:
            return ""
        return "yes" if self.ratio <= self.goal else "MISS"


def median(values: Sequence[float]) -> float:
    if not values:
        raise ValueError("median of no samples")
    return statistics.median(values)


def p90(values: Sequence[float]) -> float:
    """The 90th percentile (inclusive method; the value itself for one sample)."""
    if len(values) < 2:
        return median(values)
    return statistics.quantiles(values, n=10, method="inclusive")[8]


def _cell(values: Sequence[float], unit: str) -> str:
    if unit == "ms":  # two decimals below 10 ms (the warm reads are a fraction of one)
        digits = 2 if median(values) < 0.01 else 1
        return f"{median(values) * 1000:.{digits}f} / {p90(values) * 1000:.{digits}f} ms"
    if unit == "s":
        return f"{median(values):.2f} s"
    if unit == "MB":
        return f"{median(values):.1f} MB"
    return f"{median(values):.0f} {unit}".rstrip()


def render(rows: Sequence[Row], title: str) -> str:
    """The side-by-side table: call | podkit | containerd | ratio | goal | met."""
    head = ("call", "podkit median / p90", "containerd median / p90", "ratio", "goal", "met")
    lines = [[r.call,
              _cell(r.podkit, r.unit), _cell(r.containerd, r.unit), f"{r.ratio:.2f}",
              "" if r.goal is None else f"<= {r.goal:.2f}", r.met] for r in rows]
    widths = [max(len(x) for x in col) for col in zip(head, *lines, strict=True)]

    def fmt(cells: Sequence[str]) -> str:
        return "| " + " | ".join(c.ljust(w) for c, w in zip(cells, widths, strict=True)) + " |"

    out = [title, fmt(head), "|" + "|".join("-" * (w + 2) for w in widths) + "|"]
    out += [fmt(line) for line in lines]
    misses = [r.call for r in rows if r.met == "MISS"]
    out.append(f"goals missed: {', '.join(misses)}" if misses else "every goal met")
    return "\n".join(out)


def as_json(rows: Sequence[Row]) -> list[dict[str, Any]]:
    return [{"call": r.call, "unit": r.unit, "podkit_median": median(r.podkit),
             "podkit_p90": p90(r.podkit), "other": r.second,
             "other_median": median(r.containerd), "other_p90": p90(r.containerd),
             "ratio": r.ratio, "goal": r.goal, "met": r.met} for r in rows]


def warm_median(call: Callable[[], object], times: int,
                clock: Callable[[], float] = time.perf_counter) -> float:
    """The median seconds of ``call`` made ``times`` times back to back."""
    if times < 1:
        raise ValueError(f"warm_median: times {times} must be at least 1")
    samples = []
    for _ in range(times):
        t0 = clock()
        call()
        samples.append(clock() - t0)
    return median(samples)


def env_int(name: str, default: int) -> int:
    """A positive integer knob from the environment."""
    raw = os.environ.get(name, "")
    if not raw:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ValueError(f"${name}={raw!r}: not an integer") from None
    if value < 1:
        raise ValueError(f"${name}={raw!r}: must be at least 1")
    return value
