"""Two ways to supervise containers behind one interface: in-process, or by conmon.

A :class:`Supervisor` starts a container with its output going to a CRI log file, waits for
its exit status, runs ``exec_sync``, attaches to its stdio, resizes its tty, reopens its log
and stops it:

* :class:`InProcessSupervisor` wraps :class:`~podkit.runtime.runc.Runc` and its in-process
  monitor; this process pumps the container's stdout/stderr (pipes, or the pty master from the
  console socket) into a :class:`~podkit.runtime.logs.CRILogWriter`. For scripts that outlive
  their containers: when this process exits, nobody logs or reaps any more.
* :class:`ConmonSupervisor` wraps :class:`~podkit.runtime.conmon.Conmon`; containers outlive
  the process, and a new process finds them again through the state dir. ``exec_sync`` runs
  the runtime's exec from this process (it need not outlive it), not under a new conmon.

Both write the same log format and return the same values, so callers (the sandbox layer)
pick a mode with one constructor.
"""

from __future__ import annotations

import contextlib
import os
import queue
import signal as _signal
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import IO, Protocol, runtime_checkable

from podkit._files import validate_id
from podkit.errors import InvalidArgumentError
from podkit.runtime.base import ExecResult, ExitStatus
from podkit.runtime.conmon import Attachment, Conmon
from podkit.runtime.console import Console, ConsoleSocket
from podkit.runtime.errors import NotFoundError, NotRunningError, RuntimeTimeoutError
from podkit.runtime.exec_sync import container_process
from podkit.runtime.io import PipeIO
from podkit.runtime.logs import STDERR, STDOUT, CRILogWriter
from podkit.runtime.runc import Runc

__all__ = [
    "AttachStream",
    "ConmonSupervisor",
    "InProcessAttachment",
    "InProcessSupervisor",
    "Supervisor",
]

_READ_CHUNK = 32 * 1024


@runtime_checkable
class AttachStream(Protocol):
    """A live connection to a container's stdio (conmon's socket or an in-process fan-out)."""

    def recv(self, timeout: float | None = None) -> tuple[str, bytes] | None:
        """Next ``(stream, data)`` of output, ``None`` once the output ended."""
        ...

    def send(self, data: bytes) -> None:
        """Write to the container's stdin."""
        ...

    def close_stdin(self) -> None:
        """End the container's stdin."""
        ...

    def close(self) -> None:
        """Detach; the container keeps running."""
        ...


@runtime_checkable
class Supervisor(Protocol):
    """Start, watch and control containers; their output goes to a CRI log file."""

    def start(
        self,
        id: str,
        bundle: str | os.PathLike[str],
        *,
        log_path: str | os.PathLike[str],
        tty: bool = False,
        stdin: bool = False,
        stdin_once: bool = False,
    ) -> int:
        """Create and start the container (``process.terminal`` must match ``tty``); its pid.

        A missing directory of ``log_path`` is created. ``stdin_once``: the container's stdin
        closes when the first attached client detaches.
        """
        ...

    def wait(self, id: str, timeout: float | None = None) -> ExitStatus:
        """Block until the container exited; its status (``RuntimeTimeoutError`` on timeout)."""
        ...

    def exec_sync(
        self, id: str, args: Sequence[str], timeout: float | None = None
    ) -> ExecResult:
        """Run a command in the container and collect exit code and output."""
        ...

    def attach(self, id: str) -> AttachStream:
        """Connect to the container's stdio (output from now on; stdin if started with it)."""
        ...

    def resize(self, id: str, rows: int, cols: int) -> None:
        """Resize the container's tty."""
        ...

    def reopen_log(self, id: str) -> None:
        """Continue the log in a new file at the log path (after it was moved away)."""
        ...

    def stop(self, id: str, timeout: float = 10.0) -> ExitStatus:
        """SIGTERM, wait ``timeout`` seconds, SIGKILL; the exit status."""
        ...

    def delete(self, id: str, force: bool = False) -> None:
        """Remove the container and the supervisor's state for it."""
        ...


class ConmonSupervisor:
    """:class:`Supervisor` backed by conmon (containers outlive this process)."""

    def __init__(self, conmon: Conmon) -> None:
        self.conmon = conmon

    def start(
        self,
        id: str,
        bundle: str | os.PathLike[str],
        *,
        log_path: str | os.PathLike[str],
        tty: bool = False,
        stdin: bool = False,
        stdin_once: bool = False,
    ) -> int:
        """Create under a new conmon and start; the container's pid."""
        record = self.conmon.run(
            id, bundle, log_path=log_path, tty=tty, stdin=stdin, stdin_once=stdin_once
        )
        return record.pid

    def wait(self, id: str, timeout: float | None = None) -> ExitStatus:
        """Wait for conmon's exit file."""
        return self.conmon.wait(id, timeout)

    def exec_sync(
        self, id: str, args: Sequence[str], timeout: float | None = None
    ) -> ExecResult:
        """The runtime's exec run from this process with the container's own process settings.

        An exec_sync need not outlive this process, so no conmon is started for it; this process
        does not become a child subreaper either (``Runc.exec_sync_process``). A runtime other
        than ``Runc`` still goes through ``Conmon.exec_sync``.
        """
        runtime = self.conmon.runtime
        if not isinstance(runtime, Runc):
            return self.conmon.exec_sync(id, args, timeout)
        record = self.conmon.get(id)  # NotFoundError for a container conmon never ran
        if timeout is not None and timeout <= 0:
            raise InvalidArgumentError(f"invalid exec timeout {timeout}: must be > 0")
        # its files in the container's dir, as conmon's were: removed with it after a crash
        return runtime.exec_sync_process(id, container_process(record.bundle, args), timeout,
                                         workdir=self.conmon.container_dir(id))

    def attach(self, id: str) -> Attachment:
        """Connect to conmon's attach socket."""
        return self.conmon.attach(id)

    def resize(self, id: str, rows: int, cols: int) -> None:
        """Resize through conmon's ctl FIFO."""
        self.conmon.resize(id, rows, cols)

    def reopen_log(self, id: str) -> None:
        """Reopen through conmon's ctl FIFO."""
        self.conmon.reopen_log(id)

    def stop(self, id: str, timeout: float = 10.0) -> ExitStatus:
        """SIGTERM, wait, SIGKILL."""
        return self.conmon.stop(id, timeout)

    def delete(self, id: str, force: bool = False) -> None:
        """Delete from the runtime and remove conmon's files."""
        self.conmon.delete(id, force=force)


class InProcessAttachment:
    """An :class:`AttachStream` fed by this process's output pumps."""

    def __init__(self, session: _Session) -> None:
        self._session = session
        self._queue: queue.Queue[tuple[str, bytes] | None] = queue.Queue()

    def _feed(self, item: tuple[str, bytes] | None) -> None:
        self._queue.put(item)

    def recv(self, timeout: float | None = None) -> tuple[str, bytes] | None:
        """Next output, ``None`` once the container's output ended."""
        try:
            return self._queue.get(timeout=timeout)
        except queue.Empty:
            raise RuntimeTimeoutError(
                f"no output from container {self._session.id} within {timeout}s"
            ) from None

    def send(self, data: bytes) -> None:
        """Write to the container's stdin."""
        self._session.write_stdin(data)

    def close_stdin(self) -> None:
        """Close the container's stdin."""
        self._session.close_stdin()

    def close(self) -> None:
        """Stop receiving output."""
        self._session.detach(self)

    def __enter__(self) -> InProcessAttachment:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class _Session:
    """This process's side of one container: log writer, pumps, stdin, console, attachers."""

    def __init__(self, id: str, writer: CRILogWriter) -> None:
        self.id = id
        self.writer = writer
        self.console: Console | None = None
        self.stdin: IO[bytes] | None = None
        self._attachers: list[InProcessAttachment] = []
        self._threads: list[threading.Thread] = []
        self._lock = threading.Lock()
        self._pumps = 0
        self._ended = False
        self.stdin_once = False

    def pump(self, fd: int, stream: str) -> None:
        """Copy ``fd`` (owned) into the log and to attachers on a daemon thread."""

        def run() -> None:
            try:
                while True:
                    try:
                        chunk = os.read(fd, _READ_CHUNK)
                    except OSError:  # EIO: every process on the tty is gone
                        break
                    if not chunk:
                        break
                    self.writer.write(stream, chunk)
                    with self._lock:
                        attachers = list(self._attachers)
                    for att in attachers:
                        att._feed((stream, chunk))
                self.writer.flush(stream)
            finally:
                os.close(fd)
                self._pump_done()

        thread = threading.Thread(target=run, name=f"pump-{self.id}-{stream}", daemon=True)
        with self._lock:
            self._pumps += 1
        self._threads.append(thread)
        thread.start()

    def _pump_done(self) -> None:
        with self._lock:
            self._pumps -= 1
            if self._pumps:
                return
            self._ended = True
            attachers = list(self._attachers)
        for att in attachers:
            att._feed(None)

    def attach(self) -> InProcessAttachment:
        att = InProcessAttachment(self)
        with self._lock:
            ended = self._ended
            if not ended:
                self._attachers.append(att)
        if ended:
            att._feed(None)
        return att

    def detach(self, att: InProcessAttachment) -> None:
        with self._lock, contextlib.suppress(ValueError):
            self._attachers.remove(att)
        if self.stdin_once:
            self.close_stdin()

    def write_stdin(self, data: bytes) -> None:
        if self.console is not None:
            self.console.write(data)
        elif self.stdin is not None:
            self.stdin.write(data)
        else:
            raise InvalidArgumentError(f"container {self.id} was started without stdin")

    def close_stdin(self) -> None:
        if self.stdin is not None:
            self.stdin.close()
            self.stdin = None

    def finish(self, timeout: float = 10.0) -> None:
        """Wait for the pumps, then close the log and the console."""
        for thread in self._threads:
            thread.join(timeout)
        self.writer.close()
        self.close_stdin()
        if self.console is not None:
            self.console.close()


class InProcessSupervisor:
    """:class:`Supervisor` in this process: ``Runc`` + its monitor + a CRI log writer.

    ``log_max_size``/``log_max_files`` rotate each container's log (see
    :class:`~podkit.runtime.logs.CRILogWriter`).
    """

    def __init__(self, runtime: Runc, *, log_max_size: int = 0, log_max_files: int = 1) -> None:
        self.runtime = runtime
        self.log_max_size = log_max_size
        self.log_max_files = log_max_files
        self._sessions: dict[str, _Session] = {}
        self._lock = threading.Lock()

    def _session(self, id: str) -> _Session:
        with self._lock:
            session = self._sessions.get(validate_id(id, "container ID"))
        if session is None:
            raise NotFoundError(f"container {id!r} is not supervised by this process")
        return session

    def start(
        self,
        id: str,
        bundle: str | os.PathLike[str],
        *,
        log_path: str | os.PathLike[str],
        tty: bool = False,
        stdin: bool = False,
        stdin_once: bool = False,
    ) -> int:
        """Create with pipes (or a console socket for ``tty``), pump output, start.

        A missing directory of ``log_path`` is created, as conmon does.
        """
        validate_id(id, "container ID")
        with self._lock:
            if id in self._sessions:
                raise InvalidArgumentError(f"container {id!r} is already supervised here")
        # like conmon: the log's directory is created (and kept) when missing
        Path(log_path).parent.mkdir(parents=True, exist_ok=True)
        log_existed = Path(log_path).exists()
        writer = CRILogWriter(
            Path(log_path), max_size=self.log_max_size, max_files=self.log_max_files
        )
        session = _Session(id, writer)
        session.stdin_once = stdin_once
        created = False
        try:
            if tty:
                with ConsoleSocket() as cs:
                    pid = self.runtime.create(id, bundle, console_socket=cs.path)
                    created = True
                    session.console = cs.receive()
                session.pump(os.dup(session.console.fd), STDOUT)
            else:
                io = PipeIO(stdin=stdin)
                try:
                    pid = self.runtime.create(id, bundle, io=io)
                    created = True
                    for stream, pipe in ((STDOUT, io.stdout), (STDERR, io.stderr)):
                        assert pipe is not None
                        session.pump(os.dup(pipe.fileno()), stream)
                    session.stdin, io.stdin = io.stdin, None
                finally:
                    io.close()
            self.runtime.start(id)
        except BaseException:
            if created:
                with contextlib.suppress(Exception):
                    self.runtime.delete(id, force=True)
            session.finish(timeout=5.0)
            if not log_existed:
                Path(log_path).unlink(missing_ok=True)
            raise
        with self._lock:
            self._sessions[id] = session
        return pid

    def wait(self, id: str, timeout: float | None = None) -> ExitStatus:
        """The init's status from the monitor; then the log is complete and closed."""
        session = self._session(id)
        status = self.runtime.wait(id, timeout)
        session.finish()
        return status

    def exec_sync(
        self, id: str, args: Sequence[str], timeout: float | None = None
    ) -> ExecResult:
        """``Runc.exec_sync``."""
        return self.runtime.exec_sync(id, args, timeout)

    def attach(self, id: str) -> InProcessAttachment:
        """Receive output from now on; send stdin if started with it."""
        return self._session(id).attach()

    def resize(self, id: str, rows: int, cols: int) -> None:
        """Resize the pty (``tty=True`` containers only)."""
        session = self._session(id)
        if session.console is None:
            raise InvalidArgumentError(f"container {id!r} has no tty to resize")
        if session.console.fd < 0:
            raise NotRunningError(f"container {id!r} has exited")
        session.console.resize(rows, cols)

    def reopen_log(self, id: str) -> None:
        """Reopen the log path (after it was moved away)."""
        self._session(id).writer.reopen()

    def stop(self, id: str, timeout: float = 10.0) -> ExitStatus:
        """``Runc.stop`` (SIGTERM, wait, SIGKILL), then the exit status."""
        self._session(id)
        self.runtime.stop(id, timeout=timeout, signal=_signal.SIGTERM)
        return self.wait(id, 60.0)

    def delete(self, id: str, force: bool = False) -> None:
        """Delete from the runtime; close the log and stdio."""
        session = self._session(id)
        self.runtime.delete(id, force=force)
        session.finish(timeout=10.0)
        with self._lock:
            self._sessions.pop(id, None)
