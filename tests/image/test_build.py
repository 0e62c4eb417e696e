"""``image.build_from_rootfs``, ``image.export_image`` and ``podkit image build|export``: the
same tree gives the same bytes, the layout meets the OCI rules (tests/image/ocispec.py),
podkit, and containerd where it is installed, import it, and a failure leaves nothing."""

from __future__ import annotations

import gzip
import io
import json
import os
import shutil
import socket
import subprocess
import tarfile
import time
from collections.abc import Iterator
from pathlib import Path

import attrs
import pytest

from image.imagebuild import tree
from image.ocispec import config_problems, layout_problems
from podkit.cli import main
from podkit.image import (
    ImageConfig,
    ImageError,
    ImageStore,
    Platform,
    ReferenceError,
    build_from_rootfs,
    create_rootfs,
    export_image,
    import_image,
    remove_rootfs,
)
from podkit.image.build import CREATED_BY
from support import require_root

CONFIG = ImageConfig(env=("PATH=/bin", "A=1"), entrypoint=("/bin/sh", "-c"), cmd=("echo hi",),
                     working_dir="/data", user="1000:1000", exposed_ports=("80/tcp",),
                     volumes=("/data",), labels={"org.example": "podkit"},
                     stop_signal="SIGTERM")


def _tree(root: Path) -> Path:
    """Files, a nested dir, a symlink, a hardlink, a FIFO, an executable, odd modes and
    owners, an xattr (kept: user.*) and a socket (left out)."""
    (root / "bin").mkdir(parents=True)
    (root / "bin" / "tool").write_bytes(b"#!/bin/sh\necho tool\n")
    (root / "bin" / "tool").chmod(0o4755)
    (root / "etc" / "deep" / "er").mkdir(parents=True)
    (root / "etc" / "deep" / "er" / "file").write_text("x" * 3000)
    (root / "etc" / "motd").write_text("hello\n")
    os.link(root / "etc" / "motd", root / "etc" / "motd.link")
    (root / "etc" / "sh").symlink_to("/bin/tool")
    (root / "data").mkdir(mode=0o700)
    os.chown(root / "data", 1000, 1000)
    (root / "data" / "owned").write_text("mine\n")
    os.chown(root / "data" / "owned", 1000, 2000)
    os.mkfifo(root / "data" / "fifo")
    os.setxattr(root / "etc" / "motd", "user.podkit", b"yes")
    s = socket.socket(socket.AF_UNIX)
    s.bind(str(root / "data" / "sock"))
    s.close()
    return root


@pytest.fixture
def rootfs(tmp_path: Path) -> Path:
    require_root()  # owners other than the caller's
    return _tree(tmp_path / "rootfs")


def _layer(store: ImageStore, ref: str) -> tarfile.TarFile:
    img = store.get(ref)
    with store.open_blob(img.layers[0].digest) as f:
        data = gzip.decompress(f.read())
    return tarfile.open(fileobj=io.BytesIO(data))


def test_the_same_tree_gives_the_same_digests(rootfs: Path, tmp_path: Path) -> None:
    """Built twice, from a copy elsewhere with other times, into another store: one image ID
    and one manifest digest. A changed byte, mode or owner changes them."""
    a = build_from_rootfs(ImageStore(tmp_path / "a"), rootfs, "localhost/t:1", config=CONFIG)
    again = build_from_rootfs(ImageStore(tmp_path / "a"), rootfs, "localhost/t:2",
                              config=CONFIG)
    copy = tmp_path / "elsewhere" / "copy"
    shutil.copytree(rootfs, copy, symlinks=True, copy_function=shutil.copy,  # new mtimes
                    ignore=shutil.ignore_patterns("sock", "fifo"))
    os.mkfifo(copy / "data" / "fifo")
    for d, _, files in os.walk(copy):
        for f in files:
            if not (Path(d) / f).is_symlink():
                os.utime(Path(d) / f, (1, 1))
    os.link(copy / "etc" / "motd", copy / "etc" / "motd.tmp")  # the same hardlink again
    os.replace(copy / "etc" / "motd.tmp", copy / "etc" / "motd.link")
    for path, st in ((copy / "data", (1000, 1000)), (copy / "data" / "owned", (1000, 2000))):
        os.chown(path, *st)
    os.setxattr(copy / "etc" / "motd", "user.podkit", b"yes")
    time.sleep(0.01)
    b = build_from_rootfs(ImageStore(tmp_path / "b"), copy, "localhost/other:9", config=CONFIG)
    assert a.manifest.digest == again.manifest.digest == b.manifest.digest
    assert a.config.digest == b.config.digest and a.layers == b.layers
    (copy / "etc" / "motd").write_text("hellO\n")
    changed = build_from_rootfs(ImageStore(tmp_path / "b"), copy, "localhost/other:9",
                                config=CONFIG)
    assert changed.layers[0].digest != a.layers[0].digest
    rooted = build_from_rootfs(ImageStore(tmp_path / "a"), rootfs, "localhost/t:3",
                               config=CONFIG, owner=(0, 0))
    assert rooted.layers[0].digest != a.layers[0].digest


def test_layer_entries(rootfs: Path, tmp_path: Path) -> None:
    store = ImageStore(tmp_path / "s")
    build_from_rootfs(store, rootfs, "localhost/t:1", mtime=1234)
    with _layer(store, "localhost/t:1") as tar:
        members = {m.name.rstrip("/"): m for m in tar.getmembers()}
        names = [m.name.rstrip("/") for m in tar.getmembers()]
    assert names == ["bin", "bin/tool", "data", "data/fifo", "data/owned", "etc", "etc/deep",
                     "etc/deep/er", "etc/deep/er/file", "etc/motd", "etc/motd.link", "etc/sh"]
    assert {m.mtime for m in members.values()} == {1234}
    assert {(m.uname, m.gname) for m in members.values()} == {("", "")}
    assert members["bin/tool"].mode == 0o4755 and members["data"].mode == 0o700
    assert (members["data/owned"].uid, members["data/owned"].gid) == (1000, 2000)
    assert members["etc/motd.link"].islnk() and members["etc/motd.link"].linkname == "etc/motd"
    assert members["etc/sh"].issym() and members["etc/sh"].linkname == "/bin/tool"
    assert members["data/fifo"].isfifo()
    assert members["etc/motd"].pax_headers.get("SCHILY.xattr.user.podkit") == "yes"
    build_from_rootfs(store, rootfs, "localhost/t:2", owner=(0, 0))
    with _layer(store, "localhost/t:2") as tar:
        assert {(m.uid, m.gid) for m in tar.getmembers()} == {(0, 0)}


def test_config_and_manifest(rootfs: Path, tmp_path: Path) -> None:
    store = ImageStore(tmp_path / "s")
    img = build_from_rootfs(store, rootfs, "localhost/t:1", config=CONFIG,
                            platform=Platform("linux", "arm64", "v8"))
    doc = json.loads(store.read_blob(img.config.digest))
    assert config_problems(doc) == []
    assert doc["config"] == {
        "Env": ["PATH=/bin", "A=1"], "Entrypoint": ["/bin/sh", "-c"], "Cmd": ["echo hi"],
        "WorkingDir": "/data", "User": "1000:1000", "ExposedPorts": {"80/tcp": {}},
        "Volumes": {"/data": {}}, "Labels": {"org.example": "podkit"},
        "StopSignal": "SIGTERM"}
    assert (doc["os"], doc["architecture"], doc["variant"]) == ("linux", "arm64", "v8")
    assert doc["rootfs"] == {"type": "layers", "diff_ids": list(img.diff_ids)}
    assert doc["history"] == [{"created_by": CREATED_BY}] and "created" not in doc
    assert store.config(img) == attrs.evolve(CONFIG, os="linux", architecture="arm64")
    assert str(img.platform) == "linux/arm64/v8" and img.name == "localhost/t:1"


@pytest.mark.parametrize("form", ["dir", "tar"])
def test_export_meets_the_oci_layout_rules_and_imports_back(rootfs: Path, tmp_path: Path,
                                                            form: str) -> None:
    store = ImageStore(tmp_path / "s")
    img = build_from_rootfs(store, rootfs, "localhost/team/t:1", config=CONFIG)
    build_from_rootfs(store, rootfs, "localhost/team/t:2", config=ImageConfig(cmd=("sh",)))
    dest = tmp_path / ("out.tar" if form == "tar" else "out")
    assert export_image(store, ["localhost/team/t:1", "localhost/team/t:2"], dest) == dest
    layout = dest
    if form == "tar":
        layout = tmp_path / "unpacked"
        with tarfile.open(dest) as tar:
            tar.extractall(layout, filter="data")
    assert layout_problems(layout) == []
    index = json.loads((layout / "index.json").read_text())
    assert [m["annotations"] for m in index["manifests"]] == [
        {"io.containerd.image.name": "localhost/team/t:1",
         "org.opencontainers.image.ref.name": "1"},
        {"io.containerd.image.name": "localhost/team/t:2",
         "org.opencontainers.image.ref.name": "2"}]
    other = ImageStore(tmp_path / "other")
    back = import_image(other, dest)
    assert [(i.name, i.manifest.digest) for i in back] == [
        ("localhost/team/t:1", img.manifest.digest),
        ("localhost/team/t:2", store.get("localhost/team/t:2").manifest.digest)]
    made = create_rootfs(other, "localhost/team/t:1", "ctr1", mode="copy")
    try:
        want = {k: v for k, v in tree(rootfs).items() if k != "data/sock"}
        got = tree(made.path)
        assert {k: v[:4] for k, v in got.items()} == {k: v[:4] for k, v in want.items()}
    finally:
        remove_rootfs(other, "ctr1")


def test_bad_input_leaves_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = ImageStore(tmp_path / "s")
    with pytest.raises(ImageError, match=f"image build: {tmp_path}/nope: not a directory"):
        build_from_rootfs(store, tmp_path / "nope", "localhost/t:1")
    (tmp_path / "file").write_text("x")
    with pytest.raises(ImageError, match="not a directory"):
        build_from_rootfs(store, tmp_path / "file", "localhost/t:1")
    (tmp_path / "root").mkdir()
    with pytest.raises(ReferenceError):
        build_from_rootfs(store, tmp_path / "root", "Bad Name")
    with pytest.raises(ReferenceError, match="by tag, not by digest"):
        build_from_rootfs(store, tmp_path / "root", "localhost/t@sha256:" + "a" * 64)
    # a file that cannot be read half-way: no record, no blob, no temp file
    (tmp_path / "root" / "a").write_text("a")
    (tmp_path / "root" / "b").write_text("b")
    real_open = open

    def failing_open(path: object, *args: object, **kw: object) -> object:
        if str(path).endswith("/root/b"):
            raise PermissionError(13, "Permission denied", str(path))
        return real_open(path, *args, **kw)  # type: ignore[call-overload]

    import podkit.image.build as build

    monkeypatch.setattr(build, "open", failing_open, raising=False)
    with pytest.raises(ImageError, match=f"cannot read {tmp_path}/root/b: Permission denied"):
        build_from_rootfs(store, tmp_path / "root", "localhost/t:1")
    assert store.list() == []
    assert list((store.root / "ingest").iterdir()) == []
    assert list((store.root / "blobs" / "sha256").iterdir()) == []


def test_export_errors_leave_nothing(tmp_path: Path) -> None:
    store = ImageStore(tmp_path / "s")
    (tmp_path / "root").mkdir()
    build_from_rootfs(store, tmp_path / "root", "localhost/t:1")
    (tmp_path / "taken").mkdir()
    with pytest.raises(ImageError, match="exists already"):
        export_image(store, "localhost/t:1", tmp_path / "taken")
    with pytest.raises(ImageError, match="not found"):
        export_image(store, ["localhost/t:1", "localhost/none:1"], tmp_path / "x.tar")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["root", "s", "taken"]


def test_an_empty_directory_is_an_image_of_one_empty_layer(tmp_path: Path) -> None:
    store = ImageStore(tmp_path / "s")
    (tmp_path / "empty").mkdir()
    build_from_rootfs(store, tmp_path / "empty", "localhost/empty:1")
    with _layer(store, "localhost/empty:1") as tar:
        assert tar.getmembers() == []
    export_image(store, "localhost/empty:1", tmp_path / "l")
    assert layout_problems(tmp_path / "l") == []


def test_cli_build_and_export(rootfs: Path, tmp_path: Path,
                              capsys: pytest.CaptureFixture[str]) -> None:
    root = str(tmp_path / "state")
    args = ["image", "build", "--root", root, "--from-dir", str(rootfs), "localhost/cli:1",
            "--entrypoint", '["/bin/sh", "-c"]', "--cmd", "echo 'hi there'", "--env", "A=1",
            "--env", "B=x=y", "--workdir", "/data", "--user", "app", "--label", "k=v",
            "--owner", "0:0"]
    assert main(args) == 0
    name, digest = capsys.readouterr().out.split()
    store = ImageStore(root)
    assert (name, digest) == ("localhost/cli:1", store.get(name).manifest.digest)
    cfg = store.config(name)
    assert (cfg.entrypoint, cfg.cmd, cfg.env, cfg.working_dir, cfg.user, cfg.labels) == (
        ("/bin/sh", "-c"), ("echo", "hi there"), ("A=1", "B=x=y"), "/data", "app", {"k": "v"})
    assert main(args) == 0 and capsys.readouterr().out.split()[1] == digest  # the same again
    assert main(["image", "export", "--root", root, str(tmp_path / "o.tar"), name]) == 0
    assert capsys.readouterr().out.strip() == str(tmp_path / "o.tar")
    for bad, message in (
            (["--env", "NOEQUALS"], "--env 'NOEQUALS': want KEY=VALUE"),
            (["--label", "=v"], "--label '=v': want KEY=VALUE"),
            (["--owner", "root"], "--owner 'root': want UID:GID"),
            (["--cmd", '["a", 1]'], "--cmd '[\"a\", 1]': not a list of strings"),
            (["--cmd", "'unclosed"], "--cmd \"'unclosed\": No closing quotation")):
        assert main([*args[:7], *bad]) == 2, bad
        assert message in capsys.readouterr().err
    assert main(["image", "build", "--root", root, "--from-dir", str(tmp_path / "nope"),
                 "localhost/x:1"]) == 1
    assert "not a directory" in capsys.readouterr().err


# -- containerd ---------------------------------------------------------------------------


@pytest.fixture
def containerd(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """A private containerd (no CRI plugin) on a socket under ``tmp_path``; skipped where
    Debian's containerd is not installed (``make bench`` installs it, ``make test`` does
    not: the OCI rules above are the check that always runs)."""
    require_root()
    if not (shutil.which("containerd") and shutil.which("ctr")):
        pytest.skip("containerd and ctr not installed (apt-get install containerd)")
    base = tmp_path / "containerd"
    base.mkdir()
    (base / "config.toml").write_text(
        f'version = 2\nroot = "{base}/root"\nstate = "{base}/state"\n'
        'disabled_plugins = ["io.containerd.grpc.v1.cri", "io.containerd.internal.v1.opt", '
        '"io.containerd.internal.v1.tracing", "io.containerd.tracing.processor.v1.otlp", '
        '"io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", '
        '"io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.aufs"]\n'
        f'[grpc]\n  address = "{base}/c.sock"\n[ttrpc]\n  address = "{base}/c.sock.ttrpc"\n'
        '[debug]\n  address = ""\n[metrics]\n  address = ""\n')
    log = open(base / "log", "wb")  # noqa: SIM115
    # its own mount namespace: the overlay mounts of its unpack vanish with it
    proc = subprocess.Popen(["unshare", "--mount", "--propagation", "private", "containerd",
                             "--config", str(base / "config.toml")], stdout=log, stderr=log)
    try:
        for _ in range(200):
            if (base / "c.sock").exists():
                break
            time.sleep(0.05)
        else:
            pytest.fail(f"containerd did not start: {(base / 'log').read_text()[-2000:]}")
        yield str(base / "c.sock"), base
    finally:
        proc.terminate()
        proc.wait(30)
        log.close()


@pytest.mark.integration
def test_containerd_imports_and_unpacks_it(rootfs: Path, tmp_path: Path,
                                           containerd: tuple[str, Path]) -> None:
    """``ctr images import`` reads the archive and unpacks the layer (its diff ID checked
    against the config): the image and its snapshot are there, as podkit named them."""
    sock, _ = containerd
    store = ImageStore(tmp_path / "s")
    img = build_from_rootfs(store, rootfs, "localhost/team/t:1", config=CONFIG)
    export_image(store, img.name, tmp_path / "t.tar")
    ctr = ["ctr", "--address", sock]
    out = subprocess.run([*ctr, "images", "import", str(tmp_path / "t.tar")],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    listed = subprocess.run([*ctr, "images", "ls", "-q"], capture_output=True, text=True,
                            check=True).stdout.split()
    assert listed == ["localhost/team/t:1"]
    check = subprocess.run([*ctr, "images", "check"], capture_output=True, text=True,
                           check=True).stdout
    assert img.manifest.digest in check and "complete" in check
    snaps = subprocess.run([*ctr, "snapshots", "ls"], capture_output=True, text=True,
                           check=True).stdout
    assert img.diff_ids[0] in snaps
