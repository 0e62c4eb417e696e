"""What the kubelet does with a pod's containers once the sandbox runs: init containers to
completion in order, app containers with their postStart hooks, restarts with back-off per
``restartPolicy``, probes, and preStop plus the grace period on the way down.

The manager is anything with the pods API (``SandboxManager``, or ``FakePodManager`` in tests);
time comes from a :class:`Clock` so tests can step it.
"""

from __future__ import annotations

import posixpath
import re
import time
from collections.abc import Callable, Sequence
from typing import Any, Protocol

import attrs

from podkit import oci
from podkit.container import ContainerConfig, ContainerMetadata
from podkit.errors import InvalidArgumentError, PodkitError
from podkit.kube.plan import POD_IP_PLACEHOLDER, ContainerPlan, PodPlan
from podkit.kube.probes import ContainerProbes, Health, run_probe
from podkit.kube.readiness import READINESS_ANNOTATION, probe_to_json
from podkit.sandbox import Container, ContainerFilter, ContainerState, Sandbox, SandboxFilter

__all__ = [
    "BACKOFF_CAP",
    "BACKOFF_INITIAL",
    "Clock",
    "ContainerRun",
    "Pods",
    "backoff_delay",
    "should_restart",
]

BACKOFF_INITIAL = 10.0
BACKOFF_CAP = 300.0
POLL = 0.2  # seconds between looks at a container's state


class Pods(Protocol):
    """The part of the pods API ``kube play`` and ``kube down`` use."""

    @property
    def images(self) -> Any: ...

    def run_sandbox(self, config: Any) -> Sandbox: ...
    def remove_sandbox(self, id: str) -> None: ...
    def list_sandboxes(self, filter: SandboxFilter | None = None) -> list[Sandbox]: ...
    def create_container(self, sandbox_id: str, config: ContainerConfig) -> str: ...
    def start_container(self, id: str) -> None: ...
    def stop_container(self, id: str, timeout: float = 0) -> None: ...
    def remove_container(self, id: str) -> None: ...
    def container_status(self, id: str) -> Container: ...
    def container_user(self, id: str) -> oci.User | None: ...
    def list_containers(self, filter: Any = None) -> list[Container]: ...
    def exec_sync(self, id: str, cmd: Sequence[str], timeout: float | None = None) -> Any: ...


@attrs.frozen
class Clock:
    """Monotonic time and sleeping (a test's clock steps both)."""

    now: Callable[[], float] = time.monotonic
    sleep: Callable[[float], None] = time.sleep


def backoff_delay(restarts: int, initial: float = BACKOFF_INITIAL,
                  cap: float = BACKOFF_CAP) -> float:
    """The kubelet's crash-loop back-off before restart number ``restarts + 1``: 10 s,
    doubling each time, at most 300 s."""
    return float(min(initial * 2 ** max(restarts, 0), cap))


def should_restart(policy: str, exit_code: int) -> bool:
    """Whether a container that exited with ``exit_code`` is started again under
    ``restartPolicy`` (Always: yes; OnFailure: when it failed; Never: no)."""
    return policy == "Always" or (policy == "OnFailure" and exit_code != 0)


def log_path_for(config: ContainerConfig, attempt: int) -> str:
    """The kubelet's ``<container>/<restarts>.log``: the plan's log path for ``attempt``."""
    path = config.log_path
    if path and re.fullmatch(r"\d+\.log", posixpath.basename(path)):
        return posixpath.join(posixpath.dirname(path), f"{attempt}.log")
    return path


def config_for(plan: ContainerPlan, attempt: int, pod_ip: str) -> ContainerConfig:
    """The container's CRI config for ``attempt``, with the pod IP in the placeholders of its
    env values, command and args (``$(POD_IP)`` expanded there before the IP was known) and
    its readiness probe in an annotation (``podkit.kube.readiness``)."""
    def ip(text: str) -> str:
        return text.replace(POD_IP_PLACEHOLDER, pod_ip)

    config = plan.config
    envs = [attrs.evolve(kv, value=ip(kv.value)) for kv in config.envs]
    annotations = dict(config.annotations)
    if plan.readiness is not None:  # for `pod wait --for ready` in a later process
        annotations[READINESS_ANNOTATION] = probe_to_json(plan.readiness)
    return attrs.evolve(
        config, envs=envs, annotations=annotations,
        command=tuple(ip(a) for a in config.command),
        args=tuple(ip(a) for a in config.args), log_path=log_path_for(config, attempt),
        metadata=ContainerMetadata(name=config.metadata.name, attempt=attempt))


def describe(c: Container | None) -> str:
    """A container's last state for a message: running, or exited with its code and reason."""
    if c is None:
        return "not created"
    state = c.state.name.removeprefix("CONTAINER_").lower()
    if c.state == ContainerState.CONTAINER_EXITED:
        state += f" with code {c.exit_code}" + (f" ({c.reason})" if c.reason else "")
    return state


@attrs.define
class ContainerRun:
    """One container of a pod as ``kube play`` watches it."""

    plan: ContainerPlan
    id: str = ""
    attempt: int = 0
    probes: ContainerProbes = attrs.field(factory=ContainerProbes)
    restart_at: float | None = None
    last: Container | None = None
    note: str = ""  # why it was stopped or is waiting, for a failure message

    def describe(self) -> str:
        text = describe(self.last)
        checks = self.probes.describe()
        return ", ".join(p for p in (text, checks, self.note) if p)


def create_and_start(mgr: Pods, sandbox: Sandbox, run: ContainerRun, clock: Clock,
                     grace: float) -> None:
    """Create (checking runAsNonRoot against the resolved user) and start the container, run
    its postStart hook (a failing hook stops it, as the kubelet does), reset its probes."""
    plan = run.plan
    cid = mgr.create_container(sandbox.id, config_for(plan, run.attempt, sandbox.ip))
    try:
        if plan.run_as_non_root:
            user = mgr.container_user(cid)
            if user is not None and user.uid == 0:
                raise InvalidArgumentError(
                    f"container {plan.name!r}: runAsNonRoot is set and the image will run as "
                    "root (uid 0)")
        mgr.start_container(cid)
    except BaseException:
        mgr.remove_container(cid)
        raise
    previous, run.id, run.note = run.id, cid, ""
    if previous:
        mgr.remove_container(previous)
    run.probes = ContainerProbes.start(clock.now(), startup=plan.startup,
                                       liveness=plan.liveness, readiness=plan.readiness)
    if plan.post_start:
        ok, why = exec_hook(mgr, cid, plan.post_start, max(grace, 1.0))
        if not ok:
            run.note = f"postStart hook failed: {why}"
            mgr.stop_container(cid, grace)
    run.last = mgr.container_status(cid)


def exec_hook(mgr: Pods, cid: str, cmd: Sequence[str], timeout: float) -> tuple[bool, str]:
    """Run an exec hook; whether it exited 0 and a short reason when not."""
    try:
        res = mgr.exec_sync(cid, list(cmd), timeout)
    except PodkitError as exc:
        return False, f"{list(cmd)}: {exc}"
    if res.exit_code != 0:
        text = (res.stdout + res.stderr).decode(errors="replace").strip()[-200:]
        return False, f"{list(cmd)} exited {res.exit_code}" + (f": {text}" if text else "")
    return True, ""


def run_to_completion(mgr: Pods, cid: str, deadline: float, clock: Clock) -> Container | None:
    """Wait for a container to exit; its record, or None when ``deadline`` came first."""
    while True:
        c = mgr.container_status(cid)
        if c.state == ContainerState.CONTAINER_EXITED:
            return c
        if clock.now() >= deadline:
            return None
        clock.sleep(POLL)


def probe_once(mgr: Pods, run: ContainerRun, pod_ip: str, clock: Clock) -> None:
    """Run the container's due probes and count their results."""
    def exec_fn(cmd: Sequence[str], timeout: float) -> tuple[int, bytes]:
        res = mgr.exec_sync(run.id, list(cmd), timeout)
        return res.exit_code, res.stdout + res.stderr

    for state in run.probes.due(clock.now()):
        state.record(run_probe(state.spec, pod_ip=pod_ip, exec_fn=exec_fn), clock.now())


def pod_step(mgr: Pods, plan: PodPlan, sandbox: Sandbox, runs: list[ContainerRun],
             clock: Clock) -> str:
    """One look at a pod's app containers: restart what exited (after its back-off) or failed
    its liveness/startup probe, run due probes; the pod's status now: "Ready", "Succeeded",
    "Failed" or "" (not there yet)."""
    grace = float(plan.termination_grace_period_seconds)
    for run in runs:
        if run.restart_at is not None:
            if clock.now() < run.restart_at:
                continue
            run.restart_at, run.attempt = None, run.attempt + 1
            create_and_start(mgr, sandbox, run, clock, grace)
        c = run.last = mgr.container_status(run.id)
        if c.state == ContainerState.CONTAINER_RUNNING:
            probe_once(mgr, run, sandbox.ip, clock)
            if run.probes.health() == Health.FAILED:
                run.note = f"killed: {run.probes.describe()}"
                mgr.stop_container(run.id, grace)
                c = run.last = mgr.container_status(run.id)
        if c.state == ContainerState.CONTAINER_EXITED and should_restart(
                plan.restart_policy, c.exit_code):
            delay = backoff_delay(run.attempt)
            run.restart_at = clock.now() + delay
            run.note = (run.note + "; " if run.note else "") + f"back-off {delay:g}s"
    return pod_status(plan, runs)


def pod_status(plan: PodPlan, runs: list[ContainerRun]) -> str:
    """"Ready", "Succeeded", "Failed" or "" from the containers' last states and probes."""
    exited = [r.last for r in runs if r.last is not None and r.restart_at is None
              and r.last.state == ContainerState.CONTAINER_EXITED]
    if any(c.exit_code != 0 for c in exited) and plan.restart_policy == "Never":
        return "Failed"
    if plan.restart_policy != "Always":
        return "Succeeded" if len(exited) == len(runs) and all(
            c.exit_code == 0 for c in exited) else ""
    ready = all(r.last is not None and r.last.state == ContainerState.CONTAINER_RUNNING
                and r.probes.health() == Health.READY for r in runs)
    return "Ready" if ready else ""


def stop_pod(mgr: Pods, plan: PodPlan, sandbox: Sandbox, clock: Clock) -> None:
    """preStop hooks, then the stop signal and what is left of the grace period (shared by
    the pod's containers, as the pod's own), app containers by plan name."""
    hooks = {c.name: c.pre_stop for c in (*plan.init_containers, *plan.containers)}
    deadline = clock.now() + plan.termination_grace_period_seconds
    running = [c for c in mgr.list_containers(ContainerFilter(pod_sandbox_id=sandbox.id))
               if c.state == ContainerState.CONTAINER_RUNNING]
    for c in running:
        hook = hooks.get(c.config.metadata.name, ())
        if hook:
            exec_hook(mgr, c.id, hook, max(deadline - clock.now(), 1.0))
    for c in running:
        mgr.stop_container(c.id, max(deadline - clock.now(), 0.0))
