"""Which cgroup controllers a new container's cgroup can have on this host, read before it is
created, so a spec asking for a missing one is refused up front and not by the runtime later.

v1: the controllers with a mounted hierarchy. v2 (cgroupfs driver): runc and crun enable in
every ancestor's ``cgroup.subtree_control`` what its parent offers, so a container gets the
root's ``cgroup.controllers`` less what an existing non-root ancestor holding processes has not
enabled (the no-internal-process rule forbids enabling more there). systemd-form paths: the
root's controllers (systemd enables what a unit asks for). Also: whether swap can be limited,
and the hugepage sizes the kernel has.
"""

from __future__ import annotations

from pathlib import Path, PurePosixPath

import attrs

from podkit.cgroups.mounts import Hierarchy, Mode, host
from podkit.cgroups.paths import cgroup_of_path

__all__ = ["Controllers", "available_controllers", "hugepage_sizes", "page_size_name",
           "swap_available"]

HUGEPAGES = Path("/sys/kernel/mm/hugepages")


@attrs.frozen(kw_only=True)
class Controllers:
    """What a container cgroup at ``cgroup`` can use: controller names, cgroup ``version``
    (``v1``, ``hybrid``, ``unified``), whether swap is limitable, the hugepage sizes."""

    mode: Mode
    names: frozenset[str]
    cgroup: str = "/"
    swap: bool = False
    hugepage_sizes: frozenset[str] = frozenset()
    why: str = ""  # what limited ``names`` below the root's (a populated ancestor), if anything

    @property
    def version(self) -> str:
        """``cgroup v1``, ``cgroup v1 (hybrid)`` or ``cgroup v2``, for messages."""
        return {Mode.V1: "cgroup v1", Mode.HYBRID: "cgroup v1 (hybrid)",
                Mode.UNIFIED: "cgroup v2"}[self.mode]


def page_size_name(kilobytes: int) -> str:
    """runc's name of a hugepage size (``2048`` kB -> ``2MB``, ``1048576`` -> ``1GB``)."""
    size, unit = kilobytes, "KB"
    for bigger in ("MB", "GB", "TB"):
        if size % 1024:
            break
        size, unit = size // 1024, bigger
    return f"{size}{unit}"


def hugepage_sizes(root: Path = HUGEPAGES) -> frozenset[str]:
    """The kernel's hugepage sizes (``hugepages-2048kB`` -> ``2MB``); empty without any."""
    try:
        names = [p.name for p in root.iterdir()]
    except OSError:
        return frozenset()
    sizes = set()
    for name in names:
        kb = name.removeprefix("hugepages-").removesuffix("kB")
        if kb.isdigit():
            sizes.add(page_size_name(int(kb)))
    return frozenset(sizes)


def _words(path: Path) -> frozenset[str]:
    try:
        return frozenset(path.read_text().split())
    except OSError:
        return frozenset()


def _populated(d: Path) -> bool:
    try:
        return bool((d / "cgroup.procs").read_text().strip())
    except OSError:
        return False


def _v2_names(top: Path, cgroup: str, systemd: bool) -> tuple[frozenset[str], str]:
    """The root's controllers less what an existing ancestor holding processes cannot enable."""
    names, why = _words(top / "cgroup.controllers"), ""
    if systemd:
        return names, why
    cur = top
    for part in PurePosixPath(cgroup).parts[1:-1]:
        cur = cur / part
        if not cur.is_dir():  # the runtime creates it (and what is below) empty
            break
        if _populated(cur):
            names &= _words(cur / "cgroup.subtree_control")
            why = (f"{cur} holds processes, so it cannot enable more controllers for its "
                   "children than its cgroup.subtree_control has")
    return names, why


def swap_available(hierarchy: Hierarchy | None = None, own_cgroup: str | None = None) -> bool:
    """Whether memory+swap can be limited: v2 ``memory.swap.max`` in a non-root cgroup (this
    process's, or ``own_cgroup``), v1 ``memory.memsw.limit_in_bytes`` at the memory mount."""
    h = hierarchy or host()
    if h.mode is Mode.UNIFIED:
        if h.unified is None:
            return False
        if own_cgroup is None:
            try:
                own_cgroup = next(ln[3:] for ln in Path("/proc/self/cgroup").read_text()
                                  .splitlines() if ln.startswith("0::"))
            except (OSError, StopIteration):
                return False
        d = h.unified.dir(own_cgroup)
        if d is None or own_cgroup.strip("/") == "":  # the root has no memory.swap.max
            d = _any_child(h.unified.mountpoint)
        return d is not None and (d / "memory.swap.max").exists()
    mem = h.v1.get("memory")
    return mem is not None and (mem.mountpoint / "memory.memsw.limit_in_bytes").exists()


def _any_child(top: Path) -> Path | None:
    """A non-root cgroup with the memory controller, to look at its files."""
    if "memory" not in _words(top / "cgroup.subtree_control"):
        return None
    try:
        return next((p for p in top.iterdir() if p.is_dir()), None)
    except OSError:
        return None


def available_controllers(cgroups_path: str | None, hierarchy: Hierarchy | None = None, *,
                          hugepages: Path = HUGEPAGES) -> Controllers:
    """The controllers a container with ``linux.cgroupsPath`` ``cgroups_path`` (cgroupfs or
    systemd form; ``None``: a child of the root) can use on ``hierarchy`` (default: here)."""
    h = hierarchy or host()
    cgroup = cgroup_of_path(cgroups_path) if cgroups_path else "/container"
    sizes = hugepage_sizes(hugepages)
    if h.mode is not Mode.UNIFIED:
        return Controllers(mode=h.mode, names=frozenset(h.v1), cgroup=cgroup,
                           swap=swap_available(h), hugepage_sizes=sizes)
    if h.unified is None:
        return Controllers(mode=h.mode, names=frozenset(), cgroup=cgroup)
    top = h.unified.dir("/")
    if top is None:  # the mount shows a subtree (nested): its own top is what we have
        top = h.unified.mountpoint
    names, why = _v2_names(top, cgroup, systemd=bool(cgroups_path and ":" in cgroups_path))
    return Controllers(mode=h.mode, names=names, cgroup=cgroup, swap=swap_available(h),
                       hugepage_sizes=sizes, why=why)
