"""The reference server's answers: manager records, stats and image records as CRI messages.

One way only (``podkit.cri.convert`` does the configs both ways): what the server knows about a
container's image (``ContainerImage``, kept by the server beside the manager's records) joins
the manager's ``Container`` to make a CRI ``ContainerStatus``.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterable, Sequence
from pathlib import Path

import attrs

from podkit import oci
from podkit._manager import Container, ContainerStats, Sandbox, SandboxStats
from podkit.cri import api_pb2 as pb
from podkit.cri.convert import (
    container_config_to_cri,
    linux_resources_to_cri,
    sandbox_config_to_cri,
)
from podkit.image import Image, ImageConfig

__all__ = [
    "ContainerImage",
    "container_stats_to_cri",
    "container_status_to_cri",
    "container_to_cri",
    "filesystem_usage",
    "image_to_cri",
    "sandbox_stats_to_cri",
    "sandbox_status_to_cri",
    "sandbox_to_cri",
]


@attrs.frozen(kw_only=True)
class ContainerImage:
    """What the server records about a container's image and root filesystem.

    ``image``: the reference as the client gave it (normalised), ``image_ref``: the repo digest
    (``name@sha256:<manifest>``), ``image_id``: the config digest, ``rootfs_id``: the key of
    the rootfs in the image store (``""`` when the image was a rootfs directory),
    ``stop_signal``: the CRI ``Signal`` the container stops with.
    """

    container_id: str = ""
    image: str = ""
    image_ref: str = ""
    image_id: str = ""
    rootfs_id: str = ""
    rootfs: str = ""
    stop_signal: int = 0


def _labels(msg: object, labels: dict[str, str], annotations: dict[str, str]) -> None:
    msg.labels.update(labels)  # type: ignore[attr-defined]
    msg.annotations.update(annotations)  # type: ignore[attr-defined]


def sandbox_to_cri(sb: Sandbox) -> pb.PodSandbox:
    """A ``ListPodSandbox`` item."""
    out = pb.PodSandbox(id=sb.id, state=int(sb.state), created_at=sb.created_at)  # type: ignore[arg-type]
    md = sb.config.metadata
    out.metadata.CopyFrom(pb.PodSandboxMetadata(name=md.name, uid=md.uid,
                                                namespace=md.namespace, attempt=md.attempt))
    _labels(out, dict(sb.config.labels), dict(sb.config.annotations))
    return out


def sandbox_status_to_cri(sb: Sandbox) -> pb.PodSandboxStatus:
    """``PodSandboxStatus``: state, IPs (first one primary) and namespace modes."""
    out = pb.PodSandboxStatus(id=sb.id, state=int(sb.state),  # type: ignore[arg-type]
                              created_at=sb.created_at)
    cfg = sandbox_config_to_cri(sb.config)
    out.metadata.CopyFrom(cfg.metadata)
    if sb.ips:
        out.network.ip = sb.ips[0]
        out.network.additional_ips.extend(pb.PodIP(ip=ip) for ip in sb.ips[1:])
    out.network.SetInParent()
    out.linux.namespaces.options.CopyFrom(cfg.linux.security_context.namespace_options)
    _labels(out, dict(sb.config.labels), dict(sb.config.annotations))
    return out


def _image_spec(img: ContainerImage, annotations: dict[str, str] | None = None) -> pb.ImageSpec:
    spec = pb.ImageSpec(image=img.image, user_specified_image=img.image)
    if annotations:
        spec.annotations.update(annotations)
    return spec


def container_to_cri(c: Container, img: ContainerImage) -> pb.Container:
    """A ``ListContainers`` item."""
    out = pb.Container(id=c.id, pod_sandbox_id=c.sandbox_id, image_ref=img.image_ref,
                       state=int(c.state), created_at=c.created_at,  # type: ignore[arg-type]
                       image_id=img.image_id)
    out.metadata.name = c.config.metadata.name
    out.metadata.attempt = c.config.metadata.attempt
    out.image.CopyFrom(_image_spec(img))
    _labels(out, dict(c.config.labels), dict(c.config.annotations))
    return out


def _user_from_spec(spec_path: Path) -> pb.ContainerUser | None:
    try:
        spec = oci.Spec.load(spec_path)
    except (OSError, oci.SpecError, ValueError):
        return None
    if spec.process is None or spec.process.user is None:
        return None
    u = spec.process.user
    out = pb.ContainerUser()
    out.linux.uid = u.uid or 0
    out.linux.gid = u.gid or 0
    out.linux.supplemental_groups.extend(u.additional_gids or ())
    return out


def container_status_to_cri(c: Container, img: ContainerImage,
                            spec_path: Path | None = None) -> pb.ContainerStatus:
    """``ContainerStatus``: state, times, exit code and reason, mounts, log path, image, user."""
    cfg = container_config_to_cri(attrs.evolve(c.config, image=img.image))
    out = pb.ContainerStatus(
        id=c.id, state=int(c.state), created_at=c.created_at,  # type: ignore[arg-type]
        started_at=c.started_at, finished_at=c.finished_at, exit_code=c.exit_code,
        image_ref=img.image_ref, reason=c.reason, message=c.message, log_path=c.log_path,
        image_id=img.image_id, stop_signal=img.stop_signal,  # type: ignore[arg-type]
    )
    out.metadata.CopyFrom(cfg.metadata)
    out.image.CopyFrom(_image_spec(img))
    out.mounts.extend(cfg.mounts)
    _labels(out, dict(c.config.labels), dict(c.config.annotations))
    if c.config.linux.resources is not None:
        out.resources.linux.CopyFrom(linux_resources_to_cri(c.config.linux.resources))
    if spec_path is not None:
        user = _user_from_spec(spec_path)
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
    """``ContainerStats`` from the manager's cgroup numbers."""
    out = pb.ContainerStats()
    out.attributes.id = c.id
    out.attributes.metadata.name = c.config.metadata.name
    out.attributes.metadata.attempt = c.config.metadata.attempt
    _labels(out.attributes, dict(c.config.labels), dict(c.config.annotations))
    out.cpu.timestamp = stats.timestamp
    out.cpu.usage_core_nano_seconds.value = stats.cpu_usage_core_nano_seconds
    out.memory.timestamp = stats.timestamp
    out.memory.working_set_bytes.value = stats.memory_working_set_bytes
    out.memory.usage_bytes.value = stats.memory_usage_bytes
    out.memory.rss_bytes.value = stats.memory_rss_bytes
    if writable_layer is not None:
        out.writable_layer.CopyFrom(writable_layer)
    return out


def sandbox_stats_to_cri(stats: SandboxStats, sb: Sandbox,
                         containers: Sequence[pb.ContainerStats]) -> pb.PodSandboxStats:
    """``PodSandboxStats``: the pod's sums and its containers' own stats."""
    out = pb.PodSandboxStats()
    out.attributes.id = sb.id
    md = sb.config.metadata
    out.attributes.metadata.CopyFrom(pb.PodSandboxMetadata(
        name=md.name, uid=md.uid, namespace=md.namespace, attempt=md.attempt))
    _labels(out.attributes, dict(sb.config.labels), dict(sb.config.annotations))
    lx = out.linux
    lx.cpu.timestamp = stats.timestamp
    lx.cpu.usage_core_nano_seconds.value = stats.cpu_usage_core_nano_seconds
    lx.memory.timestamp = stats.timestamp
    lx.memory.working_set_bytes.value = stats.memory_working_set_bytes
    lx.process.timestamp = stats.timestamp
    lx.process.process_count.value = stats.process_count
    lx.containers.extend(containers)
    return out


def _repository(name: str) -> str:
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
    out.repo_digests.extend(sorted({f"{_repository(i.name)}@{i.target.digest}" for i in records}))
    uid, username = _numeric_user(config.user or "")
    if uid is not None:
        out.uid.value = uid
    out.username = username
    out.spec.image = first.config.digest
    return out
