"""In-process supervision: become a child subreaper and reap container processes.

``runc create`` exits once the container exists; the container's init (and every
``exec --detach`` process) is then re-parented to the nearest *child subreaper*. The
``Monitor`` makes this process one (``prctl(PR_SET_CHILD_SUBREAPER)``) and runs one reaper
thread that hands exit statuses to subscribers.

Rules, so the monitor never races other ``waitpid`` users in the same process:

* The monitor reaps only (a) PIDs somebody subscribed to with ``Monitor.subscribe`` and
  (b) *orphans from containers*: zombie children whose ``NSpid`` shows they live in a nested PID
  namespace, i.e. processes the kernel re-parented to us. Children this process forked itself
  (``subprocess.Popen``, ``os.fork``) are never touched: Popen keeps reaping its own.
* Subscribe before the process can be reaped by anyone else: the runtime adapter subscribes to
  the init PID right after ``create`` (init is blocked until ``start``) and to an exec PID as
  soon as the pid file is read. Exits this monitor collected (subscribed or orphan) are
  remembered (the last 1024) and handed to a late subscriber.
* One monitor per process: use ``default_monitor()``. Two monitors would split the orphans.
* Nobody else in the process may call ``os.wait()``/``waitpid(-1)`` (that would steal exits).

The reaper waits on a ``pidfd`` per subscribed PID (Linux >= 5.3), so an exit is seen at once;
orphan zombies are collected once per ``orphan_interval`` (1 s), off the path of a
subscribed exit.
"""

from __future__ import annotations

import collections
import contextlib
import datetime as _dt
import glob
import os
import select
import signal as _signal
import threading
import time
from collections.abc import Callable
from pathlib import Path

from podkit import _linux
from podkit.errors import ConflictError
from podkit.runtime.base import ExitStatus
from podkit.runtime.errors import NotFoundError, RuntimeTimeoutError

__all__ = [
    "Monitor",
    "PidFileProcess",
    "Subscription",
    "default_monitor",
    "is_subreaper",
    "kill_pid_file",
    "kill_process_group",
    "set_subreaper",
    "wait_exit",
    "wait_gone",
]

PR_SET_CHILD_SUBREAPER = _linux.PR_SET_CHILD_SUBREAPER
PR_GET_CHILD_SUBREAPER = _linux.PR_GET_CHILD_SUBREAPER
_REMEMBERED_EXITS = 1024


def set_subreaper(enable: bool = True) -> None:
    """Mark (or unmark) this process as a child subreaper via ``prctl``."""
    _linux.set_child_subreaper(enable)


def is_subreaper() -> bool:
    """Whether this process is currently a child subreaper."""
    return _linux.is_child_subreaper()


class Subscription:
    """The pending exit status of one PID; ``wait()`` blocks until the reaper has it."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self._event = threading.Event()
        self._status: ExitStatus | None = None
        self._callbacks: list[Callable[[ExitStatus], None]] = []
        self._lock = threading.Lock()

    def done(self) -> bool:
        """True once the process has exited and been reaped."""
        return self._event.is_set()

    @property
    def status(self) -> ExitStatus | None:
        """The exit status, or ``None`` while the process runs."""
        return self._status

    def wait(self, timeout: float | None = None) -> ExitStatus:
        """Block until the exit; ``RuntimeTimeoutError`` after ``timeout`` seconds."""
        if not self._event.wait(timeout):
            raise RuntimeTimeoutError(f"pid {self.pid} still running after {timeout} s")
        assert self._status is not None
        return self._status

    def add_done_callback(self, fn: Callable[[ExitStatus], None]) -> None:
        """Call ``fn(status)`` on the reaper thread at exit (at once if already exited)."""
        with self._lock:
            if self._status is None:
                self._callbacks.append(fn)
                return
        fn(self._status)

    def _resolve(self, status: ExitStatus) -> None:
        with self._lock:
            if self._status is not None:
                return
            self._status = status
            callbacks, self._callbacks = self._callbacks, []
        self._event.set()
        for fn in callbacks:
            with contextlib.suppress(Exception):
                fn(status)


def _now() -> _dt.datetime:
    return _dt.datetime.now(_dt.UTC)


def _children() -> list[int]:
    pids: list[int] = []
    for path in glob.glob(f"/proc/{os.getpid()}/task/*/children"):
        try:
            with open(path) as f:
                pids.extend(int(p) for p in f.read().split())
        except OSError:
            continue
    return pids


def _is_container_zombie(pid: int) -> bool:
    """A zombie child living in a nested PID namespace (re-parented container process)."""
    try:
        with open(f"/proc/{pid}/status") as f:
            text = f.read()
    except OSError:
        return False
    state = nspid = ""
    for line in text.splitlines():
        if line.startswith("State:"):
            state = line.split()[1]
        elif line.startswith("NSpid:"):
            nspid = line
    return state == "Z" and len(nspid.split()) > 2


class Monitor:
    """One reaper thread for this process; subscribers per PID (see the module rules)."""

    def __init__(self, *, orphan_interval: float = 1.0) -> None:
        self.orphan_interval = orphan_interval
        self._lock = threading.Lock()
        self._subs: dict[int, tuple[Subscription, int]] = {}  # pid -> (sub, pidfd)
        self._exited: collections.OrderedDict[int, ExitStatus] = collections.OrderedDict()
        self._thread: threading.Thread | None = None
        self._wake_r = self._wake_w = -1
        self._owner_pid = 0

    # -- lifecycle -----------------------------------------------------------------------
    def start(self) -> None:
        """Become a subreaper and start the reaper thread (idempotent, fork-aware).

        The subreaper flag is (re)asserted on every call, so code that cleared it (tests that
        hand orphans back to PID 1) gets it back before the next container is created.
        """
        with self._lock:
            set_subreaper(True)
            if self._thread is not None and self._owner_pid == os.getpid():
                return
            # after a fork: the parent's pipe and pidfds are copies here, of no use; close them
            for fd in (self._wake_r, self._wake_w, *(f for _, f in self._subs.values())):
                if fd >= 0:
                    with contextlib.suppress(OSError):
                        os.close(fd)
            self._wake_r, self._wake_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
            self._owner_pid = os.getpid()
            self._subs.clear()
            self._thread = threading.Thread(
                target=self._loop, name="podkit-reaper", daemon=True
            )
            self._thread.start()

    @property
    def running(self) -> bool:
        """True while the reaper thread is alive in this process."""
        return (
            self._thread is not None
            and self._thread.is_alive()
            and self._owner_pid == os.getpid()
        )

    def _wake(self) -> None:
        with contextlib.suppress(OSError):
            os.write(self._wake_w, b"x")

    # -- subscriptions -------------------------------------------------------------------
    def subscribe(self, pid: int) -> Subscription:
        """Watch ``pid`` (a child of this process, alive or zombie) and reap it at exit.

        Raises ``NotFoundError`` when ``pid`` is not (or no longer) our child and its exit
        was not collected by this monitor, ``ConflictError`` for a non-positive pid.
        """
        if pid <= 0:
            raise ConflictError(f"cannot watch pid {pid}")
        self.start()
        with self._lock:
            existing = self._subs.get(pid)
            if existing is not None:
                return existing[0]
            try:
                fd = os.pidfd_open(pid)
            except ProcessLookupError:
                fd = -1
            if fd >= 0:
                try:
                    os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
                except ChildProcessError:
                    os.close(fd)
                    fd = -1
            sub = Subscription(pid)
            if fd < 0:
                status = self._exited.get(pid)
                if status is None:
                    raise NotFoundError(
                        f"pid {pid} is not a child of this process (or was reaped elsewhere)"
                    )
                sub._resolve(status)
                return sub
            self._exited.pop(pid, None)  # stale: an earlier process that had this pid
            self._subs[pid] = (sub, fd)
        self._wake()
        return sub

    def wait(self, pid: int, timeout: float | None = None) -> ExitStatus:
        """``subscribe(pid).wait(timeout)``."""
        return self.subscribe(pid).wait(timeout)

    def forget(self, pid: int) -> None:
        """Stop watching ``pid`` without reaping it."""
        with self._lock:
            entry = self._subs.pop(pid, None)
        if entry is not None:
            os.close(entry[1])
            self._wake()

    # -- reaper thread ---------------------------------------------------------------------
    def _loop(self) -> None:
        last_scan = 0.0
        while True:
            with self._lock:
                fds = {fd: pid for pid, (_, fd) in self._subs.items()}
                wake = self._wake_r
            poller = select.poll()
            poller.register(wake, select.POLLIN)
            for fd in fds:
                poller.register(fd, select.POLLIN)
            wait = max(self.orphan_interval - (time.monotonic() - last_scan), 0.0)
            try:
                ready = poller.poll(int(wait * 1000))
            except InterruptedError:
                continue
            for fd, _ in ready:
                if fd == wake:
                    with contextlib.suppress(OSError):
                        os.read(wake, 4096)
                    continue
                pid = fds.get(fd)
                if pid is not None:
                    self._reap_subscribed(pid)
            # Orphans are collected on a timer, off the path of a subscribed exit.
            if time.monotonic() - last_scan >= self.orphan_interval:
                self._reap_orphans()
                last_scan = time.monotonic()

    def _reap_subscribed(self, pid: int) -> None:
        with self._lock:
            entry = self._subs.get(pid)
            if entry is None:
                return
            sub, fd = entry
            try:
                got, status = os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                got, status = pid, -1
            if got == 0:
                return  # readable but not yet exited: spurious
            del self._subs[pid]
            os.close(fd)
            result = (
                ExitStatus.from_wait_status(status, _now())
                if status >= 0
                else ExitStatus(exit_code=255, exited_at=_now())
            )
            self._remember(pid, result)
        sub._resolve(result)

    def _remember(self, pid: int, status: ExitStatus) -> None:
        self._exited[pid] = status
        while len(self._exited) > _REMEMBERED_EXITS:
            self._exited.popitem(last=False)

    def _reap_orphans(self) -> None:
        with self._lock:
            for pid in _children():
                if pid in self._subs or not _is_container_zombie(pid):
                    continue
                try:
                    got, status = os.waitpid(pid, os.WNOHANG)
                except ChildProcessError:
                    continue
                if got:
                    self._remember(pid, ExitStatus.from_wait_status(status, _now()))


_DEFAULT: Monitor | None = None
_DEFAULT_LOCK = threading.Lock()


def default_monitor() -> Monitor:
    """The process-wide monitor (created on first use; started by its first subscription)."""
    global _DEFAULT
    with _DEFAULT_LOCK:
        if _DEFAULT is None:
            _DEFAULT = Monitor()
        return _DEFAULT


# -- a process that must be gone before a call returns (exec_sync on timeout) ----------------


def kill_process_group(pidfd: int, pid: int) -> None:
    """SIGKILL the process behind ``pidfd`` and its process group (never ours, never pgid 1).

    ``pid`` is the process's pid; the group is looked up while the pidfd shows it still
    exists, so a recycled pid is never signalled.
    """
    try:
        _signal.pidfd_send_signal(pidfd, 0)
        pgid = os.getpgid(pid)
        _signal.pidfd_send_signal(pidfd, 0)
    except ProcessLookupError:
        return
    if pgid > 1 and pgid != os.getpgrp():
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pgid, _signal.SIGKILL)
    with contextlib.suppress(ProcessLookupError):
        _signal.pidfd_send_signal(pidfd, _signal.SIGKILL)


def wait_gone(pidfd: int, timeout: float) -> bool:
    """Wait until the process behind ``pidfd`` has exited and been reaped; True once gone.

    Its exit is waited for on the pidfd. Our child (a subreaper inherits orphans) is reaped
    here at once; another parent's zombie is checked for every few milliseconds until reaped.
    """
    deadline = time.monotonic() + timeout
    poller = select.poll()
    poller.register(pidfd, select.POLLIN)
    if not poller.poll(max(int(timeout * 1000), 0)):
        return False
    delay = 0.0005
    while True:
        with contextlib.suppress(ChildProcessError):
            os.waitid(os.P_PIDFD, pidfd, os.WEXITED | os.WNOHANG)
        try:
            _signal.pidfd_send_signal(pidfd, 0)
        except ProcessLookupError:
            return True
        left = deadline - time.monotonic()
        if left <= 0:
            return False
        time.sleep(min(delay, left))
        delay = min(delay * 2, 0.02)


def wait_exit(pid: int, timeout: float | None) -> bool | None:
    """Wait on a pidfd for any process's exit (not reaping it): True once it has exited,
    False at the timeout, None when it was gone already."""
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return None
    try:
        poller = select.poll()
        poller.register(fd, select.POLLIN)
        return bool(poller.poll(None if timeout is None else int(timeout * 1000)))
    finally:
        os.close(fd)


def kill_pid_file(pid_path: str | os.PathLike[str]) -> None:
    """SIGKILL the process (not its group) whose pid is in ``pid_path``, if there is one."""
    try:
        pid = int(Path(pid_path).read_text().strip())
    except (OSError, ValueError):
        return
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, _signal.SIGKILL)


class PidFileProcess:
    """The process whose pid a runtime wrote to ``pid_path``: killed with its group, waited for.

    The pidfd is opened on first use, so a recycled pid is never signalled afterwards.
    """

    def __init__(self, pid_path: str | os.PathLike[str]) -> None:
        self.pid_path = Path(pid_path)
        self.pid = 0
        self.pidfd = -1

    def _open(self) -> bool:
        if self.pidfd < 0:
            try:
                self.pid = int(self.pid_path.read_text().strip())
                self.pidfd = os.pidfd_open(self.pid)
            except (OSError, ValueError):
                return False
        return True

    def kill(self) -> None:
        """SIGKILL the process and its process group (nothing if the pid file is not there)."""
        if self._open():
            kill_process_group(self.pidfd, self.pid)

    def wait_gone(self, timeout: float = 10.0) -> None:
        """Return once the process has exited and been reaped; ``RuntimeTimeoutError`` if not."""
        if self.pidfd >= 0 and not wait_gone(self.pidfd, timeout):
            raise RuntimeTimeoutError(
                f"process {self.pid} (from {self.pid_path}) still exists {timeout} s after SIGKILL"
            )

    def close(self) -> None:
        """Close the pidfd."""
        if self.pidfd >= 0:
            os.close(self.pidfd)
            self.pidfd = -1

    def __enter__(self) -> PidFileProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
