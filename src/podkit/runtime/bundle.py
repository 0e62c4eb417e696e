"""OCI bundle directories: ``config.json`` written atomically next to (or pointing at) a rootfs.

Rootfs decision: ``Bundle.create(dir, spec, rootfs=path)`` does not copy, bind-mount or
symlink anything. It writes ``root.path`` into the bundle's ``config.json`` as the absolute path
of ``rootfs`` (the runtime-spec allows absolute paths), unless ``rootfs`` is ``<dir>/rootfs``,
which is written as the relative ``"rootfs"``. Nothing is mounted, so nothing can leak and
``remove()`` never touches the rootfs contents outside the bundle directory.

``config.json`` holds the container's environment, so it is 0600 and the bundle directory
0700 (0710, group the container's root group, when the container has its own user namespace,
as containerd does, so its root can reach a rootfs inside the bundle).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from podkit import oci
from podkit.errors import ConflictError, InvalidArgumentError, NotFoundError
from podkit.oci import codec

__all__ = ["CONFIG_FILE", "Bundle"]

CONFIG_FILE = "config.json"


class Bundle:
    """An OCI bundle on disk: ``path`` (absolute), ``config_path`` and the parsed ``spec``."""

    __slots__ = ("path", "spec")

    def __init__(self, path: str | os.PathLike[str], spec: oci.Spec) -> None:
        self.path = Path(path).absolute()
        self.spec = spec

    def __repr__(self) -> str:
        return f"Bundle({str(self.path)!r})"

    def __fspath__(self) -> str:
        """The directory: a ``Bundle`` goes wherever a bundle path does (and is not re-read)."""
        return str(self.path)

    @property
    def config_path(self) -> Path:
        """``<path>/config.json``."""
        return self.path / CONFIG_FILE

    @property
    def rootfs(self) -> Path | None:
        """The rootfs directory ``root.path`` points at (resolved against ``path``)."""
        if self.spec.root is None:
            return None
        return self.path / self.spec.root.path

    @classmethod
    def create(
        cls,
        dir: str | os.PathLike[str],
        spec: oci.Spec,
        rootfs: str | os.PathLike[str] | None = None,
        *,
        mode: int = 0o600,
    ) -> Bundle:
        """Write ``spec`` (a copy, with ``root.path`` set from ``rootfs``) as ``dir/config.json``.

        ``dir`` is created when missing and made private (see the module notes). The rootfs
        must be an existing directory, else ``InvalidArgumentError``; ``spec`` is not modified.
        """
        path = Path(dir).absolute()
        spec = spec.copy()
        if rootfs is not None:
            root_dir = Path(rootfs).absolute()
            value = "rootfs" if root_dir == path / "rootfs" else str(root_dir)
            if spec.root is None:
                spec.root = _root(value)
            else:
                spec.root.path = value
        if spec.root is None or not spec.root.path:
            raise InvalidArgumentError(
                f"bundle {path}: the spec has no root.path and no rootfs was given"
            )
        resolved = path / spec.root.path
        if not resolved.is_dir():
            raise InvalidArgumentError(
                f"bundle {path}: rootfs {resolved} (root.path {spec.root.path!r}) "
                "is not a directory"
            )
        return cls.write(path, spec, mode=mode)

    @classmethod
    def write(
        cls,
        dir: str | os.PathLike[str],
        spec: oci.Spec,
        *,
        mode: int = 0o600,
        durable: bool = True,
    ) -> Bundle:
        """Write ``spec`` as it is to ``dir/config.json``: the one writer of bundles.

        ``dir`` (created when missing) is made private whether or not it existed (see the
        module notes), ``config.json`` gets ``mode``; ``spec`` is kept, not copied, and its
        rootfs need not exist yet. Not ``durable``: no fsync, for a bundle the runtime reads
        at once and nothing needs after a power loss (containerd's have none).
        """
        path = Path(dir).absolute()
        created = not path.exists()
        dir_mode, group = _dir_access(spec)
        path.mkdir(parents=True, exist_ok=True, mode=0o700)
        try:
            if group is not None:
                os.chown(path, -1, group)
            os.chmod(path, dir_mode)
            codec.dump(spec, path / CONFIG_FILE, mode=mode, durable=durable)
        except BaseException:
            if created:
                shutil.rmtree(path, ignore_errors=True)
            raise
        return cls(path, spec)

    @classmethod
    def load(cls, dir: str | os.PathLike[str]) -> Bundle:
        """Read an existing bundle; ``NotFoundError`` without ``config.json``."""
        path = Path(dir).absolute()
        config = path / CONFIG_FILE
        if not config.is_file():
            raise NotFoundError(f"bundle {path}: no {CONFIG_FILE}")
        return cls(path, oci.Spec.load(config))

    def remove(self) -> None:
        """Delete the bundle directory; refuses when a mount point is inside it.

        A rootfs outside the directory (absolute ``root.path``) is left alone.
        """
        if not self.path.exists():
            return
        for dirpath, dirnames, _ in os.walk(self.path):
            for name in dirnames:
                if os.path.ismount(os.path.join(dirpath, name)):
                    raise ConflictError(
                        f"bundle {self.path}: {os.path.join(dirpath, name)} is a mount point; "
                        "unmount it before removing the bundle"
                    )
        shutil.rmtree(self.path)


def _dir_access(spec: oci.Spec) -> tuple[int, int | None]:
    """The bundle dir's mode, and its group when it must change (containerd's rule)."""
    linux = spec.linux
    if linux is None or not any(ns.type == "user" for ns in linux.namespaces or []):
        return 0o700, None
    for m in linux.gid_mappings or []:
        if m.container_id == 0 and m.size > 0:
            return (0o710, m.host_id) if m.host_id != 0 else (0o700, None)
    return 0o700, None


def _root(value: str) -> oci.Root:
    return codec.structure({"path": value}, oci.Root)
