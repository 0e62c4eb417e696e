"""What every ``podkit pod`` command shares: the common options, the manager they open, and
how a pod or container reference on the command line is found."""

from __future__ import annotations

import argparse
from pathlib import Path

from podkit.errors import NotFoundError
from podkit.image import ImageStore
from podkit.runtime import Runc
from podkit.sandbox import (
    Container,
    ContainerFilter,
    PauseConfig,
    Sandbox,
    SandboxManager,
    default_networks,
)

DEFAULT_ROOT = "/var/lib/podkit/pods"
DEFAULT_STATE = "/run/podkit/pods"
DEFAULT_IMAGE_ROOT = "/var/lib/podkit"


def add_common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--root", default=DEFAULT_ROOT, help="pod files and bundles")
    p.add_argument("--state", default=DEFAULT_STATE, help="records, conmon and runtime state")
    p.add_argument("--runtime", default="runc", help="OCI runtime binary (runc, crun)")
    p.add_argument("--pause-rootfs", default="", help="rootfs with a sleep program (busybox)")
    p.add_argument("--image-root", default=DEFAULT_IMAGE_ROOT,
                   help=f"image store for image references (default {DEFAULT_IMAGE_ROOT}, "
                   "as for podkit image --root)")


def image_store(args: argparse.Namespace, needed: bool) -> ImageStore | None:
    """The store under ``--image-root`` when the pod needs it or it exists (removals need the
    store that holds their containers' rootfs); ``None`` otherwise (nothing is created)."""
    if needed or (Path(args.image_root) / "image").is_dir():
        return ImageStore(args.image_root)
    return None


def manager(args: argparse.Namespace, pause_rootfs: str = "", *, pause_image: str = "",
             infraless: bool = False, images_needed: bool = False) -> SandboxManager:
    state = Path(args.state)
    # commands other than run never start a pause: "/" stands in for its rootfs
    pause = None if infraless else PauseConfig(
        rootfs="" if pause_image else (pause_rootfs or args.pause_rootfs or "/"),
        image=pause_image)
    mgr = SandboxManager(args.root, state, Runc(args.runtime, root=state / "runc"),
                         default_networks(state), pause=pause,
                         images=image_store(args, images_needed or bool(pause_image)))
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
