"""CappedOutput: the exec_sync output pipes (first ``limit`` bytes kept, no waiting for EOF)."""

from __future__ import annotations

import fcntl
import subprocess
import sys
import time

import pytest

from podkit.runtime.io import EXEC_SYNC_OUTPUT_MAX, CappedOutput


def run_writer(out: CappedOutput, script: str) -> int:
    """Run ``python -c script`` with the capture's pipes as stdout/stderr; its exit code."""
    _, w_out, w_err = out.child_fds()
    proc = subprocess.Popen([sys.executable, "-c", script], stdin=subprocess.DEVNULL,
                            stdout=w_out, stderr=w_err)
    out.close_after_start()
    return proc.wait(30)


@pytest.mark.parametrize("size", [0, 1, 999, 1000, 1001, 300_000])
def test_keeps_up_to_the_limit_per_stream_and_drops_the_rest(size: int) -> None:
    out = CappedOutput(limit=1000)
    try:
        script = (f"import os; os.write(1, b'o' * {size}) if {size} else None;"
                  f"os.write(2, b'e' * {size // 2}) if {size // 2} else None; raise SystemExit(3)")
        assert run_writer(out, script) == 3  # never blocked, exit code kept
        stdout, stderr = out.finish()
    finally:
        out.close()
    assert stdout == b"o" * min(size, 1000)
    assert stderr == b"e" * min(size // 2, 1000)
    assert out.dropped == [max(size - 1000, 0), max(size // 2 - 1000, 0)]


def test_a_writer_that_enlarged_its_pipe_and_exited_is_read_whole() -> None:
    # 1 MiB written into a pipe grown to 1 MiB, then exit: finish() takes it all (no EOF
    # needed, a child still holds the write end)
    out = CappedOutput()
    _, w_out, _ = out.child_fds()
    assert w_out is not None
    holder = subprocess.Popen(["sleep", "30"], stdout=w_out, stdin=subprocess.DEVNULL)
    try:
        script = ("import fcntl, os; fcntl.fcntl(1, fcntl.F_SETPIPE_SZ, 1 << 20);"
                  "os.write(1, b'z' * (1 << 20))")
        assert run_writer(out, script) == 0
        started = time.monotonic()
        stdout, stderr = out.finish()
        assert time.monotonic() - started < 5
    finally:
        holder.kill()
        holder.wait()
        out.close()
    assert (len(stdout), stderr) == (1 << 20, b"")


def test_child_ends_are_close_on_exec_and_close_is_idempotent() -> None:
    out = CappedOutput()
    _, w_out, w_err = out.child_fds()
    assert w_out is not None and w_err is not None
    assert fcntl.fcntl(w_out, fcntl.F_GETFD) & fcntl.FD_CLOEXEC
    out.close()
    out.close()
    assert EXEC_SYNC_OUTPUT_MAX == 16 * 1024 * 1024
