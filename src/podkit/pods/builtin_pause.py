"""podkit's own pause image, made on this machine the way podman makes its own: Debian's static
``catatonit`` (the ``catatonit`` package) alone in a one-layer image, run in pause mode
(``catatonit -P``), recorded as ``localhost/podkit-pause:<podkit version>`` once and reused.
"""

from __future__ import annotations

import os
import re
import shutil
import struct
import tempfile
from collections.abc import Sequence
from pathlib import Path

import podkit
from podkit import image as _image
from podkit._files import file_lock
from podkit.errors import NotFoundError, PodkitError
from podkit.pods.records import PauseConfig

__all__ = ["BUILTIN_PAUSE_IMAGE", "CATATONIT_PATHS", "builtin_pause", "find_catatonit"]

BUILTIN_PAUSE_IMAGE = "localhost/podkit-pause:" + re.sub(r"[^\w.-]", "-", podkit.__version__)
"""The reference of the built-in pause image (one per podkit version)."""
CATATONIT_PATHS = ("/usr/bin/catatonit", "/usr/libexec/podman/catatonit",
                   "/usr/local/bin/catatonit")
"""Where :func:`find_catatonit` looks, after ``$PATH``."""
_PT_INTERP = 3


def _dynamic(path: Path) -> bool:
    """Whether the ELF file ``path`` names a program interpreter (it is dynamically linked);
    ``False`` for anything that is not ELF (the runtime's exec has the last word)."""
    with open(path, "rb") as f:
        head = f.read(64)
        if len(head) < 64 or head[:4] != b"\x7fELF":
            return False
        end = "<" if head[5] == 1 else ">"
        if head[4] == 2:  # 64-bit
            (phoff,), (size, count) = struct.unpack_from(end + "Q", head, 32), \
                struct.unpack_from(end + "HH", head, 54)
        else:
            (phoff,), (size, count) = struct.unpack_from(end + "I", head, 28), \
                struct.unpack_from(end + "HH", head, 42)
        f.seek(phoff)
        table = f.read(size * count)
    return any(struct.unpack_from(end + "I", table, i * size)[0] == _PT_INTERP
               for i in range(len(table) // size if size else 0))


def find_catatonit(paths: Sequence[str] = CATATONIT_PATHS) -> Path:
    """The static ``catatonit`` binary of this machine: on ``$PATH`` or in ``paths``.

    ``NotFoundError`` when there is none (install Debian's ``catatonit``), ``PodkitError``
    when the one found is dynamically linked (a one-file image cannot run it)."""
    found = shutil.which("catatonit")
    for candidate in ([found] if found else []) + list(paths):
        path = Path(candidate)
        if path.is_file() and os.access(path, os.X_OK):
            if _dynamic(path):
                raise PodkitError(
                    f"built-in pause: {path} is dynamically linked; the pause image holds "
                    "only catatonit, so it needs a static one (Debian's catatonit package)")
            return path
    raise NotFoundError(
        "built-in pause: catatonit not found (on $PATH or in " + ", ".join(paths) + "): "
        "install it (apt-get install catatonit) or give a pause image or rootfs")


def builtin_pause(store: _image.ImageStore, *, catatonit: str | os.PathLike[str] | None = None,
                  ref: str = BUILTIN_PAUSE_IMAGE) -> PauseConfig:
    """The built-in pause: ``PauseConfig(image=ref)`` for a manager with ``images=store``,
    after making the image in ``store`` if it is not there (from ``catatonit``, default
    :func:`find_catatonit`'s). Made once: later calls, in this process or another, find
    it; concurrent first calls make it once (a lock in the store)."""
    with file_lock(store.root / "locks" / "podkit-pause.lock"):
        try:
            store.get(ref)
        except NotFoundError:
            binary = Path(catatonit) if catatonit is not None else find_catatonit()
            with tempfile.TemporaryDirectory(prefix="podkit-pause-") as tmp:
                shutil.copyfile(binary, Path(tmp) / "catatonit")
                os.chmod(Path(tmp) / "catatonit", 0o755)
                _image.build_from_rootfs(
                    store, tmp, ref, owner=(0, 0),
                    config=_image.ImageConfig(entrypoint=("/catatonit", "-P"),
                                              labels={"io.podkit.pause": "catatonit"}))
    return PauseConfig(image=ref)
