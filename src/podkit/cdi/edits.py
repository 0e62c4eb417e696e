"""Merging CDI container edits and applying them to an OCI spec (``podkit.oci.Spec``).

Order and semantics follow the Go library (``ContainerEdits.Apply``): env, device nodes with
their cgroup rules, net devices, mounts (then a stable sort by depth), hooks, intelRdt,
additional GIDs. Host device nodes are looked up with an injectable ``stat`` function
(``os.lstat`` by default). Applying is all-or-nothing: the edits are applied to fresh copies
of the parts of the OCI spec they touch and committed only when every step succeeded.
"""

from __future__ import annotations

import functools
import os
import posixpath
import stat as _stat
from collections.abc import Callable, Iterable
from typing import Any, TypeVar, cast

import attrs

from podkit import oci
from podkit.cdi.spec import NO_PERMISSIONS, ContainerEdits, DeviceNode
from podkit.errors import InvalidArgumentError, PodkitError

__all__ = [
    "EditError",
    "StatFunc",
    "apply_edits",
    "merge_edits",
]

StatFunc = Callable[[str], Any]
"""Host lookup for device nodes: ``lstat``-like, returns an object with ``st_mode``/``st_rdev``."""

_HOOK_STAGES = {
    "prestart": "prestart",
    "createRuntime": "create_runtime",
    "createContainer": "create_container",
    "startContainer": "start_container",
    "poststart": "poststart",
    "poststop": "poststop",
}


T = TypeVar("T")


def _new(cls: type[T], **kwargs: Any) -> T:
    """Build an OCI model (their attrs decorator is not visible to mypy's attrs plugin)."""
    return cls(**kwargs)


_FIELD_NAMES: dict[type, tuple[str, ...]] = {}


def _shallow(obj: T) -> T:
    """A shallow copy of an attrs model (much cheaper than ``copy.copy`` on slotted classes)."""
    cls = type(obj)
    names = _FIELD_NAMES.get(cls)
    if names is None:
        names = _FIELD_NAMES[cls] = tuple(a.name for a in attrs.fields(cast(Any, cls)))
    new: T = object.__new__(cls)
    for n in names:
        object.__setattr__(new, n, getattr(obj, n))
    return new


class EditError(PodkitError):
    """Edits that cannot be applied (host device missing or of the wrong type, bad OCI spec)."""


def merge_edits(edits: Iterable[ContainerEdits | None]) -> ContainerEdits:
    """Concatenate edit sets in order (``Append``); the last non-null ``intelRdt`` wins."""
    env: list[str] = []
    nodes: list[DeviceNode] = []
    hooks: list[Any] = []
    mounts: list[Any] = []
    gids: list[int] = []
    nets: list[Any] = []
    rdt = None
    for e in edits:
        if e is None:
            continue
        env.extend(e.env or ())
        nodes.extend(e.device_nodes or ())
        hooks.extend(e.hooks or ())
        mounts.extend(e.mounts or ())
        gids.extend(e.additional_gids or ())
        nets.extend(e.net_devices or ())
        if e.intel_rdt is not None:
            rdt = e.intel_rdt
    return ContainerEdits(
        env=tuple(env) or None,
        device_nodes=tuple(nodes) or None,
        hooks=tuple(hooks) or None,
        mounts=tuple(mounts) or None,
        intel_rdt=rdt,
        additional_gids=tuple(gids) or None,
        net_devices=tuple(nets) or None,
    )


# --- device nodes --------------------------------------------------------------------------

def _host_type(mode: int) -> str | None:
    if _stat.S_ISBLK(mode):
        return "b"
    if _stat.S_ISCHR(mode):
        return "c"
    if _stat.S_ISFIFO(mode):
        return "p"
    return None


def _complete_node(node: DeviceNode, stat: StatFunc) -> oci.LinuxDevice:
    """The OCI device for ``node``, with type, numbers and mode filled in from the host."""
    dev_type = node.type or ""
    major = node.major or 0
    minor = node.minor or 0
    file_mode = node.file_mode
    minimal = bool(dev_type) and (major != 0 or dev_type == "p")
    host_path = node.host_path or node.path
    try:
        st = stat(host_path)
        host_type = _host_type(st.st_mode)
        problem = None if host_type else "not a device node"
    except OSError as e:
        st, host_type, problem = None, None, e.strerror or str(e)
    if problem is not None:
        if not minimal:
            raise EditError(f'failed to stat CDI host device "{host_path}": {problem}')
    else:
        assert st is not None and host_type is not None
        if file_mode is None:
            file_mode = _stat.S_IMODE(st.st_mode) & 0o777
        if not minimal:
            if not dev_type:
                dev_type = host_type
            elif dev_type != host_type:
                raise EditError(
                    f'CDI device ("{node.path}", "{host_path}"), host type mismatch '
                    f"({dev_type}, {host_type})"
                )
            if dev_type != "p" and major == 0:
                major, minor = os.major(st.st_rdev), os.minor(st.st_rdev)
    return _new(oci.LinuxDevice,
        path=node.path, type=dev_type, major=major, minor=minor,
        file_mode=file_mode, uid=node.uid, gid=node.gid,
    )


# --- helpers -------------------------------------------------------------------------------

@functools.lru_cache(maxsize=4096)
def _clean_depth(path: str) -> int:
    """Number of ``/`` in the cleaned path (Go ``filepath.Clean``)."""
    if not path:
        return 0
    cleaned = posixpath.normpath(path)
    if cleaned.startswith("//"):
        cleaned = "/" + cleaned.lstrip("/")
    return cleaned.count("/")


def _has_user_ns(spec: oci.Spec) -> bool:
    return bool(spec.linux and any(ns.type == "user" for ns in spec.linux.namespaces or ()))


def _idmap_options(options: list[str] | None, mount_type: str | None) -> list[str] | None:
    opts = list(options or ())
    if "idmap" in opts or "ridmap" in opts:
        return options
    candidate = "idmap" if mount_type == "bind" else None
    for o in opts:
        if o == "bind":
            candidate = "idmap"
        elif o == "rbind":
            candidate = "ridmap"
    if candidate is None:
        return options
    return [*opts, candidate]


class _Work:
    """Copy-on-write view of the OCI spec parts the edits touch."""

    def __init__(self, spec: oci.Spec) -> None:
        self.spec = spec
        self.process: oci.Process | None = spec.process
        self.linux: oci.Linux | None = spec.linux
        self.mounts: list[oci.Mount] | None = spec.mounts
        self.hooks: oci.Hooks | None = spec.hooks
        self._own: set[str] = set()

    def own_process(self) -> oci.Process:
        if "process" not in self._own:
            self.process = _shallow(self.process) if self.process else _new(oci.Process)
            self._own.add("process")
        assert self.process is not None
        return self.process

    def own_user(self) -> oci.User:
        p = self.own_process()
        if "user" not in self._own:
            p.user = _shallow(p.user) if p.user else _new(oci.User)
            self._own.add("user")
        assert p.user is not None
        return p.user

    def own_linux(self) -> oci.Linux:
        if "linux" not in self._own:
            self.linux = _shallow(self.linux) if self.linux else _new(oci.Linux)
            self._own.add("linux")
        assert self.linux is not None
        return self.linux

    def own_resources(self) -> oci.LinuxResources:
        lx = self.own_linux()
        if "resources" not in self._own:
            lx.resources = _shallow(lx.resources) if lx.resources else _new(oci.LinuxResources)
            self._own.add("resources")
        assert lx.resources is not None
        return lx.resources

    def own_hooks(self) -> oci.Hooks:
        if "hooks" not in self._own:
            self.hooks = _shallow(self.hooks) if self.hooks else _new(oci.Hooks)
            self._own.add("hooks")
        assert self.hooks is not None
        return self.hooks

    def commit(self) -> None:
        self.spec.process = self.process
        self.spec.linux = self.linux
        self.spec.mounts = self.mounts
        self.spec.hooks = self.hooks


def _apply_env(w: _Work, env: Iterable[str]) -> None:
    proc = w.own_process()
    current = list(proc.env or ())
    index = {e.partition("=")[0]: i for i, e in reversed(list(enumerate(current)))}
    for e in env:
        key = e.partition("=")[0]
        if key in index:
            current[index[key]] = e
        else:
            index[key] = len(current)
            current.append(e)
    proc.env = current


def _apply_device_nodes(w: _Work, nodes: Iterable[DeviceNode], stat: StatFunc) -> None:
    lx = w.own_linux()
    devices = list(lx.devices or ())
    rules: list[oci.LinuxDeviceCgroup] | None = None
    user = w.process.user if w.process else None
    puid = user.uid if user and user.uid else 0
    pgid = user.gid if user and user.gid else 0
    for node in nodes:
        dev = _complete_node(node, stat)
        if dev.uid is None and puid > 0:
            dev.uid = puid
        if dev.gid is None and pgid > 0:
            dev.gid = pgid
        for i, existing in enumerate(devices):
            if existing.path == dev.path:
                del devices[i]
                break
        devices.append(dev)
        if dev.type in ("b", "c"):
            access = node.permissions or "rwm"
            if access == NO_PERMISSIONS:
                # Go appends an allow rule with an empty access string, which grants nothing
                # and which runc (1.1) rejects ("device access ... cannot be empty"): add none.
                continue
            if rules is None:
                res = w.own_resources()
                rules = list(res.devices or ())
                res.devices = rules
            rules.append(_new(oci.LinuxDeviceCgroup,
                allow=True, type=dev.type, major=dev.major, minor=dev.minor,
                access=access,
            ))
    lx.devices = devices


def _apply_mounts(w: _Work, edits: ContainerEdits) -> None:
    mounts = list(w.mounts or ())
    userns = _has_user_ns(w.spec)
    for m in edits.mounts or ():
        for i, existing in enumerate(mounts):
            if existing.destination == m.container_path:
                del mounts[i]
                break
        options = list(m.options) if m.options is not None else None
        if userns:
            options = _idmap_options(options, m.type)
        mounts.append(_new(oci.Mount,
            destination=m.container_path, source=m.host_path, type=m.type, options=options,
        ))
    mounts.sort(key=lambda mt: _clean_depth(mt.destination))
    w.mounts = mounts


def _apply_hooks(w: _Work, edits: ContainerEdits) -> None:
    hooks = w.own_hooks()
    lists: dict[str, list[oci.Hook]] = {}
    for h in edits.hooks or ():
        attr = _HOOK_STAGES.get(h.hook_name)
        if attr is None:
            raise EditError(f'invalid hook name "{h.hook_name}"')
        if attr not in lists:
            lists[attr] = list(getattr(hooks, attr) or ())
            setattr(hooks, attr, lists[attr])
        lists[attr].append(_new(oci.Hook,
            path=h.path,
            args=list(h.args) if h.args is not None else None,
            env=list(h.env) if h.env is not None else None,
            timeout=h.timeout,
        ))


def _apply_gids(w: _Work, gids: Iterable[int]) -> None:
    existing = list(w.process.user.additional_gids or ()) if w.process and w.process.user else []
    added = False
    for gid in gids:
        if gid == 0 or gid in existing:
            continue
        existing.append(gid)
        added = True
    if added:
        w.own_user().additional_gids = existing


def apply_edits(
    spec: oci.Spec | None, edits: ContainerEdits, *, stat: StatFunc = os.lstat
) -> None:
    """Apply ``edits`` to ``spec`` in place; on any error ``spec`` is left unchanged.

    ``stat`` looks up host device nodes (``os.lstat`` by default: symlinks are not followed).
    """
    if spec is None:
        raise InvalidArgumentError("can't edit nil OCI Spec")
    if not isinstance(spec, oci.Spec):
        raise InvalidArgumentError(
            f"can't edit OCI Spec: expected podkit.oci.Spec, got {type(spec).__name__}"
        )
    if edits.is_empty():
        return
    w = _Work(spec)
    if edits.env:
        _apply_env(w, edits.env)
    if edits.device_nodes:
        _apply_device_nodes(w, edits.device_nodes, stat)
    if edits.net_devices:
        lx = w.own_linux()
        net = dict(lx.net_devices or {})
        for nd in edits.net_devices:
            net[nd.host_interface_name] = _new(oci.LinuxNetDevice, name=nd.name)
        lx.net_devices = net
    if edits.mounts:
        _apply_mounts(w, edits)
    if edits.hooks:
        _apply_hooks(w, edits)
    if edits.intel_rdt is not None:
        r = edits.intel_rdt
        w.own_linux().intel_rdt = _new(oci.LinuxIntelRdt,
            clos_id=r.clos_id or None,
            l3_cache_schema=r.l3_cache_schema or None,
            mem_bw_schema=r.mem_bw_schema or None,
            schemata=list(r.schemata) if r.schemata else None,
            enable_monitoring=r.enable_monitoring or None,
        )
    if edits.additional_gids:
        _apply_gids(w, edits.additional_gids)
    w.commit()
