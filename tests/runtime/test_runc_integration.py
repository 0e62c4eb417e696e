"""Runc adapter against real runc 1.1.5 and crun 1.8.1 on a busybox rootfs.

crun needs the private mount namespace of scripts/isolated (hybrid cgroups), so every test here
runs there. State roots live under pytest's tmp dir, IDs start with ``pk-rt-``; each test
deletes what it made and checks that no cgroup directory is left behind.
"""

from __future__ import annotations

import glob
import os
import shutil
import signal
import threading
import time
import uuid
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import _leaks
from podkit import cgroups, oci
from podkit.errors import InvalidArgumentError
from podkit.oci import codec
from podkit.oci.defaults import runc_spec
from podkit.runtime import (
    AlreadyExistsError,
    Bundle,
    ExecProcess,
    ExitStatus,
    FileIO,
    NotFoundError,
    NotRunningError,
    OCIRuntimeError,
    PipeIO,
    Runc,
    RuntimeTimeoutError,
    UnsupportedFieldWarning,
    UnsupportedOperationError,
)
from podkit.runtime.monitor import is_subreaper, set_subreaper
from support import require_binary, require_isolated

from ._slow import timeout_past_start

pytestmark = pytest.mark.integration

CG = "/sys/fs/cgroup"


@pytest.fixture(scope="module", autouse=True)
def _restore_subreaper() -> Iterator[None]:
    was = is_subreaper()
    yield
    set_subreaper(was)


@pytest.fixture(params=["runc", "crun"])
def runtime(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Runc]:
    require_isolated()
    require_binary(request.param)
    rt = Runc(request.param, root=tmp_path / "state", timeout=30)
    _leaks.register_runtime_root(tmp_path / "state")
    yield rt
    leftovers = [c.id for c in rt.list()]
    for cid in leftovers:
        rt.delete(cid, force=True)
    assert rt.list() == []
    assert not leftovers, f"test left containers behind: {leftovers}"
    assert rt._scratch.path is None, "scratch dir for pid files / process specs left behind"


@pytest.fixture
def new_id(runtime: Runc) -> Iterator[Any]:
    made: list[str] = []

    def make(tag: str = "c") -> str:
        cid = f"pk-rt-{tag}-{uuid.uuid4().hex[:8]}"
        made.append(cid)
        return cid

    yield make
    for cid in made:
        runtime.delete(cid, force=True)
        left = glob.glob(f"{CG}/*/{cid}") + glob.glob(f"{CG}/{cid}")  # v1 dirs; the v2 one
        assert left == [], f"cgroup dirs left behind: {left}"


def make_bundle(
    tmp_path: Path, rootfs: Path, cid: str, *args: str, **spec_fields: Any
) -> Bundle:
    spec = runc_spec()
    assert spec.process is not None and spec.linux is not None
    spec.process.terminal = False
    spec.process.args = list(args)
    spec.hostname = cid[:60]
    spec.linux.cgroups_path = f"/{cid}"
    for key, value in spec_fields.items():
        setattr(spec, key, value)
    return Bundle.create(tmp_path / f"bundle-{cid}", spec, rootfs=rootfs)


def started(rt: Runc, tmp_path: Path, rootfs: Path, cid: str, *args: str) -> int:
    pid = rt.create(cid, make_bundle(tmp_path, rootfs, cid, *args))
    rt.start(cid)
    return pid


def started_with_trap(rt: Runc, tmp_path: Path, rootfs: Path, cid: str, trap: str) -> None:
    """Start a shell init that handles a signal; return once the trap is installed."""
    out = tmp_path / f"{cid}.out"
    script = f"{trap}; echo ready; while :; do sleep 0.05; done"
    rt.create(cid, make_bundle(tmp_path, rootfs, cid, "sh", "-c", script), io=FileIO(out))
    rt.start(cid)
    deadline = time.monotonic() + 20
    while "ready" not in (out.read_text() if out.exists() else ""):
        assert time.monotonic() < deadline, "container never printed ready"
        time.sleep(0.01)


# --- lifecycle -----------------------------------------------------------------------------


def test_full_lifecycle(runtime: Runc, new_id: Any, tmp_path: Path, busybox_rootfs: Path) -> None:
    cid = new_id()
    bundle = make_bundle(tmp_path, busybox_rootfs, cid, "sleep", "1000")
    pid = runtime.create(cid, bundle)
    st = runtime.state(cid)
    assert (st.id, st.status, st.pid, st.bundle) == (cid, "created", pid, str(bundle.path))
    assert [c.id for c in runtime.list()] == [cid]
    runtime.start(cid)
    assert runtime.state(cid).status == "running"
    assert runtime.ps(cid) == [pid]
    runtime.kill(cid, "KILL")
    status = runtime.wait(cid, 10)
    assert (status.exit_code, status.signal) == (137, 9)
    st = runtime.state(cid)
    assert (st.status, st.pid) == ("stopped", 0)
    runtime.delete(cid)
    with pytest.raises(NotFoundError):
        runtime.state(cid)
    assert glob.glob(f"{CG}/*/{cid}") == []


@pytest.mark.parametrize("code", [0, 3])
def test_exit_codes(
    runtime: Runc, new_id: Any, tmp_path: Path, busybox_rootfs: Path, code: int
) -> None:
    cid = new_id()
    io = FileIO(tmp_path / "out.log")
    runtime.create(cid, make_bundle(tmp_path, busybox_rootfs, cid, "sh", "-c",
                                    f"echo bye; exit {code}"), io=io)
    runtime.start(cid)
    st = runtime.wait(cid, 10)
    assert (st.exit_code, st.signal) == (code, None)
    assert (tmp_path / "out.log").read_text() == "bye\n"
    runtime.delete(cid)


def test_signal_with_handler(
    runtime: Runc, new_id: Any, tmp_path: Path, busybox_rootfs: Path
) -> None:
    cid = new_id()
    started_with_trap(runtime, tmp_path, busybox_rootfs, cid, "trap 'exit 42' USR1")
    runtime.kill(cid, signal.SIGUSR1)
    assert runtime.wait(cid, 10).exit_code == 42


def test_run_foreground_returns_exit_code_and_removes(
    runtime: Runc, new_id: Any, tmp_path: Path, busybox_rootfs: Path
) -> None:
    cid = new_id()
    rc = runtime.run(cid, make_bundle(tmp_path, busybox_rootfs, cid, "sh", "-c", "exit 3"),
                     timeout=30)
    assert rc == 3
    assert runtime.list() == []


def test_run_detached(runtime: Runc, new_id: Any, tmp_path: Path, busybox_rootfs: Path) -> None:
    cid = new_id()
    pid = runtime.run(cid, make_bundle(tmp_path, busybox_rootfs, cid, "sh", "-c", "exit 5"),
                      detach=True)
    assert pid > 0
    assert runtime.wait(cid, 10).exit_code == 5
    runtime.delete(cid)


# --- exec ----------------------------------------------------------------------------------


def test_exec_with_pipes(
    runtime: Runc, new_id: Any, tmp_path: Path, busybox_rootfs: Path
) -> None:
    cid = new_id()
    started(runtime, tmp_path, busybox_rootfs, cid, "sleep", "1000")
    proc = codec.structure({"cwd": "/", "env": ["PATH=/bin"], "args": [
        "sh", "-c", "read x; echo got:$x; echo oops >&2; exit 6"]}, oci.Process)
    io = PipeIO()
    ex = runtime.exec(cid, proc, io=io)
    assert isinstance(ex, ExecProcess) and ex.pid > 0
    assert io.stdin is not None and io.stdout is not None and io.stderr is not None
    io.stdin.write(b"hi\n")
    io.stdin.close()
    assert io.stdout.read() == b"got:hi\n"
    assert io.stderr.read() == b"oops\n"
    assert runtime.wait_exec(ex, 10).exit_code == 6
    io.close()
    fg = runtime.exec(cid, proc, detach=False, io=FileIO(tmp_path / "fg.log",
                                                            stdin_path="/dev/null"))
    assert isinstance(fg, ExitStatus) and fg.exit_code == 6
    assert sorted((tmp_path / "fg.log").read_text().splitlines()) == ["got:", "oops"]


def test_exec_sync(runtime: Runc, new_id: Any, tmp_path: Path, busybox_rootfs: Path) -> None:
    cid = new_id()
    started(runtime, tmp_path, busybox_rootfs, cid, "sleep", "1000")
    res = runtime.exec_sync(cid, ["sh", "-c", "echo out; echo err >&2; exit 4"], 10)
    assert (res.exit_code, res.stdout, res.stderr) == (4, b"out\n", b"err\n")
    res = runtime.exec_sync(cid, ["sh", "-c", "kill -9 $$"], 10)
    assert res.exit_code == 137
    res = runtime.exec_sync(cid, ["sh", "-c", "echo $FOO; pwd"], 10, env=["FOO=bar"], cwd="/tmp")
    assert res.stdout == b"bar\n/tmp\n"


def test_exec_sync_timeout_kills_the_process(
    runtime: Runc, new_id: Any, tmp_path: Path, busybox_rootfs: Path
) -> None:
    cid = new_id()
    init = started(runtime, tmp_path, busybox_rootfs, cid, "sleep", "1000")
    timeout = timeout_past_start(lambda: runtime.exec_sync(cid, ["true"], 30))
    with pytest.raises(RuntimeTimeoutError):
        runtime.exec_sync(cid, ["sleep", "1000"], timeout)
    assert runtime.ps(cid) == [init]  # the exec'd sleep is gone, not leaked


# --- pause, update, stop -------------------------------------------------------------------


def test_pause_resume(runtime: Runc, new_id: Any, tmp_path: Path, busybox_rootfs: Path) -> None:
    cid = new_id()
    started(runtime, tmp_path, busybox_rootfs, cid, "sleep", "1000")
    runtime.pause(cid)
    assert runtime.state(cid).status == "paused"
    with pytest.raises(NotRunningError, match="paused"):
        runtime.exec_sync(cid, ["true"], 10)
    runtime.resume(cid)
    assert runtime.state(cid).status == "running"
    assert runtime.exec_sync(cid, ["true"], 10).exit_code == 0


def test_update_memory_and_pids(
    runtime: Runc, new_id: Any, tmp_path: Path, busybox_rootfs: Path
) -> None:
    cid = new_id()
    started(runtime, tmp_path, busybox_rootfs, cid, "sleep", "1000")
    res = oci.Spec.from_dict({"ociVersion": "1.0.2", "linux": {"resources": {
        "memory": {"limit": 100 * 1024 * 1024}, "pids": {"limit": 50}}}}).linux
    assert res is not None and res.resources is not None
    runtime.update(cid, res.resources)
    sample = cgroups.stats(f"/{cid}")  # v1 files here, v2 files in the guest
    assert sample.memory is not None and sample.memory.limit == 104857600
    assert sample.pids is not None and sample.pids.limit == 50


def test_stop_escalates_when_init_ignores_term(
    runtime: Runc, new_id: Any, tmp_path: Path, busybox_rootfs: Path
) -> None:
    cid = new_id()
    started(runtime, tmp_path, busybox_rootfs, cid, "sleep", "1000")  # pid 1: TERM ignored
    result = runtime.stop(cid, timeout=0.5)
    assert result.escalated
    assert result.signals == [signal.SIGTERM, signal.SIGKILL]
    assert result.exit_status is not None and result.exit_status.exit_code == 137
    assert runtime.state(cid).status == "stopped"
    again = runtime.stop(cid, timeout=0.5)
    assert again.already_stopped and again.signals == []


def test_stop_without_escalation(
    runtime: Runc, new_id: Any, tmp_path: Path, busybox_rootfs: Path
) -> None:
    cid = new_id()
    started_with_trap(runtime, tmp_path, busybox_rootfs, cid, "trap 'exit 0' TERM")
    result = runtime.stop(cid, timeout=10)
    assert not result.escalated and result.signals == [signal.SIGTERM]
    assert result.exit_status is not None and result.exit_status.exit_code == 0


# --- queries -------------------------------------------------------------------------------


def test_features_stats_events_top(
    runtime: Runc, new_id: Any, tmp_path: Path, busybox_rootfs: Path
) -> None:
    cid = new_id()
    started(runtime, tmp_path, busybox_rootfs, cid, "sleep", "1000")
    assert runtime.version().name == runtime.binary
    stats = runtime.stats(cid)  # from the cgroup (v1 here, v2 in the guest), runc and crun
    assert stats.pids_current == 1 and stats.memory.usage.usage > 0 and stats.cpu.total > 0
    assert stats.cgroup is not None and stats.cgroup.mode is cgroups.host().mode
    top = runtime.top(cid)  # crun's ps prints PIDs only: the columns come from host ps
    assert "PID" in top.headers and "CMD" in top.headers and len(top.processes) == 1
    assert top.processes[0][top.headers.index("PID")] == str(runtime.ps(cid)[0])
    if runtime.binary == "runc":
        assert runtime.features().oci_version_max
        own = runtime.events_stats(cid)
        assert own.pids_current == 1 and own.memory.usage.usage > 0
        events = runtime.events(cid, interval=0.1)
        first = next(events)
        events.close()
        assert first.type == "stats" and first.id == cid
    else:
        for call in (runtime.features, lambda: runtime.events_stats(cid),
                     lambda: next(runtime.events(cid, 0.1))):
            with pytest.raises(UnsupportedOperationError):
                call()
    if shutil.which("criu") is None:
        with pytest.raises(UnsupportedOperationError, match="criu"):
            runtime.checkpoint(cid, tmp_path / "ckpt")
        return
    try:
        runtime.checkpoint(cid, tmp_path / "ckpt", leave_running=True)
    except UnsupportedOperationError as e:  # Debian's crun 1.8.1 is built without CRIU
        assert runtime.binary == "crun" and "checkpoint" in str(e)
    except OCIRuntimeError as e:  # CRIU that cannot dump here (this VM's vdso): its words
        assert runtime.binary == "runc" and "criu failed" in str(e)
    else:
        assert (tmp_path / "ckpt" / "inventory.img").is_file()
    assert runtime.state(cid).status == "running"  # a failed or leave-running dump keeps it


def test_strict_refuses_fields_the_runtime_ignores(
    runtime: Runc, new_id: Any, tmp_path: Path, busybox_rootfs: Path
) -> None:
    cid = new_id()
    bundle = make_bundle(tmp_path, busybox_rootfs, cid, "true")
    bundle.spec.extra["fooUnknown"] = 1
    bundle = Bundle.create(bundle.path, bundle.spec)
    with pytest.raises(UnsupportedOperationError, match=r"\$\.fooUnknown: unknown key"):
        runtime.create(cid, bundle, strict=True)
    assert runtime.list() == []
    with pytest.warns(UnsupportedFieldWarning, match="fooUnknown") as record:
        runtime.create(cid, bundle)
    warned = [w.message for w in record if isinstance(w.message, UnsupportedFieldWarning)]
    assert [p.path for w in warned for p in w.problems] == ["$.fooUnknown"]
    runtime.delete(cid, force=True)


# --- bad paths -----------------------------------------------------------------------------


def test_missing_binary(tmp_path: Path) -> None:
    rt = Runc("pk-rt-no-such-runtime", root=tmp_path)
    with pytest.raises(NotFoundError, match="pk-rt-no-such-runtime"):
        rt.state("pk-rt-x")
    with pytest.raises(NotFoundError):
        rt.list()


@pytest.mark.parametrize("bad", ["", "../etc", "a/b", ".", "-rf", "x" * 200, "a b"])
def test_invalid_ids_refused_before_the_runtime(tmp_path: Path, bad: str) -> None:
    rt = Runc("pk-rt-no-such-runtime", root=tmp_path)  # never reached: the ID check comes first
    for call in (lambda: rt.state(bad), lambda: rt.start(bad), lambda: rt.kill(bad),
                 lambda: rt.delete(bad, force=True), lambda: rt.exec_sync(bad, ["true"]),
                 lambda: rt.create(bad, tmp_path)):
        with pytest.raises(InvalidArgumentError):
            call()


def test_unknown_container(runtime: Runc) -> None:
    for call in (lambda: runtime.state("pk-rt-missing"), lambda: runtime.start("pk-rt-missing"),
                 lambda: runtime.kill("pk-rt-missing", 9),
                 lambda: runtime.delete("pk-rt-missing"),
                 lambda: runtime.exec_sync("pk-rt-missing", ["true"], 10)):
        with pytest.raises(NotFoundError):
            call()
    runtime.delete("pk-rt-missing", force=True)  # idempotent


def test_duplicate_id(runtime: Runc, new_id: Any, tmp_path: Path, busybox_rootfs: Path) -> None:
    cid = new_id()
    bundle = make_bundle(tmp_path, busybox_rootfs, cid, "sleep", "1000")
    pid = runtime.create(cid, bundle)
    with pytest.raises(AlreadyExistsError):
        runtime.create(cid, bundle)
    st = runtime.state(cid)
    assert (st.status, st.pid) == ("created", pid)  # the first one is untouched


def test_failed_create_leaves_nothing(
    runtime: Runc, new_id: Any, tmp_path: Path, busybox_rootfs: Path
) -> None:
    cid = new_id()
    with pytest.raises(OCIRuntimeError, match="nonexistent") as info:
        runtime.create(cid, make_bundle(tmp_path, busybox_rootfs, cid, "/nonexistent"))
    assert info.value.command[0].endswith(runtime.binary)
    assert runtime.list() == []


def test_stopped_container_errors(
    runtime: Runc, new_id: Any, tmp_path: Path, busybox_rootfs: Path
) -> None:
    cid = new_id()
    started(runtime, tmp_path, busybox_rootfs, cid, "sh", "-c", "exit 0")
    assert runtime.wait(cid, 10).exit_code == 0
    with pytest.raises(NotRunningError):
        runtime.exec_sync(cid, ["true"], 10)
    with pytest.raises(NotRunningError):
        runtime.kill(cid, 9)
    with pytest.raises(NotRunningError):
        runtime.pause(cid)
    assert runtime.ps(cid) == []  # crun 1.8.1 segfaults here; normalised


def test_delete_running_without_force(
    runtime: Runc, new_id: Any, tmp_path: Path, busybox_rootfs: Path
) -> None:
    cid = new_id()
    started(runtime, tmp_path, busybox_rootfs, cid, "sleep", "1000")
    with pytest.raises(NotRunningError):
        runtime.delete(cid)
    runtime.delete(cid, force=True)
    assert runtime.list() == []


def test_wait_from_another_thread(
    runtime: Runc, new_id: Any, tmp_path: Path, busybox_rootfs: Path
) -> None:
    cid = new_id()
    started(runtime, tmp_path, busybox_rootfs, cid, "sleep", "1000")
    got: list[int] = []
    waiters = [threading.Thread(target=lambda: got.append(runtime.wait(cid, 20).exit_code))
               for _ in range(3)]
    for t in waiters:
        t.start()
    runtime.kill(cid, signal.SIGKILL)
    for t in waiters:
        t.join(20)
    assert got == [137, 137, 137]


def test_no_fd_leak_into_container(
    runtime: Runc, new_id: Any, tmp_path: Path, busybox_rootfs: Path
) -> None:
    cid = new_id()
    pid = started(runtime, tmp_path, busybox_rootfs, cid, "sleep", "1000")
    deadline = time.monotonic() + 20  # `start` returns before init has exec'd the user process
    while not Path(f"/proc/{pid}/cmdline").read_bytes().startswith(b"sleep"):
        assert time.monotonic() < deadline
        time.sleep(0.01)
    assert sorted(int(x) for x in os.listdir(f"/proc/{pid}/fd")) == [0, 1, 2]


def test_exec_with_tty(runtime: Runc, new_id: Any, tmp_path: Path, busybox_rootfs: Path) -> None:
    from podkit.runtime.console import ConsoleSocket

    cid = new_id()
    started(runtime, tmp_path, busybox_rootfs, cid, "sleep", "1000")
    proc = codec.structure({"cwd": "/", "env": ["PATH=/bin"],
                            "args": ["sh", "-c", "tty; echo TTYOK; exit 2"]}, oci.Process)
    with ConsoleSocket() as sock:
        ex = runtime.exec(cid, proc, tty=True, console_socket=sock)
        assert isinstance(ex, ExecProcess)
        with sock.receive(timeout=20) as console:
            out = console.read_all()
    assert b"/dev/pts/" in out and b"TTYOK" in out
    assert ex.wait(20).exit_code == 2
    assert proc.terminal is None  # the caller's process is not modified


def test_exec_tty_without_console_socket_refused(runtime: Runc) -> None:
    proc = codec.structure({"cwd": "/", "args": ["sh"]}, oci.Process)
    with pytest.raises(InvalidArgumentError, match="console_socket"):
        runtime.exec("pk-rt-any", proc, tty=True)


def test_stop_paused_container(
    runtime: Runc, new_id: Any, tmp_path: Path, busybox_rootfs: Path
) -> None:
    cid = new_id()
    started(runtime, tmp_path, busybox_rootfs, cid, "sleep", "1000")
    runtime.pause(cid)
    result = runtime.stop(cid, timeout=0.5)
    assert result.escalated
    assert result.exit_status is not None and result.exit_status.exit_code == 137
    assert runtime.state(cid).status == "stopped"


def test_concurrent_lifecycles_get_their_own_exit_codes(
    runtime: Runc, new_id: Any, tmp_path: Path, busybox_rootfs: Path
) -> None:
    ids = [new_id(f"par{i}") for i in range(4)]
    bundles = [make_bundle(tmp_path, busybox_rootfs, cid, "sh", "-c", f"exit {10 + i}")
               for i, cid in enumerate(ids)]
    results: dict[str, int] = {}
    errors: list[BaseException] = []

    def cycle(cid: str, bundle: Bundle) -> None:
        try:
            runtime.create(cid, bundle)
            runtime.start(cid)
            results[cid] = runtime.wait(cid, 30).exit_code
            runtime.delete(cid)
        except BaseException as e:  # reported below
            errors.append(e)

    threads = [threading.Thread(target=cycle, args=(c, b)) for c, b in zip(ids, bundles,
                                                                            strict=True)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert errors == []
    assert results == {cid: 10 + i for i, cid in enumerate(ids)}


def test_extra_files_become_fd_3(
    runtime: Runc, new_id: Any, tmp_path: Path, busybox_rootfs: Path
) -> None:
    cid = new_id()
    r, w = os.pipe()
    try:
        runtime.create(cid, make_bundle(tmp_path, busybox_rootfs, cid, "sh", "-c",
                                        "echo via-fd-3 >&3"), extra_files=[w])
        os.close(w)
        w = -1
        runtime.start(cid)
        assert runtime.wait(cid, 20).exit_code == 0
        with os.fdopen(r, "rb") as f:
            r = -1
            assert f.read() == b"via-fd-3\n"
    finally:
        for fd in (r, w):
            if fd >= 0:
                os.close(fd)



def test_start_twice(runtime: Runc, new_id: Any, tmp_path: Path, busybox_rootfs: Path) -> None:
    cid = new_id()
    started(runtime, tmp_path, busybox_rootfs, cid, "sleep", "1000")
    with pytest.raises(NotRunningError):  # the wrong-state kind (a ConflictError)
        runtime.start(cid)
    assert runtime.state(cid).status == "running"


def test_reported_fields_are_really_ignored(
    runtime: Runc, new_id: Any, tmp_path: Path, busybox_rootfs: Path
) -> None:
    """No false warnings: crun 1.8.1 reports runtime-spec 1.0.0 but applies domainname, umask,
    personality and createRuntime hooks (podkit excuses them); runc 1.1.5 ignores domainname."""
    cid = new_id()
    hook_mark = tmp_path / f"{cid}.hook"
    out = tmp_path / f"{cid}.out"
    bundle = make_bundle(tmp_path, busybox_rootfs, cid, "sh", "-c",
                         "cat /proc/sys/kernel/domainname; umask; uname -m")
    spec = bundle.spec
    assert spec.process is not None and spec.process.user is not None and spec.linux is not None
    spec.domainname = "example.org"
    spec.process.user.umask = 0o077
    spec.linux.personality = codec.structure({"domain": "LINUX32"}, oci.LinuxPersonality)
    spec.hooks = codec.structure(
        {"createRuntime": [{"path": "/bin/sh", "args": ["sh", "-c", f"touch {hook_mark}"]}]},
        oci.Hooks,
    )
    bundle = Bundle.create(bundle.path, spec)
    problems = runtime.check_spec(spec)
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always", UnsupportedFieldWarning)
        assert runtime.run(cid, bundle, io=FileIO(out), timeout=30) == 0
    warned = [w.message for w in record if isinstance(w.message, UnsupportedFieldWarning)]
    assert [w.problems for w in warned] == ([problems] if problems else [])
    text = out.read_text()
    assert len(text.splitlines()) == 3, text
    domainname, umask, machine = text.splitlines()
    applied = {
        "$.domainname": domainname == "example.org",
        "$.process.user.umask": umask == "0077",
        "$.linux.personality": machine == "i686",
        "$.hooks.createRuntime": hook_mark.exists(),
    }
    reported = {p.path for p in problems}
    assert reported <= set(applied)
    assert not any(applied[path] for path in reported), (problems, applied)
    if runtime.binary == "crun":
        assert problems == [] and all(applied.values()), (applied, text)
    else:  # runc 1.1.5 ignores domainname (runc-empirical.md §5) and says so in features
        assert reported == {"$.domainname"}
        assert not applied["$.domainname"]
