"""Images for pods: the pause program (a rootfs or a shared image rootfs), finding a container's
image in the store, what its config contributes to the spec, and its stop signal."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import attrs

from podkit import image as _image
from podkit import runtime
from podkit.errors import InvalidArgumentError, NotFoundError
from podkit.pods.config import ContainerConfig
from podkit.pods.container_spec import ContainerConfigError, ImageDefaults
from podkit.pods.records import PauseConfig

__all__ = [
    "DEFAULT_PAUSE_ENV",
    "PAUSE_ROOTFS_PREFIX",
    "ROOTFS_PAUSE_ARGS",
    "ContainerImage",
    "container_image",
    "find_image",
    "image_defaults",
    "pause_config",
    "populated",
    "resolve_pause",
    "signal_number",
    "valid_stop_signal",
]

PAUSE_ROOTFS_PREFIX = "cri-pause-"
"""Key prefix of the shared pause rootfs in an image store (the CRI server's, kept compatible)."""
ROOTFS_PAUSE_ARGS = ("sleep", "2147483647")
"""What a pause given as a rootfs directory runs unless ``PauseConfig.args`` says otherwise."""
DEFAULT_PAUSE_ENV = ("PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",)
"""The pause's environment when neither ``PauseConfig.env`` nor its image gives one."""


def pause_config(store: _image.ImageStore, pause: str, *, args: Sequence[str] = (),
                 env: Sequence[str] = ()) -> PauseConfig:
    """The pause program from ``pause``: an absolute rootfs directory, or an image in ``store``.

    An image gets one rootfs shared by every pause of that image (store key
    ``cri-pause-<config digest>``, reused across restarts; an empty or broken one is made
    again) and runs its Entrypoint + Cmd with its Env; a directory runs
    ``sleep 2147483647``. ``args`` and ``env``, when given, replace those.
    """
    if os.path.isabs(pause) and os.path.isdir(pause):
        return PauseConfig(rootfs=pause, image=pause, args=tuple(args) or ROOTFS_PAUSE_ARGS,
                           env=tuple(env) or DEFAULT_PAUSE_ENV)
    try:
        img = store.get(pause)
    except _image.ReferenceError as exc:
        raise InvalidArgumentError(f"pause image {pause!r}: {exc}") from None
    except NotFoundError:
        raise NotFoundError(
            f"pause image {pause!r}: not in the image store {store.root} and not a rootfs "
            "directory (import or pull it first)") from None
    cfg = store.config(img)
    try:
        argv = tuple(args) or tuple(_image.process_args(cfg))
    except _image.ImageError as exc:
        raise InvalidArgumentError(f"pause image {pause!r}: {exc}") from None
    key = PAUSE_ROOTFS_PREFIX + img.config.digest.partition(":")[2][:32]
    try:
        rootfs = _image.get_rootfs(store, key)
        if not rootfs.path.is_dir() or not any(rootfs.path.iterdir()):
            _image.remove_rootfs(store, key)
            raise NotFoundError(key)
    except NotFoundError:
        rootfs = _image.create_rootfs(store, img, key)
    return PauseConfig(rootfs=str(rootfs.path), args=argv,
                       env=tuple(env) or tuple(cfg.env) or DEFAULT_PAUSE_ENV, image=img.name)


def resolve_pause(config: PauseConfig | None,
                  store: _image.ImageStore | None) -> PauseConfig | None:
    """The pause a manager runs from the one it was given: an image (no rootfs) made into a
    rootfs in ``store`` (:func:`pause_config`), the command and environment filled in."""
    if config is None:
        return None
    if not config.rootfs and config.image:
        if store is None:
            raise InvalidArgumentError(
                f"pause image {config.image!r}: needs an image store (images=) or a rootfs")
        return pause_config(store, config.image, args=config.args, env=config.env)
    if not config.rootfs or not Path(config.rootfs).is_dir():
        raise InvalidArgumentError(
            f"pause rootfs {config.rootfs!r} is not a directory" if config.rootfs else
            "pause: give a rootfs directory or an image (PauseConfig(rootfs=) or image=)")
    return attrs.evolve(config, args=config.args or ROOTFS_PAUSE_ARGS,
                        env=config.env or DEFAULT_PAUSE_ENV)


def populated(rootfs: Path) -> bool:
    """Whether a rootfs directory is mounted or has content (an unmounted overlay is empty)."""
    try:
        return os.path.ismount(rootfs) or any(rootfs.iterdir())
    except OSError:
        return False


def find_image(store: _image.ImageStore, ref: str) -> _image.Image:
    """The image ``ref`` names in any form the store resolves: a name, ``REPO@DIGEST``, the
    image ID (config digest, what kubelet sends) or a unique prefix of it, an index or
    manifest digest (see ``podkit.image.lookup``)."""
    try:
        return store.get(ref)
    except _image.ReferenceError as exc:
        raise ContainerConfigError(f"image {ref!r}: {exc}") from None
    except NotFoundError:
        raise NotFoundError(
            f"image {ref!r}: not found in the image store {store.root} (import or pull it "
            "first)") from None


def image_defaults(img: _image.Image, cfg: _image.ImageConfig) -> ImageDefaults:
    """What the image config contributes to the container spec."""
    entrypoint = cfg.entrypoint or ()
    return ImageDefaults(
        env=tuple(cfg.env), entrypoint=() if entrypoint == ("",) else tuple(entrypoint),
        cmd=tuple(cfg.cmd or ()), working_dir=cfg.working_dir or "", user=cfg.user or "",
        name=img.name)


def valid_stop_signal(number: int) -> bool:
    """Whether ``number`` is a Linux signal the CRI can name (1..31, SIGRTMIN 34..SIGRTMAX 64):
    statuses report the stop signal as a CRI ``Signal``; 32 and 33 are glibc's own."""
    return 1 <= number <= 31 or 34 <= number <= 64


def signal_number(name: str, where: str) -> int:
    """A Linux signal number from an image ``StopSignal`` (``SIGTERM``, ``TERM``, ``15``,
    ``SIGRTMIN+3``); only signals ``valid_stop_signal`` accepts."""
    try:
        number = runtime.signal_number(name)
    except InvalidArgumentError:
        raise ContainerConfigError(f"{where}: unknown signal {name!r}") from None
    if not valid_stop_signal(number):
        raise ContainerConfigError(
            f"{where}: unknown signal {name!r} (want 1-31 or 34-64, SIGRTMIN..SIGRTMAX)")
    return number


@attrs.frozen
class ContainerImage:
    """What a container's ``image`` names: a store image (with its defaults) or a rootfs
    directory (``image`` ``None``); ``config`` has the image's stop signal filled in."""

    config: ContainerConfig
    image: _image.Image | None = None
    defaults: ImageDefaults | None = None


def container_image(store: _image.ImageStore | None, config: ContainerConfig) -> ContainerImage:
    """Resolve ``config.image``: an absolute rootfs directory, or (with a ``store``) an image
    reference, image ID or digest, whose config gives the defaults and the stop signal."""
    ref = config.image
    if store is not None and not os.path.isabs(ref):
        if not ref:
            raise ContainerConfigError("image: required (a rootfs directory or an image)")
        img = find_image(store, ref)
        icfg = store.config(img)
        if not config.stop_signal and icfg.stop_signal:
            config = attrs.evolve(config, stop_signal=signal_number(
                icfg.stop_signal, f"StopSignal of image {img.name}"))
        return ContainerImage(config, img, image_defaults(img, icfg))
    if not os.path.isabs(ref) or not os.path.isdir(ref):
        raise ContainerConfigError(
            f"image {ref!r}: must be an existing rootfs directory (absolute path)"
            + ("" if os.path.isabs(ref) else
               " or an image reference (this manager has no image store)"))
    return ContainerImage(config)
