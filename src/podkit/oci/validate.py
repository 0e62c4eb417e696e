"""Validation of OCI documents against the schema and the rules of the spec text.

``validate(spec)`` covers what the official JSON schema (draft-04, runtime-spec 1.3) checks for a
Linux ``config.json`` (types, integer ranges, REQUIRED keys, enums, patterns, minimums) plus the
rules the spec text states but the schema cannot (absolute paths, duplicate namespaces and rlimits,
known capability and rlimit names, device numbers, user-namespace mappings, ...). It never raises:
it returns a list of ``Problem`` (JSON path + message), empty when the spec is valid.

The loader (``Spec.from_json`` & co.) rejects wrong JSON types, out-of-range integers and (unless
``strict=False``, which keeps documents from newer spec versions lossless) unknown enum values,
found by ``enums.unknown_values`` (which sits below the models; ``enum_problems`` here gives the
same list). Everything here is a pure function of its arguments. The value
tables live in ``values``, version computation in ``versions`` and runtime-feature checks in
``support``; their names stay importable from here.
"""

from __future__ import annotations

import re
import types
import typing
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import attrs

from podkit.oci.codec import SpecError, key_path, wire_fields
from podkit.oci.enums import UNKNOWN
from podkit.oci.features import Features
from podkit.oci.problem import Problem
from podkit.oci.spec import Hook, LinuxSeccomp, Mount, Spec, State
from podkit.oci.support import unknown_keys, unsupported_fields
from podkit.oci.values import (
    _CAP_RE,
    _CAP_SETS,
    _CPU_LIST_RE,
    _DEVICE_TYPE_RE,
    _FREEBSD_SHARING,
    _HOOK_KINDS,
    _IOPRIO_CLASSES,
    _MEM_BW_RE,
    _MPOL_FLAGS,
    _MPOL_MODES,
    _OTHER_PLATFORMS,
    _PAGE_SIZE_RE,
    _PERSONALITY_DOMAINS,
    _PROPAGATIONS,
    _RLIMIT_RE,
    _SCHED_FLAGS,
    _SCHED_POLICIES,
    _SECCOMP_ACTIONS,
    _SECCOMP_ARCHES,
    _SECCOMP_FLAGS,
    _SECCOMP_OPS,
    _SEMVER,
    _STATUSES,
    _TIME_CLOCKS,
    CAPABILITIES,
    INT_RANGES,
    MOUNT_OPTIONS,
    NAMESPACE_TYPES,
    RLIMITS,
    SPEC_VERSIONS,
    _at_least,
)
from podkit.oci.versions import minimum_version, version_uses

__all__ = [
    "CAPABILITIES",
    "MOUNT_OPTIONS",
    "NAMESPACE_TYPES",
    "RLIMITS",
    "SPEC_VERSIONS",
    "Problem",
    "check",
    "enum_problems",
    "minimum_version",
    "unknown_keys",
    "unsupported_fields",
    "validate",
    "validate_features",
    "validate_state",
    "version_uses",
]


# --- the structural walk (types, ranges, REQUIRED keys, nulls) ---------------------------------


def _strip_optional(tp: Any) -> Any:
    if typing.get_origin(tp) in (typing.Union, types.UnionType):
        (tp,) = [a for a in typing.get_args(tp) if a is not type(None)]
    return tp


_JSON_NAMES = {str: "a string", bool: "a boolean", int: "an integer"}


def _check_value(value: Any, tp: Any, kind: str | None, path: str, out: list[Problem]) -> None:
    tp = _strip_optional(tp)
    origin = typing.get_origin(tp)
    if tp in (str, bool):
        if type(value) is not tp:
            out.append(Problem(path, f"expected {_JSON_NAMES[tp]}, got {value!r}"))
    elif tp is int:
        if type(value) is not int:
            out.append(Problem(path, f"expected an integer, got {value!r}"))
            return
        k = kind or "int64"
        lo, hi = INT_RANGES[k]
        if not lo <= value <= hi:
            out.append(Problem(path, f"{value} is out of range for {k} [{lo}, {hi}]"))
    elif origin is list:
        if type(value) is not list:
            out.append(Problem(path, f"expected an array, got {value!r}"))
            return
        (item,) = typing.get_args(tp)
        for i, x in enumerate(value):
            _check_value(x, item, kind, f"{path}[{i}]", out)
    elif origin is dict:
        if type(value) is not dict:
            out.append(Problem(path, f"expected an object, got {value!r}"))
            return
        _, item = typing.get_args(tp)
        for k2, x in value.items():
            if type(k2) is not str:
                out.append(Problem(path, f"object key {k2!r} is not a string"))
            else:
                _check_value(x, item, kind, key_path(path, k2), out)
    elif attrs.has(tp):
        if not isinstance(value, tp):
            out.append(Problem(path, f"expected {tp.__name__}, got {type(value).__name__}"))
            return
        _check_model(value, path, out)


def _check_model(obj: Any, path: str, out: list[Problem]) -> None:
    for f in wire_fields(type(obj)):
        value = getattr(obj, f.name)
        p = key_path(path, f.wire)
        if value is not None:
            _check_value(value, f.type, f.int_kind, p, out)
        elif f.required:
            out.append(Problem(path, f"missing required key {f.wire!r}"))


Pred = Callable[[Any], bool]


def _pred_for(tp: Any, kind: str | None) -> Pred:
    """A fast yes/no check that ``value`` has the wire type ``tp`` (the detailed walk explains)."""
    tp = _strip_optional(tp)
    origin = typing.get_origin(tp)
    if tp is str or tp is bool:
        return lambda v: type(v) is tp
    if tp is int:
        lo, hi = INT_RANGES[kind or "int64"]
        return lambda v: type(v) is int and lo <= v <= hi
    if origin is list:
        item = _pred_for(typing.get_args(tp)[0], kind)
        return lambda v: type(v) is list and all(item(x) for x in v)
    if origin is dict:
        value = _pred_for(typing.get_args(tp)[1], kind)
        return lambda v: type(v) is dict and all(
            type(k) is str and value(x) for k, x in v.items())
    if attrs.has(tp):
        return lambda v: type(v) is tp and _well_typed(v)
    raise TypeError(f"podkit.oci.validate: no check for {tp!r}")


_Plan = tuple[tuple[str, bool, Pred, str, bool], ...]
_PLANS: dict[type, _Plan] = {}


def _plan(cls: type) -> _Plan:
    """Per field: attribute, required, type check, wire name, whether it can hold models."""
    cached = _PLANS.get(cls)
    if cached is not None:
        return cached
    plan = []
    for f in wire_fields(cls):
        tp = _strip_optional(f.type)
        inner = [tp, *typing.get_args(tp)]
        plan.append((f.name, f.required, _pred_for(f.type, f.int_kind), f.wire,
                     any(attrs.has(t) for t in inner)))
    _PLANS[cls] = tuple(plan)
    return _PLANS[cls]


def _well_typed(obj: Any) -> bool:
    for name, required, pred, _, _ in _plan(type(obj)):
        value = getattr(obj, name)
        if value is None:
            if required:
                return False
        elif not pred(value):
            return False
    return True


def _nulls(obj: Any, path: str) -> Iterator[Problem]:
    """Explicit JSON nulls for known keys (kept in ``extra``): the schema allows none of them."""
    extra: dict[str, Any] = obj.extra
    for name, _, _, wire, holds_models in _plan(type(obj)):
        value = getattr(obj, name)
        if value is None:
            if extra and wire in extra and extra[wire] is None:
                yield Problem(key_path(path, wire), "null is not allowed here")
            continue
        if not holds_models:
            continue
        p = key_path(path, wire)
        if type(value) is list:
            for i, item in enumerate(value):
                yield from _nulls(item, f"{p}[{i}]")
        elif type(value) is dict:
            for k, item in value.items():
                yield from _nulls(item, key_path(p, k))
        else:
            yield from _nulls(value, p)


def _structural(obj: Any) -> tuple[list[Problem], bool]:
    """(problems, well_typed): type/range/required problems first, then explicit nulls."""
    out: list[Problem] = []
    if not _well_typed(obj):
        _check_model(obj, "$", out)
    well_typed = not out
    if well_typed:
        out.extend(_nulls(obj, "$"))
    return out, well_typed


# --- semantic rules ----------------------------------------------------------------------------


def _enum(value: str | None, known: Iterable[str], path: str, what: str) -> Iterator[Problem]:
    if value is not None and value not in known:
        yield Problem(path, f"{UNKNOWN}{what} {value!r}")


def _enums(
    values: list[str] | None, known: Iterable[str], path: str, what: str
) -> Iterator[Problem]:
    for i, v in enumerate(values or ()):
        yield from _enum(v, known, f"{path}[{i}]", what)


def _pattern(value: str | None, rx: re.Pattern[str], path: str, what: str) -> Iterator[Problem]:
    if value is not None and not rx.match(value):
        shown = "^" + rx.pattern.removesuffix(r"\Z") + "$"
        yield Problem(path, f"{what} {value!r} does not match '{shown}'")


def _absolute(value: str | None, path: str, what: str) -> Iterator[Problem]:
    if value is not None and not value.startswith("/"):
        yield Problem(path, f"{what} {value!r} must be an absolute path")


def _linux_target(spec: Spec) -> bool:
    """A spec is checked as a Linux config unless it only carries another platform's object."""
    return spec.linux is not None or not any(k in spec.extra for k in _OTHER_PLATFORMS)


def _check_process(spec: Spec, linux: bool) -> Iterator[Problem]:
    proc = spec.process
    if proc is None:
        return
    yield from _absolute(proc.cwd, "$.process.cwd", "cwd")
    if linux:
        if proc.user is None:
            yield Problem("$.process", "missing 'user' (REQUIRED on Linux)")
        else:
            for key in ("uid", "gid"):
                if getattr(proc.user, key) is None:
                    yield Problem("$.process.user", f"missing {key!r} (REQUIRED on Linux)")
    if proc.capabilities is not None:
        for cap_set in _CAP_SETS:
            caps = getattr(proc.capabilities, cap_set)
            yield from _enums(
                caps, CAPABILITIES, f"$.process.capabilities.{cap_set}", "capability"
            )
    seen: dict[str, int] = {}
    for i, rl in enumerate(proc.rlimits or ()):
        p = f"$.process.rlimits[{i}]"
        if not _RLIMIT_RE.match(rl.type):
            yield Problem(f"{p}.type", f"rlimit type {rl.type!r} does not match '^RLIMIT_[A-Z]+$'")
        elif rl.type not in RLIMITS:
            yield Problem(f"{p}.type", f"unknown rlimit {rl.type!r}")
        if rl.type in seen:
            first = seen[rl.type]
            yield Problem(f"{p}.type", f"duplicate rlimit {rl.type!r} (also at index {first})")
        seen.setdefault(rl.type, i)
        if rl.soft > rl.hard:
            yield Problem(p, f"soft limit {rl.soft} exceeds hard limit {rl.hard}")
    if proc.scheduler is not None:
        yield from _enum(proc.scheduler.policy, _SCHED_POLICIES, "$.process.scheduler.policy",
                         "scheduler policy")
        yield from _enums(proc.scheduler.flags, _SCHED_FLAGS, "$.process.scheduler.flags",
                          "scheduler flag")
    if proc.io_priority is not None:
        yield from _enum(proc.io_priority.class_, _IOPRIO_CLASSES, "$.process.ioPriority.class",
                         "I/O priority class")
        prio = proc.io_priority.priority
        if prio is None:
            yield Problem("$.process.ioPriority", "missing 'priority' (REQUIRED)")
        elif not 0 <= prio <= 7:
            yield Problem("$.process.ioPriority.priority", f"{prio} is not in 0..7")
    if proc.exec_cpu_affinity is not None:
        for key in ("initial", "final"):
            yield from _pattern(getattr(proc.exec_cpu_affinity, key), _CPU_LIST_RE,
                                f"$.process.execCPUAffinity.{key}", "CPU list")


def _check_hooks(spec: Spec) -> Iterator[Problem]:
    if spec.hooks is None:
        return
    for attr, wire in _HOOK_KINDS:
        hooks: list[Hook] = getattr(spec.hooks, attr) or []
        for i, hook in enumerate(hooks):
            p = f"$.hooks.{wire}[{i}]"
            yield from _absolute(hook.path, f"{p}.path", "hook path")
            if hook.timeout is not None and hook.timeout < 1:
                yield Problem(f"{p}.timeout", f"timeout {hook.timeout} must be >= 1 second")


def _check_mounts(spec: Spec) -> Iterator[Problem]:
    relative_ok = _at_least(spec.oci_version, "1.2.0")
    for i, m in enumerate(spec.mounts or ()):
        p = f"$.mounts[{i}]"
        if not relative_ok:
            for prob in _absolute(m.destination, f"{p}.destination", "destination"):
                yield Problem(prob.path, prob.message + " before runtime-spec 1.2.0")
        yield from _check_idmap(m, p)


def _check_idmap(m: Mount, p: str) -> Iterator[Problem]:
    opts = set(m.options or ())
    has_uid, has_gid = m.uid_mappings is not None, m.gid_mappings is not None
    if has_uid != has_gid:
        yield Problem(p, "uidMappings and gidMappings must be given together")
    if (has_uid or has_gid) and not opts & {"idmap", "ridmap"}:
        yield Problem(f"{p}.options", "uidMappings/gidMappings need the 'idmap' or 'ridmap' option")
    if {"idmap", "ridmap"} <= opts:
        yield Problem(f"{p}.options", "'idmap' and 'ridmap' are mutually exclusive")


def _check_namespaces(spec: Spec) -> Iterator[Problem]:
    lx = spec.linux
    namespaces = (lx.namespaces if lx else None) or []
    seen: dict[str, int] = {}
    for i, ns in enumerate(namespaces):
        p = f"$.linux.namespaces[{i}]"
        if ns.type not in NAMESPACE_TYPES:
            yield Problem(f"{p}.type", f"unknown namespace type {ns.type!r}")
        elif ns.type in seen:
            yield Problem(f"{p}.type",
                          f"duplicate namespace {ns.type!r} (also at index {seen[ns.type]})")
        seen.setdefault(ns.type, i)
        if ns.path is not None:
            if ns.type not in NAMESPACE_TYPES:
                yield Problem(f"{p}.path", f"cannot join a namespace of unknown type {ns.type!r}")
            yield from _absolute(ns.path, f"{p}.path", "namespace path")
    if lx is None:
        return
    user = next((ns for ns in namespaces if ns.type == "user"), None)
    mapped = bool(lx.uid_mappings) or bool(lx.gid_mappings)
    if user is not None and user.path is None:
        if not lx.uid_mappings:
            yield Problem("$.linux", "a new user namespace needs uidMappings")
        if not lx.gid_mappings:
            yield Problem("$.linux", "a new user namespace needs gidMappings")
    if mapped and user is None:
        yield Problem("$.linux", "uidMappings/gidMappings given without a user namespace")
    if lx.time_offsets and "time" not in seen:
        yield Problem("$.linux.timeOffsets", "timeOffsets need a time namespace")
    for clock in lx.time_offsets or {}:
        yield from _enum(clock, _TIME_CLOCKS, key_path("$.linux.timeOffsets", clock), "clock")


def _check_uts(spec: Spec) -> Iterator[Problem]:
    namespaces = (spec.linux.namespaces if spec.linux else None) or []
    # Like runc: a uts namespace entry (new, or joined by path as CRI containers do) is enough.
    own_uts = any(ns.type == "uts" for ns in namespaces)
    for key, value in (("hostname", spec.hostname), ("domainname", spec.domainname)):
        if value and not own_uts:
            yield Problem(f"$.{key}", f"setting {key} needs a uts namespace (not the host's)")


def _check_devices(spec: Spec) -> Iterator[Problem]:
    lx = spec.linux
    if lx is None:
        return
    for i, d in enumerate(lx.devices or ()):
        p = f"$.linux.devices[{i}]"
        if not _DEVICE_TYPE_RE.match(d.type):
            yield Problem(f"{p}.type", f"device type {d.type!r} is not one of c, b, u, p")
        elif d.type != "p":
            for key in ("major", "minor"):
                if getattr(d, key) is None:
                    yield Problem(p, f"missing {key!r} (REQUIRED for device type {d.type!r})")
        yield from _absolute(d.path, f"{p}.path", "device path")
        if d.file_mode is not None and d.file_mode > 0o777:
            yield Problem(f"{p}.fileMode", f"fileMode {d.file_mode} is not in 0..511 (0o777)")
    res = lx.resources
    for i, rule in enumerate((res.devices if res else None) or ()):
        p = f"$.linux.resources.devices[{i}]"
        yield from _enum(rule.type, ("a", "b", "c"), f"{p}.type", "device cgroup type")
        if rule.access is not None and not set(rule.access) <= set("rwm"):
            yield Problem(f"{p}.access", f"access {rule.access!r} is not made of r, w, m")


def _check_resources(spec: Spec) -> Iterator[Problem]:
    res = spec.linux.resources if spec.linux else None
    if res is None:
        return
    p = "$.linux.resources"
    if res.pids is not None and res.pids.limit is None and not _at_least(spec.oci_version, "1.3.0"):
        yield Problem(f"{p}.pids", "missing 'limit' (REQUIRED before runtime-spec 1.3.0)")
    swappiness = res.memory.swappiness if res.memory else None
    if swappiness is not None and swappiness > 100:
        yield Problem(f"{p}.memory.swappiness", f"{swappiness} is not in 0..100")
    for i, hp in enumerate(res.hugepage_limits or ()):
        yield from _pattern(hp.page_size, _PAGE_SIZE_RE, f"{p}.hugepageLimits[{i}].pageSize",
                            "page size")


def _check_seccomp(sc: LinuxSeccomp | None) -> Iterator[Problem]:
    if sc is None:
        return
    p = "$.linux.seccomp"
    yield from _enum(sc.default_action, _SECCOMP_ACTIONS, f"{p}.defaultAction", "seccomp action")
    yield from _enums(sc.architectures, _SECCOMP_ARCHES, f"{p}.architectures", "seccomp arch")
    yield from _enums(sc.flags, _SECCOMP_FLAGS, f"{p}.flags", "seccomp flag")
    notify = sc.default_action == "SCMP_ACT_NOTIFY"
    for i, sys in enumerate(sc.syscalls or ()):
        sp = f"{p}.syscalls[{i}]"
        if not sys.names:
            yield Problem(f"{sp}.names", "needs at least one syscall name")
        yield from _enum(sys.action, _SECCOMP_ACTIONS, f"{sp}.action", "seccomp action")
        notify = notify or sys.action == "SCMP_ACT_NOTIFY"
        for j, arg in enumerate(sys.args or ()):
            yield from _enum(arg.op, _SECCOMP_OPS, f"{sp}.args[{j}].op", "seccomp operator")
    if notify and not sc.listener_path:
        yield Problem(p, "SCMP_ACT_NOTIFY needs 'listenerPath'")


def _check_linux_misc(spec: Spec) -> Iterator[Problem]:
    lx = spec.linux
    if lx is None:
        return
    yield from _enum(lx.rootfs_propagation, _PROPAGATIONS, "$.linux.rootfsPropagation",
                     "rootfs propagation")
    for key, paths in (("maskedPaths", lx.masked_paths), ("readonlyPaths", lx.readonly_paths)):
        for i, path in enumerate(paths or ()):
            yield from _absolute(path, f"$.linux.{key}[{i}]", "path")
    if lx.intel_rdt is not None:
        yield from _pattern(lx.intel_rdt.mem_bw_schema, _MEM_BW_RE, "$.linux.intelRdt.memBwSchema",
                            "memBwSchema")
    if lx.memory_policy is not None:
        mp = "$.linux.memoryPolicy"
        yield from _enum(lx.memory_policy.mode, _MPOL_MODES, f"{mp}.mode", "memory policy mode")
        yield from _enums(lx.memory_policy.flags, _MPOL_FLAGS, f"{mp}.flags", "memory policy flag")
    if lx.personality is not None:
        pp = "$.linux.personality"
        if lx.personality.domain is None:
            yield Problem(pp, "missing 'domain' (REQUIRED)")
        yield from _enum(lx.personality.domain, _PERSONALITY_DOMAINS, f"{pp}.domain",
                         "personality domain")


def _check_other_platforms(spec: Spec) -> Iterator[Problem]:
    """Other platforms' objects are kept verbatim; only FreeBSD jail sharing modes are checked."""
    freebsd = spec.extra.get("freebsd")
    jail = freebsd.get("jail") if isinstance(freebsd, dict) else None
    if not isinstance(jail, dict):
        return
    for key, known in _FREEBSD_SHARING.items():
        value = jail.get(key)
        if value is not None and value not in known:
            yield Problem(f"$.freebsd.jail.{key}", f"{value!r} is not one of {', '.join(known)}")


def validate(spec: Spec) -> list[Problem]:
    """Every problem with ``spec`` as a runtime-spec 1.3 Linux ``config.json``; [] when valid.

    Covers the official JSON schema (types, integer ranges, REQUIRED keys, explicit nulls, enums
    such as namespace types and seccomp actions, patterns) plus rules from the spec text: absolute
    cwd/hook/device/masked paths and mount destinations (relative allowed from ociVersion 1.2.0),
    duplicate namespaces and rlimits, known capability and rlimit names, device major/minor,
    user-namespace mappings, hostname needing a uts namespace, ``root`` REQUIRED on Linux.
    Type errors (possible in a spec built in Python) are reported alone: semantic rules need a
    well-typed spec.

    A document with another platform's object (``windows``, ``solaris``, ``zos``, ``freebsd``)
    and no ``linux`` is not held to the Linux-only rules (``root``, ``process.user``, uts
    namespace); those objects are kept verbatim and, apart from FreeBSD jail modes, not checked.
    """
    problems, well_typed = _structural(spec)
    if not well_typed:
        return problems
    linux = _linux_target(spec)
    if not _SEMVER.match(spec.oci_version):
        problems.append(Problem("$.ociVersion",
                                f"{spec.oci_version!r} is not a SemVer 2.0 version"))
    if linux and spec.root is None and "windows" not in spec.extra:
        problems.append(Problem("$", "missing 'root' (REQUIRED on Linux)"))
    if spec.annotations and "" in spec.annotations:
        problems.append(Problem('$.annotations[""]', "annotation keys must not be empty"))
    problems.extend(_check_process(spec, linux))
    problems.extend(_check_hooks(spec))
    problems.extend(_check_mounts(spec))
    if linux:
        problems.extend(_check_uts(spec))
    problems.extend(_check_namespaces(spec))
    problems.extend(_check_devices(spec))
    problems.extend(_check_resources(spec))
    problems.extend(_check_seccomp(spec.linux.seccomp if spec.linux else None))
    problems.extend(_check_linux_misc(spec))
    problems.extend(_check_other_platforms(spec))
    return problems


def enum_problems(spec: Spec) -> list[Problem]:
    """The problems of ``validate`` that are unknown values of an enumerated field."""
    return [p for p in validate(spec) if p.message.startswith(UNKNOWN)]


def check(spec: Spec, *, source: str | None = None) -> Spec:
    """Return ``spec`` if ``validate`` finds nothing, else raise ``SpecError`` listing problems."""
    problems = validate(spec)
    if problems:
        first, rest = problems[0], problems[1:]
        more = "".join(f"; {p}" for p in rest)
        raise SpecError(first.path, first.message + more, source)
    return spec


def validate_state(state: State) -> list[Problem]:
    """Problems with a ``state.json`` document (state-schema.json plus ``ociVersion`` SemVer)."""
    problems, well_typed = _structural(state)
    if not well_typed:
        return problems
    problems.extend(_enum(state.status, _STATUSES, "$.status", "status"))
    if state.pid is not None and state.pid < 0:
        problems.append(Problem("$.pid", f"pid {state.pid} must be >= 0"))
    if not _SEMVER.match(state.oci_version):
        problems.append(Problem("$.ociVersion", f"{state.oci_version!r} is not SemVer 2.0"))
    return problems


def validate_features(features: Features) -> list[Problem]:
    """Problems with a ``features.json`` document (features-schema.json plus SemVer versions)."""
    problems, well_typed = _structural(features)
    if not well_typed:
        return problems
    for key, version in (("ociVersionMin", features.oci_version_min),
                         ("ociVersionMax", features.oci_version_max)):
        if not _SEMVER.match(version):
            problems.append(Problem(f"$.{key}", f"{version!r} is not SemVer 2.0"))
    lx = features.linux
    if lx is None:
        return problems
    problems.extend(_enums(lx.namespaces, NAMESPACE_TYPES, "$.linux.namespaces",
                           "namespace type"))
    for i, cap in enumerate(lx.capabilities or ()):
        problems.extend(_pattern(cap, _CAP_RE, f"$.linux.capabilities[{i}]", "capability"))
    sc = lx.seccomp
    if sc is not None:
        p = "$.linux.seccomp"
        problems.extend(_enums(sc.actions, _SECCOMP_ACTIONS, f"{p}.actions", "seccomp action"))
        problems.extend(_enums(sc.operators, _SECCOMP_OPS, f"{p}.operators", "seccomp operator"))
        problems.extend(_enums(sc.archs, _SECCOMP_ARCHES, f"{p}.archs", "seccomp arch"))
        problems.extend(_enums(sc.known_flags, _SECCOMP_FLAGS, f"{p}.knownFlags", "seccomp flag"))
        problems.extend(_enums(sc.supported_flags, _SECCOMP_FLAGS, f"{p}.supportedFlags",
                               "seccomp flag"))
    return problems
