"""The conmon supervisor's exec_sync without conmon: its parts against fakes (no root needed).

``container_process`` (the container's own process running other args), ``exec_files`` and
``run_capped`` (podkit.runtime.exec_sync), ``Runc.exec_sync_process`` against a fake runtime
script, and ``ConmonSupervisor.exec_sync`` choosing that path over ``Conmon.exec_sync``.
"""

from __future__ import annotations

import json
import os
import stat
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from podkit import oci
from podkit.errors import InvalidArgumentError
from podkit.oci import codec
from podkit.runtime import NotFoundError, NotRunningError, Runc, RuntimeTimeoutError
from podkit.runtime.base import ExecResult
from podkit.runtime.command import CommandResult
from podkit.runtime.conmon import Conmon
from podkit.runtime.exec_sync import container_process, exec_files, run_capped
from podkit.runtime.io import CappedOutput
from podkit.runtime.monitor import is_subreaper, set_subreaper
from podkit.runtime.supervise import ConmonSupervisor

# exec --process SPEC --pid-file PID ID: keeps a copy of the spec and its argv, then acts on
# the spec's first arg: "ok" (output, exit 3), "stopped" (a logged error), "hang" (a child in
# its own process group that never exits: the victim)
FAKE = r"""#!/bin/sh
log=""
while [ $# -gt 0 ]; do
  case "$1" in
    --log) log="$2"; shift 2;;
    --root|--log-format) shift 2;;
    *) break;;
  esac
done
[ "$1" = exec ] || { echo "unknown command $1" >&2; exit 1; }
echo "$*" > "$WORK/argv"
cp "$3" "$WORK/spec.json"
case "$(grep -o '"args": \["[a-z]*' "$3" | cut -d'"' -f4)" in
  ok) echo $$ > "$5"; echo out; echo err >&2; exit 3;;
  stopped)
    echo '{"level":"error","msg":"cannot exec in a stopped container","time":"t"}' >> "$log"
    exit 1;;
  hang) setsid sleep 1000 & echo $! > "$5"; echo $! > "$WORK/victim"; wait;;
esac
"""


@pytest.fixture(autouse=True)
def _not_a_subreaper() -> Iterator[None]:
    """Each test starts as no subreaper (another test may have made this process one)."""
    was = is_subreaper()
    set_subreaper(False)
    yield
    set_subreaper(was)


@pytest.fixture
def fake(tmp_path: Path) -> Runc:
    script = tmp_path / "fakerunc"
    script.write_text(FAKE)
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return Runc(str(script), root=tmp_path / "root", timeout=20,
                env={"PATH": "/usr/bin:/bin", "WORK": str(tmp_path)})


def bundle(tmp: Path, process: dict[str, Any]) -> Path:
    (tmp / "b").mkdir(exist_ok=True)
    (tmp / "b" / "config.json").write_text(json.dumps({"ociVersion": "1.0.2",
                                                       "process": process}))
    return tmp / "b"


def gone(pid: int) -> bool:
    return not Path(f"/proc/{pid}").exists()


def dead(pid: int) -> bool:
    """Gone, or a zombie of another parent (init reaps orphans on its own time)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except FileNotFoundError:
        return True


# -- container_process ---------------------------------------------------------------------


def test_container_process_keeps_the_containers_settings(tmp_path: Path) -> None:
    own = {"terminal": True, "consoleSize": {"height": 5, "width": 5}, "args": ["init"],
           "env": ["A=1"], "cwd": "/srv", "user": {"uid": 7, "gid": 8, "additionalGids": [9]},
           "capabilities": {"bounding": ["CAP_KILL"], "effective": ["CAP_KILL"]},
           "apparmorProfile": "pk-profile", "noNewPrivileges": True,
           "rlimits": [{"type": "RLIMIT_NOFILE", "hard": 10, "soft": 10}], "oomScoreAdj": 5}
    got = container_process(bundle(tmp_path, own), ["sh", "-c", "id"])
    expected = {k: v for k, v in own.items() if k != "consoleSize"}
    expected.update(args=["sh", "-c", "id"], terminal=False)
    assert got == expected


def test_container_process_defaults_cwd_and_user(tmp_path: Path) -> None:
    got = container_process(bundle(tmp_path, {"args": ["init"]}), ["true"])
    assert got == {"args": ["true"], "terminal": False, "cwd": "/",
                   "user": {"uid": 0, "gid": 0}}


@pytest.mark.parametrize("args", [[], "true", ()])
def test_container_process_refuses_empty_or_string_args(tmp_path: Path, args: Any) -> None:
    with pytest.raises(InvalidArgumentError, match="non-empty list"):
        container_process(bundle(tmp_path, {"args": ["init"]}), args)


@pytest.mark.parametrize("content", [None, "{not json"])
def test_container_process_unreadable_config(tmp_path: Path, content: str | None) -> None:
    (tmp_path / "b").mkdir()
    if content is not None:
        (tmp_path / "b" / "config.json").write_text(content)
    with pytest.raises(InvalidArgumentError, match="cannot read process of"):
        container_process(tmp_path / "b", ["true"])


# -- exec_files, run_capped ------------------------------------------------------------------


def test_exec_files_writes_the_spec_and_removes_both(tmp_path: Path) -> None:
    with exec_files(str(tmp_path), "c1", {"args": ["x"]}) as (pid, spec):
        assert not Path(pid).exists()  # the runtime creates it
        assert json.loads(Path(spec).read_text()) == {"args": ["x"]}
        Path(pid).write_text("1")
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(KeyError), exec_files(str(tmp_path), "c1", None) as (pid, spec):
        assert not Path(spec).exists()
        Path(pid).write_text("1")
        raise KeyError
    assert list(tmp_path.iterdir()) == []


def result(rc: int, log: str = "") -> Any:
    def run(output: CappedOutput, on_timeout: Any) -> CommandResult:
        _, out, err = output.child_fds()
        assert out is not None and err is not None
        os.write(out, b"o")
        os.write(err, b"e")
        output.close_after_start()
        return CommandResult(rc, b"", log)
    return run


@pytest.mark.parametrize(("rc", "code"), [(0, 0), (7, 7), (-9, 137)])
def test_run_capped_exit_codes_and_output(tmp_path: Path, rc: int, code: int) -> None:
    got = run_capped(result(rc), tmp_path / "pid", lambda res: AssertionError(res))
    assert got == ExecResult(exit_code=code, stdout=b"o", stderr=b"e")


def test_run_capped_raises_a_logged_failure(tmp_path: Path) -> None:
    with pytest.raises(NotRunningError, match="stopped"):
        run_capped(result(1, '{"level": "error", "msg": "x"}'), tmp_path / "pid",
                   lambda res: NotRunningError(f"stopped ({res.returncode})"))
    # a non-zero code without an error record is the process's own exit code
    assert run_capped(result(1, '{"level": "info", "msg": "x"}'), tmp_path / "pid",
                      lambda res: AssertionError(res)).exit_code == 1


def test_run_capped_kills_and_reaps_the_victim_and_its_group(tmp_path: Path) -> None:
    # the victim (our child here) leads a group with one more member; a timed-out run
    # leaves neither: both are killed and the victim is reaped before the error comes out
    mark = tmp_path / "member"
    victim = os.posix_spawn("/bin/sh", ["sh", "-c", f"sleep 1000 & echo $! > {mark}; wait"],
                            {"PATH": "/usr/bin:/bin"}, setpgroup=0)
    (tmp_path / "pid").write_text(str(victim))

    def run(output: CappedOutput, on_timeout: Any) -> CommandResult:
        while not mark.exists() or not mark.read_text().strip():
            time.sleep(0.01)
        raise RuntimeTimeoutError("fake timeout")

    with pytest.raises(RuntimeTimeoutError, match="fake timeout"):
        run_capped(run, tmp_path / "pid", lambda res: AssertionError(res))
    assert gone(victim)  # reaped: no zombie either
    member = int(mark.read_text())
    deadline = time.monotonic() + 10
    while not dead(member):
        assert time.monotonic() < deadline, "the victim's group member survived"
        time.sleep(0.01)


# -- Runc.exec_sync_process against the fake runtime -----------------------------------------


def test_exec_sync_process_runs_exec_with_the_spec(fake: Runc, tmp_path: Path) -> None:
    spec = {"args": ["ok", "x"], "env": ["A=1"], "cwd": "/", "terminal": False}
    assert fake.exec_sync_process("c1", spec, 10) == \
        ExecResult(exit_code=3, stdout=b"out\n", stderr=b"err\n")
    argv = (tmp_path / "argv").read_text().split()
    assert argv[0:2] == ["exec", "--process"] and argv[3] == "--pid-file" and argv[5] == "c1"
    assert json.loads((tmp_path / "spec.json").read_text()) == spec
    assert not Path(argv[2]).exists() and not Path(argv[4]).exists()  # both removed
    assert not is_subreaper()


def test_exec_sync_process_files_in_workdir(fake: Runc, tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    assert fake.exec_sync_process("c1", {"args": ["ok"]}, 10, workdir=work).exit_code == 3
    argv = (tmp_path / "argv").read_text().split()
    assert Path(argv[2]).parent == work and Path(argv[4]).parent == work
    assert list(work.iterdir()) == []


def test_exec_sync_process_takes_an_oci_process(fake: Runc, tmp_path: Path) -> None:
    process = codec.structure({"args": ["ok", "y"], "cwd": "/w", "env": ["B=2"]}, oci.Process)
    assert fake.exec_sync_process("c1", process, 10).exit_code == 3
    spec = json.loads((tmp_path / "spec.json").read_text())
    assert (spec["args"], spec["cwd"], spec["env"]) == (["ok", "y"], "/w", ["B=2"])


def test_exec_sync_process_typed_error_from_the_log(fake: Runc) -> None:
    with pytest.raises(NotRunningError, match="stopped container"):
        fake.exec_sync_process("c1", {"args": ["stopped"]}, 10)
    assert not is_subreaper()


def test_exec_sync_process_timeout_leaves_no_victim(fake: Runc, tmp_path: Path) -> None:
    with pytest.raises(RuntimeTimeoutError):
        fake.exec_sync_process("c1", {"args": ["hang"]}, 0.5)
    assert dead(int((tmp_path / "victim").read_text()))
    assert not is_subreaper()


@pytest.mark.parametrize("spec", [{"args": []}, {}, {"args": ["ok"], "terminal": True}])
def test_exec_sync_process_refuses_before_running(fake: Runc, tmp_path: Path,
                                                  spec: dict[str, Any]) -> None:
    with pytest.raises(InvalidArgumentError):
        fake.exec_sync_process("c1", spec)
    with pytest.raises(InvalidArgumentError):
        fake.exec_sync_process("../c1", {"args": ["ok"]})
    assert not (tmp_path / "argv").exists()


# -- ConmonSupervisor.exec_sync picks the direct path ----------------------------------------


class FakeRecord:
    def __init__(self, bundle: Path) -> None:
        self.bundle = str(bundle)


class FakeConmon:
    """What ConmonSupervisor.exec_sync reads of a Conmon: ``runtime``, ``get``, ``exec_sync``."""

    def __init__(self, runtime: object, records: dict[str, Path]) -> None:
        self.runtime = runtime
        self.records = records
        self.calls: list[tuple[str, Sequence[str], float | None]] = []

    def container_dir(self, id: str) -> Path:
        return self.records[id] / "state"

    def get(self, id: str) -> FakeRecord:
        if id not in self.records:
            raise NotFoundError(f"no container {id!r}")
        return FakeRecord(self.records[id])

    def exec_sync(self, id: str, args: Sequence[str], timeout: float | None) -> ExecResult:
        self.calls.append((id, args, timeout))
        return ExecResult(exit_code=42)


class RecordingRunc(Runc):
    def __init__(self) -> None:
        super().__init__("/nonexistent/runc")
        self.calls: list[tuple[str, Any, float | None, Any]] = []

    def exec_sync_process(self, id: str, process: Any, timeout: float | None = None, *,
                          workdir: Any = None) -> ExecResult:
        self.calls.append((id, process, timeout, workdir))
        return ExecResult(exit_code=0, stdout=b"direct")


def supervisor(conmon: FakeConmon) -> ConmonSupervisor:
    sup = ConmonSupervisor.__new__(ConmonSupervisor)
    sup.conmon = conmon  # type: ignore[assignment]
    return sup


def test_conmon_supervisor_execs_directly_with_the_containers_process(tmp_path: Path) -> None:
    rt = RecordingRunc()
    conmon = FakeConmon(rt, {"c1": bundle(tmp_path, {"args": ["init"], "env": ["A=1"]})})
    assert supervisor(conmon).exec_sync("c1", ["true"], 5) == \
        ExecResult(exit_code=0, stdout=b"direct")
    assert rt.calls == [("c1", {"args": ["true"], "env": ["A=1"], "terminal": False,
                                "cwd": "/", "user": {"uid": 0, "gid": 0}}, 5,
                         tmp_path / "b" / "state")]  # the files in the container's dir
    assert conmon.calls == []


def test_conmon_supervisor_errors_before_any_exec(tmp_path: Path) -> None:
    rt = RecordingRunc()
    conmon = FakeConmon(rt, {"c1": bundle(tmp_path, {"args": ["init"]})})
    with pytest.raises(NotFoundError, match="no container 'c2'"):
        supervisor(conmon).exec_sync("c2", ["true"])
    for bad in (0, -1):
        with pytest.raises(InvalidArgumentError, match="invalid exec timeout"):
            supervisor(conmon).exec_sync("c1", ["true"], bad)
    with pytest.raises(InvalidArgumentError):
        supervisor(conmon).exec_sync("c1", [])
    assert rt.calls == [] and conmon.calls == []


def test_conmon_supervisor_other_runtimes_still_exec_under_conmon(tmp_path: Path) -> None:
    conmon = FakeConmon(object(), {"c1": bundle(tmp_path, {"args": ["init"]})})
    assert supervisor(conmon).exec_sync("c1", ["true"], 5) == ExecResult(exit_code=42)
    assert conmon.calls == [("c1", ["true"], 5)]


def test_conmon_supervisor_keeps_its_conmon(tmp_path: Path) -> None:
    # the real constructor: exec_sync goes through the Conmon's runtime
    rt = Runc("/bin/true", root=tmp_path / "rt")
    sup = ConmonSupervisor(Conmon(rt, state_dir=tmp_path / "cm"))
    assert sup.conmon.runtime is rt
    with pytest.raises(NotFoundError):
        sup.exec_sync("c1", ["true"])
