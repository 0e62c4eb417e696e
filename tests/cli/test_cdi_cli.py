"""CDI devices for ``pod run`` and ``kube play`` (issue 24): ``--cdi-spec-dir`` (and
``cdi.spec_dirs``), ``--device vendor/class=name``, a pod file's ``cdi_devices`` and a
manifest's ``cdi.k8s.io/...`` annotations, with a spec the test writes (a device node it
makes, an env edit), checked inside the container; bad names refused before anything runs.
Real runc, conmon and CNI (``scripts/isolated``)."""

from __future__ import annotations

import json
import os
import stat
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

import _leaks
from support import require_binary, require_isolated

from .node_helpers import Job, copy_rootfs, del_link, mounts_under

pytestmark = pytest.mark.integration

NODE = "/dev/pk-cdi-test"
CHECK = f'echo "$PK_CDI $PK_VENDOR"; test -c {NODE} && echo char; echo x > {NODE} && echo rw'


@pytest.fixture
def job(busybox_rootfs: Path, tmp_path: Path) -> Iterator[Job]:
    require_isolated()
    for b in ("runc", "conmon"):
        require_binary(b)
    env = {"PODKIT_NETWORK_NAME": "none"}  # the devices are the point here, not the network
    job = Job(tmp_path, copy_rootfs(busybox_rootfs, tmp_path / "rootfs"), env)
    before = _leaks.snapshot(("netns", "link", "mount"))
    try:
        yield job
    finally:
        for f in tmp_path.glob("*.yaml"):
            if f.parent == tmp_path and f.name.startswith("kube-"):
                job.run("kube", "down", str(f))
        for pod in json.loads(job.run("pod", "ls", "-o", "json").stdout or "[]"):
            job.run("pod", "rm", pod["id"])
        del_link("pk0")
    assert _leaks.leaked_since(before, kinds=("netns", "link", "mount")) == []


def _spec_dir(job: Job) -> Path:
    """A CDI spec of the test's own: a character device it made (1:3, as /dev/null) and env
    edits, one per device plus one for every device of the spec."""
    node = job.base / "devnode"
    os.mknod(node, 0o666 | stat.S_IFCHR, os.makedev(1, 3))
    d = job.base / "cdi"
    d.mkdir()
    (d / "pk-test.yaml").write_text(yaml.safe_dump({
        "cdiVersion": "0.6.0", "kind": "example.com/pktest",
        "containerEdits": {"env": ["PK_VENDOR=example"]},
        "devices": [
            {"name": name, "containerEdits": {
                "env": [f"PK_CDI={name}"],
                "deviceNodes": [{"path": NODE, "hostPath": str(node)}]}}
            for name in ("dev0", "dev1")]}))
    return d


def test_device_option_with_a_spec_dir(job: Job) -> None:
    cdi = _spec_dir(job)
    job.ok("pod", "run", str(job.pod_file("dev")), "--cdi-spec-dir", str(cdi),
           "--device", "example.com/pktest=dev0")
    assert job.exec("dev", "sh", "-c", CHECK).split() == ["dev0", "example", "char", "rw"]
    job.ok("pod", "rm", "dev")


def test_a_pod_file_and_the_node_config(job: Job) -> None:
    cdi = _spec_dir(job)
    config = job.write("podkit.toml", f'[cdi]\nspec_dirs = ["{cdi}"]\n')
    pod = json.loads(job.pod_file("filed").read_text())
    pod["containers"][0]["cdi_devices"] = ["example.com/pktest=dev1"]
    f = job.write("filed.yaml", json.dumps(pod))
    job.ok("pod", "run", str(f), "--config", str(config))
    assert job.exec("filed", "sh", "-c", CHECK).split() == ["dev1", "example", "char", "rw"]
    job.ok("pod", "rm", "filed")


def test_kube_annotations_and_the_device_option(job: Job) -> None:
    cdi = _spec_dir(job)
    f = job.write("kube-dev.yaml", textwrap.dedent(f"""\
        apiVersion: v1
        kind: Pod
        metadata:
          name: annotated
          namespace: pk-node
          annotations: {{cdi.k8s.io/pktest: example.com/pktest=dev1}}
        spec:
          terminationGracePeriodSeconds: 1
          initContainers:
          - name: first
            image: {job.rootfs}
            command: [sh, -c, 'test -c {NODE}']
          containers:
          - name: app
            image: {job.rootfs}
            command: [sleep, "3600"]
        """))
    out = json.loads(job.ok("kube", "play", str(f), "-o", "json", "--pause-rootfs",
                            str(job.rootfs), "--cdi-spec-dir", str(cdi)))
    (pod,) = out["pods"]
    assert [c["exit_code"] for c in pod["containers"] if c["init"]] == [0]
    assert job.exec("annotated", "sh", "-c", CHECK).split() == ["dev1", "example", "char",
                                                                "rw"]
    job.ok("kube", "down", str(f))
    # --device: for every container, the annotation's device too
    job.ok("kube", "play", str(f), "--pause-rootfs", str(job.rootfs), "--cdi-spec-dir",
           str(cdi), "--device", "example.com/pktest=dev0")
    assert job.exec("annotated", "sh", "-c", 'echo "$PK_CDI"') == "dev1\n"  # the later edit
    job.ok("kube", "down", str(f))


def test_bad_and_unknown_devices(job: Job) -> None:
    cdi = _spec_dir(job)
    res = job.run("pod", "run", str(job.pod_file("bad")), "--cdi-spec-dir", str(cdi),
                  "--device", "pktest-dev0")
    assert res.returncode == 2 and "--device 'pktest-dev0'" in res.stderr, res.stderr
    res = job.run("pod", "run", str(job.pod_file("bad")), "--cdi-spec-dir", str(cdi),
                  "--device", "example.com/pktest=nope")
    assert res.returncode == 3 and "example.com/pktest=nope" in res.stderr, res.stderr
    res = job.run("pod", "run", str(job.pod_file("bad")), "--device",
                  "example.com/pktest=dev0")  # no spec dir: the default dirs have no such spec
    assert res.returncode == 3, res.stderr
    f = job.write("kube-bad.yaml", textwrap.dedent(f"""\
        apiVersion: v1
        kind: Pod
        metadata: {{name: bad, annotations: {{cdi.k8s.io/x: "example.com/pktest"}}}}
        spec:
          containers: [{{name: app, image: {job.rootfs}}}]
        """))
    res = job.run("kube", "play", str(f), "--pause-rootfs", str(job.rootfs))
    assert res.returncode == 2, res.stderr
    assert "metadata.annotations.cdi.k8s.io/x" in res.stderr
    assert 'invalid CDI device name "example.com/pktest"' in res.stderr
    assert json.loads(job.ok("pod", "ls", "-o", "json")) == []
    assert mounts_under(job.state) == []
