"""End to end: images built here, imported in every format and pulled from a real registry,
unpacked, and run with real runc; the file trees of all sources must be identical."""

from __future__ import annotations

import subprocess
import uuid
from pathlib import Path

import pytest

import _leaks
from image.imagebuild import BuiltImage, tar_dir, tree, write_docker_save, write_layout
from podkit import oci
from podkit.image import (
    ImageStore,
    create_rootfs,
    import_image,
    pull,
    push,
    remove_rootfs,
    spec_opts,
)
from support import require_binary, require_isolated

pytestmark = pytest.mark.integration
ENV = {"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}
SCRIPT = ("id -u; id -g; pwd; echo $GREETING; /app/hello; ls /opq; cat /data/keep.txt; "
          "test -e /data/gone.txt || echo gone-absent; test -e /bin/vi || echo vi-absent; "
          "echo written > /tmp/out && cat /tmp/out")


def _run(runc: str, root: Path, bundle: Path, rootfs: Path, store: ImageStore,
         ref: str) -> str:
    spec = oci.runc_spec()
    assert spec.root is not None and spec.process is not None
    spec.root.path = str(rootfs)
    spec.root.readonly = False
    spec.process.terminal = False
    spec = oci.generate(spec, *spec_opts(store.config(ref), command=["/bin/sh", "-c", SCRIPT],
                                         rootfs=rootfs))
    bundle.mkdir()
    spec.dump(bundle / "config.json")
    cid = f"pk-img-{uuid.uuid4().hex[:8]}"
    try:
        out = subprocess.run([runc, "--root", str(root), "run", "--bundle", str(bundle), cid],
                             capture_output=True, text=True, timeout=60, env=ENV,
                             stdin=subprocess.DEVNULL)
    finally:
        subprocess.run([runc, "--root", str(root), "delete", "-f", cid], capture_output=True,
                       timeout=30, env=ENV)
    assert out.returncode == 0, out.stderr
    return out.stdout


def test_run_every_source_with_runc(registry: str, sample: BuiltImage, tmp_path: Path) -> None:
    require_isolated()
    runc = require_binary("runc")
    runc_root = tmp_path / "runc"
    _leaks.register_runtime_root(runc_root)
    store = ImageStore(tmp_path / "state")
    layout = write_layout(tmp_path / "layout", [(sample.descriptor, "v1")], sample.blobs)
    import_image(store, layout, "localhost/src/layout:v1")
    import_image(store, tar_dir(layout, tmp_path / "oci.tar"), "localhost/src/archive:v1")
    import_image(store, write_docker_save(tmp_path / "save.tar", sample, ["localhost/src/save:v1"]))
    pushed = f"{registry}/podkit/run:v1"
    store.tag("localhost/src/layout:v1", pushed)
    push(store, pushed)
    pulled = ImageStore(tmp_path / "pulled")
    pull(pulled, pushed)
    sources = [(store, "localhost/src/layout:v1"), (store, "localhost/src/archive:v1"),
               (store, "localhost/src/save:v1"), (pulled, pushed)]
    trees = []
    for i, (st, ref) in enumerate(sources):
        rootfs = create_rootfs(st, ref, f"pk-img-run{i}")
        try:
            trees.append(tree(rootfs.path))
            out = _run(runc, runc_root, tmp_path / f"bundle{i}", rootfs.path, st, ref).split()
            assert out == ["1000", "1000", "/data", "hi", "hello", "from", "layer", "2", "new",
                           "keep", "gone-absent", "vi-absent", "written"], (ref, out)
            assert (rootfs.path / "tmp" / "out").read_text() == "written\n"
            assert rootfs.mode == "overlay"  # writes land in the container's upper dir only
            assert (st.root / "containers" / f"pk-img-run{i}" / "upper" / "tmp" / "out").exists()
            assert not list((st.root / "snapshots").glob("*/fs/tmp/out"))
        finally:
            remove_rootfs(st, f"pk-img-run{i}")
    assert all(t == trees[0] for t in trees[1:])
