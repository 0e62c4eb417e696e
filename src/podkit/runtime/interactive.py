"""Interactive exec: a process in a running container wired to local file descriptors.

What ``docker exec -i -t`` does without a streaming server: ``runc exec`` (or crun) of the
container's own process settings (user, env, cwd, capabilities) with the command replaced,
either over pipes (stdin optional; stdout and stderr kept apart) or on a new pty in the
container (the console socket hands its master over; output is one stream, input and window
size go to it). The caller owns the local side: :meth:`ExecSession.pump` copies between the
process and the given descriptors until it exits; :meth:`ExecSession.resize` forwards a size.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
from collections.abc import Sequence

from podkit import oci
from podkit.oci import codec
from podkit.runtime.base import ExitStatus
from podkit.runtime.bundle import Bundle
from podkit.runtime.console import Console, ConsoleSocket
from podkit.runtime.errors import RuntimeTimeoutError
from podkit.runtime.io import PipeIO, wait_readable
from podkit.runtime.results import ExecProcess
from podkit.runtime.runc import Runc

__all__ = ["ExecSession", "exec_process"]

# the caller's handlers for these run in its main thread: the copy threads never take them
_MAIN_THREAD_SIGNALS = {signal.SIGINT, signal.SIGTERM, signal.SIGWINCH, signal.SIGHUP}

_DRAIN = 2.0  # seconds of output still read after the process exited (background holders)
_TICK = 0.25  # the copy loop wakes this often, so the caller's signal handlers (SIGWINCH) run
_EOT = b"\x04"  # a terminal's end of input: what stdin's EOF becomes on a tty


def exec_process(runtime: Runc, id: str, cmd: Sequence[str], *, tty: bool,
                 size: tuple[int, int] | None = None) -> oci.Process:
    """The container's own process (from its bundle) running ``cmd``; with a tty, on a
    terminal of ``size`` (rows, cols) with ``TERM=xterm`` as containerd sets it."""
    if isinstance(cmd, str) or not cmd:
        raise ValueError(f"exec in {id}: the command must be a non-empty list, got {cmd!r}")
    spec = Bundle.load(runtime.state(id).bundle).spec
    proc = codec.deep_copy(spec.process) if spec.process is not None else oci.Process(cwd="/")
    proc.args = list(cmd)
    proc.terminal = tty
    proc.console_size = oci.Box(height=size[0], width=size[1]) if tty and size else None
    if tty:
        proc.env = [e for e in proc.env or [] if not e.startswith("TERM=")] + ["TERM=xterm"]
    return proc


class ExecSession:
    """A started exec: the process and its pipes (``io``) or its terminal (``console``)."""

    def __init__(self, process: ExecProcess, *, io: PipeIO | None = None,
                 console: Console | None = None) -> None:
        self.process = process
        self.io = io
        self.console = console
        self._exit_r, self._exit_w = os.pipe2(os.O_CLOEXEC)
        if process.subscription is not None:
            process.subscription.add_done_callback(lambda _: self._wake())

    def _wake(self) -> None:
        with contextlib.suppress(OSError):
            os.write(self._exit_w, b"x")

    @classmethod
    def start(cls, runtime: Runc, id: str, cmd: Sequence[str], *, stdin: bool, tty: bool,
              size: tuple[int, int] | None = None) -> ExecSession:
        """Start ``cmd`` in container ``id``: on a pty when ``tty``, else over pipes (with a
        stdin pipe when ``stdin``)."""
        proc = exec_process(runtime, id, cmd, tty=tty, size=size)
        if tty:
            with ConsoleSocket() as cs:
                started = runtime.exec(id, proc, detach=True, console_socket=cs)
                assert isinstance(started, ExecProcess)
                try:
                    console = cs.receive(timeout=30)
                except BaseException:
                    _kill(started)
                    raise
            return cls(started, console=console)
        user = proc.user
        io = PipeIO(user.uid if user else None, user.gid if user else None, stdin=stdin)
        try:
            started = runtime.exec(id, proc, detach=True, io=io)
        except BaseException:
            io.close()
            raise
        assert isinstance(started, ExecProcess)
        return cls(started, io=io)

    def resize(self, rows: int, cols: int) -> None:
        """Set the terminal size the process sees (no-op without a tty)."""
        if self.console is not None:
            self.console.resize(rows, cols)

    def _sources(self, stdout_fd: int, stderr_fd: int) -> dict[int, int]:
        """Process-side output fd -> local fd."""
        if self.console is not None:
            return {self.console.fileno(): stdout_fd}
        assert self.io is not None
        out = {}
        if self.io.stdout is not None:
            out[self.io.stdout.fileno()] = stdout_fd
        if self.io.stderr is not None:
            out[self.io.stderr.fileno()] = stderr_fd
        return out

    def pump(self, stdin_fd: int | None, stdout_fd: int, stderr_fd: int, *,
             timeout: float | None = None) -> ExitStatus:
        """Copy ``stdin_fd`` to the process and its output to ``stdout_fd``/``stderr_fd``
        until it exits and its output ends; its exit status. After ``timeout`` seconds the
        process is killed and :class:`RuntimeTimeoutError` raised once it is gone."""
        stop_r, stop_w = os.pipe2(os.O_CLOEXEC)
        feeder = None
        if stdin_fd is not None:
            feeder = threading.Thread(target=self._feed, args=(stdin_fd, stop_r),
                                      name="exec-stdin", daemon=True)
            feeder.start()
        deadline = None if timeout is None else time.monotonic() + timeout
        try:
            timed_out = self._copy_out(self._sources(stdout_fd, stderr_fd), deadline)
            try:  # output ended: the process may still run
                status = self._wait(
                    None if deadline is None else max(0.0, deadline - time.monotonic()))
            except RuntimeTimeoutError:
                _kill(self.process)
                timed_out, status = True, self._wait(None)
        finally:
            os.write(stop_w, b"x")
            if feeder is not None:
                feeder.join(5)
            os.close(stop_w)
            os.close(stop_r)
            if self.process.subscription is not None and not self.process.subscription.done():
                _kill(self.process)
        if timed_out:
            raise RuntimeTimeoutError(
                f"exec in {self.process.id} still running after {timeout:g}s: killed")
        return status

    def _wait(self, timeout: float | None) -> ExitStatus:
        if self.process.subscription is None:  # gone before the monitor saw it: unknown
            return ExitStatus(exit_code=255)
        return self.process.wait(timeout)

    def _copy_out(self, sources: dict[int, int], deadline: float | None) -> bool:
        """Copy output until every source ends (or, once exited, ``_DRAIN`` passed); True
        when the ``deadline`` (monotonic) passed and the process was killed."""
        drain_until: float | None = None
        timed_out = False
        while sources:
            now = time.monotonic()
            if drain_until is None and self.process.subscription is not None and \
                    self.process.subscription.done():
                drain_until = now + _DRAIN
            if drain_until is not None and now >= drain_until:
                return timed_out
            if deadline is not None and now >= deadline and not timed_out:
                _kill(self.process)
                timed_out = True
            waits = [t - now for t in (deadline, drain_until) if t is not None and t > now]
            ready = wait_readable([*sources, self._exit_r], min([*waits, _TICK]))
            for fd in ready:
                if fd == self._exit_r:
                    continue
                try:
                    chunk = os.read(fd, 65536)
                except OSError:  # EIO: the pty's last holder is gone
                    chunk = b""
                if not chunk:
                    del sources[fd]
                    continue
                _write_all(sources[fd], chunk)
        return timed_out

    def _feed(self, stdin_fd: int, stop_fd: int) -> None:
        """Copy local input to the process until EOF (then end its input) or a stop."""
        signal.pthread_sigmask(signal.SIG_BLOCK, _MAIN_THREAD_SIGNALS)
        try:
            while True:
                if stop_fd in wait_readable([stdin_fd, stop_fd], None):
                    return  # the process is gone
                data = os.read(stdin_fd, 65536)
                if not data:
                    break
                self._send(data)
            if self.console is not None:
                self.console.write(_EOT)
            elif self.io is not None and self.io.stdin is not None:
                self.io.stdin.close()
        except OSError:  # the process closed its input or exited
            return

    def _send(self, data: bytes) -> None:
        if self.console is not None:
            self.console.write(data)
        elif self.io is not None and self.io.stdin is not None:
            self.io.stdin.write(data)

    def close(self) -> None:
        """Release the pipes or the terminal (the process gets EOF or a hangup)."""
        if self.console is not None:
            self.console.close()
        if self.io is not None:
            self.io.close()
        for fd in (self._exit_r, self._exit_w):
            with contextlib.suppress(OSError):
                os.close(fd)
        self._exit_r = self._exit_w = -1

    def __enter__(self) -> ExecSession:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _kill(process: ExecProcess) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(process.pid, signal.SIGKILL)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]
