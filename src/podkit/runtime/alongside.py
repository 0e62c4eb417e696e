"""One blocking call on a helper thread while the caller does other work: a runtime command
and a durable write both mostly wait on the kernel, so together they take the longer of the
two instead of the sum.

The helper threads are pooled (starting a thread waits for it to run, which on a busy host
costs what the overlap saves); when every one is busy the call runs in the caller instead.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor

__all__ = ["Alongside"]

WORKERS = 16
_lock = threading.Lock()
_pool: ThreadPoolExecutor | None = None
_free = threading.BoundedSemaphore(WORKERS)


def _submit(fn: Callable[[], None]) -> Future[None] | None:
    """``fn`` on a pooled thread, or ``None`` when all of them are busy."""
    global _pool
    if not _free.acquire(blocking=False):
        return None
    with _lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(WORKERS, thread_name_prefix="podkit-alongside")
    try:
        return _pool.submit(fn)
    except BaseException:  # (interpreter shutting down)
        _free.release()
        raise


class Alongside:
    """``fn()`` on a helper thread from :meth:`begin`; :meth:`result` waits and re-raises."""

    def __init__(self, fn: Callable[[], object]) -> None:
        self._fn = fn
        self._error: BaseException | None = None
        self._future: Future[None] | None = None
        self._done = False

    def _run(self) -> None:
        try:
            self._fn()
        except BaseException as exc:  # handed to the caller in result()
            self._error = exc
        finally:
            self._done = True

    def _run_pooled(self) -> None:
        try:
            self._run()
        finally:
            _free.release()

    def begin(self) -> None:
        """Start the call (once) if a helper thread is free; else :meth:`result` makes it."""
        if self._future is None and not self._done:
            self._future = _submit(self._run_pooled)

    def wait(self) -> None:
        """Wait for a begun call to end, whatever its outcome (before undoing its work)."""
        if self._future is not None:
            self._future.result()

    def result(self) -> None:
        """Wait for the call; raise what it raised. A call not begun runs here."""
        self.wait()
        if not self._done:
            self._run()
        if self._error is not None:
            error, self._error = self._error, None
            raise error
