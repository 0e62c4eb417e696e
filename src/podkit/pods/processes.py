"""What the manager asks the supervisor and the runtime about one container's process.

Is it running, has it exited (and how, without blocking), stop it with a signal then SIGKILL,
delete it. Plain functions over a ``Supervisor`` and a ``Runtime``: no records, no locks.
"""

from __future__ import annotations

import contextlib
import signal
import time

from podkit import cgroups, procfs
from podkit.errors import NotFoundError, PodkitError
from podkit.runtime import ConmonSupervisor, ExitStatus, Runc, Runtime, Supervisor
from podkit.runtime.errors import NotRunningError, OCIRuntimeError, RuntimeTimeoutError

__all__ = ["delete", "exit_status", "kill_and_wait", "oom_killed", "pids_are_host_pids",
           "running", "settled"]

_RUNTIME_INITS = ("runc:[", "crun")
"""How runc's and crun's container init name themselves before they exec the process."""


def pids_are_host_pids(supervisor: Supervisor, runtime: Runtime) -> bool:
    """Whether the pids the supervisor hands out are processes of this host (conmon's, or a
    real runc's), so a pidfd can watch them; a fake runtime's are made up."""
    return isinstance(supervisor, ConmonSupervisor) or isinstance(runtime, Runc)


def settled(pid: int, timeout: float) -> bool:
    """Whether the container process ``pid`` lives on: ``True`` once it sleeps in a blocking
    call after its exec (a pause waiting for signals, a ``sleep``) or when ``timeout`` seconds
    pass first (a busy one), ``False`` once it has exited (gone, or a zombie not yet reaped).
    Polls ``/proc/<pid>/stat``; a process that exits at once (a shell without input) is seen
    gone instead of taken for alive by a look made too early."""
    deadline = time.monotonic() + timeout
    pause = 0.001
    while True:
        stat = procfs.name_and_state(pid)
        if stat is None or stat[1] in ("Z", "X", "x"):
            return False
        name, state = stat
        if state == "S" and not name.startswith(_RUNTIME_INITS):
            return True
        left = deadline - time.monotonic()
        if left <= 0:
            return True
        time.sleep(min(pause, left))
        pause = min(pause * 2, 0.005)


def running(runtime: Runtime, id: str) -> bool:
    """Whether the runtime has ``id`` running, created or paused."""
    try:
        return runtime.state(id).status in ("running", "created", "paused")
    except NotFoundError:
        return False


def exit_status(supervisor: Supervisor, runtime: Runtime, id: str) -> ExitStatus | None:
    """The exit status if the container has exited (255: unknown), without blocking."""
    if isinstance(supervisor, ConmonSupervisor):
        try:
            status = supervisor.conmon.exit_status(id)
            if status is not None or supervisor.conmon.monitor_alive(id):
                return status
            # conmon may have written the exit file and quit between the two looks
            status = supervisor.conmon.exit_status(id)
            if status is not None:
                return status
        except NotFoundError:
            return ExitStatus(exit_code=255)
        # conmon is gone without an exit file (killed): the runtime has the last word
        return None if running(runtime, id) else ExitStatus(exit_code=255)
    if running(runtime, id):
        return None
    try:
        return supervisor.wait(id, 5.0)
    except (NotFoundError, RuntimeTimeoutError):
        return ExitStatus(exit_code=255)


def oom_killed(supervisor: Supervisor, id: str, cgroups_path: str = "") -> bool:
    """Whether the OOM killer killed a process of the container: conmon saw it, or the
    container's cgroup counts an OOM kill (v2 ``memory.events``, v1 ``memory.oom_control``),
    read before the container is deleted (the cgroup goes with it)."""
    if isinstance(supervisor, ConmonSupervisor):
        with contextlib.suppress(PodkitError, OSError):
            if supervisor.conmon.oom_killed(id):
                return True
    if cgroups_path:
        with contextlib.suppress(PodkitError, OSError):
            return bool(cgroups.oom_kills(cgroups_path))
    return False


def kill_and_wait(supervisor: Supervisor, runtime: Runtime, id: str, timeout: float,
                  sig: int) -> ExitStatus:
    """Send ``sig``, wait ``timeout`` seconds, then SIGKILL everything; the exit status."""
    if timeout > 0:
        with contextlib.suppress(NotRunningError, NotFoundError):
            runtime.kill(id, sig)
        with contextlib.suppress(RuntimeTimeoutError):
            return supervisor.wait(id, timeout)
    with contextlib.suppress(NotRunningError, NotFoundError):
        runtime.kill(id, signal.SIGKILL, all=True)
    try:
        return supervisor.wait(id, 60.0)
    except RuntimeTimeoutError:
        raise
    except OCIRuntimeError:
        # nobody supervises it any more (conmon killed, or an in-process supervisor of an
        # earlier process): the runtime says when it is gone; the exit code is lost
        deadline = time.monotonic() + 10.0
        while running(runtime, id):
            if time.monotonic() > deadline:
                raise
            time.sleep(0.02)
        return ExitStatus(exit_code=255)


def delete(supervisor: Supervisor, runtime: Runtime, id: str) -> None:
    """Kill and delete a container from the supervisor (or the runtime when the supervisor
    has no record of it); one that is gone already is fine."""
    try:
        supervisor.delete(id, force=True)
    except NotFoundError:
        with contextlib.suppress(NotFoundError):
            runtime.delete(id, force=True)
