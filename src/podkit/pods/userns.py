"""A pod's own user namespace (CRI ``userns_options``, Kubernetes ``hostUsers: false``): the
rules a config must follow, and the pod's ID map. Pure.

Mode NODE (or no option) keeps the host's users. Mode POD gives the pod one user namespace,
shared by its pause and every container, mapped by one contiguous range from container ID 0
(kubelet sends ``0 -> <a multiple of 65536>``, 65536 long), the same for users and groups.
Everything else is refused with an error naming the field: modes CONTAINER and TARGET,
mappings in NODE mode, several ranges, a range not starting at 0, uid and gid maps that
differ, the host's network, pid or IPC namespace (they belong to the host's users: Kubernetes
refuses ``hostNetwork``, ``hostPID`` and ``hostIPC`` with ``hostUsers: false``), IDs the map
lacks (``run_as_user``...), and a container whose option differs from its pod's.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from podkit import idmap
from podkit.errors import InvalidArgumentError
from podkit.pods.config import (
    ContainerConfig,
    IDMapping,
    NamespaceMode,
    SandboxConfig,
    UserNamespace,
)

__all__ = ["FIELD", "check_container", "check_sandbox", "pod_id_map", "unmapped_user"]

FIELD = "linux.security_context.namespace_options.userns_options"
"""Where a config holds its user namespace option."""

Error = type[InvalidArgumentError]


def pod_id_map(config: SandboxConfig) -> idmap.IDMap | None:
    """The ID map of the pod's own user namespace; ``None`` for the host's users. The config
    must have passed :func:`check_sandbox`."""
    userns = config.linux.security_context.namespace_options.userns_options
    if userns is None or userns.mode != NamespaceMode.POD:
        return None
    return idmap.IDMap(idmap.coalesce(_ranges(userns.uids)),
                       idmap.coalesce(_ranges(userns.gids)))


def _ranges(mappings: Iterable[IDMapping]) -> list[idmap.IDRange]:
    return [idmap.IDRange(container_id=m.container_id, host_id=m.host_id, size=m.length)
            for m in mappings]


def check_sandbox(config: SandboxConfig, error: Error) -> None:
    """Refuse a pod user namespace option podkit (or kubelet, or containerd) would not run."""
    ns = config.linux.security_context.namespace_options
    userns = ns.userns_options
    if userns is None:
        return
    if userns.mode == NamespaceMode.NODE:
        if userns.uids or userns.gids:
            raise error(f"{FIELD}: mode NODE (the host's users) takes no mappings; got "
                        f"{len(userns.uids)} uid and {len(userns.gids)} gid mappings")
        return
    if userns.mode != NamespaceMode.POD:
        raise error(f"{FIELD}.mode: {userns.mode.name} is not supported for a pod (POD gives "
                    "it a user namespace of its own, NODE keeps the host's users)")
    uids = _one_range(userns.uids, f"{FIELD}.uids", error)
    gids = _one_range(userns.gids, f"{FIELD}.gids", error)
    if uids != gids:
        raise error(f"{FIELD}: the uid mapping ({uids.line()}) and the gid mapping "
                    f"({gids.line()}) differ; podkit maps users and groups alike")
    for kind in ("network", "pid", "ipc"):
        if getattr(ns, kind) == NamespaceMode.NODE:
            raise error(
                f"{FIELD}: mode POD cannot go with namespace_options.{kind} NODE: the host's "
                f"{kind} namespace belongs to the host's users (Kubernetes refuses "
                "hostUsers: false with hostNetwork, hostPID or hostIPC)")
    sc = config.linux.security_context
    _mapped(sc.run_as_user, "linux.security_context.run_as_user", uids, error)
    _mapped(sc.run_as_group, "linux.security_context.run_as_group", gids, error)
    for i, g in enumerate(sc.supplemental_groups):
        _mapped(g, f"linux.security_context.supplemental_groups[{i}]", gids, error)


def _one_range(mappings: Sequence[IDMapping], field: str, error: Error) -> idmap.IDRange:
    """The mappings as one range from container ID 0, or ``error`` naming what is wrong."""
    if not mappings:
        raise error(f"{field}: mode POD needs a mapping (kubelet sends one range from "
                    "container ID 0, 65536 long)")
    for i, m in enumerate(mappings):
        if m.length < 1:
            raise error(f"{field}[{i}].length {m.length}: must be at least 1")
        for name in ("container_id", "host_id"):
            value = getattr(m, name)
            if value < 0 or value + m.length > idmap.MAX_ID:
                raise error(f"{field}[{i}]: {name} {value} + length {m.length} leaves the "
                            f"32-bit IDs (the last ID must be below {idmap.MAX_ID})")
    merged = idmap.coalesce(_ranges(mappings))
    if len(merged) != 1:
        lines = ", ".join(r.line() for r in idmap.coalesce(_ranges(mappings)))
        raise error(f"{field}: {lines}: not one contiguous range (podkit maps a pod by one "
                    "range, as kubelet gives it)")
    if merged[0].container_id != 0:
        raise error(f"{field}: the range starts at container ID {merged[0].container_id}, "
                    "not 0 (the pod's root must be mapped)")
    return merged[0]


def _mapped(id: int | None, field: str, r: idmap.IDRange, error: Error) -> None:
    if id is not None and r.host(id) is None:
        raise error(f"{field} {id}: not mapped in the pod's user namespace (container IDs "
                    f"{r.container_id}-{r.container_id + r.size - 1})")


def _same(a: UserNamespace | None, b: UserNamespace | None) -> bool:
    """containerd's ``sameUsernsConfig``, with no option the same as NODE without maps."""
    def key(u: UserNamespace | None) -> tuple[object, ...]:
        if u is None:
            return (NamespaceMode.NODE, (), ())
        return (u.mode, tuple(u.uids), tuple(u.gids))

    return key(a) == key(b)


def _describe(u: UserNamespace | None) -> str:
    if u is None:
        return "none (the host's users)"
    maps = [f"{m.container_id} {m.host_id} {m.length}" for m in (*u.uids, *u.gids)]
    return u.mode.name + (f" {', '.join(maps)}" if maps else "")


def check_container(config: ContainerConfig, pod: SandboxConfig, error: Error) -> None:
    """Refuse a container whose user namespace option is not its pod's (no option is fine:
    it shares the pod's), or whose IDs and mount mappings the pod's map lacks."""
    mine = config.linux.security_context.namespace_options.userns_options
    theirs = pod.linux.security_context.namespace_options.userns_options
    if mine is not None and not _same(mine, theirs):
        raise error(f"{FIELD}: {_describe(mine)} differs from the pod's "
                    f"({_describe(theirs)}): a container shares its pod's user namespace")
    ids = pod_id_map(pod)
    if ids is None:
        return
    uids, gids = ids.uids[0], ids.gids[0]
    sc = config.linux.security_context
    _mapped(sc.run_as_user, "linux.security_context.run_as_user", uids, error)
    _mapped(sc.run_as_group, "linux.security_context.run_as_group", gids, error)
    for i, g in enumerate(sc.supplemental_groups):
        _mapped(g, f"linux.security_context.supplemental_groups[{i}]", gids, error)
    pod_maps = [IDMapping(container_id=uids.container_id, host_id=uids.host_id,
                          length=uids.size)]
    for i, m in enumerate(config.mounts):
        for name in ("uid_mappings", "gid_mappings"):
            given = list(getattr(m, name))
            if given and given != pod_maps:
                raise error(
                    f"mounts[{i}].{name}: {', '.join(_line(x) for x in given)} is not the "
                    f"pod's map ({uids.line()}): in a pod with its own user namespace podkit "
                    "ID-maps every mount by the pod's map")


def _line(m: IDMapping) -> str:
    return f"{m.container_id} {m.host_id} {m.length}"


def unmapped_user(uid: int, gid: int, additional: Iterable[int],
                  ids: idmap.IDMap) -> str:
    """Which of a resolved process user's IDs ``ids`` lacks (``""``: all mapped)."""
    if ids.host_uid(uid) is None:
        return f"uid {uid}"
    for g in (gid, *additional):
        if ids.host_gid(g) is None:
            return f"gid {g}"
    return ""
