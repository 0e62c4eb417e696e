"""runc or crun driven one-shot by integration tests (``<runtime> --root <dir> run``)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import _leaks
from podkit import oci

RUNTIME_ENV = {"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}


class OneShotRuntime:
    """One runtime binary with a private ``--root``; ``cleanup`` deletes every container it ran."""

    def __init__(self, binary: str, root: Path) -> None:
        self.binary, self.root = binary, root
        self.ids: list[str] = []
        self.cgroups: list[str] = []
        _leaks.register_runtime_root(root)

    def run(self, cid: str, spec: oci.Spec, bundle: Path) -> subprocess.CompletedProcess[str]:
        """Write ``spec`` into ``bundle`` and run it as ``cid`` to completion."""
        self.ids.append(cid)
        if spec.linux and spec.linux.cgroups_path:
            self.cgroups.append(spec.linux.cgroups_path.strip("/"))
        bundle.mkdir(parents=True, exist_ok=True)
        spec.dump(bundle / "config.json")
        return subprocess.run(
            [self.binary, "--root", str(self.root), "run", "--bundle", str(bundle), cid],
            stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60,
            env=RUNTIME_ENV,
        )

    def cleanup(self) -> None:
        for cid in self.ids:
            subprocess.run([self.binary, "--root", str(self.root), "delete", "-f", cid],
                           capture_output=True, timeout=30, env=RUNTIME_ENV)
        # crun also mkdirs its cgroup under the cgroup2 'unified' mountpoint that
        # scripts/isolated unmounted (the host's cgroup tmpfs) and never removes it
        unified = Path("/sys/fs/cgroup/unified")
        if not os.path.ismount(unified):
            for name in self.cgroups:
                shutil.rmtree(unified / name, ignore_errors=True)
        shutil.rmtree(self.root, ignore_errors=True)


def report(stdout: str) -> dict[str, str]:
    """The ``key=value`` lines a probe script printed."""
    return dict(line.split("=", 1) for line in stdout.splitlines() if "=" in line)
