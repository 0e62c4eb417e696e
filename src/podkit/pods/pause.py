"""The pause program of a manager, its shared rootfs when it comes from an image, and the
error of a pause that exits before its pod is ready.

Every pod's pause runs on one rootfs made from the pause image in the image store. It is
mounted while a pause starts (made again if it was unmounted) and stays mounted for the next
pod until the manager unmounts the unused ones (close, remove_all, recover); a file lock per
rootfs keeps one process from unmounting it under a pause another process is starting.
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
from collections.abc import Iterable, Iterator
from pathlib import Path

from podkit import image, oci
from podkit._files import file_lock
from podkit.errors import ConflictError, PodkitError
from podkit.pods import images as pod_images
from podkit.pods.records import PauseConfig
from podkit.runtime import read_cri_log

__all__ = ["OUTPUT_LINES", "PauseExitedError", "PauseRootfs", "last_output", "make_mountpoints"]

OUTPUT_LINES = 5
"""How many of its last output lines a :class:`PauseExitedError` quotes."""
_OUTPUT_CHARS = 400


class PauseExitedError(PodkitError):
    """The pause of a pod exited before the pod was ready: ``run_sandbox`` undid the pod.

    ``exit_code`` is the pause's (``128 + signal`` when killed), ``output`` its last lines
    (stdout and stderr, from its log); the message names the pause's image or rootfs and
    command.
    """

    def __init__(self, message: str, *, exit_code: int, output: str) -> None:
        super().__init__(message)
        self.exit_code = exit_code
        self.output = output

    @classmethod
    def of(cls, config: PauseConfig, pod: str, exit_code: int, output: str) -> PauseExitedError:
        """The error of the pause ``config`` of ``pod`` (how messages name the pod), which
        exited with ``exit_code`` after printing ``output``."""
        what = f"image {config.image}" if config.image and config.image != config.rootfs \
            else f"rootfs {config.rootfs}"
        said = f"; its last output: {output!r}" if output else "; it printed nothing"
        return cls(f"{pod}: the pause ({what}, command {list(config.args)}) exited with code "
                   f"{exit_code} before the pod was ready{said}",
                   exit_code=exit_code, output=output)


def last_output(log_path: str | os.PathLike[str], lines: int = OUTPUT_LINES) -> str:
    """The last ``lines`` lines of a CRI log (at most 400 characters, the end kept); ``""``
    when there is none."""
    try:
        entries = read_cri_log(log_path)
    except (OSError, PodkitError):
        return ""
    text = "\n".join(e.content.decode("utf-8", "replace") for e in entries[-lines:])
    return text if len(text) <= _OUTPUT_CHARS else "..." + text[-_OUTPUT_CHARS:]


class PauseRootfs:
    """The manager's pause (``config``; ``None``: infra-less pods) and its shared rootfs.

    ``images`` is the store a pause given as an image lives in (``None``: the pause is a
    plain directory, never unmounted). ``config`` is the one given, resolved
    (``pods.images.resolve_pause``: an image made into its rootfs, the command filled in).
    """

    def __init__(self, config: PauseConfig | None, images: image.ImageStore | None) -> None:
        self.config = pod_images.resolve_pause(config, images)
        self.images = images
        self._lock = threading.Lock()
        self._roots: dict[str, str] = {}  # pod ID -> its pause rootfs (from its bundle)

    def key(self, rootfs: str) -> str:
        """The store key of a shared pause rootfs at ``rootfs`` (``""`` if it is not one)."""
        if self.images is None:
            return ""
        path = Path(os.path.abspath(rootfs))
        key = path.parent.name
        ours = path.parent.parent == Path(os.path.abspath(self.images.root)) / "containers"
        pause = key.startswith(pod_images.PAUSE_ROOTFS_PREFIX)
        return key if ours and path.name == "rootfs" and pause else ""

    def lock(self, key: str, *, shared: bool,
             blocking: bool = True) -> contextlib.AbstractContextManager[int]:
        """Shared while a process starts a pause on the rootfs ``key``; exclusive to unmount
        or make it again (so no process unmounts it under a starting pause)."""
        assert self.images is not None
        locks = self.images.root / "locks"
        locks.mkdir(parents=True, exist_ok=True)
        return file_lock(locks / f"{key}.lock", shared=shared, blocking=blocking)

    @contextlib.contextmanager
    def ready(self) -> Iterator[None]:
        """The pause rootfs is mounted (made again if it was unmounted) for the ``with`` body."""
        assert self.config is not None
        key = self.key(self.config.rootfs) if self.config.image else ""
        if not key:
            yield
            return
        while True:
            with self.lock(key, shared=True):
                if pod_images.populated(Path(self.config.rootfs)):
                    yield
                    return
            with self.lock(key, shared=False):
                if not pod_images.populated(Path(self.config.rootfs)):
                    assert self.images is not None
                    self.config = pod_images.pause_config(
                        self.images, self.config.image, args=self.config.args,
                        env=self.config.env)

    def rootfs_of(self, pod_id: str, bundle: Path) -> str:
        """The rootfs of a pod's pause, from its ``bundle`` (the current pause's if none)."""
        with self._lock:
            known = self._roots.get(pod_id)
        if known is not None:
            return known
        try:
            root = json.loads((bundle / "config.json").read_text())["root"]["path"]
        except (OSError, ValueError, KeyError, TypeError):
            return self.config.rootfs if self.config is not None else ""
        path = os.path.abspath(os.path.join(bundle, str(root)))
        with self._lock:
            self._roots[pod_id] = path
        return path

    def forget(self, pod_id: str) -> None:
        """The pod is gone: its rootfs no longer counts as used."""
        with self._lock:
            self._roots.pop(pod_id, None)

    def unmount_unused(self, pods: Iterable[tuple[str, Path]]) -> None:
        """Unmount each shared pause rootfs of the store that none of ``pods`` (pod ID, pause
        bundle) uses and no process is starting a pause on (a running pause needs no host
        mount)."""
        if self.images is None:
            return
        mounted = [d for d in sorted((self.images.root / "containers").glob(
            pod_images.PAUSE_ROOTFS_PREFIX + "*")) if os.path.ismount(d / "rootfs")]
        if not mounted:
            return
        used = {self.rootfs_of(id, bundle) for id, bundle in pods}
        if self.config is not None and not self.config.image:  # could not be made again
            used.add(os.path.abspath(self.config.rootfs))
        for d in mounted:
            if os.path.abspath(d / "rootfs") in used:
                continue
            with contextlib.suppress(ConflictError), \
                    self.lock(d.name, shared=False, blocking=False):
                image.unmount_rootfs(self.images, d.name)


def make_mountpoints(rootfs: str | os.PathLike[str], spec: oci.Spec) -> None:
    """Create the missing targets of ``spec``'s mounts in ``rootfs`` (a file for a file bind,
    else a directory), as root, for a pause in a user namespace: its root cannot create them
    in a rootfs whose files are the host root's (the shared pause rootfs is not ID-mapped).
    Targets inside another mount (``/dev/shm`` in ``/dev``) are the runtime's to make; a
    symlink on the way is left for the runtime to resolve."""
    dests = [os.path.normpath("/" + m.destination) for m in spec.mounts or []]
    root = os.path.abspath(rootfs)
    for m, dest in zip(spec.mounts or [], dests, strict=True):
        if dest == "/" or any(d != dest and dest.startswith(d.rstrip("/") + "/") for d in dests):
            continue
        parts = dest.strip("/").split("/")
        path = root
        for i, part in enumerate(parts):
            path = os.path.join(path, part)
            if os.path.islink(path):
                break
            if os.path.lexists(path):
                continue
            last = i == len(parts) - 1
            if last and m.type == "bind" and m.source and not os.path.isdir(m.source):
                os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
                                 | os.O_CLOEXEC, 0o644))
            else:
                os.mkdir(path, 0o755)
