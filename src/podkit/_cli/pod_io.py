"""``podkit pod exec|logs``: a container's processes and output."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from podkit.errors import InvalidArgumentError
from podkit.runtime import read_cri_log

from .podctx import add_common, find_container, find_pod, manager


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the container I/O commands to the ``pod`` group."""
    ex = sub.add_parser("exec", help="run a command in a container and print its output")
    ex.add_argument("pod", help="pod ID prefix or name")
    ex.add_argument("container", help="container name")
    ex.add_argument("cmd", nargs=argparse.REMAINDER, help="command (after --)")
    ex.add_argument("--timeout", type=float, default=None)
    add_common(ex)
    ex.set_defaults(func=cmd_exec)

    logs = sub.add_parser("logs", help="print a container's CRI log")
    logs.add_argument("pod", help="pod ID prefix or name")
    logs.add_argument("container", help="container name")
    add_common(logs)
    logs.set_defaults(func=cmd_logs)


def cmd_exec(args: argparse.Namespace) -> int:
    """exec_sync; the command's output and exit code."""
    cmd = args.cmd[1:] if args.cmd[:1] == ["--"] else args.cmd
    if not cmd:
        raise InvalidArgumentError("exec: no command given (podkit pod exec POD CTR -- cmd ...)")
    with manager(args) as mgr:
        c = find_container(mgr, find_pod(mgr, args.pod), args.container)
        res = mgr.exec_sync(c.id, cmd, args.timeout)
    sys.stdout.buffer.write(res.stdout)
    sys.stderr.buffer.write(res.stderr)
    return res.exit_code


def cmd_logs(args: argparse.Namespace) -> int:
    """Print the container's log lines (stdout to stdout, stderr to stderr)."""
    with manager(args) as mgr:
        c = find_container(mgr, find_pod(mgr, args.pod), args.container)
        path = mgr.container_log_file(c.id)
    if not Path(path).exists():
        return 0
    for line in read_cri_log(path):
        out = sys.stdout if line.stream == "stdout" else sys.stderr
        out.buffer.write(line.content + (b"\n" if line.complete else b""))
    return 0
