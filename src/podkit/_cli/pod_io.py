"""``podkit pod exec|attach`` (a container's processes and stdio), and the registration of the
other container I/O commands (``logs``, ``wait``, ``stats``, ``top``)."""

from __future__ import annotations

import argparse
import contextlib
import shlex
import sys
import time
from collections.abc import Iterator

from podkit.errors import ConflictError, InvalidArgumentError, PodkitError
from podkit.runtime import Attachment, Runc, RuntimeTimeoutError, parse_detach_keys
from podkit.runtime.attach import DEFAULT_DETACH_KEYS
from podkit.runtime.interactive import ExecSession
from podkit.sandbox import Container, ContainerState

from . import pod_logs, pod_wait, pod_watch
from .pod_term import forward_resize, raw_terminal, terminal_size
from .pod_time import parse_duration
from .podctx import add_common, find_container, find_pod, manager

__all__ = ["ExecTimeoutError", "cmd_attach", "cmd_exec", "register"]

_EXIT_RECORDED = 10.0  # seconds attach waits for the container's exit code to be recorded


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the container I/O commands to the ``pod`` group."""
    ex = sub.add_parser("exec", help="run a command in a container (-i stdin, -t a tty)")
    ex.add_argument("pod", help="pod ID prefix or name")
    ex.add_argument("container", help="container name")
    ex.add_argument("words", nargs="*", metavar="CMD",
                    help="the command; after -- when it has options (-- sh -c 'exit 3')")
    ex.add_argument("-i", "--interactive", action="store_true", help="forward stdin")
    ex.add_argument("-t", "--tty", action="store_true", help="run the command on a terminal")
    ex.add_argument("--timeout", default=None,
                    help="kill the command after this long: 30s, 2m or seconds")
    add_common(ex)
    ex.set_defaults(func=cmd_exec)

    at = sub.add_parser("attach", help="connect to a running container's stdio")
    at.add_argument("pod", help="pod ID prefix or name")
    at.add_argument("container", help="container name")
    at.add_argument("--detach-keys", default=DEFAULT_DETACH_KEYS,
                    help=f"keys that detach, leaving it running (default {DEFAULT_DETACH_KEYS})")
    at.add_argument("--no-stdin", action="store_true", help="do not forward stdin")
    add_common(at)
    at.set_defaults(func=cmd_attach)

    pod_logs.register(sub)
    pod_wait.register(sub)
    pod_watch.register(sub)


class ExecTimeoutError(PodkitError, TimeoutError):
    """``pod exec --timeout`` passed: the command was killed (exit code: timeout)."""


@contextlib.contextmanager
def _user_timeout(args: argparse.Namespace, cmd: list[str]) -> Iterator[None]:
    """The runtime's timeout of an exec with ``--timeout`` told as what it is: the user's
    command ran too long and was killed."""
    try:
        yield
    except RuntimeTimeoutError:
        if not args.timeout:
            raise
        raise ExecTimeoutError(
            f"exec in pod {args.pod!r} container {args.container!r}: the command did not "
            f"finish within --timeout {args.timeout} and was killed: {shlex.join(cmd)}"
        ) from None


def cmd_exec(args: argparse.Namespace) -> int:
    """The command's output and exit code: exec_sync, or with -i/-t an interactive exec."""
    cmd = [*args.words, *(getattr(args, "command_after_dashdash", None) or [])]
    if not cmd:
        raise InvalidArgumentError("exec: no command given (podkit pod exec POD CTR -- cmd ...)")
    timeout = parse_duration(args.timeout, "--timeout") if args.timeout else None
    with _user_timeout(args, cmd):
        return _exec(args, cmd, timeout)


def _exec(args: argparse.Namespace, cmd: list[str], timeout: float | None) -> int:
    with manager(args) as mgr:
        c = find_container(mgr, find_pod(mgr, args.pod), args.container)
        _require_running(mgr.container_status(c.id), args)
        if not (args.interactive or args.tty):
            res = mgr.exec_sync(c.id, cmd, timeout)
            sys.stdout.buffer.write(res.stdout)
            sys.stderr.buffer.write(res.stderr)
            return res.exit_code
        runtime = mgr.runtime
    if not isinstance(runtime, Runc):
        raise InvalidArgumentError(f"exec -i/-t needs runc or crun, not {runtime!r}")
    return _exec_interactive(runtime, c.id, cmd, args.interactive, args.tty, timeout)


def _exec_interactive(runtime: Runc, id: str, cmd: list[str], interactive: bool, tty: bool,
                      timeout: float | None) -> int:
    sys.stdout.flush()
    out, err = sys.stdout.fileno(), sys.stderr.fileno()
    stdin = sys.stdin.fileno() if interactive else None
    size = terminal_size(0, out) if tty else None
    with ExecSession.start(runtime, id, cmd, stdin=interactive, tty=tty, size=size) as session, \
            contextlib.ExitStack() as stack:
        if tty and interactive:
            stack.enter_context(raw_terminal(0))
        if tty:
            stack.enter_context(forward_resize(session.resize, 0, out))
        status = session.pump(stdin, out, err, timeout=timeout)
    return status.exit_code


def cmd_attach(args: argparse.Namespace) -> int:
    """Stream the container's output (and stdin to it) until it exits (its exit code) or the
    detach keys are typed (0; it keeps running)."""
    keys = parse_detach_keys(args.detach_keys) if args.detach_keys else b""
    with manager(args) as mgr:
        c = find_container(mgr, find_pod(mgr, args.pod), args.container)
        _require_running(mgr.container_status(c.id), args)
        att = mgr.attach(c.id)
        supervisor = mgr.supervisor
    if not isinstance(att, Attachment):
        att.close()
        raise InvalidArgumentError(f"attach needs conmon supervision, not {supervisor!r}")
    forward_stdin = c.config.stdin and not args.no_stdin
    sys.stdout.flush()
    with att, contextlib.ExitStack() as stack:
        if c.config.tty and forward_stdin:
            stack.enter_context(raw_terminal(0))
        if c.config.tty:
            stack.enter_context(
                forward_resize(lambda r, w: supervisor.resize(c.id, r, w), 0, 1))
            if (size := terminal_size(0, 1)) is not None:
                supervisor.resize(c.id, *size)
        how = att.copy(sys.stdout.buffer, sys.stderr.buffer,
                       sys.stdin.buffer if forward_stdin else None, detach_keys=keys or None)
    if how == "detached":
        print(f"podkit: detached from {args.container} (still running)", file=sys.stderr)
        return 0
    return _exit_code(args, c.id)


def _require_running(c: Container, args: argparse.Namespace) -> None:
    if c.state != ContainerState.CONTAINER_RUNNING:
        raise ConflictError(f"container {args.container!r} of pod {args.pod!r} is not running "
                            f"({c.state.name.removeprefix('CONTAINER_')})")


def _exit_code(args: argparse.Namespace, id: str) -> int:
    """The container's exit code once the manager has it (0 if it is not recorded in time)."""
    deadline = time.monotonic() + _EXIT_RECORDED
    while time.monotonic() < deadline:
        with manager(args) as mgr:
            c = mgr.container_status(id)
        if c.state == ContainerState.CONTAINER_EXITED:
            return c.exit_code
        time.sleep(0.1)
    return 0

