"""What a timed-out runtime command started: found by parent pid, killed before the command.

``runc exec`` / ``crun exec`` start the exec'd process as their own child in a new session
and write ``--pid-file`` only afterwards. Killing the runtime's process group in that window
missed the process, which then ran on in the container. ``kill_children`` freezes the runtime
(SIGSTOP; it stays our unreaped child, so its pid cannot be reused), kills every child it has
(with the child's process group) until none is left alive, and leaves the runtime for its
caller to kill and reap.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal as _signal
import time

from podkit import procfs
from podkit.runtime.monitor import wait_gone

__all__ = ["KilledChildren", "child_pids", "kill_children"]

_MAX_ROUNDS = 50  # a runtime forks a handful of helpers; more rounds than this is a loop


def child_pids(pid: int, *, proc: str = procfs.PROC) -> dict[int, str]:
    """``{child pid: state}`` of the processes whose parent is ``pid`` (zombies included)."""
    found: dict[int, str] = {}
    try:
        names = os.listdir(proc)
    except OSError:
        return found
    for name in names:
        if not name.isdigit():
            continue
        try:
            with open(os.path.join(proc, name, "stat"), "rb") as f:
                fields = procfs.parse_stat(f.read())
        except (OSError, ValueError):
            continue
        if len(fields) > 1 and fields[1] == str(pid).encode():
            found[int(name)] = fields[0].decode("ascii", "replace")
    return found


class KilledChildren:
    """The children ``kill_children`` signalled, held by pidfd until they are gone."""

    def __init__(self) -> None:
        self.pidfds: dict[int, int] = {}

    def wait_gone(self, timeout: float = 10.0) -> list[int]:
        """Wait until each has exited and been reaped (the runtime must be dead by then, so
        they are orphans: ours as the subreaper, or init's); the pids still there after
        ``timeout``."""
        deadline = time.monotonic() + timeout
        return [pid for pid, fd in self.pidfds.items()
                if not wait_gone(fd, max(deadline - time.monotonic(), 0.0))]

    def close(self) -> None:
        """Close the pidfds."""
        for fd in self.pidfds.values():
            os.close(fd)
        self.pidfds.clear()

    def __enter__(self) -> KilledChildren:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _kill(pidfd: int, pid: int, runtime_pid: int, runtime_pgid: int, proc: str) -> None:
    """SIGKILL the child and, unless it is the runtime's own, its process group; checked
    through ``pidfd`` to be still the runtime's child, so a reused pid is never signalled."""
    try:
        _signal.pidfd_send_signal(pidfd, 0)
        pgid = os.getpgid(pid)
        parent = _parent(pid, proc)
        _signal.pidfd_send_signal(pidfd, 0)
    except ProcessLookupError:
        return
    if parent != runtime_pid:
        return
    if pgid > 1 and pgid not in (runtime_pgid, os.getpgrp()):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pgid, _signal.SIGKILL)
    with contextlib.suppress(ProcessLookupError):
        _signal.pidfd_send_signal(pidfd, _signal.SIGKILL)


def _parent(pid: int, proc: str) -> int:
    try:
        with open(os.path.join(proc, str(pid), "stat"), "rb") as f:
            return int(procfs.parse_stat(f.read())[1])
    except (OSError, ValueError, IndexError):
        raise ProcessLookupError(pid) from None


def _exited(pidfd: int, timeout: float) -> bool:
    poller = select.poll()
    poller.register(pidfd, select.POLLIN)
    return bool(poller.poll(max(int(timeout * 1000), 0)))


def kill_children(runtime_pid: int, killed: KilledChildren, *, proc: str = procfs.PROC,
                  settle: float = 5.0) -> None:
    """SIGSTOP ``runtime_pid`` (an unreaped child of ours) and SIGKILL its children and their
    process groups, round after round, until a round finds none alive that was not killed.

    A runtime's helper may clone a sibling (``CLONE_PARENT``) while it is being killed, so each
    round waits (up to ``settle`` s) for the killed ones to exit before looking again.
    """
    try:
        runtime_pgid = os.getpgid(runtime_pid)
        os.kill(runtime_pid, _signal.SIGSTOP)
    except ProcessLookupError:
        return
    for _ in range(_MAX_ROUNDS):
        fresh = []
        for pid, state in child_pids(runtime_pid, proc=proc).items():
            if pid in killed.pidfds or state in ("Z", "X"):
                continue
            try:
                fd = os.pidfd_open(pid)
            except OSError:  # gone between the scan and the open
                continue
            killed.pidfds[pid] = fd
            _kill(fd, pid, runtime_pid, runtime_pgid, proc)
            fresh.append(fd)
        if not fresh:
            return
        deadline = time.monotonic() + settle
        for fd in fresh:
            _exited(fd, max(deadline - time.monotonic(), 0.0))
