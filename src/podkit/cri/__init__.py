"""CRI v1 (``runtime.v1``) for podkit: the wire types and conversions to podkit models.

``podkit.cri.api_pb2`` holds the protobuf messages generated from podkit's own ``api.proto``
(wire-identical to cri-api v0.36.3); the conversions here turn requests into
``SandboxConfig``/``ContainerConfig``/filters and the manager's records and stats into CRI
statuses. ``CRIService`` (every RPC as a method, to subclass and give hooks), ``serve`` and
``Server`` (it on a gRPC Unix socket) are the reference CRI server of ``podkit.cri.service``
(:func:`build_service` makes one from a ``podkit.node`` config), and ``podkit.cri.streaming`` the
exec/attach/port-forward server, each imported on the first use of one of its names here (a
server with streaming off never loads it). Importing this package never imports grpc: the
service stubs in ``podkit.cri.api_pb2_grpc`` and ``serve`` need the ``grpc`` extra.

>>> from podkit.cri import api_pb2, sandbox_config_from_cri
>>> msg = api_pb2.PodSandboxConfig(metadata=api_pb2.PodSandboxMetadata(name="web"))
>>> sandbox_config_from_cri(msg).metadata.name
'web'
"""

from typing import TYPE_CHECKING

from podkit._lazy import lazy_names
from podkit.cri import api_pb2
from podkit.cri.convert import (
    ConversionError,
    container_config_from_cri,
    container_config_to_cri,
    container_filter_from_cri,
    container_filter_to_cri,
    container_stats_to_cri,
    container_status_to_cri,
    container_to_cri,
    cri_signal,
    linux_resources_from_cri,
    linux_resources_to_cri,
    pod_sandbox_filter_from_cri,
    pod_sandbox_filter_to_cri,
    pod_sandbox_stats_to_cri,
    pod_sandbox_status_to_cri,
    pod_sandbox_to_cri,
    sandbox_config_from_cri,
    sandbox_config_to_cri,
    signal_number,
)

if TYPE_CHECKING:
    from podkit.cri.service import CRIService, Server, serve
    from podkit.cri.service.build import CRI_MANAGER, build_service
    from podkit.cri.streaming import (
        ContainerTarget,
        RuncStreamingRuntime,
        StreamingRuntime,
        StreamingServer,
        TokenCache,
    )

# the streaming names, imported on first use: a server with streaming off never loads them
_LAZY = dict.fromkeys(("ContainerTarget", "RuncStreamingRuntime", "StreamingRuntime",
                       "StreamingServer", "TokenCache"), "streaming")
_LAZY.update(dict.fromkeys(("CRIService", "Server", "serve"), "service"))
_LAZY.update(dict.fromkeys(("CRI_MANAGER", "build_service"), "service.build"))
__getattr__, __dir__ = lazy_names(__name__, _LAZY, globals())

__all__ = [
    "CRI_MANAGER",
    "CRIService",
    "ContainerTarget",
    "ConversionError",
    "RuncStreamingRuntime",
    "Server",
    "StreamingRuntime",
    "StreamingServer",
    "TokenCache",
    "api_pb2",
    "build_service",
    "container_config_from_cri",
    "container_config_to_cri",
    "container_filter_from_cri",
    "container_filter_to_cri",
    "container_stats_to_cri",
    "container_status_to_cri",
    "container_to_cri",
    "cri_signal",
    "linux_resources_from_cri",
    "linux_resources_to_cri",
    "pod_sandbox_filter_from_cri",
    "pod_sandbox_filter_to_cri",
    "pod_sandbox_stats_to_cri",
    "pod_sandbox_status_to_cri",
    "pod_sandbox_to_cri",
    "sandbox_config_from_cri",
    "sandbox_config_to_cri",
    "serve",
    "signal_number",
]
