"""The streaming subpackage's face: what ``podkit.cri`` and the server take from it."""

from __future__ import annotations

import podkit.cri
from podkit.cri import streaming


def test_the_face_exports_what_the_cri_package_and_server_use() -> None:
    for name in ["StreamingServer", "StreamingRuntime", "TokenCache", "ContainerTarget",
                 "RuncStreamingRuntime"]:
        assert name in streaming.__all__
        assert getattr(podkit.cri, name) is getattr(streaming, name)


def test_the_face_keeps_the_single_module_names() -> None:
    before = {
        "PORTFORWARD_PROTOCOLS", "PROTOCOL_PORTFORWARD", "PROTOCOL_PORTFORWARD_TUNNEL",
        "PROTOCOL_V1", "PROTOCOL_V2", "PROTOCOL_V3", "PROTOCOL_V4", "PROTOCOL_V5",
        "REMOTECOMMAND_PROTOCOLS", "WS_BASE64", "WS_V4_BASE64", "AttachRequest", "DuplexStream",
        "ExecRequest", "InputStream", "OutputStream", "PortForwardRequest", "ResizeQueue",
        "StreamingError", "StreamingRuntime", "StreamingServer", "TerminalSize", "TokenCache",
        "exit_code_from_status", "status_exit_code", "status_internal_error", "status_success",
    }
    assert before <= set(streaming.__all__)
