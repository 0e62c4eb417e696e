"""One way to start a program: explicit env and descriptors, its own process group, a deadline.

``spawn`` starts ``argv`` with exactly the environment it is given and exactly the descriptors
of its fd map (child fd -> parent fd; 0, 1 and 2 default to ``/dev/null``, everything else is
closed), signal dispositions reset, in a new session or process group. ``Child.wait`` waits on
a pidfd (a ``waitpid`` poll where there is none) and ``Child.kill_group`` SIGKILLs the whole
group. ``run`` adds stdin data, bounded capture of stdout and stderr, and a timeout that kills
the group and stops reading, so a grandchild holding the pipes never hangs the caller.

The fast path is ``os.posix_spawn`` (vfork + exec); a ``cwd`` needs ``subprocess`` instead,
which cannot renumber descriptors above 2, so there those must keep their numbers.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import select
import selectors
import signal
import subprocess
import time
from collections.abc import Mapping, Sequence
from typing import NamedTuple

__all__ = ["Child", "Output", "ProcTimeout", "Result", "run", "spawn"]

_RESET_SIGNALS = (signal.SIGPIPE, signal.SIGXFSZ)  # Python ignores these; children must not
_POLL_STEP = 0.005  # first sleep of the waitpid poll without pidfds (doubles up to 0.1 s)


class ProcTimeout(TimeoutError):
    """The program outlived its deadline (``run``: its group was killed; ``wait``: not)."""

    def __init__(self, argv: Sequence[str], seconds: float, stdout: Output | None = None,
                 stderr: Output | None = None, *, pid: int = 0) -> None:
        super().__init__(f"{argv[0] if argv else '?'} still running after {seconds:g} s")
        self.argv = list(argv)
        self.pid = pid
        self.seconds = seconds
        self.stdout = stdout if stdout is not None else Output(b"", 0)
        self.stderr = stderr if stderr is not None else Output(b"", 0)


class Output(NamedTuple):
    """Captured bytes of one stream; ``dropped`` counts the bytes past the cap (read, not kept)."""

    data: bytes
    dropped: int

    @property
    def truncated(self) -> bool:
        """True when the stream wrote more than the cap."""
        return self.dropped > 0


class Result(NamedTuple):
    """What ``run`` saw: Popen-style ``returncode`` (``-N`` when killed by signal N) and output."""

    returncode: int
    stdout: Output
    stderr: Output


class Child:
    """A started program: wait for it (pidfd), poll it, kill its group. Reaped exactly once."""

    def __init__(self, pid: int, argv: Sequence[str], popen: subprocess.Popen[bytes] | None = None
                 ) -> None:
        self.pid = pid
        self.argv = list(argv)
        self.returncode: int | None = None
        self._popen = popen

    def __repr__(self) -> str:
        return f"Child(pid={self.pid}, argv0={self.argv[0]!r}, returncode={self.returncode})"

    def _reaped(self, status: int) -> int:
        code = -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.waitstatus_to_exitcode(status)
        self.returncode = code
        if self._popen is not None:  # so subprocess never waits for this pid again
            self._popen.returncode = code
        return code

    def poll(self) -> int | None:
        """The return code once the program has exited (reaping it), else ``None``."""
        if self.returncode is not None:
            return self.returncode
        try:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
        except ChildProcessError:
            return self._reaped(0)  # someone else reaped it: the status is lost
        return None if pid == 0 else self._reaped(status)

    def wait(self, timeout: float | None = None) -> int:
        """Block until exit; the return code. ``ProcTimeout`` after ``timeout`` s (still runs)."""
        if self.returncode is not None:
            return self.returncode
        if timeout is not None and not self.exited_within(timeout):
            raise ProcTimeout(self.argv, timeout, pid=self.pid)
        while self.returncode is None:  # (the poll without pidfds may have reaped it)
            try:
                _, status = os.waitpid(self.pid, 0)
            except InterruptedError:
                continue
            except ChildProcessError:
                return self._reaped(0)
            return self._reaped(status)
        return self.returncode

    def exited_within(self, timeout: float) -> bool:
        """Whether the program exits within ``timeout`` s (a pidfd poll; it is not reaped)."""
        fd = open_pidfd(self.pid)
        if fd is None:
            return self._poll_until(time.monotonic() + timeout)
        try:
            poller = select.poll()
            poller.register(fd, select.POLLIN)
            return bool(poller.poll(max(int(timeout * 1000), 1)))
        finally:
            os.close(fd)

    def _poll_until(self, deadline: float) -> bool:
        step = _POLL_STEP
        while self.poll() is None:
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            time.sleep(min(step, left))
            step = min(step * 2, 0.1)
        return True

    def kill_group(self) -> int:
        """SIGKILL the program's process group and the program, then reap it; its return code."""
        if self.returncode is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.pid, signal.SIGKILL)
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signal.SIGKILL)
        else:  # reaped: the group may live on, but the pid may belong to someone else now
            return self.returncode
        return self.wait()


def open_pidfd(pid: int) -> int | None:
    """A pidfd of ``pid``, or ``None`` where the kernel or Python has none (or it is gone)."""
    opener = getattr(os, "pidfd_open", None)
    if opener is None:
        return None
    try:
        fd: int = opener(pid)
    except OSError:
        return None
    return fd


def _leaked_fds(keep: set[int]) -> list[int]:
    """Descriptors of this process a child would inherit (no close-on-exec), except ``keep``."""
    leaked = []
    with contextlib.suppress(OSError):
        for name in os.listdir("/proc/self/fd"):
            fd = int(name)
            if fd in keep:
                continue
            try:
                if not fcntl.fcntl(fd, fcntl.F_GETFD) & fcntl.FD_CLOEXEC:
                    leaked.append(fd)
            except OSError:  # the listing's own descriptor, closed by now
                continue
    return leaked


def spawn(
    argv: Sequence[str],
    *,
    env: Mapping[str, str],
    fds: Mapping[int, int] | None = None,
    cwd: str | os.PathLike[str] | None = None,
    session: bool = True,
) -> Child:
    """Start ``argv`` (``argv[0]`` a path) with ``env`` and the fd map ``fds`` (child -> parent).

    ``session``: a new session (``setsid``), else only a new process group; either way the
    child leads its own group. Raises ``OSError`` when the program cannot be executed.
    """
    fds = dict(fds or {})
    devnull = -1
    if any(t not in fds for t in (0, 1, 2)):
        devnull = os.open(os.devnull, os.O_RDWR | os.O_CLOEXEC)
        for t in (0, 1, 2):
            fds.setdefault(t, devnull)
    try:
        if cwd is not None:
            return _spawn_in(argv, env, fds, cwd, session)
        return _posix_spawn(argv, env, fds, session)
    finally:
        if devnull >= 0:
            os.close(devnull)


def _posix_spawn(argv: Sequence[str], env: Mapping[str, str], fds: Mapping[int, int],
                 session: bool) -> Child:
    """The fast path: sources moved above every target, dup2 into place, the rest closed."""
    floor = max(max(fds) + 1, 3)
    moved: list[tuple[int, int]] = []
    try:
        for target, src in fds.items():
            moved.append((target, fcntl.fcntl(src, fcntl.F_DUPFD_CLOEXEC, floor)))
        actions: list[tuple[int, int] | tuple[int, int, int]] = [
            (os.POSIX_SPAWN_CLOSE, fd) for fd in _leaked_fds(set(fds))
        ]
        actions += [(os.POSIX_SPAWN_DUP2, high, target) for target, high in moved]
        if session:
            pid = os.posix_spawn(argv[0], list(argv), dict(env), file_actions=actions,
                                 setsid=True, setsigdef=_RESET_SIGNALS, setsigmask=())
        else:
            pid = os.posix_spawn(argv[0], list(argv), dict(env), file_actions=actions,
                                 setpgroup=0, setsigdef=_RESET_SIGNALS, setsigmask=())
    finally:
        for _, high in moved:
            os.close(high)
    return Child(pid, argv)


def _spawn_in(argv: Sequence[str], env: Mapping[str, str], fds: Mapping[int, int],
              cwd: str | os.PathLike[str], session: bool) -> Child:
    """Through ``subprocess`` (it can ``chdir``); fds above 2 must keep their numbers."""
    extra = {t: s for t, s in fds.items() if t > 2}
    if any(t != s for t, s in extra.items()):
        raise ValueError(f"with cwd, descriptors above 2 keep their numbers: {extra}")
    popen = subprocess.Popen(
        list(argv), executable=argv[0], env=dict(env), cwd=cwd, stdin=fds[0], stdout=fds[1],
        stderr=fds[2], pass_fds=tuple(extra), close_fds=True, restore_signals=True,
        start_new_session=session, process_group=None if session else 0,
    )
    return Child(popen.pid, argv, popen)


# --- run: stdin in, bounded stdout and stderr out, a deadline --------------------------------


class _Capture:
    """Keeps the first ``cap`` bytes of a stream (all with ``cap=None``), counts the rest."""

    def __init__(self, cap: int | None) -> None:
        self.cap = cap
        self.chunks: list[bytes] = []
        self.kept = 0
        self.dropped = 0

    def add(self, block: bytes) -> None:
        room = len(block) if self.cap is None else max(0, self.cap - self.kept)
        if room < len(block):
            self.dropped += len(block) - room
            block = block[:room]
        if block:
            self.chunks.append(block)
            self.kept += len(block)

    def output(self) -> Output:
        return Output(b"".join(self.chunks), self.dropped)


def run(
    argv: Sequence[str],
    *,
    env: Mapping[str, str],
    stdin: bytes | None = None,
    timeout: float | None = None,
    cap: int | None = None,
    grace: float = 0.2,
    session: bool = True,
) -> Result:
    """Run ``argv`` to its end: ``stdin`` written to it, stdout and stderr captured.

    ``cap`` bytes of each stream are kept (``None``: all); the rest is read and dropped, and
    ``Output.dropped`` says how much. After the program exits, reading goes on for at most
    ``grace`` s while a leftover descendant holds the pipes. After ``timeout`` s the process
    group is killed and ``ProcTimeout`` (with the output so far) is raised.
    """
    deadline = None if timeout is None else time.monotonic() + timeout
    mine: list[int] = []  # this process's pipe ends (the pump owns them once it exists)
    theirs: list[int] = []  # the child's ends, closed here once it has them
    try:
        if stdin is not None:
            in_r, in_w = os.pipe2(os.O_CLOEXEC)
            theirs.append(in_r)
            mine.append(in_w)
        out_r, out_w = os.pipe2(os.O_CLOEXEC)
        err_r, err_w = os.pipe2(os.O_CLOEXEC)
        mine += [out_r, err_r]
        theirs += [out_w, err_w]
        fds = {1: out_w, 2: err_w} | ({0: in_r} if stdin is not None else {})
        try:
            child = spawn(argv, env=env, fds=fds, session=session)
        finally:
            for fd in theirs:
                os.close(fd)
        try:
            pump = _Pump(child, in_w if stdin is not None else -1, stdin or b"", out_r, err_r,
                         cap, grace)
        except BaseException:
            child.kill_group()
            raise
        mine = []
    finally:
        for fd in mine:
            os.close(fd)
    try:
        timed_out = pump.run(deadline)
    except BaseException:
        child.kill_group()
        raise
    if timed_out:
        child.kill_group()
        raise ProcTimeout(argv, timeout or 0.0, pump.out.output(), pump.err.output(),
                          pid=child.pid)
    return Result(child.wait(), pump.out.output(), pump.err.output())


class _Pump:
    """Moves bytes between ``run``'s pipes and the child until it is done or the deadline."""

    def __init__(self, child: Child, in_w: int, data: bytes, out_r: int, err_r: int,
                 cap: int | None, grace: float) -> None:
        self.child = child
        self.grace = grace
        self.out = _Capture(cap)
        self.err = _Capture(cap)
        self.sel = selectors.DefaultSelector()
        self.readers = {out_r: self.out, err_r: self.err}
        self.in_w = in_w
        self.pending = memoryview(data)
        for fd in self.readers:
            self.sel.register(fd, selectors.EVENT_READ)
        if in_w >= 0:
            if self.pending:
                os.set_blocking(in_w, False)
                self.sel.register(in_w, selectors.EVENT_WRITE)
            else:
                self._close_stdin()
        self.pidfd = open_pidfd(child.pid)
        if self.pidfd is not None:
            self.sel.register(self.pidfd, selectors.EVENT_READ)

    def run(self, deadline: float | None) -> bool:
        """Pump until the pipes close (after exit) or the grace ends; True on timeout."""
        try:
            exited_at: float | None = None
            while True:
                reading = any(fd in self.readers for fd in self.sel.get_map())
                now = time.monotonic()
                if exited_at is None and (self.pidfd is None or not reading) \
                        and self.child.poll() is not None:
                    exited_at = now
                if not reading and (exited_at is not None or self.pidfd is None):
                    break
                limit = deadline
                if exited_at is not None:
                    limit = exited_at + self.grace if limit is None else min(
                        limit, exited_at + self.grace)
                if limit is not None and now >= limit:
                    return exited_at is None
                wait = None if limit is None else max(0.0, limit - now)
                if self.pidfd is None and exited_at is None:
                    wait = 0.05 if wait is None else min(wait, 0.05)
                for key, _ in self.sel.select(wait):
                    if self._handle(key.fd) and exited_at is None:
                        exited_at = time.monotonic()
            if self.child.poll() is None:  # pipes closed early (no pidfd): wait for the exit
                left = None if deadline is None else max(0.0, deadline - time.monotonic())
                return left is not None and not self.child.exited_within(left)
            return False
        finally:
            self._close()

    def _handle(self, fd: int) -> bool:
        """Serve one ready descriptor; True when it was the pidfd of an exited child."""
        if fd == self.pidfd:
            self.sel.unregister(fd)
            os.close(fd)
            self.pidfd = None
            return self.child.poll() is not None
        if fd == self.in_w:
            try:
                n = os.write(fd, self.pending[:65536])
                self.pending = self.pending[n:]
            except BrokenPipeError:
                self.pending = self.pending[:0]
            if not len(self.pending):
                self.sel.unregister(fd)
                self._close_stdin()
            return False
        block = os.read(fd, 65536)
        if block:
            self.readers[fd].add(block)
        else:
            self.sel.unregister(fd)
        return False

    def _close_stdin(self) -> None:
        if self.in_w >= 0:
            os.close(self.in_w)
            self.in_w = -1

    def _close(self) -> None:
        self.sel.close()
        self._close_stdin()
        for fd in self.readers:
            os.close(fd)
        if self.pidfd is not None:
            os.close(self.pidfd)
            self.pidfd = None
