"""What a runtime would not honour: fields its ``features.json`` does not list, unknown keys."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from podkit.oci.codec import key_path, wire_fields
from podkit.oci.features import Features
from podkit.oci.problem import Problem
from podkit.oci.spec import Spec
from podkit.oci.values import _CAP_SETS, _HOOK_KINDS, MOUNT_OPTIONS
from podkit.oci.versions import _core, _uses


def _topic_known(topic: str | None, f: Features) -> bool:
    """Whether ``features`` says something about ``topic`` (then it decides, not the version)."""
    lx = f.linux
    sc = lx.seccomp if lx else None
    cg = lx.cgroup if lx else None
    known: dict[str | None, object] = {
        "hook": f.hooks,
        "mount.option": f.mount_options,
        "namespace": lx.namespaces if lx else None,
        "seccomp.action": sc.actions if sc else None,
        "seccomp.arch": sc.archs if sc else None,
        "seccomp.flag": (sc.supported_flags if sc.supported_flags is not None else sc.known_flags)
        if sc else None,
        "memoryPolicy": lx.memory_policy if lx else None,
        "netDevices": lx.net_devices.enabled if lx and lx.net_devices else None,
        "intelRdt.schemata": lx.intel_rdt.schemata if lx and lx.intel_rdt else None,
        "intelRdt.monitoring": lx.intel_rdt.monitoring if lx and lx.intel_rdt else None,
        "idmap": lx.mount_extensions.idmap.enabled
        if lx and lx.mount_extensions and lx.mount_extensions.idmap else None,
        "unified": cg.v2 if cg else None,
        "rdma": cg.rdma if cg else None,
    }
    return known.get(topic) is not None


def _not_in(values: list[str] | None, supported: list[str] | None, path: str,
            what: str) -> Iterator[Problem]:
    if supported is None:
        return
    for i, v in enumerate(values or ()):
        if v not in supported:
            yield Problem(f"{path}[{i}]", f"{what} {v!r} is not supported by the runtime")


def _not_one_of(value: str, supported: list[str] | None, path: str, what: str) -> Iterator[Problem]:
    if supported is not None and value not in supported:
        yield Problem(path, f"{what} {value!r} is not supported by the runtime")


def _disabled(flag: bool | None, used: bool, path: str, what: str) -> Iterator[Problem]:
    if used and flag is False:
        yield Problem(path, f"{what} is not supported by the runtime (features: disabled)")


def unknown_keys(obj: Any, path: str = "$", why: str = "ignored by runtimes") -> list[Problem]:
    """Keys of the model object ``obj`` (not its children) that its model does not know.

    An explicit null of a known key is not one (``validate`` reports it). Runtimes ignore
    unknown keys silently, so a caller usually wants to hear of them.
    """
    known = {f.wire for f in wire_fields(type(obj))}
    return [
        Problem(key_path(path, key), f"unknown key, {why}")
        for key, value in sorted(obj.extra.items())
        if not (key in known and value is None)
    ]


def unsupported_fields(spec: Spec, features: Features) -> list[Problem]:
    """What in ``spec`` the runtime that reported ``features`` (``runc features``) cannot honour.

    Checks namespaces, capabilities, hooks, generic mount options, seccomp actions/arches/flags/
    operators, AppArmor/SELinux, Intel RDT, memory policy, net devices, idmapped mounts, cgroup v2
    ``unified`` and rdma against the features lists; a feature the document does not describe is
    judged by version instead: anything newer than ``ociVersionMax`` (compared on major.minor.patch,
    so ``1.0.2-dev`` covers 1.0.2) is reported, because runc and crun silently ignore unknown
    fields: nothing else would tell the caller that e.g. ``domainname`` had no effect.
    """
    out: list[Problem] = []
    lx, fl = spec.linux, features.linux
    hooks = spec.hooks
    if hooks is not None and features.hooks is not None:
        for attr, wire in _HOOK_KINDS:
            if getattr(hooks, attr) and wire not in features.hooks:
                msg = f"{wire} hooks are not supported by the runtime"
                out.append(Problem(f"$.hooks.{wire}", msg))
    if features.mount_options is not None:
        for i, m in enumerate(spec.mounts or ()):
            for j, opt in enumerate(m.options or ()):
                if opt in MOUNT_OPTIONS and opt not in features.mount_options:
                    out.append(Problem(f"$.mounts[{i}].options[{j}]",
                                       f"mount option {opt!r} is not supported by the runtime"))
    proc = spec.process
    if fl is not None and proc is not None:
        if proc.capabilities is not None and fl.capabilities is not None:
            for cap_set in _CAP_SETS:
                out.extend(_not_in(getattr(proc.capabilities, cap_set), fl.capabilities,
                                   f"$.process.capabilities.{cap_set}", "capability"))
        if fl.apparmor is not None:
            out.extend(_disabled(fl.apparmor.enabled, bool(proc.apparmor_profile),
                                 "$.process.apparmorProfile", "AppArmor"))
        if fl.selinux is not None:
            out.extend(_disabled(fl.selinux.enabled, bool(proc.selinux_label),
                                 "$.process.selinuxLabel", "SELinux"))
    if fl is not None and lx is not None:
        out.extend(_linux_unsupported(spec, features))
    max_core = _core(features.oci_version_max)
    for use in _uses(spec):
        if _core(use.version) > max_core and not _topic_known(use.topic, features):
            out.append(Problem(use.path, f"{use.what} (runtime-spec {use.version}) is newer than "
                               f"the runtime's ociVersionMax {features.oci_version_max}: "
                               "the runtime may silently ignore it"))
    return out


def _linux_unsupported(spec: Spec, features: Features) -> Iterator[Problem]:
    lx, fl = spec.linux, features.linux
    assert lx is not None and fl is not None
    if fl.namespaces is not None:
        for i, ns in enumerate(lx.namespaces or ()):
            if ns.type not in fl.namespaces:
                yield Problem(f"$.linux.namespaces[{i}].type",
                              f"namespace {ns.type!r} is not supported by the runtime")
    if fl.selinux is not None:
        yield from _disabled(fl.selinux.enabled, bool(lx.mount_label), "$.linux.mountLabel",
                             "SELinux")
    sc, fsc = lx.seccomp, fl.seccomp
    if sc is not None and fsc is not None:
        p = "$.linux.seccomp"
        yield from _disabled(fsc.enabled, True, p, "seccomp")
        yield from _not_one_of(sc.default_action, fsc.actions, f"{p}.defaultAction",
                               "seccomp action")
        yield from _not_in(sc.architectures, fsc.archs, f"{p}.architectures", "seccomp arch")
        flags = fsc.supported_flags if fsc.supported_flags is not None else fsc.known_flags
        yield from _not_in(sc.flags, flags, f"{p}.flags", "seccomp flag")
        for i, sys in enumerate(sc.syscalls or ()):
            yield from _not_one_of(sys.action, fsc.actions, f"{p}.syscalls[{i}].action",
                                   "seccomp action")
            for j, arg in enumerate(sys.args or ()):
                yield from _not_one_of(arg.op, fsc.operators,
                                       f"{p}.syscalls[{i}].args[{j}].op", "seccomp operator")
    rdt, frdt = lx.intel_rdt, fl.intel_rdt
    if rdt is not None and frdt is not None:
        p = "$.linux.intelRdt"
        yield from _disabled(frdt.enabled, True, p, "Intel RDT")
        yield from _disabled(frdt.schemata, rdt.schemata is not None, f"{p}.schemata",
                             "intelRdt.schemata")
        yield from _disabled(frdt.monitoring, bool(rdt.enable_monitoring),
                             f"{p}.enableMonitoring", "intelRdt.enableMonitoring")
    mp, fmp = lx.memory_policy, fl.memory_policy
    if mp is not None and fmp is not None:
        p = "$.linux.memoryPolicy"
        yield from _not_one_of(mp.mode, fmp.modes, f"{p}.mode", "memory policy mode")
        yield from _not_in(mp.flags, fmp.flags, f"{p}.flags", "memory policy flag")
    if lx.net_devices is not None and fl.net_devices is not None:
        yield from _disabled(fl.net_devices.enabled, bool(lx.net_devices), "$.linux.netDevices",
                             "linux.netDevices")
    idmap = fl.mount_extensions.idmap if fl.mount_extensions else None
    if idmap is not None:
        for i, m in enumerate(spec.mounts or ()):
            used = m.uid_mappings is not None or bool({"idmap", "ridmap"} & set(m.options or ()))
            yield from _disabled(idmap.enabled, used, f"$.mounts[{i}]", "idmapped mounts")
    res, cg = lx.resources, fl.cgroup
    if res is not None and cg is not None:
        yield from _disabled(cg.v2, res.unified is not None, "$.linux.resources.unified",
                             "cgroup v2 (resources.unified)")
        yield from _disabled(cg.rdma, res.rdma is not None, "$.linux.resources.rdma",
                             "rdma cgroup")
