"""SandboxManager under conmon with many descriptors (issue 11): status and list calls keep the
process's open descriptors flat, and every pod step works once descriptor numbers pass 1024.
Real runc, conmon and CNI plugins, inside scripts/isolated."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from podkit.sandbox import ContainerState, SandboxManager, SandboxState
from runtime._fds import fds_past, open_fds

from ._pods import ctr_config, managed, pod_config

pytestmark = pytest.mark.integration


@pytest.fixture
def mgr(bridge: None, rootfs: Path, tmp_path: Path) -> Iterator[SandboxManager]:
    yield from managed(tmp_path / "m", rootfs)


def test_status_and_list_calls_keep_open_fds_flat(mgr: SandboxManager, rootfs: Path) -> None:
    sb = mgr.run_sandbox(pod_config())
    cids = [mgr.create_container(sb.id, ctr_config(rootfs, f"c{i}", ["sleep", "600"]))
            for i in range(3)]
    for cid in cids:
        mgr.start_container(cid)

    def poll_all() -> None:
        assert mgr.sandbox_status(sb.id).state == SandboxState.SANDBOX_READY
        assert len(mgr.list_sandboxes()) == 1
        states = {c.state for c in mgr.list_containers()}
        assert states == {ContainerState.CONTAINER_RUNNING}
        for cid in cids:
            assert mgr.container_status(cid).state == ContainerState.CONTAINER_RUNNING

    poll_all()
    before = open_fds()
    for _ in range(100):
        poll_all()
    assert open_fds() == before
    mgr.remove_sandbox(sb.id)


def test_pod_lifecycle_with_fds_past_1024(mgr: SandboxManager, rootfs: Path) -> None:
    with fds_past():
        sb = mgr.run_sandbox(pod_config())
        cid = mgr.create_container(sb.id, ctr_config(rootfs, "app", ["sleep", "600"]))
        mgr.start_container(cid)
        assert mgr.exec_sync(cid, ["echo", "hi"], timeout=10).stdout == b"hi\n"
        mgr.stop_container(cid, timeout=1)
        assert mgr.container_status(cid).exit_code == 137
        mgr.stop_sandbox(sb.id)
        mgr.remove_sandbox(sb.id)
        assert mgr.list_sandboxes() == [] and mgr.list_containers() == []
