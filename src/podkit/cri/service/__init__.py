"""The CRI service: ``runtime.v1`` RuntimeService and ImageService over the pods layer.

:class:`CRIService` answers every RPC as a plain method named like it (request in, response
out, podkit errors raised) over a :class:`~podkit.cri.service.pods.PodAPI` (a
``SandboxManager``, or ``podkit.pods.testing.FakePodManager`` in tests) and an image store;
:func:`serve` puts it on a gRPC Unix socket. The parts: ``pods`` (the seam), ``sandboxes`` and
``containers`` (the runtime service), ``images`` (the image service), ``events`` and ``exits``
(the events bus and the exit poller), ``status`` (runtime status and stats), ``replies`` (CRI
shapes of records), ``hooks`` (admission and mutation), ``errors`` (status codes), ``adapter``
(gRPC), ``build`` (the service of a node config: :func:`build_service`). Importing it never
imports grpc.
"""

from podkit.cri.service.adapter import Server, claim_socket, manager_streaming, serve
from podkit.cri.service.base import StreamingURLs
from podkit.cri.service.build import CRI_MANAGER, build_service
from podkit.cri.service.core import CRIService
from podkit.cri.service.errors import (
    STATUS_CODES,
    EventsOverflowError,
    UnimplementedError,
    status_code_name,
    status_detail,
)
from podkit.cri.service.events import EVENTS_BACKLOG, EventBus
from podkit.cri.service.hooks import (
    ContainerAdmission,
    ContainerMutation,
    HookError,
    PodAdmission,
    PodMutation,
)
from podkit.cri.service.pods import PodAPI
from podkit.cri.service.replies import ContainerImage
from podkit.cri.service.status import KUBE_API_VERSION, RUNTIME_API_VERSION, RUNTIME_NAME

__all__ = [
    "CRI_MANAGER",
    "EVENTS_BACKLOG",
    "KUBE_API_VERSION",
    "RUNTIME_API_VERSION",
    "RUNTIME_NAME",
    "STATUS_CODES",
    "CRIService",
    "ContainerAdmission",
    "ContainerImage",
    "ContainerMutation",
    "EventBus",
    "EventsOverflowError",
    "HookError",
    "PodAPI",
    "PodAdmission",
    "PodMutation",
    "Server",
    "StreamingURLs",
    "UnimplementedError",
    "build_service",
    "claim_socket",
    "manager_streaming",
    "serve",
    "status_code_name",
    "status_detail",
]
