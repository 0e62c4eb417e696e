"""A kube container's readiness for ``podkit pod wait --for ready`` in another process.

``kube play`` records each container's readiness probe in an annotation of its config
(:data:`READINESS_ANNOTATION`, the probe as JSON); :func:`probe_readiness` reads it back from
the manager's record and runs the probe once, so a later command needs nothing from the ``play``
that made the pod. Only ``kube play --wait`` counts thresholds and restarts containers. Init
containers are marked (:data:`INIT_ANNOTATION`): once completed they do not keep a pod from
being running or ready.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from typing import Any, Protocol

import attrs

from podkit.errors import InvalidArgumentError
from podkit.kube.plan import ContainerPlan, ProbeSpec
from podkit.kube.probes import ProbeResult, run_probe
from podkit.sandbox import Container, ContainerState, Sandbox

__all__ = ["INIT_ANNOTATION", "READINESS_ANNOTATION", "Execs", "as_init", "completed_init",
           "probe_from_json", "probe_readiness", "probe_to_json"]

READINESS_ANNOTATION = "podkit.kube/readinessProbe"
"""The container annotation holding its readiness probe (JSON of a :class:`ProbeSpec`)."""

INIT_ANNOTATION = "podkit.kube/initContainer"
"""``"true"`` on an init container's config: a pod is running and ready without it."""

_FIELDS = {f.name: f for f in attrs.fields(ProbeSpec)}


class Execs(Protocol):
    """What running an exec probe needs of the manager."""

    def exec_sync(self, id: str, cmd: Sequence[str], timeout: float | None = None) -> Any: ...


def as_init(plan: ContainerPlan) -> ContainerPlan:
    """An init container's plan, marked so that later commands know it ends by design."""
    annotations = {**plan.config.annotations, INIT_ANNOTATION: "true"}
    return attrs.evolve(plan, config=attrs.evolve(plan.config, annotations=annotations))


def completed_init(c: Container) -> bool:
    """An init container that ran to completion (exit 0): the kubelet's Ready condition counts
    only app containers, so a pod is running and ready with it exited."""
    return (c.config.annotations.get(INIT_ANNOTATION) == "true"
            and c.state == ContainerState.CONTAINER_EXITED and c.exit_code == 0)


def probe_to_json(spec: ProbeSpec) -> str:
    """The probe as compact JSON (its field names), for :data:`READINESS_ANNOTATION`."""
    return json.dumps(attrs.asdict(spec), separators=(",", ":"), sort_keys=True)


def probe_from_json(text: str, where: str) -> ProbeSpec:
    """The probe :func:`probe_to_json` wrote; an error naming ``where`` when it is not one."""
    try:
        data = json.loads(text)
        if not isinstance(data, dict) or not set(data) <= set(_FIELDS):
            raise ValueError(f"want an object with fields of {', '.join(sorted(_FIELDS))}")
        data["command"] = tuple(str(a) for a in data.get("command", ()))
        data["http_headers"] = tuple((str(k), str(v)) for k, v in data.get("http_headers", ()))
        return ProbeSpec(**data)
    except (ValueError, TypeError) as exc:
        raise InvalidArgumentError(
            f"{where}: annotation {READINESS_ANNOTATION} {text[:80]!r} is not a probe: {exc}"
        ) from None


def probe_readiness(mgr: Execs, sandbox: Sandbox, container: Container, *,
                    now: Callable[[], float] = time.time) -> ProbeResult:
    """Whether a running container is ready now, and why not: it has no readiness probe, or
    ``initialDelaySeconds`` have passed since it started and one run of the probe passes."""
    text = container.config.annotations.get(READINESS_ANNOTATION)
    if text is None:
        return ProbeResult(True, "no readiness probe")
    where = f"pod {sandbox.config.metadata.name!r} container {container.config.metadata.name!r}"
    spec = probe_from_json(text, where)
    if now() < container.started_at / 1e9 + spec.initial_delay_seconds:
        return ProbeResult(False, f"not run before initialDelaySeconds "
                                  f"({spec.initial_delay_seconds}s)")

    def exec_fn(cmd: Sequence[str], timeout: float) -> tuple[int, bytes]:
        res = mgr.exec_sync(container.id, list(cmd), timeout)
        return res.exit_code, res.stdout + res.stderr

    return run_probe(spec, pod_ip=sandbox.ip, exec_fn=exec_fn)
