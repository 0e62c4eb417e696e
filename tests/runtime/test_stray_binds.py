"""runc 1.1's ``runc init`` bind-mounts its own binary read-only on ``<root>/<id>/runc.XXXXXX``
for a moment; killed in that moment (a timed-out exec or create), it leaves the mount behind.
``Runc`` removes it after every timeout: here a runtime stand-in leaves exactly that (a real
bind mount in a real state dir) and then hangs, as a ``runc init`` SIGKILLed at that point
would, and the real ``Runc`` timeout path must leave no mount and no file (run in
``scripts/isolated``'s mount namespace)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from podkit.runtime import Runc, RuntimeTimeoutError
from podkit.runtime.stray_binds import remove_stray_exe_binds, state_dir
from support import require_isolated

# What runc init does before it is killed: mkstemp + a read-only bind of its binary, then
# (for the test) it waits to be killed instead of unmounting.
STAND_IN = """#!/bin/sh
case "$*" in *features*) echo '{"ociVersionMin": "1.0.0", "ociVersionMax": "1.0.2"}'; exit 0 ;;
  *--version*) printf 'runc version 1.1.5\\nspec: 1.0.2-dev\\n'; exit 0 ;; esac
root=""; id=""; verb=""
while [ $# -gt 0 ]; do
  case "$1" in
    --root) root=$2; shift 2 ;;
    --log|--log-format|--pid-file|--process|--env|--cwd|--user|--bundle) shift 2 ;;
    exec|create) verb=$1; shift ;;
    -*) shift ;;
    *) if [ -n "$verb" ] && [ -z "$id" ]; then id=$1; fi; shift ;;
  esac
done
[ -n "$id" ] || exit 0  # delete --force after a timed-out create: nothing to do here
mkdir -p "$root/$id"
echo '{}' > "$root/$id/state.json"
f=$(mktemp "$root/$id/runc.XXXXXX")
mount --bind -o ro /bin/busybox "$f"
exec sleep 100
"""


def _mounts_under(path: Path) -> list[str]:
    points = [line.split()[4] for line in Path("/proc/self/mountinfo").read_text().splitlines()]
    return [p for p in points if p.startswith(f"{path}/")]


def test_the_default_root_is_the_runtimes_own() -> None:
    assert state_dir(Path("/x/rt"), "runc", "c1") == Path("/x/rt/c1")
    expected = Path("/run/crun/c1") if os.geteuid() == 0 else None
    assert state_dir(None, "crun", "c1") == expected


def test_only_the_exe_binds_go(tmp_path: Path) -> None:
    require_isolated()
    d = tmp_path / "c1"
    d.mkdir()
    for name in ("state.json", "runc.toolong1", "runc.x", "exec.fifo"):
        (d / name).write_text("keep")
    bound, loose = d / "runc.Ab12Cd", d / "runc.Zz99zz"
    bound.touch()
    loose.touch()  # runc unmounted it but was killed before the unlink
    subprocess.run(["mount", "--bind", "-o", "ro", "/bin/busybox", str(bound)], check=True)
    assert _mounts_under(tmp_path) == [str(bound)]
    assert remove_stray_exe_binds(d) == [str(bound), str(loose)]
    assert _mounts_under(tmp_path) == []
    assert sorted(p.name for p in d.iterdir()) == ["exec.fifo", "runc.toolong1", "runc.x",
                                                   "state.json"]
    assert remove_stray_exe_binds(d) == [] and remove_stray_exe_binds(tmp_path / "gone") == []


@pytest.mark.parametrize("call", ["exec_sync", "exec_sync_process", "create"])
def test_a_timed_out_call_leaves_no_exe_bind(tmp_path: Path, call: str) -> None:
    require_isolated()
    binary = tmp_path / "runc"
    binary.write_text(STAND_IN)
    binary.chmod(0o755)
    runc = Runc(str(binary), root=tmp_path / "rt", timeout=2)
    with pytest.raises(RuntimeTimeoutError):
        if call == "exec_sync":
            runc.exec_sync("c1", ["true"], timeout=1)
        elif call == "exec_sync_process":
            runc.exec_sync_process("c1", {"args": ["true"], "cwd": "/"}, timeout=1)
        else:
            bundle = tmp_path / "bundle"
            bundle.mkdir()
            (bundle / "config.json").write_text('{"ociVersion": "1.0.2"}')
            runc.create("c1", bundle, timeout=1)
    assert (tmp_path / "rt" / "c1" / "state.json").exists()  # the stand-in ran
    assert _mounts_under(tmp_path) == []
    assert [p.name for p in (tmp_path / "rt" / "c1").glob("runc.*")] == []
