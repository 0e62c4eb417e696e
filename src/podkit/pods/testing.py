"""In-memory fakes of the pods layer for tests: :class:`FakePodManager`.

``FakePodManager`` keeps pods and containers in dicts and runs nothing (no root, no runtime,
no network), with the manager's rules: the same config checks, name reservations
(``AlreadyExistsError``), lookups (``NotFoundError``), the state machine (pods READY ->
NOTREADY, containers CREATED -> RUNNING -> EXITED; ``ConflictError`` out of order), idempotent
stop and remove, and the same filters. It satisfies the CRI service's
:class:`~podkit.cri.service.pods.PodAPI`, beside ``runtime.testing.FakeRuntime`` and
``cni.testing.FakeExec``. A test makes a container exit with :meth:`FakePodManager.exit` and
scripts ``exec_sync`` with ``exec_handler``.
"""

from __future__ import annotations

import builtins
import itertools
import secrets
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs

from podkit import image as _image
from podkit import oci
from podkit.errors import (
    AlreadyExistsError,
    ConflictError,
    InvalidArgumentError,
    NotFoundError,
    PodkitError,
    quote,
)
from podkit.pods import rules
from podkit.pods.config import ContainerConfig, LinuxContainerResources, SandboxConfig
from podkit.pods.records import (
    Container,
    ContainerFilter,
    ContainerState,
    ContainerStats,
    PauseConfig,
    Sandbox,
    SandboxFilter,
    SandboxState,
    SandboxStats,
)
from podkit.pods.sandbox_spec import validate_sandbox_config
from podkit.runtime import ExecResult
from podkit.runtime.errors import NotRunningError

__all__ = ["FakeNetworks", "FakePodManager", "FakeProbe"]

ExecHandler = Callable[[str, Sequence[str], "float | None"], ExecResult]
"""``(container ID, argv, timeout) -> ExecResult`` of :meth:`FakePodManager.exec_sync`."""


class FakeProbe:
    """A runtime stand-in for RuntimeReady: ``list()`` answers, or raises ``error``."""

    def __init__(self) -> None:
        self.error: Exception | None = None

    def list(self) -> builtins.list[Any]:
        """Nothing, or the set error."""
        if self.error is not None:
            raise self.error
        return []


class FakeNetworks:
    """Pod networks stand-in for NetworkReady: ``status()`` passes, or raises ``error``."""

    def __init__(self) -> None:
        self.error: Exception | None = None

    def status(self) -> None:
        """Nothing, or the set error (CNI STATUS failed)."""
        if self.error is not None:
            raise self.error


def _now() -> int:
    return time.time_ns()


def _labels_match(labels: Mapping[str, str], selector: Mapping[str, str]) -> bool:
    return all(labels.get(k) == v for k, v in selector.items())


class FakePodManager:
    """An in-memory ``SandboxManager`` stand-in (the CRI service's ``PodAPI``).

    ``root_dir`` and ``state_dir`` are reported, never written; ``images`` and
    ``rootfs_mode`` are what the service checks; ``networks`` stays ``None`` unless
    ``network_loader`` gives some (:meth:`load_networks`). Pods on the pod network get the IP
    ``10.88.0.<n>``. ``cgroup_driver`` is only reported. ``calls`` records every mutating
    call as ``(method, id)``. Thread-safe.
    """

    def __init__(
        self,
        root_dir: str | Path = "/nonexistent/podkit-fake/root",
        state_dir: str | Path = "/nonexistent/podkit-fake/state",
        *,
        images: _image.ImageStore | None = None,
        rootfs_mode: str = "auto",
        pause: PauseConfig | None = None,
        networks: Any = None,
        network_loader: Callable[[], Any] | None = None,
        exec_handler: ExecHandler | None = None,
        cgroup_driver: str = "cgroupfs",
    ) -> None:
        self.root_dir = Path(root_dir)
        self.cgroup_driver = cgroup_driver
        self.state_dir = Path(state_dir)
        self.images = images
        self.rootfs_mode = rootfs_mode
        self.pause = pause
        self.networks = networks
        self.network_loader = network_loader
        self.runtime = FakeProbe()
        self.exec_handler: ExecHandler = exec_handler or (
            lambda id, cmd, timeout: ExecResult(exit_code=0))
        self.calls: builtins.list[tuple[str, str]] = []
        self._lock = threading.RLock()
        self._names: dict[str, str] = {}
        self._sandboxes: dict[str, Sandbox] = {}
        self._containers: dict[str, Container] = {}
        self._pids = itertools.count(1000)
        self._ips = itertools.count(2)

    # -- networks -------------------------------------------------------------------------

    userns_problem = "a FakePodManager makes no user namespaces"
    """What :meth:`user_namespaces` answers ("" to claim support)."""

    def user_namespaces(self) -> str:
        """Why pods with their own user namespace cannot run (``userns_problem``)."""
        return self.userns_problem

    def load_networks(self) -> str:
        """Load the networks through ``network_loader`` if none yet; "" or why not."""
        if self.network_loader is None or self.networks is not None:
            return ""
        try:
            self.networks = self.network_loader()
        except PodkitError as exc:
            return f"cni config not loaded: {exc}"
        return ""

    # -- helpers --------------------------------------------------------------------------

    def _reserve(self, name: str, id: str, what: str) -> None:
        owner = self._names.get(name)
        if owner is not None:
            raise AlreadyExistsError(f"{what} name {name!r} is already reserved by {owner}")
        self._names[name] = id

    def _sandbox(self, id: str) -> Sandbox:
        sb = self._sandboxes.get(id)
        if sb is None:
            raise NotFoundError(f"no sandbox {quote(id)}")
        return sb

    def _container(self, id: str) -> Container:
        c = self._containers.get(id)
        if c is None:
            raise NotFoundError(f"no container {quote(id)}")
        return c

    def _exit(self, c: Container, code: int, reason: str = "") -> None:
        c.state = ContainerState.CONTAINER_EXITED
        c.exit_code = code
        c.finished_at = max(_now(), c.started_at)
        c.reason = reason or ("Completed" if code == 0 else "Error")
        c.pid = 0

    # -- pods -----------------------------------------------------------------------------

    def run_sandbox(self, config: SandboxConfig) -> Sandbox:
        """A READY pod (its name reserved); a host-network pod needs no networks."""
        validate_sandbox_config(config)
        sb = Sandbox(id=secrets.token_hex(32), name=rules.sandbox_name(config.metadata),
                     config=config, created_at=_now())
        if not sb.host_network and self.networks is None:
            problem = self.load_networks()
            if self.networks is None:
                raise InvalidArgumentError(
                    f"pod network: no CNI network configured{': ' + problem if problem else ''}")
        with self._lock:
            self._reserve(sb.name, sb.id, "sandbox")
            sb.state, sb.phase, sb.pid = SandboxState.SANDBOX_READY, "created", next(self._pids)
            sb.steps = ("pause",)
            if not sb.host_network:
                sb.ips = (f"10.88.0.{next(self._ips)}",)
                sb.netns_path = f"/var/run/netns/fake-{sb.id[:12]}"
            self._sandboxes[sb.id] = sb
            self.calls.append(("run_sandbox", sb.id))
            return attrs.evolve(sb)

    def stop_sandbox(self, id: str) -> None:
        """Kill the pod's containers (137) and its pause (NOTREADY); unknown IDs succeed."""
        with self._lock:
            sb = self._sandboxes.get(id)
            if sb is None:
                return
            for c in self._containers.values():
                if c.sandbox_id == id and c.state == ContainerState.CONTAINER_RUNNING:
                    self._exit(c, 137)
            sb.state, sb.pid = SandboxState.SANDBOX_NOTREADY, 0
            self.calls.append(("stop_sandbox", id))

    def remove_sandbox(self, id: str) -> None:
        """Stop the pod, remove its containers and record, free the names; idempotent."""
        with self._lock:
            if id not in self._sandboxes:
                return
            self.stop_sandbox(id)
            for c in [c for c in self._containers.values() if c.sandbox_id == id]:
                self._forget(c)
            sb = self._sandboxes.pop(id)
            if self._names.get(sb.name) == id:
                del self._names[sb.name]
            self.calls.append(("remove_sandbox", id))

    def sandbox_status(self, id: str) -> Sandbox:
        """The pod's record."""
        with self._lock:
            return attrs.evolve(self._sandbox(id))

    def list_sandboxes(self, filter: SandboxFilter | None = None) -> builtins.list[Sandbox]:
        """Pods matching ``filter`` (id prefix, state, labels), oldest first."""
        f = filter or SandboxFilter()
        with self._lock:
            items = [attrs.evolve(s) for s in self._sandboxes.values()]
        return sorted((s for s in items if s.id.startswith(f.id)
                       and (f.state is None or s.state == f.state)
                       and _labels_match(s.config.labels, f.label_selector)),
                      key=lambda s: s.created_at)

    def sandbox_stats(self, id: str) -> SandboxStats:
        """Zero usage of the pod and its running containers."""
        with self._lock:
            self._sandbox(id)
            running = [c.id for c in self._containers.values()
                       if c.sandbox_id == id and c.state == ContainerState.CONTAINER_RUNNING]
        return SandboxStats(id=id, timestamp=_now(), cpu_usage_core_nano_seconds=0,
                            memory_working_set_bytes=0, process_count=1 + len(running),
                            containers=tuple(self.container_stats(c) for c in running))

    # -- containers -----------------------------------------------------------------------

    def create_container(self, sandbox_id: str, config: ContainerConfig, *,
                         meta: Mapping[str, str] | None = None) -> str:
        """A CREATED container in a READY pod (its name reserved); its ID."""
        with self._lock:
            sb = self._sandbox(sandbox_id)
            if sb.state != SandboxState.SANDBOX_READY:
                raise ConflictError(f"sandbox {sandbox_id} is not ready")
            if not config.image:
                raise InvalidArgumentError("image: required (a rootfs directory or an image)")
            c = Container(id=secrets.token_hex(32), sandbox_id=sandbox_id,
                          name=rules.container_name(config.metadata, sb.config.metadata),
                          config=config, created_at=_now(), phase="created",
                          meta=dict(meta or {}))
            self._reserve(c.name, c.id, "container")
            self._containers[c.id] = c
            self.calls.append(("create_container", c.id))
            return c.id

    def start_container(self, id: str) -> None:
        """CREATED -> RUNNING."""
        with self._lock:
            c = self._container(id)
            if c.state != ContainerState.CONTAINER_CREATED:
                raise ConflictError(f"container {id} is {c.state.name}, not CREATED")
            c.state, c.started_at, c.pid = (ContainerState.CONTAINER_RUNNING, _now(),
                                            next(self._pids))
            self.calls.append(("start_container", id))

    def exit(self, id: str, code: int = 0, reason: str = "") -> None:
        """Make a running container exit on its own with ``code`` (as if its process ended)."""
        with self._lock:
            c = self._container(id)
            if c.state != ContainerState.CONTAINER_RUNNING:
                raise ConflictError(f"container {id} is {c.state.name}, not running")
            self._exit(c, code, reason)

    def stop_container(self, id: str, timeout: float = 0) -> None:
        """RUNNING -> EXITED (137: killed); unknown IDs and stopped containers succeed."""
        with self._lock:
            c = self._containers.get(id)
            if c is None:
                return
            if c.state == ContainerState.CONTAINER_RUNNING:
                self._exit(c, 137)
            self.calls.append(("stop_container", id))

    def _forget(self, c: Container) -> None:
        del self._containers[c.id]
        if self._names.get(c.name) == c.id:
            del self._names[c.name]

    def remove_container(self, id: str) -> None:
        """Stop and remove the container, free its name; idempotent."""
        with self._lock:
            c = self._containers.get(id)
            if c is None:
                return
            self.stop_container(id)
            self._forget(c)
            self.calls.append(("remove_container", id))

    def container_status(self, id: str) -> Container:
        """The container's record."""
        with self._lock:
            return attrs.evolve(self._container(id))

    def container_user(self, id: str) -> oci.User | None:
        """The config's ``run_as_user``/``run_as_group``/``supplemental_groups`` (0 when
        unset), as the real manager resolves them without an image's passwd file."""
        with self._lock:
            sc = self._container(id).config.linux.security_context
        return oci.User(uid=sc.run_as_user or 0, gid=sc.run_as_group or 0,
                        additional_gids=list(sc.supplemental_groups) or None)

    def list_containers(self, filter: ContainerFilter | None = None,
                        ) -> builtins.list[Container]:
        """Containers matching ``filter`` (id and pod prefix, state, labels), oldest first."""
        f = filter or ContainerFilter()
        with self._lock:
            items = [attrs.evolve(c) for c in self._containers.values()]
        return sorted((c for c in items if c.id.startswith(f.id)
                       and c.sandbox_id.startswith(f.pod_sandbox_id)
                       and (f.state is None or c.state == f.state)
                       and _labels_match(c.config.labels, f.label_selector)),
                      key=lambda c: c.created_at)

    def _running(self, id: str) -> Container:
        c = self._container(id)
        if c.state != ContainerState.CONTAINER_RUNNING:
            raise NotRunningError(f"container {id} is not running ({c.state.name})")
        return c

    def update_container_resources(self, id: str, resources: LinuxContainerResources) -> None:
        """Remember the new limits in the record."""
        with self._lock:
            c = self._running(id)
            c.config = attrs.evolve(
                c.config, linux=attrs.evolve(c.config.linux, resources=resources))
            self.calls.append(("update_container_resources", id))

    def reopen_container_log(self, id: str) -> None:
        """Nothing to reopen; a container that is not running is refused."""
        with self._lock:
            self._running(id)
            self.calls.append(("reopen_container_log", id))

    def exec_sync(self, id: str, cmd: Sequence[str], timeout: float | None = None,
                  ) -> ExecResult:
        """``exec_handler``'s result for a running container."""
        with self._lock:
            self._running(id)
            self.calls.append(("exec_sync", id))
        return self.exec_handler(id, list(cmd), timeout)

    def container_stats(self, id: str) -> ContainerStats:
        """Zero usage (one process while running)."""
        with self._lock:
            c = self._container(id)
        running = c.state == ContainerState.CONTAINER_RUNNING
        return ContainerStats(id=id, timestamp=_now(), cpu_usage_core_nano_seconds=0,
                              memory_usage_bytes=0, memory_working_set_bytes=0,
                              memory_rss_bytes=0, process_count=int(running))
