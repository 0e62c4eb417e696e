"""SandboxManager pods in their own user namespace, through the library, on runc: the chowned
copy of an image (``rootfs_mode="copy"``, the fallback where layers cannot be ID-mapped), a
rootfs directory and a pause rootfs directory seen through ID-mapped views, and the undo of
every step (a failed pause, a failed container, an orphaned view ``recover()`` finds).

(The CRI end-to-end tests, with overlay rootfs on runc and crun, are tests/cri/test_userns.py.)
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import attrs
import pytest

from image.imagebuild import Layer, build_image, write_layout
from podkit import idmap, netns
from podkit.container import ContainerConfigError
from podkit.image import ImageStore, import_image
from podkit.pods import idmapped
from podkit.pods.config import (
    ContainerConfig,
    IDMapping,
    LinuxPodSandboxConfig,
    LinuxSandboxSecurityContext,
    Mount,
    NamespaceMode,
    NamespaceOption,
    SandboxConfig,
    UserNamespace,
)
from podkit.sandbox import SandboxConfigError, SandboxManager
from support import idmap_dir

from ._pods import ctr_config, do_then_fail, leftovers, make_manager, pod_config

pytestmark = pytest.mark.integration

H, N = 65536 * 301, 65536
IMAGE = "localhost/pk-userns/busybox:1"


@pytest.fixture(scope="module")
def base(bridge: None, busybox_rootfs: Path) -> Iterator[Path]:
    """Dirs every user may search (a pod's root must reach its rootfs): a busybox rootfs
    directory (the pause's and a container's) and an image store with busybox."""
    with idmap_dir("podkit-userns-") as d:
        shutil.copytree(busybox_rootfs, d / "rootfs", symlinks=True)
        img = build_image([Layer().tree(busybox_rootfs).bytes()], ["gzip"],
                          {"Env": ["PATH=/bin"], "Cmd": ["sleep", "3600"]})
        layout = write_layout(d / "layout", [(img.descriptor, None)], img.blobs)
        import_image(ImageStore(d / "images"), layout, IMAGE)
        yield d


@pytest.fixture
def mgr(base: Path) -> Iterator[SandboxManager]:
    work = Path(tempfile.mkdtemp(prefix="m-", dir=base))
    work.chmod(0o711)
    m = make_manager(work, base / "rootfs", images=ImageStore(base / "images"),
                     rootfs_mode="copy")
    try:
        yield m
    finally:
        m.remove_all()
        m.close()
    assert leftovers(work, m) == []
    assert idmap.mounts_under(base) in ([], [str(base)])  # (an ext4 image on tmpfs)
    assert not any((work / "root" / "mounts").glob("*"))


def userns_pod() -> SandboxConfig:
    ids = [IDMapping(container_id=0, host_id=H, length=N)]
    sc = LinuxSandboxSecurityContext(namespace_options=NamespaceOption(
        userns_options=UserNamespace(mode=NamespaceMode.POD, uids=ids, gids=ids)))
    return attrs.evolve(pod_config(), linux=LinuxPodSandboxConfig(security_context=sc))


def sh(m: SandboxManager, cid: str, script: str) -> str:
    res = m.exec_sync(cid, ["sh", "-c", script], timeout=20)
    assert res.exit_code == 0, (script, res.stdout, res.stderr)
    return res.stdout.decode()


def container(m: SandboxManager, sid: str, name: str, image: str, **kw: object) -> str:
    cfg: ContainerConfig = attrs.evolve(ctr_config(Path("/"), name, ["sleep", "3600"]),
                                        image=image, **kw)  # type: ignore[arg-type]
    cid = m.create_container(sid, cfg)
    m.start_container(cid)
    return cid


def test_a_chowned_copy_and_a_rootfs_directory_seen_by_the_pods_root(
        mgr: SandboxManager, base: Path) -> None:
    sb = mgr.run_sandbox(userns_pod())
    assert (mgr.root_dir / "sandboxes" / sb.id / "ns" / "user").exists()
    assert os.stat(mgr.root_dir / "sandboxes" / sb.id / "hosts").st_uid == H
    copied = container(mgr, sb.id, "copied", IMAGE)
    assert sh(mgr, copied, "cat /proc/self/uid_map").split() == ["0", str(H), str(N)]
    assert sh(mgr, copied, "stat -c %u:%g / /bin/busybox /tmp && echo x > /new").split() \
        == ["0:0"] * 3
    record = mgr.container_status(copied)
    rootfs = Path(mgr.images.root if mgr.images else "") / "containers" / record.rootfs_key
    assert os.stat(rootfs / "rootfs" / "bin" / "busybox").st_uid == H  # the copy is chowned
    assert os.stat(rootfs / "rootfs" / "new").st_uid == H
    own = base / f"rootfs-{sb.id[:8]}"
    shutil.copytree(base / "rootfs", own, symlinks=True)
    try:
        viewed = container(mgr, sb.id, "viewed", str(own))
        assert sh(mgr, viewed, "stat -c %u:%g / /bin/busybox").split() == ["0:0"] * 2
        sh(mgr, viewed, "echo y > /written && mkdir /made && chown 7:7 /made")
        assert (os.stat(own / "written").st_uid, os.stat(own / "made").st_gid) == (0, 7)
        view = mgr.root_dir / "mounts" / viewed / "rootfs"
        assert str(view) in idmap.mounts_under(mgr.root_dir)
        mgr.remove_container(viewed)
        assert not view.parent.exists() and (own / "written").exists()  # unmounted, kept
    finally:
        shutil.rmtree(own)
    mgr.remove_sandbox(sb.id)
    assert not (mgr.root_dir / "sandboxes" / sb.id).exists()


def test_a_failed_pause_undoes_the_user_namespace(mgr: SandboxManager) -> None:
    seen: dict[str, object] = {}
    mgr.steps["pause"] = do_then_fail(mgr.steps["pause"], RuntimeError("injected"), seen)
    with pytest.raises(RuntimeError, match="injected"):
        mgr.run_sandbox(userns_pod())
    sb = seen["sandbox"]
    assert mgr.list_sandboxes() == [] and mgr.runtime.list() == []
    assert not netns.exists(sb.netns_path)  # type: ignore[attr-defined]
    assert not (mgr.root_dir / "sandboxes" / sb.id).exists()  # type: ignore[attr-defined]


def test_a_failed_container_leaves_no_view(mgr: SandboxManager, base: Path) -> None:
    sb = mgr.run_sandbox(userns_pod())
    mounts = [Mount(container_path="/a", host_path=str(base / "rootfs" / "etc")),
              Mount(container_path="/b", host_path=str(base / "missing"))]
    with pytest.raises(ContainerConfigError,
                       match=rf"mounts\[1\]\.host_path '{base}/missing': does not exist"):
        container(mgr, sb.id, "bad", IMAGE, mounts=mounts)
    assert mgr.list_containers() == []
    assert idmap.mounts_under(mgr.root_dir / "mounts") == []
    assert not any((mgr.root_dir / "mounts").glob("*"))


def test_recover_unmounts_views_no_record_names(mgr: SandboxManager, base: Path) -> None:
    ids = idmap.IDMap.single(H, N)
    orphan = mgr.root_dir / "mounts" / "f00d"
    with idmap.Holder(ids) as holder:
        idmapped.stage(ctr_config(Path("/"), "x", ["true"], mounts=[
            Mount(container_path="/a", host_path=str(base / "rootfs"))]),
            orphan, idmap.UserNamespace(holder.path("user"), ids))
    assert idmap.mounts_under(orphan) == [str(orphan / "0")]
    mgr.recover()
    assert not orphan.exists() and (base / "rootfs" / "bin" / "busybox").exists()


def test_a_pod_user_namespace_needs_a_pause(base: Path, tmp_path: Path) -> None:
    m = make_manager(tmp_path, base / "rootfs", infraless=True)
    try:
        assert "pause=None" in m.user_namespaces()
        with pytest.raises(SandboxConfigError, match="userns_options: mode POD cannot run here"):
            m.run_sandbox(userns_pod())
    finally:
        m.close()
