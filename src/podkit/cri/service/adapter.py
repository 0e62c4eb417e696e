"""The gRPC side of the CRI service: each RPC of ``runtime.v1`` bound to the service's method
of the same name, errors mapped to status codes, and the running :class:`Server` on a Unix
socket. grpc is imported only when serving (the ``grpc`` extra)."""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import stat
import threading
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

from podkit import image as _image
from podkit.cri.service.base import StreamingURLs
from podkit.cri.service.core import CRIService
from podkit.cri.service.errors import status_code_name, status_detail
from podkit.cri.service.pods import PodAPI
from podkit.cri.service.pulls import CredentialLookup
from podkit.cri.service.wire import WIRE_METHODS, register
from podkit.errors import ConflictError, InvalidArgumentError, PodkitError
from podkit.sandbox import SandboxManager

__all__ = [
    "IMAGE_METHODS",
    "RUNTIME_METHODS",
    "STREAMING_METHODS",
    "Server",
    "Servicer",
    "adapt",
    "claim_socket",
    "manager_streaming",
    "serve",
]

_log = logging.getLogger("podkit.cri")

RUNTIME_METHODS = (
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
"""The RuntimeService RPCs (those the service lacks answer UNIMPLEMENTED)."""
IMAGE_METHODS = ("ListImages", "StreamImages", "ImageStatus", "PullImage", "RemoveImage",
                 "ImageFsInfo")
"""The ImageService RPCs."""
STREAMING_METHODS = frozenset({"GetContainerEvents", "StreamPodSandboxes", "StreamContainers",
                               "StreamContainerStats", "StreamPodSandboxStats", "StreamImages"})
"""The server-streaming RPCs (the service method takes the stream's ``is_active``)."""


def adapt(service: object, name: str, *, wire: bool = False) -> Callable[..., Any]:
    """A gRPC handler for RPC ``name`` calling ``service.<name>``; any error aborts the call
    with its status code and a bounded message. With ``wire``, RPCs of
    :data:`~podkit.cri.service.wire.WIRE_METHODS` call the service's twin returning the
    serialized response (register with :func:`~podkit.cri.service.wire.register`)."""
    import grpc

    method = getattr(service, name, None)
    if wire and name in WIRE_METHODS:
        method = getattr(service, WIRE_METHODS[name], method)

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
    if name in STREAMING_METHODS:
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


class Servicer:
    """A gRPC servicer whose methods ``names`` are :func:`adapt` handlers of ``service``."""

    def __init__(self, service: object, names: tuple[str, ...], *, wire: bool = False,
                 ) -> None:
        for name in names:
            setattr(self, name, adapt(service, name, wire=wire))


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
        self.service.close()
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


def manager_streaming(manager: SandboxManager, address: tuple[str, int] = ("127.0.0.1", 0),
                      ) -> Any:
    """A started :class:`podkit.cri.streaming.StreamingServer` for ``manager``'s containers.

    Exec runs through the manager's runtime, attach through its supervisor (conmon), and
    port-forward connects inside the pod's network namespace. Stop it with ``.stop()``.
    """
    from podkit.cri.streaming import ContainerTarget, RuncStreamingRuntime, StreamingServer

    def container(id: str) -> ContainerTarget:
        manager.container_status(id)
        return ContainerTarget(id, manager.runtime, manager.supervisor)

    def netns_path(id: str) -> str:
        return manager.sandbox_status(id).netns_path

    runtime = RuncStreamingRuntime(container, resolve_sandbox_netns=netns_path)
    return StreamingServer(runtime, address).start()


def serve(
    socket_path: str | os.PathLike[str],
    manager: PodAPI | CRIService,
    store: _image.ImageStore | None = None,
    *,
    streaming: StreamingURLs | None = None,
    pause_image: str = "",
    runtime_handler: str = "runc",
    network_loader: Callable[[], Any] | None = None,
    max_workers: int = 64,
    options: Mapping[str, Any] | None = None,
    registry_hosts: _image.RegistryHosts | None = None,
    auth: CredentialLookup | None = None,
) -> Server:
    """Serve RuntimeService and ImageService on a Unix socket; returns the running server.

    ``manager`` is a :class:`CRIService` (``podkit.cri.build_service``; the other service
    arguments are not given then), or a pod API the service is made on, here: it is made for
    the server (``images=store``, its ``network_loader``; see
    :class:`CRIService`); call ``manager.recover()`` first when the state dir may hold pods of
    an earlier server. ``max_workers`` bounds concurrent RPCs (each open GetContainerEvents
    stream holds one). ``registry_hosts`` and ``auth`` are how PullImage reaches registries
    (see :class:`CRIService`).
    """
    import concurrent.futures

    import grpc

    from podkit.cri import api_pb2_grpc

    path = Path(socket_path).absolute()
    claim_socket(path)
    if isinstance(manager, CRIService):
        service = manager
    elif store is None:
        raise InvalidArgumentError("serve: give the image store (or a CRIService)")
    else:
        service = CRIService(manager, store, streaming=streaming, pause_image=pause_image,
                             runtime_handler=runtime_handler, network_loader=network_loader,
                             registry_hosts=registry_hosts, auth=auth)
    service.recover()
    server = grpc.server(concurrent.futures.ThreadPoolExecutor(
        max_workers=max_workers, thread_name_prefix="podkit-cri"),
        options=list((options or {}).items()))
    runtime: Any = Servicer(service, RUNTIME_METHODS, wire=True)
    images: Any = Servicer(service, IMAGE_METHODS)
    register(api_pb2_grpc.add_RuntimeServiceServicer_to_server, runtime, server)
    api_pb2_grpc.add_ImageServiceServicer_to_server(images, server)
    server.add_insecure_port(f"unix://{path}")
    server.start()
    service.start_monitor()
    with contextlib.suppress(OSError):
        path.chmod(0o660)
    return Server(server, service, path)
