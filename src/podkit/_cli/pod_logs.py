"""``podkit pod logs POD CTR [-f] [--tail N] [--since T] [--timestamps] [--stream S]``: a
container's CRI log, followed across rotation (ReopenContainerLog) until the container exits."""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from typing import BinaryIO

import attrs

from podkit.runtime.io import wait_readable
from podkit.runtime.log_follow import CRILogFollower, LineJoiner, follow_cri_log
from podkit.runtime.logs import CRILogEntry, CRILogLine, format_cri_timestamp
from podkit.sandbox import Container, ContainerState, SandboxManager

from .pod_time import parse_since
from .podctx import add_common, find_container, find_pod, manager

__all__ = ["LogFilter", "cmd_logs", "initial_lines", "register", "select_lines"]

_EXIT_GRACE = 0.5  # seconds the log is still read after the container's exit (the writer drains)


@attrs.frozen(kw_only=True)
class LogFilter:
    """Which lines to print: ``tail`` (last N, ``None`` all), ``since_ns``, ``stream``."""

    tail: int | None = None
    since_ns: int = 0
    stream: str = ""

    def keeps(self, line: CRILogLine) -> bool:
        """Whether ``line`` passes the time and stream filters."""
        return line.time_ns >= self.since_ns and (not self.stream or line.stream == self.stream)


def select_lines(lines: Iterable[CRILogLine], f: LogFilter) -> list[CRILogLine]:
    """``lines`` through ``f``: the time and stream filters, then the last ``tail``."""
    kept = [line for line in lines if f.keeps(line)]
    if f.tail is not None:
        kept = kept[len(kept) - f.tail:] if f.tail else []
    return kept


def initial_lines(entries: Iterable[CRILogEntry], joiner: LineJoiner) -> list[CRILogLine]:
    """The whole lines among ``entries`` (unfinished ones stay in ``joiner``)."""
    return [line for e in entries if (line := joiner.feed(e)) is not None]


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``pod logs``."""
    p = sub.add_parser("logs", help="print (and follow) a container's CRI log")
    p.add_argument("pod", help="pod ID prefix or name")
    p.add_argument("container", help="container name")
    p.add_argument("-f", "--follow", action="store_true",
                   help="keep printing new lines (across log rotation) until the container exits")
    p.add_argument("--tail", type=_tail, default=None, metavar="N",
                   help="only the last N lines already written")
    p.add_argument("--since", default="", metavar="TIME",
                   help="only lines from TIME on: a duration ago (10m, 30s) or RFC 3339")
    p.add_argument("-t", "--timestamps", action="store_true",
                   help="print each line's CRI log timestamp first")
    p.add_argument("--stream", choices=("stdout", "stderr"), default="",
                   help="only this stream")
    add_common(p)
    p.set_defaults(func=cmd_logs)


def _tail(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        n = -1
    if n < 0:
        raise argparse.ArgumentTypeError(f"--tail {text!r}: want a whole number >= 0")
    return n


def cmd_logs(args: argparse.Namespace) -> int:
    """Print the container's log lines (stdout to stdout, stderr to stderr)."""
    f = LogFilter(tail=args.tail, stream=args.stream,
                  since_ns=parse_since(args.since, "--since", time.time_ns())
                  if args.since else 0)
    with manager(args) as mgr:
        c = find_container(mgr, find_pod(mgr, args.pod), args.container)
        path = mgr.container_log_file(c.id)
        watch = _exit_watch(mgr, c) if args.follow else None
    joiner = LineJoiner()
    with CRILogFollower(path) as follower, _closing(watch):
        for line in select_lines(initial_lines(follower.read(), joiner), f):
            _print(line, args.timestamps)
        if watch is not None:
            for entry in follow_cri_log(follower, _exited(watch)):
                new = joiner.feed(entry)
                if new is not None and f.keeps(new):
                    _print(new, args.timestamps)
        for line in joiner.flush():
            if f.keeps(line):
                _print(line, args.timestamps)
    return 0


def _exit_watch(mgr: SandboxManager, c: Container) -> int | None:
    """A pidfd of the container's process while it runs (it becomes readable at its exit),
    or ``None`` when it is not running (nothing to follow)."""
    if c.state != ContainerState.CONTAINER_RUNNING or c.pid <= 0:
        return None
    try:
        fd = os.pidfd_open(c.pid)
    except ProcessLookupError:
        return None
    # the pid is pinned now: if the container still runs, the pidfd is its process
    if mgr.container_status(c.id).state != ContainerState.CONTAINER_RUNNING:
        os.close(fd)
        return None
    return fd


def _exited(pidfd: int) -> Callable[[], bool]:
    """True from ``_EXIT_GRACE`` seconds after the process exited (its last output logged)."""
    seen: list[float] = []

    def done() -> bool:
        if not seen and wait_readable([pidfd], 0):
            seen.append(time.monotonic())
        return bool(seen) and time.monotonic() - seen[0] >= _EXIT_GRACE

    return done


@contextlib.contextmanager
def _closing(fd: int | None) -> Iterator[None]:
    try:
        yield
    finally:
        if fd is not None:
            os.close(fd)


def _print(line: CRILogLine, timestamps: bool) -> None:
    out: BinaryIO = sys.stdout.buffer if line.stream == "stdout" else sys.stderr.buffer
    prefix = format_cri_timestamp(line.time_ns).encode() + b" " if timestamps else b""
    out.write(prefix + line.content + (b"\n" if line.complete else b""))
    out.flush()
