"""SandboxManager under conmon (issue 11): status and list calls keep the process's open
descriptors flat, every pod step works once descriptor numbers pass 1024, and attach works at the
state-dir length where conmon cut its socket link. Real runc, conmon and CNI plugins, inside
scripts/isolated."""

from __future__ import annotations

import shutil
import tempfile
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


@pytest.fixture
def mgr_42(bridge: None, rootfs: Path) -> Iterator[SandboxManager]:
    """A manager whose conmon socket dir is 42 characters (as under ``cri serve --root`` of 17):
    with 64-character IDs, ``<socket dir>/<id>`` is exactly 107, the length conmon cuts."""
    tmp = Path(tempfile.mkdtemp(prefix="pk", dir="/tmp"))
    base = tmp / ("b" * (21 - len(str(tmp)) - 1))
    try:
        yield from managed(base, rootfs)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def test_attach_and_remove_when_the_socket_path_is_107(mgr_42: SandboxManager,
                                                         rootfs: Path) -> None:
    assert len(str(mgr_42.state_dir / "conmon" / "sockets")) == 42
    sb = mgr_42.run_sandbox(pod_config())
    cid = mgr_42.create_container(sb.id, ctr_config(
        rootfs, "echo", ["sh", "-c", "while read l; do echo \"got $l\"; done"], stdin=True))
    mgr_42.start_container(cid)
    assert len(cid) == 64
    with mgr_42.attach(cid) as att:
        att.send(b"hi\n")
        assert att.recv(timeout=30) == ("stdout", b"got hi\n")
    mgr_42.remove_sandbox(sb.id)
    assert list((mgr_42.state_dir / "conmon" / "sockets").iterdir()) == []
