"""Validation of OCI documents: schema rules, semantic rules, version and runtime-feature checks.

``validate(spec)`` covers what the official JSON schema (draft-04, runtime-spec 1.3) checks for a
Linux ``config.json`` (types, integer ranges, REQUIRED keys, enums, patterns, minimums) plus the
rules the spec text states but the schema cannot (absolute paths, duplicate namespaces and rlimits,
known capability and rlimit names, device numbers, user-namespace mappings, ...). It never raises:
it returns a list of ``Problem`` (JSON path + message), empty when the spec is valid.

The loader (``Spec.from_json`` & co.) rejects wrong JSON types, out-of-range integers and (unless
``strict=False``, which keeps documents from newer spec versions lossless) unknown enum values,
using ``enum_problems`` from here. Everything here is a pure function of its arguments.
"""

from __future__ import annotations

import re
import types
import typing
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import attrs

from podkit.oci._fields import INT_RANGES
from podkit.oci.codec import SpecError, key_path, wire_fields
from podkit.oci.features import Features
from podkit.oci.spec import (
    Hook,
    LinuxSeccomp,
    Mount,
    Spec,
    State,
)

__all__ = [
    "CAPABILITIES",
    "MOUNT_OPTIONS",
    "NAMESPACE_TYPES",
    "RLIMITS",
    "SPEC_VERSIONS",
    "Problem",
    "check",
    "minimum_version",
    "unknown_keys",
    "unsupported_fields",
    "validate",
    "validate_features",
    "validate_state",
    "version_uses",
]


@attrs.frozen
class Problem:
    """One thing wrong with a document: where (a JSON path such as ``$.linux.namespaces[2].type``)
    and what."""

    path: str
    message: str

    def __str__(self) -> str:
        return f"{self.path}: {self.message}"


# --- known values (runtime-spec 1.3 schema and text, Linux uapi) ----------------------------

SPEC_VERSIONS = ("1.0.0", "1.0.1", "1.0.2", "1.1.0", "1.2.0", "1.2.1", "1.3.0")
"""Released runtime-spec versions, oldest first."""

NAMESPACE_TYPES = frozenset({"pid", "network", "mount", "ipc", "uts", "user", "cgroup", "time"})
"""``linux.namespaces[].type`` values."""

CAPABILITIES = (
    "CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_DAC_READ_SEARCH", "CAP_FOWNER", "CAP_FSETID",
    "CAP_KILL", "CAP_SETGID", "CAP_SETUID", "CAP_SETPCAP", "CAP_LINUX_IMMUTABLE",
    "CAP_NET_BIND_SERVICE", "CAP_NET_BROADCAST", "CAP_NET_ADMIN", "CAP_NET_RAW", "CAP_IPC_LOCK",
    "CAP_IPC_OWNER", "CAP_SYS_MODULE", "CAP_SYS_RAWIO", "CAP_SYS_CHROOT", "CAP_SYS_PTRACE",
    "CAP_SYS_PACCT", "CAP_SYS_ADMIN", "CAP_SYS_BOOT", "CAP_SYS_NICE", "CAP_SYS_RESOURCE",
    "CAP_SYS_TIME", "CAP_SYS_TTY_CONFIG", "CAP_MKNOD", "CAP_LEASE", "CAP_AUDIT_WRITE",
    "CAP_AUDIT_CONTROL", "CAP_SETFCAP", "CAP_MAC_OVERRIDE", "CAP_MAC_ADMIN", "CAP_SYSLOG",
    "CAP_WAKE_ALARM", "CAP_BLOCK_SUSPEND", "CAP_AUDIT_READ", "CAP_PERFMON", "CAP_BPF",
    "CAP_CHECKPOINT_RESTORE",
)  # fmt: skip
"""Every Linux capability, in kernel number order (0..40)."""

RLIMITS = frozenset({
    "RLIMIT_AS", "RLIMIT_CORE", "RLIMIT_CPU", "RLIMIT_DATA", "RLIMIT_FSIZE", "RLIMIT_LOCKS",
    "RLIMIT_MEMLOCK", "RLIMIT_MSGQUEUE", "RLIMIT_NICE", "RLIMIT_NOFILE", "RLIMIT_NPROC",
    "RLIMIT_RSS", "RLIMIT_RTPRIO", "RLIMIT_RTTIME", "RLIMIT_SIGPENDING", "RLIMIT_STACK",
})  # fmt: skip
"""Linux resource limit names accepted in ``process.rlimits[].type``."""

MOUNT_OPTIONS = frozenset({
    "acl", "async", "atime", "bind", "defaults", "dev", "diratime", "dirsync", "exec", "idmap",
    "iversion", "lazytime", "loud", "mand", "noacl", "noatime", "nodev", "nodiratime", "noexec",
    "noiversion", "nolazytime", "nomand", "norelatime", "nostrictatime", "nosuid", "nosymfollow",
    "private", "ratime", "rbind", "rdev", "rdiratime", "relatime", "remount", "rexec", "ridmap",
    "rnoatime", "rnodev", "rnodiratime", "rnoexec", "rnorelatime", "rnostrictatime", "rnosuid",
    "rnosymfollow", "ro", "rprivate", "rrelatime", "rro", "rrw", "rshared", "rslave",
    "rstrictatime", "rsuid", "rsymfollow", "runbindable", "rw", "shared", "silent", "slave",
    "strictatime", "suid", "symfollow", "sync", "tmpcopyup", "unbindable",
})  # fmt: skip
"""Generic (not filesystem-specific) mount options the spec defines; others are fs data."""

_SECCOMP_ACTIONS = frozenset({
    "SCMP_ACT_KILL", "SCMP_ACT_KILL_PROCESS", "SCMP_ACT_KILL_THREAD", "SCMP_ACT_TRAP",
    "SCMP_ACT_ERRNO", "SCMP_ACT_TRACE", "SCMP_ACT_ALLOW", "SCMP_ACT_LOG", "SCMP_ACT_NOTIFY",
})  # fmt: skip
_SECCOMP_ARCHES = frozenset({
    "SCMP_ARCH_X86", "SCMP_ARCH_X86_64", "SCMP_ARCH_X32", "SCMP_ARCH_ARM", "SCMP_ARCH_AARCH64",
    "SCMP_ARCH_LOONGARCH64", "SCMP_ARCH_M68K", "SCMP_ARCH_MIPS", "SCMP_ARCH_MIPS64",
    "SCMP_ARCH_MIPS64N32", "SCMP_ARCH_MIPSEL", "SCMP_ARCH_MIPSEL64", "SCMP_ARCH_MIPSEL64N32",
    "SCMP_ARCH_PPC", "SCMP_ARCH_PPC64", "SCMP_ARCH_PPC64LE", "SCMP_ARCH_S390", "SCMP_ARCH_S390X",
    "SCMP_ARCH_SH", "SCMP_ARCH_SHEB", "SCMP_ARCH_PARISC", "SCMP_ARCH_PARISC64",
    "SCMP_ARCH_RISCV64",
})  # fmt: skip
_SECCOMP_FLAGS = frozenset({
    "SECCOMP_FILTER_FLAG_TSYNC", "SECCOMP_FILTER_FLAG_LOG", "SECCOMP_FILTER_FLAG_SPEC_ALLOW",
    "SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV",
})  # fmt: skip
_SECCOMP_OPS = frozenset({
    "SCMP_CMP_NE", "SCMP_CMP_LT", "SCMP_CMP_LE", "SCMP_CMP_EQ", "SCMP_CMP_GE", "SCMP_CMP_GT",
    "SCMP_CMP_MASKED_EQ",
})  # fmt: skip
_SCHED_POLICIES = frozenset({
    "SCHED_OTHER", "SCHED_FIFO", "SCHED_RR", "SCHED_BATCH", "SCHED_ISO", "SCHED_IDLE",
    "SCHED_DEADLINE",
})  # fmt: skip
_SCHED_FLAGS = frozenset({
    "SCHED_FLAG_RESET_ON_FORK", "SCHED_FLAG_RECLAIM", "SCHED_FLAG_DL_OVERRUN",
    "SCHED_FLAG_KEEP_POLICY", "SCHED_FLAG_KEEP_PARAMS", "SCHED_FLAG_UTIL_CLAMP_MIN",
    "SCHED_FLAG_UTIL_CLAMP_MAX",
})  # fmt: skip
_IOPRIO_CLASSES = frozenset({"IOPRIO_CLASS_RT", "IOPRIO_CLASS_BE", "IOPRIO_CLASS_IDLE"})
_MPOL_MODES = frozenset({
    "MPOL_DEFAULT", "MPOL_BIND", "MPOL_INTERLEAVE", "MPOL_WEIGHTED_INTERLEAVE", "MPOL_PREFERRED",
    "MPOL_PREFERRED_MANY", "MPOL_LOCAL",
})  # fmt: skip
_MPOL_FLAGS = frozenset({"MPOL_F_NUMA_BALANCING", "MPOL_F_RELATIVE_NODES", "MPOL_F_STATIC_NODES"})
_PROPAGATIONS = frozenset({"private", "shared", "slave", "unbindable"})
_PERSONALITY_DOMAINS = frozenset({"LINUX", "LINUX32"})
_TIME_CLOCKS = frozenset({"boottime", "monotonic"})
_STATUSES = frozenset({"creating", "created", "running", "stopped"})
_HOOK_KINDS = (
    ("prestart", "prestart"),
    ("create_runtime", "createRuntime"),
    ("create_container", "createContainer"),
    ("start_container", "startContainer"),
    ("poststart", "poststart"),
    ("poststop", "poststop"),
)
_CAP_SETS = ("bounding", "effective", "inheritable", "permitted", "ambient")
# Platforms other than Linux whose objects podkit keeps verbatim (in ``Spec.extra``).
_OTHER_PLATFORMS = ("windows", "solaris", "zos", "freebsd")
_FREEBSD_SHARING = {
    "host": ("new", "inherit"),
    "vnet": ("new", "inherit"),
    "ip4": ("disable", "new", "inherit"),
    "ip6": ("disable", "new", "inherit"),
    "sysvmsg": ("disable", "new", "inherit"),
    "sysvsem": ("disable", "new", "inherit"),
    "sysvshm": ("disable", "new", "inherit"),
}

_SEMVER = re.compile(
    r"(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)"
    r"(?:-((?:0|[1-9][0-9]*|[0-9]*[a-zA-Z-][0-9a-zA-Z-]*)"
    r"(?:\.(?:0|[1-9][0-9]*|[0-9]*[a-zA-Z-][0-9a-zA-Z-]*))*))?"
    r"(?:\+([0-9a-zA-Z-]+(?:\.[0-9a-zA-Z-]+)*))?\Z"
)
_RLIMIT_RE = re.compile(r"RLIMIT_[A-Z]+\Z")
_CAP_RE = re.compile(r"CAP_[A-Z_]+\Z")
_PAGE_SIZE_RE = re.compile(r"[1-9][0-9]*[KMG]B\Z")
_CPU_LIST_RE = re.compile(r"[0-9, -]*\Z")
_MEM_BW_RE = re.compile(r"MB:[^\n]*\Z")
_DEVICE_TYPE_RE = re.compile(r"[cbup]\Z")


# --- versions --------------------------------------------------------------------------------


def _semver(version: str) -> tuple[tuple[int, int, int], bool] | None:
    """(major, minor, patch), is_release; None when ``version`` is not SemVer 2.0."""
    m = _SEMVER.match(version)
    if m is None:
        return None
    return (int(m[1]), int(m[2]), int(m[3])), m[4] is None


def _at_least(version: str, minimum: str) -> bool:
    """``version >= minimum`` by SemVer precedence (pre-releases sort before their release)."""
    v, w = _semver(version), _semver(minimum)
    if v is None or w is None:
        return False
    return (v[0], v[1]) >= (w[0], w[1])


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


_UNKNOWN = "unknown "


def _enum(value: str | None, known: Iterable[str], path: str, what: str) -> Iterator[Problem]:
    if value is not None and value not in known:
        yield Problem(path, f"{_UNKNOWN}{what} {value!r}")


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
    return [p for p in validate(spec) if p.message.startswith(_UNKNOWN)]


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


# --- minimum version ---------------------------------------------------------------------------


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


# --- runtime features --------------------------------------------------------------------------


def _core(version: str) -> tuple[int, int, int]:
    parsed = _semver(version)
    return parsed[0] if parsed else (0, 0, 0)


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
