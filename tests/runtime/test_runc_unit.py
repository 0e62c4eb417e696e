"""Runc's command plumbing against a fake runtime script: argv, env, logs, timeouts, errors."""

from __future__ import annotations

import contextlib
import os
import signal
import stat
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from podkit.errors import InvalidArgumentError
from podkit.runtime import (
    NotFoundError,
    OCIRuntimeError,
    Runc,
    RuntimeTimeoutError,
    UnsupportedOperationError,
)
from podkit.runtime.monitor import is_subreaper, set_subreaper

FAKE = r"""#!/bin/sh
log=""
while [ $# -gt 0 ]; do
  case "$1" in
    --log) log="$2"; shift 2;;
    --root|--log-format) shift 2;;
    --*=*|--systemd-cgroup|--debug) shift;;
    *) break;;
  esac
done
echo "$0 $*" >> "$ARGV_FILE"
case "$1" in
  --version) printf 'fake version 1.2.3\ncommit: %s\nspec: 1.0.2\n' "$HOME";;
  state)
    if [ "$2" = known ]; then
      echo '{"ociVersion":"1.0.2","id":"known","pid":0,"status":"stopped","bundle":"/b"}'
      exit 0
    fi
    echo '{"level":"error","msg":"container does not exist","time":"t"}' >> "$log"
    echo "container does not exist" >&2
    exit 1;;
  list) echo null;;
  start) sleep 1000 & echo $! > "$CHILD_FILE"; wait;;
  kill) kill -9 $$;;
  create) sleep 1000 & echo $! > "$CHILD_FILE"; wait;;
  delete) exit 0;;
  sigs) grep -E 'SigIgn|SigBlk' /proc/self/status;;
  *) echo "unknown command $1" >&2; exit 1;;
esac
"""


@pytest.fixture(scope="module", autouse=True)
def _restore_subreaper() -> Iterator[None]:
    """Creating containers makes this process a subreaper; give that back afterwards."""
    was = is_subreaper()
    yield
    set_subreaper(was)


@pytest.fixture
def fake(tmp_path: Path) -> Runc:
    script = tmp_path / "fakerunc"
    script.write_text(FAKE)
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    env = {"PATH": "/usr/bin:/bin", "ARGV_FILE": str(tmp_path / "argv"),
           "CHILD_FILE": str(tmp_path / "child")}
    return Runc(str(script), root=tmp_path / "root", env=env, timeout=20)


def argv_lines(rt: Runc) -> list[str]:
    return Path(rt.env["ARGV_FILE"]).read_text().splitlines()


def test_command_has_global_flags(tmp_path: Path) -> None:
    rt = Runc("/bin/true", root=tmp_path / "r", log=tmp_path / "l.json", systemd_cgroup=True,
              rootless=False, extra_args=["--debug"])
    assert rt.command("state", "x") == [
        "/bin/true", "--root", str(tmp_path / "r"), "--log", str(tmp_path / "l.json"),
        "--log-format", "json", "--systemd-cgroup", "--rootless=false", "--debug", "state", "x",
    ]


def test_explicit_env_and_version(fake: Runc) -> None:
    v = fake.version()
    assert (v.name, v.version, v.spec) == ("fake", "1.2.3", "1.0.2")
    assert v.commit == ""  # HOME is not passed: the env is exactly Runc.env


def test_state_and_not_found_from_json_log(fake: Runc) -> None:
    assert fake.state("known").status == "stopped"
    with pytest.raises(NotFoundError) as info:
        fake.state("missing")
    assert info.value.message.endswith("container does not exist")
    assert info.value.command[-2:] == ["state", "missing"]
    assert "--log" in info.value.command


def test_persistent_log_reads_only_the_new_part(fake: Runc, tmp_path: Path) -> None:
    log = tmp_path / "runtime.json"
    log.write_text('{"level":"error","msg":"container with given ID already exists"}\n')
    rt = Runc(fake.binary, root=fake.root, log=log, env=fake.env)
    with pytest.raises(NotFoundError):  # not the old AlreadyExists record
        rt.state("missing")
    assert log.read_text().count("\n") == 2


def test_unknown_command_from_stderr(fake: Runc) -> None:
    with pytest.raises(UnsupportedOperationError, match="has no 'features' command"):
        fake.features()
    with pytest.raises(UnsupportedOperationError, match="unknown command events"):
        fake.events_stats("known")


def test_list_null(fake: Runc) -> None:
    assert fake.list() == []


def test_timeout_kills_the_whole_process_group(fake: Runc) -> None:
    with pytest.raises(RuntimeTimeoutError, match="process group was killed"):
        fake.start("x", timeout=0.5)
    child = int(Path(fake.env["CHILD_FILE"]).read_text())
    deadline = time.monotonic() + 10
    while _alive(child):
        assert time.monotonic() < deadline, f"grandchild {child} survived the timeout"
        time.sleep(0.02)


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            state = f.read().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    if state == "Z":
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, os.WNOHANG)  # our zombie (we may be a subreaper): reap it
        return False
    return True


def test_runtime_killed_by_signal(fake: Runc) -> None:
    with pytest.raises(OCIRuntimeError, match="killed by SIGKILL"):
        fake.kill("x", 9)


def test_missing_binary(tmp_path: Path) -> None:
    rt = Runc("pk-rt-definitely-missing", root=tmp_path)
    with pytest.raises(NotFoundError, match="pk-rt-definitely-missing"):
        rt.version()
    with pytest.raises(NotFoundError):
        rt.command("list")


def test_invalid_ids_never_reach_the_runtime(fake: Runc) -> None:
    for bad in ("../x", "a/b", "", "-x"):
        with pytest.raises(InvalidArgumentError):
            fake.state(bad)
    assert not Path(fake.env["ARGV_FILE"]).exists()


def test_signal_names(fake: Runc) -> None:
    with pytest.raises(InvalidArgumentError, match="unknown signal"):
        fake.kill("x", "NOSUCH")


def test_create_timeout_kills_and_force_deletes(fake: Runc, tmp_path: Path) -> None:
    (tmp_path / "rootfs").mkdir()
    from podkit import oci
    from podkit.runtime import Bundle

    spec = oci.Spec.from_dict({"ociVersion": "1.0.2", "process": {"cwd": "/", "args": ["x"]}})
    bundle = Bundle.create(tmp_path / "b", spec, rootfs=tmp_path / "rootfs")
    with pytest.raises(RuntimeTimeoutError):
        fake.create("pk-rt-slow", bundle, timeout=0.5)
    child = int(Path(fake.env["CHILD_FILE"]).read_text())
    deadline = time.monotonic() + 10
    while _alive(child):
        assert time.monotonic() < deadline, f"grandchild {child} survived the timeout"
        time.sleep(0.02)
    calls = argv_lines(fake)
    assert calls[-1].endswith("delete --force pk-rt-slow")
    assert fake._scratch.path is None  # the scratch dir for the pid file is gone


def test_runtime_process_gets_default_signals(fake: Runc) -> None:
    # Python ignores SIGPIPE; a runtime (and the container it starts) must not inherit that
    out = fake._run(["sigs"]).stdout.decode()
    lines = out.splitlines()
    fields = dict(line.split(":") for line in lines[:2])
    assert int(fields["SigIgn"].strip(), 16) & (1 << (signal.SIGPIPE - 1)) == 0
    assert int(fields["SigBlk"].strip(), 16) == 0
