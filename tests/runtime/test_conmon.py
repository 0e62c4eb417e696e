"""Tests for podkit.runtime.conmon: containers supervised by a real conmon, with runc and crun.

Run the crun cases inside the private mount namespace: ``scripts/isolated .venv/bin/pytest
tests/runtime/test_conmon.py``. Every test uses a runc/crun ``--root`` and a conmon state dir
under its pytest tmp dir and IDs ``pk-cm-...``, and checks that nothing is left behind.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from podkit.errors import InvalidArgumentError
from podkit.runtime import Conmon, ConmonContainer, parse_detach_keys
from podkit.runtime.base import ExecResult
from podkit.runtime.conmon_files import exit_status_from_code
from podkit.runtime.errors import (
    AlreadyExistsError,
    NotFoundError,
    NotRunningError,
    OCIRuntimeError,
    RuntimeTimeoutError,
)
from podkit.runtime.logs import parse_cri_log_line, read_cri_log
from podkit.runtime.runc import Runc
from podkit.runtime.supervise import (
    AttachStream,
    ConmonSupervisor,
    InProcessSupervisor,
    Supervisor,
)

from ._conmon_env import Env, conmon_pids_for

# -- unit --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ("ctrl-p,ctrl-q", b"\x10\x11"),
        ("a,ctrl-@,ctrl-[", b"a\x00\x1b"),
        ("ctrl-A", b"\x01"),
    ],
)
def test_parse_detach_keys(spec: str, expected: bytes) -> None:
    assert parse_detach_keys(spec) == expected


@pytest.mark.parametrize("spec", ["", "ctrl-", "ctrl-pp", "shift-a", "ab"])
def test_parse_detach_keys_rejects(spec: str) -> None:
    with pytest.raises(InvalidArgumentError, match="detach key"):
        parse_detach_keys(spec)


def test_record_round_trip_and_corrupt() -> None:
    record = ConmonContainer(id="c", bundle="/b", log_path="/l", pid=5, conmon_pid=4, tty=True,
                             runtime=["/usr/bin/runc", "--root", "/r"], created="now")
    assert ConmonContainer.from_dict(json.loads(json.dumps(record.to_dict())), "x") == record
    with pytest.raises(InvalidArgumentError, match=r"corrupt conmon state /s/conmon\.json"):
        ConmonContainer.from_dict({"id": "c"}, "/s/conmon.json")


def sync_messages(tmp_path: Path, payload: bytes, want: int) -> list[tuple[int, str | None]]:
    """Feed ``payload`` through a real pipe to the sync-pipe reader."""
    cm = Conmon(Runc(binary="/bin/true", root=tmp_path / "root"), state_dir=tmp_path / "s")
    r, w = os.pipe()
    try:
        os.write(w, payload)
        os.close(w)
        return cm._read_sync(r, ["conmon"], timeout=5, want=want)
    finally:
        os.close(r)


def test_sync_pipe_messages(tmp_path: Path) -> None:
    assert sync_messages(tmp_path, b'{"data": 42}\n', 1) == [(42, None)]
    # exec: pid, then exit code; partial reads and blank lines are fine
    assert sync_messages(tmp_path, b'{"data": 7}\n\n{"data": 3}\n', 2) == [(7, None), (3, None)]
    failure = b'{"data": -1, "message": "runc create failed: boom\\n"}\n{"data": 9}\n'
    assert sync_messages(tmp_path, failure, 2) == [(-1, "runc create failed: boom\n")]
    assert sync_messages(tmp_path, b"", 1) == []  # conmon died before writing


def test_sync_pipe_garbage_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(OCIRuntimeError, match="unexpected message from conmon"):
        sync_messages(tmp_path, b"not json\n", 1)


def test_exit_codes_map_to_signals() -> None:
    assert exit_status_from_code(0, None).signal is None
    assert exit_status_from_code(3, None).exit_code == 3
    status = exit_status_from_code(137, None)
    assert (status.exit_code, status.signal, status.signal_name) == (137, 9, "SIGKILL")
    assert exit_status_from_code(255, None).signal is None


def test_bad_inputs_are_refused_before_conmon_runs(tmp_path: Path) -> None:
    runc = Runc(binary="/bin/true", root=tmp_path / "root")
    with pytest.raises(NotFoundError, match="conmon binary '/nonexistent/conmon'"):
        Conmon(runc, state_dir=tmp_path / "s", conmon_binary="/nonexistent/conmon").create(
            "pk-cm-x", tmp_path
        )
    cm = Conmon(runc, state_dir=tmp_path / "s")
    with pytest.raises(InvalidArgumentError, match=r"no config\.json"):
        cm.create("pk-cm-x", tmp_path)
    with pytest.raises(InvalidArgumentError, match="container ID"):
        cm.create("../evil", tmp_path)
    with pytest.raises(NotFoundError, match="no container 'pk-cm-nope'"):
        cm.wait("pk-cm-nope")
    assert cm.list() == []
    assert not (tmp_path / "s" / "containers" / "pk-cm-x").exists()


# -- integration helpers -----------------------------------------------------------------


# -- integration -------------------------------------------------------------------------


@pytest.mark.integration
def test_log_lines_partials_and_exit_code(env: Env) -> None:
    cid = env.new_id("log")
    script = ("echo out; echo err >&2; head -c 20000 /dev/zero | tr '\\0' x; echo;"
              " printf 'no newline'; exit 3")
    record = env.conmon.run(cid, env.bundle(cid, ["sh", "-c", script]))
    assert record.pid > 0 and record.conmon_pid > 0
    status = env.conmon.wait(cid, timeout=60)
    assert (status.exit_code, status.signal) == (3, None)
    assert status.exited_at is not None
    lines = read_cri_log(record.log_path)
    by_stream = {s: [(ln.content, ln.complete) for ln in lines if ln.stream == s]
                 for s in ("stdout", "stderr")}
    assert by_stream == {
        "stdout": [(b"out", True), (b"x" * 20000, True), (b"no newline", False)],
        "stderr": [(b"err", True)],
    }
    raw = [parse_cri_log_line(r) for r in Path(record.log_path).read_bytes().splitlines()]
    assert any(e.partial for e in raw if e.content.startswith(b"xxx"))  # > conmon's 8 KiB
    assert env.conmon.oom_killed(cid) is False
    assert not env.conmon.monitor_alive(cid)


@pytest.mark.integration
def test_exit_zero_and_stop_escalates_to_sigkill(env: Env) -> None:
    ok = env.new_id("ok")
    env.conmon.run(ok, env.bundle(ok, ["true"]))
    assert env.conmon.wait(ok, timeout=60).exit_code == 0

    hang = env.new_id("stop")
    env.conmon.run(hang, env.bundle(hang, ["sleep", "600"]))
    with pytest.raises(RuntimeTimeoutError, match="still running"):
        env.conmon.wait(hang, timeout=0.2)
    status = env.conmon.stop(hang, timeout=0.5)  # sleep as pid 1 ignores SIGTERM
    assert (status.exit_code, status.signal) == (137, 9)
    assert env.conmon.exit_status(hang) == status
    assert (env.conmon.exit_dir / hang).read_text() == "137"
    env.conmon.delete(hang)
    with pytest.raises(NotFoundError):
        env.conmon.get(hang)
    assert not (env.tmp / f"bundle-{hang}" / "ctl").exists()
    assert not (env.conmon.socket_dir / hang).exists()


@pytest.mark.integration
def test_start_failure_reports_runtime_message_and_leaks_nothing(env: Env) -> None:
    cid = env.new_id("bad")
    bundle = env.bundle(cid, ["/nonexistent"])
    log = env.tmp / "bad.log"
    with pytest.raises(OCIRuntimeError, match="/nonexistent") as info:
        env.conmon.create(cid, bundle, log_path=log)
    assert not log.exists()
    assert info.value.message.startswith(env.binary)
    assert "/nonexistent" in info.value.message
    assert not env.conmon.container_dir(cid).exists()
    assert conmon_pids_for(cid) == []
    assert sorted(p.name for p in bundle.iterdir()) == ["config.json"]
    assert list(env.conmon.socket_dir.iterdir()) == []
    assert list(env.conmon.exit_dir.iterdir()) == []
    with pytest.raises(NotFoundError):
        env.runc.state(cid)


@pytest.mark.integration
def test_bad_bundle_reports_runtime_message(env: Env) -> None:
    cid = env.new_id("badcfg")
    bundle = env.bundle(cid, ["true"])
    (bundle / "config.json").write_text('{"ociVersion": "1.0.2", "process": ')
    with pytest.raises(OCIRuntimeError) as info:
        env.conmon.create(cid, bundle)
    # the runtime's own words: runc "unexpected EOF", crun "error loading config.json"
    assert info.value.message.startswith(env.binary)
    assert re.search(r"unexpected EOF|error loading config\.json", info.value.message)
    assert not env.conmon.container_dir(cid).exists()
    assert conmon_pids_for(cid) == []


@pytest.mark.integration
def test_duplicate_id_is_refused(env: Env) -> None:
    cid = env.new_id("dup")
    env.conmon.create(cid, env.bundle(cid, ["sleep", "600"]))
    with pytest.raises(AlreadyExistsError, match=cid):
        env.conmon.create(cid, env.tmp / f"bundle-{cid}")
    assert env.conmon.monitor_alive(cid)  # the first one is untouched
    env.conmon.delete(cid, force=True)
    assert conmon_pids_for(cid) == []


CHILD = r"""
import json, sys
from podkit.runtime.conmon import Conmon
from podkit.runtime.runc import Runc
binary, root, state, cid, bundle, out = sys.argv[1:]
cm = Conmon(Runc(binary=binary, root=root), state_dir=state)
record = cm.run(cid, bundle, stdin=True)
open(out, "w").write(json.dumps(record.to_dict()))
"""


@pytest.mark.integration
def test_other_process_starts_this_one_attaches_waits_stops(env: Env) -> None:
    cid = env.new_id("xproc")
    bundle = env.bundle(cid, ["sh", "-c", "while read l; do echo \"got $l\"; done"])
    out = env.tmp / "child.json"
    rc = subprocess.call(
        [sys.executable, "-c", CHILD, env.binary, os.fspath(env.tmp / "rt"),
         os.fspath(env.state_dir), cid, os.fspath(bundle), os.fspath(out)],
        stdin=subprocess.DEVNULL, timeout=120,
    )
    assert rc == 0
    started = json.loads(out.read_text())
    # a new Conmon object in this process finds it
    conmon = Conmon(Runc(binary=env.binary, root=env.tmp / "rt"), state_dir=env.state_dir)
    assert [r.id for r in conmon.list()] == [cid]
    assert conmon.get(cid).pid == started["pid"]
    assert conmon.monitor_alive(cid)
    assert env.runc.state(cid).status == "running"
    with conmon.attach(cid) as first, conmon.attach(cid) as second:
        first.send(b"hello\n")
        assert first.recv(timeout=30) == ("stdout", b"got hello\n")
        assert second.recv(timeout=30) == ("stdout", b"got hello\n")
        second.send(b"again\n")
        assert first.recv(timeout=30) == ("stdout", b"got again\n")
        assert second.recv(timeout=30) == ("stdout", b"got again\n")
        status = conmon.stop(cid, timeout=0.5)  # sh as pid 1 ignores SIGTERM
        assert status.exit_code == 137
        assert first.recv(timeout=30) is None  # conmon closes attachers when it exits
    with pytest.raises(NotRunningError):
        conmon.attach(cid)
    lines = read_cri_log(started["logPath"])
    assert [ln.content for ln in lines] == [b"got hello", b"got again"]


@pytest.mark.integration
def test_attach_copy_with_detach_keys(env: Env) -> None:
    cid = env.new_id("detach")
    env.conmon.run(cid, env.bundle(cid, ["sh", "-c", "while read l; do echo \"$l\"; done"]),
                   stdin=True)
    r, w = os.pipe()
    sink_path = env.tmp / "sink"

    def typist() -> None:
        os.write(w, b"abc\n\x10x")
        for _ in range(1000):  # until the echo came back through copy()
            if sink_path.read_bytes().startswith(b"abc\n"):
                break
            time.sleep(0.01)
        os.write(w, b"\x10\x11ignored\n")

    with open(sink_path, "wb") as sink, os.fdopen(r, "rb", buffering=0) as stdin, \
            env.conmon.attach(cid) as att:
        thread = threading.Thread(target=typist)
        thread.start()
        assert att.copy(stdout=sink, stdin=stdin) == "detached"
        thread.join()
    os.close(w)
    assert sink_path.read_bytes() == b"abc\n"
    # ctrl-p not followed by ctrl-q is forwarded; the detach sequence and what follows is not
    with env.conmon.attach(cid) as att:
        att.send(b"after\n")
        assert att.recv(timeout=30) == ("stdout", b"\x10xafter\n")
    assert env.conmon.monitor_alive(cid)  # still running after the detach
    contents = [ln.content for ln in read_cri_log(env.conmon.get(cid).log_path)]
    assert contents == [b"abc", b"\x10xafter"]


@pytest.mark.integration
def test_exec_sync(env: Env) -> None:
    cid = env.new_id("exec")
    env.conmon.run(cid, env.bundle(cid, ["sleep", "600"]))
    result = env.conmon.exec_sync(cid, ["sh", "-c", "echo hi; printf oops >&2; exit 5"])
    assert result == ExecResult(exit_code=5, stdout=b"hi\n", stderr=b"oops")
    assert env.conmon.exec_sync(cid, ["true"], timeout=30).exit_code == 0
    with pytest.raises(RuntimeTimeoutError, match="timed out"):
        env.conmon.exec_sync(cid, ["sleep", "100"], timeout=1)
    with pytest.raises(OCIRuntimeError, match="nonexistent"):
        env.conmon.exec_sync(cid, ["/nonexistent"])
    assert sorted(p.name for p in env.conmon.container_dir(cid).iterdir()
                  if p.name.startswith("exec-")) == []  # per-exec files removed
    assert conmon_pids_for(f"{cid}-exec-") == []
    env.conmon.stop(cid, timeout=0.5)
    with pytest.raises(OCIRuntimeError):
        env.conmon.exec_sync(cid, ["true"])


@pytest.mark.integration
def test_tty_resize_visible_to_stty(env: Env) -> None:
    cid = env.new_id("tty")
    script = "while read x; do stty size; done"
    env.conmon.run(cid, env.bundle(cid, ["sh", "-c", script], terminal=True), tty=True,
                   stdin=True)
    env.conmon.resize(cid, 40, 100)
    sizes: list[bytes] = []
    with env.conmon.attach(cid) as att:
        for _ in range(50):  # conmon applies the resize asynchronously: ask until it shows
            att.send(b"\n")
            buf = b""
            while (m := re.search(rb"(\d+ \d+)\r\n", buf)) is None:
                item = att.recv(timeout=30)
                assert item is not None and item[0] == "stdout"  # a tty has one stream
                buf += item[1]
            sizes.append(m.group(1))
            if sizes[-1] == b"40 100":
                break
    assert sizes[-1] == b"40 100"
    with pytest.raises(InvalidArgumentError, match="rows 0"):
        env.conmon.resize(cid, 0, 10)


@pytest.mark.integration
def test_reopen_log_after_rotation(env: Env) -> None:
    cid = env.new_id("reopen")
    env.conmon.run(cid, env.bundle(cid, ["sh", "-c", "while read l; do echo \"$l\"; done"]),
                   stdin=True)
    log = Path(env.conmon.get(cid).log_path)
    with env.conmon.attach(cid) as att:
        att.send(b"one\n")
        assert att.recv(timeout=30) == ("stdout", b"one\n")  # logged before it is relayed
        log.rename(f"{log}.1")
        env.conmon.reopen_log(cid)
        assert log.exists()
        att.send(b"two\n")
        assert att.recv(timeout=30) == ("stdout", b"two\n")
    assert [ln.content for ln in read_cri_log(log)] == [b"two"]
    assert [ln.content for ln in read_cri_log(log, include_rotated=True)] == [b"one", b"two"]
    env.conmon.stop(cid, timeout=0.5)
    with pytest.raises(NotRunningError):
        env.conmon.reopen_log(cid)
    # a process that still holds the ctl FIFO open does not make a gone conmon look alive
    reader = os.open(Path(env.conmon.get(cid).bundle) / "ctl", os.O_RDONLY | os.O_NONBLOCK)
    try:
        with pytest.raises(NotRunningError, match="conmon has exited"):
            env.conmon.reopen_log(cid, timeout=5)
    finally:
        os.close(reader)


# -- both supervision modes behind one interface ----------------------------------------


@pytest.fixture(params=["conmon", "inprocess"])
def supervisor(request: pytest.FixtureRequest, env: Env) -> Iterator[Supervisor]:
    sup: Supervisor
    if request.param == "conmon":
        sup = ConmonSupervisor(env.conmon)
    else:
        sup = InProcessSupervisor(env.runc)
    assert isinstance(sup, Supervisor)
    yield sup
    if isinstance(sup, InProcessSupervisor):
        for cid in env.ids:
            with contextlib.suppress(NotFoundError):
                sup.delete(cid, force=True)


def recv_n(att: AttachStream, n: int) -> dict[str, bytes]:
    got = {"stdout": b"", "stderr": b""}
    for _ in range(n):
        item = att.recv(timeout=30)
        assert item is not None
        got[item[0]] += item[1]
    return got


@pytest.mark.integration
def test_supervisor_log_attach_exec_reopen_wait(env: Env, supervisor: Supervisor) -> None:
    cid = env.new_id("sup")
    script = 'while read l; do echo "got $l"; echo "err $l" >&2; done; exit 3'
    log = env.tmp / "logs" / f"{cid}.log"
    log.parent.mkdir()
    pid = supervisor.start(cid, env.bundle(cid, ["sh", "-c", script]), log_path=log,
                           stdin=True, stdin_once=True)
    assert pid > 0
    att = supervisor.attach(cid)
    att.send(b"a\n")
    assert recv_n(att, 2) == {"stdout": b"got a\n", "stderr": b"err a\n"}
    assert supervisor.exec_sync(cid, ["sh", "-c", "echo x; echo y >&2"], timeout=30) == \
        ExecResult(exit_code=0, stdout=b"x\n", stderr=b"y\n")
    log.rename(f"{log}.1")
    supervisor.reopen_log(cid)
    att.send(b"b\n")
    assert recv_n(att, 2) == {"stdout": b"got b\n", "stderr": b"err b\n"}
    att.close_stdin()
    status = supervisor.wait(cid, timeout=60)
    assert status.exit_code == 3
    assert att.recv(timeout=30) is None
    att.close()
    old = [(ln.stream, ln.content) for ln in read_cri_log(f"{log}.1")]
    assert sorted(old) == [("stderr", b"err a"), ("stdout", b"got a")]
    new = [(ln.stream, ln.content) for ln in read_cri_log(log)]
    assert sorted(new) == [("stderr", b"err b"), ("stdout", b"got b")]
    supervisor.delete(cid)


@pytest.mark.integration
def test_supervisor_creates_missing_log_directory(env: Env, supervisor: Supervisor) -> None:
    cid = env.new_id("suplogdir")
    log = env.tmp / "pods" / "p1" / f"{cid}.log"
    supervisor.start(cid, env.bundle(cid, ["sh", "-c", "echo hi"]), log_path=log)
    assert supervisor.wait(cid, timeout=60).exit_code == 0
    assert [(ln.stream, ln.content) for ln in read_cri_log(log)] == [("stdout", b"hi")]
    supervisor.delete(cid)


@pytest.mark.integration
def test_supervisor_tty_resize_and_stop(env: Env, supervisor: Supervisor) -> None:
    cid = env.new_id("suptty")
    log = env.tmp / f"{cid}.log"
    bundle = env.bundle(cid, ["sh", "-c", "while read x; do stty size; done"], terminal=True)
    supervisor.start(cid, bundle, log_path=log, tty=True, stdin=True)
    supervisor.resize(cid, 41, 101)
    att = supervisor.attach(cid)
    sizes: list[bytes] = []
    for _ in range(50):  # conmon applies a resize asynchronously: ask until it shows
        att.send(b"\n")
        buf = b""
        while (m := re.search(rb"(\d+ \d+)\r\n", buf)) is None:
            item = att.recv(timeout=30)
            assert item is not None and item[0] == "stdout"
            buf += item[1]
        sizes.append(m.group(1))
        if sizes[-1] == b"41 101":
            break
    assert sizes[-1] == b"41 101"
    status = supervisor.stop(cid, timeout=0.5)
    assert status.exit_code == 137
    att.close()
    assert any(ln.content == b"41 101\r" for ln in read_cri_log(log))
    supervisor.delete(cid)


@pytest.mark.integration
def test_oom_kill_is_recorded(env: Env) -> None:
    cid = env.new_id("oom")
    bundle = env.bundle(cid, ["sh", "-c", "x=$(head -c 200000000 /dev/zero | tr '\\0' a)"])
    config = json.loads((bundle / "config.json").read_text())
    limit = 32 * 1024 * 1024
    config["linux"]["resources"]["memory"] = {"limit": limit, "swap": limit}
    (bundle / "config.json").write_text(json.dumps(config))
    env.conmon.run(cid, bundle)
    status = env.conmon.wait(cid, timeout=120)
    assert status.exit_code == 137
    assert env.conmon.oom_killed(cid)


@pytest.mark.integration
def test_supervisor_start_failure_leaves_nothing(env: Env, supervisor: Supervisor) -> None:
    cid = env.new_id("supbad")
    log = env.tmp / f"{cid}.log"
    with pytest.raises(OCIRuntimeError, match="/nonexistent"):
        supervisor.start(cid, env.bundle(cid, ["/nonexistent"]), log_path=log)
    assert not log.exists()
    with pytest.raises(NotFoundError):
        supervisor.wait(cid)
    with pytest.raises(NotFoundError):
        env.runc.state(cid)
    assert conmon_pids_for(cid) == []
