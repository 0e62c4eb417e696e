"""The cgroup driver: who makes a container's cgroup, and the cgroups paths and parents of each.

``cgroupfs``: the runtime makes a plain directory (``linux.cgroupsPath`` ``/parent/id``).
``systemd``: the runtime asks systemd for a transient scope (``--systemd-cgroup``; the path is
``slice:prefix:id``, the scope ``<prefix>-<id>.scope`` in that slice), as containerd and CRI-O
do on systemd hosts. The host's default is systemd when systemd is PID 1 on a unified (v2)
host, cgroupfs otherwise. Everything here but :func:`systemd_running` is pure.
"""

from __future__ import annotations

import enum
import posixpath
import re
from pathlib import Path

from podkit.cgroups.mounts import Hierarchy, Mode, host
from podkit.errors import InvalidArgumentError, quote

__all__ = [
    "DEFAULT_CGROUPFS_PARENT",
    "DEFAULT_SYSTEMD_PARENT",
    "SCOPE_PREFIX",
    "Driver",
    "cgroups_path_for",
    "default_driver",
    "detect_driver",
    "parent_for",
    "parse_driver",
    "resolve_driver",
    "scope_unit",
    "slice_name",
    "slice_path",
    "systemd_running",
]

SCOPE_PREFIX = "cri-podkit"
"""The middle of a systemd cgroups path (containerd: ``cri-containerd``): scopes are
``cri-podkit-<id>.scope``."""
DEFAULT_CGROUPFS_PARENT = "/podkit"
"""Where cgroupfs cgroups go without a pod ``cgroup_parent`` (``/podkit/<id>``)."""
DEFAULT_SYSTEMD_PARENT = "system.slice"
"""The slice systemd scopes go in without a pod ``cgroup_parent`` (as Docker's systemd
driver: it always exists, so nothing podkit makes outlives its containers)."""

_PIECE = re.compile(r"[A-Za-z0-9_.\\]+")  # one dash-separated piece of a unit name
_FORMS = ("cgroupfs form '/kubepods/burstable/pod<uid>' or systemd form "
          "'kubepods-burstable-pod<uid>.slice'")


class Driver(enum.StrEnum):
    """A cgroup driver, by the name kubelet, containerd and CRI-O give it."""

    CGROUPFS = "cgroupfs"
    SYSTEMD = "systemd"

    @property
    def systemd(self) -> bool:
        """Whether the runtime runs with ``--systemd-cgroup``."""
        return self is Driver.SYSTEMD


def parse_driver(name: str, where: str = "cgroup_driver") -> Driver:
    """The driver called ``name``; ``InvalidArgumentError`` naming the value and ``where``."""
    try:
        return Driver(name)
    except ValueError:
        raise InvalidArgumentError(
            f"{where} {quote(name)}: unknown cgroup driver; want cgroupfs or systemd") from None


def systemd_running(run_dir: str | Path = "/run/systemd/system",
                    proc: str | Path = "/proc") -> bool:
    """Whether systemd is PID 1 (its runtime dir exists and ``/proc/1/comm`` says so)."""
    try:
        comm = (Path(proc) / "1" / "comm").read_text().strip()
    except OSError:
        return False
    return Path(run_dir).is_dir() and comm == "systemd"


def detect_driver(hierarchy: Hierarchy, systemd_pid1: bool) -> Driver:
    """systemd when systemd is PID 1 and the host is cgroup v2 alone, else cgroupfs."""
    if systemd_pid1 and hierarchy.mode is Mode.UNIFIED:
        return Driver.SYSTEMD
    return Driver.CGROUPFS


def default_driver() -> Driver:
    """This host's driver (:func:`detect_driver` on its mounts and PID 1)."""
    return detect_driver(host(), systemd_running())


def resolve_driver(name: str | None, where: str = "cgroup_driver") -> Driver:
    """``name`` parsed, or this host's default when ``None`` (or empty)."""
    return parse_driver(name, where) if name else default_driver()


def _refuse(parent: str, driver: Driver, why: str) -> InvalidArgumentError:
    return InvalidArgumentError(
        f"cgroup_parent {quote(parent)} ({driver.value} cgroup driver): {why}; "
        f"want the {_FORMS}")


def _slice_problem(name: str) -> str:
    """Why ``name`` is not a systemd slice name ("" when it is one)."""
    stem = name.removesuffix(".slice")
    if name == "-.slice" or (stem != name and all(_PIECE.fullmatch(p)
                                                  for p in stem.split("-"))):
        return ""
    return (f"{quote(name)} is not a systemd slice name (dash-separated parts of letters, "
            "digits, '_', '.' and '\\', ending in '.slice')")


def _element_problem(path: str) -> str:
    """Why cgroup ``path`` has no slice name ("" when it has one)."""
    for e in path.strip("/").split("/"):
        if e and not _PIECE.fullmatch(e.replace("-", "_")):
            return (f"element {quote(e)} cannot be part of a systemd unit name (letters, "
                    "digits, '-', '_', '.' and '\\' only)")
    return ""


def slice_path(name: str) -> str:
    """The cgroup path systemd gives slice ``name`` (``a-b.slice`` -> ``/a.slice/a-b.slice``;
    ``-.slice``, the root slice, -> ``/``); ``InvalidArgumentError`` for a bad slice name."""
    if problem := _slice_problem(name):
        raise InvalidArgumentError(f"slice {problem}")
    if name == "-.slice":
        return "/"
    pieces = name.removesuffix(".slice").split("-")
    return "/" + "/".join("-".join(pieces[:i + 1]) + ".slice" for i in range(len(pieces)))


def slice_name(path: str) -> str:
    """The slice kubelet's systemd driver names for cgroupfs ``path`` (its ``ToSystemd``):
    the elements joined with ``-``, each ``-`` in an element escaped as ``_``
    (``/kubepods/burstable/pod1-2`` -> ``kubepods-burstable-pod1_2.slice``; ``/`` ->
    ``-.slice``)."""
    if problem := _element_problem(path):
        raise InvalidArgumentError(f"cgroup path {quote(path)}: {problem}")
    elements = [e.replace("-", "_") for e in path.strip("/").split("/") if e]
    return "-".join(elements) + ".slice" if elements else "-.slice"


def parent_for(driver: Driver | str, parent: str) -> str:
    """``parent`` in ``driver``'s form: a slice name (systemd) or a cgroup path (cgroupfs).

    A kubelet parent in either form is converted where its meaning is clear: a cgroupfs path
    becomes its slice (:func:`slice_name`), a slice (``x-y.slice`` or its full path
    ``/x.slice/x-y.slice``) the path systemd gives it. Anything else (a mix of the forms, a
    path that is not its last slice's, a ``:``, a name systemd cannot take) is refused with
    an ``InvalidArgumentError`` naming the value, the driver and both forms.
    """
    d = parse_driver(driver) if not isinstance(driver, Driver) else driver
    if not parent:
        return DEFAULT_SYSTEMD_PARENT if d.systemd else DEFAULT_CGROUPFS_PARENT
    if ":" in parent:
        raise _refuse(parent, d, "':' (a cgroups path, not a parent)")
    if ".." in parent.split("/"):
        raise _refuse(parent, d, "'..' elements")
    elements = [e for e in parent.split("/") if e]
    if d.systemd and (not elements or elements == ["-.slice"]):
        raise _refuse(parent, d, "the root slice holds no pods (give a slice below it)")
    slices = [e.endswith(".slice") for e in elements]
    if not any(slices):
        if d.systemd and (problem := _element_problem(parent)):
            raise _refuse(parent, d, problem)
        return slice_name(parent) if d.systemd else parent
    if not all(slices):
        raise _refuse(parent, d, "a mix of slices and plain directories")
    if problem := _slice_problem(elements[-1]):
        raise _refuse(parent, d, problem)
    path = slice_path(elements[-1])
    if len(elements) > 1 and "/" + "/".join(elements) != path:
        raise _refuse(parent, d, f"not the path systemd gives {elements[-1]} ({path})")
    return elements[-1] if d.systemd else path


def cgroups_path_for(driver: Driver | str, parent: str, id: str,
                     prefix: str = SCOPE_PREFIX) -> str:
    """``linux.cgroupsPath`` of container ``id`` under ``parent`` (kubelet's, in either form;
    empty: the driver's default): systemd ``<slice>:<prefix>:<id>``, cgroupfs
    ``<parent>/<id>``."""
    d = parse_driver(driver) if not isinstance(driver, Driver) else driver
    p = parent_for(d, parent)
    return f"{p}:{prefix}:{id}" if d.systemd else posixpath.join(p, id)


def scope_unit(cgroups_path: str) -> str | None:
    """The systemd unit of a ``slice:prefix:name`` cgroups path (``<prefix>-<name>.scope``,
    or the slice ``name`` itself); ``None`` for a cgroupfs path."""
    if ":" not in cgroups_path:
        return None
    _, prefix, name = cgroups_path.split(":", 2)
    return name if name.endswith(".slice") else f"{prefix}-{name}.scope"
