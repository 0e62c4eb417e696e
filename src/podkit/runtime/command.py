"""One call of a runtime CLI: its descriptors, the spawn, the deadline and the typed error.

A ``Command`` starts the runtime through ``podkit._proc`` (explicit env, exactly the fds it
needs, its own session) with captured stdout, its stderr and its per-call JSON log
(``--log /proc/self/fd/N``) in anonymous memory files read after it exits; on timeout the
whole process group is killed. ``command_error`` turns a failure into the typed error.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import json
import os
import signal as _signal
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TypeVar

import attrs

from podkit import _proc
from podkit.runtime.base import ExitStatus
from podkit.runtime.children import KilledChildren, kill_children
from podkit.runtime.errors import OCIRuntimeError, RuntimeTimeoutError, parse_runtime_error
from podkit.runtime.io import IO

__all__ = [
    "Command",
    "CommandFds",
    "CommandResult",
    "command_error",
    "create_args",
    "exec_args",
    "logged_error",
    "read_fd",
    "status_from_rc",
]

T = TypeVar("T")


@attrs.define(slots=True)
class CommandResult:
    """A finished command: its return code (``-N``: signal N), captured stdout, its log."""

    returncode: int
    stdout: bytes
    log: str


def read_fd(fd: int) -> bytes:
    """The whole content of the file behind ``fd`` (read from its start)."""
    os.lseek(fd, 0, os.SEEK_SET)
    chunks = []
    while True:
        b = os.read(fd, 65536)
        if not b:
            break
        chunks.append(b)
    return b"".join(chunks)


class CommandFds:
    """The fd map of one command and the memory files this process reads after it.

    ``out`` (captured stdout), ``err`` (stderr when the ``IO`` has none) and ``log`` (the
    per-call JSON log) are anonymous memory files, or -1; all are closed with the context.
    """

    def __init__(self) -> None:
        self.map: dict[int, int] = {}
        self.out = self.err = self.log = -1
        self._owned: list[int] = []

    def memfd(self, name: str, data: bytes = b"") -> int:
        """A new anonymous memory file holding ``data``, closed with the context."""
        fd = os.memfd_create(name, os.MFD_CLOEXEC)
        self._owned.append(fd)
        if data:
            os.write(fd, data)
            os.lseek(fd, 0, os.SEEK_SET)
        return fd

    def place(self, io: IO | None, stdin: bytes | None, capture: bool,
              extra_fds: Sequence[int]) -> None:
        """Child fds 0-2 from ``io`` / ``stdin`` / capture, then ``extra_fds`` as 3, 4, ..."""
        child_in, child_out, child_err = io.child_fds() if io is not None else (None,) * 3
        if stdin is not None:
            child_in = self.memfd("runtime-stdin", stdin)
        if capture:
            child_out = self.out = self.memfd("runtime-stdout")
        if child_err is None:
            child_err = self.err = self.memfd("runtime-stderr")
        for target, fd in ((0, child_in), (1, child_out), (2, child_err)):
            if fd is not None:  # (unset: /dev/null)
                self.map[target] = fd
        for i, fd in enumerate(extra_fds):
            self.map[3 + i] = fd

    def read(self, fd: int) -> bytes:
        """``read_fd`` of one of the memory files (``b""`` for -1)."""
        return read_fd(fd) if fd >= 0 else b""

    def __enter__(self) -> CommandFds:
        return self

    def __exit__(self, *exc: object) -> None:
        for fd in self._owned:
            os.close(fd)


class Command:
    """One runtime CLI call. ``argv_for(log)`` builds the argv given the ``--log`` value.

    ``log`` is the runtime's persistent log file (errors are read from the part this call
    appends), else a per-call memory file is used. ``timeout`` (``<= 0``: none) bounds it.
    """

    def __init__(self, argv_for: Callable[[str], list[str]], *, name: str,
                 env: Mapping[str, str], log: Path | None, timeout: float) -> None:
        self.argv_for = argv_for
        self.name = name
        self.env = env
        self.log = log
        self.timeout = timeout
        self.argv: list[str] = []

    def run(self, *, io: IO | None = None, stdin: bytes | None = None, capture: bool = True,
            extra_fds: Sequence[int] = (),
            on_timeout: Callable[[], None] | None = None) -> CommandResult:
        """Run to the end; ``RuntimeTimeoutError`` (group killed, ``on_timeout`` called first)."""
        offset = 0
        with CommandFds() as fds:
            try:
                fds.place(io, stdin, capture, extra_fds)
                log_arg = self._log_arg(fds, 3 + len(extra_fds))
                if self.log is not None:
                    with contextlib.suppress(FileNotFoundError):
                        offset = self.log.stat().st_size
                child = self._spawn(log_arg, fds.map)
            finally:
                if io is not None:
                    io.close_after_start()
            rc = self.wait(child, on_timeout)
            out = fds.read(fds.out)
            log_text = self._log_text(fds, offset)
        return CommandResult(rc, out, log_text)

    def stream(self, parse: Callable[[bytes], T]) -> Iterator[T]:
        """``parse`` each non-empty stdout line as it comes, until the command ends or the
        generator is closed (its group is killed then); a failure raises the typed error."""
        with CommandFds() as fds:
            fds.err = fds.memfd("runtime-stderr")
            log_arg = self._log_arg(fds, 3)
            read_end, write_end = os.pipe2(os.O_CLOEXEC)
            try:
                child = self._spawn(log_arg, {1: write_end, 2: fds.err} | fds.map)
            except BaseException:
                os.close(read_end)
                raise
            finally:
                os.close(write_end)
            with os.fdopen(read_end, "rb") as stdout:
                try:
                    for line in stdout:
                        if line.strip():
                            yield parse(line)
                    rc = self.wait(child, None)
                    if rc != 0:
                        raise command_error(self.name, rc, self.argv, self._log_text(fds, 0))
                finally:
                    child.kill_group()

    def _log_arg(self, fds: CommandFds, target: int) -> str:
        """The ``--log`` value: the persistent log, or a memory file placed at ``target``."""
        if self.log is not None:
            return str(self.log)
        fds.log = fds.memfd("runtime-log")
        fds.map[target] = fds.log
        return f"/proc/self/fd/{target}"

    def _log_text(self, fds: CommandFds, offset: int) -> str:
        """What this call logged (its stderr when it logged nothing)."""
        if fds.log >= 0:
            text = fds.read(fds.log).decode(errors="replace")
        else:
            text = self._read_log_from(offset)
        if not text.strip() and fds.err >= 0:
            text = fds.read(fds.err).decode(errors="replace")
        return text

    def _read_log_from(self, offset: int) -> str:
        assert self.log is not None
        try:
            with open(self.log, "rb") as f:
                f.seek(offset)
                return f.read().decode(errors="replace")
        except FileNotFoundError:
            return ""

    def _spawn(self, log_arg: str, fds: Mapping[int, int]) -> _proc.Child:
        """Start it in its own session (``FileNotFoundError`` when the binary is gone)."""
        self.argv = self.argv_for(log_arg)
        return _proc.spawn(self.argv, env=self.env, fds=fds)

    def wait(self, child: _proc.Child, on_timeout: Callable[[], None] | None) -> int:
        """The return code; after the timeout the runtime is stopped, the processes it started
        (its children, in whatever session) are killed, then its process group, and all of
        them are reaped before ``RuntimeTimeoutError`` is raised."""
        limit = self.timeout
        try:
            return child.wait(limit if limit > 0 else None)
        except _proc.ProcTimeout:
            with KilledChildren() as killed:
                try:
                    kill_children(child.pid, killed)
                    if on_timeout is not None:
                        on_timeout()
                finally:
                    child.kill_group()
                started, left = len(killed.pidfds), killed.wait_gone()
            detail = (f"processes it started are still there: {left}" if left else
                      f"its process group was killed, and {started} processes it started")
            raise RuntimeTimeoutError(
                f"{self.name} did not finish within {limit} s; {detail}",
                self.argv,
            ) from None
        except BaseException:
            child.kill_group()
            raise


def create_args(
    verb: str,
    id: str,
    bundle: str,
    pid_file: str,
    console_socket: str | os.PathLike[str] | None,
    no_pivot: bool,
    no_new_keyring: bool,
    preserve_fds: int,
    extra: Sequence[str],
) -> list[str]:
    """The arguments of ``create``/``run``/``restore`` (``verb``) after the global flags."""
    args = [verb, "--bundle", bundle, "--pid-file", pid_file]
    if console_socket is not None:
        args += ["--console-socket", os.fspath(console_socket)]
    if no_pivot:
        args.append("--no-pivot")
    if no_new_keyring:
        args.append("--no-new-keyring")
    if preserve_fds:
        args += ["--preserve-fds", str(preserve_fds)]
    return [*args, *extra, id]


def exec_args(id: str, args: Sequence[str], pid_file: str, env: Sequence[str],
              cwd: str | None, user: str | None) -> list[str]:
    """The arguments of a foreground ``exec`` of ``args`` with the container's own process."""
    argv = ["exec", "--pid-file", pid_file]
    for e in env:
        argv += ["--env", e]
    if cwd is not None:
        argv += ["--cwd", cwd]
    if user is not None:
        argv += ["--user", user]
    return [*argv, id, *args]


def command_error(name: str, rc: int, argv: Sequence[str], log_text: str) -> OCIRuntimeError:
    """The typed error of a failed call of runtime ``name`` from its log (or how it ended)."""
    if rc < 0:
        try:
            signame = _signal.Signals(-rc).name
        except ValueError:
            signame = f"signal {-rc}"
        text = log_text or f"{name} was killed by {signame}"
        err = parse_runtime_error(text, argv, name)
        if not log_text:
            return OCIRuntimeError(err.message, argv, "")
        return err
    if not log_text.strip():
        return OCIRuntimeError(f"{name} exited with status {rc}", argv, "")
    return parse_runtime_error(log_text, argv, name)


def logged_error(log_text: str) -> bool:
    """True when the runtime logged an error record (so a non-zero rc is its own failure)."""
    for line in log_text.splitlines():
        line = line.strip()
        if not line.startswith("{"):
            continue
        with contextlib.suppress(ValueError):
            rec = json.loads(line)
            if isinstance(rec, dict) and rec.get("level") == "error":
                return True
    return False


def status_from_rc(rc: int) -> ExitStatus:
    """The ``ExitStatus`` of a foreground process from its return code (``128+N``: signal N)."""
    now = _dt.datetime.now(_dt.UTC)
    if rc < 0:
        return ExitStatus(exit_code=128 - rc, signal=-rc, exited_at=now)
    if rc > 128:
        return ExitStatus(exit_code=rc, signal=rc - 128, exited_at=now)
    return ExitStatus(exit_code=rc, exited_at=now)
