"""SandboxManager with an image store: containers and the pause from image references, the
image config's defaults, one rootfs per container removed with it, crash recovery, bad refs."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import attrs
import pytest

import _leaks
from cri.helpers import start_cri_serve, stop_cri_serve
from image.imagebuild import Layer, build_image, write_layout
from podkit.container import ContainerConfigError
from podkit.errors import NotFoundError
from podkit.image import ImageConfig, ImageStore, import_image, list_rootfs, parse_reference
from podkit.pods.config import ContainerConfig, LinuxContainerConfig, LinuxContainerSecurityContext
from podkit.pods.images import image_defaults, signal_number
from podkit.runtime import Runc, read_cri_log
from podkit.sandbox import ContainerState, PauseConfig, SandboxManager, default_networks
from support import REPO

from ._pods import BRIDGE, ctr_config, leaked, leftovers, pod_config, snapshot

APP = "localhost/pk-pod/app:1"
PAUSE = "localhost/pk-pod/pause:1"
APP_CONFIG = {
    "Env": ["PATH=/bin", "GREETING=hello-from-image"],
    "Entrypoint": ["/bin/sh", "-c"],
    "Cmd": ['trap "echo got-usr1; exit 7" USR1; echo "$GREETING $(pwd) $(id -u):$(id -g)"; '
            "while true; do sleep 1; done"],
    "WorkingDir": "/data",
    "User": "app",
    "StopSignal": "SIGUSR1",
}
PAUSE_CONFIG = {"Env": ["PATH=/bin"], "Entrypoint": ["sleep"], "Cmd": ["2147483647"]}


# -- unit: image config to defaults ---------------------------------------------------------


def test_signal_number_accepts_image_spellings() -> None:
    assert signal_number("SIGTERM", "x") == signal.SIGTERM
    assert signal_number("usr1", "x") == signal.SIGUSR1
    assert signal_number("9", "x") == 9
    assert signal_number("SIGRTMIN+3", "x") == signal.SIGRTMIN + 3
    assert signal_number("SIGRTMAX-2", "x") == signal.SIGRTMAX - 2
    assert [signal_number(n, "x") for n in ("31", "34", "64", "SIGRTMAX")] == [31, 34, 64, 64]
    # only what the CRI Signal enum can name: 32 and 33 (glibc's) and past SIGRTMAX are not
    for bad in ("SIGNOPE", "0", "999", "SIGRTMIN+x", "32", "33", "65", "SIGRTMAX+1",
                "SIGRTMIN-1", "RUNTIME_DEFAULT"):
        message = re.escape(f"StopSignal of image a: unknown signal {bad!r}")
        with pytest.raises(ContainerConfigError, match=message):
            signal_number(bad, "StopSignal of image a")


def test_image_defaults_from_config() -> None:
    from podkit.image import Image

    img = Image.__new__(Image)
    object.__setattr__(img, "name", "docker.io/library/a:1")
    cfg = ImageConfig(env=("A=1",), entrypoint=("",), cmd=("run",), working_dir="/w",
                      user="app:app")
    d = image_defaults(img, cfg)
    assert (d.env, d.entrypoint, d.cmd, d.working_dir, d.user, d.name) == (
        ("A=1",), (), ("run",), "/w", "app:app", "docker.io/library/a:1")
    d = image_defaults(img, ImageConfig())
    assert (d.entrypoint, d.cmd, d.working_dir, d.user) == ((), (), "", "")


# -- integration ----------------------------------------------------------------------------

@pytest.fixture(scope="module")
def layouts(busybox_rootfs: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """OCI layouts: busybox + a layer with user ``app`` and ``/data``; the pause image."""
    base = Layer().tree(busybox_rootfs).bytes()
    extra = (Layer().dir("etc")
             .file("etc/passwd", b"root:x:0:0:root:/root:/bin/sh\n"
                   b"app:x:1000:1001:app:/data:/bin/sh\n")
             .file("etc/group", b"root:x:0:\napp:x:1001:\n")
             .dir("data", 0o755, uid=1000, gid=1001).bytes())
    out = {}
    tmp = tmp_path_factory.mktemp("pod-images")
    for name, layers, config in ((APP, [base, extra], APP_CONFIG),
                                 (PAUSE, [base], PAUSE_CONFIG)):
        img = build_image(layers, ["gzip"] * len(layers), config)
        out[name] = write_layout(tmp / name.rsplit("/", 1)[1].replace(":", "-"),
                                 [(img.descriptor, None)], img.blobs)
    return out


@pytest.fixture(scope="module")
def store(bridge: None, layouts: dict[str, Path],
          tmp_path_factory: pytest.TempPathFactory) -> Iterator[ImageStore]:
    """A store with both images and the shared pause rootfs (made here, before the per-test
    leak baselines; removed at the end)."""
    from podkit.image import remove_rootfs
    from podkit.sandbox import pause_config

    s = ImageStore(tmp_path_factory.mktemp("pod-store"))
    for name, layout in layouts.items():
        import_image(s, layout, name)
    pause_config(s, PAUSE)
    yield s
    for r in list_rootfs(s):
        remove_rootfs(s, r.container_id)


def _manager(base: Path, store: ImageStore, **kw: object) -> SandboxManager:
    _leaks.register_runtime_root(base / "runc")
    _leaks.register_ipam_dir(base / "state" / "ipam")
    nets = default_networks(base / "state", bridge=BRIDGE, name="pk-pod-net")
    kw.setdefault("pause", PauseConfig(image=PAUSE))
    return SandboxManager(base / "root", base / "state", Runc("runc", root=base / "runc"), nets,
                          netns_prefix="pk-pod-", images=store,
                          **kw)  # type: ignore[arg-type]


def _container_rootfs(store: ImageStore) -> set[str]:
    """Container rootfs in the store other than the shared pause one."""
    return {r.container_id for r in list_rootfs(store)
            if not r.container_id.startswith("cri-pause-")}


def _mounted(path: Path) -> bool:
    return any(line.split()[4] == str(path)
               for line in Path("/proc/self/mountinfo").read_text().splitlines())


@pytest.fixture
def mgr(store: ImageStore, tmp_path: Path) -> Iterator[SandboxManager]:
    before = snapshot()
    m = _manager(tmp_path / "m", store)
    try:
        yield m
    finally:
        m.remove_all()
        m.close()
    assert leftovers(tmp_path / "m", m) == []
    assert _container_rootfs(store) == set()
    assert leaked(before) == []


def _cfg(name: str, image: str, command: tuple[str, ...] = (), **kw: object) -> ContainerConfig:
    """A container of ``image`` (reference, ID or digest) with its own pid namespace."""
    return attrs.evolve(ctr_config(Path("/"), name, command), image=image,
                        **kw)  # type: ignore[arg-type]


def _log(m: SandboxManager, id: str) -> str:
    path = m.container_log_file(id)
    return "".join(line.content.decode() + "\n" for line in read_cri_log(path))


def _wait_log(m: SandboxManager, id: str, text: str) -> str:
    for _ in range(200):
        out = _log(m, id) if Path(m.container_log_file(id)).exists() else ""
        if text in out:
            return out
        time.sleep(0.05)
    raise AssertionError(f"{text!r} not in the log of {id}: {out!r}")


@pytest.mark.integration
def test_pause_from_image_is_shared(mgr: SandboxManager, store: ImageStore) -> None:
    assert mgr.pause is not None
    assert mgr.pause.args == ("sleep", "2147483647") and mgr.pause.env == ("PATH=/bin",)
    assert mgr.pause.image == str(parse_reference(PAUSE))
    assert [r.path for r in list_rootfs(store) if r.container_id.startswith("cri-pause-")] == [
        Path(mgr.pause.rootfs)]
    sb = mgr.run_sandbox(pod_config())
    assert mgr.sandbox_status(sb.id).pid > 0


@pytest.mark.integration
def test_container_from_image_gets_the_image_defaults(
    mgr: SandboxManager, store: ImageStore
) -> None:
    sb = mgr.run_sandbox(pod_config())
    cid = mgr.create_container(sb.id, _cfg("app", APP))
    c = mgr.container_status(cid)
    assert c.image_ref == str(parse_reference(APP)) and c.rootfs_key == cid
    assert c.config.image == APP and c.config.stop_signal == signal.SIGUSR1
    assert _container_rootfs(store) == {cid}
    spec = json.loads((mgr.root_dir / "containers" / cid / "bundle" / "config.json").read_text())
    assert spec["root"]["path"] == str(store.root / "containers" / cid / "rootfs")
    assert spec["process"]["args"][:2] == ["/bin/sh", "-c"]
    assert spec["process"]["cwd"] == "/data"
    assert (spec["process"]["user"]["uid"], spec["process"]["user"]["gid"]) == (1000, 1001)
    assert "GREETING=hello-from-image" in spec["process"]["env"]
    mgr.start_container(cid)
    assert _wait_log(mgr, cid, "hello-from-image").startswith("hello-from-image /data 1000:1001")
    mgr.stop_container(cid, timeout=30)  # the image's StopSignal (USR1) runs the trap
    assert mgr.container_status(cid).exit_code == 7
    assert "got-usr1" in _log(mgr, cid)
    rootfs = store.root / "containers" / cid / "rootfs"
    mgr.remove_container(cid)
    assert not _mounted(rootfs) and not rootfs.parent.exists()
    assert _container_rootfs(store) == set()


@pytest.mark.integration
def test_command_override_and_separate_rootfs(mgr: SandboxManager, store: ImageStore) -> None:
    sb = mgr.run_sandbox(pod_config())
    image_id = store.get(APP).config.digest
    a = mgr.create_container(sb.id, _cfg("a", image_id, ("sleep", "3600")))
    b = mgr.create_container(sb.id, _cfg("b", APP,
                                         args=["echo args-only $GREETING; sleep 3600"]))
    for cid in (a, b):
        mgr.start_container(cid)
    assert _wait_log(mgr, b, "args-only") == "args-only hello-from-image\n"  # entrypoint kept
    spec = json.loads((mgr.root_dir / "containers" / a / "bundle" / "config.json").read_text())
    assert spec["process"]["args"] == ["sleep", "3600"]  # command replaces entrypoint + cmd
    res = mgr.exec_sync(a, ["sh", "-c", "echo mine > /data/file && cat /data/file"], 10)
    assert (res.exit_code, res.stdout) == (0, b"mine\n")
    assert mgr.exec_sync(b, ["test", "-e", "/data/file"], 10).exit_code == 1
    assert _container_rootfs(store) == {a, b}
    mgr.remove_sandbox(sb.id)
    assert _container_rootfs(store) == set()
    assert not any(_mounted(store.root / "containers" / x / "rootfs") for x in (a, b))


@pytest.mark.integration
def test_unknown_image_is_not_found_and_creates_nothing(
    mgr: SandboxManager, store: ImageStore, tmp_path: Path
) -> None:
    sb = mgr.run_sandbox(pod_config())
    for ref in ("localhost/pk-pod/nope:1", "sha256:" + "0" * 64):
        with pytest.raises(NotFoundError, match=f"image {ref!r}: not found in the image store"):
            mgr.create_container(sb.id, _cfg("x", ref, ("true",)))
    with pytest.raises(ContainerConfigError, match="'Bad Ref'"):
        mgr.create_container(sb.id, _cfg("x", "Bad Ref", ("true",)))
    assert mgr.list_containers() == []
    assert list((tmp_path / "m" / "state" / "containers").iterdir()) == []
    assert list((tmp_path / "m" / "root" / "containers").iterdir()) == []
    assert _container_rootfs(store) == set()
    # the name was not kept either
    ok = mgr.create_container(sb.id, _cfg("x", APP, ("true",)))
    assert mgr.container_status(ok).state == ContainerState.CONTAINER_CREATED


@pytest.mark.integration
def test_failure_after_the_rootfs_removes_it(mgr: SandboxManager, store: ImageStore) -> None:
    sb = mgr.run_sandbox(pod_config())
    bad = _cfg("x", APP, linux=LinuxContainerConfig(security_context=(
        LinuxContainerSecurityContext(run_as_username="nobody-here"))))
    with pytest.raises(Exception, match="nobody-here"):
        mgr.create_container(sb.id, bad)
    assert _container_rootfs(store) == set()
    assert mgr.list_containers() == []


_CHILD = """
import sys, time
sys.path.insert(0, {tests!r})
from pathlib import Path
import podkit.image
from podkit.image import ImageStore
from sandbox.test_manager_images import APP, _cfg, _manager as make
from sandbox._pods import pod_config
m = make(Path({base!r}), ImageStore({store!r}))
sb = m.run_sandbox(pod_config())
original = podkit.image.create_rootfs
def hang(*a, **kw):
    r = original(*a, **kw)
    print("ROOTFS", flush=True)
    time.sleep(600)
podkit.image.create_rootfs = hang  # the manager calls it through the module
m.create_container(sb.id, _cfg("app", APP))
"""


@pytest.mark.integration
def test_crash_after_the_rootfs_is_undone_by_recover(
    store: ImageStore, tmp_path: Path
) -> None:
    before = snapshot()
    base = tmp_path / "m"
    code = textwrap.dedent(_CHILD).format(tests=str(REPO / "tests"), base=str(base),
                                          store=str(store.root.parent))
    child = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True, cwd=REPO)
    try:
        assert child.stdout is not None
        line = child.stdout.readline().strip()
        assert line == "ROOTFS", child.stderr.read() if child.stderr else ""
    finally:
        os.kill(child.pid, signal.SIGKILL)
        child.wait()
    [key] = _container_rootfs(store)
    assert _mounted(store.root / "containers" / key / "rootfs") or \
        (store.root / "containers" / key / "rootfs").is_dir()
    m = _manager(base, store)
    try:
        report = m.recover()
        assert key in report.rolled_back and report.errors == ()
        assert len(report.sandboxes) == 1
        assert _container_rootfs(store) == set()
        assert not (store.root / "containers" / key).exists()
        m.remove_all()
    finally:
        m.close()
    assert leftovers(base, m) == []
    assert leaked(before) == []


POD_YAML = """
sandbox:
  metadata: {{name: pk-pod-img, namespace: demo}}
  log_directory: {logs}
containers:
  - metadata: {{name: app}}
    image: {image}
    log_path: app.log
pause: {{image: {pause}}}
"""


def test_pod_file_pause_image(tmp_path: Path) -> None:
    from podkit._cli.pod import load_pod_file
    from podkit.errors import InvalidArgumentError

    f = tmp_path / "pod.yaml"
    f.write_text(POD_YAML.format(logs="/l", image=APP, pause=PAUSE))
    pod = load_pod_file(f)
    assert (pod.pause_image, pod.pause_rootfs, pod.containers[0].image) == (PAUSE, "", APP)
    f.write_text(f.read_text().replace("pause: {image: ", "pause: {rootfs: /r, image: "))
    with pytest.raises(InvalidArgumentError, match="only 'rootfs' or only 'image'"):
        load_pod_file(f)


@pytest.mark.integration
def test_pod_cli_runs_images_from_the_image_root(
    store: ImageStore, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from podkit.cli import main

    _leaks.register_runtime_root(tmp_path / "state" / "runc")
    _leaks.register_ipam_dir(tmp_path / "state" / "ipam")
    before = snapshot()
    args = ["--root", str(tmp_path / "root"), "--state", str(tmp_path / "state"),
            "--image-root", str(store.root.parent)]
    f = tmp_path / "pod.yaml"
    f.write_text(POD_YAML.format(logs=tmp_path / "logs", image=APP, pause=PAUSE))
    try:
        assert main(["pod", "run", str(f), *args]) == 0, capsys.readouterr().err
        assert "app:RUNNING" in capsys.readouterr().out
        assert len(_container_rootfs(store)) == 1
        assert main(["pod", "exec", *args, "pk-pod-img", "app", "--", "sh", "-c",
                     "echo $GREETING; pwd; id -u"]) == 0
        assert capsys.readouterr().out == "hello-from-image\n/data\n1000\n"
        f.write_text(POD_YAML.format(logs=tmp_path / "logs", image="localhost/pk-pod/nope:2",
                                     pause=PAUSE).replace("pk-pod-img", "pk-pod-img2"))
        assert main(["pod", "run", str(f), *args]) == 3  # not found (docs/cli.md)
        assert "'localhost/pk-pod/nope:2': not found" in capsys.readouterr().err
        assert main(["pod", "rm", "pk-pod-img", *args]) == 0
        assert _container_rootfs(store) == set()
    finally:
        main(["pod", "rm", "pk-pod-img", *args])
        subprocess.run(["ip", "link", "del", "pk0"], check=False, capture_output=True)
    assert leaked(before) == []


def test_pause_needs_a_rootfs_or_an_image_in_a_store(tmp_path: Path) -> None:
    from podkit.errors import InvalidArgumentError

    for pause, message in ((PauseConfig(), "give a rootfs directory or an image"),
                           (PauseConfig(image=PAUSE), "needs an image store")):
        with pytest.raises(InvalidArgumentError, match=message):
            SandboxManager(tmp_path / "root", tmp_path / "state", Runc("runc"), None,
                           pause=pause)
    assert not (tmp_path / "state").exists()


# -- issue 11 defect 15: the shared pause rootfs is unmounted when no pod uses it ------------


def _mounts_under(root: Path) -> list[str]:
    """Mount points at or below ``root`` (from /proc/self/mountinfo)."""
    points = [line.split()[4] for line in
              Path("/proc/self/mountinfo").read_text().splitlines()]
    return [p for p in points if p == str(root) or p.startswith(f"{root}/")]


def _mount_id(path: Path) -> str:
    """The mount ID of the mount at ``path`` ("" when nothing is mounted there)."""
    return next((line.split()[0] for line in
                 Path("/proc/self/mountinfo").read_text().splitlines()
                 if line.split()[4] == str(path)), "")


@pytest.mark.integration
def test_pause_rootfs_kept_for_the_next_pod_until_remove_all(
    mgr: SandboxManager, store: ImageStore
) -> None:
    """Mounted while pods use it and still after the last one goes: the next pod starts on
    the same mount (not made again); remove_all() leaves nothing mounted under the store,
    and the pod after that mounts it again."""
    assert mgr.pause is not None
    pause = Path(mgr.pause.rootfs)
    a = mgr.run_sandbox(pod_config())
    b = mgr.run_sandbox(pod_config())
    first = _mount_id(pause)
    assert first
    mgr.remove_sandbox(a.id)
    mgr.remove_sandbox(b.id)
    assert _mount_id(pause) == first  # kept for the next pod
    c = mgr.run_sandbox(pod_config())
    assert _mount_id(pause) == first and mgr.sandbox_status(c.id).pid > 0
    mgr.remove_all()
    assert _mounts_under(store.root) == []
    d = mgr.run_sandbox(pod_config())  # made again for the next pod
    assert _mounted(pause) and mgr.sandbox_status(d.id).pid > 0
    mgr.remove_sandbox(d.id)
    assert _mounted(pause)
    mgr.close()
    assert _mounts_under(store.root) == []


@pytest.mark.integration
def test_close_and_recover_unmount_an_unused_pause_rootfs(
    store: ImageStore, tmp_path: Path
) -> None:
    """close() leaves the mount to pods that still run; recover() by the next manager keeps it
    for the pods it adopts, and remove_all() then leaves nothing mounted. A rootfs left
    mounted by a process that died with no pods is unmounted by recover()."""
    before = snapshot()
    base = tmp_path / "m"
    m = _manager(base, store)
    assert m.pause is not None
    pause = Path(m.pause.rootfs)
    try:
        sb = m.run_sandbox(pod_config())
    finally:
        m.close()
    assert _mounted(pause)  # a pod still runs on it
    m = _manager(base, store)
    try:
        report = m.recover()
        assert report.sandboxes == (sb.id,) and _mounted(pause)
        m.remove_all()
        assert _mounts_under(store.root) == []
    finally:
        m.close()
    from podkit.sandbox import pause_config

    pause_config(store, PAUSE)  # mounted again, as a process that died would leave it
    assert _mounted(pause)
    m = _manager(base, store)
    try:
        assert m.recover().errors == ()
        assert _mounts_under(store.root) == []
    finally:
        m.close()
    assert leftovers(base, m) == []
    assert leaked(before) == []


class _Serve:
    """``podkit cri serve`` as a child process, with a RuntimeService stub."""

    def __init__(self, root: Path, conf_dir: Path, sock: Path) -> None:
        from podkit.cri import api_pb2_grpc

        self.proc, self.channel = start_cri_serve(
            sock, "--root", str(root), "--cni-conf-dir", str(conf_dir), "--cni-bin-dir",
            "/usr/lib/cni", "--runtime", "runc", "--pause-image", PAUSE)
        self.rt = api_pb2_grpc.RuntimeServiceStub(self.channel)

    def run_pod(self) -> str:
        from podkit.cri import api_pb2 as pb

        cfg = pb.PodSandboxConfig(metadata=pb.PodSandboxMetadata(
            name=f"pk-pod-{os.urandom(4).hex()}", uid=os.urandom(8).hex(), namespace="pk"))
        cfg.linux.security_context.namespace_options.network = pb.POD
        return str(self.rt.RunPodSandbox(pb.RunPodSandboxRequest(config=cfg)).pod_sandbox_id)

    def remove_pod(self, id: str) -> None:
        from podkit.cri import api_pb2 as pb

        self.rt.StopPodSandbox(pb.StopPodSandboxRequest(pod_sandbox_id=id))
        self.rt.RemovePodSandbox(pb.RemovePodSandboxRequest(pod_sandbox_id=id))

    def stop(self) -> str:
        return stop_cri_serve(self.proc, self.channel)


@pytest.mark.integration
def test_cri_serve_leaves_nothing_mounted(bridge: None, layouts: dict[str, Path],
                                          tmp_path: Path) -> None:
    """``podkit cri serve``: the pause rootfs stays mounted after the last pod goes (for the
    next pod); a server stopped with a pod running leaves it to that pod, and the next server,
    stopped once the pod is removed, unmounts it. Then the root can be deleted (no EBUSY)."""
    import shutil

    from podkit.image import import_image
    from podkit.sandbox import default_network_config

    before = snapshot()
    root = tmp_path / "root"
    import_image(ImageStore(root), layouts[PAUSE], PAUSE)
    default_network_config(tmp_path / "net", name="pk-pod-net", bridge=BRIDGE)
    _leaks.register_runtime_root(root / "state" / "cri" / "runc")
    _leaks.register_ipam_dir(tmp_path / "net" / "ipam")
    sock = tmp_path / "cri.sock"
    servers: list[_Serve] = []
    try:
        s = _Serve(root, tmp_path / "net" / "net.d", sock)
        servers.append(s)
        pod = s.run_pod()
        assert [m for m in _mounts_under(root) if "/cri-pause-" in m]  # the pause rootfs
        s.remove_pod(pod)
        assert [m for m in _mounts_under(root) if "/cri-pause-" in m]  # kept for the next pod
        pod = s.run_pod()
        s.stop()
        assert [m for m in _mounts_under(root) if "/cri-pause-" in m]  # the pod runs on it
        s = _Serve(root, tmp_path / "net" / "net.d", sock)
        servers.append(s)
        s.remove_pod(pod)
        assert [m for m in _mounts_under(root) if "/cri-pause-" in m]
        s.stop()
        assert _mounts_under(root) == []
    finally:
        for s in servers:
            if s.proc.poll() is None:
                s.proc.kill()
                s.proc.wait()
    assert _mounts_under(root) == []
    shutil.rmtree(root)
    assert leaked(before) == []
