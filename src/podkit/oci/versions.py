"""The lowest runtime-spec version a config needs (``minimum_version``) and what raised it."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import attrs

from podkit.oci.spec import LinuxSeccomp, Spec
from podkit.oci.values import _HOOK_KINDS, _semver


@attrs.frozen
class _Use:
    version: str
    path: str
    what: str
    topic: str | None = None  # which features.json entry decides support, if any


_SECCOMP_ACTION_VERSIONS = {
    "SCMP_ACT_LOG": "1.0.2",
    "SCMP_ACT_KILL_PROCESS": "1.1.0",
    "SCMP_ACT_KILL_THREAD": "1.1.0",
    "SCMP_ACT_NOTIFY": "1.1.0",
}
_SECCOMP_FLAG_VERSIONS = {
    "SECCOMP_FILTER_FLAG_TSYNC": "1.0.2",
    "SECCOMP_FILTER_FLAG_LOG": "1.1.0",
    "SECCOMP_FILTER_FLAG_SPEC_ALLOW": "1.1.0",
    "SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV": "1.1.0",
}
_SECCOMP_ARCH_VERSIONS = {
    "SCMP_ARCH_RISCV64": "1.1.0",
    "SCMP_ARCH_LOONGARCH64": "1.2.1",
    "SCMP_ARCH_M68K": "1.2.1",
    "SCMP_ARCH_SH": "1.2.1",
    "SCMP_ARCH_SHEB": "1.2.1",
}


def _set(obj: Any, attr: str) -> bool:
    return obj is not None and getattr(obj, attr) is not None


def _uses(spec: Spec) -> Iterator[_Use]:
    if spec.domainname is not None:
        yield _Use("1.1.0", "$.domainname", "domainname")
    if spec.hooks is not None:
        for attr, wire in _HOOK_KINDS[1:4]:
            if getattr(spec.hooks, attr) is not None:
                yield _Use("1.0.2", f"$.hooks.{wire}", f"{wire} hooks", "hook")
    proc = spec.process
    if proc is not None:
        if _set(proc.user, "umask"):
            yield _Use("1.0.2", "$.process.user.umask", "process.user.umask")
        if proc.scheduler is not None:
            yield _Use("1.1.0", "$.process.scheduler", "process.scheduler")
        if proc.io_priority is not None:
            yield _Use("1.1.0", "$.process.ioPriority", "process.ioPriority")
        if proc.exec_cpu_affinity is not None:
            yield _Use("1.2.1", "$.process.execCPUAffinity", "process.execCPUAffinity")
    for i, m in enumerate(spec.mounts or ()):
        p = f"$.mounts[{i}]"
        if m.uid_mappings is not None or m.gid_mappings is not None:
            yield _Use("1.1.0", p, "idmapped mounts (uidMappings/gidMappings)", "idmap")
        for opt in ("idmap", "ridmap"):
            if opt in (m.options or ()):
                yield _Use("1.2.0", f"{p}.options", f"mount option {opt!r}", "mount.option")
        if not m.destination.startswith("/"):
            yield _Use("1.2.0", f"{p}.destination", "a relative mount destination")
    lx = spec.linux
    if lx is None:
        return
    for i, ns in enumerate(lx.namespaces or ()):
        if ns.type == "time":
            yield _Use("1.1.0", f"$.linux.namespaces[{i}]", "the time namespace", "namespace")
    if lx.time_offsets is not None:
        yield _Use("1.1.0", "$.linux.timeOffsets", "linux.timeOffsets", "namespace")
    if lx.personality is not None:
        yield _Use("1.0.2", "$.linux.personality", "linux.personality")
    if lx.net_devices is not None:
        yield _Use("1.3.0", "$.linux.netDevices", "linux.netDevices", "netDevices")
    if lx.memory_policy is not None:
        yield _Use("1.3.0", "$.linux.memoryPolicy", "linux.memoryPolicy", "memoryPolicy")
    rdt = lx.intel_rdt
    if rdt is not None:
        for attr, wire, version, topic in (
            ("clos_id", "closID", "1.0.2", None),
            ("mem_bw_schema", "memBwSchema", "1.0.2", None),
            ("enable_cmt", "enableCMT", "1.1.0", None),
            ("enable_mbm", "enableMBM", "1.1.0", None),
            ("schemata", "schemata", "1.3.0", "intelRdt.schemata"),
            ("enable_monitoring", "enableMonitoring", "1.3.0", "intelRdt.monitoring"),
        ):
            if getattr(rdt, attr) is not None:
                yield _Use(version, f"$.linux.intelRdt.{wire}", f"intelRdt.{wire}", topic)
        if rdt.clos_id == "/":
            yield _Use("1.3.0", "$.linux.intelRdt.closID", 'closID "/" (default CLOS)')
    yield from _resource_uses(spec)
    yield from _seccomp_uses(lx.seccomp)


def _resource_uses(spec: Spec) -> Iterator[_Use]:
    res = spec.linux.resources if spec.linux else None
    if res is None:
        return
    p = "$.linux.resources"
    if res.rdma is not None:
        yield _Use("1.0.2", f"{p}.rdma", "resources.rdma", "rdma")
    if res.unified is not None:
        yield _Use("1.1.0", f"{p}.unified", "resources.unified (cgroup v2)", "unified")
    mem = res.memory
    if _set(mem, "use_hierarchy"):
        yield _Use("1.0.2", f"{p}.memory.useHierarchy", "memory.useHierarchy")
    if _set(mem, "check_before_update"):
        yield _Use("1.1.0", f"{p}.memory.checkBeforeUpdate", "memory.checkBeforeUpdate")
    if _set(res.cpu, "burst"):
        yield _Use("1.1.0", f"{p}.cpu.burst", "cpu.burst")
    if _set(res.cpu, "idle"):
        yield _Use("1.1.0", f"{p}.cpu.idle", "cpu.idle")
    if res.pids is not None and res.pids.limit is None:
        yield _Use("1.3.0", f"{p}.pids", "pids without 'limit'")


def _seccomp_uses(sc: LinuxSeccomp | None) -> Iterator[_Use]:
    if sc is None:
        return
    p = "$.linux.seccomp"
    if sc.default_errno_ret is not None:
        yield _Use("1.1.0", f"{p}.defaultErrnoRet", "seccomp.defaultErrnoRet")
    # The notify listener comes with SCMP_ACT_NOTIFY: a runtime listing that action supports it.
    listener = (("listener_path", "listenerPath"), ("listener_metadata", "listenerMetadata"))
    for attr, wire in listener:
        if getattr(sc, attr) is not None:
            yield _Use("1.1.0", f"{p}.{wire}", f"seccomp.{wire}", "seccomp.action")
    if sc.flags is not None:
        yield _Use("1.0.2", f"{p}.flags", "seccomp.flags")
    for i, flag in enumerate(sc.flags or ()):
        if flag in _SECCOMP_FLAG_VERSIONS:
            yield _Use(_SECCOMP_FLAG_VERSIONS[flag], f"{p}.flags[{i}]", flag, "seccomp.flag")
    for i, arch in enumerate(sc.architectures or ()):
        if arch in _SECCOMP_ARCH_VERSIONS:
            yield _Use(_SECCOMP_ARCH_VERSIONS[arch], f"{p}.architectures[{i}]", arch,
                       "seccomp.arch")
    actions = [(f"{p}.defaultAction", sc.default_action)]
    for i, sys in enumerate(sc.syscalls or ()):
        actions.append((f"{p}.syscalls[{i}].action", sys.action))
        if sys.errno_ret is not None:
            yield _Use("1.1.0", f"{p}.syscalls[{i}].errnoRet", "seccomp errnoRet")
    for path, action in actions:
        if action in _SECCOMP_ACTION_VERSIONS:
            yield _Use(_SECCOMP_ACTION_VERSIONS[action], path, action, "seccomp.action")


def version_uses(spec: Spec) -> list[tuple[str, str, str]]:
    """Each use of a post-1.0.0 feature in ``spec``: (first runtime-spec version, path, what)."""
    return [(u.version, u.path, u.what) for u in _uses(spec)]


def minimum_version(spec: Spec) -> str:
    """The lowest runtime-spec release whose fields and values ``spec`` uses (``"1.0.0"`` at least).

    From the release table in runtime-spec's ChangeLog (e.g. ``domainname`` -> 1.1.0,
    ``process.execCPUAffinity`` -> 1.2.1, ``linux.memoryPolicy`` -> 1.3.0).
    """
    best = "1.0.0"
    for use in _uses(spec):
        if _core(use.version) > _core(best):
            best = use.version
    return best


def _core(version: str) -> tuple[int, int, int]:
    parsed = _semver(version)
    return parsed[0] if parsed else (0, 0, 0)
