"""A runtime + conmon pair with private state for the conmon tests, and a conmon finder."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import uuid
from pathlib import Path

import _leaks
from podkit.runtime import Conmon, Runc

from ._bundles import busybox_config


def conmon_pids_for(marker: str) -> list[int]:
    """PIDs of conmon processes whose argv mentions ``marker``."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if argv and argv[0].endswith(b"conmon") and any(marker.encode() in a for a in argv):
            found.append(int(entry.name))
    return found


class Env:
    """A runtime + conmon pair with private state, and the containers a test made."""

    def __init__(self, binary: str, tmp: Path, rootfs: Path) -> None:
        self.binary = binary
        self.tmp = tmp
        self.rootfs = rootfs
        self.runc = Runc(binary=binary, root=tmp / "rt")
        _leaks.register_runtime_root(tmp / "rt")
        self.state_dir = tmp / "cm"
        self.conmon = Conmon(self.runc, state_dir=self.state_dir)
        self.ids: list[str] = []

    def new_id(self, what: str) -> str:
        cid = f"pk-cm-{what}-{uuid.uuid4().hex[:8]}"
        self.ids.append(cid)
        return cid

    def bundle(self, cid: str, args: list[str], terminal: bool = False) -> Path:
        path = self.tmp / f"bundle-{cid}"
        path.mkdir()
        config = busybox_config(self.rootfs, args, f"/{cid}", terminal)
        (path / "config.json").write_text(json.dumps(config))
        return path

    def cleanup(self) -> list[str]:
        problems = []
        for cid in self.ids:
            with_record = (self.state_dir / "containers" / cid).exists()
            if with_record:
                try:
                    self.conmon.delete(cid, force=True)
                except Exception as exc:  # report, keep cleaning
                    problems.append(f"delete {cid}: {exc}")
            with_pid = conmon_pids_for(os.fspath(self.state_dir / "containers" / cid))
            for pid in with_pid:
                os.kill(pid, 9)
                problems.append(f"conmon {pid} of {cid} still alive")
            subprocess.call([*self.runc.command("delete", "--force", cid)],
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
            unified = Path("/sys/fs/cgroup/unified")
            if unified.is_dir() and not (unified / "cgroup.controllers").exists():
                # a bare tmpfs inside scripts/isolated; crun writes <id>/cgroup.procs there
                shutil.rmtree(unified / cid, ignore_errors=True)
            root = Path("/sys/fs/cgroup")  # v1: a dir per controller; v2: the one at the top
            left = [p for p in [*root.glob(f"*/{cid}"), root / cid] if p.exists()]
            if left:
                problems.append(f"cgroups left: {left}")
        return problems
