"""One kill-matrix trial process: do a pod operation and die by SIGKILL at a chosen point.

Run as ``python soak/_trial.py '<json>'``. ``mode``: ``op`` (set up, then run ``op`` with the
kill point armed; ``kill`` null only traces the points passed) or ``recover`` (a new manager
over the same dirs: ``recover()`` then ``remove_all()``).

Kill points sit at seams: the runtime (``Runc``) and the supervisor, conmon's launcher, the CNI
``Exec`` (one point per plugin command), ``os.replace`` of podkit's atomic writes (the temp
file exists, the rename did not happen), the manager's step table (``step.netns.do``,
``step.files.undo``...), its record store's drops and its registry's forgetting of a pod or
container (wrapped on the instance in this process). ``timed`` kills at
a delay instead. Every point passed is appended to ``events`` as ``name#n phase``.
"""

from __future__ import annotations

import functools
import json
import os
import signal
import sys
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import attrs

from podkit import cni
from podkit.container import (
    ContainerConfig,
    ContainerMetadata,
    LinuxContainerConfig,
    LinuxContainerSecurityContext,
)
from podkit.runtime import Conmon, ConmonSupervisor, InProcessSupervisor, Runc
from podkit.sandbox import (
    LinuxPodSandboxConfig,
    LinuxSandboxSecurityContext,
    NamespaceMode,
    NamespaceOption,
    PauseConfig,
    PodSandboxMetadata,
    SandboxConfig,
    SandboxManager,
    default_network_config,
)

RUNTIME_METHODS = ("create", "start", "kill", "delete", "wait")
SUPERVISOR_METHODS = ("start", "wait", "stop", "delete")
CONMON_METHODS = ("create", "start", "delete", "kill", "wait", "_spawn")


class Points:
    """Counts the points passed, logs them, and SIGKILLs this process at the armed one."""

    def __init__(self, log: Path, kill: str | None) -> None:
        self.log = open(log, "a", buffering=1)  # noqa: SIM115 - lives as long as the process
        self.kill = kill
        self.armed = False
        self.seen: Counter[str] = Counter()
        self.lock = threading.Lock()

    def passed(self, name: str, phase: str) -> None:
        """Record ``name`` at ``phase`` (before/after); die here if it is the armed point."""
        if not self.armed:
            return
        with self.lock:
            if phase == "before":
                self.seen[name] += 1
            point = f"{name}#{self.seen[name]} {phase}"
            self.log.write(point + "\n")
            if point == self.kill:
                self.log.write("HIT\n")
                self.log.flush()
                os.kill(os.getpid(), signal.SIGKILL)


def wrapped(real: Callable[..., Any], name: str, points: Points) -> Callable[..., Any]:
    """``real``, passing ``name`` before and after each call."""
    @functools.wraps(real)
    def call(*args: Any, **kwargs: Any) -> Any:
        points.passed(name, "before")
        try:
            return real(*args, **kwargs)
        finally:
            points.passed(name, "after")

    return call


def wrap(obj: object, method: str, name: str, points: Points) -> None:
    """Replace ``obj.method`` (on the instance) by one that passes ``name`` before and after."""
    real = getattr(obj, method, None)
    if real is not None:
        setattr(obj, method, wrapped(real, name, points))


def wrap_replace(base: str, points: Points) -> None:
    """Atomic writes under ``base``: a point just before the rename (the temp file exists)."""
    real = os.replace

    def replace(src: Any, dst: Any, *args: Any, **kwargs: Any) -> None:
        target = os.fspath(dst)
        if target.startswith(base):
            points.passed(f"write:{_kind_of(target, base)}", "before")
        real(src, dst, *args, **kwargs)

    os.replace = replace


def _kind_of(path: str, base: str) -> str:
    """A stable name for a written file: its path under ``base`` with IDs dropped."""
    parts = Path(path).relative_to(base).parts
    return "/".join(p if len(p) < 40 else "ID" for p in parts).replace(".json", "")


class KillingExec(cni.RawExec):
    """The real plugin runner with a point before and after each plugin command."""

    def __init__(self, points: Points) -> None:
        super().__init__()
        self.points = points

    def exec_plugin(self, plugin_path: str, stdin_data: bytes, environ: Mapping[str, str],
                    timeout: float | None) -> bytes:
        name = f"cni:{environ.get('CNI_COMMAND', '?')}:{os.path.basename(plugin_path)}"
        self.points.passed(name, "before")
        out = super().exec_plugin(plugin_path, stdin_data, environ, timeout)
        self.points.passed(name, "after")
        return out


def networks(state: Path, exec: cni.Exec) -> cni.Networks:
    """loopback + the soak bridge network (host-local under ``<state>/ipam``)."""
    conf = default_network_config(state, name="pksoak-net", bridge="pksoak0",
                                  subnet="10.91.0.0/16")
    client = cni.CNI(plugin_dirs=["/usr/lib/cni"], cache_dir=str(state / "cni-cache"),
                     exec=exec)
    return cni.Networks(client, [conf], loopback=True)


def manager(p: Mapping[str, Any], points: Points) -> SandboxManager:
    """A manager over the trial's dirs, every seam wrapped with ``points``."""
    base = Path(p["base"])
    runtime = Runc(p["runtime"], root=base / "runtime")
    for m in RUNTIME_METHODS:
        wrap(runtime, m, f"runtime.{m}", points)
    if p["supervisor"] == "conmon":
        conmon = Conmon(runtime, state_dir=base / "state" / "conmon")
        for m in CONMON_METHODS:
            wrap(conmon, m, f"conmon.{m}", points)
        supervisor: Any = ConmonSupervisor(conmon)
    else:
        supervisor = InProcessSupervisor(runtime)
    for m in SUPERVISOR_METHODS:
        wrap(supervisor, m, f"supervisor.{m}", points)
    mgr = SandboxManager(base / "root", base / "state", runtime,
                         networks(base / "state", KillingExec(points)),
                         pause=PauseConfig(rootfs=p["rootfs"]), supervisor=supervisor,
                         netns_prefix=p["netns_prefix"])
    for name, step in list(mgr.steps.items()):  # the run_sandbox steps, by their table
        mgr.steps[name] = attrs.evolve(step, do=wrapped(step.do, f"step.{name}.do", points),
                                       undo=wrapped(step.undo, f"step.{name}.undo", points))
    wrap(mgr.sandbox_steps, "write_pause_bundle", "step.pause-bundle", points)
    wrap(mgr.records, "drop", "records.drop", points)
    for m in ("drop_sandbox", "drop_container"):  # the manager forgets a pod or a container
        wrap(mgr.registry, m, f"registry.{m}", points)
    return mgr


def pod_config(cgroup_parent: str) -> SandboxConfig:
    """A pod on the soak network, its cgroups under the trial's parent."""
    ns = NamespaceOption(network=NamespaceMode.POD)
    return SandboxConfig(
        metadata=PodSandboxMetadata(name=f"soak-{uuid.uuid4().hex[:8]}", uid=uuid.uuid4().hex,
                                    namespace="pk-soak"),
        hostname="soak",
        linux=LinuxPodSandboxConfig(
            cgroup_parent=cgroup_parent,
            security_context=LinuxSandboxSecurityContext(namespace_options=ns)),
    )


def ctr_config(rootfs: str) -> ContainerConfig:
    """busybox ``sleep`` in its own pid namespace."""
    sc = LinuxContainerSecurityContext(
        namespace_options=NamespaceOption(pid=NamespaceMode.CONTAINER))
    return ContainerConfig(metadata=ContainerMetadata(name="app"), image=rootfs,
                           command=["sleep", "3600"],
                           linux=LinuxContainerConfig(security_context=sc))


def operation(mgr: SandboxManager, op: str, p: Mapping[str, Any],
              arm: Callable[[], None]) -> None:
    """Set up what ``op`` needs, ``arm()`` the kill point, then run ``op``."""
    pod = pod_config(p["cgroup_parent"])
    if op == "run_sandbox":
        arm()
        mgr.run_sandbox(pod)
        return
    sb = mgr.run_sandbox(pod)
    if op == "create_container":
        arm()
        mgr.create_container(sb.id, ctr_config(p["rootfs"]))
        return
    cid = mgr.create_container(sb.id, ctr_config(p["rootfs"]))
    if op == "start_container":
        arm()
        mgr.start_container(cid)
        return
    mgr.start_container(cid)
    arm()
    if op == "stop_container":
        mgr.stop_container(cid, 0)
    elif op == "stop_sandbox":
        mgr.stop_sandbox(sb.id)
    elif op == "remove_sandbox":
        mgr.remove_sandbox(sb.id)
    else:
        raise SystemExit(f"unknown operation {op!r}")


def timed_kill(delay: float) -> None:
    """SIGKILL this process ``delay`` seconds from now."""
    timer = threading.Timer(delay, os.kill, (os.getpid(), signal.SIGKILL))
    timer.daemon = True
    timer.start()


def main(p: Mapping[str, Any]) -> int:
    """Run one trial step as described by ``p``; exit 0 when it completed unkilled."""
    points = Points(Path(p["events"]), p.get("kill"))
    if p["mode"] == "recover":
        mgr = manager(p, points)
        report = mgr.recover()
        errors = list(report.errors)
        try:
            mgr.remove_all()
        except Exception as exc:  # reported to the parent, which counts it
            errors.append(f"remove_all: {exc}")
        mgr.close()
        print(json.dumps({"errors": errors}))
        return 1 if errors else 0
    wrap_replace(p["base"], points)
    mgr = manager(p, points)

    def arm() -> None:
        points.armed = True
        if p.get("timed") is not None:
            timed_kill(float(p["timed"]))
        points.log.write(f"ARMED {time.monotonic()}\n")

    operation(mgr, p["op"], p, arm)
    points.log.write(f"DONE {time.monotonic()}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(json.loads(sys.argv[1])))
