"""The reference CRI server: ``runtime.v1`` RuntimeService and ImageService over podkit.

``CRIService`` answers every RPC as a plain method named like the RPC (request in, response
out, podkit errors raised), on top of a :class:`~podkit.sandbox.SandboxManager` and an
:class:`~podkit.image.ImageStore`; :func:`serve` puts it on a gRPC Unix socket, mapping errors
to the status codes kubelet expects. grpc is imported only by :func:`serve` (the ``grpc``
extra), so the service and the :class:`StreamingServer` protocol import without it.

What the server adds to the manager: the image service, container events, and the CRI shapes
of statuses and stats. Container images (and the pause image) are resolved by the manager
(``SandboxManager(images=store)``): CreateContainer hands it the reference kubelet sent.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import queue
import socket
import stat
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

import attrs

import podkit
from podkit import cni
from podkit import image as _image
from podkit.cdi import UnresolvableDevicesError
from podkit.cri import api_pb2 as pb
from podkit.cri._server_status import (
    ContainerImage,
    container_stats_to_cri,
    container_status_to_cri,
    container_to_cri,
    filesystem_usage,
    image_to_cri,
    sandbox_stats_to_cri,
    sandbox_status_to_cri,
    sandbox_to_cri,
    user_from_spec,
)
from podkit.cri.convert import (
    ConversionError,
    container_config_from_cri,
    container_filter_from_cri,
    linux_resources_from_cri,
    pod_sandbox_filter_from_cri,
    sandbox_config_from_cri,
)
from podkit.errors import (
    AlreadyExistsError,
    ConflictError,
    InvalidArgumentError,
    NotFoundError,
    PodkitError,
    quote,
)
from podkit.runtime.errors import RuntimeTimeoutError
from podkit.sandbox import (
    Container,
    ContainerFilter,
    ContainerState,
    Sandbox,
    SandboxFilter,
    SandboxManager,
    SandboxState,
    pause_config,
)

__all__ = [
    "EVENTS_BACKLOG",
    "RUNTIME_API_VERSION",
    "RUNTIME_NAME",
    "CRIService",
    "ContainerImage",
    "EventsOverflowError",
    "Server",
    "StreamingServer",
    "UnimplementedError",
    "claim_socket",
    "manager_streaming",
    "pause_config",
    "serve",
    "status_code_name",
    "status_detail",
]

_log = logging.getLogger("podkit.cri")

RUNTIME_NAME = "podkit"
"""``VersionResponse.runtime_name``."""
RUNTIME_API_VERSION = "v1"
"""``VersionResponse.runtime_api_version`` (the CRI package version)."""
KUBE_API_VERSION = "0.1.0"
"""``VersionResponse.version``: the kubelet-facing API version every CRI runtime reports."""

_RUNTIME_METHODS = (
    "Version", "RunPodSandbox", "StopPodSandbox", "RemovePodSandbox", "PodSandboxStatus",
    "ListPodSandbox", "StreamPodSandboxes", "CreateContainer", "StartContainer",
    "StopContainer", "RemoveContainer", "ListContainers", "StreamContainers", "ContainerStatus",
    "UpdateContainerResources", "ReopenContainerLog", "ExecSync", "Exec", "Attach",
    "PortForward", "ContainerStats", "ListContainerStats", "StreamContainerStats",
    "PodSandboxStats", "ListPodSandboxStats", "StreamPodSandboxStats", "UpdateRuntimeConfig",
    "Status", "CheckpointContainer", "GetContainerEvents", "ListMetricDescriptors",
    "ListPodSandboxMetrics", "StreamPodSandboxMetrics", "RuntimeConfig",
    "UpdatePodSandboxResources",
)
_IMAGE_METHODS = ("ListImages", "StreamImages", "ImageStatus", "PullImage", "RemoveImage",
                  "ImageFsInfo")
_STREAMING_METHODS = frozenset({"GetContainerEvents", "StreamPodSandboxes", "StreamContainers",
                                "StreamContainerStats", "StreamPodSandboxStats", "StreamImages"})
STREAM_BATCH = 128
"""Items per message of the ``Stream*`` list RPCs."""


class UnimplementedError(PodkitError):
    """An RPC (or a part of one) this server does not implement (gRPC ``UNIMPLEMENTED``)."""


class StreamingServer(Protocol):
    """Where Exec, Attach and PortForward sessions happen: each returns the session's URL."""

    def get_exec(self, req: pb.ExecRequest) -> str:
        """A URL serving ``req`` (a command in a container) with the streaming protocols."""
        ...

    def get_attach(self, req: pb.AttachRequest) -> str:
        """A URL attaching to ``req.container_id``'s stdio."""
        ...

    def get_port_forward(self, req: pb.PortForwardRequest) -> str:
        """A URL forwarding ports into ``req.pod_sandbox_id``'s network namespace."""
        ...


STATUS_DETAIL_CHARS = 1024
"""The most characters of an error message a gRPC status carries."""
STATUS_DETAIL_BYTES = 4096
"""The most bytes of a status message on the wire (percent-encoded ``grpc-message``)."""


def _wire_size(char: str) -> int:
    """Bytes ``char`` takes in a percent-encoded ``grpc-message`` header."""
    return 1 if " " <= char <= "~" and char != "%" else 3 * len(char.encode("utf-8"))


def status_detail(message: str) -> str:
    """``message`` cut to fit a gRPC status (:data:`STATUS_DETAIL_CHARS` characters and
    :data:`STATUS_DETAIL_BYTES` wire bytes), saying how long it was; a last line of defence."""
    message = message.encode("utf-8", "backslashreplace").decode("utf-8")
    if len(message) <= STATUS_DETAIL_CHARS and \
            sum(map(_wire_size, message)) <= STATUS_DETAIL_BYTES:
        return message
    suffix = f"... ({len(message)} characters, cut)"
    budget = STATUS_DETAIL_BYTES - len(suffix)
    kept = 0
    for char in message[:STATUS_DETAIL_CHARS - len(suffix)]:
        budget -= _wire_size(char)
        if budget < 0:
            break
        kept += 1
    return message[:kept] + suffix


def status_code_name(exc: BaseException) -> str:
    """The gRPC status code name (``NOT_FOUND``, ...) kubelet expects for a podkit error."""
    if isinstance(exc, UnimplementedError):
        return "UNIMPLEMENTED"
    if isinstance(exc, NotFoundError):
        return "NOT_FOUND"
    if isinstance(exc, AlreadyExistsError):
        return "ALREADY_EXISTS"
    if isinstance(exc, InvalidArgumentError):
        return "INVALID_ARGUMENT"
    if isinstance(exc, ConflictError):
        return "FAILED_PRECONDITION"
    if isinstance(exc, RuntimeTimeoutError):
        return "DEADLINE_EXCEEDED"
    if isinstance(exc, EventsOverflowError):
        return "RESOURCE_EXHAUSTED"
    return "UNKNOWN"


def manager_streaming(manager: SandboxManager, address: tuple[str, int] = ("127.0.0.1", 0),
                      ) -> Any:
    """A started :class:`podkit.cri.streaming.StreamingServer` for ``manager``'s containers.

    Exec runs through the manager's runtime, attach through its supervisor (conmon), and
    port-forward connects inside the pod's network namespace. Stop it with ``.stop()``.
    """
    from podkit.cri.streaming import ContainerTarget, RuncStreamingRuntime
    from podkit.cri.streaming import StreamingServer as _StreamingServer

    def container(id: str) -> ContainerTarget:
        manager.container_status(id)
        return ContainerTarget(id, manager.runtime, manager.supervisor)

    def netns_path(id: str) -> str:
        return manager.sandbox_status(id).netns_path

    runtime = RuncStreamingRuntime(container, resolve_sandbox_netns=netns_path)
    return _StreamingServer(runtime, address).start()


def _now() -> int:
    return time.time_ns()


class EventsOverflowError(PodkitError):
    """An events stream fell more than ``EVENTS_BACKLOG`` events behind and was ended
    (``RESOURCE_EXHAUSTED``; the client subscribes again)."""


EVENTS_BACKLOG = 1000
"""Events a stream may have waiting before it is ended."""


class _Events:
    """Container events: one bounded queue per subscribed stream."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._queues: list[queue.Queue[pb.ContainerEventResponse | None]] = []
        self._overflowed: set[int] = set()

    def subscribe(self) -> queue.Queue[pb.ContainerEventResponse | None]:
        q: queue.Queue[pb.ContainerEventResponse | None] = queue.Queue(EVENTS_BACKLOG)
        with self._lock:
            self._queues.append(q)
        return q

    def overflowed(self, q: queue.Queue[pb.ContainerEventResponse | None]) -> bool:
        with self._lock:
            return id(q) in self._overflowed

    def unsubscribe(self, q: queue.Queue[pb.ContainerEventResponse | None]) -> None:
        with self._lock:
            if q in self._queues:
                self._queues.remove(q)
            self._overflowed.discard(id(q))

    def publish(self, event: pb.ContainerEventResponse) -> None:
        with self._lock:
            queues = list(self._queues)
        for q in queues:
            try:
                q.put_nowait(event)
            except queue.Full:
                with self._lock:
                    if q in self._queues:
                        self._queues.remove(q)
                    self._overflowed.add(id(q))

    def close(self) -> None:
        with self._lock:
            queues, self._queues = self._queues, []
        for q in queues:
            with contextlib.suppress(queue.Full):
                q.put_nowait(None)
            with self._lock:
                self._overflowed.add(id(q))  # a full queue ends at its next poll

    @property
    def subscribers(self) -> int:
        with self._lock:
            return len(self._queues)


def _legacy_record(data: Any) -> ContainerImage:
    """A per-container image record of an earlier server version (``<state>/containers``),
    from its JSON; unknown keys are ignored."""
    if not isinstance(data, dict):
        raise TypeError(f"not a JSON object: {type(data).__name__}")
    known = attrs.fields_dict(ContainerImage)
    return ContainerImage(**{k: v for k, v in data.items() if k in known})


class CRIService:
    """Every CRI RPC as a method named like it: ``service.RunPodSandbox(request) -> response``.

    ``manager`` runs pods and containers and resolves their images in ``store`` (it should be
    made with ``images=store``; a manager without a store is given this one); ``rootfs_mode``,
    when set, is the manager's rootfs mode for containers; ``streaming`` serves
    Exec/Attach/PortForward (``None``: those answer Unimplemented); ``state_dir`` is where an
    earlier server version kept per-container records (default ``<manager state>/cri``:
    :meth:`recover` hands them to the manager); ``pause_image`` is reported as pinned;
    ``network_loader`` loads the pod networks when the manager has none yet (tried by Status
    and RunPodSandbox, so a CNI config written after the start is picked up, as containerd
    does). Thread-safe; raises podkit errors.
    """

    def __init__(
        self,
        manager: SandboxManager,
        store: _image.ImageStore,
        *,
        streaming: StreamingServer | None = None,
        state_dir: str | os.PathLike[str] | None = None,
        pause_image: str = "",
        runtime_handler: str = "runc",
        rootfs_mode: str | None = None,
        network_loader: Callable[[], cni.Networks] | None = None,
    ) -> None:
        self._gave_store = manager.images is None
        if manager.images is None:
            manager.images = store
        elif Path(manager.images.root).absolute() != Path(store.root).absolute():
            raise InvalidArgumentError(
                f"image store {store.root}: the manager resolves images in another store "
                f"({manager.images.root})")
        if rootfs_mode is not None:
            if rootfs_mode not in ("auto", "overlay", "copy"):
                raise InvalidArgumentError(
                    f"rootfs_mode {rootfs_mode!r}: want auto, overlay or copy")
            manager.rootfs_mode = rootfs_mode
        self.manager = manager
        self.network_loader = network_loader
        self.store = store
        self.streaming = streaming
        self.state_dir = Path(state_dir) if state_dir else manager.state_dir / "cri"
        self.pause_image = pause_image
        self.runtime_handler = runtime_handler
        self.events = _Events()
        self.pod_cidr = ""
        self._lock = threading.Lock()
        self._ordered = threading.Lock()  # events leave in the order their bookkeeping saw
        self._stopped: set[str] = set()
        self._announced: set[str] = set()
        self._users: dict[str, pb.ContainerUser | None] = {}
        self._cpu_samples: dict[str, tuple[int, int]] = {}
        self._halt = threading.Event()
        self._monitor: threading.Thread | None = None

    # -- container images (in the manager's records) -------------------------------------------

    def recover(self) -> list[str]:
        """Hand the per-container records of an earlier server version to the manager.

        Call after ``manager.recover()``. A record of a container the manager has becomes part
        of its record (the rootfs is then removed with the container); the rootfs of one it
        does not have (a create cut short) is removed. Returns the IDs (or rootfs keys) whose
        leftovers were removed.
        """
        if self._gave_store:  # its own recover() ran without the store: container rootfs of
            self.manager.recover()  # creates and removals cut short are undone now
            self._gave_store = False
        removed = []
        legacy = self.state_dir / "containers"
        paths = sorted(legacy.glob("*.json")) if legacy.is_dir() else []
        containers = self.manager.list_containers() if paths else []
        known = {c.id for c in containers}
        by_rootfs = {c.config.image: c.id for c in containers}
        for path in paths:
            try:
                img = _legacy_record(json.loads(path.read_text()))
            except (OSError, ValueError, TypeError):
                path.unlink(missing_ok=True)
                continue
            cid = img.container_id or by_rootfs.get(img.rootfs, "")
            if cid in known:
                if img.rootfs_id:
                    meta = {"user_specified_image": img.image} if img.image else {}
                    self.manager.adopt_rootfs(
                        cid, img.rootfs_id, image_ref=img.image_ref, image_id=img.image_id,
                        image_digest=img.image_ref.partition("@")[2], meta=meta)
            else:
                if img.rootfs_id:
                    _image.remove_rootfs(self.store, img.rootfs_id)
                removed.append(img.container_id or path.stem)
            path.unlink(missing_ok=True)
        with contextlib.suppress(OSError):
            legacy.rmdir()
        self.poll_exits(publish=False)
        return removed

    def _image_info(self, c: Container) -> ContainerImage:
        """What the CRI reports about ``c``'s image, from the manager's record."""
        ref = c.config.image
        if not c.rootfs_key and not c.image_id:  # a rootfs directory
            return ContainerImage(container_id=c.id, image=ref, image_ref=ref, image_id=ref,
                                  rootfs=ref)
        name = c.image_ref or ref
        return ContainerImage(
            container_id=c.id, image=c.meta.get("user_specified_image") or name,
            image_ref=f"{_repo(name)}@{c.image_digest}" if c.image_digest else name,
            image_id=c.image_id, rootfs_id=c.rootfs_key,
            rootfs=str(self.store.root / "containers" / c.rootfs_key / "rootfs")
            if c.rootfs_key else "")

    def _image_of(self, id: str) -> ContainerImage:
        try:
            return self._image_info(self.manager.container_status(id))
        except NotFoundError:
            return ContainerImage(container_id=id)

    def _forget(self, id: str) -> None:
        """Drop what the server caches about a removed container."""
        with self._lock:
            self._users.pop(id, None)
            self._cpu_samples.pop(id, None)

    # -- events -------------------------------------------------------------------------------

    def _publish(self, id: str, kind: int, sandbox_id: str,
                 status: pb.ContainerStatus | None = None) -> None:
        with self._ordered:  # built and delivered in the order the bookkeeping saw them
            with self._lock:  # one STOPPED per container or pod, whoever notices first
                if kind == pb.CONTAINER_STARTED_EVENT:
                    self._announced.add(id)
                elif kind == pb.CONTAINER_STOPPED_EVENT:
                    if id in self._stopped:
                        return
                    self._stopped.add(id)
                elif kind == pb.CONTAINER_DELETED_EVENT:
                    self._stopped.discard(id)
                    self._announced.discard(id)
            if not self.events.subscribers:
                return
            ev = pb.ContainerEventResponse(container_id=id, container_event_type=kind,  # type: ignore[arg-type]
                                           created_at=_now())
            with contextlib.suppress(PodkitError):
                ev.pod_sandbox_status.CopyFrom(
                    sandbox_status_to_cri(self.manager.sandbox_status(sandbox_id)))
            if status is not None:
                ev.containers_statuses.append(status)
            self.events.publish(ev)

    def _publish_container(self, id: str, kind: int) -> None:
        if not self.events.subscribers:
            self._publish(id, kind, "")  # only the once-per-container bookkeeping
            return
        try:
            c = self.manager.container_status(id)
        except PodkitError:
            return
        self._publish(id, kind, c.sandbox_id, self._status(c))

    def poll_exits(self, *, publish: bool = True) -> None:
        """Send CONTAINER_STOPPED for containers and pods that stopped on their own.

        Only for those whose STARTED event went out (so STOPPED never comes first); with
        ``publish=False`` it just records what is running and what already stopped.
        """
        for c in self.manager.list_containers():
            if not publish and c.state == ContainerState.CONTAINER_RUNNING:
                with self._lock:
                    self._announced.add(c.id)
            if c.state == ContainerState.CONTAINER_EXITED:
                with self._lock:
                    announced = c.id in self._announced
                if not publish:
                    with self._lock:
                        self._stopped.add(c.id)
                elif announced:  # else its STARTED is on the way: next round
                    self._publish(c.id, pb.CONTAINER_STOPPED_EVENT, c.sandbox_id,
                                  self._status(c) if self.events.subscribers else None)
        for sb in self.manager.list_sandboxes():
            fresh = self._fresh(sb)
            if not publish and fresh is not None and fresh.state == SandboxState.SANDBOX_READY:
                with self._lock:
                    self._announced.add(sb.id)
            if fresh is not None and fresh.state == SandboxState.SANDBOX_NOTREADY:
                with self._lock:
                    announced = sb.id in self._announced
                if not publish:
                    with self._lock:
                        self._stopped.add(sb.id)
                elif announced:
                    self._publish(sb.id, pb.CONTAINER_STOPPED_EVENT, sb.id)

    def start_monitor(self, interval: float = 1.0) -> None:
        """Poll for exits every ``interval`` seconds in a thread (containerd's exit monitor)."""
        if self._monitor is not None:
            return
        self._halt.clear()

        def run() -> None:
            while not self._halt.wait(interval):
                with contextlib.suppress(Exception):
                    self.poll_exits()

        self._monitor = threading.Thread(target=run, name="podkit-cri-exits", daemon=True)
        self._monitor.start()

    def stop_monitor(self) -> None:
        """Stop the exit monitor thread."""
        self._halt.set()
        if self._monitor is not None:
            self._monitor.join()
            self._monitor = None

    def GetContainerEvents(self, request: pb.GetEventsRequest,
                           active: Callable[[], bool] = lambda: True,
                           ) -> Iterator[pb.ContainerEventResponse]:
        """Every container and sandbox event from now on, until the stream ends."""
        q = self.events.subscribe()
        try:
            while active():
                try:
                    ev = q.get(timeout=1.0)
                except queue.Empty:
                    if self.events.overflowed(q):
                        raise EventsOverflowError(
                            f"events stream more than {EVENTS_BACKLOG} events behind: "
                            "ended, subscribe again") from None
                    continue
                if ev is None:
                    return
                yield ev
        finally:
            self.events.unsubscribe(q)

    # -- runtime info ---------------------------------------------------------------------------

    def Version(self, request: pb.VersionRequest) -> pb.VersionResponse:
        """Runtime name and version; the CRI API version."""
        return pb.VersionResponse(version=KUBE_API_VERSION, runtime_name=RUNTIME_NAME,
                                  runtime_version=podkit.__version__,
                                  runtime_api_version=RUNTIME_API_VERSION)

    def Status(self, request: pb.StatusRequest) -> pb.StatusResponse:
        """RuntimeReady (the runtime answers) and NetworkReady (CNI STATUS of every network)."""
        out = pb.StatusResponse()
        rt = out.status.conditions.add(type="RuntimeReady", status=True)
        try:
            self.manager.runtime.list()
        except Exception as exc:
            rt.status, rt.reason, rt.message = False, "RuntimeNotReady", str(exc)
        net = out.status.conditions.add(type="NetworkReady", status=True)
        nets = self.manager.networks
        problem = self._load_networks() if nets is None else ""
        nets = self.manager.networks
        if nets is None:
            net.status, net.reason = False, "NetworkPluginNotReady"
            net.message = problem or "no CNI network configured (host-network pods only)"
        else:
            try:
                nets.status()
            except Exception as exc:
                net.status, net.reason = False, "NetworkPluginNotReady"
                net.message = f"cni plugin not initialized: {exc}"
        for name in ("", self.runtime_handler):
            h = out.runtime_handlers.add(name=name)
            h.features.recursive_read_only_mounts = True
            h.features.user_namespaces = False
        out.features.supplemental_groups_policy = True
        if request.verbose:
            out.info["config"] = json.dumps({
                "runtimeHandler": self.runtime_handler, "podCIDR": self.pod_cidr,
                "pauseImage": self.pause_image, "root": str(self.manager.root_dir),
                "state": str(self.manager.state_dir)})
        return out

    def _load_networks(self) -> str:
        """Load the pod networks if they came late (a CNI config dropped in after start)."""
        if self.network_loader is None:
            return ""
        with self._lock:
            if self.manager.networks is not None:
                return ""
            try:
                self.manager.networks = self.network_loader()
            except PodkitError as exc:
                return f"cni config not loaded: {exc}"
        return ""

    def RuntimeConfig(self, request: pb.RuntimeConfigRequest) -> pb.RuntimeConfigResponse:
        """The cgroup driver: cgroupfs."""
        out = pb.RuntimeConfigResponse()
        out.linux.cgroup_driver = pb.CGROUPFS
        return out

    def UpdateRuntimeConfig(self, request: pb.UpdateRuntimeConfigRequest,
                            ) -> pb.UpdateRuntimeConfigResponse:
        """Remember the pod CIDR kubelet sends (the CNI config is the operator's)."""
        self.pod_cidr = request.runtime_config.network_config.pod_cidr
        return pb.UpdateRuntimeConfigResponse()

    # -- pod sandboxes --------------------------------------------------------------------------

    def RunPodSandbox(self, request: pb.RunPodSandboxRequest) -> pb.RunPodSandboxResponse:
        """Network namespace, CNI, sandbox files and the pause; undone on any failure."""
        if request.runtime_handler not in ("", self.runtime_handler):
            raise InvalidArgumentError(
                f"runtime_handler {quote(request.runtime_handler)}: not configured (this server "
                f"has {self.runtime_handler!r} and the default '')")
        config = sandbox_config_from_cri(request.config, path="config")
        if self.manager.networks is None:
            self._load_networks()
        sb = _with_field_prefix("config", lambda: self.manager.run_sandbox(config))
        self._publish(sb.id, pb.CONTAINER_CREATED_EVENT, sb.id)
        self._publish(sb.id, pb.CONTAINER_STARTED_EVENT, sb.id)
        return pb.RunPodSandboxResponse(pod_sandbox_id=sb.id)

    def StopPodSandbox(self, request: pb.StopPodSandboxRequest) -> pb.StopPodSandboxResponse:
        """Kill the pod's containers and pause, tear the network down; unknown IDs succeed."""
        id = _required(request.pod_sandbox_id, "pod_sandbox_id")
        running = [c.id for c in self.manager.list_containers(ContainerFilter(
            pod_sandbox_id=id, state=ContainerState.CONTAINER_RUNNING)) if c.sandbox_id == id]
        self.manager.stop_sandbox(id)
        for cid in running:
            self._publish_container(cid, pb.CONTAINER_STOPPED_EVENT)
        self._publish(id, pb.CONTAINER_STOPPED_EVENT, id)
        return pb.StopPodSandboxResponse()

    def RemovePodSandbox(self, request: pb.RemovePodSandboxRequest,
                         ) -> pb.RemovePodSandboxResponse:
        """Stop, remove every container (and its rootfs) and the pod; unknown IDs succeed."""
        id = _required(request.pod_sandbox_id, "pod_sandbox_id")
        sb = self._fresh_sandbox(id)
        if sb is not None and sb.state == SandboxState.SANDBOX_READY:
            self.StopPodSandbox(pb.StopPodSandboxRequest(pod_sandbox_id=id))
        containers = [c for c in self.manager.list_containers(ContainerFilter(pod_sandbox_id=id))
                      if c.sandbox_id == id]
        self.manager.remove_sandbox(id)
        for c in containers:
            self._forget(c.id)
            self._publish(c.id, pb.CONTAINER_DELETED_EVENT, id)
        if sb is not None:
            self._publish(id, pb.CONTAINER_DELETED_EVENT, id)
        with self._lock:
            self._cpu_samples.pop(id, None)
        return pb.RemovePodSandboxResponse()

    def UpdatePodSandboxResources(self, request: pb.UpdatePodSandboxResourcesRequest,
                                  ) -> pb.UpdatePodSandboxResourcesResponse:
        """Accept the pod's new overhead and resources (containerd: only NRI sees them; the
        containers' own limits come through UpdateContainerResources)."""
        id = _required(request.pod_sandbox_id, "pod_sandbox_id")
        if self._fresh_sandbox(id) is None:
            raise NotFoundError(f"pod_sandbox_id {quote(id)}: no such pod sandbox")
        for field in ("overhead", "resources"):
            if request.HasField(field):
                linux_resources_from_cri(getattr(request, field), path=field)
        return pb.UpdatePodSandboxResourcesResponse()

    def PodSandboxStatus(self, request: pb.PodSandboxStatusRequest,
                         ) -> pb.PodSandboxStatusResponse:
        """The pod's state, IPs and namespaces, and its containers' statuses."""
        id = _required(request.pod_sandbox_id, "pod_sandbox_id")
        sb = self.manager.sandbox_status(id)
        out = pb.PodSandboxStatusResponse(timestamp=_now())
        out.status.CopyFrom(sandbox_status_to_cri(sb))
        for c in self.manager.list_containers(ContainerFilter(pod_sandbox_id=id)):
            if c.sandbox_id == id:
                out.containers_statuses.append(self._status(c))
        if request.verbose:
            out.info["info"] = json.dumps({
                "pid": sb.pid, "netNamespacePath": sb.netns_path, "cgroupsPath": sb.cgroups_path,
                "image": self.manager.pause.image if self.manager.pause else "",
                "runtimeHandler": self.runtime_handler})
        return out

    def ListPodSandbox(self, request: pb.ListPodSandboxRequest) -> pb.ListPodSandboxResponse:
        """Pods matching the filter (id prefix, state, labels)."""
        f = (pod_sandbox_filter_from_cri(request.filter) if request.HasField("filter")
             else SandboxFilter())
        out = pb.ListPodSandboxResponse()
        for sb in self.manager.list_sandboxes(attrs.evolve(f, state=None)):
            fresh = self._fresh(sb)
            if fresh is not None and (f.state is None or fresh.state == f.state):
                out.items.append(sandbox_to_cri(fresh))
        return out

    def _fresh_sandbox(self, id: str) -> Sandbox | None:
        """The pod's record with its state checked: ``/proc/<pause pid>`` while it lives,
        the manager's runtime check (a runc exec) only when the pause seems gone."""
        found = [sb for sb in self.manager.list_sandboxes(SandboxFilter(id=id)) if sb.id == id]
        return self._fresh(found[0]) if found else None

    def _fresh(self, sb: Sandbox) -> Sandbox | None:
        if sb.state != SandboxState.SANDBOX_READY or _alive(sb.pid):
            return sb
        with contextlib.suppress(NotFoundError):
            return self.manager.sandbox_status(sb.id)
        return None

    # -- containers -----------------------------------------------------------------------------

    def CreateContainer(self, request: pb.CreateContainerRequest,
                        ) -> pb.CreateContainerResponse:
        """Build the container (CREATED) from the image the request names (the manager makes
        its rootfs and applies the image's defaults); nothing left on error."""
        sandbox_id = _required(request.pod_sandbox_id, "pod_sandbox_id")
        config = container_config_from_cri(request.config, path="config")
        if self._fresh_sandbox(sandbox_id) is None:  # NotFound before any work
            raise NotFoundError(f"pod_sandbox_id {quote(sandbox_id)}: no such pod sandbox")
        ref = config.image
        if not ref:
            raise InvalidArgumentError("config.image.image: required (an image reference)")
        if os.path.isabs(ref) and not os.path.isdir(ref):
            raise NotFoundError(f"config.image.image {quote(ref)}: no such rootfs directory")
        wanted = request.config.image.user_specified_image
        meta = {"user_specified_image": wanted} if wanted else {}

        def create() -> str:
            try:
                return self.manager.create_container(sandbox_id, config, meta=meta)
            except (NotFoundError, InvalidArgumentError) as exc:
                if not str(exc).startswith(f"image {ref!r}"):
                    raise
                try:  # the manager's "image 'x': ..." is the request's config.image.image
                    new = type(exc)(f"config.image.{exc}")
                except TypeError:
                    new = InvalidArgumentError(f"config.image.{exc}")
                raise new from exc

        try:
            cid: str = _with_field_prefix("config", create)
        except UnresolvableDevicesError as exc:
            raise InvalidArgumentError(
                f"config.CDI_devices / cdi.k8s.io annotations: {exc}") from exc
        self._publish_container(cid, pb.CONTAINER_CREATED_EVENT)
        return pb.CreateContainerResponse(container_id=cid)

    def StartContainer(self, request: pb.StartContainerRequest) -> pb.StartContainerResponse:
        """Start a CREATED container under the supervisor."""
        id = _required(request.container_id, "container_id")
        self.manager.start_container(id)
        self._publish_container(id, pb.CONTAINER_STARTED_EVENT)
        return pb.StartContainerResponse()

    def StopContainer(self, request: pb.StopContainerRequest) -> pb.StopContainerResponse:
        """Stop signal, ``timeout`` seconds, SIGKILL; unknown IDs succeed."""
        id = _required(request.container_id, "container_id")
        if request.timeout < 0:
            raise InvalidArgumentError(f"timeout {request.timeout}: must not be negative")
        try:
            before = self.manager.container_status(id).state
        except NotFoundError:
            return pb.StopContainerResponse()
        self.manager.stop_container(id, float(request.timeout))
        if before == ContainerState.CONTAINER_RUNNING:
            self._publish_container(id, pb.CONTAINER_STOPPED_EVENT)
        return pb.StopContainerResponse()

    def RemoveContainer(self, request: pb.RemoveContainerRequest) -> pb.RemoveContainerResponse:
        """Force-stop and remove the container and its rootfs; unknown IDs succeed."""
        id = _required(request.container_id, "container_id")
        try:
            sandbox_id = self.manager.container_status(id).sandbox_id
        except NotFoundError:
            return pb.RemoveContainerResponse()
        self.manager.remove_container(id)
        self._forget(id)
        self._publish(id, pb.CONTAINER_DELETED_EVENT, sandbox_id)
        return pb.RemoveContainerResponse()

    def _user(self, id: str) -> pb.ContainerUser | None:
        with self._lock:
            if id in self._users:
                return self._users[id]
        user = user_from_spec(self.manager.root_dir / "containers" / id / "bundle" /
                              "config.json")
        with self._lock:
            self._users[id] = user
        return user

    def _status(self, c: Container) -> pb.ContainerStatus:
        return container_status_to_cri(c, self._image_info(c), self._user(c.id))

    def ListContainers(self, request: pb.ListContainersRequest) -> pb.ListContainersResponse:
        """Containers matching the filter (id prefix, state, pod, labels)."""
        f = (container_filter_from_cri(request.filter) if request.HasField("filter")
             else ContainerFilter())
        out = pb.ListContainersResponse()
        out.containers.extend(container_to_cri(c, self._image_info(c))
                              for c in self.manager.list_containers(f))
        return out

    def ContainerStatus(self, request: pb.ContainerStatusRequest) -> pb.ContainerStatusResponse:
        """State, exit code and reason, times, image, mounts, log path, user."""
        id = _required(request.container_id, "container_id")
        c = self.manager.container_status(id)
        out = pb.ContainerStatusResponse()
        out.status.CopyFrom(self._status(c))
        if request.verbose:
            img = self._image_info(c)
            out.info["info"] = json.dumps({
                "sandboxID": c.sandbox_id, "pid": c.pid, "cgroupsPath": c.cgroups_path,
                "rootfs": img.rootfs, "imageRef": img.image_ref})
        return out

    def UpdateContainerResources(self, request: pb.UpdateContainerResourcesRequest,
                                 ) -> pb.UpdateContainerResourcesResponse:
        """New cgroup limits for a container (Linux part; nothing to do without one)."""
        id = _required(request.container_id, "container_id")
        self.manager.container_status(id)
        if request.HasField("linux"):
            res = linux_resources_from_cri(request.linux, path="linux")
            self.manager.update_container_resources(id, res)
        return pb.UpdateContainerResourcesResponse()

    def ReopenContainerLog(self, request: pb.ReopenContainerLogRequest,
                           ) -> pb.ReopenContainerLogResponse:
        """Continue a running container's log in a fresh file (after kubelet rotated it)."""
        self.manager.reopen_container_log(_required(request.container_id, "container_id"))
        return pb.ReopenContainerLogResponse()

    def ExecSync(self, request: pb.ExecSyncRequest) -> pb.ExecSyncResponse:
        """Run a command in a running container; its exit code and output."""
        id = _required(request.container_id, "container_id")
        _command(request.cmd)
        if request.timeout < 0:
            raise InvalidArgumentError(f"timeout {request.timeout}: must not be negative")
        res = self.manager.exec_sync(id, list(request.cmd), request.timeout or None)
        return pb.ExecSyncResponse(stdout=res.stdout, stderr=res.stderr, exit_code=res.exit_code)

    def _streaming(self) -> StreamingServer:
        if self.streaming is None:
            raise UnimplementedError("no streaming server is configured (exec/attach/port-forward)")
        return self.streaming

    def _running(self, id: str) -> None:
        c = self.manager.container_status(id)
        if c.state != ContainerState.CONTAINER_RUNNING:
            raise ConflictError(f"container {quote(id)} is in {c.state.name} state, not running")

    def Exec(self, request: pb.ExecRequest) -> pb.ExecResponse:
        """The URL of a streaming exec session in a running container."""
        streaming = self._streaming()
        self._running(_required(request.container_id, "container_id"))
        _command(request.cmd)
        if not (request.stdin or request.stdout or request.stderr):
            raise InvalidArgumentError("one of stdin, stdout or stderr must be set")
        return pb.ExecResponse(url=streaming.get_exec(request))

    def Attach(self, request: pb.AttachRequest) -> pb.AttachResponse:
        """The URL of a streaming attach session to a running container."""
        streaming = self._streaming()
        self._running(_required(request.container_id, "container_id"))
        return pb.AttachResponse(url=streaming.get_attach(request))

    def PortForward(self, request: pb.PortForwardRequest) -> pb.PortForwardResponse:
        """The URL of a port-forward session into a ready pod."""
        streaming = self._streaming()
        sb = self.manager.sandbox_status(_required(request.pod_sandbox_id, "pod_sandbox_id"))
        if sb.state != SandboxState.SANDBOX_READY:
            raise ConflictError(f"pod sandbox {sb.id} is not ready")
        return pb.PortForwardResponse(url=streaming.get_port_forward(request))

    # -- stats ----------------------------------------------------------------------------------

    def _container_stats(self, c: Container) -> pb.ContainerStats:
        stats = self.manager.container_stats(c.id)
        img = self._image_info(c)
        layer = None
        if img.rootfs_id:
            upper = self.store.root / "containers" / img.rootfs_id / "upper"
            layer = filesystem_usage(upper if upper.is_dir() else img.rootfs)
        out = container_stats_to_cri(stats, c, layer)
        self._cpu_rate(c.id, out.cpu)
        return out

    def _cpu_rate(self, key: str, cpu: pb.CpuUsage) -> None:
        """``usage_nano_cores`` from this sample and the previous one of ``key`` (kubelet's
        ``kubectl top`` numbers); unset on the first sample."""
        now, used = cpu.timestamp, cpu.usage_core_nano_seconds.value
        with self._lock:
            prev = self._cpu_samples.get(key)
            self._cpu_samples[key] = (now, used)
        if prev is not None and now > prev[0] and used >= prev[1]:
            cpu.usage_nano_cores.value = (used - prev[1]) * 10**9 // (now - prev[0])

    def ContainerStats(self, request: pb.ContainerStatsRequest) -> pb.ContainerStatsResponse:
        """CPU, memory and writable layer usage of one container."""
        c = self.manager.container_status(_required(request.container_id, "container_id"))
        out = pb.ContainerStatsResponse()
        out.stats.CopyFrom(self._container_stats(c))
        return out

    def ListContainerStats(self, request: pb.ListContainerStatsRequest,
                           ) -> pb.ListContainerStatsResponse:
        """Stats of the running containers matching the filter."""
        f = request.filter
        cf = ContainerFilter(id=f.id, pod_sandbox_id=f.pod_sandbox_id,
                             state=ContainerState.CONTAINER_RUNNING,
                             label_selector=dict(f.label_selector))
        out = pb.ListContainerStatsResponse()
        for c in self.manager.list_containers(cf):
            with contextlib.suppress(NotFoundError):
                out.stats.append(self._container_stats(c))
        return out

    def _sandbox_stats(self, id: str) -> pb.PodSandboxStats:
        sb = self._fresh_sandbox(id)
        if sb is None:
            raise NotFoundError(f"pod_sandbox_id {quote(id)}: no such pod sandbox")
        stats = self.manager.sandbox_stats(id)
        running = {c.id: c for c in self.manager.list_containers(ContainerFilter(
            pod_sandbox_id=id, state=ContainerState.CONTAINER_RUNNING)) if c.sandbox_id == id}
        out = sandbox_stats_to_cri(stats, sb, running)
        self._cpu_rate(id, out.linux.cpu)
        for cs in out.linux.containers:
            self._cpu_rate(cs.attributes.id, cs.cpu)
        return out

    def PodSandboxStats(self, request: pb.PodSandboxStatsRequest) -> pb.PodSandboxStatsResponse:
        """The pod's CPU, memory and process usage, with its running containers' stats."""
        out = pb.PodSandboxStatsResponse()
        out.stats.CopyFrom(self._sandbox_stats(
            _required(request.pod_sandbox_id, "pod_sandbox_id")))
        return out

    def ListPodSandboxStats(self, request: pb.ListPodSandboxStatsRequest,
                            ) -> pb.ListPodSandboxStatsResponse:
        """Stats of the ready pods matching the filter (id prefix, labels)."""
        f = request.filter
        sf = SandboxFilter(id=f.id, state=SandboxState.SANDBOX_READY,
                           label_selector=dict(f.label_selector))
        out = pb.ListPodSandboxStatsResponse()
        for sb in self.manager.list_sandboxes(sf):
            with contextlib.suppress(NotFoundError):
                out.stats.append(self._sandbox_stats(sb.id))
        return out

    # -- images ---------------------------------------------------------------------------------

    def _grouped_images(self) -> dict[str, list[_image.Image]]:
        groups: dict[str, list[_image.Image]] = {}
        for img in self.store.list():
            groups.setdefault(img.config.digest, []).append(img)
        return groups

    def _image_message(self, records: list[_image.Image]) -> pb.Image:
        pinned = bool(self.pause_image) and any(
            self.pause_image in (r.name, r.config.digest) or _same_ref(self.pause_image, r.name)
            for r in records)
        return image_to_cri(records, self.store.config(records[0]), pinned=pinned)

    def _find_image(self, ref: str) -> list[_image.Image] | None:
        groups = self._grouped_images()
        if ref in groups:
            return groups[ref]
        try:
            img = self.store.get(ref)
        except _image.ReferenceError as exc:
            raise InvalidArgumentError(f"image.image {quote(ref)}: {exc}") from None
        except NotFoundError:
            return None
        return groups.get(img.config.digest, [img])

    def ListImages(self, request: pb.ListImagesRequest) -> pb.ListImagesResponse:
        """Every image (one entry per image ID, its names as repo tags), or the filter's."""
        out = pb.ListImagesResponse()
        ref = request.filter.image.image if request.HasField("filter") else ""
        if ref:
            found = self._find_image(ref)
            if found:
                out.images.append(self._image_message(found))
            return out
        out.images.extend(self._image_message(g) for g in self._grouped_images().values())
        return out

    # -- Stream* list RPCs (cri-api v0.36): the list RPCs' results in batches ------------------

    def StreamPodSandboxes(self, request: pb.StreamPodSandboxesRequest,
                           active: Callable[[], bool] = lambda: True,
                           ) -> Iterator[pb.StreamPodSandboxesResponse]:
        """``ListPodSandbox`` in batches of :data:`STREAM_BATCH`."""
        items = list(self.ListPodSandbox(pb.ListPodSandboxRequest(filter=request.filter)).items)
        return _batches(items, lambda b: pb.StreamPodSandboxesResponse(pod_sandboxes=b), active)

    def StreamContainers(self, request: pb.StreamContainersRequest,
                         active: Callable[[], bool] = lambda: True,
                         ) -> Iterator[pb.StreamContainersResponse]:
        """``ListContainers`` in batches."""
        items = list(self.ListContainers(
            pb.ListContainersRequest(filter=request.filter)).containers)
        return _batches(items, lambda b: pb.StreamContainersResponse(containers=b), active)

    def StreamContainerStats(self, request: pb.StreamContainerStatsRequest,
                             active: Callable[[], bool] = lambda: True,
                             ) -> Iterator[pb.StreamContainerStatsResponse]:
        """``ListContainerStats`` in batches."""
        items = list(self.ListContainerStats(
            pb.ListContainerStatsRequest(filter=request.filter)).stats)
        return _batches(items, lambda b: pb.StreamContainerStatsResponse(container_stats=b),
                        active)

    def StreamPodSandboxStats(self, request: pb.StreamPodSandboxStatsRequest,
                              active: Callable[[], bool] = lambda: True,
                              ) -> Iterator[pb.StreamPodSandboxStatsResponse]:
        """``ListPodSandboxStats`` in batches."""
        items = list(self.ListPodSandboxStats(
            pb.ListPodSandboxStatsRequest(filter=request.filter)).stats)
        return _batches(items, lambda b: pb.StreamPodSandboxStatsResponse(pod_sandbox_stats=b),
                        active)

    def StreamImages(self, request: pb.StreamImagesRequest,
                     active: Callable[[], bool] = lambda: True,
                     ) -> Iterator[pb.StreamImagesResponse]:
        """``ListImages`` in batches."""
        items = list(self.ListImages(pb.ListImagesRequest(filter=request.filter)).images)
        return _batches(items, lambda b: pb.StreamImagesResponse(images=b), active)

    def ImageStatus(self, request: pb.ImageStatusRequest) -> pb.ImageStatusResponse:
        """The image, or an empty response when it is not present (as kubelet expects)."""
        ref = _required(request.image.image, "image.image")
        out = pb.ImageStatusResponse()
        found = self._find_image(ref)
        if found:
            out.image.CopyFrom(self._image_message(found))
            if request.verbose:
                cfg = self.store.config(found[0])
                out.info["info"] = json.dumps({
                    "imageSpec": {"config": {
                        "Env": list(cfg.env), "Entrypoint": cfg.entrypoint, "Cmd": cfg.cmd,
                        "WorkingDir": cfg.working_dir, "User": cfg.user,
                        "StopSignal": cfg.stop_signal, "Labels": cfg.labels}},
                    "chainID": found[0].chain_ids[-1] if found[0].diff_ids else ""})
        return out

    def PullImage(self, request: pb.PullImageRequest) -> pb.PullImageResponse:
        """Pull from the registry (with the request's credentials); the image ID."""
        ref = _required(request.image.image, "image.image")
        options: dict[str, Any] = {}
        auth = request.auth
        if auth.username:
            options["auth"] = _image.Credentials(auth.username, auth.password)
        elif auth.auth:
            import base64

            try:
                user, _, password = base64.b64decode(auth.auth).decode().partition(":")
            except ValueError:
                raise InvalidArgumentError("auth.auth: not base64 of user:password") from None
            options["auth"] = _image.Credentials(user, password)
        try:
            img = _image.pull(self.store, ref, **options)
        except _image.ReferenceError as exc:
            raise InvalidArgumentError(f"image.image {quote(ref)}: {exc}") from None
        return pb.PullImageResponse(image_ref=img.config.digest)

    def RemoveImage(self, request: pb.RemoveImageRequest) -> pb.RemoveImageResponse:
        """Forget every name of the image (by reference or ID); absent images succeed."""
        ref = _required(request.image.image, "image.image")
        found = self._find_image(ref)
        for img in found or ():
            with contextlib.suppress(NotFoundError):
                self.store.remove(img.name)
        if found:
            # blobs and snapshots no image or rootfs uses (containerd collects them too)
            with contextlib.suppress(PodkitError, OSError):
                self.store.gc()
        return pb.RemoveImageResponse()

    def ImageFsInfo(self, request: pb.ImageFsInfoRequest) -> pb.ImageFsInfoResponse:
        """Bytes and inodes used by the image store (layers, snapshots, rootfs)."""
        out = pb.ImageFsInfoResponse()
        out.image_filesystems.append(filesystem_usage(self.store.root))
        return out


def _alive(pid: int) -> bool:
    """Whether ``pid`` is a live (not zombie) process."""
    if pid <= 0:
        return False
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            state = f.read().rsplit(b")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in (b"Z", b"X")


def _batches(items: Sequence[Any], wrap: Callable[[Sequence[Any]], Any],
             active: Callable[[], bool]) -> Iterator[Any]:
    """``items`` in messages of at most :data:`STREAM_BATCH` (one message when empty)."""
    for start in range(0, max(len(items), 1), STREAM_BATCH):
        if not active():
            return
        yield wrap(items[start:start + STREAM_BATCH])


def _same_ref(a: str, b: str) -> bool:
    try:
        return str(_image.parse_reference(a)) == str(_image.parse_reference(b))
    except _image.ReferenceError:
        return False


def _repo(name: str) -> str:
    base = name.split("@", 1)[0]
    colon = base.rfind(":")
    return base[:colon] if colon > base.rfind("/") else base


def _required(value: str, field: str) -> str:
    if not value:
        raise InvalidArgumentError(f"{field}: required")
    return value


def _command(cmd: Sequence[str]) -> None:
    """An exec's argv: not empty, no NUL byte (a C string would end there, silently)."""
    if not cmd:
        raise InvalidArgumentError("cmd: required (the command to run)")
    for i, arg in enumerate(cmd):
        if "\0" in arg:
            raise InvalidArgumentError(f"cmd[{i}] {quote(arg)}: contains a NUL byte")


def _with_field_prefix(prefix: str, fn: Callable[[], Any]) -> Any:
    """Run ``fn``; a builder's InvalidArgumentError gets the request field it is about."""
    try:
        return fn()
    except ConversionError:
        raise
    except InvalidArgumentError as exc:
        if str(exc).startswith(prefix):
            raise
        try:
            new = type(exc)(f"{prefix}: {exc}")
        except TypeError:
            new = InvalidArgumentError(f"{prefix}: {exc}")
        raise new from exc


# -- gRPC ---------------------------------------------------------------------------------------


def _adapt(service: CRIService, name: str) -> Callable[..., Any]:
    import grpc

    method = getattr(service, name, None)

    def fail(context: Any, exc: BaseException) -> None:
        code = getattr(grpc.StatusCode, status_code_name(exc))
        text = str(exc)
        if not isinstance(exc, PodkitError):
            _log.error("%s failed unexpectedly", name, exc_info=exc)
            text = f"{name}: unexpected {type(exc).__name__}: {exc}"
        context.abort(code, status_detail(text))

    if method is None:
        def unimplemented(request: Any, context: Any) -> Any:
            context.abort(grpc.StatusCode.UNIMPLEMENTED, f"{name} is not implemented by podkit")

        return unimplemented
    if name in _STREAMING_METHODS:
        def stream(request: Any, context: Any) -> Iterator[Any]:
            try:
                yield from method(request, context.is_active)
            except Exception as exc:  # any error: grpc's own reply would quote it unbounded
                fail(context, exc)

        return stream

    def unary(request: Any, context: Any) -> Any:
        try:
            return method(request)
        except Exception as exc:  # any error: grpc's own reply would quote it unbounded
            fail(context, exc)
        return None

    return unary


class _Servicer:
    def __init__(self, service: CRIService, names: tuple[str, ...]) -> None:
        for name in names:
            setattr(self, name, _adapt(service, name))


class Server:
    """A running reference server: the gRPC server, its service and its socket."""

    def __init__(self, grpc_server: Any, service: CRIService, socket_path: Path) -> None:
        self.grpc_server = grpc_server
        self.service = service
        self.socket_path = socket_path
        self._stopped = threading.Event()

    @property
    def address(self) -> str:
        """The gRPC target (``unix:///path``) clients connect to."""
        return f"unix://{self.socket_path}"

    def stop(self, grace: float | None = 5.0) -> None:
        """Stop serving (event streams end), remove the socket; pods keep running."""
        if self._stopped.is_set():
            return
        self._stopped.set()
        self.service.stop_monitor()
        self.service.events.close()
        self.grpc_server.stop(grace).wait()
        with contextlib.suppress(FileNotFoundError):
            self.socket_path.unlink()

    def wait(self, timeout: float | None = None) -> bool:
        """Block until :meth:`stop` (or ``timeout``); whether it stopped."""
        return self._stopped.wait(timeout)

    def __enter__(self) -> Server:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def claim_socket(path: str | os.PathLike[str]) -> None:
    """Remove a stale socket; refuse when a server answers on it or it is not a socket."""
    path = Path(path)
    try:
        st = path.lstat()
    except FileNotFoundError:
        path.parent.mkdir(parents=True, exist_ok=True)
        return
    if not stat.S_ISSOCK(st.st_mode):
        raise InvalidArgumentError(f"socket path {path}: exists and is not a socket")
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        try:
            s.connect(str(path))
        except (ConnectionRefusedError, FileNotFoundError):
            path.unlink(missing_ok=True)
            return
    raise ConflictError(f"socket path {path}: another server is listening on it")


def serve(
    socket_path: str | os.PathLike[str],
    manager: SandboxManager,
    store: _image.ImageStore,
    *,
    streaming: StreamingServer | None = None,
    pause_image: str = "",
    runtime_handler: str = "runc",
    network_loader: Callable[[], cni.Networks] | None = None,
    max_workers: int = 64,
    options: Mapping[str, Any] | None = None,
) -> Server:
    """Serve RuntimeService and ImageService on a Unix socket; returns the running server.

    Call ``manager.recover()`` first when the state dir may hold pods of an earlier server;
    the service's own records are recovered here. ``max_workers`` bounds concurrent RPCs
    (each open GetContainerEvents stream holds one).
    """
    import concurrent.futures

    import grpc

    from podkit.cri import api_pb2_grpc

    path = Path(socket_path).absolute()
    claim_socket(path)
    service = CRIService(manager, store, streaming=streaming, pause_image=pause_image,
                         runtime_handler=runtime_handler, network_loader=network_loader)
    service.recover()
    server = grpc.server(concurrent.futures.ThreadPoolExecutor(
        max_workers=max_workers, thread_name_prefix="podkit-cri"),
        options=list((options or {}).items()))
    runtime: Any = _Servicer(service, _RUNTIME_METHODS)
    images: Any = _Servicer(service, _IMAGE_METHODS)
    api_pb2_grpc.add_RuntimeServiceServicer_to_server(runtime, server)
    api_pb2_grpc.add_ImageServiceServicer_to_server(images, server)
    server.add_insecure_port(f"unix://{path}")
    server.start()
    service.start_monitor()
    with contextlib.suppress(OSError):
        path.chmod(0o660)
    return Server(server, service, path)
