"""What ``SandboxManager.recover()`` sweeps besides the records: temp files of writes cut
short and directories no record names (a crash between making them and recording them); and
the one runtime ``list`` that tells which pods still run without a ``state`` call per pod,
asked in a thread (:class:`PendingLiveIds`) while the records load."""

from __future__ import annotations

import contextlib
import functools
import shutil
from collections.abc import Iterable
from pathlib import Path

from podkit import _trash, netns
from podkit._files import sweep_atomic_temps
from podkit.errors import PodkitError
from podkit.pods import idmapped
from podkit.runtime import Runtime
from podkit.runtime.alongside import Alongside

__all__ = ["PendingLiveIds", "live_ids", "remove_orphan_dirs", "sweep_temps"]

_LIVE = frozenset(("running", "created", "paused"))  # what processes.running counts as running


def live_ids(runtime: Runtime) -> frozenset[str] | None:
    """The IDs the runtime lists running, created or paused, from one ``list`` call; ``None``
    when the listing fails. A container missing here may still be one ``list`` skipped (an
    unreadable state dir): callers ask ``state`` about those, so the answer stays the same."""
    try:
        return frozenset(s.id for s in runtime.list() if s.status in _LIVE)
    except (PodkitError, OSError):
        return None


class PendingLiveIds:
    """:func:`live_ids` asked on a helper thread from construction (``runtime.alongside``):
    the runtime's ``list`` (a child process) runs while the caller loads and checks the
    records; :meth:`result` waits for it.

    ``list`` only reads the runtime's state, so a caller that fails before :meth:`result`
    may leave the call to end on its own.
    """

    def __init__(self, runtime: Runtime) -> None:
        self._ids: frozenset[str] | None = None
        self._call = Alongside(functools.partial(self._ask, runtime))
        self._call.begin()

    def _ask(self, runtime: Runtime) -> None:
        self._ids = live_ids(runtime)

    def result(self) -> frozenset[str] | None:
        """What :func:`live_ids` answered (its errors other than a failed listing raised here)."""
        self._call.result()
        return self._ids


def sweep_temps(state_dir: Path, root_dir: Path, *, extra: Iterable[Path] = (),
                older_than: float) -> list[Path]:
    """Remove the ``atomic_write`` temp files an earlier process left in the record and
    bundle dirs (and the ``extra`` dirs: the CNI result cache, conmon's state); only files
    older than ``older_than`` go (a live manager's own writes are never touched)."""
    dirs = [state_dir / "sandboxes", state_dir / "containers", *extra]
    for kind in ("sandboxes", "containers"):
        dirs += [d / "bundle" for d in (root_dir / kind).iterdir()]
    return [p for d in dirs for p in sweep_atomic_temps(d, older_than=older_than)]


def remove_orphan_dirs(root_dir: Path, sandboxes: set[str], containers: set[str]) -> None:
    """Remove the pod and container directories under ``root_dir`` without a record (their
    /dev/shm and namespace pins unmounted first), and the ID-mapped views of containers
    without one (unmounted, never removed through a mount); empty the trash an earlier process
    left (in the background)."""
    if (root_dir / _trash.TRASH).is_dir():
        _trash.empty_later(root_dir / _trash.TRASH)
    for kind, known in (("sandboxes", sandboxes), ("containers", containers)):
        for d in (root_dir / kind).iterdir():
            if d.name not in known:
                with contextlib.suppress(PodkitError):
                    netns.unmount_all(d / "shm")
                    for pin in (d / "ns").glob("*"):
                        netns.unmount_all(pin)
                shutil.rmtree(d, ignore_errors=True)
    views = root_dir / "mounts"
    for d in views.iterdir() if views.is_dir() else ():
        if d.name not in containers:
            with contextlib.suppress(PodkitError, OSError):
                idmapped.unstage(d)
