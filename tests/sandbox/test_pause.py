"""The pause: podkit's built-in one (catatonit), ``PauseConfig.args`` honoured, and a pause that
exits before its pod is ready failing ``run_sandbox`` with nothing left. Real runc under both
supervisors (conmon and in-process), and through ``podkit cri serve``."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import attrs
import pytest

import _leaks
from cri.helpers import start_cri_serve, stop_cri_serve
from podkit import image
from podkit.errors import InvalidArgumentError, NotFoundError, PodkitError
from podkit.image import ImageConfig, ImageStore, build_from_rootfs, list_rootfs, remove_rootfs
from podkit.pods import builtin_pause as builtin_module
from podkit.pods import processes
from podkit.pods.images import resolve_pause
from podkit.runtime import InProcessSupervisor, Runc
from podkit.sandbox import (
    BUILTIN_PAUSE_IMAGE,
    PauseConfig,
    PauseExitedError,
    SandboxManager,
    SandboxState,
    builtin_pause,
    default_network_config,
)
from support import BUSYBOX, require_binary

from ._pods import BRIDGE, ctr_config, leaked, leftovers, make_manager, pod_config, snapshot

APP = "localhost/pk-pause/app:1"
SILENT = "localhost/pk-pause/sh:1"          # Cmd sh: no input, exits 0 at once
LOUD = "localhost/pk-pause/loud:1"          # prints on both streams, exits 3


# -- unit --------------------------------------------------------------------------------


def test_settled_tells_a_sleeping_process_from_one_that_exits() -> None:
    sleeper = subprocess.Popen(["sleep", "30"])
    quick = subprocess.Popen(["true"])
    busy = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        started = time.monotonic()
        assert processes.settled(sleeper.pid, 5.0) is True
        assert processes.settled(quick.pid, 5.0) is False  # a zombie until waited for
        quick.wait()
        assert processes.settled(quick.pid, 5.0) is False  # gone
        assert time.monotonic() - started < 2.0
        started = time.monotonic()
        assert processes.settled(busy.pid, 0.3) is True  # never sleeps: alive at the deadline
        assert 0.3 <= time.monotonic() - started < 2.0
    finally:
        for p in (sleeper, busy):
            p.kill()
            p.wait()


def test_resolve_pause_fills_in_only_what_was_not_given(tmp_path: Path) -> None:
    assert resolve_pause(None, None) is None
    got = resolve_pause(PauseConfig(rootfs=str(tmp_path)), None)
    assert got is not None and got.args == ("sleep", "2147483647")
    assert got.env == ("PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",)
    given = PauseConfig(rootfs=str(tmp_path), args=("/pause",), env=("A=1",))
    assert resolve_pause(given, None) == given
    with pytest.raises(InvalidArgumentError, match="needs an image store"):
        resolve_pause(PauseConfig(image="localhost/p:1"), None)
    with pytest.raises(InvalidArgumentError, match="is not a directory"):
        resolve_pause(PauseConfig(rootfs=str(tmp_path / "nope")), None)


def test_find_catatonit(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # nothing on $PATH
    with pytest.raises(NotFoundError, match=r"catatonit not found .*apt-get install catatonit"):
        builtin_module.find_catatonit(paths=(str(tmp_path / "catatonit"),))
    with pytest.raises(PodkitError, match="/bin/ls is dynamically linked"):
        builtin_module.find_catatonit(paths=("/bin/ls",))
    assert builtin_module.find_catatonit(paths=(str(BUSYBOX),)) == BUSYBOX  # static


def test_builtin_pause_is_made_once(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Four threads at once (each its own flock, as processes would be): one build; later
    calls find the image; the same catatonit gives the same image in another store."""
    builds: list[str] = []
    real = image.build_from_rootfs

    def slow_build(*args: object, **kw: object) -> image.Image:
        builds.append("build")
        time.sleep(0.3)
        return real(*args, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(image, "build_from_rootfs", slow_build)
    store = ImageStore(tmp_path / "a")
    got: list[PauseConfig] = []
    threads = [threading.Thread(target=lambda: got.append(builtin_pause(store,
                                                                        catatonit=BUSYBOX)))
               for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert builds == ["build"] and got == [PauseConfig(image=BUILTIN_PAUSE_IMAGE)] * 4
    assert builtin_pause(store) == PauseConfig(image=BUILTIN_PAUSE_IMAGE) and len(builds) == 1
    [img] = store.list()
    cfg = store.config(img)
    assert (img.name, cfg.entrypoint, cfg.cmd) == (BUILTIN_PAUSE_IMAGE, ("/catatonit", "-P"),
                                                   None)
    other = ImageStore(tmp_path / "b")
    builtin_pause(other, catatonit=BUSYBOX)
    assert other.list()[0].manifest.digest == img.manifest.digest


# -- integration -------------------------------------------------------------------------


@pytest.fixture(scope="module")
def store(bridge: None, busybox_rootfs: Path,
          tmp_path_factory: pytest.TempPathFactory) -> Iterator[ImageStore]:
    """The built-in pause and three busybox images, built from the busybox rootfs."""
    require_binary("catatonit")
    s = ImageStore(tmp_path_factory.mktemp("pause-store"))
    builtin_pause(s)
    build_from_rootfs(s, busybox_rootfs, APP, config=ImageConfig(cmd=("sleep", "3600")))
    build_from_rootfs(s, busybox_rootfs, SILENT, config=ImageConfig(cmd=("sh",)))
    build_from_rootfs(s, busybox_rootfs, LOUD, config=ImageConfig(
        env=("PATH=/bin",), cmd=("sh", "-c", "echo starting; echo 'no such thing' >&2; exit 3")))
    yield s
    for r in list_rootfs(s):
        remove_rootfs(s, r.container_id)


def _manager(base: Path, store: ImageStore, supervisor: str, pause: PauseConfig,
             binary: str = "runc") -> SandboxManager:
    extra: dict[str, object] = {}
    if supervisor == "inproc":
        extra["supervisor"] = InProcessSupervisor(Runc(binary, root=base / "runc"))
    m = make_manager(base, Path("/"), pause=pause, images=store, binary=binary, **extra)
    if supervisor == "inproc":  # one Runc for the manager and its supervisor
        m.runtime = m.supervisor.runtime  # type: ignore[attr-defined]
        m.sandbox_steps.runtime = m.runtime
    return m


def _cmdline(pid: int) -> list[str]:
    return Path(f"/proc/{pid}/cmdline").read_bytes().decode().split("\0")[:-1]


SUPERVISORS = ["conmon", "inproc"]


@pytest.mark.integration
@pytest.mark.parametrize("supervisor", SUPERVISORS)
def test_builtin_pause_runs_a_two_container_pod(store: ImageStore, tmp_path: Path,
                                                supervisor: str) -> None:
    before = snapshot()
    m = _manager(tmp_path / "m", store, supervisor, builtin_pause(store))
    try:
        assert m.pause is not None and m.pause.args == ("/catatonit", "-P")
        sb = m.run_sandbox(pod_config())
        assert sb.state == SandboxState.SANDBOX_READY
        assert Path(f"/proc/{sb.pid}/comm").read_text().strip() == "catatonit"
        assert _cmdline(sb.pid) == ["/catatonit", "-P"]
        ids = []
        for name in ("one", "two"):
            cfg = attrs.evolve(ctr_config(Path("/"), name, ()), image=APP)
            ids.append(m.create_container(sb.id, cfg))
            m.start_container(ids[-1])
        for cid in ids:
            r = m.exec_sync(cid, ["cat", "/proc/1/cmdline"], timeout=10)
            assert r.exit_code == 0 and r.stdout == b"sleep\x003600\x00"
        assert m.sandbox_status(sb.id).state == SandboxState.SANDBOX_READY
        m.remove_sandbox(sb.id)
    finally:
        m.remove_all()
        m.close()
    assert leftovers(tmp_path / "m", m) == []
    assert leaked(before) == []


@pytest.mark.integration
@pytest.mark.parametrize("supervisor", SUPERVISORS)
def test_pause_args_replace_the_image_command(store: ImageStore, tmp_path: Path,
                                              supervisor: str) -> None:
    """An image whose Cmd (sh) would exit at once runs fine with ``args`` given."""
    before = snapshot()
    pause = PauseConfig(image=SILENT, args=("sleep", "2147483647"), env=("PATH=/bin", "X=1"))
    m = _manager(tmp_path / "m", store, supervisor, pause)
    try:
        assert m.pause is not None and m.pause.args == ("sleep", "2147483647")
        sb = m.run_sandbox(pod_config())
        assert _cmdline(sb.pid) == ["sleep", "2147483647"]
        assert b"X=1" in Path(f"/proc/{sb.pid}/environ").read_bytes().split(b"\0")
        m.remove_sandbox(sb.id)
    finally:
        m.remove_all()
        m.close()
    assert leftovers(tmp_path / "m", m) == []
    assert leaked(before) == []


@pytest.mark.integration
@pytest.mark.parametrize("supervisor, binary", [
    ("conmon", "runc"), ("inproc", "runc"), ("conmon", "crun")])
@pytest.mark.parametrize("ref, code, output", [
    (SILENT, 0, ""), (LOUD, 3, "starting\nno such thing")])
def test_a_pause_that_exits_fails_run_sandbox_and_leaves_nothing(
        store: ImageStore, tmp_path: Path, supervisor: str, binary: str, ref: str, code: int,
        output: str) -> None:
    require_binary(binary)
    before = snapshot()
    base = tmp_path / "m"
    m = _manager(base, store, supervisor, PauseConfig(image=ref), binary)
    try:
        config = pod_config()
        with pytest.raises(PauseExitedError) as info:
            m.run_sandbox(config)
        err = info.value
        assert (err.exit_code, err.output) == (code, output)
        text = str(err)
        assert f"the pause (image {ref}, command {list(m.pause.args)})" in text  # type: ignore[union-attr]
        assert f"exited with code {code} before the pod was ready" in text
        assert (f"its last output: {output!r}" if output else "it printed nothing") in text
        assert m.list_sandboxes() == []
        assert leftovers(base, m) == []
        conmon = base / "state" / "conmon" / "containers"
        assert not conmon.exists() or list(conmon.iterdir()) == []
        assert not [p for p in os.listdir("/run/netns") if p.startswith("pk-pod-")]
        with pytest.raises(PauseExitedError):  # the name was released
            m.run_sandbox(config)
    finally:
        m.remove_all()
        m.close()
    assert leftovers(base, m) == []
    assert leaked(before) == []


@pytest.mark.integration
def test_cri_serve_refuses_a_pod_whose_pause_exits(store: ImageStore, busybox_rootfs: Path,
                                                   tmp_path: Path) -> None:
    """Through ``podkit cri serve --pause-image``: RunPodSandbox fails naming the pause, no
    pod is listed, and nothing is left once the server stops."""
    import grpc

    from podkit.cri import api_pb2 as pb
    from podkit.cri import api_pb2_grpc

    before = snapshot()
    root = tmp_path / "root"
    own = ImageStore(root)
    build_from_rootfs(own, busybox_rootfs, LOUD, config=store.config(LOUD))
    default_network_config(tmp_path / "net", name="pk-pod-net", bridge=BRIDGE)
    _leaks.register_runtime_root(root / "state" / "cri" / "runc")
    _leaks.register_ipam_dir(tmp_path / "net" / "ipam")
    proc, channel = start_cri_serve(
        tmp_path / "cri.sock", "--root", str(root), "--cni-conf-dir", str(tmp_path / "net" /
                                                                         "net.d"),
        "--cni-bin-dir", "/usr/lib/cni", "--pause-image", LOUD, "--streaming-address", "")
    try:
        rt = api_pb2_grpc.RuntimeServiceStub(channel)
        cfg = pb.PodSandboxConfig(metadata=pb.PodSandboxMetadata(
            name="pk-pod-cri", uid=os.urandom(8).hex(), namespace="pk"))
        with pytest.raises(grpc.RpcError) as info:
            rt.RunPodSandbox(pb.RunPodSandboxRequest(config=cfg))
        assert info.value.code() == grpc.StatusCode.UNKNOWN
        assert f"the pause (image {LOUD}" in info.value.details()
        assert "exited with code 3" in info.value.details()
        assert "no such thing" in info.value.details()
        assert list(rt.ListPodSandbox(pb.ListPodSandboxRequest()).items) == []
    finally:
        stop_cri_serve(proc, channel)
    state = root / "state" / "cri"  # cri serve's layout: ROOT/cri, STATE/cri (ROOT/state)
    assert (state / "sandboxes").is_dir() and list((state / "sandboxes").glob("*.json")) == []
    assert list((root / "cri" / "sandboxes").iterdir()) == []
    assert [f for f in (tmp_path / "net" / "ipam").rglob("*") if f.is_file()
            and f.name != "lock" and not f.name.startswith("last_reserved_ip")] == []
    for r in list_rootfs(own):
        remove_rootfs(own, r.container_id)
    assert leaked(before) == []


@pytest.mark.integration
def test_cri_serve_runs_the_builtin_pause_image(store: ImageStore, tmp_path: Path) -> None:
    """``podkit cri serve`` with no pause configured makes the built-in pause image in its
    store and runs it: RunPodSandbox runs catatonit, READY."""
    import json

    from podkit.cri import api_pb2 as pb
    from podkit.cri import api_pb2_grpc

    before = snapshot()
    root = tmp_path / "root"
    own = ImageStore(root)
    default_network_config(tmp_path / "net", name="pk-pod-net", bridge=BRIDGE)
    runc_root = root / "state" / "cri" / "runc"
    _leaks.register_runtime_root(runc_root)
    _leaks.register_ipam_dir(tmp_path / "net" / "ipam")
    proc, channel = start_cri_serve(
        tmp_path / "cri.sock", "--root", str(root), "--cni-conf-dir",
        str(tmp_path / "net" / "net.d"), "--cni-bin-dir", "/usr/lib/cni",
        "--streaming-address", "")
    try:
        rt = api_pb2_grpc.RuntimeServiceStub(channel)
        cfg = pb.PodSandboxConfig(metadata=pb.PodSandboxMetadata(
            name="pk-pod-cri-builtin", uid=os.urandom(8).hex(), namespace="pk"))
        id = rt.RunPodSandbox(pb.RunPodSandboxRequest(config=cfg)).pod_sandbox_id
        status = rt.PodSandboxStatus(pb.PodSandboxStatusRequest(pod_sandbox_id=id)).status
        assert status.state == pb.SANDBOX_READY
        state = subprocess.run(["runc", "--root", str(runc_root), "state", id],
                               capture_output=True, text=True, check=True).stdout
        pid = json.loads(state)["pid"]
        assert Path(f"/proc/{pid}/comm").read_text() == "catatonit\n"
        assert _cmdline(pid) == ["/catatonit", "-P"]
        rt.StopPodSandbox(pb.StopPodSandboxRequest(pod_sandbox_id=id))
        rt.RemovePodSandbox(pb.RemovePodSandboxRequest(pod_sandbox_id=id))
    finally:
        stop_cri_serve(proc, channel)
    assert own.get(BUILTIN_PAUSE_IMAGE).name == BUILTIN_PAUSE_IMAGE
    assert list((root / "state" / "cri" / "sandboxes").glob("*.json")) == []
    for r in list_rootfs(own):
        remove_rootfs(own, r.container_id)
    assert leaked(before) == []
