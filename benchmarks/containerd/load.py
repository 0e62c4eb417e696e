"""A CPU burner for the loaded rows of bench_vs_containerd: one process spinning on each CPU
(pinned there), started beside both servers for a round's loaded calls and ended by PID."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Sequence

__all__ = ["Burner", "burner_argv"]

SPIN = "import os, sys\nos.sched_setaffinity(0, {int(sys.argv[1])})\nwhile True:\n    pass\n"


def burner_argv(cpu: int, python: str = sys.executable) -> list[str]:
    """A Python process that pins itself to ``cpu`` and spins (no output, no I/O)."""
    if cpu < 0:
        raise ValueError(f"burner: cpu {cpu} is negative")
    return [python, "-S", "-c", SPIN, str(cpu)]


class Burner:
    """Spinners on ``cpus`` (every CPU this process may use by default) while in a ``with``
    block; each is SIGKILLed and reaped on the way out."""

    def __init__(self, cpus: Sequence[int] | None = None) -> None:
        self.cpus = sorted(os.sched_getaffinity(0)) if cpus is None else list(cpus)
        self.procs: list[subprocess.Popen[bytes]] = []

    def __enter__(self) -> Burner:
        try:
            for cpu in self.cpus:
                self.procs.append(subprocess.Popen(
                    burner_argv(cpu), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL))
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def stop(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                os.kill(proc.pid, signal.SIGKILL)
            proc.wait()
        self.procs.clear()
