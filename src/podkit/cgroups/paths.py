"""Where a container's cgroup is: its path from a ``linux.cgroupsPath`` (cgroupfs ``/a/b`` or
systemd ``slice:prefix:name``) or from a pid (``/proc/<pid>/cgroup``), and its directories."""

from __future__ import annotations

from pathlib import Path

import attrs

from podkit.cgroups.mounts import Hierarchy, Mode, host
from podkit.errors import InvalidArgumentError, NotFoundError

__all__ = ["Location", "cgroup_of_path", "cgroup_of_pid", "locate", "locate_pid",
           "systemd_path"]


def systemd_path(cgroups_path: str) -> str:
    """The cgroup path systemd gives ``slice:prefix:name`` (``a-b.slice:cri:x`` ->
    ``/a.slice/a-b.slice/cri-x.scope``)."""
    slice_, prefix, name = cgroups_path.split(":", 2)
    if any(not p for p in (prefix, name)) or "/" in slice_:
        raise InvalidArgumentError(
            f"cgroups path {cgroups_path!r}: systemd form is 'slice:prefix:name'")
    parts: list[str] = []
    acc = ""
    for piece in (slice_ or "system.slice").removesuffix(".slice").split("-"):
        acc = f"{acc}-{piece}" if acc else piece
        parts.append(acc + ".slice")
    unit = name if name.endswith(".slice") else f"{prefix}-{name}.scope"
    return "/" + "/".join([*parts, unit])


def cgroup_of_path(cgroups_path: str) -> str:
    """The absolute cgroup path of a ``linux.cgroupsPath`` in either form."""
    if ":" in cgroups_path:
        return systemd_path(cgroups_path)
    if ".." in cgroups_path.split("/"):
        raise InvalidArgumentError(f"cgroups path {cgroups_path!r} must not contain '..'")
    return "/" + cgroups_path.strip("/")


def cgroup_of_pid(pid: int, proc: str | Path = "/proc") -> dict[str, str]:
    """``/proc/<pid>/cgroup`` as controller -> path (``""`` for the cgroup2 line);
    ``NotFoundError`` when the process is gone."""
    try:
        text = (Path(proc) / str(pid) / "cgroup").read_text()
    except (FileNotFoundError, ProcessLookupError) as e:
        raise NotFoundError(f"process {pid} is gone") from e
    out: dict[str, str] = {}
    for line in text.splitlines():
        _, controllers, path = line.split(":", 2)
        for c in controllers.split(",") if controllers else [""]:
            out[c.removeprefix("name=")] = path
    return out


@attrs.frozen
class Location:
    """A cgroup's directories: the unified one (v2) or one per v1 controller."""

    hierarchy: Hierarchy
    unified: Path | None = None
    v1: dict[str, Path] = attrs.field(factory=dict)

    @property
    def mode(self) -> Mode:
        """The hierarchy's cgroup version."""
        return self.hierarchy.mode

    def controller_dir(self, controller: str) -> Path | None:
        """The directory holding ``controller``'s files (``None``: not mounted on v1)."""
        if self.mode is Mode.UNIFIED:
            return self.unified
        return self.v1.get(controller)

    def exists(self) -> bool:
        """Whether any of its directories exists."""
        dirs = [self.unified] if self.mode is Mode.UNIFIED else list(self.v1.values())
        return any(d is not None and d.is_dir() for d in dirs)


def locate(cgroups_path: str, hierarchy: Hierarchy | None = None) -> Location:
    """The directories of a ``linux.cgroupsPath`` on ``hierarchy`` (default: this host)."""
    h = hierarchy or host()
    return _at(h, {"": cgroup_of_path(cgroups_path)})


def locate_pid(pid: int, hierarchy: Hierarchy | None = None,
               proc: str | Path = "/proc") -> Location:
    """The directories of the cgroup(s) ``pid`` is in."""
    return _at(hierarchy or host(), cgroup_of_pid(pid, proc))


def _at(h: Hierarchy, paths: dict[str, str]) -> Location:
    default = paths.get("")
    unified = None
    if h.unified is not None and default is not None:
        unified = h.unified.dir(default)
    v1: dict[str, Path] = {}
    for name, mount in h.v1.items():
        path = paths.get(name, default if len(paths) == 1 else None)
        d = mount.dir(path) if path is not None else None
        if d is not None:
            v1[name] = d
    return Location(h, unified, v1)
