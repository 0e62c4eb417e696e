"""A CI job's view of ``podkit`` for the node config tests: its own root and state, options and
environment of its own, the command as a child process."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import _leaks
from podkit.node import NodeConfig

CLI = [sys.executable, "-m", "podkit.cli"]


class Job:
    """``podkit`` with ``--root BASE/root --state BASE/state`` and ``env`` on top of ours."""

    def __init__(self, base: Path, rootfs: Path, env: dict[str, str] | None = None) -> None:
        self.base, self.rootfs = base, rootfs
        self.root, self.state = base / "root", base / "state"
        self.env = {**os.environ, **(env or {})}
        self.env.pop("PODKIT_CONFIG", None)
        base.mkdir(parents=True, exist_ok=True)
        _leaks.register_runtime_root(self.state / "pods" / "runc")

    def argv(self, *words: str) -> list[str]:
        """The command line (the dirs after the command's own words, before a ``--``)."""
        cut = words.index("--") if "--" in words else len(words)
        return [*CLI, *words[:cut], "--root", str(self.root), "--state", str(self.state),
                *words[cut:]]

    def run(self, *words: str, timeout: float = 180) -> subprocess.CompletedProcess[str]:
        return subprocess.run(self.argv(*words), capture_output=True, text=True,
                              env=self.env, timeout=timeout, check=False)

    def ok(self, *words: str) -> str:
        res = self.run(*words)
        assert res.returncode == 0, (words, res.returncode, res.stderr)
        return res.stdout

    def popen(self, *words: str) -> subprocess.Popen[str]:
        return subprocess.Popen(self.argv(*words), stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, env=self.env)

    def write(self, name: str, text: str) -> Path:
        path = self.base / name
        path.write_text(text)
        return path

    def pod_file(self, name: str, command: str = "sleep 3600", **sandbox: Any) -> Path:
        """A pod file: pod ``name`` (namespace ``pk-node``), one busybox container ``app``."""
        sb = {"metadata": {"name": name, "namespace": "pk-node"}, **sandbox}
        pod = {"sandbox": sb, "pause": {"rootfs": str(self.rootfs)},
               "containers": [{"metadata": {"name": "app"}, "image": str(self.rootfs),
                               "command": ["sh", "-c", command]}]}
        return self.write(f"{name}.yaml", json.dumps(pod))

    def inspect(self, pod: str) -> Any:
        return json.loads(self.ok("pod", "inspect", pod, "-o", "json"))

    def exec(self, pod: str, *cmd: str) -> str:
        return self.ok("pod", "exec", pod, "app", "--", *cmd)

    @property
    def netns_dir(self) -> Path:
        return self.state / "pods" / "netns"

    @property
    def cgroup_parent(self) -> str:
        """The cgroup parent the job's pods get (cgroupfs; derived from its state dir)."""
        return NodeConfig().cgroup_parent(str(self.state / "pods"), "cgroupfs")


def copy_rootfs(src: Path, dest: Path) -> Path:
    shutil.copytree(src, dest, symlinks=True)
    return dest


def cgroup_dirs(path: str) -> list[Path]:
    """The cgroupfs directories of ``path`` in every hierarchy that has it."""
    rel = path.strip("/")
    return sorted(p for p in Path("/sys/fs/cgroup").glob(f"*/{rel}") if p.is_dir()) + \
        ([Path("/sys/fs/cgroup") / rel] if (Path("/sys/fs/cgroup") / rel).is_dir() else [])


def mounts_under(path: Path) -> list[str]:
    """Mount points at or below ``path``."""
    out = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        point = line.split()[4].replace("\\040", " ")
        if point == str(path) or point.startswith(f"{path}/"):
            out.append(point)
    return out


def del_link(name: str) -> None:
    subprocess.run(["ip", "link", "del", name], capture_output=True, check=False)
