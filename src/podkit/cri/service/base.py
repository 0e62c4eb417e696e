"""What every part of the CRI service shares: its settings, caches and record views.

:class:`ServiceBase` holds the pod API, the image store and the bookkeeping the RPC parts
(``sandboxes``, ``containers``, ``status``, ``images``, ``events``) read: a container's image as
the CRI reports it, its resolved user, its CRI status, and a pod's state checked cheaply.
"""

from __future__ import annotations

import contextlib
import os
import threading
from typing import Protocol

import podkit
from podkit import image as _image
from podkit import procfs
from podkit.cri import api_pb2 as pb
from podkit.cri.service.errors import UnimplementedError
from podkit.cri.service.events import EventBus
from podkit.cri.service.hooks import (
    ContainerAdmission,
    ContainerMutation,
    PodAdmission,
    PodMutation,
)
from podkit.cri.service.pods import PodAPI
from podkit.cri.service.replies import (
    ContainerImage,
    container_status_reply,
    container_to_cri,
    sandbox_to_cri,
    user_reply,
)
from podkit.cri.service.reply_cache import ReplyCache
from podkit.cri.service.wire import one_item
from podkit.errors import NotFoundError
from podkit.sandbox import Container, Sandbox, SandboxFilter, SandboxState

__all__ = ["RUNTIME_NAME", "ServiceBase", "StreamingURLs"]

RUNTIME_NAME = "podkit"
"""``VersionResponse.runtime_name`` unless the service is given another."""


class StreamingURLs(Protocol):
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


def repo(name: str) -> str:
    """The repository of an image name (``a/b`` of ``a/b:t`` or ``a/b@sha256:...``)."""
    base = name.split("@", 1)[0]
    colon = base.rfind(":")
    return base[:colon] if colon > base.rfind("/") else base


class ServiceBase:
    """The state the CRI service's parts share; no RPC of its own."""

    def __init__(self, manager: PodAPI, store: _image.ImageStore, *,
                 streaming: StreamingURLs | None, pause_image: str,
                 runtime_handler: str) -> None:
        self.manager = manager
        self.store = store
        self.streaming = streaming
        self.pause_image = pause_image
        self.runtime_handler = runtime_handler
        self.runtime_name = RUNTIME_NAME
        self.runtime_version = podkit.__version__
        self.mutate_pod: list[PodMutation] = []
        self.admit_pod: list[PodAdmission] = []
        self.mutate_container: list[ContainerMutation] = []
        self.admit_container: list[ContainerAdmission] = []
        self.status_codes: dict[type[BaseException], str] = {}
        self.events = EventBus()
        self.pod_cidr = ""
        self._lock = threading.Lock()
        self._ordered = threading.Lock()  # events leave in the order their bookkeeping saw
        self._stopped: set[str] = set()
        self._announced: set[str] = set()
        self._users: dict[str, pb.ContainerUser | None] = {}
        self._cpu_samples: dict[str, tuple[int, int]] = {}
        self._pauses = procfs.PidWatches()  # the pause process of each READY pod, by pod ID
        self._listed_containers: ReplyCache[pb.Container] = ReplyCache(
            one_item(pb.ListContainersResponse, "containers"))
        self._listed_pods: ReplyCache[pb.PodSandbox] = ReplyCache(
            one_item(pb.ListPodSandboxResponse, "items"))
        self._statuses: ReplyCache[pb.ContainerStatus] = ReplyCache(
            one_item(pb.ContainerStatusResponse, "status"))

    # -- containers as the CRI sees them ----------------------------------------------------

    def _image_info(self, c: Container) -> ContainerImage:
        """What the CRI reports about ``c``'s image, from the manager's record."""
        ref = c.config.image
        if not c.rootfs_key and not c.image_id:  # a rootfs directory
            return ContainerImage(container_id=c.id, image=ref, image_ref=ref, image_id=ref,
                                  rootfs=ref)
        name = c.image_ref or ref
        return ContainerImage(
            container_id=c.id, image=c.meta.get("user_specified_image") or name,
            image_ref=f"{repo(name)}@{c.image_digest}" if c.image_digest else name,
            image_id=c.image_id, rootfs_id=c.rootfs_key,
            rootfs=os.path.join(self.store.root, "containers", c.rootfs_key, "rootfs")
            if c.rootfs_key else "")

    def _container_key(self, c: Container) -> tuple[object, ...]:
        return (c.state, c.created_at, c.image_ref, c.image_id, c.image_digest, c.rootfs_key,
                c.meta.get("user_specified_image", ""))

    def _container_item(self, c: Container) -> pb.Container:
        """``c`` as a ``ListContainers`` item (built again only when its state, config or
        image changed)."""
        return self._listed_containers.get(c.id, self._container_key(c), c.config,
                                           lambda: container_to_cri(c, self._image_info(c)))

    def _container_wire(self, c: Container) -> bytes:
        """:meth:`_container_item` as a serialized one-item ``ListContainersResponse``."""
        return self._listed_containers.get_wire(
            c.id, self._container_key(c), c.config,
            lambda: container_to_cri(c, self._image_info(c)))

    def _sandbox_item(self, sb: Sandbox) -> pb.PodSandbox:
        """``sb`` as a ``ListPodSandbox`` item (built again only when its state changed)."""
        return self._listed_pods.get(sb.id, (sb.state, sb.created_at), sb.config,
                                     lambda: sandbox_to_cri(sb))

    def _sandbox_wire(self, sb: Sandbox) -> bytes:
        """:meth:`_sandbox_item` as a serialized one-item ``ListPodSandboxResponse``."""
        return self._listed_pods.get_wire(sb.id, (sb.state, sb.created_at), sb.config,
                                          lambda: sandbox_to_cri(sb))

    def _image_of(self, id: str) -> ContainerImage:
        try:
            return self._image_info(self.manager.container_status(id))
        except NotFoundError:
            return ContainerImage(container_id=id)

    def _user(self, id: str) -> pb.ContainerUser | None:
        with self._lock:
            if id in self._users:
                return self._users[id]
        try:
            user = user_reply(self.manager.container_user(id))
        except NotFoundError:
            user = None
        with self._lock:
            self._users[id] = user
        return user

    def _status(self, c: Container) -> pb.ContainerStatus:
        """``c``'s CRI status, built again only when any field of the record (a copy the
        manager made for this call) or its user differs from the one it was built from."""
        user = self._user(c.id)
        return self._statuses.get(c.id, (c, user), c.config,
                                  lambda: container_status_reply(c, self._image_info(c), user))

    def _status_wire(self, c: Container) -> bytes:
        """:meth:`_status` as a serialized ``ContainerStatusResponse`` holding only it."""
        user = self._user(c.id)
        return self._statuses.get_wire(
            c.id, (c, user), c.config,
            lambda: container_status_reply(c, self._image_info(c), user))

    def _forget(self, id: str) -> None:
        """Drop what the server caches about a removed container."""
        with self._lock:
            self._users.pop(id, None)
            self._cpu_samples.pop(id, None)
        self._listed_containers.forget(id)
        self._statuses.forget(id)

    def _streaming(self) -> StreamingURLs:
        if self.streaming is None:
            raise UnimplementedError("no streaming server is configured (exec/attach/port-forward)")
        return self.streaming

    # -- pods, their state checked cheaply --------------------------------------------------

    def _fresh_sandbox(self, id: str) -> Sandbox | None:
        """The pod's record with its state checked (see :meth:`_fresh`)."""
        found = [sb for sb in self.manager.list_sandboxes(SandboxFilter(id=id)) if sb.id == id]
        return self._fresh(found[0]) if found else None

    def _pause_survey(self) -> tuple[dict[str, int], set[str]]:
        """The pause pids watched by pod ID and the pods whose pause exited: for a List, which
        looks at every pod, in one call each."""
        return self._pauses.watched(), self._pauses.exited_keys()

    def _fresh(self, sb: Sandbox, survey: tuple[dict[str, int], set[str]] | None = None,
               ) -> Sandbox | None:
        """``sb`` with its state checked: a READY pod's pause is watched by a pidfd (one poll
        while it runs; ``/proc/<pid>`` read once, when the watch starts); the manager's
        runtime check (a runc exec) only when the pause seems gone. ``survey``: what
        :meth:`_pause_survey` just saw (a List looks at all pauses at once)."""
        if sb.state != SandboxState.SANDBOX_READY:
            self._pauses.forget(sb.id)
            return sb
        if survey is None:
            seen = self._pauses.exited(sb.id, sb.pid)
        else:
            seen = (sb.id in survey[1]) if survey[0].get(sb.id) == sb.pid else None
        if seen is False:
            return sb
        if seen is None:
            self._pauses.watch(sb.id, sb.pid)  # before the look: a later exit shows on it
            if procfs.alive(sb.pid):
                return sb
        self._pauses.forget(sb.id)
        with contextlib.suppress(NotFoundError):
            return self.manager.sandbox_status(sb.id)
        return None
