"""A workaround for runc 1.1: remove the read-only bind of its own binary that a ``runc init``
killed mid-start leaves in the container's state dir.

runc 1.1's ``runc init`` makes ``<root>/<id>/runc.XXXXXX``, bind-mounts ``/proc/self/exe`` on
it read-only, opens it, then detaches and unlinks it (its defence against a container that
overwrites the runc binary). A SIGKILL between the mount and the unmount, as when a timed-out
exec or create is killed, leaves the mount and the file, and ``runc delete`` then cannot remove
the state dir. ``Runc`` calls ``remove_stray_exe_binds`` after such a kill; nothing but the
``runc.XXXXXX`` entries of that one container's state dir is touched.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

from podkit import _linux

__all__ = ["remove_stray_exe_binds", "state_dir"]

_PREFIX = "runc."
_NAME_LEN = len(_PREFIX) + 6  # mkstemp's six random characters


def state_dir(root: Path | None, runtime: str, id: str) -> Path | None:
    """The container's state dir: ``root/id``, or under the runtime's default root (``/run/
    <runtime>`` for root); ``None`` when it cannot be told (a non-root caller, no root)."""
    if root is not None:
        return root / id
    return Path("/run") / runtime / id if os.geteuid() == 0 else None


def remove_stray_exe_binds(directory: str | os.PathLike[str] | None) -> list[str]:
    """Unmount (detached) and unlink every ``runc.XXXXXX`` in ``directory``; the paths."""
    if directory is None:
        return []
    try:
        names = os.listdir(directory)
    except OSError:
        return []
    removed = []
    for name in sorted(names):
        if not name.startswith(_PREFIX) or len(name) != _NAME_LEN:
            continue
        path = os.path.join(directory, name)
        with contextlib.suppress(OSError):  # EINVAL: not (or no longer) a mount point
            _linux.umount(path, _linux.MNT_DETACH | _linux.UMOUNT_NOFOLLOW)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)
        removed.append(path)
    return removed
