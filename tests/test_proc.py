"""podkit._proc: the one way podkit starts programs (fd map, env, group kill, capture, wait)."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from podkit import _proc

SH = "/bin/sh"
ENV = {"PATH": "/usr/bin:/bin"}


def _sh(script: str, **kwargs: object) -> _proc.Result:
    return _proc.run([SH, "-c", script], env=ENV, **kwargs)  # type: ignore[arg-type]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat").read_bytes()
    return stat.rsplit(b")", 1)[1].split()[0] not in (b"Z", b"X")


def _gone_soon(pid: int, seconds: float = 5.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if not _alive(pid):
            return True
        time.sleep(0.01)
    return False


def test_env_is_exactly_what_was_given() -> None:
    res = _proc.run(["/usr/bin/env"], env={"ONLY": "this", "AND": "that"})
    assert res.returncode == 0
    assert sorted(res.stdout.data.decode().splitlines()) == ["AND=that", "ONLY=this"]


def test_stdin_goes_in_and_both_streams_come_out() -> None:
    res = _sh("cat; echo oops >&2; exit 3", stdin=b"config")
    assert res == _proc.Result(3, _proc.Output(b"config", 0), _proc.Output(b"oops\n", 0))


def test_large_stdin_and_output_do_not_deadlock() -> None:
    data = os.urandom(1 << 20)
    res = _proc.run(["/bin/cat"], env=ENV, stdin=data)
    assert res.stdout.data == data and not res.stdout.truncated


def test_capture_cap_keeps_the_head_and_marks_truncation() -> None:
    res = _sh("head -c 100000 /dev/zero; head -c 10 /dev/zero >&2", cap=4096)
    assert res.returncode == 0
    assert res.stdout.data == b"\0" * 4096
    assert res.stdout.truncated and res.stdout.dropped == 100000 - 4096
    assert res.stderr == _proc.Output(b"\0" * 10, 0) and not res.stderr.truncated


def test_killed_by_signal_is_a_negative_returncode() -> None:
    assert _sh("kill -9 $$").returncode == -9


def test_timeout_kills_the_whole_group_and_keeps_partial_output(tmp_path: Path) -> None:
    pidfile = tmp_path / "grandchild"
    start = time.monotonic()
    with pytest.raises(_proc.ProcTimeout) as exc:
        _sh(f"sleep 60 & echo $! > {pidfile}; echo started; wait", timeout=0.5)
    assert time.monotonic() - start < 5
    assert exc.value.stdout.data == b"started\n"
    assert _gone_soon(int(pidfile.read_text()))


def test_grandchild_holding_the_pipes_does_not_hang_run() -> None:
    start = time.monotonic()
    res = _sh("sleep 30 & echo done", timeout=20, grace=0.1)
    assert res.returncode == 0 and res.stdout.data == b"done\n"
    assert time.monotonic() - start < 5


def test_missing_program_raises_oserror() -> None:
    with pytest.raises(FileNotFoundError):
        _proc.run(["/nonexistent/program"], env=ENV)


def test_fd_map_places_parent_fds_at_child_numbers(tmp_path: Path) -> None:
    r, w = os.pipe()
    out = tmp_path / "out"
    with open(out, "wb") as f:
        child = _proc.spawn([SH, "-c", "echo to-five >&5; echo to-one"], env=ENV,
                            fds={5: w, 1: f.fileno()})
        os.close(w)
        assert child.wait(10) == 0
    assert os.read(r, 100) == b"to-five\n"
    os.close(r)
    assert out.read_bytes() == b"to-one\n"


def test_no_descriptor_leaks_into_the_child() -> None:
    leaky = os.open(os.devnull, os.O_RDONLY)  # inheritable on purpose
    os.set_inheritable(leaky, True)
    try:
        res = _proc.run(["/bin/ls", "/proc/self/fd"], env=ENV)
    finally:
        os.close(leaky)
    fds = sorted(int(n) for n in res.stdout.data.split())
    # 0, 1, 2 and the directory ls itself opened to list them
    assert fds[:3] == [0, 1, 2] and len(fds) == 4


def test_unmapped_stdio_is_dev_null() -> None:
    res = _proc.run(["/bin/readlink", "/proc/self/fd/0"], env=ENV)
    assert res.stdout.data == b"/dev/null\n"


@pytest.mark.parametrize("session", [True, False])
def test_child_leads_its_own_group(session: bool) -> None:
    r, w = os.pipe()
    child = _proc.spawn(["/bin/sleep", "30"], env=ENV, fds={0: r}, session=session)
    os.close(r)
    try:
        assert os.getpgid(child.pid) == child.pid
        assert (os.getsid(child.pid) == child.pid) is session
    finally:
        assert child.kill_group() == -9
        os.close(w)


def test_cwd_runs_the_program_there(tmp_path: Path) -> None:
    r, w = os.pipe()
    child = _proc.spawn(["/bin/pwd"], env=ENV, fds={1: w}, cwd=tmp_path)
    os.close(w)
    assert child.wait(10) == 0
    assert os.read(r, 4096).decode().strip() == str(tmp_path)
    os.close(r)


def test_cwd_refuses_renumbered_descriptors(tmp_path: Path) -> None:
    with pytest.raises(ValueError):
        _proc.spawn(["/bin/true"], env=ENV, fds={7: 1}, cwd=tmp_path)


def test_wait_times_out_without_killing_then_kill_group_reaps() -> None:
    child = _proc.spawn(["/bin/sleep", "30"], env=ENV)
    with pytest.raises(_proc.ProcTimeout):
        child.wait(0.1)
    assert child.poll() is None
    assert child.kill_group() == -9
    assert child.returncode == -9 and child.poll() == -9


def test_wait_without_pidfd_polls_waitpid(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delattr(os, "pidfd_open")
    child = _proc.spawn([SH, "-c", "sleep 0.2; exit 4"], env=ENV)
    with pytest.raises(_proc.ProcTimeout):
        child.wait(0.01)
    assert child.wait(10) == 4
    res = _sh("echo hi; exit 2", timeout=10)
    assert res.returncode == 2 and res.stdout.data == b"hi\n"
    with pytest.raises(_proc.ProcTimeout):
        _sh("sleep 30", timeout=0.2)
