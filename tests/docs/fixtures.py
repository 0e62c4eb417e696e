"""What the docs examples name, made at exactly the printed paths, inside the runner's private
mount namespace (see runner.py): listed here in one place, each with the examples that need it.

To add one: write a ``make_*`` function taking the ``Context``, and a ``Fixture`` row naming
the blocks (``page#number``) that need it. A page's run makes only the fixtures its blocks name.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from docs.blocks import find_block

# Private to the runner: a fresh tmpfs on each, or a tmpfs-backed overlay over the host's own
# (so files appear at the printed paths and none reaches the host).
TMPFS = ("/run", "/tmp", "/srv")
OVERLAYS = ("/etc", "/var", "/opt")
# Data dirs that hold overlay mounts or runc state (no overlay upper dir on an overlay).
TMPFS_INSIDE = ("/var/lib/podkit", "/var/lib/cni", "/var/lib/mycri", "/var/log", "/run/netns")
CWD = Path("/tmp/docs")  # the reader's working directory


@dataclass
class Context:
    """What fixtures share while a page runs: started processes to stop, made images."""

    cwd: Path = CWD
    procs: list[Any] = field(default_factory=list)
    images: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Fixture:
    name: str
    needed_by: tuple[str, ...]  # block ids: "README.md#2"
    make: Callable[[Context], None]


def _busybox(dest: str | Path) -> Path:
    from support import make_busybox_rootfs
    return make_busybox_rootfs(Path(dest))


def make_runc_bundle(_: Context) -> None:
    """``runc spec`` in /srv/bundle, a busybox rootfs with a user ``app`` beside it."""
    bundle = Path("/srv/bundle")
    _busybox(bundle / "rootfs")
    subprocess.run(["runc", "spec"], cwd=bundle, check=True)


def make_conmon_bundle(_: Context) -> None:
    """/var/lib/podkit/bundles/web: busybox ``cat`` echoing its stdin, hostname web."""
    from podkit import oci
    bundle = Path("/var/lib/podkit/bundles/web")
    _busybox(bundle / "rootfs")
    (bundle / "rootfs/etc/hostname").write_text("web\n")
    spec = oci.runc_spec()
    spec.process.terminal = False
    spec.process.args = ["cat"]
    spec.hostname = "web"
    spec.linux.cgroups_path = "/pk-docs-web"
    spec.dump(bundle / "config.json")


def make_web_rootfs(_: Context) -> None:
    root = _busybox("/srv/web/rootfs")
    with (root / "etc/passwd").open("a") as f:
        f.write("www-data:x:33:33:www-data:/var/www:/bin/false\n")
    with (root / "etc/group").open("a") as f:
        f.write("www-data:x:33:\n")


def make_seccomp_profile(_: Context) -> None:
    Path("/etc/podkit").mkdir(exist_ok=True)
    Path("/etc/podkit/db.json").write_text(json.dumps(
        {"defaultAction": "SCMP_ACT_ALLOW",
         "syscalls": [{"names": ["reboot"], "action": "SCMP_ACT_ERRNO"}]}))


def _run_block(page: str, contains: str) -> None:
    """Run the sh block of ``page`` that holds ``contains`` (it makes what another page uses)."""
    subprocess.run(["sh", "-e", "-c", find_block(page, contains).code], check=True,
                   stdout=subprocess.DEVNULL)


def make_cni_bridge(_: Context) -> None:
    """/etc/cni/net.d/10-pk-bridge.conflist (bridge + host-local + portmap, named pk-bridge),
    written by the block of docs/cni.md that shows it."""
    _run_block("docs/cni.md", "10-pk-bridge.conflist <<")


def make_netns_abc(_: Context) -> None:
    subprocess.run(["ip", "netns", "add", "abc"], check=True)


def make_gpu_cdi_spec(_: Context) -> None:
    """The vendor.com/gpu CDI spec (devices 0 and 1 made from /dev/null), written by the block
    of docs/cdi.md that shows it."""
    _run_block("docs/cdi.md", "vendor.com-gpu.yaml <<")


def make_cdi_example_spec(ctx: Context) -> None:
    """The YAML spec docs/cdi.md prints, at the path its console example lists; plus the
    files the console example passes (spec.json, config.json, ./cdi, my-schema.json)."""
    text = find_block("docs/cdi.md", "kind: podkit.example/dev").code
    Path("/etc/cdi").mkdir(exist_ok=True)
    Path("/etc/cdi/podkit-example.yaml").write_text(text)
    Path("/opt/example/lib").mkdir(parents=True)
    import yaml
    spec = yaml.safe_load(text)
    (ctx.cwd / "spec.json").write_text(json.dumps(spec))
    (ctx.cwd / "cdi").mkdir()
    (ctx.cwd / "cdi" / "local.json").write_text(json.dumps(spec))
    from podkit import oci
    oci.runc_spec().dump(ctx.cwd / "config.json")
    from podkit.cdi import schema
    shipped = Path(schema.__file__).parent
    shutil.copy(shipped / "schema.json", ctx.cwd / "my-schema.json")
    shutil.copy(shipped / "defs.json", ctx.cwd / "defs.json")


def make_pod_yaml(ctx: Context) -> None:
    """The pod file docs/pods.md prints, as pod.yaml in the working directory."""
    (ctx.cwd / "pod.yaml").write_text(find_block("docs/pods.md", "# pod.yaml").code)


def make_kube_web_yaml(ctx: Context) -> None:
    """The manifest docs/kube.md prints, as web.yaml in the working directory."""
    (ctx.cwd / "web.yaml").write_text(find_block("docs/kube.md", "# web.yaml").code)


def _busybox_image(cmd: list[str]) -> Any:
    from image.imagebuild import Layer, build_image
    from podkit.image.descriptor import host_platform
    root = _busybox(Path("/tmp/.docs-busybox"))
    layer = Layer().tree(root).bytes()
    return build_image([layer], ["gzip"], {"Cmd": cmd, "Env": ["PATH=/bin"]},
                       arch=host_platform().architecture)


def make_app_archives(ctx: Context) -> None:
    """app.tar (a docker save of localhost/app:1, busybox) and layout-dir (an OCI layout whose
    index.json names it 1.0) in the working directory."""
    from image.imagebuild import write_docker_save, write_layout
    img = _busybox_image(["sleep", "3600"])
    ctx.images["app"] = img
    write_docker_save(ctx.cwd / "app.tar", img, ["localhost/app:1"])
    write_layout(ctx.cwd / "layout-dir", [(img.descriptor, "1.0")], img.blobs)


def make_local_registry(ctx: Context) -> None:
    """docker-registry on localhost:5000 holding team/app:1.0 (busybox) and pause:3.10, and
    /etc/podkit/certs.d naming it as the mirror of registry.k8s.io and gcr.io."""
    from image.registries import mirror_hosts, push_image, start_registry, stop_registry
    d = Path("/tmp/.docs-registry")
    d.mkdir()
    proc, host = _start_on_5000(d, start_registry)
    ctx.procs.append((stop_registry, proc))
    img = ctx.images.get("app") or _busybox_image(["sleep", "3600"])
    push_image(d, img, f"{host}/team/app:1.0")
    push_image(d, _busybox_image(["sleep", "2147483647"]), f"{host}/pause:3.10")
    mirror_hosts(Path("/etc/podkit/certs.d"), host)


def _start_on_5000(d: Path, start: Callable[..., Any]) -> tuple[Any, str]:
    """``start_registry`` with its port pinned to 5000 (the docs name localhost:5000; the
    runner's network namespace is private, so the port is free)."""
    import image.registries as registries
    real = registries.free_port
    registries.free_port = lambda: 5000
    try:
        proc, host = start(d)
    finally:
        registries.free_port = real
    return proc, host


FIXTURES = [
    Fixture("bundle /var/lib/podkit/bundles/web (cat, hostname web)", ("docs/runtime.md#3",),
            make_conmon_bundle),
    Fixture("runc spec bundle /srv/bundle (busybox rootfs, user app)", ("docs/oci.md#1",),
            make_runc_bundle),
    Fixture("rootfs /srv/web/rootfs with www-data", ("docs/oci.md#2",), make_web_rootfs),
    Fixture("seccomp profile /etc/podkit/db.json", ("docs/oci.md#3",), make_seccomp_profile),
    Fixture("CNI list /etc/cni/net.d/10-pk-bridge.conflist (docs/cni.md#1)", ("README.md#5",),
            make_cni_bridge),
    Fixture("netns /run/netns/abc", ("docs/cni.md#3", "docs/cni.md#4"), make_netns_abc),
    Fixture("CDI spec vendor.com/gpu (docs/cdi.md#9, /dev/null-backed)", ("README.md#5",),
            make_gpu_cdi_spec),
    Fixture("CDI spec /etc/cdi/podkit-example.yaml (docs/cdi.md#1) and console files", (
        "docs/cdi.md#2", "docs/cdi.md#6"), make_cdi_example_spec),
    Fixture("pod.yaml (docs/pods.md#3)", ("docs/pods.md#4",), make_pod_yaml),
    Fixture("web.yaml (docs/kube.md#5)", ("docs/kube.md#6",), make_kube_web_yaml),
    Fixture("app.tar and layout-dir (busybox image)", ("docs/images.md#1", "docs/pods.md#5"),
            make_app_archives),
    Fixture("registry localhost:5000 (team/app:1.0, pause:3.10), /etc/podkit/certs.d", (
        "docs/images.md#1", "docs/images.md#7"), make_local_registry),
]


def for_page(page: str) -> list[Fixture]:
    return [f for f in FIXTURES if any(b.startswith(page + "#") for b in f.needed_by)]
