"""The reference CRI server: ``runtime.v1`` RuntimeService and ImageService over podkit.

The code lives in :mod:`podkit.cri.service` (the service split by job, behind the
:class:`~podkit.cri.service.pods.PodAPI` seam); this module keeps the names it always exported.
``CRIService`` answers every RPC as a plain method named like the RPC, on top of a
:class:`~podkit.sandbox.SandboxManager` made for it (``images=store``) and an
:class:`~podkit.image.ImageStore`; :func:`serve` puts it on a gRPC Unix socket. grpc is imported
only by :func:`serve` (the ``grpc`` extra).

``StreamingServer`` here is the protocol of what serves Exec/Attach/PortForward URLs (now
named :class:`~podkit.cri.service.StreamingURLs`); ``podkit.cri.StreamingServer`` is the
streaming server class that implements it.
"""

from __future__ import annotations

from podkit.cri.service import adapter as _adapter
from podkit.cri.service.adapter import Server, claim_socket, manager_streaming, serve
from podkit.cri.service.base import StreamingURLs
from podkit.cri.service.core import CRIService
from podkit.cri.service.errors import (
    STATUS_DETAIL_BYTES as STATUS_DETAIL_BYTES,
)
from podkit.cri.service.errors import (
    STATUS_DETAIL_CHARS as STATUS_DETAIL_CHARS,
)
from podkit.cri.service.errors import (
    EventsOverflowError,
    UnimplementedError,
    status_code_name,
    status_detail,
)
from podkit.cri.service.events import EVENTS_BACKLOG, EventBus
from podkit.cri.service.replies import ContainerImage
from podkit.cri.service.requests import STREAM_BATCH as STREAM_BATCH
from podkit.cri.service.status import KUBE_API_VERSION as KUBE_API_VERSION
from podkit.cri.service.status import RUNTIME_API_VERSION, RUNTIME_NAME
from podkit.sandbox import pause_config

StreamingServer = StreamingURLs
"""The old name of :class:`~podkit.cri.service.StreamingURLs` (kept for compatibility)."""

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

# Names earlier versions' callers reached for (tests, tools); not part of __all__.
_Events = EventBus
_RUNTIME_METHODS = _adapter.RUNTIME_METHODS
_IMAGE_METHODS = _adapter.IMAGE_METHODS
_STREAMING_METHODS = _adapter.STREAMING_METHODS
_Servicer = _adapter.Servicer
_adapt = _adapter.adapt
