"""Shared by the kube play tests: hand-made plans, a stepping clock and a fake image store."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import attrs

import _leaks
from podkit.container import ContainerConfig, ContainerMetadata, KeyValue
from podkit.errors import NotFoundError
from podkit.kube import ContainerPlan, PodPlan, ProbeSpec, VolumePlan
from podkit.kube.lifecycle import Clock
from podkit.runtime import read_cri_log
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


# -- end to end through the real CLI ------------------------------------------------------

BUSYBOX_IMAGE = "localhost/kube-play/busybox:1"


@attrs.frozen
class KubeEnv:
    """One test's podkit dirs (root with the image store, state, pod logs) and pause rootfs."""

    base: Path
    rootfs: Path
    ids: list[str] = attrs.field(factory=list)  # every sandbox and container ID printed
    runtime: str = "runc"
    builtin_pause: bool = False  # no --pause-rootfs: podkit's own pause

    @property
    def flags(self) -> list[str]:
        root = str(self.base / "root")
        pause = [] if self.builtin_pause else ["--pause-rootfs", str(self.rootfs)]
        return ["--root", root, "--state", str(self.base / "state"), "--image-root", root,
                "--runtime", self.runtime, *pause, "--log-root", str(self.base / "logs")]

    def write(self, name: str, text: str) -> Path:
        path = self.base / name
        path.write_text(text)
        return path

    def podkit(self, *args: str) -> subprocess.CompletedProcess[str]:
        """``podkit ARGS... <dirs>`` as a child process (its own exit code and streams)."""
        exe = Path(sys.executable).parent / "podkit"
        return subprocess.run([str(exe), *args, *self.flags], capture_output=True, text=True,
                              timeout=600, check=False)

    def play(self, *args: str) -> tuple[int, dict[str, Any], str]:
        """``kube play ARGS -o json``: exit code, the JSON printed (``{}`` if none), stderr."""
        res = self.podkit("kube", "play", *args, "-o", "json")
        out = json.loads(res.stdout) if res.stdout.strip() else {}
        for pod in out.get("pods", []):
            self.ids.extend([pod["sandbox_id"], *(c["id"] for c in pod["containers"])])
        return res.returncode, out, res.stderr

    def leaked(self, before: frozenset[str]) -> list[str]:
        """What this test left: cgroups and units (shared with other sessions on the host)
        only when they name one of its IDs."""
        return [item for item in _leaks.leaked_since(before)
                if item.split()[0] not in ("cgroup", "unit")
                or any(i and i in item for i in self.ids)]

    def pod_log(self, namespace: str, name: str, uid: str, container: str,
                attempt: int = 0) -> str:
        path = self.base / "logs" / f"{namespace}_{name}_{uid}" / container / f"{attempt}.log"
        return "".join(line.content.decode() + "\n" for line in read_cri_log(path))

    def volumes(self) -> list[str]:
        root = self.base / "root" / "kube"
        return sorted(str(p.relative_to(root)) for p in root.rglob("*")) if root.exists() \
            else []


def busybox_image(rootfs: Path, *extra: tuple[str, bytes]) -> Any:
    """The busybox rootfs as an image (``BuiltImage``), with ``extra`` files in a 2nd layer."""
    from image.imagebuild import Layer, build_image

    layers = [Layer().tree(rootfs).bytes()]
    if extra:
        layer = Layer()
        for name, data in extra:
            layer = layer.file(name, data)
        layers.append(layer.bytes())
    return build_image(layers, ["gzip"] * len(layers),
                       {"Env": ["PATH=/bin:/usr/bin"], "Cmd": ["sh"]})


def busybox_layout(rootfs: Path, work: Path) -> Path:
    """The busybox rootfs as an OCI layout of one image (import it as ``BUSYBOX_IMAGE``)."""
    from image.imagebuild import write_layout

    img = busybox_image(rootfs)
    return write_layout(work / "busybox-layout", [(img.descriptor, None)], img.blobs)


def cgroup_limits(pid: int) -> dict[str, int]:
    """cpu shares, CFS quota and period, memory limit of ``pid``'s cgroup (v1 or v2 files,
    v2's cpu.weight turned back into shares as runc converts them)."""
    from podkit import cgroups

    loc = cgroups.locate_pid(pid)
    cpu, mem = loc.controller_dir("cpu"), loc.controller_dir("memory")
    assert cpu is not None and mem is not None
    if (cpu / "cpu.shares").exists():
        limit = (mem / "memory.limit_in_bytes").read_text().strip()
        return {"shares": int((cpu / "cpu.shares").read_text()),
                "quota": int((cpu / "cpu.cfs_quota_us").read_text()),
                "period": int((cpu / "cpu.cfs_period_us").read_text()),
                "memory": int(limit) if int(limit) < 2**62 else 0}
    weight = int((cpu / "cpu.weight").read_text())
    quota, period = (cpu / "cpu.max").read_text().split()
    limit = (mem / "memory.max").read_text().strip()
    return {"weight": weight, "quota": -1 if quota == "max" else int(quota),
            "period": int(period), "memory": 0 if limit == "max" else int(limit)}
