"""The local terminal of an interactive ``pod exec -t`` or ``pod attach``: raw mode while the
container owns it (restored on the way out), and window sizes forwarded on SIGWINCH."""

from __future__ import annotations

import contextlib
import os
import signal
import termios
import tty
from collections.abc import Callable, Iterator
from types import FrameType

from podkit.runtime.console import get_winsize

__all__ = ["forward_resize", "raw_terminal", "terminal_size"]


@contextlib.contextmanager
def raw_terminal(fd: int) -> Iterator[bool]:
    """Put ``fd`` in raw mode while the block runs if it is a terminal (True), else leave it
    (False); the old settings come back whatever happens."""
    if not os.isatty(fd):
        yield False
        return
    saved = termios.tcgetattr(fd)
    tty.setraw(fd, termios.TCSANOW)  # keep what was typed ahead
    try:
        yield True
    finally:
        termios.tcsetattr(fd, termios.TCSADRAIN, saved)


def terminal_size(*fds: int) -> tuple[int, int] | None:
    """``(rows, cols)`` of the first of ``fds`` that is a terminal with a size, else ``None``."""
    for fd in fds:
        if os.isatty(fd):
            with contextlib.suppress(OSError):
                rows, cols = get_winsize(fd)
                if rows > 0 and cols > 0:
                    return rows, cols
    return None


@contextlib.contextmanager
def forward_resize(apply: Callable[[int, int], object], *fds: int) -> Iterator[None]:
    """Call ``apply(rows, cols)`` on every SIGWINCH (the size of the first terminal among
    ``fds``) while the block runs; nothing when none is a terminal."""
    if terminal_size(*fds) is None:
        yield
        return

    def on_winch(signum: int, frame: FrameType | None) -> None:
        size = terminal_size(*fds)
        if size is not None:
            with contextlib.suppress(Exception):  # the process may be gone already
                apply(*size)

    old = signal.signal(signal.SIGWINCH, on_winch)
    try:
        yield
    finally:
        signal.signal(signal.SIGWINCH, old)
