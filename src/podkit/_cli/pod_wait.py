"""``podkit pod wait POD [CTR] --for running|ready|exited|deleted --timeout 60s``.

Conditions, for a pod (or one container with CTR):

- ``running``: the sandbox is READY and every container RUNNING (the container: RUNNING), a
  ``kube play`` pod's init containers that completed aside;
- ``ready``: running, and every readiness hook (:data:`READINESS`) says ready; podkit pods have
  no probes, so for them ready is running (``kube play``'s pods: their readiness probes pass;
  a timeout says the last probe result of the container that was not ready);
- ``exited``: every container EXITED (a pod without containers: the sandbox NOTREADY);
- ``deleted``: the pod (or the container) no longer exists.

The manager is opened for each look and closed between looks (its state-dir lock stays free
for other commands); a look that finds it busy is skipped.
"""

from __future__ import annotations

import argparse
import functools
import time
from collections.abc import Callable, Mapping, Sequence

import attrs

from podkit.errors import ConflictError, NotFoundError, PodkitError
from podkit.kube.probes import ProbeResult
from podkit.kube.readiness import completed_init, probe_readiness
from podkit.sandbox import (
    Container,
    ContainerFilter,
    ContainerState,
    Sandbox,
    SandboxManager,
    SandboxState,
)

from .pod_time import parse_duration
from .podctx import add_common, find_container, find_pod, manager

__all__ = ["CONDITIONS", "READINESS", "Readiness", "Snapshot", "WaitTimeoutError",
           "cmd_wait", "kube_readiness", "reached", "register", "wait_for"]

CONDITIONS = ("running", "ready", "exited", "deleted")

Readiness = Callable[[SandboxManager, Sandbox, Container], ProbeResult]
"""A readiness check of one running container (its probes, run through the open manager):
``ok`` when ready, and the message saying why not."""


def kube_readiness(mgr: SandboxManager, pod: Sandbox, c: Container) -> ProbeResult:
    """``kube play``'s pods: the container's readiness probe, run once, passes."""
    return probe_readiness(mgr, pod, c)


READINESS: list[Readiness] = [kube_readiness]
"""Hooks asked by ``--for ready``, all of which must pass."""

_FIRST_POLL, _MAX_POLL = 0.1, 1.0


class WaitTimeoutError(PodkitError, TimeoutError):
    """The condition was not reached in time (exit code: timeout)."""


@attrs.frozen
class Snapshot:
    """What one look found: the pod (``None``: gone) and the containers watched."""

    pod: Sandbox | None
    containers: tuple[Container, ...] = ()
    not_ready: Mapping[str, str] = attrs.field(factory=dict)  # container ID -> probe result

    def describe(self) -> str:
        """One line: the pod's state and each container's (a running one that is not ready:
        the last readiness probe result)."""
        if self.pod is None:
            return "deleted"
        parts = [c.config.metadata.name + " " + c.state.name.removeprefix("CONTAINER_")
                 + (f" (exit {c.exit_code})" if c.state == ContainerState.CONTAINER_EXITED
                    else "")
                 + (f" (readiness probe: {self.not_ready[c.id]})" if c.id in self.not_ready
                    else "") for c in self.containers]
        head = "pod " + self.pod.state.name.removeprefix("SANDBOX_")
        return head + (", " + ", ".join(parts) if parts else ", no containers")


def reached(snap: Snapshot, condition: str,
            readiness: Sequence[Callable[[Sandbox, Container], bool]],
            container: bool = False) -> bool:
    """Whether ``snap`` meets ``condition`` (``container``: one container is watched and its
    absence means deleted)."""
    if condition == "deleted":
        return snap.pod is None or (container and not snap.containers)
    if snap.pod is None or (container and not snap.containers):
        return False
    pod, cs = snap.pod, snap.containers
    if condition == "exited":
        if not cs:
            return pod.state == SandboxState.SANDBOX_NOTREADY
        return all(c.state == ContainerState.CONTAINER_EXITED for c in cs)
    if not container:  # a kube pod's completed init containers do not run, by design
        cs = tuple(c for c in cs if not completed_init(c))
    running = (pod.state == SandboxState.SANDBOX_READY
               and all(c.state == ContainerState.CONTAINER_RUNNING for c in cs))
    if condition == "running" or not running:
        return running
    return all(check(pod, c) for c in cs for check in readiness)


def look(mgr: SandboxManager, pod_ref: str, ctr: str) -> Snapshot:
    """The pod and its containers (only ``ctr`` when given) as they are now."""
    try:
        pod = find_pod(mgr, pod_ref)
    except NotFoundError:
        return Snapshot(None)
    if ctr:
        try:
            return Snapshot(pod, (find_container(mgr, pod, ctr),))
        except NotFoundError:
            return Snapshot(pod)
    return Snapshot(pod, tuple(mgr.list_containers(ContainerFilter(pod_sandbox_id=pod.id))))


def _noting(check: Readiness, mgr: SandboxManager, why: dict[str, str], pod: Sandbox,
            c: Container) -> bool:
    """Run one readiness check; a failure's message goes into ``why`` by container ID."""
    result = check(mgr, pod, c)
    if not result.ok:
        why[c.id] = result.message
    return result.ok


def wait_for(open_manager: Callable[[], SandboxManager], pod_ref: str, ctr: str,
             condition: str, timeout: float, *, readiness: list[Readiness] | None = None,
             sleep: Callable[[float], object] = time.sleep) -> Snapshot:
    """Look until ``condition`` holds; the snapshot that met it. ``NotFoundError`` when the
    pod (or container) is missing (unless waiting for ``deleted``), :class:`WaitTimeoutError`
    after ``timeout`` seconds, saying what state it was in."""
    if condition not in CONDITIONS:
        raise ValueError(f"condition {condition!r}: want one of {', '.join(CONDITIONS)}")
    checks = READINESS if readiness is None else readiness
    what = f"pod {pod_ref!r}" + (f" container {ctr!r}" if ctr else "")
    deadline = time.monotonic() + timeout
    pause, last = _FIRST_POLL, None
    while True:
        try:
            with open_manager() as mgr:
                snap, why = look(mgr, pod_ref, ctr), dict[str, str]()
                done = reached(snap, condition,
                               [functools.partial(_noting, c, mgr, why) for c in checks],
                               container=bool(ctr))
                last = attrs.evolve(snap, not_ready=why)
        except ConflictError:  # another command holds the state dir: look again later
            pass
        else:
            if done:
                return last
            if condition != "deleted" and (last.pod is None or (ctr and not last.containers)):
                raise NotFoundError(f"{what}: not found" + (
                    f" (pod {last.pod.state.name.removeprefix('SANDBOX_')})" if last.pod else ""))
        left = deadline - time.monotonic()
        if left <= 0:
            state = last.describe() if last is not None else "unknown (state dir busy)"
            raise WaitTimeoutError(
                f"{what}: not {condition} after {timeout:g}s; it is: {state}")
        sleep(min(pause, left))
        pause = min(pause * 2, _MAX_POLL)


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``pod wait``."""
    p = sub.add_parser("wait", help="wait until a pod or container is running, ready, exited "
                       "or deleted")
    p.add_argument("pod", help="pod ID prefix or name")
    p.add_argument("container", nargs="?", default="", help="container name (default: all)")
    p.add_argument("--for", dest="condition", choices=CONDITIONS, default="ready",
                   help="the state to wait for (default ready)")
    p.add_argument("--timeout", default="60s",
                   help="give up after this long: 60s, 2m, 500ms or seconds (default 60s)")
    add_common(p)
    p.set_defaults(func=cmd_wait)


def cmd_wait(args: argparse.Namespace) -> int:
    """Exit 0 once the condition holds; the timeout or not-found exit code otherwise."""
    timeout = parse_duration(args.timeout, "--timeout")
    wait_for(lambda: manager(args), args.pod, args.container, args.condition, timeout)
    return 0
