"""What ``SandboxManager.recover()`` sweeps besides the records: temp files of writes cut
short and directories no record names (a crash between making them and recording them); and
the one runtime ``list`` that tells which pods still run without a ``state`` call per pod,
asked in a thread (:class:`PendingLiveIds`) while the records load."""

from __future__ import annotations

import contextlib
import shutil
import threading
from collections.abc import Iterable
from pathlib import Path

from podkit import netns
from podkit._files import sweep_atomic_temps
from podkit.errors import PodkitError
from podkit.runtime import Runtime

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
    """:func:`live_ids` asked in a thread from construction: the runtime's ``list`` (a child
    process) runs while the caller loads and checks the records; :meth:`result` waits for it.

    ``list`` only reads the runtime's state, so a caller that fails before :meth:`result`
    may leave the thread to end on its own.
    """

    def __init__(self, runtime: Runtime) -> None:
        self._runtime = runtime
        self._ids: frozenset[str] | None = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._ask, name="podkit-recover-list",
                                        daemon=True)
        self._thread.start()

    def _ask(self) -> None:
        try:
            self._ids = live_ids(self._runtime)
        except BaseException as exc:  # handed to the caller of result()
            self._error = exc

    def result(self) -> frozenset[str] | None:
        """What :func:`live_ids` answered (its errors other than a failed listing raised here)."""
        self._thread.join()
        if self._error is not None:
            raise self._error
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
    /dev/shm unmounted first)."""
    for kind, known in (("sandboxes", sandboxes), ("containers", containers)):
        for d in (root_dir / kind).iterdir():
            if d.name not in known:
                with contextlib.suppress(PodkitError):
                    netns.unmount_all(d / "shm")
                shutil.rmtree(d, ignore_errors=True)
