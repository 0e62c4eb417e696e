"""``Runc``: drive runc, crun or any runc-compatible CLI (the Python go-runc, plus reaping).

Every command is started by ``runtime.command`` through ``podkit._proc`` (``posix_spawn``): an
explicit environment, exactly the descriptors it needs, default signal dispositions, its own
session and process group, and a timeout (the whole group is SIGKILLed when it expires). Errors
come from the runtime's JSON log (``--log <per-call memfd> --log-format json``) and are typed
(``runtime.errors``). Container stdio is whatever ``IO`` the caller hands in (``NullIO`` by
default): podkit never captures a container's inherited stdout through a pipe it waits on.
Captured command output (``state``, ``list``, ``ps``...) goes to anonymous memory files, read
after the command exits. The result models and parsers live in ``runtime.results``, the spec
checks in ``runtime.spec_check``, crun's cgroup workaround in ``runtime.stray_cgroups`` and
runc's in ``runtime.stray_binds``; their names stay importable from here.

Exit statuses come from the in-process ``Monitor`` (child subreaper): ``create`` subscribes to
the init PID, ``exec(detach=True)`` to the exec PID, ``wait``/``wait_exec`` block on them.
"""

from __future__ import annotations

import builtins
import contextlib
import datetime as _dt
import json
import os
import shutil
import signal as _signal
import tempfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from podkit import _files, oci
from podkit.errors import InvalidArgumentError
from podkit.oci import codec
from podkit.runtime.base import ExecResult, ExitStatus, Runtime, RuntimeState, Status, signal_number
from podkit.runtime.bundle import Bundle
from podkit.runtime.command import (
    Command,
    CommandResult,
    command_error,
    create_args,
    exec_args,
    logged_error,
    status_from_rc,
)
from podkit.runtime.errors import (
    NotFoundError,
    NotRunningError,
    OCIRuntimeError,
    RuntimeTimeoutError,
    UnsupportedOperationError,
)
from podkit.runtime.exec_sync import exec_files, exec_spec, run_capped
from podkit.runtime.io import IO, NullIO
from podkit.runtime.monitor import (
    Monitor,
    Subscription,
    default_monitor,
    kill_pid_file,
    wait_exit,
)
from podkit.runtime.resource_check import check_bundle_resources, check_resources
from podkit.runtime.results import (
    CpuStats,
    Event,
    ExecProcess,
    MemoryEntry,
    MemoryStats,
    RuntimeVersion,
    Stats,
    StopResult,
    TopResults,
    parse_event,
    parse_list,
    parse_ps,
    parse_state,
    parse_stats,
    parse_top,
    parse_version,
)
from podkit.runtime.scratch import ScratchDir
from podkit.runtime.spec_check import (
    KNOWN_APPLIED,
    UnsupportedFieldWarning,
    check_spec,
    refuse_or_warn,
)
from podkit.runtime.stray_binds import remove_stray_exe_binds, state_dir
from podkit.runtime.stray_cgroups import cgroups_path, remove_stray_unified_dir, stray_dirs_possible
from podkit.runtime.usage import cgroup_stats, host_top

__all__ = [
    "DEFAULT_TIMEOUT",
    "CpuStats",
    "Event",
    "ExecProcess",
    "MemoryEntry",
    "MemoryStats",
    "Runc",
    "RuntimeVersion",
    "Stats",
    "StopResult",
    "TopResults",
    "UnsupportedFieldWarning",
    "check_spec",
    "parse_list",
    "parse_ps",
    "parse_state",
    "parse_stats",
    "parse_top",
    "parse_version",
]


DEFAULT_TIMEOUT = 60.0
"""Seconds a runtime command may take before its process group is killed."""

_DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
_MAX_EXTRA_FILES = 60  # --preserve-fds descriptors one create may pass on


class Runc:
    """An OCI runtime CLI (runc, crun, ...): lifecycle, exec, stats, supervision.

    ``root`` is the runtime's state dir (``--root``; use a private one per user of podkit),
    ``log`` an optional persistent JSON log (errors are read from the part each call appends),
    ``strict`` makes ``create`` refuse specs with fields the runtime would silently ignore
    (else it warns with ``UnsupportedFieldWarning``). ``monitor`` (default: the process-wide
    one) reaps container processes; ``timeout`` bounds every runtime command; pid files and
    specs go in a scratch dir under ``scratch_dir`` (default ``/dev/shm``) while calls run.
    """

    def __init__(
        self,
        binary: str = "runc",
        root: str | os.PathLike[str] | None = None,
        log: str | os.PathLike[str] | None = None,
        log_format: str = "json",
        systemd_cgroup: bool = False,
        rootless: bool | None = None,
        extra_args: Sequence[str] = (),
        *,
        monitor: Monitor | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        strict: bool = False,
        env: Mapping[str, str] | None = None,
        scratch_dir: str | os.PathLike[str] | None = None,
    ) -> None:
        self.binary = binary
        self.name = Path(binary).name
        self.root = Path(root) if root is not None else None
        self.log = Path(log) if log is not None else None
        self.log_format = log_format
        self.systemd_cgroup = systemd_cgroup
        self.rootless = rootless
        self.extra_args = tuple(extra_args)
        self.monitor = monitor
        self.timeout = timeout
        self.strict = strict
        self.env = dict(env) if env is not None else {"PATH": os.environ.get("PATH", _DEFAULT_PATH)}
        self._path: str | None = None
        self._features: oci.Features | None = None
        self._features_asked = False
        self._version: RuntimeVersion | None = None
        self._inits: dict[str, Subscription] = {}
        self._cgroups: dict[str, str] = {}  # id -> linux.cgroupsPath of containers we created
        self._scratch = ScratchDir("podkit-runc-", scratch_dir)

    def __repr__(self) -> str:
        return f"Runc(binary={self.binary!r}, root={str(self.root) if self.root else None!r})"

    # -- command line ------------------------------------------------------------------------
    @property
    def path(self) -> str:
        """Absolute path of the runtime binary; ``NotFoundError`` when it is missing."""
        if self._path is None:
            found = shutil.which(self.binary, path=self.env.get("PATH", _DEFAULT_PATH))
            if found is None:
                raise NotFoundError(
                    f"OCI runtime binary {self.binary!r} not found "
                    f"(PATH={self.env.get('PATH', _DEFAULT_PATH)})",
                    [self.binary],
                )
            self._path = found
        return self._path

    def _global_args(self, log: str | None) -> builtins.list[str]:
        args: list[str] = []
        if self.root is not None:
            args += ["--root", str(self.root)]
        if log is not None:
            args += ["--log", log]
        if self.log_format:
            args += ["--log-format", self.log_format]
        if self.systemd_cgroup:
            args.append("--systemd-cgroup")
        if self.rootless is not None:
            args.append(f"--rootless={'true' if self.rootless else 'false'}")
        args += self.extra_args
        return args

    def command(self, *args: str) -> builtins.list[str]:
        """The full argv for a runtime sub-command: binary, global flags, ``args``.

        Used by supervisors (conmon) that start the runtime themselves.
        """
        log = str(self.log) if self.log is not None else None
        return [self.path, *self._global_args(log), *args]

    def _monitor(self) -> Monitor:
        if self.monitor is None:
            self.monitor = default_monitor()
        self.monitor.start()
        return self.monitor

    def _run(
        self,
        args: Sequence[str],
        *,
        io: IO | None = None,
        stdin: bytes | None = None,
        capture: bool = True,
        timeout: float | None = None,
        extra_fds: Sequence[int] = (),
        check: bool = True,
        on_timeout: Callable[[], None] | None = None,
        sweep: str | None = None,
    ) -> CommandResult:
        """Run one command; raise the typed error on failure (``check``) or timeout.

        ``extra_fds`` become the child's descriptors 3, 4, ... (``--preserve-fds``); the
        per-call log memfd comes right after them. After a timeout, what a killed ``runc
        init`` leaves in container ``sweep``'s state dir is removed (``stray_binds``).
        """
        call = Command(
            lambda log: [self.path, *self._global_args(log), *args], name=self.name,
            env=self.env, log=self.log, timeout=self.timeout if timeout is None else timeout,
        )
        try:
            res = call.run(io=io, stdin=stdin, capture=capture, extra_fds=extra_fds,
                           on_timeout=on_timeout)
        except FileNotFoundError as e:
            self._path = None
            raise NotFoundError(f"OCI runtime binary {self.binary!r} not found",
                                call.argv) from e
        except RuntimeTimeoutError:
            if sweep is not None:
                remove_stray_exe_binds(state_dir(self.root, self.name, sweep))
            raise
        if check and res.returncode != 0:
            raise self._error(res.returncode, call.argv, res.log)
        return res

    def _error(self, rc: int, argv: Sequence[str], log_text: str) -> OCIRuntimeError:
        return command_error(self.name, rc, argv, log_text)

    # -- queries -------------------------------------------------------------------------------
    def version(self) -> RuntimeVersion:
        """``--version`` parsed (cached)."""
        if self._version is None:
            res = self._run(["--version"])
            self._version = parse_version(res.stdout.decode(errors="replace"))
        return self._version

    def features(self) -> oci.Features:
        """``features`` parsed into ``oci.Features`` (cached); unsupported on crun 1.8.1."""
        if not self._features_asked:
            try:
                res = self._run(["features"])
            except UnsupportedOperationError:
                self._features = None
            else:
                self._features = oci.Features.from_json(res.stdout)
            self._features_asked = True
        if self._features is None:
            raise UnsupportedOperationError(
                f"{self.name} has no 'features' command (runc >= 1.1, crun >= 1.8.6)",
                [self.path, "features"],
            )
        return self._features

    def check_spec(self, spec: oci.Spec) -> builtins.list[oci.Problem]:
        """``check_spec(spec)`` against this runtime's features (or reported spec version),
        less the fields it is known to apply anyway (``spec_check.KNOWN_APPLIED``)."""
        applied = KNOWN_APPLIED.get(self.version().name, frozenset())
        try:
            return check_spec(spec, self.features(), applied=applied)
        except UnsupportedOperationError:
            return check_spec(spec, None, self.version().spec, applied=applied)

    def state(self, id: str) -> RuntimeState:
        """The container's state, normalised across runc and crun."""
        _files.validate_id(id, "container ID")
        return parse_state(self._run(["state", id]).stdout)

    def list(self) -> builtins.list[RuntimeState]:
        """Every container under ``root`` (``[]`` when none; runc prints ``null``)."""
        return parse_list(self._run(["list", "--format", "json"]).stdout)

    def ps(self, id: str) -> builtins.list[int]:
        """Host PIDs of the container's processes (``[]`` once stopped)."""
        _files.validate_id(id, "container ID")
        res = self._run(["ps", "--format", "json", id], check=False)
        if res.returncode != 0:
            if res.returncode < 0 and self.state(id).status == Status.STOPPED:
                return []  # crun 1.8.1 segfaults on ps of a stopped container
            raise self._error(res.returncode, self.command("ps", "--format", "json", id),
                              res.log)
        return parse_ps(res.stdout)

    def top(self, id: str, ps_args: Sequence[str] = ()) -> TopResults:
        """Host ``ps`` rows (``ps_args``, default ``-ef``) of the container's processes: runc
        prints them; for crun (``ps`` prints PIDs only) ``runtime.usage.host_top`` does."""
        _files.validate_id(id, "container ID")
        res = self._run(["ps", "--format", "table", id, *ps_args])
        top = parse_top(res.stdout.decode(errors="replace"))
        if top.headers == ["PID"]:
            return host_top(id, self.ps(id), ps_args)
        return top

    def stats(self, id: str) -> Stats:
        """One sample from the container's cgroup (v1 or v2), the same for runc and crun."""
        _files.validate_id(id, "container ID")
        return cgroup_stats(self._cgroups.get(id), lambda: self.state(id))

    def events_stats(self, id: str) -> Stats:
        """runc's own view (``events --stats``); ``UnsupportedOperationError`` on crun."""
        _files.validate_id(id, "container ID")
        res = self._run(["events", "--stats", id])
        line = res.stdout.strip().splitlines()
        if not line:
            raise OCIRuntimeError(f"{self.name} events --stats printed nothing",
                                  self.command("events", "--stats", id))
        ev = parse_event(line[0])
        if ev.stats is None:
            raise OCIRuntimeError(f"unexpected event {ev.raw!r}", self.command("events", id))
        return ev.stats

    def events(self, id: str, interval: float = 5.0) -> Iterator[Event]:
        """Stream ``events --interval`` records until the generator is closed.

        The ``events`` process is killed (whole group) when the generator is closed or
        garbage-collected. ``UnsupportedOperationError`` on runtimes without ``events``.
        """
        _files.validate_id(id, "container ID")
        call = Command(
            lambda log: [self.path, *self._global_args(log), "events",
                         f"--interval={max(interval, 0.001):g}s", id],
            name=self.name, env=self.env, log=None, timeout=self.timeout,
        )
        yield from call.stream(parse_event)

    # -- lifecycle -----------------------------------------------------------------------------
    def _bundle(self, bundle: Bundle | str | os.PathLike[str]) -> Bundle:
        return bundle if isinstance(bundle, Bundle) else Bundle.load(bundle)

    def _check_bundle(self, bundle: Bundle, strict: bool | None) -> None:
        check_bundle_resources(bundle.spec)  # a controller the host lacks: refused before runc runs
        refuse_or_warn(self.check_spec(bundle.spec), self.name, [self.path, "create"],
                       self.strict if strict is None else strict)

    def create(
        self,
        id: str,
        bundle: Bundle | str | os.PathLike[str],
        *,
        io: IO | None = None,
        pid_file: str | os.PathLike[str] | None = None,
        console_socket: str | os.PathLike[str] | None = None,
        no_pivot: bool = False,
        no_new_keyring: bool = False,
        detach: bool = True,
        extra_files: Sequence[int] = (),
        strict: bool | None = None,
        timeout: float | None = None,
    ) -> int:
        """Create a container (init waits for ``start``); return the init's host PID.

        ``io`` becomes the container's stdio (``NullIO`` when omitted); ``extra_files`` are
        descriptors passed on as fds 3.. (``--preserve-fds``). The init PID is subscribed to the
        monitor so ``wait(id)`` returns its exit status. ``detach`` is accepted for go-runc
        parity: ``create`` always detaches.
        """
        del detach
        _files.validate_id(id, "container ID")
        b = self._bundle(bundle)
        self._check_bundle(b, strict)
        return self._create_or_run("create", id, b, io, pid_file, console_socket, no_pivot,
                                   no_new_keyring, extra_files, timeout, [])

    def _create_or_run(
        self,
        verb: str,
        id: str,
        b: Bundle,
        io: IO | None,
        pid_file: str | os.PathLike[str] | None,
        console_socket: str | os.PathLike[str] | None,
        no_pivot: bool,
        no_new_keyring: bool,
        extra_files: Sequence[int],
        timeout: float | None,
        extra: Sequence[str],
    ) -> int:
        monitor = self._monitor()
        if len(extra_files) > _MAX_EXTRA_FILES:
            raise InvalidArgumentError(
                f"create {id}: {len(extra_files)} extra files, at most {_MAX_EXTRA_FILES}"
            )
        io = io if io is not None else NullIO()
        with self._scratch.use() as scratch:
            pid_path = os.path.join(scratch, f"{id}.pid") if pid_file is None else \
                os.path.abspath(pid_file)
            args = create_args(verb, id, str(b.path), pid_path, console_socket, no_pivot,
                                     no_new_keyring, len(extra_files), extra)
            try:
                self._run(args, io=io, capture=False, timeout=timeout, extra_fds=extra_files,
                          sweep=id)
                pid = int(Path(pid_path).read_text().strip())
            except RuntimeTimeoutError:
                self._force_delete_quiet(id)
                remove_stray_unified_dir(cgroups_path(b))
                raise
            except BaseException:
                remove_stray_unified_dir(cgroups_path(b))
                raise
            finally:
                io.close_after_start()
        try:
            self._inits[id] = monitor.subscribe(pid)
        except NotFoundError:
            self._inits.pop(id, None)
        cgroups = cgroups_path(b)
        if cgroups:
            self._cgroups[id] = cgroups
        return pid

    def _force_delete_quiet(self, id: str) -> None:
        with contextlib.suppress(OCIRuntimeError):
            self._run(["delete", "--force", id], timeout=10)

    def start(self, id: str, *, timeout: float | None = None) -> None:
        """Start the user process of a created container."""
        _files.validate_id(id, "container ID")
        self._run(["start", id], timeout=timeout, capture=False)

    def run(
        self,
        id: str,
        bundle: Bundle | str | os.PathLike[str],
        *,
        io: IO | None = None,
        detach: bool = False,
        pid_file: str | os.PathLike[str] | None = None,
        console_socket: str | os.PathLike[str] | None = None,
        no_pivot: bool = False,
        no_new_keyring: bool = False,
        strict: bool | None = None,
        timeout: float | None = None,
    ) -> int:
        """``create`` + ``start`` in one command.

        Foreground (``detach=False``): waits, removes the container and returns its exit code
        (``128+signal`` when killed); ``timeout`` (default: none) bounds the wait, after which
        the container is killed and deleted. Detached: returns the init PID like ``create``.
        """
        _files.validate_id(id, "container ID")
        b = self._bundle(bundle)
        self._check_bundle(b, strict)
        if detach:
            # create + start rather than `run --detach`: crun reaps an init that exits before
            # `run -d` returns, and its exit code would be lost; this way the monitor has it.
            pid = self._create_or_run("create", id, b, io, pid_file, console_socket, no_pivot,
                                      no_new_keyring, (), timeout, [])
            try:
                self.start(id, timeout=timeout)
            except BaseException:
                self._force_delete_quiet(id)
                remove_stray_unified_dir(self._cgroups.pop(id, None))
                raise
            return pid
        self._monitor()
        with self._scratch.use() as scratch:
            pid_path = os.path.abspath(pid_file) if pid_file else os.path.join(scratch, f"{id}.pid")
            args = create_args("run", id, str(b.path), pid_path, console_socket, no_pivot,
                                     no_new_keyring, 0, [])
            try:
                res = self._run(args, io=io if io is not None else NullIO(), capture=False,
                                timeout=timeout if timeout is not None else 0, check=False,
                                sweep=id)
            except RuntimeTimeoutError:
                self._force_delete_quiet(id)
                raise
            finally:
                remove_stray_unified_dir(cgroups_path(b))
        if res.returncode != 0 and logged_error(res.log):
            self._force_delete_quiet(id)
            raise self._error(res.returncode, self.command(*args), res.log)
        return res.returncode

    def kill(self, id: str, signal: int | str = _signal.SIGTERM, all: bool = False) -> None:
        """Send ``signal`` (number or name) to the init, or to every process with ``all``."""
        _files.validate_id(id, "container ID")
        args = ["kill"]
        if all:
            args.append("--all")
        self._run([*args, id, str(signal_number(signal))], capture=False)

    def delete(self, id: str, force: bool = False) -> None:
        """Delete a container; ``force`` kills it first and ignores a missing one."""
        _files.validate_id(id, "container ID")
        if id not in self._cgroups and stray_dirs_possible():
            self._remember_cgroups_path(id)  # a `state` call: only when there may be work
        try:
            self._run(["delete", "--force", id] if force else ["delete", id], capture=False)
        except NotFoundError:
            if not force:
                raise
        self._drop_init_if_done(id)
        remove_stray_unified_dir(self._cgroups.pop(id, None))

    def _remember_cgroups_path(self, id: str) -> None:
        """For a container another process created: its cgroupsPath from the bundle."""
        with contextlib.suppress(OCIRuntimeError, OSError, oci.SpecError, ValueError):
            path = cgroups_path(Bundle.load(self.state(id).bundle))
            if path:
                self._cgroups[id] = path

    def _drop_init_if_done(self, id: str) -> None:
        sub = self._inits.get(id)
        if sub is not None and sub.done():
            self._inits.pop(id, None)

    def pause(self, id: str) -> None:
        """Freeze every process of the container (freezer cgroup)."""
        _files.validate_id(id, "container ID")
        self._run(["pause", id], capture=False)

    def resume(self, id: str) -> None:
        """Thaw a paused container."""
        _files.validate_id(id, "container ID")
        self._run(["resume", id], capture=False)

    def update(self, id: str, resources: oci.LinuxResources) -> None:
        """Apply new cgroup limits (``update --resources -``, the JSON on stdin)."""
        _files.validate_id(id, "container ID")
        check_resources(resources, self._cgroups.get(id))
        payload = json.dumps(codec.unstructure(resources)).encode()
        self._run(["update", "--resources", "-", id], stdin=payload, capture=False)

    def checkpoint(
        self,
        id: str,
        image_path: str | os.PathLike[str],
        *,
        work_path: str | os.PathLike[str] | None = None,
        leave_running: bool = False,
        tcp_established: bool = False,
        shell_job: bool = False,
        extra_args: Sequence[str] = (),
    ) -> None:
        """CRIU checkpoint to ``image_path``; ``UnsupportedOperationError`` without CRIU."""
        _files.validate_id(id, "container ID")
        self._require_criu("checkpoint")
        args = ["checkpoint", "--image-path", os.fspath(image_path)]
        if work_path is not None:
            args += ["--work-path", os.fspath(work_path)]
        if leave_running:
            args.append("--leave-running")
        if tcp_established:
            args.append("--tcp-established")
        if shell_job:
            args.append("--shell-job")
        self._run([*args, *extra_args, id])

    def restore(
        self,
        id: str,
        bundle: Bundle | str | os.PathLike[str],
        image_path: str | os.PathLike[str],
        *,
        io: IO | None = None,
        extra_args: Sequence[str] = (),
    ) -> int:
        """CRIU restore (detached); returns the restored init PID."""
        _files.validate_id(id, "container ID")
        self._require_criu("restore")
        b = self._bundle(bundle)
        return self._create_or_run("restore", id, b, io, None, None, False, False, (), None,
                                   ["--detach", "--image-path", os.fspath(image_path),
                                    *extra_args])

    def _require_criu(self, what: str) -> None:
        if shutil.which("criu", path=self.env.get("PATH", _DEFAULT_PATH)) is None:
            raise UnsupportedOperationError(
                f"{what} needs CRIU, and no 'criu' binary is on PATH "
                f"({self.env.get('PATH', _DEFAULT_PATH)})",
                [self.binary, what],
            )

    # -- exec ----------------------------------------------------------------------------------
    def exec(
        self,
        id: str,
        process: oci.Process,
        *,
        detach: bool = True,
        io: IO | None = None,
        tty: bool | None = None,
        console_socket: str | os.PathLike[str] | None = None,
        pid_file: str | os.PathLike[str] | None = None,
        timeout: float | None = None,
    ) -> ExecProcess | ExitStatus:
        """Start ``process`` in a running container.

        Detached (default): returns an ``ExecProcess`` (host PID + pending exit status, see
        ``wait_exec``). Foreground: waits for it and returns its ``ExitStatus``. ``tty`` sets
        ``process.terminal`` (a copy is written; ``process`` is not changed).
        """
        _files.validate_id(id, "container ID")
        proc = codec.deep_copy(process)
        if tty is not None:
            proc.terminal = tty
        if proc.terminal and console_socket is None and detach:
            raise InvalidArgumentError(
                "exec with a terminal needs console_socket when detached"
            )
        monitor = self._monitor()
        with self._scratch.use() as tmp:
            fd, spec_path = tempfile.mkstemp(dir=tmp, prefix=f"{id}-exec-", suffix=".json")
            own_pid = pid_file is None
            pid_path = spec_path[:-5] + ".pid" if pid_file is None else os.path.abspath(pid_file)
            try:
                with os.fdopen(fd, "w") as f:
                    f.write(json.dumps(codec.unstructure(proc)))
                args = ["exec", "--process", spec_path, "--pid-file", pid_path]
                if console_socket is not None:
                    args += ["--console-socket", os.fspath(console_socket)]
                if detach:
                    args.append("--detach")
                args.append(id)
                if detach:
                    self._run(args, io=io if io is not None else NullIO(), capture=False,
                              timeout=timeout, sweep=id)
                    pid = int(Path(pid_path).read_text().strip())
                    try:
                        sub: Subscription | None = monitor.subscribe(pid)
                    except NotFoundError:
                        sub = None
                    return ExecProcess(id=id, pid=pid, subscription=sub)
                res = self._run(args, io=io if io is not None else NullIO(), capture=False,
                                timeout=timeout if timeout is not None else 0, check=False,
                                on_timeout=lambda: kill_pid_file(pid_path), sweep=id)
                if res.returncode != 0 and logged_error(res.log):
                    raise self._error(res.returncode, self.command(*args), res.log)
                return status_from_rc(res.returncode)
            finally:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(spec_path)
                if own_pid:
                    with contextlib.suppress(FileNotFoundError):
                        os.unlink(pid_path)

    def _merged_env(self, id: str, env: Sequence[str]) -> builtins.list[str]:
        """The container's env with ``env`` on top (runc appends ``--env``, crun replaces)."""
        if not env:
            return []
        try:
            spec = Bundle.load(self.state(id).bundle).spec
            base = list(spec.process.env or []) if spec.process is not None else []
        except (NotFoundError, OSError, oci.SpecError):
            base = []
        names = {e.split("=", 1)[0] for e in env}
        return [e for e in base if e.split("=", 1)[0] not in names] + list(env)

    def wait_exec(self, process: ExecProcess, timeout: float | None = None) -> ExitStatus:
        """Block until a detached exec'd process exits; its ``ExitStatus``."""
        return process.wait(timeout)

    def exec_sync(
        self,
        id: str,
        args: Sequence[str],
        timeout: float | None = None,
        *,
        env: Sequence[str] = (),
        cwd: str | None = None,
        user: str | None = None,
    ) -> ExecResult:
        """Run ``args`` in the container (its own process settings), wait, return the output.

        Keeps the first ``EXEC_SYNC_OUTPUT_MAX`` bytes of stdout and of stderr (the rest is read
        and dropped; the exit code stays). After ``timeout`` seconds the exec'd process, its
        process group and the runtime command are killed, and once they are gone (reaped)
        ``RuntimeTimeoutError`` is raised.
        """
        _files.validate_id(id, "container ID")
        if not args:
            raise InvalidArgumentError(f"exec_sync into {id}: empty command")
        self._monitor()
        merged = self._merged_env(id, env)
        return self._exec_capped(
            id, lambda pid, _: exec_args(id, args, pid, merged, cwd, user), timeout, None)

    def exec_sync_process(
        self, id: str, process: oci.Process | Mapping[str, Any], timeout: float | None = None,
        *, workdir: str | os.PathLike[str] | None = None,
    ) -> ExecResult:
        """``exec_sync`` of a process spec (``exec --process``, no terminal) without the monitor:
        no child subreaper (for containers under conmon); files in ``workdir`` (or scratch)."""
        _files.validate_id(id, "container ID")
        return self._exec_capped(
            id, lambda pid, path: ["exec", "--process", path, "--pid-file", pid, id], timeout,
            exec_spec(id, process), workdir)

    def _exec_capped(
        self, id: str, args_for: Callable[[str, str], builtins.list[str]], timeout: float | None,
        spec: Mapping[str, Any] | None, workdir: str | os.PathLike[str] | None = None,
    ) -> ExecResult:
        """``run_capped`` of ``args_for(pid file, spec file)``, ``spec`` written to the latter."""
        with (self._scratch.use() if workdir is None else contextlib.nullcontext(workdir)) as tmp, \
                exec_files(tmp, id, spec) as (pid_path, spec_path):
            argv = args_for(pid_path, spec_path)
            return run_capped(
                lambda output, on_timeout: self._run(
                    argv, io=output, capture=False, check=False, on_timeout=on_timeout,
                    timeout=timeout if timeout is not None else 0, sweep=id),
                pid_path, lambda res: self._error(res.returncode, self.command(*argv), res.log))

    # -- supervision ---------------------------------------------------------------------------
    def wait(self, id: str, timeout: float | None = None) -> ExitStatus:
        """Block until the container's init exits; its ``ExitStatus`` (``128+sig`` if killed).

        Exact for containers created by this ``Runc`` (its monitor reaped the init). For
        others whose init was re-parented to this process, the monitor adopts it; otherwise
        the exit is observed (pidfd) but the code is unknown: ``exit_code`` 255.
        """
        _files.validate_id(id, "container ID")
        sub = self._inits.get(id)
        if sub is None:
            st = self.state(id)
            if st.status == Status.STOPPED or st.pid <= 0:
                return ExitStatus(exit_code=255)
            try:
                sub = self._monitor().subscribe(st.pid)
                self._inits[id] = sub
            except NotFoundError:  # not ours to reap: see the exit, the code is unknown
                exited = wait_exit(st.pid, timeout)
                if exited is False:
                    raise RuntimeTimeoutError(
                        f"container {id} still running after {timeout} s") from None
                return ExitStatus(exit_code=255, exited_at=None if exited is None
                                  else _dt.datetime.now(_dt.UTC))
        return sub.wait(timeout)

    def stop(
        self, id: str, timeout: float = 10.0, signal: int | str = _signal.SIGTERM
    ) -> StopResult:
        """Send ``signal``, wait up to ``timeout`` s, then SIGKILL (all processes) and wait.

        A PID-namespace init ignores signals it has no handler for, so escalation is normal.
        The result says which signals were sent and how the init ended.
        """
        _files.validate_id(id, "container ID")
        result = StopResult(id=id)
        st = self.state(id)
        if st.status == Status.STOPPED:
            result.already_stopped = True
            sub = self._inits.get(id)
            if sub is not None and sub.done():
                result.exit_status = sub.status
            return result
        sig = signal_number(signal)
        try:
            self.kill(id, sig)
            result.signals.append(sig)
            if st.status == Status.PAUSED:  # a frozen cgroup gets the signal once thawed
                with contextlib.suppress(NotRunningError):
                    self.resume(id)
        except NotRunningError:
            result.already_stopped = True
        try:
            result.exit_status = self.wait(id, timeout)
            return result
        except RuntimeTimeoutError:
            pass
        result.escalated = True
        try:
            self.kill(id, _signal.SIGKILL, all=True)
            result.signals.append(int(_signal.SIGKILL))
        except NotRunningError:
            pass
        result.exit_status = self.wait(id, max(timeout, 10.0))
        return result


if TYPE_CHECKING:  # mypy --strict checks that Runc implements the Runtime protocol

    def _implements_runtime(r: Runc) -> Runtime:
        return r
