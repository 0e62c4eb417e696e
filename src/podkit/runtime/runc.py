"""``Runc``: drive runc, crun or any runc-compatible CLI (the Python go-runc, plus reaping).

Every command is started with ``posix_spawn``: an explicit environment, exactly the descriptors
it needs, default signal dispositions, its own session and process group, and a timeout (the
whole group is SIGKILLed when it expires). Errors come from the runtime's JSON log
(``--log <per-call memfd> --log-format json``) and are typed (``runtime.errors``). Container
stdio is whatever ``IO`` the caller hands in (``NullIO`` by default): podkit never captures a
container's inherited stdout through a pipe it waits on. Captured command output (``state``,
``list``, ``ps``...) goes to anonymous memory files, read after the command exits.

Exit statuses come from the in-process ``Monitor`` (child subreaper): ``create`` subscribes to
the init PID, ``exec(detach=True)`` to the exec PID, ``wait``/``wait_exec`` block on them.
"""

from __future__ import annotations

import builtins
import contextlib
import datetime as _dt
import fcntl
import json
import os
import re
import select
import shutil
import signal as _signal
import subprocess
import tempfile
import threading
import warnings
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs

from podkit import _files, _linux, oci
from podkit.oci import codec
from podkit.runtime.base import (
    ContainerState,
    ExecResult,
    ExitStatus,
    Runtime,
    Status,
    signal_number,
)
from podkit.runtime.bundle import Bundle
from podkit.runtime.errors import (
    NotFoundError,
    NotRunningError,
    OCIRuntimeError,
    RuntimeTimeoutError,
    UnsupportedOperationError,
    parse_runtime_error,
)
from podkit.runtime.io import IO, CappedOutput, NullIO
from podkit.runtime.monitor import Monitor, PidFileProcess, Subscription, default_monitor

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


# --- result models ---------------------------------------------------------------------------


@attrs.define(slots=True, kw_only=True)
class RuntimeVersion:
    """``<runtime> --version``: name, version, commit and the runtime-spec version it reports."""

    name: str
    version: str
    commit: str = ""
    spec: str = ""


@attrs.define(slots=True, kw_only=True)
class TopResults:
    """``ps --format table`` parsed: column headers and one row per process (go-runc Top)."""

    headers: list[str]
    processes: list[list[str]]


@attrs.define(slots=True, kw_only=True)
class StopResult:
    """What ``stop`` did: signals sent, whether it escalated to SIGKILL, the exit status."""

    id: str
    signals: list[int] = attrs.field(factory=list)
    escalated: bool = False
    already_stopped: bool = False
    exit_status: ExitStatus | None = None


@attrs.define(slots=True, kw_only=True)
class ExecProcess:
    """A detached exec'd process: its host PID and its pending exit status."""

    id: str
    pid: int
    subscription: Subscription | None = None

    def wait(self, timeout: float | None = None) -> ExitStatus:
        """Block until the process exits (needs the in-process monitor)."""
        if self.subscription is None:
            raise UnsupportedOperationError(
                f"exec pid {self.pid} in {self.id} is not supervised by this process"
            )
        return self.subscription.wait(timeout)


@attrs.define(slots=True, kw_only=True)
class CpuStats:
    """``data.cpu``: usage in nanoseconds and CFS throttling counters."""

    total: int = 0
    percpu: list[int] = attrs.field(factory=list)
    kernel: int = 0
    user: int = 0
    throttling_periods: int = 0
    throttled_periods: int = 0
    throttled_time: int = 0


@attrs.define(slots=True, kw_only=True)
class MemoryEntry:
    """One memory counter group (``usage``, ``swap``, ``kernel``, ``kernelTCP``)."""

    limit: int = 0
    usage: int = 0
    max: int = 0
    failcnt: int = 0


@attrs.define(slots=True, kw_only=True)
class MemoryStats:
    """``data.memory``: cache, counter groups and the raw ``memory.stat`` map."""

    cache: int = 0
    usage: MemoryEntry = attrs.field(factory=MemoryEntry)
    swap: MemoryEntry = attrs.field(factory=MemoryEntry)
    kernel: MemoryEntry = attrs.field(factory=MemoryEntry)
    kernel_tcp: MemoryEntry = attrs.field(factory=MemoryEntry)
    raw: dict[str, int] = attrs.field(factory=dict)


@attrs.define(slots=True, kw_only=True)
class Stats:
    """``runc events --stats`` ``data``; sections podkit does not model stay in ``raw``."""

    cpu: CpuStats = attrs.field(factory=CpuStats)
    memory: MemoryStats = attrs.field(factory=MemoryStats)
    pids_current: int = 0
    pids_limit: int = 0
    raw: dict[str, Any] = attrs.field(factory=dict)


@attrs.define(slots=True, kw_only=True)
class Event:
    """One ``runc events`` record: ``type`` is ``stats``, ``oom``, ``error``..."""

    type: str
    id: str
    stats: Stats | None = None
    raw: dict[str, Any] = attrs.field(factory=dict)


class UnsupportedFieldWarning(UserWarning):
    """The spec uses fields this runtime would silently ignore (``Runc(strict=False)``).

    ``problems`` holds them as ``oci.Problem`` (JSON path + why), as ``check_spec`` returns them.
    """

    def __init__(self, message: str, problems: Sequence[oci.Problem] = ()) -> None:
        super().__init__(message)
        self.problems: list[oci.Problem] = list(problems)


# --- pure parsers ----------------------------------------------------------------------------


def _json(text: bytes | str, what: str) -> Any:
    try:
        return json.loads(text)
    except ValueError as e:
        shown = text[:200] if isinstance(text, str) else text[:200].decode(errors="replace")
        raise OCIRuntimeError(f"cannot parse {what} output as JSON: {e}: {shown!r}") from e


def parse_state(text: bytes | str) -> ContainerState:
    """Parse ``state <id>`` output (runc or crun shape)."""
    return ContainerState.from_dict(_json(text, "state"), source="runtime state")


def parse_list(text: bytes | str) -> list[ContainerState]:
    """Parse ``list --format json``: runc prints ``null`` when empty, crun ``[]``."""
    data = _json(text, "list") if text.strip() else None
    if data is None:
        return []
    if not isinstance(data, list):
        raise OCIRuntimeError(f"list output is not a JSON array: {str(data)[:200]}")
    return [ContainerState.from_dict(d, source="runtime list") for d in data]


def parse_ps(text: bytes | str) -> list[int]:
    """Parse ``ps --format json``: an array of host PIDs (``null`` for none)."""
    data = _json(text, "ps") if text.strip() else None
    if data is None:
        return []
    if not isinstance(data, list) or not all(
        isinstance(p, int) and not isinstance(p, bool) for p in data
    ):
        raise OCIRuntimeError(f"ps output is not an array of PIDs: {str(data)[:200]}")
    return list(data)


def parse_top(text: str) -> TopResults:
    """Parse ``ps --format table``: header, then rows; the last column keeps its spaces."""
    lines = [ln for ln in text.splitlines() if ln.strip()]
    if not lines:
        return TopResults(headers=[], processes=[])
    headers = lines[0].split()
    n = len(headers)
    pid_col = headers.index("PID") if "PID" in headers else -1
    rows: list[list[str]] = []
    for line in lines[1:]:
        fields = line.split(None, n - 1) if n > 1 else [line.strip()]
        if pid_col >= 0 and pid_col < len(fields) and fields[pid_col] == "-":
            continue
        rows.append(fields)
    return TopResults(headers=headers, processes=rows)


def _int(v: Any) -> int:
    return v if isinstance(v, int) and not isinstance(v, bool) else 0


def _entry(d: Any) -> MemoryEntry:
    d = d if isinstance(d, dict) else {}
    return MemoryEntry(limit=_int(d.get("limit")), usage=_int(d.get("usage")),
                       max=_int(d.get("max")), failcnt=_int(d.get("failcnt")))


def parse_stats(data: Mapping[str, Any]) -> Stats:
    """Build ``Stats`` from the ``data`` object of a ``stats`` event."""
    cpu = data.get("cpu") or {}
    usage = cpu.get("usage") or {}
    thr = cpu.get("throttling") or {}
    mem = data.get("memory") or {}
    pids = data.get("pids") or {}
    return Stats(
        cpu=CpuStats(
            total=_int(usage.get("total")),
            percpu=[_int(x) for x in usage.get("percpu") or []],
            kernel=_int(usage.get("kernel")),
            user=_int(usage.get("user")),
            throttling_periods=_int(thr.get("periods")),
            throttled_periods=_int(thr.get("throttledPeriods")),
            throttled_time=_int(thr.get("throttledTime")),
        ),
        memory=MemoryStats(
            cache=_int(mem.get("cache")),
            usage=_entry(mem.get("usage")),
            swap=_entry(mem.get("swap")),
            kernel=_entry(mem.get("kernel")),
            kernel_tcp=_entry(mem.get("kernelTCP")),
            raw={str(k): _int(v) for k, v in (mem.get("raw") or {}).items()},
        ),
        pids_current=_int(pids.get("current")),
        pids_limit=_int(pids.get("limit")),
        raw=dict(data),
    )


def parse_event(line: bytes | str) -> Event:
    """Parse one ``runc events`` JSON line."""
    data = _json(line, "events")
    if not isinstance(data, dict):
        raise OCIRuntimeError(f"event is not a JSON object: {str(data)[:200]}")
    stats = None
    if data.get("type") == "stats" and isinstance(data.get("data"), dict):
        stats = parse_stats(data["data"])
    return Event(type=str(data.get("type", "")), id=str(data.get("id", "")), stats=stats, raw=data)


def parse_version(text: str) -> RuntimeVersion:
    """Parse ``--version`` of runc (``runc version X``) or crun (``crun version X``)."""
    name = version = commit = spec = ""
    for line in text.splitlines():
        m = re.match(r"^(\S+) version (\S+)", line)
        if m and not name:
            name, version = m.group(1), m.group(2)
        elif line.startswith("commit:"):
            commit = line.split(":", 1)[1].strip()
        elif line.startswith("spec:"):
            spec = line.split(":", 1)[1].strip()
    if not name:
        raise OCIRuntimeError(f"cannot parse runtime version output {text[:200]!r}")
    return RuntimeVersion(name=name, version=version, commit=commit, spec=spec)


# --- spec vs. runtime features ---------------------------------------------------------------

_SEMVER_CORE = re.compile(r"^\d+\.\d+\.\d+")

# JSON paths (list indexes as ``[]``) of fields a runtime applies although the runtime-spec
# version it reports predates them (checked on this machine: runc-empirical.md §5 for
# ``domainname``, the rest in tests/runtime/test_runc_integration.py and
# tests/sandbox/test_seccomp_integration.py): crun 1.8.1 reports 1.0.0, runc 1.1.5 1.0.2-dev.
_SECCOMP_ERRNO = frozenset({"$.linux.seccomp.defaultErrnoRet",
                            "$.linux.seccomp.syscalls[].errnoRet"})
_KNOWN_APPLIED: dict[str, frozenset[str]] = {
    "crun": frozenset({
        "$.domainname",
        "$.process.user.umask",
        "$.linux.personality",
        "$.hooks.createRuntime",
        "$.hooks.createContainer",
        "$.hooks.startContainer",
    }) | _SECCOMP_ERRNO,
    "runc": _SECCOMP_ERRNO,
}
_INDEX = re.compile(r"\[\d+\]")


def check_spec(
    spec: oci.Spec,
    features: oci.Features | None = None,
    spec_version: str | None = None,
    *,
    applied: Collection[str] = (),
) -> list[oci.Problem]:
    """Fields of ``spec`` the runtime would silently ignore (``str(problem)``: "path: why").

    ``oci.unsupported_fields`` against the runtime's ``features`` where it has them, else
    against what its ``--version`` says (``spec_version``: ociVersionMin/Max, nothing else
    known; no version check when it reports none). ``applied``: JSON paths the runtime is known
    to honour anyway (``[]`` for any list index). Unknown top-level keys are always reported:
    runtimes ignore them.
    """
    problems = oci.unknown_keys(spec)
    if features is None and spec_version and _SEMVER_CORE.match(spec_version):
        features = oci.Features(oci_version_min=spec_version, oci_version_max=spec_version)
    if features is not None:
        problems += [p for p in oci.unsupported_fields(spec, features)
                     if p.path not in applied and _INDEX.sub("[]", p.path) not in applied]
    return problems


# --- subprocess plumbing ---------------------------------------------------------------------


@attrs.define(slots=True)
class _Result:
    returncode: int
    stdout: bytes
    log: str


def _memfd(name: str) -> int:
    return os.memfd_create(name, os.MFD_CLOEXEC)


def _read_fd(fd: int) -> bytes:
    os.lseek(fd, 0, os.SEEK_SET)
    chunks = []
    while True:
        b = os.read(fd, 65536)
        if not b:
            break
        chunks.append(b)
    return b"".join(chunks)


_FD_FLOOR = 64  # sources are moved above every target descriptor before the dup2 actions
_MAX_EXTRA_FILES = _FD_FLOOR - 4


def _spawn(argv: Sequence[str], fds: Mapping[int, int], env: Mapping[str, str]) -> int:
    """``posix_spawn`` ``argv`` in a new session with ``fds`` (target -> source) as its only fds.

    Every other descriptor of this process is close-on-exec (Python's default), so the child
    gets exactly 0, 1, 2 and the listed extras. Ignored signals (Python ignores SIGPIPE) are
    reset to their defaults so the container does not inherit them; the mask is emptied.
    """
    moved: list[tuple[int, int]] = []
    try:
        for target, src in fds.items():
            moved.append((target, fcntl.fcntl(src, fcntl.F_DUPFD_CLOEXEC, _FD_FLOOR)))
        actions = [(os.POSIX_SPAWN_DUP2, high, target) for target, high in moved]
        return os.posix_spawn(
            argv[0], list(argv), dict(env), file_actions=actions, setsid=True,
            setsigdef=(_signal.SIGPIPE, _signal.SIGXFSZ), setsigmask=(),
        )
    finally:
        for _, high in moved:
            os.close(high)


def _wait_pid(pid: int, timeout: float | None) -> int:
    """Wait for our child ``pid`` (a pidfd, no polling); Popen-style code (``-sig`` if killed).

    Raises ``subprocess.TimeoutExpired`` after ``timeout`` seconds; the child is left running.
    """
    if timeout is not None:
        fd = os.pidfd_open(pid)
        try:
            poller = select.poll()
            poller.register(fd, select.POLLIN)
            if not poller.poll(max(int(timeout * 1000), 1)):
                raise subprocess.TimeoutExpired(str(pid), timeout)
        finally:
            os.close(fd)
    while True:
        try:
            _, status = os.waitpid(pid, 0)
            break
        except InterruptedError:
            continue
    return -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.waitstatus_to_exitcode(status)


def _kill_pid_group(pid: int) -> None:
    """SIGKILL the session/process group led by our child ``pid`` and reap the child."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, _signal.SIGKILL)
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, _signal.SIGKILL)
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, 0)


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, _signal.SIGKILL)
    with contextlib.suppress(ProcessLookupError):
        proc.kill()
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(5)


class Runc:
    """An OCI runtime CLI (runc, crun, ...): lifecycle, exec, stats, supervision.

    ``root`` is the runtime's state dir (``--root``; use a private one per user of podkit),
    ``log`` an optional persistent JSON log (errors are read from the part each call appends),
    ``strict`` makes ``create`` refuse specs with fields the runtime would silently ignore
    (else it warns with ``UnsupportedFieldWarning``). ``monitor`` (default: the process-wide
    one) reaps container processes; ``timeout`` bounds every runtime command.
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
        self.env = dict(env) if env is not None else {
            "PATH": os.environ.get("PATH", _DEFAULT_PATH)
        }
        self._path: str | None = None
        self._features: oci.Features | None = None
        self._features_asked = False
        self._version: RuntimeVersion | None = None
        self._inits: dict[str, Subscription] = {}
        self._cgroups: dict[str, str] = {}  # id -> linux.cgroupsPath of containers we created
        self._lock = threading.Lock()
        self._tmp: str | None = None
        self._tmp_users = 0

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

    def _global_args(self, log: str | None) -> list[str]:
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

    def command(self, *args: str) -> list[str]:
        """The full argv for a runtime sub-command: binary, global flags, ``args``.

        Used by supervisors (conmon) that start the runtime themselves.
        """
        log = str(self.log) if self.log is not None else None
        return [self.path, *self._global_args(log), *args]

    @contextlib.contextmanager
    def _scratch(self) -> Iterator[str]:
        """A private dir for pid files and process specs, removed when no call uses it.

        On tmpfs (``/dev/shm``) when writable. Reference-counted so concurrent calls share
        one directory and the last one out removes it: nothing is left behind.
        """
        with self._lock:
            if self._tmp is None:
                shm = "/dev/shm"  # tmpfs: pid files and process specs never touch a disk
                base = shm if os.path.isdir(shm) and os.access(shm, os.W_OK) else None
                self._tmp = tempfile.mkdtemp(prefix="podkit-runc-", dir=base)
            self._tmp_users += 1
            path = self._tmp
        try:
            yield path
        finally:
            with self._lock:
                self._tmp_users -= 1
                if self._tmp_users == 0 and self._tmp is not None:
                    shutil.rmtree(self._tmp, ignore_errors=True)
                    self._tmp = None

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
    ) -> _Result:
        """Run one command; raise the typed error on failure (``check``) or timeout.

        ``extra_fds`` become the child's descriptors 3, 4, ... (``--preserve-fds``); the
        per-call log memfd comes right after them.
        """
        log_fd = -1
        offset = 0
        out_fd = in_fd = err_fd = -1
        if self.log is not None:
            log_arg = str(self.log)
            with contextlib.suppress(FileNotFoundError):
                offset = self.log.stat().st_size
        else:
            log_fd = _memfd("runtime-log")
            log_arg = f"/proc/self/fd/{log_fd}"
        argv = [self.path, *self._global_args(log_arg), *args]
        devnull = -1
        try:
            if io is not None:
                child_in, child_out, child_err = io.child_fds()
            else:
                child_in = child_out = child_err = None
            if stdin is not None:
                in_fd = _memfd("runtime-stdin")
                os.write(in_fd, stdin)
                os.lseek(in_fd, 0, os.SEEK_SET)
                child_in = in_fd
            if capture:
                out_fd = _memfd("runtime-stdout")
                child_out = out_fd
            if child_err is None:
                err_fd = _memfd("runtime-stderr")
                child_err = err_fd
            if child_in is None or child_out is None:
                devnull = os.open(os.devnull, os.O_RDWR | os.O_CLOEXEC)
            fds = {0: devnull if child_in is None else child_in,
                   1: devnull if child_out is None else child_out,
                   2: child_err}
            for i, fd in enumerate(extra_fds):
                fds[3 + i] = fd
            if log_fd >= 0:
                log_target = 3 + len(extra_fds)
                fds[log_target] = log_fd
                argv = [self.path, *self._global_args(f"/proc/self/fd/{log_target}"), *args]
            try:
                pid = _spawn(argv, fds, self.env)
            except FileNotFoundError as e:
                self._path = None
                raise NotFoundError(
                    f"OCI runtime binary {self.binary!r} not found", argv
                ) from e
            finally:
                if io is not None:
                    io.close_after_start()
            limit = self.timeout if timeout is None else timeout
            try:
                rc = _wait_pid(pid, limit if limit > 0 else None)
            except subprocess.TimeoutExpired:
                if on_timeout is not None:
                    on_timeout()
                _kill_pid_group(pid)
                raise RuntimeTimeoutError(
                    f"{self.name} did not finish within {limit} s; its process group was killed",
                    argv,
                ) from None
            except BaseException:
                _kill_pid_group(pid)
                raise
            out = _read_fd(out_fd) if out_fd >= 0 else b""
            if log_fd >= 0:
                log_text = _read_fd(log_fd).decode(errors="replace")
            else:
                log_text = self._read_log_from(offset)
            if not log_text.strip() and err_fd >= 0:
                log_text = _read_fd(err_fd).decode(errors="replace")
            if check and rc != 0:
                raise self._error(rc, argv, log_text)
            return _Result(rc, out, log_text)
        finally:
            for fd in (log_fd, out_fd, in_fd, err_fd, devnull):
                if fd >= 0:
                    os.close(fd)

    def _read_log_from(self, offset: int) -> str:
        assert self.log is not None
        try:
            with open(self.log, "rb") as f:
                f.seek(offset)
                return f.read().decode(errors="replace")
        except FileNotFoundError:
            return ""

    def _error(self, rc: int, argv: Sequence[str], log_text: str) -> OCIRuntimeError:
        if rc < 0:
            try:
                signame = _signal.Signals(-rc).name
            except ValueError:
                signame = f"signal {-rc}"
            text = log_text or f"{self.name} was killed by {signame}"
            err = parse_runtime_error(text, argv, self.name)
            if not log_text:
                return OCIRuntimeError(err.message, argv, "")
            return err
        if not log_text.strip():
            return OCIRuntimeError(f"{self.name} exited with status {rc}", argv, "")
        return parse_runtime_error(log_text, argv, self.name)

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
        """``check_spec(spec)`` against this runtime's features (or reported spec version).

        Fields the runtime is known to apply although its reported spec version predates them
        are not reported: crun 1.8.1 reports 1.0.0 but sets ``domainname``, ``umask``,
        ``personality`` and the createRuntime/createContainer/startContainer hooks; both honour
        seccomp ``defaultErrnoRet``/``errnoRet`` (spec 1.1.0; runc 1.1.5 reports 1.0.2-dev).
        """
        applied = _KNOWN_APPLIED.get(self.version().name, frozenset())
        try:
            return check_spec(spec, self.features(), applied=applied)
        except UnsupportedOperationError:
            return check_spec(spec, None, self.version().spec, applied=applied)

    def state(self, id: str) -> ContainerState:
        """The container's state, normalised across runc and crun."""
        _files.validate_id(id, "container ID")
        return parse_state(self._run(["state", id]).stdout)

    def list(self) -> builtins.list[ContainerState]:
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
        """``ps`` table of the container's processes (runc: host ``ps -ef`` columns).

        ``ps_args`` replace runc's default ``-ef``. ``UnsupportedOperationError`` when the
        runtime prints only PIDs (crun).
        """
        _files.validate_id(id, "container ID")
        res = self._run(["ps", "--format", "table", id, *ps_args])
        top = parse_top(res.stdout.decode(errors="replace"))
        if top.headers == ["PID"]:
            raise UnsupportedOperationError(
                f"{self.name} ps prints only PIDs; top needs runc", self.command("ps", id)
            )
        return top

    def stats(self, id: str) -> Stats:
        """One stats sample (``events --stats``); ``UnsupportedOperationError`` on crun."""
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
        log_fd = _memfd("runtime-log")
        err_fd = _memfd("runtime-stderr")
        argv = [self.path, *self._global_args(f"/proc/self/fd/{log_fd}"), "events",
                f"--interval={max(interval, 0.001):g}s", id]
        try:
            proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                    stderr=err_fd, env=self.env, pass_fds=(log_fd,),
                                    start_new_session=True)
        except BaseException:
            os.close(log_fd)
            os.close(err_fd)
            raise
        assert proc.stdout is not None
        try:
            for line in proc.stdout:
                if line.strip():
                    yield parse_event(line)
            rc = proc.wait(self.timeout)
            if rc != 0:
                text = _read_fd(log_fd).decode(errors="replace")
                if not text.strip():
                    text = _read_fd(err_fd).decode(errors="replace")
                raise self._error(rc, argv, text)
        finally:
            _kill_group(proc)
            proc.stdout.close()
            os.close(log_fd)
            os.close(err_fd)

    # -- lifecycle -----------------------------------------------------------------------------
    def _bundle(self, bundle: Bundle | str | os.PathLike[str]) -> Bundle:
        return bundle if isinstance(bundle, Bundle) else Bundle.load(bundle)

    def _check_bundle(self, bundle: Bundle, strict: bool | None) -> None:
        problems = self.check_spec(bundle.spec)
        if not problems:
            return
        text = "; ".join(map(str, problems))
        if self.strict if strict is None else strict:
            raise UnsupportedOperationError(
                f"{self.name} would silently ignore: {text}", [self.path, "create"]
            )
        warnings.warn(UnsupportedFieldWarning(f"{self.name} will ignore: {text}", problems),
                      stacklevel=3)

    def _create_args(
        self,
        verb: str,
        id: str,
        bundle: Bundle,
        pid_file: str,
        console_socket: str | os.PathLike[str] | None,
        no_pivot: bool,
        no_new_keyring: bool,
        preserve_fds: int,
        extra: Sequence[str],
    ) -> builtins.list[str]:
        args = [verb, "--bundle", str(bundle.path), "--pid-file", pid_file]
        if console_socket is not None:
            args += ["--console-socket", os.fspath(console_socket)]
        if no_pivot:
            args.append("--no-pivot")
        if no_new_keyring:
            args.append("--no-new-keyring")
        if preserve_fds:
            args += ["--preserve-fds", str(preserve_fds)]
        return [*args, *extra, id]

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
            from podkit.errors import InvalidArgumentError

            raise InvalidArgumentError(
                f"create {id}: {len(extra_files)} extra files, at most {_MAX_EXTRA_FILES}"
            )
        io = io if io is not None else NullIO()
        with self._scratch() as scratch:
            pid_path = (
                os.path.join(scratch, f"{id}.pid")
                if pid_file is None
                else os.path.abspath(pid_file)
            )
            args = self._create_args(verb, id, b, pid_path, console_socket, no_pivot,
                                     no_new_keyring, len(extra_files), extra)
            try:
                self._run(args, io=io, capture=False, timeout=timeout, extra_fds=extra_files)
                pid = int(Path(pid_path).read_text().strip())
            except RuntimeTimeoutError:
                self._force_delete_quiet(id)
                _remove_stray_unified_dir(_cgroups_path(b))
                raise
            except BaseException:
                _remove_stray_unified_dir(_cgroups_path(b))
                raise
            finally:
                io.close_after_start()
        try:
            self._inits[id] = monitor.subscribe(pid)
        except NotFoundError:
            self._inits.pop(id, None)
        cgroups_path = _cgroups_path(b)
        if cgroups_path:
            self._cgroups[id] = cgroups_path
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
                _remove_stray_unified_dir(self._cgroups.pop(id, None))
                raise
            return pid
        self._monitor()
        with self._scratch() as scratch:
            pid_path = os.path.abspath(pid_file) if pid_file else os.path.join(scratch, f"{id}.pid")
            args = self._create_args("run", id, b, pid_path, console_socket, no_pivot,
                                     no_new_keyring, 0, [])
            try:
                res = self._run(args, io=io if io is not None else NullIO(), capture=False,
                                timeout=timeout if timeout is not None else 0, check=False)
            except RuntimeTimeoutError:
                self._force_delete_quiet(id)
                raise
            finally:
                _remove_stray_unified_dir(_cgroups_path(b))
        if res.returncode != 0 and _last_error(res.log):
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
        if id not in self._cgroups and _stray_dirs_possible():
            self._remember_cgroups_path(id)  # a `state` call: only when there may be work
        try:
            self._run(["delete", "--force", id] if force else ["delete", id], capture=False)
        except NotFoundError:
            if not force:
                raise
        self._drop_init_if_done(id)
        _remove_stray_unified_dir(self._cgroups.pop(id, None))

    def _remember_cgroups_path(self, id: str) -> None:
        """For a container another process created: its cgroupsPath from the bundle."""
        with contextlib.suppress(OCIRuntimeError, OSError, oci.SpecError, ValueError):
            path = _cgroups_path(Bundle.load(self.state(id).bundle))
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
            from podkit.errors import InvalidArgumentError

            raise InvalidArgumentError(
                "exec with a terminal needs console_socket when detached"
            )
        monitor = self._monitor()
        with self._scratch() as tmp:
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
                              timeout=timeout)
                    pid = int(Path(pid_path).read_text().strip())
                    try:
                        sub: Subscription | None = monitor.subscribe(pid)
                    except NotFoundError:
                        sub = None
                    return ExecProcess(id=id, pid=pid, subscription=sub)
                res = self._run(args, io=io if io is not None else NullIO(), capture=False,
                                timeout=timeout if timeout is not None else 0, check=False,
                                on_timeout=lambda: self._kill_pid_file(pid_path))
                if res.returncode != 0 and _last_error(res.log):
                    raise self._error(res.returncode, self.command(*args), res.log)
                return _status_from_rc(res.returncode)
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

    @staticmethod
    def _kill_pid_file(pid_path: str) -> None:
        try:
            pid = int(Path(pid_path).read_text().strip())
        except (OSError, ValueError):
            return
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, _signal.SIGKILL)

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
            from podkit.errors import InvalidArgumentError

            raise InvalidArgumentError(f"exec_sync into {id}: empty command")
        self._monitor()
        with self._scratch() as tmp:
            fd, pid_path = tempfile.mkstemp(dir=tmp, prefix=f"{id}-sync-", suffix=".pid")
            os.close(fd)
            os.unlink(pid_path)
            argv = ["exec", "--pid-file", pid_path]
            for e in self._merged_env(id, env):
                argv += ["--env", e]
            if cwd is not None:
                argv += ["--cwd", cwd]
            if user is not None:
                argv += ["--user", user]
            argv += [id, *args]
            try:
                with CappedOutput() as output, PidFileProcess(pid_path) as victim:
                    try:
                        res = self._run(argv, io=output, capture=False,
                                        timeout=timeout if timeout is not None else 0,
                                        check=False, on_timeout=victim.kill)
                    except BaseException:  # timed out (or interrupted): runc killed mid-way
                        victim.kill()  # the pid file may have appeared while runc was killed
                        victim.wait_gone()
                        raise
                    stdout, stderr = output.finish()
                if res.returncode != 0 and _last_error(res.log):
                    raise self._error(res.returncode, self.command(*argv), res.log)
                rc = res.returncode if res.returncode >= 0 else 128 - res.returncode
                return ExecResult(exit_code=rc, stdout=stdout, stderr=stderr)
            finally:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(pid_path)

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
            except NotFoundError:
                return self._wait_foreign(id, st.pid, timeout)
        return sub.wait(timeout)

    def _wait_foreign(self, id: str, pid: int, timeout: float | None) -> ExitStatus:
        try:
            fd = os.pidfd_open(pid)
        except ProcessLookupError:
            return ExitStatus(exit_code=255)
        try:
            poller = select.poll()
            poller.register(fd, select.POLLIN)
            if not poller.poll(None if timeout is None else int(timeout * 1000)):
                raise RuntimeTimeoutError(f"container {id} still running after {timeout} s")
        finally:
            os.close(fd)
        return ExitStatus(exit_code=255, exited_at=_dt.datetime.now(_dt.UTC))

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


def _cgroups_path(b: Bundle) -> str | None:
    return b.spec.linux.cgroups_path if b.spec.linux is not None else None


_UNIFIED = "/sys/fs/cgroup/unified"
_TMPFS_MAGIC = 0x01021994


def _remove_stray_unified_dir(cgroups_path: str | None) -> None:
    """Remove ``/sys/fs/cgroup/unified/<path>`` when it is a plain tmpfs dir, not a cgroup.

    crun 1.8.1 on a hybrid host whose cgroup2 mount was hidden (as ``scripts/isolated`` does)
    creates that directory with a ``cgroup.procs`` *file* on the cgroup tmpfs and never removes
    it. Only such a directory (on tmpfs, nothing but ``cgroup.procs``) is touched.
    """
    if not cgroups_path or ":" in cgroups_path:
        return
    rel = cgroups_path.strip("/")
    if not rel or ".." in rel.split("/"):
        return
    path = os.path.join(_UNIFIED, rel)
    if not os.path.isdir(path):
        return
    try:
        if _fs_type(path) != _TMPFS_MAGIC or set(os.listdir(path)) - {"cgroup.procs"}:
            return
        with contextlib.suppress(FileNotFoundError):
            os.unlink(os.path.join(path, "cgroup.procs"))
        os.rmdir(path)
    except OSError:
        return


def _stray_dirs_possible() -> bool:
    """Whether ``_UNIFIED`` may hold a stray directory: a tmpfs (not cgroup2) with entries.

    Lets ``delete`` skip the ``state`` call that finds a foreign container's cgroupsPath
    when there is nothing ``_remove_stray_unified_dir`` could remove.
    """
    try:
        if _fs_type(_UNIFIED) != _TMPFS_MAGIC:
            return False
        with os.scandir(_UNIFIED) as entries:
            return any(True for _ in entries)
    except OSError:
        return False


def _fs_type(path: str) -> int:
    return _linux.fs_type(path)


def _last_error(log_text: str) -> bool:
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


def _status_from_rc(rc: int) -> ExitStatus:
    now = _dt.datetime.now(_dt.UTC)
    if rc < 0:
        return ExitStatus(exit_code=128 - rc, signal=-rc, exited_at=now)
    if rc > 128:
        return ExitStatus(exit_code=rc, signal=rc - 128, exited_at=now)
    return ExitStatus(exit_code=rc, exited_at=now)


if TYPE_CHECKING:  # mypy --strict checks that Runc implements the Runtime protocol

    def _implements_runtime(r: Runc) -> Runtime:
        return r
