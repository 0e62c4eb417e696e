"""Seccomp profiles: podkit's default profile, Localhost profile files, and the spec options.

``default_profile(spec)`` is podkit's answer to containerd's ``contrib/seccomp`` default profile
(and moby's ``default.json``): deny with ``EPERM`` by default, allow the syscalls ordinary programs
use, and allow the privileged ones only when the process keeps the capability that the kernel
would check anyway (``mount`` with ``CAP_SYS_ADMIN``, ``ptrace`` helpers with ``CAP_SYS_PTRACE``,
...). Without ``CAP_SYS_ADMIN``, ``clone`` may not create namespaces and ``clone3`` (whose flags
live in memory a filter cannot read) fails with ``ENOSYS``, so libcs fall back to ``clone``.

``load_profile(path)`` reads a profile file in the OCI ``linux.seccomp`` JSON form (what
containerd's Localhost profiles are) and checks it like ``podkit.oci.validate`` checks a spec;
errors name the file and the JSON path::

    spec = generate(default_spec("web"), with_capabilities([...]), with_default_seccomp())
    spec = generate(default_spec("web"), with_seccomp_profile("/etc/podkit/seccomp/web.json"))
"""

from __future__ import annotations

import errno
import os
import platform
import re
import sys
from pathlib import Path

from podkit.errors import NotFoundError
from podkit.oci import codec
from podkit.oci.codec import SpecError
from podkit.oci.opts import SpecOpt, SpecOptError
from podkit.oci.spec import (
    Linux,
    LinuxSeccomp,
    LinuxSeccompArg,
    LinuxSyscall,
    Root,
    Spec,
)
from podkit.oci.validate import Problem, unknown_keys, validate

__all__ = [
    "SeccompProfileError",
    "SeccompProfileNotFoundError",
    "default_profile",
    "load_profile",
    "validate_profile",
    "with_default_seccomp",
    "with_seccomp_profile",
]

# CLONE_NEWNS | CLONE_NEWCGROUP | CLONE_NEWUTS | CLONE_NEWIPC | CLONE_NEWUSER | CLONE_NEWPID |
# CLONE_NEWNET: the namespace bits of clone(2)'s flags word.
_CLONE_NAMESPACE_FLAGS = (
    0x00020000 | 0x02000000 | 0x04000000 | 0x08000000 | 0x10000000 | 0x20000000 | 0x40000000
)

# personality(2) values a container may switch to: PER_LINUX, PER_LINUX32, UNAME26,
# UNAME26 | PER_LINUX32, and 0xffffffff (query the current persona).
_PERSONALITIES = (0x0, 0x8, 0x20000, 0x20008, 0xFFFFFFFF)

# Syscalls every process may make (names on every architecture; libseccomp resolves each name
# for each listed architecture, runtimes skip names an architecture lacks).
_ALLOWED_NAMES = """
    _llseek _newselect accept accept4 access adjtimex alarm bind brk capget capset chdir chmod
    chown chown32 clock_adjtime clock_adjtime64 clock_getres clock_getres_time64 clock_gettime
    clock_gettime64 clock_nanosleep clock_nanosleep_time64 close close_range connect
    copy_file_range creat dup dup2 dup3 epoll_create epoll_create1 epoll_ctl epoll_ctl_old
    epoll_pwait epoll_pwait2 epoll_wait epoll_wait_old eventfd eventfd2 execve execveat exit
    exit_group faccessat faccessat2 fadvise64 fadvise64_64 fallocate fanotify_mark fchdir fchmod
    fchmodat fchown fchown32 fchownat fcntl fcntl64 fdatasync fgetxattr flistxattr flock fork
    fremovexattr fsetxattr fstat fstat64 fstatat64 fstatfs fstatfs64 fsync ftruncate ftruncate64
    futex futex_time64 futex_waitv futimesat get_robust_list get_thread_area getcpu getcwd
    getdents getdents64 getegid getegid32 geteuid geteuid32 getgid getgid32 getgroups getgroups32
    getitimer getpeername getpgid getpgrp getpid getppid getpriority getrandom getresgid
    getresgid32 getresuid getresuid32 getrlimit getrusage getsid getsockname getsockopt gettid
    gettimeofday getuid getuid32 getxattr inotify_add_watch inotify_init inotify_init1
    inotify_rm_watch io_cancel io_destroy io_getevents io_pgetevents io_pgetevents_time64
    io_setup io_submit io_uring_enter io_uring_register io_uring_setup ioctl ioprio_get
    ioprio_set ipc kill landlock_add_rule landlock_create_ruleset landlock_restrict_self lchown
    lchown32 lgetxattr link linkat listen listxattr llistxattr lremovexattr lseek lsetxattr
    lstat lstat64 madvise membarrier memfd_create memfd_secret mincore mkdir mkdirat mknod
    mknodat mlock mlock2 mlockall mmap mmap2 mprotect mq_getsetattr mq_notify mq_open
    mq_timedreceive mq_timedreceive_time64 mq_timedsend mq_timedsend_time64 mq_unlink mremap
    msgctl msgget msgrcv msgsnd msync munlock munlockall munmap nanosleep newfstatat open
    openat openat2 pause pidfd_open pidfd_send_signal pipe pipe2 poll ppoll ppoll_time64 prctl
    pread64 preadv preadv2 prlimit64 process_mrelease pselect6 pselect6_time64 pwrite64 pwritev
    pwritev2 read readahead readlink readlinkat readv recv recvfrom recvmmsg recvmmsg_time64
    recvmsg remap_file_pages removexattr rename renameat renameat2 restart_syscall rmdir rseq
    rt_sigaction rt_sigpending rt_sigprocmask rt_sigqueueinfo rt_sigreturn rt_sigsuspend
    rt_sigtimedwait rt_sigtimedwait_time64 rt_tgsigqueueinfo sched_get_priority_max
    sched_get_priority_min sched_getaffinity sched_getattr sched_getparam sched_getscheduler
    sched_rr_get_interval sched_rr_get_interval_time64 sched_setaffinity sched_setattr
    sched_setparam sched_setscheduler sched_yield seccomp select semctl semget semop semtimedop
    semtimedop_time64 send sendfile sendfile64 sendmmsg sendmsg sendto set_robust_list
    set_thread_area set_tid_address setfsgid setfsgid32 setfsuid setfsuid32 setgid setgid32
    setgroups setgroups32 setitimer setpgid setpriority setregid setregid32 setresgid
    setresgid32 setresuid setresuid32 setreuid setreuid32 setrlimit setsid setsockopt setuid
    setuid32 setxattr shmat shmctl shmdt shmget shutdown sigaltstack signalfd signalfd4
    sigprocmask sigreturn socket socketcall socketpair splice stat stat64 statfs statfs64 statx
    symlink symlinkat sync sync_file_range syncfs sysinfo tee tgkill time timer_create
    timer_delete timer_getoverrun timer_gettime timer_gettime64 timer_settime timer_settime64
    timerfd_create timerfd_gettime timerfd_gettime64 timerfd_settime timerfd_settime64 times
    tkill truncate truncate64 ugetrlimit umask uname unlink unlinkat utime utimensat
    utimensat_time64 utimes vfork vmsplice wait4 waitid waitpid write writev
"""
_ALLOWED = tuple(_ALLOWED_NAMES.split())

# Since Linux 4.8 seccomp runs again after a ptrace stop, so a tracer cannot use ptrace to get
# around the filter: from then on tracing one's own children needs no capability.
_PTRACE_SAFE_KERNEL = (4, 8)
_PTRACE = ("process_vm_readv", "process_vm_writev", "ptrace")

# (capability, syscalls it unlocks), in the order the rules are written.
_BY_CAPABILITY: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("CAP_DAC_READ_SEARCH", ("open_by_handle_at",)),
    ("CAP_SYS_ADMIN", (
        "bpf", "clone", "clone3", "fanotify_init", "fsconfig", "fsmount", "fsopen", "fspick",
        "lookup_dcookie", "mount", "mount_setattr", "move_mount", "name_to_handle_at",
        "open_tree", "perf_event_open", "quotactl", "quotactl_fd", "setdomainname",
        "sethostname", "setns", "syslog", "umount", "umount2", "unshare",
    )),
    ("CAP_SYS_BOOT", ("reboot",)),
    ("CAP_SYS_CHROOT", ("chroot",)),
    ("CAP_SYS_MODULE", ("delete_module", "finit_module", "init_module")),
    ("CAP_SYS_PACCT", ("acct",)),
    ("CAP_SYS_PTRACE", (
        "kcmp", "pidfd_getfd", "process_madvise", "process_vm_readv", "process_vm_writev",
        "ptrace",
    )),
    ("CAP_SYS_RAWIO", ("ioperm", "iopl")),
    ("CAP_SYS_TIME", ("clock_settime", "clock_settime64", "settimeofday", "stime")),
    ("CAP_SYS_TTY_CONFIG", ("vhangup",)),
    ("CAP_SYS_NICE", ("get_mempolicy", "mbind", "set_mempolicy", "set_mempolicy_home_node")),
    ("CAP_SYSLOG", ("syslog",)),
    ("CAP_BPF", ("bpf",)),
    ("CAP_PERFMON", ("perf_event_open",)),
)

# platform.machine() spellings -> architecture family.
_FAMILY = {
    "x86_64": "amd64", "amd64": "amd64",
    "i386": "386", "i486": "386", "i586": "386", "i686": "386", "x86": "386",
    "aarch64": "arm64", "arm64": "arm64",
    "armv6l": "arm", "armv7l": "arm", "armv8l": "arm", "arm": "arm",
    "s390x": "s390x",
    "ppc64le": "ppc64le", "ppc64": "ppc64",
    "mips64": "mips64",
    "riscv64": "riscv64",
    "loongarch64": "loong64",
}  # fmt: skip

# family -> (seccomp architectures the filter covers, extra syscalls that family needs).
_ARCH: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "amd64": (("SCMP_ARCH_X86_64", "SCMP_ARCH_X86", "SCMP_ARCH_X32"),
              ("arch_prctl", "modify_ldt")),
    "386": (("SCMP_ARCH_X86",), ("modify_ldt",)),
    "arm64": (("SCMP_ARCH_ARM", "SCMP_ARCH_AARCH64"),
              ("arm_fadvise64_64", "arm_sync_file_range", "breakpoint", "cacheflush", "set_tls",
               "sync_file_range2")),
    "arm": (("SCMP_ARCH_ARM",),
            ("arm_fadvise64_64", "arm_sync_file_range", "breakpoint", "cacheflush", "set_tls",
             "sync_file_range2")),
    "s390x": (("SCMP_ARCH_S390", "SCMP_ARCH_S390X"),
              ("s390_pci_mmio_read", "s390_pci_mmio_write", "s390_runtime_instr")),
    "ppc64le": (("SCMP_ARCH_PPC64LE",), ("swapcontext", "sync_file_range2")),
    "ppc64": (("SCMP_ARCH_PPC", "SCMP_ARCH_PPC64"), ("swapcontext", "sync_file_range2")),
    "mips64": (("SCMP_ARCH_MIPS", "SCMP_ARCH_MIPS64", "SCMP_ARCH_MIPS64N32"), ()),
    "mips64el": (("SCMP_ARCH_MIPSEL", "SCMP_ARCH_MIPSEL64", "SCMP_ARCH_MIPSEL64N32"), ()),
    "riscv64": (("SCMP_ARCH_RISCV64",), ("riscv_flush_icache",)),
    "loong64": (("SCMP_ARCH_LOONGARCH64",), ()),
}

_RELEASE = re.compile(r"(\d+)\.(\d+)")


class SeccompProfileError(SpecError, SpecOptError):
    """A seccomp profile that cannot be used: names the file (when read from one), the JSON
    path and what is wrong."""


class SeccompProfileNotFoundError(SeccompProfileError, NotFoundError):
    """The seccomp profile file does not exist."""


def _family(machine: str) -> str:
    family = _FAMILY.get(machine.lower(), machine.lower())
    if family == "mips64" and sys.byteorder == "little":
        return "mips64el"
    return family


def _kernel_at_least(release: str, wanted: tuple[int, int]) -> bool:
    m = _RELEASE.match(release)
    return m is not None and (int(m.group(1)), int(m.group(2))) >= wanted


def _allow(names: list[str] | tuple[str, ...]) -> LinuxSyscall:
    return LinuxSyscall(names=list(names), action="SCMP_ACT_ALLOW")


def _bounding(spec: Spec | None) -> list[str]:
    caps = spec.process.capabilities if spec is not None and spec.process is not None else None
    return list((caps.bounding if caps is not None else None) or [])


def default_profile(
    spec: Spec | None = None, *, machine: str | None = None, kernel: str | None = None
) -> LinuxSeccomp:
    """podkit's default seccomp profile for the process of ``spec`` (containerd's RuntimeDefault).

    Denies with ``EPERM`` what it does not allow; covers the host's architectures
    (``machine``: default ``platform.machine()``); syscalls tied to a capability are allowed
    only when ``spec.process.capabilities.bounding`` holds it (none when ``spec`` is None).
    ``kernel`` (default ``platform.release()``) decides whether ``ptrace`` is safe without
    ``CAP_SYS_PTRACE`` (Linux 4.8 and later). Each call returns a new profile.
    """
    family = _family(machine if machine is not None else platform.machine())
    arches, arch_syscalls = _ARCH.get(family, ((), ()))
    caps = set(_bounding(spec))
    allowed = [*_ALLOWED, *arch_syscalls]
    release = kernel if kernel is not None else platform.release()
    if _kernel_at_least(release, _PTRACE_SAFE_KERNEL):
        allowed += _PTRACE
    seen = set(allowed)
    rules = [_allow(allowed)]
    for cap, names in _BY_CAPABILITY:
        if cap in caps:
            new = [n for n in names if n not in seen]
            seen.update(new)
            if new:
                rules.append(_allow(new))
    for persona in _PERSONALITIES:
        rules.append(LinuxSyscall(
            names=["personality"], action="SCMP_ACT_ALLOW",
            args=[LinuxSeccompArg(index=0, value=persona, op="SCMP_CMP_EQ")],
        ))
    if "CAP_SYS_ADMIN" not in caps:
        # s390 passes the flags as clone's second argument.
        flags_index = 1 if family == "s390x" else 0
        rules.append(LinuxSyscall(
            names=["clone"], action="SCMP_ACT_ALLOW",
            args=[LinuxSeccompArg(index=flags_index, value=_CLONE_NAMESPACE_FLAGS, value_two=0,
                                  op="SCMP_CMP_MASKED_EQ")],
        ))
        rules.append(
            LinuxSyscall(names=["clone3"], action="SCMP_ACT_ERRNO", errno_ret=errno.ENOSYS)
        )
    return LinuxSeccomp(
        default_action="SCMP_ACT_ERRNO",
        default_errno_ret=errno.EPERM,
        architectures=list(arches) or None,
        syscalls=rules,
    )


def _unknown_keys(profile: LinuxSeccomp) -> list[Problem]:
    """Keys the OCI form does not have, in the profile, its rules and their args."""
    why = "not in the OCI linux.seccomp form"
    problems = unknown_keys(profile, "$", why)
    for i, rule in enumerate(profile.syscalls or ()):
        problems += unknown_keys(rule, f"$.syscalls[{i}]", why)
        for j, arg in enumerate(rule.args or ()):
            problems += unknown_keys(arg, f"$.syscalls[{i}].args[{j}]", why)
    return problems


def validate_profile(profile: LinuxSeccomp) -> list[Problem]:
    """Every problem with ``profile`` as an OCI ``linux.seccomp`` object; [] when valid.

    The checks of ``podkit.oci.validate`` (actions, architectures, flags, operators, a name in
    every rule, ``listenerPath`` for ``SCMP_ACT_NOTIFY``, no explicit nulls) plus unknown keys,
    which runtimes would silently ignore (a Docker-format profile's ``archMap``,
    ``includes``/``excludes``). Paths are relative to the profile (``$.syscalls[3].action``).
    """
    wrapper = Spec(oci_version="1.2.0", root=Root(path="rootfs"), linux=Linux(seccomp=profile))
    prefix = "$.linux.seccomp"
    problems = [
        Problem("$" + p.path[len(prefix):], p.message)
        for p in validate(wrapper) if p.path.startswith(prefix)
    ]
    return problems + _unknown_keys(profile)


def _raise_problems(problems: list[Problem], source: str | None) -> None:
    if problems:
        first, rest = problems[0], problems[1:]
        message = first.message + "".join(f"; {p.path}: {p.message}" for p in rest)
        raise SeccompProfileError(first.path, message, source)


def load_profile(path: str | os.PathLike[str]) -> LinuxSeccomp:
    """Read a seccomp profile file in the OCI ``linux.seccomp`` JSON form (a Localhost profile).

    Raises ``SeccompProfileNotFoundError`` when the file does not exist and
    ``SeccompProfileError`` (an ``InvalidArgumentError``) when it cannot be read, is not JSON,
    has wrong types or fails ``validate_profile``; the message names the file and JSON path.
    """
    if not isinstance(path, (str, os.PathLike)):
        raise SeccompProfileError("$", f"invalid profile path {path!r}: expected a path")
    source = os.fspath(path)
    if not source or "\0" in str(source):
        raise SeccompProfileError("$", f"invalid profile path {source!r}")
    p = Path(source)
    try:
        raw = p.read_bytes()
    except FileNotFoundError:
        raise SeccompProfileNotFoundError("$", "no such seccomp profile file", str(p)) from None
    except OSError as e:
        raise SeccompProfileError("$", f"cannot read: {e.strerror}", str(p)) from None
    try:
        profile = codec.loads(raw, LinuxSeccomp, source=str(p))
    except SpecError as e:
        raise SeccompProfileError(e.path, e.message, str(p)) from None
    _raise_problems(validate_profile(profile), str(p))
    return profile


def _set_seccomp(spec: Spec, profile: LinuxSeccomp) -> None:
    if spec.linux is None:
        spec.linux = Linux()
    spec.linux.seccomp = profile


def with_default_seccomp() -> SpecOpt:
    """Set podkit's default profile, computed from the spec's capabilities when applied.

    Apply it after the options that set capabilities, so the capability rules see the final set.
    """

    def opt(s: Spec) -> None:
        _set_seccomp(s, default_profile(s))

    return opt


def with_seccomp_profile(profile: LinuxSeccomp | str | os.PathLike[str]) -> SpecOpt:
    """Set ``linux.seccomp`` to ``profile``, or to the profile file at that path.

    The file is read and the profile checked when this is called (``SeccompProfileError``);
    each spec gets its own copy.
    """
    if isinstance(profile, LinuxSeccomp):
        _raise_problems(validate_profile(profile), None)
        loaded = codec.deep_copy(profile)
    elif isinstance(profile, (str, os.PathLike)):
        loaded = load_profile(profile)
    else:
        raise SpecOptError(
            f"invalid seccomp profile {profile!r}: expected an oci.LinuxSeccomp or a file path"
        )

    def opt(s: Spec) -> None:
        _set_seccomp(s, codec.deep_copy(loaded))

    return opt
