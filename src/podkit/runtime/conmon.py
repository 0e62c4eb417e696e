"""Supervision by conmon: containers that outlive the podkit process.

`conmon <https://github.com/containers/conmon>`_ (2.x, the monitor CRI-O and podman use) runs
``runc create`` (or crun) for one container, then stays alive as the container's parent
(subreaper): it writes the container's stdout/stderr to a CRI log file, serves an attach
socket, takes resize / reopen-log requests on a FIFO, and writes the exit code to a file when
the container ends. Everything podkit needs later is on disk, so any process (a new one after
a restart included) can find, wait for, attach to and stop containers another process started.

Wire facts used here (conmon 2.1.6, ``--api-version`` is a flag without a value):

* **sync pipe** (fd number in ``_OCI_SYNCPIPE``): JSON lines ``{"data": N}`` or
  ``{"data": N, "message": "..."}``. On create: the container pid, or ``-1`` and the runtime's
  stderr. On exec: the exec pid, then the exit code (or ``-1`` and ``"command timed out"``).
  conmon marks it close-on-exec, so the container never inherits it.
* **files**: ``<persist-dir>/exit`` and ``<exit-dir>/<cid>`` hold the exit code as decimal
  text (``128 + N`` for signal N); ``<persist-dir>/oom`` appears on an OOM kill; the CRI log
  is ``-l k8s-file:PATH``.
* **attach socket** ``<socket-dir>/<cuuid>/attach`` (a symlink to the bundle dir, so the path
  stays short; when ``<socket-dir>/<cuuid>`` is exactly 107 bytes conmon cuts the link name by
  one character, so podkit never passes such a ``--cuuid``): ``SOCK_SEQPACKET``; every
  message from conmon starts with one byte naming the stream (2 stdout, 3 stderr), then up
  to 8192 bytes of output; bytes sent by a client go to the container's stdin (with
  ``--stdin``); a client's EOF closes the container's stdin unless ``--leave-stdin-open``.
  Any number of clients; each sees output from its connect on.
* **ctl FIFO** ``<bundle>/ctl``: lines ``"1 <rows> <cols>\\n"`` (resize the tty) and
  ``"2 0 0\\n"`` (reopen the log: conmon opens a new, empty file at the log path). Send one
  message per write: conmon 2.1.6 mishandles several lines read at once.

podkit's state for a container lives in ``<state_dir>/containers/<id>/`` (also conmon's
``--persist-dir``); exit files in ``<state_dir>/exits``, attach symlinks in
``<state_dir>/sockets``. These directories are 0700 and podkit's files in them 0600.
"""

from __future__ import annotations

import builtins
import contextlib
import datetime as _dt
import errno
import functools
import json
import math
import os
import shutil
import signal as _signal
import socket
import tempfile
import time
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

from podkit import _proc, oci
from podkit._files import atomic_write, validate_id
from podkit.errors import InvalidArgumentError
from podkit.oci import codec
from podkit.runtime.alongside import Alongside
from podkit.runtime.attach import ATTACH_STDOUT as ATTACH_STDOUT
from podkit.runtime.attach import DEFAULT_DETACH_KEYS, Attachment, parse_detach_keys
from podkit.runtime.base import ExecResult, ExitStatus, RuntimeState
from podkit.runtime.bundle import Bundle
from podkit.runtime.conmon_files import (
    META,
    PRIVATE_DIR,
    PRIVATE_FILE,
    SUN_PATH_MAX,
    ConmonContainer,
    attach_link_name,
    exit_status_from_code,
    link_target,
    now_rfc3339,
    private_dir,
    read_int_file,
)
from podkit.runtime.conmon_procs import Launcher, open_pidfd, reap_if_child
from podkit.runtime.conmon_sync import read_sync
from podkit.runtime.errors import (
    AlreadyExistsError,
    NotFoundError,
    NotRunningError,
    OCIRuntimeError,
    RuntimeTimeoutError,
    parse_runtime_error,
)
from podkit.runtime.exec_sync import container_process
from podkit.runtime.io import CappedOutput, wait_readable
from podkit.runtime.monitor import PidFileProcess
from podkit.runtime.resource_check import check_bundle_resources

__all__ = [
    "DEFAULT_DETACH_KEYS",
    "Attachment",
    "Conmon",
    "ConmonContainer",
    "ConmonRuntime",
    "parse_detach_keys",
]

_CTL_RESIZE = 1
_CTL_REOPEN_LOG = 2
TIMED_OUT_MESSAGE = "command timed out"
_DROPPED_ENV = (
    "_OCI_STARTPIPE", "_OCI_ATTACHPIPE", "NOTIFY_SOCKET", "LISTEN_PID", "LISTEN_FDS",
    "LISTEN_FDNAMES",
)


class ConmonRuntime(Protocol):
    """What :class:`Conmon` needs from the runtime adapter (``podkit.runtime.Runc``)."""

    def command(self, *args: str) -> list[str]:
        """The runtime's argv: binary, global flags, then ``args``."""
        ...

    def start(self, id: str) -> None:
        """``runtime start``."""
        ...

    def state(self, id: str) -> RuntimeState:
        """``runtime state``."""
        ...

    def kill(self, id: str, signal: int | str = ..., all: bool = False) -> None:
        """``runtime kill``."""
        ...

    def delete(self, id: str, force: bool = False) -> None:
        """``runtime delete``."""
        ...


def _flags(**on: bool) -> builtins.list[str]:
    """conmon's switches for the keywords that are true (``no_pivot`` -> ``--no-pivot``)."""
    return ["--" + name.replace("_", "-") for name, value in on.items() if value]


class Conmon:
    """Start containers under conmon and talk to them through its files and sockets.

    ``runtime`` is the adapter (``Runc(binary="runc"|"crun", root=...)``); its global flags are
    passed to conmon as ``--runtime-arg``. ``state_dir`` is podkit's own (one per host user of
    conmon); a new ``Conmon`` over the same ``state_dir`` sees every container an earlier one
    started. ``log_size_max`` (bytes, 0 = unlimited) is conmon's ``--log-size-max``: the log is
    truncated when it would grow past it (rotate files yourself and call :meth:`reopen_log`).
    """

    def __init__(
        self,
        runtime: ConmonRuntime,
        *,
        state_dir: str | os.PathLike[str],
        conmon_binary: str = "conmon",
        log_size_max: int = 0,
        start_timeout: float = 60.0,
        log_level: str | None = None,
        runtime_name: str | None = None,
    ) -> None:
        self.runtime = runtime
        self.state_dir = Path(state_dir).absolute()
        self.conmon_binary = conmon_binary
        self.log_size_max = log_size_max
        self.start_timeout = start_timeout
        self.log_level = log_level
        argv = runtime.command()
        if not argv:
            raise InvalidArgumentError("runtime.command() returned an empty argv")
        self._runtime_argv = [self._resolve(argv[0], "OCI runtime"), *argv[1:]]
        self.runtime_name = runtime_name or os.path.basename(argv[0])

    # -- paths ---------------------------------------------------------------------------

    @property
    def exit_dir(self) -> Path:
        """conmon's ``--exit-dir``: one file per container ID holding its exit code."""
        return self.state_dir / "exits"

    @property
    def socket_dir(self) -> Path:
        """conmon's ``--socket-dir-path``: ``<id>`` symlinks to bundles, holding ``attach``."""
        return self.state_dir / "sockets"

    def container_dir(self, id: str) -> Path:
        """podkit's and conmon's (``--persist-dir``) directory for one container."""
        return self.state_dir / "containers" / validate_id(id, "container ID")

    def socket_link(self, id: str) -> Path:
        """The link to the bundle that conmon makes in :attr:`socket_dir`; holds ``attach``."""
        return self.socket_dir / attach_link_name(self.socket_dir, validate_id(id, "container ID"))

    @staticmethod
    def _resolve(binary: str, what: str) -> str:
        if os.sep in binary:
            if os.access(binary, os.X_OK):
                return os.path.abspath(binary)
            path = None
        else:
            path = shutil.which(binary)
        if path is None:
            raise NotFoundError(f"{what} binary {binary!r} not found or not executable")
        return path

    def _conmon_argv(self, id: str, *args: str) -> list[str]:
        argv = [
            self._resolve(self.conmon_binary, "conmon"),
            "--api-version",
            "--cid", id,
            "--runtime", self._runtime_argv[0],
        ]
        for arg in self._runtime_argv[1:]:
            argv += ["--runtime-arg", arg]
        if self.log_level:
            argv += ["--log-level", self.log_level]
        return [*argv, *args]

    # -- records -------------------------------------------------------------------------

    def get(self, id: str) -> ConmonContainer:
        """The record of a container started under conmon; ``NotFoundError`` if none."""
        meta = self.container_dir(id) / META
        try:
            data = json.loads(meta.read_text())
        except FileNotFoundError:
            raise NotFoundError(f"no container {id!r} supervised by conmon in {self.state_dir}")\
                from None
        except ValueError as exc:
            raise InvalidArgumentError(f"corrupt conmon state {meta}: {exc}") from None
        return ConmonContainer.from_dict(data, str(meta))

    def list(self) -> builtins.list[ConmonContainer]:
        """Every container with a record in ``state_dir`` (running or exited)."""
        out = []
        base = self.state_dir / "containers"
        for child in sorted(base.iterdir()) if base.is_dir() else []:
            if (child / META).is_file():
                with contextlib.suppress(NotFoundError, InvalidArgumentError):
                    out.append(self.get(child.name))
        return out

    def monitor_alive(self, id: str) -> bool:
        """Whether the conmon process of ``id`` is still running."""
        pidfd = self._open_monitor(self.get(id))
        if pidfd is None:
            return False
        os.close(pidfd)
        return True

    def exit_status(self, id: str) -> ExitStatus | None:
        """The exit status if the container has exited (conmon wrote its exit file), else None."""
        path = self.container_dir(id) / "exit"
        code = read_int_file(path)
        if code is None:
            return None
        with contextlib.suppress(OSError):
            exited_at = _dt.datetime.fromtimestamp(path.stat().st_mtime, tz=_dt.UTC)
            return exit_status_from_code(code, exited_at)
        return exit_status_from_code(code, None)

    def oom_killed(self, id: str) -> bool:
        """Whether conmon saw an OOM kill in the container's memory cgroup."""
        return (self.container_dir(id) / "oom").exists()

    # -- lifecycle -----------------------------------------------------------------------

    def create(
        self,
        id: str,
        bundle: str | os.PathLike[str],
        *,
        log_path: str | os.PathLike[str] | None = None,
        tty: bool = False,
        stdin: bool = False,
        stdin_once: bool = False,
        no_pivot: bool = False,
        no_new_keyring: bool = False,
        alongside: Alongside | None = None,
    ) -> ConmonContainer:
        """Create the container under a new conmon (``runtime create``); it is not started.

        ``bundle`` is a directory or a :class:`Bundle` (its spec is checked as it is, not
        read again). Returns once the runtime created it (the pid is known). On any failure
        the runtime's own message is in the raised error and nothing is left: no conmon
        process, no state directory, socket or FIFO, no runtime container. ``alongside`` is
        begun once the runtime created it, while its record is written (:meth:`run`'s start).
        """
        cdir = self.container_dir(id)
        self._resolve(self.conmon_binary, "conmon")
        bundle_path = Path(bundle).absolute()
        if not (bundle_path / "config.json").is_file():
            raise InvalidArgumentError(f"bundle {bundle_path} has no config.json")
        # a controller the host lacks: refused up front (a Bundle's spec is not read again)
        check_bundle_resources(bundle.spec if isinstance(bundle, Bundle) else bundle_path)
        log = Path(log_path).absolute() if log_path is not None else cdir / "ctr.log"
        log_existed = log.exists()
        if not self.state_dir.exists():
            private_dir(self.state_dir)
        for d in (cdir.parent, self.exit_dir, self.socket_dir):
            private_dir(d)
        try:
            cdir.mkdir(mode=PRIVATE_DIR)
        except FileExistsError:
            raise AlreadyExistsError(
                f"container {id!r} already has a conmon state dir {cdir}"
            ) from None
        try:
            os.chmod(cdir, PRIVATE_DIR)
            log.parent.mkdir(parents=True, exist_ok=True)
            (self.exit_dir / id).unlink(missing_ok=True)
            args = [
                "--cuuid", self.socket_link(id).name,
                "--bundle", os.fspath(bundle_path),
                "--container-pidfile", os.fspath(cdir / "pidfile"),
                "--conmon-pidfile", os.fspath(cdir / "conmon.pid"),
                "--log-path", f"k8s-file:{log}",
                "--exit-dir", os.fspath(self.exit_dir),
                "--persist-dir", os.fspath(cdir),
                "--socket-dir-path", os.fspath(self.socket_dir),
            ]
            if self.log_size_max:
                args += ["--log-size-max", str(self.log_size_max)]
            args += _flags(terminal=tty, stdin=stdin, leave_stdin_open=stdin and not stdin_once,
                           no_pivot=no_pivot, no_new_keyring=no_new_keyring)
            argv = self._conmon_argv(id, *args)
            messages = self._spawn(argv, cdir, self.start_timeout, want=1)
            pid = messages[0][0]
            conmon_pid = read_int_file(cdir / "conmon.pid") or 0
            record = ConmonContainer(
                id=id, bundle=os.fspath(bundle_path), log_path=os.fspath(log), pid=pid,
                conmon_pid=conmon_pid, tty=tty, stdin=stdin, runtime=list(self._runtime_argv),
                created=now_rfc3339(),
            )
            if alongside is not None:
                alongside.begin()
            atomic_write(cdir / META, json.dumps(record.to_dict()), mode=PRIVATE_FILE)
            return record
        except BaseException:
            if alongside is not None:
                alongside.wait()  # its start ends before the container is deleted
            self._cleanup(id, cdir, bundle_path, None if log_existed else log)
            raise

    def _spawn(
        self,
        argv: builtins.list[str],
        cwd: Path,
        timeout: float | None,
        want: int,
        runtime_log: Path | None = None,
        stdio: tuple[int, int] | None = None,
    ) -> builtins.list[tuple[int, str | None]]:
        """Run conmon, return the first ``want`` sync-pipe messages ``(data, message)``.

        A message with negative data is turned into the runtime's typed error. conmon's own
        stderr goes to a file in ``cwd`` (never a pipe the container could hold open), or
        with ``stdio`` (``--log-path passthrough``) its stdout and stderr are those fds.
        """
        read_fd, write_fd = os.pipe()
        errfile = cwd / "conmon.stderr"
        try:
            env = dict(os.environ)
            env.update(getattr(self.runtime, "env", None) or {})
            for name in _DROPPED_ENV:  # systemd hand-overs meant for us, not for the runtime
                env.pop(name, None)
            env["_OCI_SYNCPIPE"] = str(write_fd)
            flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC
            with open(os.open(errfile, flags, PRIVATE_FILE), "wb") as err:
                out_fd, err_fd = stdio if stdio is not None else (err.fileno(), err.fileno())
                # own process group; cwd needs the sync pipe to keep its number
                proc = _proc.spawn(argv, env=env, cwd=cwd, session=False,
                                   fds={1: out_fd, 2: err_fd, write_fd: write_fd})
            os.close(write_fd)
            write_fd = -1
            # conmon forks its daemon and the first process exits at once (after writing the
            # conmon pid file); it is reaped while the sync pipe is read, not polled for first
            launcher = Launcher(proc, argv, 60 if timeout is None else max(timeout, 1.0))
            try:
                messages = self._read_sync(read_fd, argv, timeout, want, launcher)
                launcher.reap()
            except BaseException:
                launcher.kill()
                raise
        finally:
            os.close(read_fd)
            if write_fd >= 0:
                os.close(write_fd)
        if len(messages) < want and runtime_log is not None and runtime_log.exists():
            # conmon 2.1.6 does not relay a failed `runtime exec`; its --log has the reason
            logged = runtime_log.read_text(errors="replace")
            if logged.strip():
                raise parse_runtime_error(logged, argv, self.runtime_name)
        if len(messages) < want:
            text = errfile.read_text(errors="replace").strip() if errfile.exists() else ""
            raise OCIRuntimeError(
                f"conmon exited without reporting the container's pid: {text or 'no output'}",
                argv, text,
            )
        for data, message in messages:
            if data < 0:
                if message == TIMED_OUT_MESSAGE:
                    raise RuntimeTimeoutError(f"{self.runtime_name}: {message}", argv)
                raise parse_runtime_error(message or f"exit status {-data}", argv,
                                          self.runtime_name)
        return messages

    def _read_sync(
        self, fd: int, argv: builtins.list[str], timeout: float | None, want: int,
        launcher: Launcher | None = None,
    ) -> builtins.list[tuple[int, str | None]]:
        return read_sync(fd, argv, timeout, want, launcher)

    def _cleanup(
        self, id: str, cdir: Path, bundle: Path, own_log: Path | None
    ) -> None:
        """Remove everything :meth:`create` may have left after a failure."""
        conmon_pid = read_int_file(cdir / "conmon.pid") if cdir.exists() else None
        if conmon_pid:
            self._stop_monitor(conmon_pid, cdir, grace=5.0)
        with contextlib.suppress(OCIRuntimeError):
            self.runtime.delete(id, force=True)
        self._remove_files(id, cdir, bundle)
        if own_log is not None:
            own_log.unlink(missing_ok=True)

    def _remove_files(self, id: str, cdir: Path, bundle: Path | None) -> None:
        """Remove conmon's files of ``id``; ``bundle`` (``None``: where the link points)."""
        link = self.socket_link(id)
        bundle = bundle if bundle is not None else link_target(link)
        if bundle is not None:
            for name in ("attach", "ctl", "winsz"):
                (bundle / name).unlink(missing_ok=True)
            # the cut name an older podkit let conmon make, only if it is ours
            cut = self.socket_dir / id[:-1]
            if len(id) > 1 and len(os.fsencode(cut)) == SUN_PATH_MAX - 1 \
                    and link_target(cut) == bundle:
                cut.unlink()
        if link.is_symlink():
            link.unlink()
        (self.exit_dir / id).unlink(missing_ok=True)
        shutil.rmtree(cdir, ignore_errors=True)

    def remove_leftovers(self, id: str) -> bool:
        """Remove everything of ``id``, with or without its record; True if anything was there.

        For a start cut short (the starting process died before conmon reported the pid, so no
        record was written): stops its conmon (``conmon.pid``), force-deletes the runtime
        container, removes conmon's dir, exit file and attach-socket link. Idempotent.
        """
        cdir = self.container_dir(id)
        link = self.socket_link(id)
        bundle = link_target(link)
        with contextlib.suppress(NotFoundError, InvalidArgumentError):
            bundle = Path(self.get(id).bundle)
        found = cdir.exists() or link.is_symlink() or (self.exit_dir / id).exists()
        try:
            conmon_pid = read_int_file(cdir / "conmon.pid")
        except (OSError, OCIRuntimeError):
            conmon_pid = None
        found = self._runtime_delete(id) or found
        if conmon_pid:
            self._stop_monitor(conmon_pid, cdir, grace=10.0)
            self._runtime_delete(id)  # a runtime create that conmon finished meanwhile
        self._remove_files(id, cdir, bundle)
        return found

    def _runtime_delete(self, id: str) -> bool:
        """``runtime delete --force``; False when the runtime does not know ``id``.

        Asks ``state`` first: ``runc delete --force`` of an unknown ID succeeds silently.
        """
        try:
            self.runtime.state(id)
            self.runtime.delete(id, force=True)
        except NotFoundError:
            return False
        return True

    def start(self, id: str) -> None:
        """Start the user process of a container created by :meth:`create`."""
        self.get(id)
        self.runtime.start(id)

    def run(
        self, id: str, bundle: str | os.PathLike[str], **kwargs: Any
    ) -> ConmonContainer:
        """:meth:`create` then :meth:`start` (begun while the record is written); a failing
        start deletes the container."""
        starting = Alongside(functools.partial(self.runtime.start, id))
        record = self.create(id, bundle, alongside=starting, **kwargs)
        try:
            starting.result()
        except BaseException:
            self.delete(id, force=True)
            raise
        return record

    # -- waiting -------------------------------------------------------------------------

    def _open_monitor(self, record: ConmonContainer) -> int | None:
        """A pidfd of this container's conmon if it still runs."""
        return open_pidfd(record.conmon_pid, os.fsencode(self.container_dir(record.id)))

    def wait(self, id: str, timeout: float | None = None) -> ExitStatus:
        """Block until the container has exited and conmon recorded its exit code.

        Works from any process: it waits on a pidfd of the conmon process (no polling; conmon
        exits right after writing the exit file and flushing the log), then reads the file.
        :class:`RuntimeTimeoutError` after ``timeout`` seconds.
        """
        record = self.get(id)
        pidfd = self._open_monitor(record)
        if pidfd is not None:
            try:
                ready = wait_readable([pidfd], timeout)
            finally:
                os.close(pidfd)
            if not ready:
                raise RuntimeTimeoutError(
                    f"container {id!r} still running after {timeout}s"
                )
            reap_if_child(record.conmon_pid)
        status = self.exit_status(id)
        if status is None:
            raise OCIRuntimeError(
                f"conmon of container {id!r} (pid {record.conmon_pid}) is gone without writing"
                f" {self.container_dir(id) / 'exit'}"
            )
        return status

    @staticmethod
    def _stop_monitor(pid: int, marker: Path, grace: float) -> None:
        """Wait up to ``grace`` seconds for a conmon to exit, then SIGKILL it."""
        pidfd = open_pidfd(pid, os.fsencode(marker))
        if pidfd is None:
            return
        try:
            if not wait_readable([pidfd], grace):
                with contextlib.suppress(ProcessLookupError):
                    _signal.pidfd_send_signal(pidfd, _signal.SIGKILL)
                wait_readable([pidfd], 10.0)
        finally:
            os.close(pidfd)
        reap_if_child(pid)

    # -- control -------------------------------------------------------------------------

    def kill(self, id: str, signal: int | str = _signal.SIGTERM, all: bool = False) -> None:
        """Send a signal to the container (through the runtime)."""
        self.get(id)
        self.runtime.kill(id, signal, all=all)

    def stop(
        self, id: str, timeout: float = 10.0, signal: int = _signal.SIGTERM
    ) -> ExitStatus:
        """Send ``signal``, wait ``timeout`` seconds, then SIGKILL; return the exit status."""
        status = self.exit_status(id)
        if status is not None:
            return status
        with contextlib.suppress(NotRunningError, NotFoundError):
            self.runtime.kill(id, signal)
        try:
            return self.wait(id, timeout)
        except RuntimeTimeoutError:
            pass
        with contextlib.suppress(NotRunningError, NotFoundError):
            self.runtime.kill(id, _signal.SIGKILL, all=True)
        return self.wait(id, 60.0)

    def delete(self, id: str, force: bool = False) -> None:
        """Delete the container from the runtime and remove conmon's and podkit's files.

        Without ``force`` a running container is refused (``NotRunningError``); with it the
        container is killed first. The log file is kept unless it lives in the state dir.
        Without a record it removes what :meth:`remove_leftovers` finds, and raises
        ``NotFoundError`` only when there was nothing at all.
        """
        try:
            record = self.get(id)
        except NotFoundError:
            if self.remove_leftovers(id):
                return
            raise
        cdir = self.container_dir(id)
        with contextlib.suppress(NotFoundError):
            self.runtime.delete(id, force=force)
        if record.conmon_pid:
            self._stop_monitor(record.conmon_pid, cdir, grace=10.0)
        self._remove_files(id, cdir, Path(record.bundle))

    def attach(self, id: str) -> Attachment:
        """Connect to the container's attach socket (several clients may be attached)."""
        self.get(id)
        link = self.socket_link(id)
        try:
            dirfd = os.open(link, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
        except FileNotFoundError:
            raise NotRunningError(f"container {id!r} has no attach socket (exited?)") from None
        try:
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET | socket.SOCK_CLOEXEC)
            try:
                # via /proc/self/fd so a long state_dir never exceeds sun_path
                sock.connect(f"/proc/self/fd/{dirfd}/attach")
            except (FileNotFoundError, ConnectionRefusedError):
                sock.close()
                raise NotRunningError(f"container {id!r} is not running (attach socket gone)")\
                    from None
            except BaseException:
                sock.close()
                raise
        finally:
            os.close(dirfd)
        return Attachment(sock, id)

    def _live_monitor(self, record: ConmonContainer) -> int:
        """A pidfd of the container's conmon; ``NotRunningError`` once it has exited (a
        process that still holds the ctl FIFO open must not make it look alive)."""
        pidfd = self._open_monitor(record)
        if pidfd is None:
            raise NotRunningError(
                f"container {record.id!r} is not running (its conmon has exited)")
        return pidfd

    def _ctl(self, record: ConmonContainer, kind: int, a: int, b: int) -> None:
        ctl = Path(record.bundle) / "ctl"
        try:
            fd = os.open(ctl, os.O_WRONLY | os.O_NONBLOCK | os.O_CLOEXEC)
        except OSError as exc:
            if exc.errno in (errno.ENXIO, errno.ENOENT):
                raise NotRunningError(
                    f"container {record.id!r} is not running (no conmon on {ctl})") from None
            raise
        try:
            os.write(fd, f"{kind} {a} {b}\n".encode())
        finally:
            os.close(fd)

    def resize(self, id: str, rows: int, cols: int) -> None:
        """Resize the container's tty (created with ``tty=True``)."""
        for name, value in (("rows", rows), ("cols", cols)):
            if not 0 < value < 65536:
                raise InvalidArgumentError(f"invalid terminal {name} {value}: want 1..65535")
        record = self.get(id)
        os.close(self._live_monitor(record))
        self._ctl(record, _CTL_RESIZE, rows, cols)

    def reopen_log(self, id: str, timeout: float = 60.0) -> None:
        """Make conmon start a new log file at the log path (after you moved the old one).

        Waits until the new file exists (conmon acts asynchronously, and fsyncs the old file
        first, which can take seconds under heavy I/O). If the old file was not moved away,
        conmon replaces it with an empty one.
        """
        record = self.get(id)
        log = Path(record.log_path)
        try:
            before: int | None = log.stat().st_ino
        except FileNotFoundError:
            before = None
        pidfd = self._live_monitor(record)
        try:
            self._ctl(record, _CTL_REOPEN_LOG, 0, 0)
            deadline = time.monotonic() + timeout
            while True:
                with contextlib.suppress(FileNotFoundError):
                    if log.stat().st_ino != before:
                        return
                if time.monotonic() > deadline:
                    raise RuntimeTimeoutError(f"conmon did not reopen {log} within {timeout}s")
                if wait_readable([pidfd], 0.01):
                    with contextlib.suppress(FileNotFoundError):
                        if log.stat().st_ino != before:
                            return
                    raise NotRunningError(
                        f"container {id!r} stopped before conmon reopened {log}")
        finally:
            os.close(pidfd)

    # -- exec ----------------------------------------------------------------------------

    def _exec_process(self, record: ConmonContainer, args: Sequence[str] | oci.Process) -> Any:
        if isinstance(args, oci.Process):
            return codec.unstructure(args)
        return container_process(record.bundle, args)

    def exec_sync(
        self,
        id: str,
        args: Sequence[str] | oci.Process,
        timeout: float | None = None,
    ) -> ExecResult:
        """Run a process in the container under a short-lived conmon and collect its output.

        ``args`` (with the container's own env, user and cwd) or a whole ``oci.Process``. The
        process writes straight into podkit's pipes (conmon's ``passthrough`` log driver); the
        first ``EXEC_SYNC_OUTPUT_MAX`` bytes of stdout and of stderr are kept. ``timeout`` is
        rounded up to whole seconds (conmon's ``--timeout``); when it expires conmon kills the
        process group, and once the process is gone :class:`RuntimeTimeoutError` is raised.
        """
        record = self.get(id)
        if timeout is not None and timeout <= 0:
            raise InvalidArgumentError(f"invalid exec timeout {timeout}: must be > 0")
        process = self._exec_process(record, args)
        cdir = self.container_dir(id)
        work = Path(tempfile.mkdtemp(prefix="exec-", dir=cdir))
        try:
            with CappedOutput() as output, PidFileProcess(work / "pidfile") as victim:
                messages = self._exec_under_conmon(id, process, timeout, work, output, victim)
                stdout, stderr = output.finish()
            return ExecResult(exit_code=messages[1][0], stdout=stdout, stderr=stderr)
        finally:
            shutil.rmtree(work, ignore_errors=True)

    def _exec_under_conmon(
        self, id: str, process: Any, timeout: float | None, work: Path,
        output: CappedOutput, victim: PidFileProcess,
    ) -> builtins.list[tuple[int, str | None]]:
        """Run conmon ``--exec`` writing into ``output``; its two sync messages.

        Returns (or raises) once conmon has exited and, after a timeout, once the exec'd
        process is gone.
        """
        spec = work / "process.json"
        spec.write_text(json.dumps(process))
        runtime_log = work / "runtime.log"
        argv = self._conmon_argv(
            id,
            "--runtime-arg", "--log",
            "--runtime-arg", os.fspath(runtime_log),
            "--cuuid", f"{id}-exec-{uuid.uuid4().hex[:8]}",
            "--exec",
            "--exec-process-spec", os.fspath(spec),
            "--container-pidfile", os.fspath(victim.pid_path),
            "--conmon-pidfile", os.fspath(work / "conmon.pid"),
            "--log-path", "passthrough",
        )
        if timeout is not None:
            argv += ["--timeout", str(max(1, math.ceil(timeout)))]
        wait_for = None if timeout is None else math.ceil(timeout) + 30.0
        _, out_w, err_w = output.child_fds()
        assert out_w is not None and err_w is not None
        try:
            return self._spawn(
                argv, work, wait_for, want=2, runtime_log=runtime_log, stdio=(out_w, err_w)
            )
        except RuntimeTimeoutError:
            victim.kill()  # conmon did (its process group); a late conmon did not
            raise
        finally:
            output.close_after_start()
            conmon_pid = read_int_file(work / "conmon.pid")
            if conmon_pid:
                self._stop_monitor(conmon_pid, spec, grace=10.0)
            victim.wait_gone()
