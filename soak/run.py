"""``make soak``: the standing soak and fault suite (issue 11), one table at the end.

Probes: the kill matrix (``kill_matrix.py``: SIGKILL at every step of run_sandbox,
create/start/stop_container, stop/remove_sandbox for runc and crun under conmon and in-process
supervision, then recover + remove_all by a new process and a census), the server soak
(``server_soak.py``: ``podkit cri serve`` holding pods under calls, then pod cycles; fds,
threads and RSS must stay flat) and the hostile input corpus (``pytest tests/hostile``).

Prints ``probe | tried | held | leaked/failed`` with the details of every leak, and exits 1 on
any. Run as root inside ``scripts/isolated`` (``make soak`` does). Parameters by flag or env:
``SOAK_TRIALS`` (kills per point, 1), ``SOAK_TIMED`` (random-delay kills per operation, 2),
``SOAK_COMBOS`` (``runc/conmon,...``), ``SOAK_OPS``, ``SOAK_SECONDS`` (hold, 120),
``SOAK_CYCLES`` (500), ``SOAK_PODS`` (20), ``SOAK_PROBES`` (``kill,server,hostile``).
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import kill_matrix
import server_soak

REPO = Path(__file__).resolve().parents[1]
Row = tuple[str, int, int, int, list[str]]


def kill_rows(combos: list[str], ops: list[str], trials: int, timed: int,
              log: Callable[[str], None]) -> list[Row]:
    """The kill matrix, one row per runtime/supervisor and operation."""
    return kill_matrix.summary(kill_matrix.run(combos, ops, trials, timed, log=log))


def server_rows(pods: int, hold: float, cycles: int, log: Callable[[str], None]) -> list[Row]:
    """The server soak as one row: calls tried/held; failures, flat-line breaks, leftovers."""
    try:
        r = server_soak.soak(pods=pods, hold=hold, cycles=cycles, log=log)
    except Exception as exc:  # the probe itself could not run: a failed row, not a crash
        return [("server soak", 0, 0, 1, [f"could not run: {exc}"])]
    details = server_soak.report(r)
    bad = len(r.failed) + len(r.problems) + len(r.leftovers)
    return [(f"server soak ({pods} pods, {hold:g}s, {r.cycles} cycles)", r.calls,
             r.calls - len(r.failed), bad, details)]


def junit_counts(path: Path) -> tuple[int, int, int, list[str]]:
    """(passed, failed, skipped, names of failed) from a pytest junit XML report."""
    passed = failed = skipped = 0
    names = []
    for case in ET.parse(path).getroot().iter("testcase"):
        kinds = {child.tag for child in case}
        if kinds & {"failure", "error"}:
            failed += 1
            names.append(f"{case.get('classname')}::{case.get('name')}")
        elif "skipped" in kinds:
            skipped += 1
        else:
            passed += 1
    return passed, failed, skipped, names


def hostile_rows(log: Callable[[str], None]) -> list[Row]:
    """``pytest tests/hostile``: each test a hostile input that must be refused cleanly."""
    if not (REPO / "tests" / "hostile").is_dir():
        return [("hostile corpus", 0, 0, 1, ["tests/hostile is missing"])]
    with tempfile.TemporaryDirectory(prefix="pksoak-hostile-") as tmp:
        xml = Path(tmp) / "junit.xml"
        proc = subprocess.run(
            [sys.executable, "-m", "pytest", "tests/hostile", "-q", "-p", "no:cacheprovider",
             f"--junitxml={xml}"], cwd=REPO, capture_output=True, text=True, timeout=1800)
        if not xml.exists():
            tail = " | ".join(proc.stdout.strip().splitlines()[-3:])
            return [("hostile corpus", 0, 0, 1, [f"pytest did not run: {tail}"])]
        passed, failed, skipped, names = junit_counts(xml)
    details = names + ([f"{skipped} skipped"] if skipped else [])
    if proc.returncode not in (0, 1) or (proc.returncode == 1 and not failed):
        details.append("pytest: " + " | ".join(proc.stdout.strip().splitlines()[-3:]))
        failed = max(failed, 1)
    log(f"  hostile corpus: {passed} passed, {failed} failed, {skipped} skipped")
    return [("hostile corpus (pytest tests/hostile)", passed + failed, passed, failed, details)]


def table(rows: list[Row]) -> str:
    """The closing table: one line per probe, details indented below it."""
    width = max([len(r[0]) for r in rows] + [5])
    out = [f"{'probe':{width}} | {'tried':>6} | {'held':>6} | {'leaked/failed':>13}",
           f"{'-' * width}-+-{'-' * 6}-+-{'-' * 6}-+-{'-' * 13}"]
    for probe, tried, held, bad, details in rows:
        out.append(f"{probe:{width}} | {tried:6} | {held:6} | {bad:13}")
        out += [f"    {d}" for d in details]
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    env = os.environ.get
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--probes", default=env("SOAK_PROBES", "kill,server,hostile"))
    ap.add_argument("--combos", default=env("SOAK_COMBOS", ",".join(kill_matrix.COMBOS)))
    ap.add_argument("--ops", default=env("SOAK_OPS", ",".join(kill_matrix.OPS)))
    ap.add_argument("--trials", type=int, default=int(env("SOAK_TRIALS", "1")))
    ap.add_argument("--timed", type=int, default=int(env("SOAK_TIMED", "2")))
    ap.add_argument("--seconds", type=float, default=float(env("SOAK_SECONDS", "120")))
    ap.add_argument("--cycles", type=int, default=int(env("SOAK_CYCLES", "500")))
    ap.add_argument("--pods", type=int, default=int(env("SOAK_PODS", "20")))
    ap.add_argument("--quiet", action="store_true", help="only the table")
    args = ap.parse_args(argv)
    if os.geteuid() != 0 or os.environ.get("PODKIT_ISOLATED") != "1":
        print("soak: run as root inside scripts/isolated (make soak)", file=sys.stderr)
        return 2
    # SIGTERM unwinds like an error: every probe's cleanup (finally) still runs
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    log: Callable[[str], None] = (lambda s: None) if args.quiet else \
        (lambda s: print(s, flush=True))
    probes = args.probes.split(",")
    started = time.monotonic()
    rows: list[Row] = []
    if "kill" in probes:
        rows += kill_rows(args.combos.split(","), args.ops.split(","), args.trials,
                          args.timed, log)
    if "server" in probes:
        rows += server_rows(args.pods, args.seconds, args.cycles, log)
    if "hostile" in probes:
        rows += hostile_rows(log)
    print()
    print(table(rows))
    print(f"({time.monotonic() - started:.0f}s)")
    return 1 if any(r[3] for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
