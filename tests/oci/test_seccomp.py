"""Unit tests for podkit.oci.seccomp: the default profile, Localhost profile files, options."""

from __future__ import annotations

import errno
import json
import platform
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from podkit import errors, oci
from podkit.oci import codec, seccomp

NS_FLAGS = 0x7E020000  # CLONE_NEWNS|NEWCGROUP|NEWUTS|NEWIPC|NEWUSER|NEWPID|NEWNET


def with_caps(*caps: str) -> oci.Spec:
    return oci.generate(oci.default_spec("pk-seccomp"), oci.with_capabilities(list(caps)))


def plain_names(profile: oci.LinuxSeccomp) -> list[str]:
    """Every name of every unconditional (no argument filter) ALLOW rule."""
    return [
        n for r in profile.syscalls or [] if r.action == "SCMP_ACT_ALLOW" and not r.args
        for n in r.names
    ]


def rules_for(profile: oci.LinuxSeccomp, name: str) -> list[oci.LinuxSyscall]:
    return [r for r in profile.syscalls or [] if name in r.names]


# --- default_profile ---------------------------------------------------------------------


def test_default_profile_denies_with_eperm_for_the_host_architectures() -> None:
    p = oci.default_profile(oci.default_spec("pk-seccomp"))
    assert p.default_action == "SCMP_ACT_ERRNO"
    assert p.default_errno_ret == errno.EPERM == 1
    if platform.machine() == "x86_64":
        assert p.architectures == ["SCMP_ARCH_X86_64", "SCMP_ARCH_X86", "SCMP_ARCH_X32"]
    names = plain_names(p)
    for common in ("read", "write", "openat", "execve", "mmap", "exit_group", "wait4",
                   "rt_sigaction", "socket", "mkdirat", "getdents64", "futex"):
        assert common in names


@pytest.mark.parametrize(
    ("machine", "arches", "extra"),
    [
        ("x86_64", ["SCMP_ARCH_X86_64", "SCMP_ARCH_X86", "SCMP_ARCH_X32"], "arch_prctl"),
        ("aarch64", ["SCMP_ARCH_ARM", "SCMP_ARCH_AARCH64"], "set_tls"),
        ("s390x", ["SCMP_ARCH_S390", "SCMP_ARCH_S390X"], "s390_runtime_instr"),
        ("riscv64", ["SCMP_ARCH_RISCV64"], "riscv_flush_icache"),
        ("ppc64le", ["SCMP_ARCH_PPC64LE"], "swapcontext"),
    ],
)
def test_architectures_and_arch_specific_syscalls(machine: str, arches: list[str],
                                                  extra: str) -> None:
    p = oci.default_profile(machine=machine)
    assert p.architectures == arches
    assert extra in plain_names(p)
    assert "arch_prctl" not in plain_names(p) or machine == "x86_64"


def test_unknown_machine_filters_the_native_architecture_only() -> None:
    p = oci.default_profile(machine="vax")
    assert p.architectures is None
    assert "read" in plain_names(p)


@pytest.mark.parametrize("caps", [(), tuple(oci.DEFAULT_UNIX_CAPABILITIES),
                                  tuple(oci.KNOWN_CAPABILITIES)])
def test_no_syscall_name_is_allowed_twice(caps: tuple[str, ...]) -> None:
    p = oci.default_profile(with_caps(*caps))
    dupes = [n for n, k in Counter(plain_names(p)).items() if k > 1]
    assert dupes == []
    # the argument-filtered rules never repeat a name that is allowed outright
    filtered = {n for r in p.syscalls or [] if r.args for n in r.names}
    assert not filtered & set(plain_names(p))


@pytest.mark.parametrize(
    ("cap", "unlocked"),
    [
        ("CAP_SYS_ADMIN", ["mount", "umount2", "unshare", "setns", "sethostname", "fsopen"]),
        ("CAP_SYS_PTRACE", ["kcmp", "pidfd_getfd", "process_madvise"]),
        ("CAP_SYS_MODULE", ["init_module", "finit_module", "delete_module"]),
        ("CAP_SYS_BOOT", ["reboot"]),
        ("CAP_SYS_TIME", ["settimeofday", "clock_settime"]),
        ("CAP_SYS_CHROOT", ["chroot"]),
        ("CAP_SYS_PACCT", ["acct"]),
        ("CAP_SYS_RAWIO", ["iopl", "ioperm"]),
        ("CAP_SYS_NICE", ["mbind", "set_mempolicy"]),
        ("CAP_SYS_TTY_CONFIG", ["vhangup"]),
        ("CAP_DAC_READ_SEARCH", ["open_by_handle_at"]),
        ("CAP_SYSLOG", ["syslog"]),
        ("CAP_BPF", ["bpf"]),
        ("CAP_PERFMON", ["perf_event_open"]),
    ],
)
def test_capability_rules_only_with_the_capability(cap: str, unlocked: list[str]) -> None:
    without = plain_names(oci.default_profile(with_caps("CAP_CHOWN")))
    granted = plain_names(oci.default_profile(with_caps("CAP_CHOWN", cap)))
    for name in unlocked:
        assert name not in without, name
        assert name in granted, name


def test_profile_reads_the_bounding_set() -> None:
    spec = with_caps("CAP_CHOWN")
    assert spec.process is not None and spec.process.capabilities is not None
    spec.process.capabilities.bounding = ["CAP_SYS_ADMIN"]  # only bounding counts
    assert "mount" in plain_names(oci.default_profile(spec))
    spec.process.capabilities = None
    assert "mount" not in plain_names(oci.default_profile(spec))
    assert "mount" not in plain_names(oci.default_profile(None))


def test_clone_without_cap_sys_admin_may_not_create_namespaces() -> None:
    p = oci.default_profile(with_caps(*oci.DEFAULT_UNIX_CAPABILITIES), machine="x86_64")
    assert "clone" not in plain_names(p) and "clone3" not in plain_names(p)
    (clone,) = rules_for(p, "clone")
    assert clone.action == "SCMP_ACT_ALLOW"
    assert clone.args == [oci.LinuxSeccompArg(index=0, value=NS_FLAGS, value_two=0,
                                              op="SCMP_CMP_MASKED_EQ")]
    (clone3,) = rules_for(p, "clone3")
    assert (clone3.action, clone3.errno_ret) == ("SCMP_ACT_ERRNO", errno.ENOSYS)
    # s390 passes clone's flags second
    (s390,) = rules_for(oci.default_profile(machine="s390x"), "clone")
    assert s390.args is not None and s390.args[0].index == 1


def test_clone_with_cap_sys_admin_is_unrestricted() -> None:
    p = oci.default_profile(with_caps("CAP_SYS_ADMIN"))
    assert {"clone", "clone3"} <= set(plain_names(p))
    assert [r.args for r in rules_for(p, "clone")] == [None]
    assert [r.action for r in rules_for(p, "clone3")] == ["SCMP_ACT_ALLOW"]


def test_personality_allowed_only_for_known_personas() -> None:
    rules = rules_for(oci.default_profile(), "personality")
    values = sorted(r.args[0].value for r in rules if r.args)
    assert values == [0x0, 0x8, 0x20000, 0x20008, 0xFFFFFFFF]
    assert all(r.args and r.args[0].op == "SCMP_CMP_EQ" and r.args[0].index == 0
               for r in rules)
    assert "personality" not in plain_names(oci.default_profile())


def test_ptrace_depends_on_the_kernel_version() -> None:
    assert "ptrace" in plain_names(oci.default_profile(kernel="6.1.0-18-amd64"))
    assert "ptrace" in plain_names(oci.default_profile(kernel="4.8.0"))
    old = oci.default_profile(kernel="4.4.0-210-generic")
    assert "ptrace" not in plain_names(old)
    assert "ptrace" in plain_names(oci.default_profile(with_caps("CAP_SYS_PTRACE"),
                                                       kernel="4.4.0"))
    assert "ptrace" not in plain_names(oci.default_profile(kernel="garbage"))


def test_default_profile_validates_and_round_trips_through_json() -> None:
    for caps in ((), tuple(oci.KNOWN_CAPABILITIES)):
        spec = oci.generate(with_caps(*caps), oci.with_default_seccomp(),
                            oci.with_minimum_oci_version())
        assert oci.validate(spec) == []
        assert oci.validate_profile(spec.linux.seccomp) == []  # type: ignore[union-attr]
        assert spec.oci_version == "1.1.0"  # errnoRet / defaultErrnoRet
        again = oci.Spec.from_json(spec.to_json())
        assert again == spec
        assert json.loads(again.to_json())["linux"]["seccomp"]["defaultErrnoRet"] == 1


def test_each_call_returns_a_new_profile() -> None:
    a, b = oci.default_profile(), oci.default_profile()
    assert a == b
    assert a.syscalls is not None
    a.syscalls[0].names.append("kexec_load")
    assert "kexec_load" not in plain_names(oci.default_profile())


# --- load_profile ------------------------------------------------------------------------

GOOD = {
    "defaultAction": "SCMP_ACT_ALLOW",
    "architectures": ["SCMP_ARCH_X86_64"],
    "syscalls": [
        {"names": ["mkdir", "mkdirat"], "action": "SCMP_ACT_ERRNO", "errnoRet": 122},
        {"names": ["clone"], "action": "SCMP_ACT_ERRNO",
         "args": [{"index": 0, "value": 268435456, "valueTwo": 268435456,
                   "op": "SCMP_CMP_MASKED_EQ"}]},
    ],
}


def write(tmp_path: Path, data: Any, name: str = "profile.json") -> Path:
    path = tmp_path / name
    path.write_text(data if isinstance(data, str) else json.dumps(data))
    return path


def test_load_profile_reads_the_oci_form(tmp_path: Path) -> None:
    path = write(tmp_path, GOOD)
    p = oci.load_profile(path)
    assert p.default_action == "SCMP_ACT_ALLOW"
    assert p.syscalls is not None and p.syscalls[0].errno_ret == 122
    assert p.syscalls[1].args == [oci.LinuxSeccompArg(index=0, value=0x10000000,
                                                      value_two=0x10000000,
                                                      op="SCMP_CMP_MASKED_EQ")]
    assert codec.unstructure(p) == GOOD
    assert oci.load_profile(str(path)) == p


def test_load_profile_missing_file(tmp_path: Path) -> None:
    path = tmp_path / "nope.json"
    with pytest.raises(oci.SeccompProfileNotFoundError) as info:
        oci.load_profile(path)
    assert str(path) in str(info.value)
    assert isinstance(info.value, errors.NotFoundError)
    assert isinstance(info.value, oci.SeccompProfileError)


def test_load_profile_directory(tmp_path: Path) -> None:
    with pytest.raises(oci.SeccompProfileError, match=f"{tmp_path}: .*cannot read"):
        oci.load_profile(tmp_path)


@pytest.mark.parametrize(
    ("data", "where", "why"),
    [
        ("{not json", r"\$", "malformed JSON"),
        ("", r"\$", "malformed JSON"),
        ([1, 2], r"\$", "expected an object"),
        ({"syscalls": []}, r"\$", "missing required key 'defaultAction'"),
        ({"defaultAction": 7}, r"\$\.defaultAction", "expected a string"),
        ({"defaultAction": "SCMP_ACT_ALLOW", "syscalls": [{"names": "mkdir",
                                                          "action": "SCMP_ACT_ERRNO"}]},
         r"\$\.syscalls\[0\]\.names", "expected an array"),
        ({"defaultAction": "SCMP_ACT_ALLOW",
          "syscalls": [{"names": ["mkdir"], "action": "SCMP_ACT_ERRNO", "errnoRet": -1}]},
         r"\$\.syscalls\[0\]\.errnoRet", "out of range"),
        ({"defaultAction": "SCMP_ACT_DENY"}, r"\$\.defaultAction",
         "unknown seccomp action 'SCMP_ACT_DENY'"),
        ({"defaultAction": "SCMP_ACT_ALLOW",
          "syscalls": [{"names": ["mkdir"], "action": "SCMP_ACT_BLOCK"}]},
         r"\$\.syscalls\[0\]\.action", "unknown seccomp action 'SCMP_ACT_BLOCK'"),
        ({"defaultAction": "SCMP_ACT_ALLOW", "architectures": ["x86_64"]},
         r"\$\.architectures\[0\]", "unknown seccomp arch"),
        ({"defaultAction": "SCMP_ACT_ALLOW",
          "syscalls": [{"names": [], "action": "SCMP_ACT_ERRNO"}]},
         r"\$\.syscalls\[0\]\.names", "needs at least one syscall name"),
        ({"defaultAction": "SCMP_ACT_ALLOW",
          "syscalls": [{"names": ["x"], "action": "SCMP_ACT_ERRNO",
                        "args": [{"index": 0, "value": 1, "op": "SCMP_CMP_SAME"}]}]},
         r"\$\.syscalls\[0\]\.args\[0\]\.op", "unknown seccomp operator"),
        ({"defaultAction": "SCMP_ACT_ALLOW", "syscalls": None},
         r"\$\.syscalls", "null is not allowed"),
        ({"defaultAction": "SCMP_ACT_ERRNO", "archMap": []}, r"\$\.archMap", "unknown key"),
        ({"defaultAction": "SCMP_ACT_ALLOW",
          "syscalls": [{"names": ["mount"], "action": "SCMP_ACT_ALLOW",
                        "includes": {"caps": ["CAP_SYS_ADMIN"]}}]},
         r"\$\.syscalls\[0\]\.includes", "unknown key"),
        ({"defaultAction": "SCMP_ACT_NOTIFY"}, r"\$", "listenerPath"),
    ],
)
def test_load_profile_bad_files_name_the_file_and_json_path(
    tmp_path: Path, data: Any, where: str, why: str
) -> None:
    path = write(tmp_path, data)
    with pytest.raises(oci.SeccompProfileError, match=f"^{path}: {where}: .*{why}") as info:
        oci.load_profile(path)
    assert isinstance(info.value, errors.InvalidArgumentError)
    assert info.value.source == str(path)


def test_load_profile_reports_every_problem(tmp_path: Path) -> None:
    path = write(tmp_path, {"defaultAction": "NOPE", "flags": ["NOPE_FLAG"]})
    with pytest.raises(oci.SeccompProfileError) as info:
        oci.load_profile(path)
    assert info.value.path == "$.defaultAction"
    assert "$.flags[0]: unknown seccomp flag" in str(info.value)


def test_load_profile_refuses_a_non_path() -> None:
    with pytest.raises(oci.SeccompProfileError, match="expected a path"):
        oci.load_profile(42)  # type: ignore[arg-type]
    with pytest.raises(oci.SeccompProfileError, match="invalid profile path"):
        oci.load_profile("")


# --- options -----------------------------------------------------------------------------


def test_with_default_seccomp_uses_the_capabilities_applied_before_it() -> None:
    spec = oci.generate(
        oci.default_spec("pk-seccomp"),
        oci.with_added_capabilities(["CAP_SYS_ADMIN"]),
        oci.with_default_seccomp(),
    )
    assert spec.linux is not None and spec.linux.seccomp is not None
    assert "mount" in plain_names(spec.linux.seccomp)
    later = oci.generate(
        oci.default_spec("pk-seccomp"),
        oci.with_default_seccomp(),
        oci.with_added_capabilities(["CAP_SYS_ADMIN"]),
    )
    assert later.linux is not None and later.linux.seccomp is not None
    assert "mount" not in plain_names(later.linux.seccomp)


def test_with_default_seccomp_creates_linux_and_unconfined_removes_it() -> None:
    spec = oci.generate(oci.Spec(oci_version="1.1.0"), oci.with_default_seccomp())
    assert spec.linux is not None and spec.linux.seccomp == oci.default_profile(spec)
    spec = oci.generate(spec, oci.with_seccomp_unconfined())
    assert spec.linux is not None and spec.linux.seccomp is None


def test_with_seccomp_profile_from_file_reads_it_once(tmp_path: Path) -> None:
    path = write(tmp_path, GOOD)
    opt = oci.with_seccomp_profile(path)
    path.unlink()  # read when the option was made
    a = oci.generate(oci.default_spec("a"), opt)
    b = oci.generate(oci.default_spec("b"), opt)
    assert a.linux is not None and b.linux is not None
    assert a.linux.seccomp == b.linux.seccomp == codec.structure(GOOD, oci.LinuxSeccomp)
    assert a.linux.seccomp is not b.linux.seccomp  # each spec has its own copy


def test_with_seccomp_profile_from_a_model_copies_it() -> None:
    profile = codec.structure(GOOD, oci.LinuxSeccomp)
    spec = oci.generate(oci.default_spec("a"), oci.with_seccomp_profile(profile))
    assert spec.linux is not None and spec.linux.seccomp == profile
    assert spec.linux.seccomp is not profile
    assert profile.syscalls is not None
    profile.syscalls.clear()
    assert spec.linux.seccomp.syscalls


def test_with_seccomp_profile_bad_arguments_fail_when_called(tmp_path: Path) -> None:
    with pytest.raises(oci.SeccompProfileNotFoundError):
        oci.with_seccomp_profile(tmp_path / "missing.json")
    bad = oci.LinuxSeccomp(default_action="SCMP_ACT_WHATEVER")
    with pytest.raises(oci.SpecOptError, match=r"\$\.defaultAction: unknown seccomp action"):
        oci.with_seccomp_profile(bad)
    with pytest.raises(oci.SpecOptError, match=r"expected an oci\.LinuxSeccomp or a file path"):
        oci.with_seccomp_profile({"defaultAction": "SCMP_ACT_ALLOW"})  # type: ignore[arg-type]


def test_public_names_are_exported_with_docstrings() -> None:
    for name in seccomp.__all__:
        assert getattr(oci, name) is getattr(seccomp, name)
        assert getattr(seccomp, name).__doc__, name
