"""Integration: CDI devices and a bind mount injected into a busybox container run by real runc.

runc is driven directly (``runc --root <tmp> run --bundle <dir> pk-cdi-...``); the container
reports what it sees and the test compares it with the CDI spec.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from podkit import cdi, oci
from support import make_busybox_rootfs, require, require_binary, require_root

pytestmark = pytest.mark.integration

RUNTIME_ENV = {"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}

SCRIPT = r"""
stat -c 'node=%n %t:%T %a %F' /dev/pk-zero /dev/pk-null /dev/pk-nothing
echo "zero=$(head -c 4 /dev/pk-zero | od -An -tx1 | tr -d ' ')"
echo hi > /dev/pk-null && echo "null=ok"
head -c 1 /dev/pk-nothing 2>&1 >/dev/null | grep -q 'not permitted' && echo "nothing=denied"
echo "bind=$(cat /mnt/cdi/hello.txt)"
echo "env=$PK_CDI_SPEC,$PK_CDI_DEV,$PK_CDI_WHO"
echo "groups=$(id -G)"
"""


@pytest.fixture
def runc_root(tmp_path: Path) -> Iterator[tuple[str, Path, list[str]]]:
    require_root()
    binary = require_binary("runc")
    root = tmp_path / "runc-root"
    ids: list[str] = []
    try:
        yield binary, root, ids
    finally:
        for cid in ids:
            subprocess.run([binary, "--root", str(root), "delete", "-f", cid],
                           capture_output=True, timeout=30, env=RUNTIME_ENV)
        shutil.rmtree(root, ignore_errors=True)


def test_cdi_devices_in_runc_container(
    runc_root: tuple[str, Path, list[str]], tmp_path: Path
) -> None:
    binary, root, ids = runc_root
    require(Path("/bin/busybox").exists(), "busybox-static not installed (/bin/busybox)")
    for node in ("/dev/zero", "/dev/null", "/dev/kmsg"):
        require(os.path.exists(node), f"host has no {node}")
    rootfs = make_busybox_rootfs(tmp_path / "rootfs")
    (rootfs / "mnt" / "cdi").mkdir(parents=True)
    host_dir = tmp_path / "host"
    host_dir.mkdir()
    (host_dir / "hello.txt").write_text("hello from cdi\n")

    spec_dirs = (tmp_path / "etc-cdi", tmp_path / "run-cdi")
    with cdi.Cache(spec_dirs, auto_refresh=True) as cache:
        cache.write_spec(cdi.Spec(
            kind="podkit.test/dev",
            container_edits=cdi.ContainerEdits(env=["PK_CDI_SPEC=1", "PK_CDI_WHO=spec"]),
            devices=[
                cdi.Device(name="zero", container_edits=cdi.ContainerEdits(
                    env=["PK_CDI_DEV=zero", "PK_CDI_WHO=zero"],
                    device_nodes=[cdi.DeviceNode(path="/dev/pk-zero", host_path="/dev/zero",
                                                 permissions="rw")],
                    mounts=[cdi.Mount(host_path=str(host_dir), container_path="/mnt/cdi",
                                      options=["rbind", "ro"])],
                    additional_gids=[2000],
                )),
                cdi.Device(name="null", container_edits=cdi.ContainerEdits(
                    device_nodes=[cdi.DeviceNode(path="/dev/pk-null", host_path="/dev/null")],
                )),
                cdi.Device(name="nothing", container_edits=cdi.ContainerEdits(
                    device_nodes=[cdi.DeviceNode(path="/dev/pk-nothing", host_path="/dev/kmsg",
                                                 permissions="none")],
                )),
            ],
        ), "podkit.test-dev.yaml")
        assert cache.errors == {}

        spec = oci.runc_spec()
        assert spec.process is not None and spec.root is not None
        spec.root.path = str(rootfs)
        spec.root.readonly = True
        spec.process.terminal = False
        spec.process.args = ["sh", "-c", SCRIPT]
        spec.process.env = [*(spec.process.env or []), "PK_CDI_WHO=image"]
        spec.hostname = "pk-cdi"
        cache.inject_devices(spec, ["podkit.test/dev=zero", "podkit.test/dev=null",
                                    "podkit.test/dev=nothing"])

    bundle = tmp_path / "bundle"
    bundle.mkdir()
    spec.dump(bundle / "config.json")
    cid = f"pk-cdi-{uuid.uuid4().hex[:12]}"
    ids.append(cid)
    proc = subprocess.run(
        [binary, "--root", str(root), "run", "--bundle", str(bundle), cid],
        stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120, env=RUNTIME_ENV,
    )
    assert proc.returncode == 0, proc.stderr + proc.stdout
    lines = proc.stdout.splitlines()
    report = dict(line.split("=", 1) for line in lines if "=" in line and
                  not line.startswith("node="))
    nodes = [line for line in lines if line.startswith("node=")]
    assert nodes == [
        "node=/dev/pk-zero 1:5 666 character special file",
        "node=/dev/pk-null 1:3 666 character special file",
        "node=/dev/pk-nothing 1:b 644 character special file",
    ]
    assert report["zero"] == "00000000"
    assert report["null"] == "ok"
    assert report["nothing"] == "denied"  # permissions "none": node exists, no cgroup access
    assert report["bind"] == "hello from cdi"
    assert report["env"] == "1,zero,zero"
    assert "2000" in report["groups"].split()
