"""A manager SIGKILLed while conmon starts the pause or a container (before conmon's record is
written), or inside the write of its own record: recover() + remove_all() in a new process
leave nothing (issue 11 defect 2).

The child process runs the manager with a wrapped conmon seam that kills its own process at
the chosen point; the test process then recovers and takes a census of everything podkit,
conmon, runc and CNI could have left.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from podkit._files import is_atomic_temp
from support import REPO, walk

from ._pods import leaked, leftovers, make_manager, snapshot

pytestmark = pytest.mark.integration

_CHILD = """
import os, signal, sys
sys.path[:0] = [{tests!r}]
from pathlib import Path
from podkit.runtime import conmon
from sandbox._pods import ctr_config, make_manager, pod_config

base, rootfs, target, point = Path({base!r}), Path({rootfs!r}), {target!r}, {point!r}


def arm():
    if point == "write":  # inside atomic_write of the record saved before the pause starts
        original_save, original_fchmod = m.records.save, os.fchmod
        def fchmod(fd, mode):
            os.kill(os.getpid(), signal.SIGKILL)
        def save(obj):
            if obj.steps[-1:] == ("pause",):
                os.fchmod = fchmod
            original_save(obj)
        m.records.save = save
    elif point == "spawned":  # conmon runs; it has not reported the container's pid yet
        original = conmon.Launcher.__init__
        def die(self, *a, **kw):
            original(self, *a, **kw)
            os.kill(os.getpid(), signal.SIGKILL)
        conmon.Launcher.__init__ = die
    else:  # conmon reported the pid (the container exists); its record is not written
        original = conmon.Conmon._read_sync
        def die(self, *a, **kw):
            original(self, *a, **kw)
            os.kill(os.getpid(), signal.SIGKILL)
        conmon.Conmon._read_sync = die
    print("ARMED", flush=True)


m = make_manager(base, rootfs)
if target in ("pause", "record"):
    arm()
    m.run_sandbox(pod_config())
else:
    sb = m.run_sandbox(pod_config())
    cid = m.create_container(sb.id, ctr_config(rootfs, "app", ["sleep", "600"]))
    arm()
    m.start_container(cid)
print("SURVIVED", flush=True)
"""


def _census(base: Path) -> list[str]:
    """conmon's files, temp files and conmon processes of the manager under ``base``."""
    out = []
    conmon = base / "state" / "conmon"
    for sub in ("containers", "sockets", "exits"):
        d = conmon / sub
        out += [f"conmon {p}" for p in sorted(d.iterdir())] if d.is_dir() else []
    for top in (base / "state", base / "root"):
        out += [f"temp {p}" for p in walk(top) if is_atomic_temp(p.name)]
    marker = str(base).encode()
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                argv = (proc / "cmdline").read_bytes()
            except OSError:
                continue
            if marker in argv and b"conmon" in argv.split(b"\0")[0]:
                out.append(f"process {proc.name} {argv[:120]!r}")
    return out


@pytest.mark.parametrize(("target", "point"), [
    ("pause", "spawned"), ("pause", "reported"), ("container", "spawned"),
    ("container", "reported"), ("record", "write")])
def test_kill_while_conmon_starts_leaves_nothing_after_recover(
    bridge: None, rootfs: Path, tmp_path: Path, target: str, point: str
) -> None:
    before = snapshot()
    base = tmp_path / "m"
    code = textwrap.dedent(_CHILD).format(tests=str(REPO / "tests"), base=str(base),
                                          rootfs=str(rootfs), target=target, point=point)
    child = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True, cwd=REPO)
    try:
        out, err = child.communicate(timeout=120)
    finally:
        if child.poll() is None:
            os.kill(child.pid, signal.SIGKILL)
            child.wait()
    assert child.returncode == -signal.SIGKILL and out == "ARMED\n", err
    if target == "record":  # the kill left a temp file next to the older record
        assert [p for p in (base / "state" / "sandboxes").iterdir() if is_atomic_temp(p.name)]
    else:  # the kill left conmon's dir
        assert list((base / "state" / "conmon" / "containers").iterdir())

    m = make_manager(base, rootfs)
    try:
        report = m.recover()
        assert report.errors == ()
        m.remove_all()
        assert m.list_sandboxes() == [] and m.list_containers() == []
    finally:
        m.close()
    assert leftovers(base, m) == []
    assert _census(base) == []
    assert leaked(before) == []
