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

from podkit.cri import api_pb2 as pb
from podkit.cri.service.core import CRIService
from podkit.cri.service.errors import mapped_code, status_code_name, status_detail
from podkit.cri.service.wire import bytes_twin, register
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

_SERVICES = pb.DESCRIPTOR.services_by_name
RUNTIME_METHODS = tuple(m.name for m in _SERVICES["RuntimeService"].methods)
"""The RuntimeService RPCs, from the proto (those the service lacks answer UNIMPLEMENTED)."""
IMAGE_METHODS = tuple(m.name for m in _SERVICES["ImageService"].methods)
"""The ImageService RPCs, from the proto."""
STREAMING_METHODS = frozenset(m.name for service in _SERVICES.values() for m in service.methods
                              if m.server_streaming)
"""The server-streaming RPCs: the service method takes ``(request, is_active)`` and returns an
iterator of responses."""


def adapt(service: object, name: str, *, wire: bool = False) -> Callable[..., Any]:
    """A gRPC handler for RPC ``name`` calling ``service.<name>``; any error aborts the call
    with its status code (``service.status_code(exc)`` when the service has one) and a bounded
    message. With ``wire``, RPCs of :data:`~podkit.cri.service.wire.WIRE_METHODS` call the
    service's twin returning the serialized response when the service did not override the
    RPC (:func:`~podkit.cri.service.wire.bytes_twin`; register with
    :func:`~podkit.cri.service.wire.register`)."""
    import grpc

    method = getattr(service, name, None)
    if wire and method is not None:
        method = bytes_twin(service, name) or method
    code_of: Callable[[BaseException], str] = getattr(service, "status_code", status_code_name)
    codes = getattr(service, "status_codes", {})

    def fail(context: Any, exc: BaseException) -> None:
        code = getattr(grpc.StatusCode, code_of(exc))
        text = str(exc)
        if not isinstance(exc, PodkitError) and mapped_code(exc, codes) is None:
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
    """A CRI service served over gRPC on a Unix socket: RuntimeService and ImageService.

    ``Server(socket_path, service).start()`` (what :func:`serve` does) claims the socket
    (:func:`claim_socket`), calls ``service.recover()``, starts gRPC with ``max_workers``
    threads (each RPC in progress, and each open event stream, holds one) and gRPC server
    ``options``, then ``service.start_monitor()``; the socket is made ``0660``. :meth:`stop`
    ends the event streams, stops gRPC and the exit monitor and closes the service (pods keep
    running). Also a context manager (stops on exit).
    """

    def __init__(self, socket_path: str | os.PathLike[str], service: CRIService, *,
                 max_workers: int = 64, options: Mapping[str, Any] | None = None) -> None:
        if max_workers < 1:
            raise InvalidArgumentError(f"max_workers {max_workers}: must be at least 1")
        self.socket_path = Path(socket_path).absolute()
        self.service = service
        self.max_workers = max_workers
        self.options = dict(options or {})
        self.grpc_server: Any = None
        self._stopped = threading.Event()

    @property
    def address(self) -> str:
        """The gRPC target (``unix:///path``) clients connect to."""
        return f"unix://{self.socket_path}"

    def start(self) -> Server:
        """Serve (see the class); itself. A failed start leaves no server and no socket."""
        import concurrent.futures

        import grpc

        from podkit.cri import api_pb2_grpc

        if self.grpc_server is not None:
            raise ConflictError(f"server on {self.socket_path}: already started")
        claim_socket(self.socket_path)
        self.service.recover()
        server = grpc.server(concurrent.futures.ThreadPoolExecutor(
            max_workers=self.max_workers, thread_name_prefix="podkit-cri"),
            options=list(self.options.items()))
        try:
            runtime: Any = Servicer(self.service, RUNTIME_METHODS, wire=True)
            images: Any = Servicer(self.service, IMAGE_METHODS)
            register(api_pb2_grpc.add_RuntimeServiceServicer_to_server, runtime, server)
            api_pb2_grpc.add_ImageServiceServicer_to_server(images, server)
            server.add_insecure_port(self.address)
            server.start()
        except BaseException:
            server.stop(None)
            with contextlib.suppress(FileNotFoundError):
                self.socket_path.unlink()
            raise
        self.grpc_server = server
        self.service.start_monitor()
        with contextlib.suppress(OSError):
            self.socket_path.chmod(0o660)
        return self

    def stop(self, grace: float | None = 5.0) -> None:
        """Stop serving (event streams end), close the service, remove the socket; pods keep
        running."""
        if self._stopped.is_set():
            return
        self._stopped.set()
        self.service.stop_monitor()
        self.service.events.close()
        if self.grpc_server is not None:
            self.grpc_server.stop(grace).wait()
        self.service.close()
        if self.grpc_server is not None:
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


def serve(socket_path: str | os.PathLike[str], service: CRIService, *, max_workers: int = 64,
          options: Mapping[str, Any] | None = None) -> Server:
    """Serve ``service`` (a :class:`CRIService`, or a subclass) on a Unix socket: the started
    :class:`Server`.

    >>> server = serve("/run/mycri.sock", CRIService(manager, store))   # doctest: +SKIP
    """
    return Server(socket_path, service, max_workers=max_workers, options=options).start()
