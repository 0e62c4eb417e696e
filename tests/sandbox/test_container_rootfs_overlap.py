"""A container of an image with no user to look up: its rootfs is made on a helper thread
while the spec and bundle are written (real runc, conmon, overlay). The record names the rootfs
first and says "created" only after both; a failure on either side removes everything."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import attrs
import pytest

import _leaks
import podkit.image
from image.imagebuild import Layer, build_image, write_layout
from podkit import oci
from podkit.container import ContainerConfigError, ImageDefaults
from podkit.image import ImageStore, import_image, list_rootfs, remove_rootfs
from podkit.pods import container_spec
from podkit.pods.config import (
    ContainerConfig,
    ContainerMetadata,
    LinuxContainerConfig,
    LinuxContainerSecurityContext,
)
from podkit.runtime import Runc
from podkit.sandbox import ContainerState, PauseConfig, SandboxManager, default_networks
from support import REPO

from ._pods import BRIDGE, ctr_config, leaked, leftovers, pod_config, snapshot

IMAGE = "localhost/pk-pod/nouser:1"


# -- unit -----------------------------------------------------------------------------------


def _config(**sc: Any) -> ContainerConfig:
    return ContainerConfig(metadata=ContainerMetadata(name="a"), image=IMAGE, linux=(
        LinuxContainerConfig(security_context=LinuxContainerSecurityContext(**sc))))


def test_the_build_reads_the_rootfs_only_for_a_user() -> None:
    assert not container_spec.reads_rootfs(_config(), None)
    assert not container_spec.reads_rootfs(_config(), ImageDefaults())
    assert container_spec.reads_rootfs(_config(), ImageDefaults(user="app"))
    assert container_spec.reads_rootfs(_config(run_as_username="app"), None)
    assert container_spec.reads_rootfs(_config(run_as_user=0), ImageDefaults())


# -- integration ----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def store(bridge: None, busybox_rootfs: Path,
          tmp_path_factory: pytest.TempPathFactory) -> Iterator[ImageStore]:
    img = build_image([Layer().tree(busybox_rootfs).bytes()], ["gzip"],
                      {"Env": ["PATH=/bin"], "Cmd": ["sleep", "60"]})
    tmp = tmp_path_factory.mktemp("overlap-images")
    s = ImageStore(tmp / "store")
    import_image(s, write_layout(tmp / "layout", [(img.descriptor, None)], img.blobs), IMAGE)
    yield s
    for r in list_rootfs(s):
        remove_rootfs(s, r.container_id)


@pytest.fixture
def mgr(store: ImageStore, rootfs: Path, tmp_path: Path) -> Iterator[SandboxManager]:
    before = snapshot()
    base = tmp_path / "m"
    _leaks.register_runtime_root(base / "runc")
    _leaks.register_ipam_dir(base / "state" / "ipam")
    m = SandboxManager(base / "root", base / "state", Runc("runc", root=base / "runc"),
                       default_networks(base / "state", bridge=BRIDGE, name="pk-pod-net"),
                       pause=PauseConfig(rootfs=str(rootfs)), netns_prefix="pk-pod-",
                       images=store)
    try:
        yield m
    finally:
        m.remove_all()
        m.close()
    assert leftovers(base, m) == []
    assert list_rootfs(store) == []
    assert leaked(before) == []


def _cfg(name: str, **kw: Any) -> ContainerConfig:
    return attrs.evolve(ctr_config(Path("/"), name, ()), image=IMAGE, **kw)


def _threads_of_create_rootfs(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    where: list[str] = []
    real = podkit.image.create_rootfs

    def create(*a: Any, **kw: Any) -> Any:
        where.append(threading.current_thread().name)
        return real(*a, **kw)

    monkeypatch.setattr(podkit.image, "create_rootfs", create)
    return where


def test_the_rootfs_is_made_alongside_and_the_container_runs(
        mgr: SandboxManager, store: ImageStore, monkeypatch: pytest.MonkeyPatch) -> None:
    where = _threads_of_create_rootfs(monkeypatch)
    sb = mgr.run_sandbox(pod_config())
    cid = mgr.create_container(sb.id, _cfg("app"))
    assert len(where) == 1 and where[0].startswith("podkit-alongside")
    [made] = list_rootfs(store)
    spec = oci.Spec.load(mgr.root_dir / "containers" / cid / "bundle" / "config.json")
    assert spec.root is not None and spec.root.path == str(made.path)
    assert made.container_id == cid and (made.path / "bin" / "sleep").exists()
    c = mgr.container_status(cid)
    assert (c.phase, c.steps, c.rootfs_key) == ("created", ("rootfs", "bundle", "runtime"), cid)
    mgr.start_container(cid)
    assert mgr.container_status(cid).state == ContainerState.CONTAINER_RUNNING
    assert mgr.exec_sync(cid, ["cat", "/proc/1/cmdline"]).stdout.split(b"\0")[:2] == [
        b"sleep", b"60"]
    mgr.remove_container(cid)
    assert list_rootfs(store) == []


def test_with_a_user_the_rootfs_is_made_before_the_build(
        mgr: SandboxManager, monkeypatch: pytest.MonkeyPatch) -> None:
    where = _threads_of_create_rootfs(monkeypatch)
    sb = mgr.run_sandbox(pod_config())
    cid = mgr.create_container(sb.id, _cfg("root", linux=LinuxContainerConfig(
        security_context=LinuxContainerSecurityContext(run_as_username="root"))))
    assert where == [threading.current_thread().name]
    assert mgr.container_user(cid) is not None
    mgr.remove_container(cid)


def test_a_build_failure_waits_for_the_rootfs_and_removes_it(
        mgr: SandboxManager, store: ImageStore) -> None:
    sb = mgr.run_sandbox(pod_config())
    with pytest.raises(ContainerConfigError, match="no CDI cache"):
        mgr.create_container(sb.id, _cfg("cdi", cdi_devices=["vendor.com/dev=x"]))
    assert list_rootfs(store) == [] and mgr.list_containers() == []
    assert list((mgr.root_dir / "containers").iterdir()) == []
    assert list((mgr.records.state_dir / "containers").iterdir()) == []


def test_a_rootfs_failure_removes_the_bundle_and_the_record(
        mgr: SandboxManager, store: ImageStore, monkeypatch: pytest.MonkeyPatch) -> None:
    def fail(*a: Any, **kw: Any) -> Any:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(podkit.image, "create_rootfs", fail)
    sb = mgr.run_sandbox(pod_config())
    with pytest.raises(OSError, match="No space left"):
        mgr.create_container(sb.id, _cfg("full"))
    assert list_rootfs(store) == [] and mgr.list_containers() == []
    assert list((mgr.root_dir / "containers").iterdir()) == []
    assert list((mgr.records.state_dir / "containers").iterdir()) == []


_CHILD = """
import sys, time
sys.path.insert(0, {tests!r})
from pathlib import Path
import podkit.image
from podkit.image import ImageStore
from podkit.runtime import Runc
from podkit.sandbox import PauseConfig, SandboxManager, default_networks
from sandbox._pods import BRIDGE, pod_config
from sandbox.test_container_rootfs_overlap import _cfg
base = Path({base!r})
m = SandboxManager(base / "root", base / "state", Runc("runc", root=base / "runc"),
                   default_networks(base / "state", bridge=BRIDGE, name="pk-pod-net"),
                   pause=PauseConfig(rootfs={rootfs!r}), netns_prefix="pk-pod-",
                   images=ImageStore({store!r}))
sb = m.run_sandbox(pod_config())
original = podkit.image.create_rootfs
def hang(*a, **kw):
    r = original(*a, **kw)
    while not list((base / "root" / "containers").glob("*/bundle/config.json")):
        time.sleep(0.01)
    print("ROOTFS AND BUNDLE", flush=True)
    time.sleep(600)
podkit.image.create_rootfs = hang
m.create_container(sb.id, _cfg("app"))
"""


def test_a_kill_with_the_rootfs_and_the_bundle_made_is_undone_by_recover(
        store: ImageStore, rootfs: Path, tmp_path: Path) -> None:
    before = snapshot()
    base = tmp_path / "m"
    _leaks.register_runtime_root(base / "runc")
    _leaks.register_ipam_dir(base / "state" / "ipam")
    code = textwrap.dedent(_CHILD).format(tests=str(REPO / "tests"), base=str(base),
                                          rootfs=str(rootfs), store=str(store.root.parent))
    child = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True, cwd=REPO)
    try:
        assert child.stdout is not None
        line = child.stdout.readline().strip()
        assert line == "ROOTFS AND BUNDLE", child.stderr.read() if child.stderr else ""
    finally:
        os.kill(child.pid, signal.SIGKILL)
        child.wait()
    [made] = list_rootfs(store)
    m = SandboxManager(base / "root", base / "state", Runc("runc", root=base / "runc"),
                       default_networks(base / "state", bridge=BRIDGE, name="pk-pod-net"),
                       pause=PauseConfig(rootfs=str(rootfs)), netns_prefix="pk-pod-",
                       images=store)
    try:
        report = m.recover()
        assert made.container_id in report.rolled_back and report.errors == ()
        assert list_rootfs(store) == []
        assert list((base / "root" / "containers").iterdir()) == []
        m.remove_all()
    finally:
        m.close()
    assert leftovers(base, m) == []
    assert leaked(before) == []
