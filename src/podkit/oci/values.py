"""Known values of the runtime-spec (1.3 schema and text, Linux uapi) and the version order.

Tables only, plus SemVer parsing: ``validate``, ``minimum_version`` and the option builders read
them; nothing here knows the models.
"""

from __future__ import annotations

import re

INT_RANGES: dict[str, tuple[int, int]] = {
    "int": (-(2**63), 2**63 - 1),
    "int32": (-(2**31), 2**31 - 1),
    "int64": (-(2**63), 2**63 - 1),
    "uint": (0, 2**64 - 1),
    "uint16": (0, 2**16 - 1),
    "uint32": (0, 2**32 - 1),
    "uint64": (0, 2**64 - 1),
}
"""Integer kinds of the models (the Go types of specs-go) and their inclusive ranges."""

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
