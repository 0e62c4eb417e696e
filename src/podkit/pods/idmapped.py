"""ID-mapped views of a container's mounts (and of a rootfs directory) in a pod with its own
user namespace, for runtimes that cannot make ID-mapped mounts (runc before 1.2, crun 1.8).

podkit makes the views itself (``idmap.mount_idmapped``, by the pod's user namespace) in one
directory per container, ``<root>/mounts/<container ID>/<i>`` for ``mounts[i]`` and
``rootfs`` for a rootfs directory, and the runtime only bind-mounts them: through them the
container's root sees the files as root does without a user namespace, and what it writes
keeps the IDs it would have had. :func:`staged` points a config at the views (pure),
:func:`stage` makes them, :func:`unstage` undoes them without ever deleting through a mount.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

import attrs

from podkit import idmap
from podkit.errors import quote
from podkit.pods.config import ContainerConfig
from podkit.pods.container_spec import ContainerConfigError

__all__ = ["ROOTFS", "stage", "staged", "unstage"]

ROOTFS = "rootfs"
"""The name of a rootfs directory's view in a container's mounts directory."""


def staged(config: ContainerConfig, directory: Path) -> ContainerConfig:
    """``config`` with each mount's ``host_path`` its view in ``directory``."""
    mounts = [attrs.evolve(m, host_path=str(directory / str(i)))
              for i, m in enumerate(config.mounts)]
    return attrs.evolve(config, mounts=tuple(mounts))


def stage(config: ContainerConfig, directory: Path, userns: idmap.UserNamespace, *,
          rootfs: str = "") -> None:
    """The views of ``config``'s mounts (and of the ``rootfs`` directory, if given) in
    ``directory``, mapped by ``userns``. A source that is missing, or on a file system that
    cannot map, is a ``ContainerConfigError`` naming the mount; nothing is left then."""
    root = userns.ids.root
    if not directory.parent.is_dir():
        directory.parent.mkdir(parents=True, exist_ok=True)
        os.chmod(directory.parent, 0o711)  # whatever the umask: a rootfs view is reached
    directory.mkdir(mode=0o700)
    if rootfs and root is not None:  # the runtime reaches the rootfs as the pod's root
        os.chown(directory, -1, root[1])
        os.chmod(directory, 0o710)
    try:
        fd = idmap.open_user_namespace(userns.path)
        try:
            for i, m in enumerate(config.mounts):
                _view(m.host_path, directory / str(i), fd, f"mounts[{i}].host_path")
            if rootfs:
                _view(rootfs, directory / ROOTFS, fd, "image")
        finally:
            os.close(fd)
    except BaseException:
        unstage(directory)
        raise


def _view(source: str, target: Path, fd: int, field: str) -> None:
    if not os.path.exists(source):
        raise ContainerConfigError(f"{field} {quote(source)}: does not exist")
    if os.path.isdir(source):
        target.mkdir()
    else:
        target.touch(mode=0o600, exist_ok=False)
    try:
        idmap.mount_idmapped(source, target, fd)
    except idmap.IDMapError as exc:
        raise ContainerConfigError(f"{field} {quote(source)}: a pod with its own user "
                                   f"namespace needs an ID-mapped mount of it: {exc}") from None


def unstage(directory: Path) -> None:
    """Unmount the views in ``directory`` and remove it; what is still mounted stays (an
    ``IDMapError``), and nothing is ever removed through a mount."""
    if not directory.exists():
        return
    idmap.unmount_under(directory)
    for child in directory.iterdir():
        with contextlib.suppress(FileNotFoundError):
            if child.is_dir() and not child.is_symlink():
                child.rmdir()  # empty once unmounted: rmdir, never rmtree
            else:
                child.unlink()
    directory.rmdir()
