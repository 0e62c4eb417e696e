"""The streaming server on a real SandboxManager pod: RuncStreamingRuntime.for_manager wiring.

Exec into a container the manager started, port-forward into the pod's network namespace made by
the manager (bridge CNI network), unknown IDs. Runs inside scripts/isolated.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from podkit.cri import streaming as st
from podkit.cri.streaming import client as cl
from podkit.cri.streaming.runtime import RuncStreamingRuntime
from podkit.cri.streaming.types import ExecRequest, PortForwardRequest
from podkit.errors import NotFoundError
from podkit.sandbox import SandboxManager
from sandbox._pods import (
    copy_rootfs,
    ctr_config,
    managed,
    pod_bridge,
    pod_config,
)

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def rootfs(busybox_rootfs: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return copy_rootfs(busybox_rootfs, tmp_path_factory.mktemp("st-pods") / "rootfs")


@pytest.fixture()
def mgr(rootfs: Path, tmp_path: Path) -> Iterator[SandboxManager]:
    bridge = pod_bridge()
    next(bridge)
    try:
        yield from managed(tmp_path / "m", rootfs)
    finally:
        next(bridge, None)


def test_exec_and_port_forward_in_a_manager_pod(mgr: SandboxManager, rootfs: Path) -> None:
    sb = mgr.run_sandbox(pod_config())
    cid = mgr.create_container(sb.id, ctr_config(rootfs, "web",
                                                 ["httpd", "-f", "-p", "8080", "-h", "/etc"]))
    mgr.start_container(cid)
    with st.StreamingServer(RuncStreamingRuntime.for_manager(mgr)) as server:
        r = cl.run_remotecommand(server.get_exec(ExecRequest(cid, ("hostname",), stdout=True)),
                                 stderr=False)
        assert r.exit_code == 0 and r.stdout.strip()
        pf = cl.SpdyPortForward(server.get_port_forward(PortForwardRequest(sb.id, (8080,))))
        try:
            reply = b""
            for _ in range(100):  # httpd may still be starting
                data, error = pf.open(8080)
                data.write(b"GET /passwd HTTP/1.0\r\n\r\n")
                reply = data.read_all(timeout=30)
                if reply:
                    break
                assert b"refused" in error.read_all(timeout=30)
            assert reply.startswith(b"HTTP/1.") and b"root:" in reply
        finally:
            pf.close()
        gone = cl.run_remotecommand(server.get_exec(ExecRequest("nope", ("true",), stdout=True)),
                                    stderr=False)
        assert gone.status is not None and "nope" in gone.status["message"]
        with pytest.raises(NotFoundError):
            RuncStreamingRuntime.for_manager(mgr).resolve_container("nope")
