"""A manager killed after conmon reported a pid but before podkit recorded it (issue 11): a new
manager's ``recover()`` + ``remove_all()`` leaves none of conmon's dirs, links or processes.
Real runc, conmon and CNI plugins, inside scripts/isolated."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from support import REPO

from ._pods import leaked, leftovers, make_manager, snapshot

pytestmark = pytest.mark.integration

_CHILD = """
import os, signal, sys
sys.path[:0] = [{tests!r}]
from pathlib import Path
from sandbox._pods import make_manager, pod_config, ctr_config
from podkit.runtime import conmon

base, rootfs, at = Path({base!r}), Path({rootfs!r}), {at!r}

def crash(*args, **kwargs):  # conmon reported the pid; its record is written next
    os.kill(os.getpid(), signal.SIGKILL)

m = make_manager(base, rootfs)
if at == "pause":
    conmon.atomic_write = crash
sb = m.run_sandbox(pod_config())
cid = m.create_container(sb.id, ctr_config(rootfs, "app", ["sleep", "600"]))
conmon.atomic_write = crash
m.start_container(cid)
"""


def conmon_processes(marker: str) -> list[int]:
    """PIDs of conmon processes whose argv mentions ``marker``."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                argv = (entry / "cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if argv[0].endswith(b"conmon") and any(marker.encode() in a for a in argv):
                found.append(int(entry.name))
    return found


@pytest.mark.parametrize("at", ["pause", "container"])
def test_crash_before_the_conmon_record_leaves_nothing_after_recover(
    bridge: None, rootfs: Path, tmp_path: Path, at: str
) -> None:
    before = snapshot()
    base = tmp_path / "m"
    code = textwrap.dedent(_CHILD).format(tests=str(REPO / "tests"), base=str(base),
                                          rootfs=str(rootfs), at=at)
    child = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                           cwd=REPO, timeout=120)
    assert child.returncode == -9, child.stderr
    state = base / "state" / "conmon"
    assert list((state / "containers").iterdir()) != []  # what the crash left
    assert list((state / "sockets").iterdir()) != []

    m = make_manager(base, rootfs)
    try:
        report = m.recover()
        assert report.errors == ()
        m.remove_all()
    finally:
        m.close()
    assert list((state / "containers").iterdir()) == []
    assert list((state / "sockets").iterdir()) == []
    assert list((state / "exits").iterdir()) == []
    assert conmon_processes(os.fspath(state)) == []
    assert leftovers(base, m) == []
    assert leaked(before) == []
