"""What one soak trial left behind, and the forced cleanup that follows the count.

A trial owns a base dir (``root``, ``state``, the runtime ``--root``), a netns name prefix and
a cgroup parent; everything here looks only at those, so concurrent test runs elsewhere on the
machine do not show up. The per-kind readers come from ``tests/_leaks.py``.
"""

from __future__ import annotations

import contextlib
import fnmatch
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterable, Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))

import _leaks  # noqa: E402

NETNS_DIR = "/run/netns"
CGROUP_ROOT = Path("/sys/fs/cgroup")
RUNTIME_ENV = {"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}
# what a clean manager leaves in its dirs (relative to the trial's base dir; fnmatch patterns)
SKELETON = (
    "root", "root/sandboxes", "root/containers",
    "state", "state/sandboxes", "state/containers", "state/manager.lock",
    "state/conmon", "state/conmon/exits", "state/conmon/sockets", "state/conmon/containers",
    "state/net.d", "state/net.d/*.conflist",
    "state/ipam", "state/ipam/*", "state/ipam/*/lock", "state/ipam/*/last_reserved_ip.*",
    "state/cni-cache", "state/cni-cache/results", "state/cni-cache/locks",
    "state/cni-cache/locks/*.lock",
    "runtime",
)


def _walk(path: Path) -> Iterator[Path]:
    yield path
    if path.is_dir() and not path.is_symlink():
        for entry in sorted(path.iterdir()):
            yield from _walk(entry)


def stray_files(base: Path, skeleton: Iterable[str] = SKELETON) -> list[str]:
    """Files and dirs under ``base`` that are not part of a clean manager's skeleton."""
    patterns = tuple(skeleton)
    out = []
    for p in _walk(base):
        rel = p.relative_to(base).as_posix()
        if p == base or any(fnmatch.fnmatchcase(rel, pat) for pat in patterns):
            continue
        kind = "temp" if p.name.endswith(".tmp") else "file"
        out.append(f"{kind} {p}")
    return out


def _cmdline(pid: str) -> list[str]:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return []
    return [a.decode(errors="replace") for a in raw.split(b"\0") if a]


def _environ(pid: str) -> bytes:
    try:
        return Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return b""


def _pids() -> list[str]:
    return [p for p in os.listdir("/proc") if p.isdigit()]


def conmon_processes(base: Path) -> dict[int, str]:
    """conmon processes whose argv mentions ``base``: pid -> its container id."""
    out = {}
    for pid in _pids():
        argv = _cmdline(pid)
        if argv and os.path.basename(argv[0]) == "conmon" and any(str(base) in a for a in argv):
            cid = argv[argv.index("--cuuid") + 1] if "--cuuid" in argv[:-1] else "?"
            out[int(pid)] = cid
    return out


def cgroup_dirs(parent: str, *, hierarchies_only: bool = True) -> list[Path]:
    """Cgroup dirs below ``parent`` in every hierarchy (v1 controllers and a mounted v2).

    Not in the tmpfs scripts/isolated puts over ``unified`` (crun mkdirs there and never
    removes: no cgroup), unless ``hierarchies_only`` is false (for the cleanup).
    """
    out: list[Path] = []
    with contextlib.suppress(OSError):
        for top in CGROUP_ROOT.iterdir():
            if top.is_symlink() or not top.is_dir():
                continue
            if hierarchies_only and not (top / "cgroup.procs").exists():
                continue
            p = top / parent.strip("/")
            if p.is_dir():
                out.extend(sorted(d for d in p.rglob("*") if d.is_dir()))
    return out


def cgroup_processes(parent: str) -> set[int]:
    """Processes in any cgroup below ``parent`` (a container's init or its children)."""
    pids: set[int] = set()
    for d in cgroup_dirs(parent):
        with contextlib.suppress(OSError):
            pids.update(int(x) for x in (d / "cgroup.procs").read_text().split())
    return pids


def busy_helpers(base: Path, netns_prefix: str) -> list[int]:
    """CNI plugins and runtime commands still working for this trial (a killed manager's
    in-flight children): plugins by their CNI_NETNS/CNI_CONTAINERID env, runtimes by argv."""
    out = []
    for pid in _pids():
        argv = _cmdline(pid)
        if not argv:
            continue
        name = os.path.basename(argv[0])
        runtime = name in ("runc", "crun") and any(str(base) in a for a in argv)
        if runtime or (argv[0].startswith("/usr/lib/cni/")
                       and netns_prefix.encode() in _environ(pid)):
            out.append(int(pid))
    return out


def settle(base: Path, netns_prefix: str, timeout: float = 15.0) -> None:
    """Wait until the helpers a killed manager left running have finished."""
    deadline = time.monotonic() + timeout
    while busy_helpers(base, netns_prefix) and time.monotonic() < deadline:
        time.sleep(0.05)


def census(base: Path, netns_prefix: str, cgroup_parent: str,
           links_before: frozenset[str]) -> list[str]:
    """Everything of this trial still present: 0 items after a clean recovery."""
    items: list[str] = []
    items += sorted(_leaks.runtime_containers([str(base / "runtime")]))
    items += sorted(n for n in _leaks.pinned_netns([NETNS_DIR])
                    if os.path.basename(n.split(" ", 1)[1]).startswith(netns_prefix))
    items += _leaks.diff(links_before, _leaks.links())
    items += sorted(_leaks.ipam_reservations([str(base / "state" / "ipam")]))
    items += [f"conmon {pid} ({cid[:12]})" for pid, cid in sorted(conmon_processes(base).items())]
    items += [f"process {pid}" for pid in sorted(cgroup_processes(cgroup_parent))]
    items += [f"cgroup {d}" for d in cgroup_dirs(cgroup_parent)]
    mountinfo = Path("/proc/self/mountinfo").read_text()
    items += sorted(_leaks.mounts(mountinfo, (str(base), f"{NETNS_DIR}/{netns_prefix}")))
    items += stray_files(base)
    return items


def _mount_points(prefixes: tuple[str, ...]) -> list[str]:
    points = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        fields = line.split()
        if len(fields) > 4 and fields[4].startswith(prefixes):
            points.append(fields[4])
    return sorted(points, key=len, reverse=True)


def force_clean(base: Path, netns_prefix: str, cgroup_parent: str, runtime: str,
                links_before: frozenset[str]) -> None:
    """Remove whatever the trial left, so the next trial starts clean (by PID, path, name)."""
    for pid in conmon_processes(base):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    root = base / "runtime"
    if root.is_dir():
        for entry in root.iterdir():
            subprocess.run([runtime, "--root", str(root), "delete", "-f", entry.name],
                           capture_output=True, timeout=30, env=RUNTIME_ENV, check=False)
    for pid in cgroup_processes(cgroup_parent):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    for _ in range(50):
        if not cgroup_processes(cgroup_parent):
            break
        time.sleep(0.02)
    for d in reversed(cgroup_dirs(cgroup_parent, hierarchies_only=False)):
        with contextlib.suppress(OSError):
            d.rmdir()
    for point in _mount_points((str(base), f"{NETNS_DIR}/{netns_prefix}")):
        subprocess.run(["umount", "-l", point], capture_output=True, check=False)
    for name in os.listdir(NETNS_DIR) if os.path.isdir(NETNS_DIR) else ():
        if name.startswith(netns_prefix):
            with contextlib.suppress(OSError):
                os.unlink(os.path.join(NETNS_DIR, name))
    for item in _leaks.diff(links_before, _leaks.links()):
        name = item.split()[1]
        subprocess.run(["ip", "link", "del", name], capture_output=True, check=False)
    shutil.rmtree(base, ignore_errors=True)


def remove_cgroup_parent(parent: str) -> None:
    """rmdir the (empty) parent cgroup the runtimes made in each hierarchy."""
    for d in reversed(cgroup_dirs(parent, hierarchies_only=False)):
        with contextlib.suppress(OSError):
            d.rmdir()
    with contextlib.suppress(OSError):
        for top in CGROUP_ROOT.iterdir():
            p = top / parent.strip("/")
            if not top.is_symlink() and p.is_dir():
                with contextlib.suppress(OSError):
                    p.rmdir()
