"""``CRIService``: every CRI RPC as a method named like it, over a pod API and an image store.

The RPCs live in their parts (``sandboxes``, ``containers``, ``status``, ``images``, the
events in ``exits``); this class joins them, checks the manager it is given is configured for
it, and adds the ``Stream*`` list RPCs.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any, TypeVar

import podkit
from podkit import image as _image
from podkit.cri import api_pb2 as pb
from podkit.cri.service.base import RUNTIME_NAME, ServiceBase, StreamingURLs
from podkit.cri.service.containers import ContainerRPCs
from podkit.cri.service.errors import check_codes, status_code_name
from podkit.cri.service.hooks import (
    ContainerAdmission,
    ContainerMutation,
    PodAdmission,
    PodMutation,
)
from podkit.cri.service.images import ImageRPCs
from podkit.cri.service.pods import PodAPI
from podkit.cri.service.pulls import CredentialLookup
from podkit.cri.service.requests import batches
from podkit.cri.service.sandboxes import SandboxRPCs
from podkit.cri.service.status import StatusRPCs
from podkit.errors import InvalidArgumentError, quote

__all__ = ["CRIService"]


def _check_manager(manager: PodAPI, store: _image.ImageStore, rootfs_mode: str | None,
                   network_loader: Callable[[], Any] | None) -> None:
    """Refuse a manager not configured for this service (the service never changes it)."""
    if manager.images is None:
        raise InvalidArgumentError(
            f"image store {store.root}: the manager has no image store (make it with "
            "SandboxManager(..., images=store))")
    if Path(manager.images.root).absolute() != Path(store.root).absolute():
        raise InvalidArgumentError(
            f"image store {store.root}: the manager resolves images in another store "
            f"({manager.images.root})")
    if rootfs_mode is not None and rootfs_mode != manager.rootfs_mode:
        raise InvalidArgumentError(
            f"rootfs_mode {rootfs_mode!r}: the manager makes {manager.rootfs_mode!r} root "
            "filesystems (make it with SandboxManager(..., rootfs_mode=...))")
    if network_loader is not None and getattr(manager, "network_loader", None) \
            is not network_loader:
        raise InvalidArgumentError(
            "network_loader: give it to the manager (SandboxManager(..., network_loader=...))")


H = TypeVar("H")


def _hooks(hooks: Iterable[H], kind: str) -> list[H]:
    """``hooks`` as the service's list, each checked to be callable."""
    out = list(hooks)
    for i, hook in enumerate(out):
        if not callable(hook):
            raise InvalidArgumentError(f"{kind}[{i}] {quote(hook)}: not callable")
    return out


class CRIService(SandboxRPCs, ContainerRPCs, StatusRPCs, ImageRPCs):
    """Every CRI RPC as a method named like it: ``service.RunPodSandbox(request) -> response``.

    ``manager`` (any :class:`~podkit.cri.service.pods.PodAPI`, e.g. a ``SandboxManager``) runs
    pods and containers; it must be made for this service: resolving images in ``store``
    (``images=store``), with its rootfs mode and its network loader (``network_loader=``,
    tried by Status and RunPodSandbox, so a CNI config written after the start is picked up, as
    containerd does). ``rootfs_mode`` and ``network_loader`` here are checks only: a manager
    set up otherwise is refused (InvalidArgumentError). ``streaming`` serves
    Exec/Attach/PortForward (``None``: those answer Unimplemented); ``pause_image`` is reported
    as pinned.
    ``registry_hosts`` (a :class:`~podkit.image.RegistryHosts`: mirrors, TLS, headers) and
    ``auth`` (credentials by registry host, e.g. an :class:`~podkit.image.AuthFile`, used when
    a PullImage request carries none) are how PullImage reaches registries.

    Extension points (docs/cri-extending.md):

    - ``mutate_pod``, ``admit_pod``, ``mutate_container``, ``admit_container``: lists of hooks
      run before RunPodSandbox / CreateContainer make anything (:mod:`podkit.cri.service.hooks`);
      an admission hook refuses with :class:`~podkit.errors.PermissionDeniedError`.
    - ``status_codes``: ``{exception class: "GRPC_CODE_NAME"}`` for errors of your own (the
      nearest class of an error's MRO wins, before podkit's table).
    - ``runtime_name``, ``runtime_version``: what Version answers (``podkit`` and its version).
    - A subclass overrides any RPC: ``def ListContainers(self, request)`` returning the
      response (``super()`` for podkit's); the server-streaming ones take
      ``(request, is_active)`` and return an iterator of responses (``is_active()`` is false
      once the client left). An RPC the service lacks (CheckpointContainer, the metrics ones)
      answers UNIMPLEMENTED until a subclass defines it. :func:`serve` always calls the
      override.

    Lifecycle: :meth:`recover` (after ``manager.recover()``), :meth:`start_monitor` (the exit
    poller thread), :meth:`stop_monitor`, :meth:`close`; :class:`Server` calls them in that
    order. ``closers`` are what :meth:`close` also runs, last added first, once: what was made
    for the service and goes with it (``build_service`` adds the streaming server it made,
    and the manager when it made that too). Threading: RPCs run concurrently on the gRPC
    worker threads; the service is thread-safe, and hooks and overrides must be too. Raises
    podkit errors.
    """

    def __init__(
        self,
        manager: PodAPI,
        store: _image.ImageStore,
        *,
        streaming: StreamingURLs | None = None,
        pause_image: str = "",
        runtime_handler: str = "runc",
        rootfs_mode: str | None = None,
        network_loader: Callable[[], Any] | None = None,
        registry_hosts: _image.RegistryHosts | None = None,
        auth: CredentialLookup | None = None,
        runtime_name: str = RUNTIME_NAME,
        runtime_version: str = podkit.__version__,
        mutate_pod: Iterable[PodMutation] = (),
        admit_pod: Iterable[PodAdmission] = (),
        mutate_container: Iterable[ContainerMutation] = (),
        admit_container: Iterable[ContainerAdmission] = (),
        status_codes: Mapping[type[BaseException], str] | None = None,
    ) -> None:
        if rootfs_mode is not None and rootfs_mode not in ("auto", "overlay", "copy"):
            raise InvalidArgumentError(f"rootfs_mode {rootfs_mode!r}: want auto, overlay or copy")
        _check_manager(manager, store, rootfs_mode, network_loader)
        codes = check_codes(status_codes or {})
        hooks = (_hooks(mutate_pod, "mutate_pod"), _hooks(admit_pod, "admit_pod"),
                 _hooks(mutate_container, "mutate_container"),
                 _hooks(admit_container, "admit_container"))
        ServiceBase.__init__(self, manager, store, streaming=streaming, pause_image=pause_image,
                             runtime_handler=runtime_handler)
        self.runtime_name, self.runtime_version = runtime_name, runtime_version
        self.mutate_pod, self.admit_pod, self.mutate_container, self.admit_container = hooks
        self.status_codes = codes
        self._init_images(registry_hosts, auth)
        self.closers: list[Callable[[], object]] = []

    def close(self) -> None:
        """Stop the exit monitor, close the pidfds watching pauses, then run ``closers`` (last
        added first; each once, also when one fails: the first error is raised after)."""
        super().close()
        failed: BaseException | None = None
        while self.closers:
            try:
                self.closers.pop()()
            except BaseException as exc:
                failed = failed or exc
        if failed is not None:
            raise failed

    def status_code(self, exc: BaseException) -> str:
        """The gRPC status code name the server answers ``exc`` with: ``status_codes`` (the
        nearest class), else podkit's table (``NotFoundError`` -> ``NOT_FOUND``, ...), else
        ``UNKNOWN``."""
        return status_code_name(exc, self.status_codes)

    def recover(self) -> list[str]:
        """Note what is running and what already stopped, so the exit monitor announces only
        later exits. Call after ``manager.recover()``; returns ``[]`` (the server keeps no
        records of its own)."""
        self.poll_exits(publish=False)
        return []

    # -- Stream* list RPCs (cri-api v0.36): the list RPCs' results in batches --------------

    def StreamPodSandboxes(self, request: pb.StreamPodSandboxesRequest,
                           is_active: Callable[[], bool] = lambda: True,
                           ) -> Iterator[pb.StreamPodSandboxesResponse]:
        """``ListPodSandbox`` in batches of :data:`~podkit.cri.service.requests.STREAM_BATCH`."""
        items = list(self.ListPodSandbox(pb.ListPodSandboxRequest(filter=request.filter)).items)
        return batches(items, lambda b: pb.StreamPodSandboxesResponse(pod_sandboxes=b), is_active)

    def StreamContainers(self, request: pb.StreamContainersRequest,
                         is_active: Callable[[], bool] = lambda: True,
                         ) -> Iterator[pb.StreamContainersResponse]:
        """``ListContainers`` in batches."""
        items = list(self.ListContainers(
            pb.ListContainersRequest(filter=request.filter)).containers)
        return batches(items, lambda b: pb.StreamContainersResponse(containers=b), is_active)

    def StreamContainerStats(self, request: pb.StreamContainerStatsRequest,
                             is_active: Callable[[], bool] = lambda: True,
                             ) -> Iterator[pb.StreamContainerStatsResponse]:
        """``ListContainerStats`` in batches."""
        items = list(self.ListContainerStats(
            pb.ListContainerStatsRequest(filter=request.filter)).stats)
        return batches(items, lambda b: pb.StreamContainerStatsResponse(container_stats=b),
                       is_active)

    def StreamPodSandboxStats(self, request: pb.StreamPodSandboxStatsRequest,
                              is_active: Callable[[], bool] = lambda: True,
                              ) -> Iterator[pb.StreamPodSandboxStatsResponse]:
        """``ListPodSandboxStats`` in batches."""
        items = list(self.ListPodSandboxStats(
            pb.ListPodSandboxStatsRequest(filter=request.filter)).stats)
        return batches(items, lambda b: pb.StreamPodSandboxStatsResponse(pod_sandbox_stats=b),
                       is_active)
