"""What a deleted container may leave of its cgroup, removed: a systemd scope still loaded (a
runtime killed mid-delete, a scope ``failed`` after an OOM kill) or an empty cgroupfs dir.

Called after the runtime's ``delete``, which removes both when all goes well; nothing that
still holds a process is touched (``rmdir`` of a busy cgroup fails; systemd is asked to stop
only the scope podkit named).
"""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Callable, Sequence
from pathlib import Path

from podkit import _proc
from podkit.cgroups.driver import scope_unit
from podkit.cgroups.mounts import Hierarchy
from podkit.cgroups.paths import cgroup_of_path, locate
from podkit.errors import PodkitError

__all__ = ["Systemctl", "remove_leftovers", "systemctl"]

Systemctl = Callable[[Sequence[str]], int]
"""Runs ``systemctl <args>``; its exit code."""

_ENV = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "SYSTEMD_PAGER": "", "LC_ALL": "C"}


def systemctl(args: Sequence[str]) -> int:
    """``systemctl --quiet --no-ask-password <args>`` (30 s at most); its exit code."""
    binary = shutil.which("systemctl", path=_ENV["PATH"])
    if binary is None:
        raise PodkitError("systemctl not found: cannot stop a leftover systemd scope")
    argv = [binary, "--quiet", "--no-ask-password", *args]
    return _proc.run(argv, env=_ENV, timeout=30, cap=4096).returncode


def remove_leftovers(cgroups_path: str, hierarchy: Hierarchy | None = None, *,
                     run: Systemctl = systemctl) -> list[str]:
    """Remove what is left of a deleted container's cgroup; what was removed.

    systemd form (``slice:prefix:id``): the scope is stopped when its cgroup still exists,
    and its ``failed`` state reset (a failed scope stays listed until then). cgroupfs form:
    each of its directories that is empty goes, children first (crun's ``container``), in
    every hierarchy (the named ones too: ``name=systemd``).
    """
    if not cgroups_path:
        return []
    loc = locate(cgroups_path, hierarchy)
    unit = scope_unit(cgroups_path)
    if unit is not None:
        removed = []
        if loc.exists():
            run(["stop", unit])
            removed.append(unit)
        run(["reset-failed", unit])  # non-zero when it is not loaded: nothing to do
        return removed
    cgroup = cgroup_of_path(cgroups_path)  # and in the named ones (name=systemd on v1)
    named = [m.dir(cgroup) for m in loc.hierarchy.named.values()]
    dirs = [loc.unified] if loc.unified is not None else []
    dirs += [d for d in [*loc.v1.values(), *named] if d is not None and d not in dirs]
    return [str(d) for d in dict.fromkeys(dirs) if d is not None and _rmdir_tree(d)]


def _rmdir_tree(top: Path) -> bool:
    """rmdir ``top`` and the cgroups below it, deepest first; whether ``top`` went."""
    if not top.is_dir():
        return False
    for dirpath, _, _ in sorted(os.walk(top), key=lambda w: -w[0].count("/")):
        with contextlib.suppress(OSError):  # busy (a process) or not a cgroup: left alone
            os.rmdir(dirpath)
    return not top.exists()
