"""Shared by the kube play tests: hand-made plans, a stepping clock and a fake image store."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

import attrs

from podkit.container import ContainerConfig, ContainerMetadata, KeyValue
from podkit.errors import NotFoundError
from podkit.kube import ContainerPlan, PodPlan, ProbeSpec, VolumePlan
from podkit.kube.lifecycle import Clock
from podkit.sandbox import PodSandboxMetadata, SandboxConfig


def ctr(name: str, *, image: str = "/rootfs", command: Sequence[str] = ("sleep", "1000"),
        pull: str = "IfNotPresent", envs: Sequence[tuple[str, str]] = (),
        **kw: object) -> ContainerPlan:
    """A container plan the way the mapping makes one (log path ``<name>/0.log``)."""
    config = ContainerConfig(metadata=ContainerMetadata(name=name), image=image,
                             command=list(command), log_path=f"{name}/0.log",
                             envs=[KeyValue(key=k, value=v) for k, v in envs])
    return ContainerPlan(name=name, config=config, image_pull_policy=pull,
                         **kw)  # type: ignore[arg-type]


def pod(name: str = "web", *, apps: Sequence[ContainerPlan] = (),
        init: Sequence[ContainerPlan] = (), volumes: Sequence[VolumePlan] = (),
        policy: str = "Always", grace: int = 2, namespace: str = "default") -> PodPlan:
    """A pod plan with a sandbox config named like the kubelet's."""
    uid = f"uid-{namespace}-{name}"
    sandbox = SandboxConfig(
        metadata=PodSandboxMetadata(name=name, uid=uid, namespace=namespace),
        log_directory=f"/var/log/pods/{namespace}_{name}_{uid}")
    return PodPlan(name=name, namespace=namespace, uid=uid, sandbox=sandbox,
                   init_containers=tuple(init), containers=tuple(apps or [ctr("app")]),
                   volumes=tuple(volumes), restart_policy=policy,
                   termination_grace_period_seconds=grace, source=f"test.yaml#0 (Pod/{name})",
                   warnings=())


def exec_probe(*cmd: str, **kw: int) -> ProbeSpec:
    return ProbeSpec(kind="exec", command=tuple(cmd), **kw)  # type: ignore[arg-type]


class FakeClock:
    """Time that moves only when slept; ``on_sleep(now)`` runs after every step."""

    def __init__(self, on_sleep: Callable[[float], None] | None = None) -> None:
        self.t = 1000.0
        self.slept: list[float] = []
        self.on_sleep = on_sleep

    def now(self) -> float:
        return self.t

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.t += seconds
        if self.on_sleep is not None:
            self.on_sleep(self.t)

    @property
    def clock(self) -> Clock:
        return Clock(now=self.now, sleep=self.sleep)


@attrs.define
class FakeStore:
    """An image store that knows a set of references (``get`` as ``ImageStore.get``)."""

    refs: set[str] = attrs.field(factory=set)
    root: Path = Path("/nonexistent/store")

    def get(self, ref: str) -> str:
        if ref not in self.refs:
            raise NotFoundError(f"image {ref} not found in {self.root}")
        return ref
