"""conmon's sync pipe: the JSON lines it writes (``{"data": pid-or-negative-status,
"message": ...}``), read until enough came, the pipe closed, or time ran out."""

from __future__ import annotations

import json
import os
import time

from podkit.runtime.conmon_procs import Launcher
from podkit.runtime.errors import OCIRuntimeError, RuntimeTimeoutError
from podkit.runtime.io import wait_readable

__all__ = ["read_sync"]


def read_sync(fd: int, argv: list[str], timeout: float | None, want: int,
              launcher: Launcher | None = None) -> list[tuple[int, str | None]]:
    """The first ``want`` messages ``(data, message)`` on ``fd`` (fewer if it closes first;
    a negative ``data`` ends the reading); ``launcher``: conmon's first process, reaped
    while waiting, which must daemonize within its own deadline."""
    deadline = None if timeout is None else time.monotonic() + timeout
    buf = b""
    messages: list[tuple[int, str | None]] = []
    while len(messages) < want:
        left = None if deadline is None else deadline - time.monotonic()
        if left is not None and left <= 0:
            raise RuntimeTimeoutError(f"conmon did not report within {timeout}s", argv)
        watch = [fd]
        if launcher is not None and launcher.pidfd >= 0:
            watch.append(launcher.pidfd)
            launcher_left = launcher.left()
            left = launcher_left if left is None else min(left, launcher_left)
        ready = wait_readable(watch, left)
        if launcher is not None and launcher.pidfd >= 0:
            if launcher.pidfd in ready:
                launcher.reap()
            elif launcher.left() <= 0:
                raise RuntimeTimeoutError("conmon did not daemonize in time", argv)
        if fd not in ready:
            continue
        chunk = os.read(fd, 65536)
        if not chunk:
            break
        buf += chunk
        while b"\n" in buf and len(messages) < want:
            line, buf = buf.split(b"\n", 1)
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
                data = int(obj["data"])
            except (ValueError, KeyError, TypeError):
                raise OCIRuntimeError(
                    f"unexpected message from conmon on the sync pipe: {line[:200]!r}", argv
                ) from None
            message = obj.get("message")
            messages.append((data, message if isinstance(message, str) else None))
            if data < 0:
                return messages
    return messages
