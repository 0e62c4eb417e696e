"""exec_sync on both supervisors (in-process ``Runc``, conmon) with real runc 1.1.5 and crun 1.8.1.

Output up to ``EXEC_SYNC_OUTPUT_MAX`` (16 MiB) per stream comes back whole, past it exactly the
cap, with the exit code kept. After a timeout the exec'd process (and its process group) is
gone, reaped, before exec_sync raises. Run inside scripts/isolated (crun needs its private
mount namespace); IDs start with ``pk-es-``.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

import _leaks
from podkit import oci
from podkit.oci import codec
from podkit.runtime import Runc, RuntimeTimeoutError
from podkit.runtime.base import ExecResult
from podkit.runtime.conmon import Conmon
from podkit.runtime.errors import NotFoundError, OCIRuntimeError
from podkit.runtime.io import EXEC_SYNC_OUTPUT_MAX
from podkit.runtime.monitor import is_subreaper, set_subreaper
from podkit.runtime.supervise import ConmonSupervisor, InProcessSupervisor, Supervisor
from support import require_binary, require_isolated

from ._bundles import busybox_config
from ._fds import fds_past, open_fds
from ._slow import settled, timeout_past_start

pytestmark = pytest.mark.integration

CAP = EXEC_SYNC_OUTPUT_MAX


class Pod:
    """One running busybox container under a supervisor, with a uniquely named busybox copy.

    Processes started as ``/x/<tool>`` have the comm ``<tool>``, so this test can find them
    (alive or zombie) in ``/proc`` however they were started.
    """

    def __init__(self, sup: Supervisor, runc: Runc, tmp: Path, rootfs: Path,
                 process: dict[str, object] | None = None) -> None:
        self.sup, self.runc = sup, runc
        self.id = f"pk-es-{uuid.uuid4().hex[:8]}"
        self.tool = f"busybox{uuid.uuid4().hex[:6]}"
        tools = tmp / "tools"
        tools.mkdir()
        shutil.copy2("/bin/busybox", tools / self.tool)
        bundle = tmp / "bundle"
        bundle.mkdir()
        mount = {"destination": "/x", "type": "bind", "source": os.fspath(tools),
                 "options": ["rbind", "ro"]}
        config = busybox_config(rootfs, ["sleep", "1000"], f"/{self.id}", mounts=[mount])
        if process is not None:
            config["process"] = {**config["process"], **process}  # type: ignore[dict-item]
        (bundle / "config.json").write_text(json.dumps(config))
        self.init = sup.start(self.id, bundle, log_path=tmp / "logs" / "init.log")

    def exec_sync(self, script: str, timeout: float | None = 60) -> ExecResult:
        return self.sup.exec_sync(self.id, ["sh", "-c", script], timeout)

    def tool_procs(self) -> dict[int, tuple[str, int]]:
        """``pid: (state, ppid)`` of processes (zombies too) running this pod's busybox copy."""
        found = {}
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit():
                with contextlib.suppress(OSError):
                    stat = (entry / "stat").read_bytes()
                    if stat[stat.index(b"(") + 1:stat.rindex(b")")] == self.tool.encode():
                        state, ppid = stat[stat.rindex(b")") + 2:].split()[:2]
                        found[int(entry.name)] = (state.decode(), int(ppid))
        return found


@pytest.fixture(params=["runc", "crun"])
def runc(request: pytest.FixtureRequest, tmp_path: Path) -> Runc:
    require_isolated()
    require_binary(request.param)
    _leaks.register_runtime_root(tmp_path / "rt")
    return Runc(request.param, root=tmp_path / "rt", timeout=60)


@pytest.fixture(params=["inprocess", "conmon"])
def pod(request: pytest.FixtureRequest, runc: Runc, tmp_path: Path,
        busybox_rootfs: Path) -> Iterator[Pod]:
    sup: Supervisor
    if request.param == "conmon":
        require_binary("conmon")
        sup = ConmonSupervisor(Conmon(runc, state_dir=tmp_path / "cm"))
    else:
        sup = InProcessSupervisor(runc)
    p = Pod(sup, runc, tmp_path, busybox_rootfs)
    yield p
    with contextlib.suppress(NotFoundError):
        sup.delete(p.id, force=True)
    assert runc.list() == []
    unified = Path("/sys/fs/cgroup/unified")
    if not os.path.ismount(unified):  # crun's stray cgroup2 dir under scripts/isolated
        shutil.rmtree(unified / p.id, ignore_errors=True)


# -- defect 8: output up to the cap whole, past it exactly the cap -------------------------


@pytest.mark.parametrize("size", [1 << 20, CAP - 1, CAP, CAP + 1, 50_000_000])
@pytest.mark.parametrize("stream", ["stdout", "stderr"])
def test_output_up_to_the_cap_whole_and_cut_exactly_at_it(
    pod: Pod, size: int, stream: str
) -> None:
    big, small = ("", " >&2") if stream == "stdout" else (" >&2", "")
    res = pod.exec_sync(f"head -c {size} /dev/zero | tr '\\0' x{big}; echo end{small}; exit 7")
    kept = min(size, CAP)
    out, other = (res.stdout, res.stderr) if stream == "stdout" else (res.stderr, res.stdout)
    assert res.exit_code == 7
    assert len(out) == kept
    assert out == b"x" * kept
    assert other == b"end\n"


def test_both_streams_full_at_once_and_newline_dense(pod: Pod) -> None:
    # 8 MiB of newlines on stdout (one CRI log record per byte would be ~45x that) and 8 MiB
    # of text on stderr, written concurrently: both arrive complete and in order
    script = ("head -c 8388608 /dev/zero | tr '\\0' '\\n' & "
              "seq 1 1000000 >&2; wait")
    res = pod.exec_sync(script)
    assert res.exit_code == 0
    assert res.stdout == b"\n" * 8388608
    expected = "".join(f"{i}\n" for i in range(1, 1000001)).encode()
    assert hashlib.sha256(res.stderr).hexdigest() == hashlib.sha256(expected).hexdigest()


def test_a_background_child_holding_the_pipes(pod: Pod) -> None:
    # the shell exits once its child runs; the child keeps stdout and stderr open for 3 s. A
    # foreground `runc exec` copies the output through pipes of its own and returns once they
    # are closed: the child is gone when exec_sync returns (as with containerd 1.6). `crun exec`
    # hands the process exec_sync's own pipes and returns at the shell's exit: the child runs on
    script = (f"echo started; /x/{pod.tool} sleep 3 & "
              f"until grep -q {pod.tool} /proc/$!/comm; do :; done; exit 0")
    res = pod.exec_sync(script, timeout=30)
    assert (res.exit_code, res.stdout, res.stderr) == (0, b"started\n", b"")
    alive = [pid for pid, (state, _) in pod.tool_procs().items() if state != "Z"]
    assert len(alive) == (1 if pod.runc.name == "crun" else 0)
    for pid in alive:
        os.kill(pid, 9)


# -- defect 11: a timed-out process is gone before exec_sync returns ------------------------


def test_timed_out_process_is_gone_when_exec_sync_raises(pod: Pod) -> None:
    timeout = timeout_past_start(lambda: pod.exec_sync("true"))
    for attempt in range(20):
        with pytest.raises(RuntimeTimeoutError):
            pod.sup.exec_sync(pod.id, [f"/x/{pod.tool}", "sleep", "100"], timeout)
        assert pod.tool_procs() == {}, f"attempt {attempt}: the exec'd sleep is still there"
        assert pod.runc.ps(pod.id) == [pod.init]


def test_timed_out_process_group_is_killed_too(pod: Pod) -> None:
    # the exec'd shell and its children (its process group) are all killed; the shell is
    # reaped, its children are left as zombies of the container's init (a `sleep` here, which
    # never reaps: a pod's pause process would)
    script = f"/x/{pod.tool} sleep 100 & /x/{pod.tool} sleep 100 & /x/{pod.tool} sleep 100"
    timeout = timeout_past_start(lambda: pod.exec_sync("true"))
    with pytest.raises(RuntimeTimeoutError):
        pod.sup.exec_sync(pod.id, [f"/x/{pod.tool}", "sh", "-c", script], timeout)
    procs = pod.tool_procs()
    assert sorted(procs.values()) == [("Z", pod.init)] * 2


def test_a_non_root_process_can_open_dev_stdout(pod: Pod) -> None:
    # programs that open /dev/stdout (its /proc/self/fd link) as another user than root
    script = "echo out > /dev/stdout; echo err > /dev/stderr; id -u"
    if isinstance(pod.sup, ConmonSupervisor):
        process = codec.structure({"args": ["sh", "-c", script], "cwd": "/",
                                   "user": {"uid": 1000, "gid": 1000},
                                   "env": ["PATH=/bin"]}, oci.Process)
        res = pod.sup.conmon.exec_sync(pod.id, process, 30)
    else:
        res = pod.runc.exec_sync(pod.id, ["sh", "-c", script], 30, user="1000:1000")
    assert (res.exit_code, res.stdout, res.stderr) == (0, b"out\n1000\n", b"err\n")


def test_no_descriptor_or_thread_left_and_descriptors_past_1024_work(pod: Pod) -> None:
    pod.exec_sync("true")  # first-use setup (the monitor thread, the runtime's scratch dir)
    timeout = timeout_past_start(lambda: pod.exec_sync("true"))
    def counts() -> tuple[int, int]:
        return open_fds(), threading.active_count()

    before = settled(counts)  # not counting what the execs above are still closing
    with fds_past():  # the output pipes and the pidfd get numbers above FD_SETSIZE
        for _ in range(3):
            res = pod.exec_sync("echo hi; echo ho >&2")
            assert (res.exit_code, res.stdout, res.stderr) == (0, b"hi\n", b"ho\n")
        with pytest.raises(RuntimeTimeoutError):
            pod.sup.exec_sync(pod.id, [f"/x/{pod.tool}", "sleep", "100"], timeout)
        assert pod.tool_procs() == {}
    assert settled(counts) == before


# -- a timeout while the runtime is still starting the process (issue 13) --------------------


STEPS = 60
BUDGET = 20.0  # seconds of timeouts per runtime: 180 tries here, 30 in the slow v2 guest


def test_a_timeout_anywhere_in_the_exec_start_leaves_only_init(pod: Pod) -> None:
    # timeouts spread from almost 0 to one whole exec of `true`: some fire before the runtime
    # forks, some while its helpers clone the process, some after the process runs but before
    # the runtime wrote --pid-file (it sits in its own session then, out of the runtime's
    # process group). After each, the container holds its init alone and nothing is left over.
    # The window is a few percent of an exec's start: 180 tries hit it in ~99 % of runs
    start = time.monotonic()
    pod.sup.exec_sync(pod.id, ["true"], 60)
    whole = time.monotonic() - start
    tries = max(STEPS // 2, min(3 * STEPS, int(BUDGET / whole)))
    for step in range(tries):
        timeout = whole * (step % STEPS + 1 + step // STEPS / 3) / STEPS
        with pytest.raises(RuntimeTimeoutError):
            pod.sup.exec_sync(pod.id, [f"/x/{pod.tool}", "sleep", "100"], timeout)
        assert pod.runc.ps(pod.id) == [pod.init], f"timeout {timeout:.4f} s (try {step})"
        assert pod.tool_procs() == {}, f"timeout {timeout:.4f} s (try {step})"


# -- the conmon supervisor execs without conmon, as conmon did --------------------------------

SETTINGS = {"user": {"uid": 1000, "gid": 1001, "additionalGids": [5]}, "cwd": "/bin",
            "env": ["PATH=/bin", "FOO=bar baz"],
            "capabilities": {k: ["CAP_CHOWN", "CAP_KILL"]
                             for k in ("bounding", "effective", "permitted")},
            "rlimits": [{"type": "RLIMIT_NOFILE", "hard": 200, "soft": 150}]}
# (the hard limit only: runc 1.1.5's Go runtime puts back the soft NOFILE limit it inherited)
SCRIPT = ("id; pwd; echo \"$FOO\"; grep -E '^(CapBnd|NoNewPrivs)' /proc/self/status; "
          "ulimit -Hn; [ -t 0 ] || echo no-tty; read x || echo stdin-eof; "
          "echo out > /dev/stdout; echo err > /dev/stderr; exit 4")


@pytest.fixture
def conmon_pod(runc: Runc, tmp_path: Path, busybox_rootfs: Path) -> Iterator[Pod]:
    require_binary("conmon")
    sup = ConmonSupervisor(Conmon(runc, state_dir=tmp_path / "cm"))
    p = Pod(sup, runc, tmp_path, busybox_rootfs, process=SETTINGS)
    yield p
    with contextlib.suppress(NotFoundError):
        sup.delete(p.id, force=True)
    assert runc.list() == []
    unified = Path("/sys/fs/cgroup/unified")
    if not os.path.ismount(unified):
        shutil.rmtree(unified / p.id, ignore_errors=True)


def test_the_containers_own_process_settings_as_under_conmon(
    conmon_pod: Pod, monkeypatch: pytest.MonkeyPatch
) -> None:
    sup = conmon_pod.sup
    assert isinstance(sup, ConmonSupervisor)
    under_conmon = sup.conmon.exec_sync(conmon_pod.id, ["sh", "-c", SCRIPT], 30)
    monkeypatch.setattr(sup.conmon, "exec_sync", None)  # no conmon for the supervisor's exec
    direct = sup.exec_sync(conmon_pod.id, ["sh", "-c", SCRIPT], 30)
    assert direct == under_conmon
    lines = direct.stdout.decode().splitlines()
    assert lines[0] == "uid=1000(app) gid=1001 groups=5"
    assert lines[1:] == ["/bin", "bar baz", "CapBnd:\t0000000000000021", "NoNewPrivs:\t1",
                         "200", "no-tty", "stdin-eof", "out"]
    assert (direct.exit_code, direct.stderr) == (4, b"err\n")


def _error(call: Callable[[], object]) -> type[BaseException]:
    with pytest.raises(Exception) as info:
        call()
    return info.type


def test_errors_as_under_conmon_and_no_subreaper(conmon_pod: Pod) -> None:
    pod, sup = conmon_pod, conmon_pod.sup
    assert isinstance(sup, ConmonSupervisor)
    set_subreaper(False)  # an earlier in-process test may have made this process one
    assert sup.exec_sync(pod.id, ["true"], 30).exit_code == 0
    missing = _error(lambda: sup.exec_sync(pod.id, ["/nonexistent"], 30))
    assert missing is _error(lambda: sup.conmon.exec_sync(pod.id, ["/nonexistent"], 30))
    assert missing is not AssertionError and issubclass(missing, OCIRuntimeError)
    with pytest.raises(RuntimeTimeoutError):
        sup.exec_sync(pod.id, [f"/x/{pod.tool}", "sleep", "100"], 0.5)
    assert pod.tool_procs() == {}
    assert _error(lambda: sup.exec_sync("pk-es-nope", ["true"])) is NotFoundError
    assert _error(lambda: sup.conmon.exec_sync("pk-es-nope", ["true"])) is NotFoundError
    sup.stop(pod.id, timeout=1)
    stopped = _error(lambda: sup.exec_sync(pod.id, ["true"], 30))
    assert stopped is _error(lambda: sup.conmon.exec_sync(pod.id, ["true"], 30))
    assert issubclass(stopped, OCIRuntimeError)
    assert not is_subreaper()
    assert [p.name for p in sup.conmon.container_dir(pod.id).iterdir() if "-sync-" in p.name
            or p.name.startswith("exec-")] == []  # the exec's files are gone
