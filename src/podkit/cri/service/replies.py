"""The CRI service's replies: pod records, stats and image records as CRI messages.

One way only (``podkit.cri.convert`` does the configs both ways): what the CRI reports about a
container's image (``ContainerImage``, derived from the manager's record) joins the manager's
``Container`` to make a CRI ``ContainerStatus`` (:func:`container_status_reply`). Network
counters come from :mod:`podkit.procfs`.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterable, Mapping
from pathlib import Path

import attrs

from podkit import oci, procfs
from podkit.cri import api_pb2 as pb
from podkit.cri import convert
from podkit.image import Image, ImageConfig
from podkit.sandbox import (
    Container,
    ContainerStats,
    Sandbox,
    SandboxStats,
)

__all__ = [
    "ContainerImage",
    "container_stats_to_cri",
    "container_status_reply",
    "container_to_cri",
    "filesystem_usage",
    "image_to_cri",
    "network_usage",
    "repository",
    "sandbox_stats_to_cri",
    "sandbox_status_to_cri",
    "sandbox_to_cri",
    "user_from_spec",
    "user_reply",
]


@attrs.frozen(kw_only=True)
class ContainerImage:
    """What the CRI reports about a container's image and root filesystem.

    Derived from the manager's ``Container`` record (earlier server versions kept it in files
    of their own). ``image``: the user-specified image, else the store image's name,
    ``image_ref``: the repo digest (``name@sha256:<manifest>``), ``image_id``: the config
    digest, ``rootfs_id``: the key of the rootfs in the image store (``""`` when the image was
    a rootfs directory). The stop signal (the image's ``StopSignal`` when the request left it
    unset) is in the manager's ``Container.config.stop_signal``, a Linux signal number.
    """

    container_id: str = ""
    image: str = ""
    image_ref: str = ""
    image_id: str = ""
    rootfs_id: str = ""
    rootfs: str = ""


def sandbox_to_cri(sb: Sandbox) -> pb.PodSandbox:
    """A ``ListPodSandbox`` item."""
    return convert.pod_sandbox_to_cri(sb)


def sandbox_status_to_cri(sb: Sandbox) -> pb.PodSandboxStatus:
    """``PodSandboxStatus``: state, IPs (first one primary) and namespace modes."""
    return convert.pod_sandbox_status_to_cri(sb)


def _image_spec(out: pb.ImageSpec, img: ContainerImage) -> None:
    out.image = img.image
    out.user_specified_image = img.image


def container_to_cri(c: Container, img: ContainerImage) -> pb.Container:
    """A ``ListContainers`` item, with the image as the client named it."""
    out = convert.container_to_cri(c, image_ref=img.image_ref, image_id=img.image_id)
    _image_spec(out.image, img)
    return out


def user_reply(u: oci.User | None) -> pb.ContainerUser | None:
    """The resolved uid, gid and groups of a container's process user (``None`` if unknown)."""
    if u is None:
        return None
    out = pb.ContainerUser()
    out.linux.uid = u.uid or 0
    out.linux.gid = u.gid or 0
    out.linux.supplemental_groups.extend(u.additional_gids or ())
    out.linux.SetInParent()
    return out


def user_from_spec(spec_path: Path) -> pb.ContainerUser | None:
    """:func:`user_reply` of a bundle's ``config.json`` (``None`` if unreadable)."""
    try:
        spec = oci.Spec.load(spec_path)
    except (OSError, oci.SpecError, ValueError):
        return None
    return user_reply(spec.process.user if spec.process is not None else None)


def container_status_reply(c: Container, img: ContainerImage,
                           user: pb.ContainerUser | None = None) -> pb.ContainerStatus:
    """``ContainerStatus``: the manager's record (stop signal included) plus the image and
    user."""
    out = convert.container_status_to_cri(c, image_ref=img.image_ref, image_id=img.image_id)
    _image_spec(out.image, img)
    if user is not None:
        out.user.CopyFrom(user)
    return out


def filesystem_usage(path: str | os.PathLike[str], mountpoint: str = "") -> pb.FilesystemUsage:
    """Bytes (allocated blocks) and inodes used under ``path``, not crossing mounts."""
    used = inodes = 0
    root = Path(path)
    with contextlib.suppress(OSError):
        dev = root.stat().st_dev
        for dirpath, dirnames, filenames in os.walk(root):
            for name in (*dirnames, *filenames):
                with contextlib.suppress(OSError):
                    st = os.lstat(os.path.join(dirpath, name))
                    if st.st_dev != dev:
                        continue
                    used += st.st_blocks * 512
                    inodes += 1
            dirnames[:] = [d for d in dirnames
                           if not os.path.ismount(os.path.join(dirpath, d))]
    out = pb.FilesystemUsage(timestamp=time.time_ns())
    out.fs_id.mountpoint = mountpoint or str(root)
    out.used_bytes.value = used
    out.inodes_used.value = inodes
    return out


def container_stats_to_cri(stats: ContainerStats, c: Container,
                           writable_layer: pb.FilesystemUsage | None = None) -> pb.ContainerStats:
    """``ContainerStats`` from the manager's cgroup numbers, plus the writable layer's usage."""
    out = convert.container_stats_to_cri(stats, c)
    if writable_layer is not None:
        out.writable_layer.CopyFrom(writable_layer)
    return out


def sandbox_stats_to_cri(stats: SandboxStats, sb: Sandbox,
                         containers: Mapping[str, Container]) -> pb.PodSandboxStats:
    """``PodSandboxStats``: the pod's sums, the stats of ``containers`` (records by ID) and
    the pod's network counters."""
    stats = attrs.evolve(stats, containers=tuple(
        s for s in stats.containers if s.id in containers))
    out = convert.pod_sandbox_stats_to_cri(stats, sb, containers)
    if not sb.host_network:
        net = network_usage(sb.pid)
        if net is not None:
            out.linux.network.CopyFrom(net)
    return out


def network_usage(pid: int, default: str = "eth0") -> pb.NetworkUsage | None:
    """Interface counters of the network namespace ``pid`` is in (``/proc/<pid>/net/dev``);
    ``None`` when the process is gone. ``lo`` is left out, as in containerd."""
    counters = procfs.net_dev(pid)
    if counters is None:
        return None
    out = pb.NetworkUsage(timestamp=time.time_ns())
    for c in counters:
        if c.name == "lo":
            continue
        iface = pb.NetworkInterfaceUsage(name=c.name)
        iface.rx_bytes.value = c.rx_bytes
        iface.rx_errors.value = c.rx_errors
        iface.tx_bytes.value = c.tx_bytes
        iface.tx_errors.value = c.tx_errors
        out.interfaces.append(iface)
        if c.name == default:
            out.default_interface.CopyFrom(iface)
    return out


def repository(name: str) -> str:
    """``docker.io/library/busybox`` of ``docker.io/library/busybox:1.36`` (or ``@sha256:``)."""
    base = name.split("@", 1)[0]
    colon = base.rfind(":")
    return base[:colon] if colon > base.rfind("/") else base


def _numeric_user(user: str) -> tuple[int | None, str]:
    name = user.split(":", 1)[0]
    if name.isdigit():
        return int(name), ""
    return None, name


def image_to_cri(images: Iterable[Image], config: ImageConfig, *,
                 pinned: bool = False) -> pb.Image:
    """One CRI ``Image`` for every record sharing a config digest (its names are repo tags)."""
    records = sorted(images, key=lambda i: i.name)
    first = records[0]
    out = pb.Image(id=first.config.digest, size=first.size, pinned=pinned)
    tags = [i.name for i in records if i.name and "@" not in i.name]
    out.repo_tags.extend(tags)
    out.repo_digests.extend(sorted({f"{repository(i.name)}@{i.target.digest}" for i in records}))
    uid, username = _numeric_user(config.user or "")
    if uid is not None:
        out.uid.value = uid
    out.username = username
    out.spec.image = first.config.digest
    return out
