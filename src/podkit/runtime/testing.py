"""``FakeRuntime``: an in-memory ``Runtime`` for unit tests of code built on podkit.runtime.

It follows the runtime-spec state machine (created -> running <-> paused -> stopped) and raises
the same typed errors as ``Runc`` (``NotFoundError``, ``AlreadyExistsError``,
``NotRunningError``), so code under test sees real failure modes without runc or root::

    rt = FakeRuntime()
    rt.create("c1", "/bundles/c1")
    rt.start("c1")
    rt.exit("c1", 3)                  # the container's process ends on its own
    assert rt.wait("c1").exit_code == 3

``calls`` records every call as ``(method, id, ...)`` for assertions. ``exec_handler`` decides
what ``exec_sync`` returns; ``ignore_signals`` lists signals the init ignores (a pid-1 without
handlers ignores SIGTERM), which makes ``stop`` escalate like the real thing.
"""

from __future__ import annotations

import builtins
import datetime as _dt
import itertools
import os
import signal as _signal
import threading
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from podkit import _files, oci
from podkit.runtime.base import (
    ExecResult,
    ExitStatus,
    Runtime,
    RuntimeState,
    Status,
    signal_number,
)
from podkit.runtime.bundle import Bundle
from podkit.runtime.errors import (
    AlreadyExistsError,
    NotFoundError,
    NotRunningError,
    RuntimeTimeoutError,
)
from podkit.runtime.results import StopResult

__all__ = ["FakeRuntime"]

ExecHandler = Callable[[str, Sequence[str]], ExecResult]


class _Container:
    def __init__(self, id: str, bundle: str, pid: int, annotations: dict[str, str]) -> None:
        self.state = RuntimeState(
            id=id, pid=pid, status=Status.CREATED, bundle=bundle, rootfs="",
            created=_dt.datetime.now(_dt.UTC), annotations=annotations, owner="root",
            oci_version=oci.VERSION,
        )
        self.exit: ExitStatus | None = None
        self.resources: oci.LinuxResources | None = None
        self.exec_pids: list[int] = []


class FakeRuntime:
    """In-memory stand-in for ``Runc`` implementing the ``Runtime`` protocol."""

    def __init__(
        self,
        *,
        exec_handler: ExecHandler | None = None,
        ignore_signals: Sequence[int] = (int(_signal.SIGTERM),),
    ) -> None:
        self.containers: dict[str, _Container] = {}
        self.calls: builtins.list[tuple[Any, ...]] = []
        self.exec_handler: ExecHandler = exec_handler or (
            lambda id, args: ExecResult(exit_code=0)
        )
        self.ignore_signals = {int(s) for s in ignore_signals}
        self._pids = itertools.count(1000)
        self._cond = threading.Condition()

    # -- helpers -------------------------------------------------------------------------------
    def _get(self, id: str) -> _Container:
        _files.validate_id(id, "container ID")
        c = self.containers.get(id)
        if c is None:
            raise NotFoundError(f"fake: container {id} does not exist", ["fake", id])
        return c

    def _require(self, c: _Container, *statuses: str, what: str) -> None:
        if c.state.status not in statuses:
            raise NotRunningError(
                f"fake: cannot {what} container {c.state.id} in state {c.state.status}",
                ["fake", what, c.state.id],
            )

    def exit(self, id: str, exit_code: int = 0, signal: int | None = None) -> None:
        """Simulate the init process ending (``signal`` -> ``128 + signal``)."""
        c = self._get(id)
        with self._cond:
            code = 128 + signal if signal is not None else exit_code
            c.exit = ExitStatus(exit_code=code, signal=signal,
                                exited_at=_dt.datetime.now(_dt.UTC))
            c.state.status = Status.STOPPED
            c.state.pid = 0
            c.exec_pids.clear()
            self._cond.notify_all()

    # -- Runtime protocol ----------------------------------------------------------------------
    def create(self, id: str, bundle: Any, **kwargs: Any) -> int:
        """Register a created container; ``bundle`` is a ``Bundle`` or a directory path."""
        _files.validate_id(id, "container ID")
        self.calls.append(("create", id, kwargs))
        if id in self.containers:
            raise AlreadyExistsError(f"fake: container {id} already exists", ["fake", id])
        annotations: dict[str, str] = {}
        if isinstance(bundle, Bundle):
            path = str(bundle.path)
            annotations = dict(bundle.spec.annotations or {})
        else:
            path = os.fspath(bundle)
        pid = next(self._pids)
        self.containers[id] = _Container(id, path, pid, annotations)
        return pid

    def start(self, id: str) -> None:
        """created -> running."""
        self.calls.append(("start", id))
        c = self._get(id)
        self._require(c, Status.CREATED, what="start")
        c.state.status = Status.RUNNING

    def state(self, id: str) -> RuntimeState:
        """A copy of the container's state."""
        self.calls.append(("state", id))
        c = self._get(id)
        s = c.state
        return RuntimeState(id=s.id, pid=s.pid, status=s.status, bundle=s.bundle,
                              rootfs=s.rootfs, created=s.created,
                              annotations=dict(s.annotations), owner=s.owner,
                              oci_version=s.oci_version)

    def list(self) -> builtins.list[RuntimeState]:
        """Every container, in creation order."""
        self.calls.append(("list",))
        return [self.state(i) for i in builtins.list(self.containers)]

    def kill(self, id: str, signal: int | str = _signal.SIGTERM, all: bool = False) -> None:
        """Deliver a signal; the init dies unless the signal is in ``ignore_signals``."""
        sig = signal_number(signal)
        self.calls.append(("kill", id, sig, all))
        c = self._get(id)
        if c.state.status == Status.STOPPED and not all:
            raise NotRunningError(f"fake: container {id} not running", ["fake", "kill", id])
        if c.state.status in (Status.RUNNING, Status.CREATED, Status.PAUSED) and (
            sig not in self.ignore_signals or sig == _signal.SIGKILL
        ):
            self.exit(id, signal=sig)

    def delete(self, id: str, force: bool = False) -> None:
        """Remove a stopped (or, with ``force``, any) container."""
        self.calls.append(("delete", id, force))
        _files.validate_id(id, "container ID")
        c = self.containers.get(id)
        if c is None:
            if force:
                return
            raise NotFoundError(f"fake: container {id} does not exist", ["fake", id])
        if c.state.status not in (Status.STOPPED, Status.CREATED) and not force:
            raise NotRunningError(f"fake: container {id} is not stopped",
                                  ["fake", "delete", id])
        if c.state.status != Status.STOPPED:
            self.exit(id, signal=int(_signal.SIGKILL))
        del self.containers[id]

    def wait(self, id: str, timeout: float | None = None) -> ExitStatus:
        """Block until ``exit``/``kill`` ends the init."""
        c = self._get(id)
        with self._cond:
            if not self._cond.wait_for(lambda: c.exit is not None, timeout):
                raise RuntimeTimeoutError(f"fake: container {id} still running")
        assert c.exit is not None
        return c.exit

    def stop(
        self, id: str, timeout: float = 10.0, signal: int | str = _signal.SIGTERM
    ) -> StopResult:
        """Signal, wait, escalate to SIGKILL, like ``Runc.stop``."""
        c = self._get(id)
        result = StopResult(id=id)
        if c.state.status == Status.STOPPED:
            result.already_stopped = True
            result.exit_status = c.exit
            return result
        sig = signal_number(signal)
        self.kill(id, sig)
        result.signals.append(sig)
        if c.exit is None:
            result.escalated = True
            self.kill(id, _signal.SIGKILL, all=True)
            result.signals.append(int(_signal.SIGKILL))
        result.exit_status = c.exit
        return result

    def exec(self, id: str, process: oci.Process, **kwargs: Any) -> Any:
        """Record a detached exec; returns a fake host PID."""
        self.calls.append(("exec", id, list(process.args or []), kwargs))
        c = self._get(id)
        self._require(c, Status.RUNNING, what="exec in")
        pid = next(self._pids)
        c.exec_pids.append(pid)
        return pid

    def exec_sync(
        self, id: str, args: Sequence[str], timeout: float | None = None
    ) -> ExecResult:
        """``exec_handler(id, args)`` for a running container."""
        self.calls.append(("exec_sync", id, list(args), timeout))
        c = self._get(id)
        self._require(c, Status.RUNNING, what="exec in")
        return self.exec_handler(id, args)

    def pause(self, id: str) -> None:
        """running -> paused."""
        self.calls.append(("pause", id))
        c = self._get(id)
        self._require(c, Status.RUNNING, what="pause")
        c.state.status = Status.PAUSED

    def resume(self, id: str) -> None:
        """paused -> running."""
        self.calls.append(("resume", id))
        c = self._get(id)
        self._require(c, Status.PAUSED, what="resume")
        c.state.status = Status.RUNNING

    def update(self, id: str, resources: oci.LinuxResources) -> None:
        """Remember the resources (``resources_of``)."""
        self.calls.append(("update", id))
        c = self._get(id)
        self._require(c, Status.RUNNING, Status.PAUSED, Status.CREATED, what="update")
        c.resources = resources

    def resources_of(self, id: str) -> oci.LinuxResources | None:
        """The last resources passed to ``update``."""
        return self._get(id).resources

    def ps(self, id: str) -> builtins.list[int]:
        """Init plus exec PIDs while alive; ``[]`` once stopped."""
        self.calls.append(("ps", id))
        c = self._get(id)
        return [] if c.state.status == Status.STOPPED else [c.state.pid, *c.exec_pids]


if TYPE_CHECKING:  # mypy --strict checks that FakeRuntime implements the Runtime protocol

    def _implements_runtime(r: FakeRuntime) -> Runtime:
        return r
