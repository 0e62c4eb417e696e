"""What every ``podkit pod`` command shares: the common options, the manager they open, and
how a pod or container reference on the command line is found."""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from podkit.cgroups import resolve_driver
from podkit.errors import ConflictError, NotFoundError
from podkit.image import ImageStore
from podkit.runtime import Runc
from podkit.sandbox import (
    Container,
    ContainerFilter,
    PauseConfig,
    Sandbox,
    SandboxManager,
    builtin_pause,
    default_networks,
)

from . import dirs

DEFAULT_ROOT = f"{dirs.DEFAULT_ROOT}/pods"
DEFAULT_STATE = f"{dirs.DEFAULT_STATE}/pods"
DEFAULT_IMAGE_ROOT = dirs.DEFAULT_ROOT
LOCK_WAIT = 10.0
"""Seconds a command waits for the state dir while another podkit command holds it."""


def add_common(p: argparse.ArgumentParser) -> None:
    """The options of every pod command (``--root`` and ``--state`` are global: ``dirs``)."""
    dirs.add_dir_options(p)
    p.add_argument("--runtime", default="runc", help="OCI runtime binary (runc, crun)")
    p.add_argument("--pause-rootfs", default="",
                   help="rootfs with a sleep program (busybox); default: the built-in pause")
    p.add_argument("--image-root", default=argparse.SUPPRESS, metavar="DIR",
                   help="image store for image references (default: the root, the store "
                   "podkit image fills)")
    p.add_argument("--cgroup-driver", choices=("cgroupfs", "systemd"), default=None,
                   help="who makes the cgroups (default: systemd when it is PID 1 on cgroup "
                   "v2, else cgroupfs)")
    p.set_defaults(needs_root="run pods")


def pod_root(args: argparse.Namespace) -> Path:
    """Pod files and bundles: ``ROOT/pods``."""
    return dirs.podkit_root(args) / "pods"


def pod_state(args: argparse.Namespace) -> Path:
    """Pod records, conmon and runtime state: ``STATE/pods``."""
    return dirs.podkit_state(args) / "pods"


def image_root(args: argparse.Namespace) -> Path:
    """``--image-root``, else the podkit root."""
    given = getattr(args, "image_root", "")
    return Path(given).absolute() if given else dirs.podkit_root(args)


def image_store(args: argparse.Namespace, needed: bool) -> ImageStore | None:
    """The store under ``--image-root`` when the pod needs it or it exists (removals need the
    store that holds their containers' rootfs); ``None`` otherwise (nothing is created)."""
    root = image_root(args)
    if needed or (root / "image").is_dir():
        return ImageStore(root)
    return None


def manager(args: argparse.Namespace, pause_rootfs: str = "", *, pause_image: str = "",
             infraless: bool = False, images_needed: bool = False,
             runs_pods: bool = False) -> SandboxManager:
    """The manager over the pod root and state, recovered. Without a pause rootfs or image
    it runs the built-in pause when it ``runs_pods`` (made in the image store the first
    time); otherwise it can stop, remove and inspect pods but not run them."""
    state = pod_state(args)
    rootfs = pause_rootfs or args.pause_rootfs
    pause = None if infraless or not (rootfs or pause_image) else PauseConfig(
        rootfs="" if pause_image else rootfs, image=pause_image)
    if pause is None and runs_pods and not infraless:
        pause = builtin_pause(ImageStore(image_root(args)))
        pause_image = pause.image
    driver = resolve_driver(getattr(args, "cgroup_driver", None), "--cgroup-driver")
    deadline = time.monotonic() + LOCK_WAIT
    while True:  # another podkit command (a `pod wait` taking a look) may hold the state dir
        try:
            mgr = SandboxManager(pod_root(args), state, Runc(args.runtime, root=state / "runc",
                                                             systemd_cgroup=driver.systemd),
                                 default_networks(state), pause=pause,
                                 images=image_store(args, images_needed or bool(pause_image)),
                                 cgroup_driver=driver)
            break
        except ConflictError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.02)
    mgr.recover()
    return mgr


def find_pod(mgr: SandboxManager, ref: str) -> Sandbox:
    pods = mgr.list_sandboxes()
    hits = [s for s in pods if s.config.metadata.name == ref] or \
        [s for s in pods if s.id.startswith(ref)]
    if len(hits) != 1:
        raise NotFoundError(f"pod {ref!r}: " + ("not found" if not hits else "ambiguous"))
    return hits[0]


def find_container(mgr: SandboxManager, pod: Sandbox, name: str) -> Container:
    for c in mgr.list_containers(ContainerFilter(pod_sandbox_id=pod.id)):
        if c.config.metadata.name == name or c.id.startswith(name):
            return c
    raise NotFoundError(f"pod {pod.config.metadata.name!r} has no container {name!r}")
