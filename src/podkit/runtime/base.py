"""The ``Runtime`` protocol the sandbox layer depends on, and the values it returns.

``Runc`` (runc, crun) implements it; ``podkit.runtime.testing.FakeRuntime`` is a stand-in for
unit tests. The models are normalised: runc and crun print different state/list shapes, both
become the same ``RuntimeState`` (the CRI enum of containers' states is
``podkit.sandbox.ContainerState``, a different thing).
"""

from __future__ import annotations

import builtins
import datetime as _dt
import os
import signal as _signal
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import attrs

from podkit import oci
from podkit.errors import InvalidArgumentError

if TYPE_CHECKING:
    from podkit.runtime.bundle import Bundle
    from podkit.runtime.io import IO

__all__ = [
    "ExecResult",
    "ExitStatus",
    "Runtime",
    "RuntimeState",
    "Status",
    "parse_timestamp",
    "signal_number",
]

class Status:
    """Container status strings of the runtime-spec ``state`` operation."""

    CREATING = "creating"
    CREATED = "created"
    RUNNING = "running"
    PAUSED = "paused"
    STOPPED = "stopped"


def signal_number(sig: int | str) -> int:
    """A Linux signal number from ``9``, ``"9"``, ``"KILL"``, ``"SIGKILL"`` or ``"SIGRTMIN+3"``
    (the spellings of runc's ``kill`` and of image ``StopSignal``s)."""
    if isinstance(sig, int):
        return sig
    text = sig.strip().upper()
    if text.isdigit():
        return int(text)
    text = text if text.startswith("SIG") else "SIG" + text
    base, plus, offset = text.partition("+")
    base, minus, back = base.partition("-") if not plus else (base, "", "")
    try:
        number = int(_signal.Signals[base])
        return number + int(offset) if plus else number - int(back) if minus else number
    except (KeyError, ValueError):
        raise InvalidArgumentError(f"unknown signal {sig!r}") from None


def parse_timestamp(value: object) -> _dt.datetime | None:
    """Parse a runtime's RFC 3339 timestamp (runc: nanoseconds, crun: microseconds) to UTC.

    Python keeps microseconds; extra digits are truncated. ``None`` or ``""`` gives ``None``;
    anything else unparsable also gives ``None`` rather than failing a whole listing.
    """
    if not isinstance(value, str) or not value:
        return None
    text = value.strip()
    if text.endswith(("Z", "z")):
        text = text[:-1] + "+00:00"
    head, sep, rest = text.partition(".")
    if sep:
        digits = ""
        i = 0
        while i < len(rest) and rest[i].isdigit():
            digits += rest[i]
            i += 1
        text = f"{head}.{(digits + '000000')[:6]}{rest[i:]}"
    try:
        parsed = _dt.datetime.fromisoformat(text)
    except ValueError:
        return None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=_dt.UTC)
    return parsed.astimezone(_dt.UTC)


@attrs.define(slots=True, kw_only=True)
class RuntimeState:
    """A container as the runtime reports it (``state`` / ``list``), normalised across runtimes.

    ``pid`` is 0 once the init process has exited. ``rootfs`` is absolute when the runtime says
    so (runc) and the raw ``root.path`` otherwise (crun, and crun's ``list`` has none: ``""``).
    """

    id: str
    pid: int
    status: str
    bundle: str
    rootfs: str = ""
    created: _dt.datetime | None = None
    annotations: dict[str, str] = attrs.field(factory=dict)
    owner: str = ""
    oci_version: str = ""
    extra: dict[str, Any] = attrs.field(factory=dict)

    _KNOWN = ("id", "pid", "status", "bundle", "rootfs", "created", "annotations", "owner",
              "ociVersion")

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], source: str = "runtime state") -> RuntimeState:
        """Build from one runc/crun ``state`` or ``list`` JSON object; unknown keys go to extra."""
        if not isinstance(data, Mapping):
            raise InvalidArgumentError(f"{source}: expected a JSON object, got {data!r}")
        for key in ("id", "status"):
            if not isinstance(data.get(key), str):
                raise InvalidArgumentError(f"{source}: missing or non-string {key!r} in {data!r}")
        pid = data.get("pid", 0)
        if not isinstance(pid, int) or isinstance(pid, bool):
            raise InvalidArgumentError(f"{source}: pid must be an integer, got {pid!r}")
        annotations = data.get("annotations") or {}
        return cls(
            id=data["id"],
            pid=pid,
            status=data["status"],
            bundle=str(data.get("bundle") or ""),
            rootfs=str(data.get("rootfs") or ""),
            created=parse_timestamp(data.get("created")),
            annotations={str(k): str(v) for k, v in dict(annotations).items()},
            owner=str(data.get("owner") or ""),
            oci_version=str(data.get("ociVersion") or ""),
            extra={k: v for k, v in data.items() if k not in cls._KNOWN},
        )

    def to_oci(self) -> oci.State:
        """The runtime-spec ``State`` view (what hooks receive on stdin)."""
        data: dict[str, Any] = {
            "ociVersion": self.oci_version or oci.VERSION,
            "id": self.id,
            "status": self.status,
            "bundle": self.bundle,
        }
        if self.pid:
            data["pid"] = self.pid
        if self.annotations:
            data["annotations"] = dict(self.annotations)
        return oci.State.from_dict(data)


@attrs.define(slots=True, kw_only=True)
class ExitStatus:
    """How a process ended; ``exit_code`` is ``128 + signal`` when killed (shell and CRI rule)."""

    exit_code: int
    signal: int | None = None
    exited_at: _dt.datetime | None = None

    @classmethod
    def from_wait_status(
        cls, status: int, exited_at: _dt.datetime | None = None
    ) -> ExitStatus:
        """Decode a raw ``waitpid`` status word."""
        import os

        if os.WIFSIGNALED(status):
            sig = os.WTERMSIG(status)
            return cls(exit_code=128 + sig, signal=sig, exited_at=exited_at)
        if os.WIFEXITED(status):
            return cls(exit_code=os.WEXITSTATUS(status), exited_at=exited_at)
        return cls(exit_code=255, exited_at=exited_at)

    @property
    def signal_name(self) -> str | None:
        """``"SIGKILL"`` etc. when the process was killed by a signal."""
        if self.signal is None:
            return None
        try:
            return _signal.Signals(self.signal).name
        except ValueError:
            return f"signal {self.signal}"


@attrs.define(slots=True, kw_only=True)
class ExecResult:
    """Result of ``exec_sync``: the exit code and everything the process wrote."""

    exit_code: int
    stdout: bytes = b""
    stderr: bytes = b""


@runtime_checkable
class Runtime(Protocol):
    """What the sandbox and container layers need from an OCI runtime.

    Every ``id`` is validated with ``podkit._files.validate_id`` before the runtime sees it.
    """

    def create(
        self,
        id: str,
        bundle: Bundle | str | os.PathLike[str],
        *,
        io: IO | None = None,
        pid_file: str | os.PathLike[str] | None = None,
        console_socket: str | os.PathLike[str] | None = None,
    ) -> int:
        """Create a container from a bundle dir (or ``Bundle``); return the init pid."""
        ...

    def start(self, id: str) -> None:
        """Run the user process of a created container."""
        ...

    def state(self, id: str) -> RuntimeState:
        """The container's current state; ``NotFoundError`` when unknown."""
        ...

    def list(self) -> builtins.list[RuntimeState]:
        """Every container in this runtime root."""
        ...

    def kill(self, id: str, signal: int | str = _signal.SIGTERM, all: bool = False) -> None:
        """Send a signal to the init process (or every process with ``all``)."""
        ...

    def delete(self, id: str, force: bool = False) -> None:
        """Remove a stopped (or, with ``force``, any) container."""
        ...

    def wait(self, id: str, timeout: float | None = None) -> ExitStatus:
        """Block until the init process exits and return its status."""
        ...

    def stop(self, id: str, timeout: float = 10.0, signal: int = _signal.SIGTERM) -> Any:
        """Signal, wait ``timeout`` seconds, escalate to SIGKILL; report what happened."""
        ...

    def exec(
        self,
        id: str,
        process: oci.Process,
        *,
        detach: bool = True,
        io: IO | None = None,
        tty: bool | None = None,
        console_socket: str | os.PathLike[str] | None = None,
    ) -> Any:
        """Start an extra process in a running container (detached: its pid/handle)."""
        ...

    def exec_sync(
        self, id: str, args: Sequence[str], timeout: float | None = None
    ) -> ExecResult:
        """Run a command in the container, wait for it, return code and output."""
        ...

    def pause(self, id: str) -> None:
        """Freeze every process of the container."""
        ...

    def resume(self, id: str) -> None:
        """Thaw a paused container."""
        ...

    def update(self, id: str, resources: oci.LinuxResources) -> None:
        """Change cgroup limits of a running container."""
        ...

    def ps(self, id: str) -> builtins.list[int]:
        """Host PIDs of the container's processes."""
        ...
