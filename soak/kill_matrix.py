"""Kill matrix: SIGKILL the managing process at every step of a pod operation, then recover.

For each runtime (runc, crun), supervisor (conmon, in-process) and operation (run_sandbox,
create_container, start_container, stop_container, stop_sandbox, remove_sandbox):

1. a traced trial runs the operation to the end and lists the kill points it passed (seams:
   runtime, supervisor, conmon launcher, each CNI plugin command, each atomic-write rename, the
   manager's own steps; see ``_trial.py``); it is recovered and counted like the others;
2. one trial per point (``trials`` times): a new process sets up, arms that point and dies
   there by SIGKILL; ``timed`` more trials die at a random delay into the operation;
3. after each: the in-flight plugins/runtime commands finish, a new process runs
   ``recover()`` + ``remove_all()``, and a census (netns, links, IPAM, runtime state, conmon
   processes, container processes, cgroups, mounts, state and temp files) must find nothing.

Run alone: ``scripts/isolated .venv/bin/python soak/kill_matrix.py [--combos runc/conmon]``.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _census

HERE = Path(__file__).resolve().parent
OPS = ("run_sandbox", "create_container", "start_container", "stop_container", "stop_sandbox",
       "remove_sandbox")
COMBOS = ("runc/conmon", "runc/inprocess", "crun/conmon", "crun/inprocess")
BRIDGE = "pksoak0"
CHILD_TIMEOUT = 180.0
# The CI slice's kill points per operation (tests/test_soak_slice.py): a record write's temp
# file, CNI ADD/DEL of the bridge done, conmon launched without its record, the supervisor's
# wait and delete done, the pod files' removal.
CI_POINTS = {
    "run_sandbox": ("write:state/sandboxes/ID#1 before", "cni:ADD:bridge#1 after",
                    "conmon._spawn#1 after", "supervisor.start#1 after"),
    "create_container": ("write:state/containers/ID#1 before",),
    "start_container": ("conmon._spawn#1 after", "supervisor.start#1 after"),
    "stop_container": ("supervisor.wait#1 after",),
    "stop_sandbox": ("cni:DEL:bridge#1 after", "step.netns.undo#1 before"),
    "remove_sandbox": ("supervisor.delete#1 after", "step.files.undo#1 before"),
}


def ci_points(op: str, points: list[str]) -> list[str]:
    """The points of ``op``'s trace that the CI slice kills at (see ``CI_POINTS``)."""
    return [p for p in points if p in CI_POINTS.get(op, ())]


@dataclass
class Trial:
    """The outcome of one kill: where, and what was left after recovery."""

    combo: str
    op: str
    point: str
    outcome: str = "held"  # held | leaked | missed (point not reached) | error
    leftovers: list[str] = field(default_factory=list)
    detail: str = ""


@dataclass
class Setup:
    """What every trial of one run shares: work dir, busybox rootfs, cgroup parent."""

    work: Path
    rootfs: Path
    cgroup_root: str
    counter: Iterator[int]


def make_busybox_rootfs(dest: Path) -> Path:
    """The busybox rootfs the tests use (tests/conftest.py), for the pause and the app."""
    sys.path.insert(0, str(HERE.parent / "tests"))
    from conftest import make_busybox_rootfs as make

    return make(dest)


def ensure_bridge() -> None:
    """The soak bridge, made up front (the bridge plugin never deletes it)."""
    subprocess.run(["ip", "link", "add", BRIDGE, "type", "bridge"], capture_output=True,
                   check=False)


def delete_bridge() -> None:
    subprocess.run(["ip", "link", "del", BRIDGE], capture_output=True, check=False)


def _child(params: dict[str, object]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(HERE / "_trial.py"), json.dumps(params)],
                          capture_output=True, text=True, timeout=CHILD_TIMEOUT,
                          stdin=subprocess.DEVNULL)


def read_events(path: Path) -> tuple[list[str], float, bool]:
    """The points a trial passed, the operation's duration, and whether the kill hit."""
    if not path.exists():
        return [], 0.0, False
    lines = path.read_text().splitlines()
    points = [line for line in lines if "#" in line]
    stamps = {line.split()[0]: float(line.split()[1]) for line in lines
              if line.startswith(("ARMED ", "DONE "))}
    duration = stamps.get("DONE", 0.0) - stamps.get("ARMED", 0.0)
    return points, max(duration, 0.0), "HIT" in lines


def kill_points(events: Iterable[str]) -> list[str]:
    """The distinct points of a trace, in order."""
    return list(dict.fromkeys(events))


def run_trial(setup: Setup, combo: str, op: str, kill: str | None = None,
              timed: float | None = None) -> tuple[Trial, list[str], float]:
    """One trial: operation killed at ``kill`` (or after ``timed`` s), recovery, census."""
    runtime, supervisor = combo.split("/")
    n = next(setup.counter)
    base = setup.work / f"t{n}"
    base.mkdir()
    prefix = f"pks{n}-"
    cgroup_parent = f"{setup.cgroup_root}/t{n}"
    events = setup.work / f"t{n}.events"
    params: dict[str, object] = {
        "mode": "op", "op": op, "base": str(base), "runtime": runtime,
        "supervisor": supervisor, "rootfs": str(setup.rootfs), "netns_prefix": prefix,
        "cgroup_parent": cgroup_parent, "events": str(events), "kill": kill, "timed": timed,
    }
    point = kill or (f"timed {timed:.3f}s" if timed is not None else "none (traced)")
    trial = Trial(combo, op, point)
    links_before = frozenset(_census._leaks.links())
    try:
        proc = _child(params)
        passed, duration, hit = read_events(events)
        if proc.returncode not in (0, -9):
            trial.outcome, trial.detail = "error", _tail(proc.stderr)
        elif kill is not None and not hit:
            trial.outcome = "missed"
        _census.settle(base, prefix)
        rec = _child({**params, "mode": "recover", "kill": None, "timed": None})
        if rec.returncode != 0:
            trial.detail = (trial.detail + " " if trial.detail else "") + \
                "recovery: " + _tail(rec.stdout + rec.stderr)
        trial.leftovers = _census.census(base, prefix, cgroup_parent, links_before)
        if trial.outcome in ("held", "missed") and (trial.leftovers or rec.returncode != 0):
            trial.outcome = "leaked"
    except subprocess.TimeoutExpired as exc:
        passed, duration = [], 0.0
        trial.outcome, trial.detail = "error", f"timed out: {exc.cmd[-1][:80]}"
    finally:
        _census.force_clean(base, prefix, cgroup_parent, runtime, links_before)
        events.unlink(missing_ok=True)
    return trial, passed, duration


def _tail(text: str, lines: int = 3) -> str:
    return " | ".join(text.strip().splitlines()[-lines:])[:600]


def matrix(setup: Setup, combo: str, op: str, trials: int, timed: int,
           points_filter: Callable[[str, list[str]], list[str]] | None = None,
           log: Callable[[str], None] = print) -> list[Trial]:
    """Every kill point of ``op`` under ``combo``, ``trials`` times each, plus timed kills."""
    first, passed, duration = run_trial(setup, combo, op)
    results = [first]
    log(_line(first))
    points = kill_points(passed)
    if points_filter is not None:
        points = points_filter(op, points)
    for point in points:
        for _ in range(trials):
            t, _, _ = run_trial(setup, combo, op, kill=point)
            results.append(t)
            log(_line(t))
    rng = random.Random(f"{combo} {op}")
    for _ in range(timed):
        t, _, _ = run_trial(setup, combo, op, timed=rng.uniform(0.0, duration))
        results.append(t)
        log(_line(t))
    return results


def _line(t: Trial) -> str:
    extra = f": {'; '.join(t.leftovers)}" if t.leftovers else ""
    detail = f" [{t.detail}]" if t.detail else ""
    return f"  {t.combo:15} {t.op:17} {t.point:45} {t.outcome}{extra}{detail}"


def run(combos: Iterable[str] = COMBOS, ops: Iterable[str] = OPS, trials: int = 1,
        timed: int = 2, points_filter: Callable[[str, list[str]], list[str]] | None = None,
        log: Callable[[str], None] = print) -> list[Trial]:
    """The whole matrix (inside scripts/isolated, as root); every trial's outcome."""
    work = Path(tempfile.mkdtemp(prefix="pksoak-"))
    runid = work.name.rsplit("-", 1)[-1]
    setup = Setup(work, make_busybox_rootfs(work / "rootfs"), f"/pksoak-{runid}",
                  iter(range(1, 1 << 30)))
    ensure_bridge()
    results: list[Trial] = []
    try:
        for combo in combos:
            if shutil.which(combo.split("/")[0]) is None:
                log(f"  {combo}: {combo.split('/')[0]} not installed, skipped")
                continue
            for op in ops:
                results += matrix(setup, combo, op, trials, timed, points_filter, log)
    finally:
        delete_bridge()
        _census.remove_cgroup_parent(setup.cgroup_root)
        shutil.rmtree(work, ignore_errors=True)
    return results


def summary(results: Iterable[Trial]) -> list[tuple[str, int, int, int, list[str]]]:
    """Per combo and op: (probe, tried, held, leaked-or-failed, details)."""
    rows: dict[str, tuple[int, int, int, list[str]]] = {}
    for t in results:
        probe = f"kill {t.combo} {t.op}"
        tried, held, bad, details = rows.get(probe, (0, 0, 0, []))
        if t.outcome == "missed" and not t.leftovers:
            rows[probe] = (tried, held, bad, details)
            continue
        tried += 1
        if t.outcome == "held":
            held += 1
        else:
            bad += 1
            what = "; ".join(t.leftovers) or t.detail
            details.append(f"{t.point} ({t.outcome}): {what}"
                           + (f" [{t.detail}]" if t.leftovers and t.detail else ""))
        rows[probe] = (tried, held, bad, details)
    return [(probe, *row) for probe, row in rows.items()]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--combos", default=",".join(COMBOS), help="runtime/supervisor,...")
    ap.add_argument("--ops", default=",".join(OPS))
    ap.add_argument("--trials", type=int, default=int(os.environ.get("SOAK_TRIALS", "1")),
                    help="trials per kill point (env SOAK_TRIALS)")
    ap.add_argument("--timed", type=int, default=int(os.environ.get("SOAK_TIMED", "2")),
                    help="random-delay kills per operation (env SOAK_TIMED)")
    args = ap.parse_args(argv)
    results = run(args.combos.split(","), args.ops.split(","), args.trials, args.timed)
    bad = 0
    for probe, tried, held, leaked, details in summary(results):
        print(f"{probe:40} tried {tried:4} held {held:4} leaked {leaked:4}")
        for d in details:
            print(f"    {d}")
        bad += leaked
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
