"""One blocking call on a helper thread while the caller does other work: a runtime command
and a durable write both mostly wait on the kernel, so together they take the longer of the
two instead of the sum."""

from __future__ import annotations

import threading
from collections.abc import Callable

__all__ = ["Alongside"]


class Alongside:
    """``fn()`` on its own thread from :meth:`begin`; :meth:`result` waits and re-raises."""

    def __init__(self, fn: Callable[[], object]) -> None:
        self._fn = fn
        self._error: BaseException | None = None
        self._thread: threading.Thread | None = None

    def _run(self) -> None:
        try:
            self._fn()
        except BaseException as exc:  # handed to the caller in result()
            self._error = exc

    def begin(self) -> None:
        """Start the call (once)."""
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="podkit-alongside",
                                            daemon=True)
            self._thread.start()

    def wait(self) -> None:
        """Wait for a begun call to end, whatever its outcome (before undoing its work)."""
        if self._thread is not None:
            self._thread.join()

    def result(self) -> None:
        """Wait for the call; raise what it raised. A call never begun runs here."""
        if self._thread is None:
            self._run()
        self.wait()
        if self._error is not None:
            error, self._error = self._error, None
            raise error
