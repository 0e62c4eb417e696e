"""The Kubernetes streaming server behind CRI ``Exec``, ``Attach`` and ``PortForward``.

A CRI server answers those RPCs with a URL; the client (kubelet, ``crictl``) then opens that URL
and upgrades the HTTP/1.1 connection to SPDY/3.1 (``X-Stream-Protocol-Version``
``v4.channel.k8s.io``, ``v3``, ``v2``, ``channel.k8s.io``; ``portforward.k8s.io``) or to a
WebSocket (``Sec-WebSocket-Protocol`` ``v5.channel.k8s.io``, ``v4.channel.k8s.io``,
``v4.base64.channel.k8s.io``, ``channel.k8s.io``, ``base64.channel.k8s.io``). This is kubelet's
``streaming.Server`` in pure Python (stdlib threads, no dependencies)::

    server = StreamingServer(runtime).start()          # 127.0.0.1:<free port>
    url = server.get_exec(exec_request)                 # http://127.0.0.1:PORT/exec/<token>
    ...
    server.stop()

The parts, each usable alone: ``server`` (:class:`StreamingServer`, :class:`TokenCache`),
``wire`` (protocol names, status documents, the HTTP handshakes), ``sessions`` (one upgraded
connection), ``types`` (requests, streams, :class:`StreamingRuntime`), ``runtime``
(:class:`RuncStreamingRuntime` on runc, conmon and netns), ``client`` (the client side), and the
I/O-free framings ``spdy`` (SPDY/3.1) and ``ws`` (RFC 6455).
"""

from __future__ import annotations

from podkit.cri.streaming.runtime import ContainerTarget, RuncStreamingRuntime
from podkit.cri.streaming.server import StreamingError, StreamingServer, TokenCache
from podkit.cri.streaming.types import (
    AttachRequest,
    DuplexStream,
    ExecRequest,
    InputStream,
    OutputStream,
    PortForwardRequest,
    ResizeQueue,
    StreamingRuntime,
    TerminalSize,
)
from podkit.cri.streaming.wire import (
    PORTFORWARD_PROTOCOLS,
    PROTOCOL_PORTFORWARD,
    PROTOCOL_PORTFORWARD_TUNNEL,
    PROTOCOL_V1,
    PROTOCOL_V2,
    PROTOCOL_V3,
    PROTOCOL_V4,
    PROTOCOL_V5,
    REMOTECOMMAND_PROTOCOLS,
    WS_BASE64,
    WS_V4_BASE64,
    exit_code_from_status,
    status_exit_code,
    status_internal_error,
    status_success,
)

__all__ = [
    "PORTFORWARD_PROTOCOLS",
    "PROTOCOL_PORTFORWARD",
    "PROTOCOL_PORTFORWARD_TUNNEL",
    "PROTOCOL_V1",
    "PROTOCOL_V2",
    "PROTOCOL_V3",
    "PROTOCOL_V4",
    "PROTOCOL_V5",
    "REMOTECOMMAND_PROTOCOLS",
    "WS_BASE64",
    "WS_V4_BASE64",
    "AttachRequest",
    "ContainerTarget",
    "DuplexStream",
    "ExecRequest",
    "InputStream",
    "OutputStream",
    "PortForwardRequest",
    "ResizeQueue",
    "RuncStreamingRuntime",
    "StreamingError",
    "StreamingRuntime",
    "StreamingServer",
    "TerminalSize",
    "TokenCache",
    "exit_code_from_status",
    "status_exit_code",
    "status_internal_error",
    "status_success",
]
