"""The floors of podkit's rows: the bare runtime doing what the call cannot skip, in the same
rounds. ``create_start``: the container's own ``config.json`` written durably (as any manager
must), ``runc create`` and ``runc start`` (conmon, which podkit needs for containers that
outlive it, is not in it); ``exec``: ``runc exec`` into the same container."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

__all__ = ["RawContainers", "floor_cgroups_path", "floor_spec", "write_durably"]


def floor_cgroups_path(path: str, name: str) -> str:
    """``path`` with its last part replaced by ``name`` (a sibling of the container's own
    cgroup: the same parent, removed by ``runc delete``); both cgroupfs and systemd forms."""
    if ":" in path and not path.startswith("/"):
        slice_, prefix, _ = path.split(":", 2)
        return f"{slice_}:{prefix}:{name}"
    return os.path.join(os.path.dirname(path.rstrip("/")) or "/", name)


def floor_spec(spec: dict[str, Any], name: str) -> dict[str, Any]:
    """A copy of a container's spec to run beside it: its own cgroup, no terminal."""
    out: dict[str, Any] = json.loads(json.dumps(spec))
    linux = out.setdefault("linux", {})
    linux["cgroupsPath"] = floor_cgroups_path(linux.get("cgroupsPath", "/podkit-bench"), name)
    out.get("process", {})["terminal"] = False
    return out


def write_durably(path: Path, data: str) -> None:
    """What a manager must do for a bundle's config.json its records point at (temp file,
    fsync, rename, directory fsync: ``podkit._files.atomic_write``)."""
    tmp = path.with_name(f".{path.name}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o644)
    try:
        os.write(fd, data.encode())
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    dfd = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(dfd)
    finally:
        os.close(dfd)


class RawContainers:
    """Containers made by bare ``runc`` under ``base`` (its own runc root, never podkit's)."""

    def __init__(self, base: Path) -> None:
        self.base = base
        self.root = base / "runc"
        self.made: list[str] = []

    def _runc(self, *args: str) -> None:
        # /dev/null, not pipes: the container's init inherits them and outlives runc create
        subprocess.run(["runc", "--root", str(self.root), *args], check=True, timeout=60,
                       stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)

    def create_start(self, spec: dict[str, Any], name: str) -> None:
        """Durable config.json, ``runc create``, ``runc start`` (the timed floor)."""
        bundle = self.base / name
        bundle.mkdir(parents=True)
        write_durably(bundle / "config.json", json.dumps(spec))
        self.made.append(name)
        self._runc("create", "--bundle", str(bundle), name)
        self._runc("start", name)

    def exec(self, runc_root: Path, container_id: str) -> None:
        """``runc exec ID true`` into a container of ``runc_root`` (podkit's)."""
        subprocess.run(["runc", "--root", str(runc_root), "exec", container_id, "true"],
                       check=True, timeout=60, stdin=subprocess.DEVNULL, capture_output=True)

    def remove(self) -> None:
        """Kill and delete every container made here, and their bundles."""
        for name in self.made:
            subprocess.run(["runc", "--root", str(self.root), "delete", "--force", name],
                           check=False, timeout=60, capture_output=True)
            shutil.rmtree(self.base / name, ignore_errors=True)
        self.made.clear()
