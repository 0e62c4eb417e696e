"""``kube play`` and ``kube down`` as library calls: run :class:`~podkit.kube.PodPlan`s on a
pods manager and remove exactly what they describe.

A pod is found by the kubelet's labels (``io.kubernetes.pod.name``/``namespace``/``uid``).
Anything that fails while a pod is being made (an image, a hostPath type, a bad config) undoes
that pod completely; a container that fails once the pod runs (an init container, a probe that
never passes) leaves it in place for inspection unless ``rm_on_failure``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from pathlib import Path

import attrs

from podkit import image as _image
from podkit.errors import AlreadyExistsError, InvalidArgumentError, NotFoundError, PodkitError
from podkit.kube import hostside, lifecycle
from podkit.kube.lifecycle import Clock, ContainerRun, Pods
from podkit.kube.plan import ContainerPlan, PodPlan
from podkit.kube.probes import Health
from podkit.kube.readiness import as_init
from podkit.sandbox import ContainerState, Sandbox, SandboxFilter

__all__ = [
    "POD_LABELS",
    "ContainerResult",
    "DownResult",
    "PlayError",
    "PlayResult",
    "PlayTimeoutError",
    "PodFailedError",
    "PodResult",
    "down",
    "find_pods",
    "play",
]

POD_LABELS = ("io.kubernetes.pod.name", "io.kubernetes.pod.namespace", "io.kubernetes.pod.uid")
"""The sandbox labels a pod is found by (the kubelet's own)."""


@attrs.frozen
class ContainerResult:
    """One container ``kube play`` started: its ID, state, exit code and restarts."""

    name: str
    id: str
    init: bool = False
    state: str = ""
    exit_code: int | None = None
    restarts: int = 0

    def to_json(self) -> dict[str, object]:
        """As ``kube play -o json`` prints it: what does not apply (yet) is null."""
        return {"name": self.name, "id": self.id or None, "init": self.init,
                "state": self.state,
                "exit_code": self.exit_code, "restart_count": self.restarts}


@attrs.frozen
class PodResult:
    """One pod: where it came from, its sandbox, IP, host ports, containers and status
    (``Running``, or with ``wait`` ``Ready``/``Succeeded``; ``Failed``/``Pending`` on failure)."""

    name: str
    namespace: str
    uid: str
    source: str
    sandbox_id: str = ""
    ip: str = ""
    host_ports: tuple[tuple[int, int, str], ...] = ()  # (host port, container port, protocol)
    containers: tuple[ContainerResult, ...] = ()
    status: str = "Pending"
    reason: str = ""
    warnings: tuple[str, ...] = ()

    def to_json(self) -> dict[str, object]:
        """As ``kube play -o json`` prints it: what does not apply is null (no IP on the host
        network, no reason when all went well), as in ``pod inspect``."""
        return {"name": self.name, "namespace": self.namespace, "uid": self.uid,
                "source": self.source, "sandbox_id": self.sandbox_id or None,
                "ip": self.ip or None,
                "host_ports": [{"host_port": h, "container_port": c, "protocol": p}
                               for h, c, p in self.host_ports],
                "containers": [c.to_json() for c in self.containers],
                "status": self.status, "reason": self.reason or None,
                "warnings": list(self.warnings)}


@attrs.frozen
class PlayResult:
    """What ``play`` started, pod by pod."""

    pods: tuple[PodResult, ...] = ()

    def to_json(self) -> dict[str, object]:
        return {"pods": [p.to_json() for p in self.pods]}


@attrs.frozen
class DownResult:
    """What ``down`` removed (sandbox IDs, volume paths) and a note per pod."""

    removed: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()


class PlayError(PodkitError):
    """A pod failed after it was made; ``result`` says what runs (it is left in place unless
    ``rm_on_failure``)."""

    def __init__(self, message: str, result: PlayResult) -> None:
        super().__init__(message)
        self.result = result


class PodFailedError(PlayError):
    """An init container, an app container (restartPolicy Never) or a hook failed."""


class PlayTimeoutError(PlayError, TimeoutError):
    """``timeout`` passed before every pod was ready (or completed)."""


def find_pods(mgr: Pods, plan: PodPlan) -> list[Sandbox]:
    """The sandboxes of ``plan``'s pod, by its name, namespace and uid labels."""
    labels = dict(zip(POD_LABELS, (plan.name, plan.namespace, plan.uid), strict=True))
    return mgr.list_sandboxes(SandboxFilter(label_selector=labels))


@attrs.define
class _Pod:
    plan: PodPlan
    sandbox: Sandbox | None = None
    init: list[ContainerRun] = attrs.field(factory=list)
    apps: list[ContainerRun] = attrs.field(factory=list)
    status: str = "Pending"
    reason: str = ""
    made: list[Path] = attrs.field(factory=list)  # hostPaths this play created

    def result(self, mgr: Pods) -> PodResult:
        def one(run: ContainerRun, init: bool) -> ContainerResult:
            c = run.last
            if run.id:
                with contextlib.suppress(NotFoundError):
                    c = run.last = mgr.container_status(run.id)
            exited = c is not None and c.state == ContainerState.CONTAINER_EXITED
            state = "" if c is None else c.state.name.removeprefix("CONTAINER_").lower()
            return ContainerResult(name=run.plan.name, id=run.id, init=init, state=state,
                                   exit_code=c.exit_code if exited and c else None,
                                   restarts=run.attempt)
        sb, p = self.sandbox, self.plan
        ports = tuple((m.host_port, m.container_port, m.protocol.name)
                      for m in p.sandbox.port_mappings if m.host_port)
        return PodResult(
            name=p.name, namespace=p.namespace, uid=p.uid, source=p.source,
            sandbox_id=sb.id if sb else "", ip=sb.ip if sb else "", host_ports=ports,
            containers=tuple([one(r, True) for r in self.init] + [one(r, False)
                                                                   for r in self.apps]),
            status=self.status, reason=self.reason, warnings=p.warnings)


def _labelled(plan: PodPlan) -> PodPlan:
    labels = {**plan.sandbox.labels,
              **dict(zip(POD_LABELS, (plan.name, plan.namespace, plan.uid), strict=True))}
    return attrs.evolve(plan, sandbox=attrs.evolve(plan.sandbox, labels=labels))


PullFn = Callable[[str], object]


def _ensure_image(mgr: Pods, plan: PodPlan, c: ContainerPlan, pull: PullFn | None) -> None:
    """Apply the image pull policy: Always pulls, IfNotPresent pulls when the store lacks the
    image, Never refuses a missing one. A rootfs directory (absolute path) needs nothing."""
    ref = c.config.image
    if ref.startswith("/"):
        return
    where = f"pod {plan.namespace}/{plan.name} ({plan.source}) container {c.name!r} image {ref!r}"
    store = mgr.images
    if store is None:
        raise InvalidArgumentError(f"{where}: no image store to find it in")
    try:
        store.get(ref)
        present = True
    except NotFoundError:
        present = False
    except _image.ReferenceError as exc:
        raise InvalidArgumentError(f"{where}: {exc}") from None
    if c.image_pull_policy == "Never" and not present:
        raise NotFoundError(f"{where}: not in the image store {store.root} and "
                            "imagePullPolicy is Never (ErrImageNeverPull)")
    if c.image_pull_policy == "Always" or not present:
        try:
            (pull or (lambda r: _image.pull(store, r)))(ref)
        except PodkitError as exc:
            message = f"{where}: pull ({c.image_pull_policy}): {exc}"
            try:  # the same kind (its exit code), named with the pod and container
                again = type(exc)(message)
            except TypeError:
                again = PodkitError(message)
            raise again from exc


def _start_pod(mgr: Pods, pod: _Pod, *, wait: bool, deadline: float, clock: Clock,
               pull: PullFn | None) -> None:
    """Make the pod: volumes, sandbox, init containers to completion, app containers. A
    failure while making it undoes it all; :class:`PodFailedError` (init container) and
    :class:`PlayTimeoutError` leave it."""
    plan = pod.plan
    for c in (*plan.init_containers, *plan.containers):
        _ensure_image(mgr, plan, c, pull)
    pod.made = hostside.make_volumes(plan.volumes)
    try:
        pod.sandbox = mgr.run_sandbox(plan.sandbox)
        pod.status = "Pending"
        grace = float(plan.termination_grace_period_seconds)
        for ic in plan.init_containers:
            run = ContainerRun(plan=as_init(ic))
            pod.init.append(run)
            _run_init(mgr, pod, run, wait=wait, deadline=deadline, clock=clock, grace=grace)
        for ac in plan.containers:
            run = ContainerRun(plan=ac)
            pod.apps.append(run)
            lifecycle.create_and_start(mgr, pod.sandbox, run, clock, grace)
        pod.status = "Running"
    except PlayError:
        raise
    except BaseException:
        _undo(mgr, pod)
        raise


def _undo(mgr: Pods, pod: _Pod) -> None:
    if pod.sandbox is not None:
        mgr.remove_sandbox(pod.sandbox.id)
        pod.sandbox = None
    hostside.remove_volumes(pod.plan.volumes)
    hostside.remove_created(pod.made)


def _run_init(mgr: Pods, pod: _Pod, run: ContainerRun, *, wait: bool, deadline: float,
              clock: Clock, grace: float) -> None:
    """One init container to completion; a failure is retried with back-off (while ``wait``
    and restartPolicy is not Never) until ``deadline``."""
    assert pod.sandbox is not None
    plan, who = pod.plan, f"pod {pod.plan.namespace}/{pod.plan.name} init container"
    while True:
        lifecycle.create_and_start(mgr, pod.sandbox, run, clock, grace)
        c = lifecycle.run_to_completion(mgr, run.id, deadline, clock)
        run.last = c or mgr.container_status(run.id)
        if c is None:
            pod.status, pod.reason = "Pending", f"{who} {run.plan.name!r}: {run.describe()}"
            raise PlayTimeoutError(f"timed out: {pod.reason}", PlayResult())
        if c.exit_code == 0:
            return
        pod.reason = f"{who} {run.plan.name!r}: {run.describe()}"
        retry = wait and plan.restart_policy != "Never"
        delay = lifecycle.backoff_delay(run.attempt)
        if not retry:
            pod.status = "Failed"
            raise PodFailedError(f"failed: {pod.reason}", PlayResult())
        if clock.now() + delay >= deadline:
            pod.status = "Pending"
            raise PlayTimeoutError(f"timed out: {pod.reason}; next try after back-off "
                                   f"{delay:g}s", PlayResult())
        clock.sleep(delay)
        run.attempt += 1


def _watch(mgr: Pods, pods: list[_Pod], deadline: float, clock: Clock) -> None:
    """Until every pod is Ready (restartPolicy Always) or Succeeded; PodFailedError for a
    Failed one, PlayTimeoutError at ``deadline`` naming what is not there."""
    while True:
        waiting = []
        for pod in pods:
            if pod.status in ("Ready", "Succeeded"):
                continue
            assert pod.sandbox is not None
            status = lifecycle.pod_step(mgr, pod.plan, pod.sandbox, pod.apps, clock)
            if status == "Failed":
                bad = [r for r in pod.apps if r.last and r.last.exit_code != 0]
                pod.status, pod.reason = "Failed", "; ".join(
                    f"container {r.plan.name!r}: {r.describe()}" for r in bad)
                raise PodFailedError(
                    f"pod {pod.plan.namespace}/{pod.plan.name} failed: {pod.reason}",
                    PlayResult())
            if status:
                pod.status, pod.reason = status, ""
            else:
                waiting.append(pod)
        if not waiting:
            return
        if clock.now() >= deadline:
            pod = waiting[0]
            want = "Ready" if pod.plan.restart_policy == "Always" else "Succeeded"
            pod.reason = "; ".join(
                f"container {r.plan.name!r}: {r.describe()}" for r in pod.apps
                if r.last is None or r.last.state != ContainerState.CONTAINER_RUNNING
                or want == "Succeeded" or r.probes.health() != Health.READY)
            raise PlayTimeoutError(
                f"timed out waiting for pod {pod.plan.namespace}/{pod.plan.name} to be {want}:"
                f" {pod.reason}", PlayResult())
        clock.sleep(lifecycle.POLL)


def play(mgr: Pods, plans: Sequence[PodPlan], *, wait: bool = False, timeout: float = 300.0,
         replace: bool = False, rm_on_failure: bool = False, pull: PullFn | None = None,
         clock: Clock | None = None) -> PlayResult:
    """Run every pod of ``plans``; what started.

    A pod that exists (same name, namespace and uid) is refused with AlreadyExistsError before
    anything is made, unless ``replace`` (it is brought down first). ``pull`` pulls an image
    reference into the manager's store (default: ``podkit.image.pull``). With ``wait``, returns
    once every pod is Ready, or Succeeded for restartPolicy Never/OnFailure, restarting
    containers with the kubelet's back-off and running probes meanwhile. Raises
    :class:`PodFailedError` or :class:`PlayTimeoutError` (their ``result`` says what runs).
    """
    clock = clock or Clock()
    deadline = clock.now() + timeout
    plans = [_labelled(p) for p in plans]
    for plan in plans:
        found = find_pods(mgr, plan)
        if found and not replace:
            raise AlreadyExistsError(
                f"pod {plan.namespace}/{plan.name} (uid {plan.uid}, {plan.source}) exists: "
                f"sandbox {found[0].id[:12]} (kube down it, or play with --replace)")
    if replace:
        down(mgr, plans, clock=clock)
    pods = [_Pod(plan=p) for p in plans]
    try:
        for pod in pods:
            _start_pod(mgr, pod, wait=wait, deadline=deadline, clock=clock, pull=pull)
        if wait:
            _watch(mgr, pods, deadline, clock)
    except PlayError as exc:
        result = PlayResult(tuple(p.result(mgr) for p in pods if p.sandbox is not None))
        if rm_on_failure:
            down(mgr, plans, clock=clock)
        raise type(exc)(str(exc), result) from None
    except BaseException:
        for pod in pods:  # the failing pod is undone already; the others go too
            if pod.sandbox is not None:
                _undo(mgr, pod)
        raise
    return PlayResult(tuple(p.result(mgr) for p in pods))


def down(mgr: Pods, plans: Sequence[PodPlan], *, clock: Clock | None = None) -> DownResult:
    """Remove what ``plans`` describe: each pod's sandboxes (preStop hooks, then the stop
    signal and ``terminationGracePeriodSeconds``) and its volumes (never a hostPath's
    contents). Idempotent: a pod that is not there is a note, not an error."""
    clock = clock or Clock()
    removed: list[str] = []
    notes: list[str] = []
    for plan in plans:
        found = find_pods(mgr, plan)
        for sb in found:
            lifecycle.stop_pod(mgr, plan, sb, clock)
            mgr.remove_sandbox(sb.id)
            removed.append(sb.id)
        gone = hostside.remove_volumes(plan.volumes)
        removed += gone
        what = f"pod {plan.namespace}/{plan.name}"
        if found:
            notes.append(f"{what}: removed sandbox {', '.join(s.id[:12] for s in found)}"
                         + (f" and {len(gone)} volume(s)" if gone else ""))
        else:
            notes.append(f"{what}: not running (nothing to remove)"
                         + (f"; removed {len(gone)} leftover volume(s)" if gone else ""))
    return DownResult(removed=tuple(removed), notes=tuple(notes))
