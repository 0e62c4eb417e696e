"""Tests for podkit.oci.validate: every rule, minimum_version, unsupported_fields (recorded and real
``runc features``)."""

from __future__ import annotations

import copy
import json
import subprocess
from collections.abc import Callable
from typing import Any

import pytest

from podkit import oci
from podkit.oci.validate import (
    CAPABILITIES,
    SPEC_VERSIONS,
    Problem,
    check,
    minimum_version,
    unsupported_fields,
    validate,
    validate_features,
    validate_state,
    version_uses,
)
from support import require_binary

from .helpers import EVERYTHING

BASE: dict[str, Any] = {
    "ociVersion": "1.0.0",
    "root": {"path": "rootfs"},
    "process": {"cwd": "/", "user": {"uid": 0, "gid": 0}, "args": ["sh"]},
    "linux": {"namespaces": [{"type": "pid"}, {"type": "mount"}, {"type": "uts"}]},
}

Patch = Callable[[dict[str, Any]], None]


def _spec(patch: Patch | None = None, base: dict[str, Any] = BASE) -> oci.Spec:
    doc = copy.deepcopy(base)
    if patch is not None:
        patch(doc)
    return oci.Spec.from_dict(doc, strict=False)


def _set(path: str, value: Any) -> Patch:
    """A patch setting ``value`` at a dotted path (creating objects on the way)."""

    def patch(doc: dict[str, Any]) -> None:
        *parents, last = path.split(".")
        node = doc
        for key in parents:
            node = node.setdefault(key, {})
        node[last] = value

    return patch


def _drop(path: str) -> Patch:
    def patch(doc: dict[str, Any]) -> None:
        *parents, last = path.split(".")
        node = doc
        for key in parents:
            node = node[key]
        del node[last]

    return patch


def _ns(*types: str, **paths: str) -> Patch:
    return _set("linux.namespaces", [{"type": t, **({"path": paths[t]} if t in paths else {})}
                                     for t in types])


def _both(*patches: Patch) -> Patch:
    def patch(doc: dict[str, Any]) -> None:
        for p in patches:
            p(doc)

    return patch


def test_valid_specs_have_no_problems() -> None:
    assert validate(_spec()) == []
    assert validate(oci.Spec.from_dict(EVERYTHING)) == []
    assert validate(oci.default_spec()) == []


_MAP = [{"containerID": 0, "hostID": 1000, "size": 1}]
_SECCOMP = {"defaultAction": "SCMP_ACT_ALLOW"}

# (id, patch, expected path, message fragment)
PROBLEMS: list[tuple[str, Patch, str, str]] = [
    ("semver", _set("ociVersion", "1.0"), "$.ociVersion", "not a SemVer 2.0 version"),
    ("semver-v", _set("ociVersion", "v1.0.0"), "$.ociVersion", "SemVer"),
    ("root", _drop("root"), "$", "missing 'root' (REQUIRED on Linux)"),
    ("cwd", _set("process.cwd", "home"), "$.process.cwd", "'home' must be an absolute path"),
    ("user", _drop("process.user"), "$.process", "missing 'user'"),
    ("gid", _drop("process.user.gid"), "$.process.user", "missing 'gid'"),
    ("cap", _set("process.capabilities", {"bounding": ["CAP_KILL", "CAP_FOO"]}),
     "$.process.capabilities.bounding[1]", "unknown capability 'CAP_FOO'"),
    ("cap-ambient", _set("process.capabilities", {"ambient": ["kill"]}),
     "$.process.capabilities.ambient[0]", "unknown capability 'kill'"),
    ("rlimit-pattern", _set("process.rlimits", [{"type": "nofile", "soft": 1, "hard": 1}]),
     "$.process.rlimits[0].type", "does not match '^RLIMIT_[A-Z]+$'"),
    ("rlimit-name", _set("process.rlimits", [{"type": "RLIMIT_FOO", "soft": 1, "hard": 1}]),
     "$.process.rlimits[0].type", "unknown rlimit 'RLIMIT_FOO'"),
    ("rlimit-dup", _set("process.rlimits", [{"type": "RLIMIT_CORE", "soft": 1, "hard": 1}] * 2),
     "$.process.rlimits[1].type", "duplicate rlimit 'RLIMIT_CORE' (also at index 0)"),
    ("rlimit-soft", _set("process.rlimits", [{"type": "RLIMIT_CORE", "soft": 2, "hard": 1}]),
     "$.process.rlimits[0]", "soft limit 2 exceeds hard limit 1"),
    ("sched-policy", _set("process.scheduler", {"policy": "SCHED_FAST"}),
     "$.process.scheduler.policy", "unknown scheduler policy 'SCHED_FAST'"),
    ("sched-flag", _set("process.scheduler", {"policy": "SCHED_RR", "flags": ["X"]}),
     "$.process.scheduler.flags[0]", "unknown scheduler flag 'X'"),
    ("ioprio-class", _set("process.ioPriority", {"class": "RT", "priority": 0}),
     "$.process.ioPriority.class", "unknown I/O priority class 'RT'"),
    ("ioprio-missing", _set("process.ioPriority", {"class": "IOPRIO_CLASS_BE"}),
     "$.process.ioPriority", "missing 'priority'"),
    ("ioprio-range", _set("process.ioPriority", {"class": "IOPRIO_CLASS_BE", "priority": 8}),
     "$.process.ioPriority.priority", "8 is not in 0..7"),
    ("affinity", _set("process.execCPUAffinity", {"final": "0-3;7"}),
     "$.process.execCPUAffinity.final", "CPU list '0-3;7' does not match"),
    ("hook-path", _set("hooks", {"poststop": [{"path": "/ok"}, {"path": "rel"}]}),
     "$.hooks.poststop[1].path", "hook path 'rel' must be an absolute path"),
    ("hook-timeout", _set("hooks", {"createRuntime": [{"path": "/h", "timeout": 0}]}),
     "$.hooks.createRuntime[0].timeout", "timeout 0 must be >= 1 second"),
    ("mount-relative", _set("mounts", [{"destination": "data"}]), "$.mounts[0].destination",
     "must be an absolute path before runtime-spec 1.2.0"),
    ("mount-uid-only", _set("mounts", [{"destination": "/d", "options": ["idmap"],
                                        "uidMappings": _MAP}]),
     "$.mounts[0]", "uidMappings and gidMappings must be given together"),
    ("mount-no-idmap", _set("mounts", [{"destination": "/d", "uidMappings": _MAP,
                                        "gidMappings": _MAP}]),
     "$.mounts[0].options", "need the 'idmap' or 'ridmap' option"),
    ("mount-both-idmap", _set("mounts", [{"destination": "/d", "options": ["idmap", "ridmap"]}]),
     "$.mounts[0].options", "mutually exclusive"),
    ("ns-type", _ns("pid", "mount", "foo"), "$.linux.namespaces[2].type",
     "unknown namespace type 'foo'"),
    ("ns-dup", _ns("pid", "mount", "pid"), "$.linux.namespaces[2].type",
     "duplicate namespace 'pid' (also at index 0)"),
    ("ns-path", _ns("pid", "network", network="proc/1/ns/net"), "$.linux.namespaces[1].path",
     "namespace path 'proc/1/ns/net' must be an absolute path"),
    ("ns-path-unknown", _ns("pid", "bogus", bogus="/proc/1/ns/bogus"),
     "$.linux.namespaces[1].path", "cannot join a namespace of unknown type 'bogus'"),
    ("userns-no-uidmap", _both(_ns("pid", "user"), _set("linux.gidMappings", _MAP)), "$.linux",
     "a new user namespace needs uidMappings"),
    ("userns-no-gidmap", _both(_ns("pid", "user"), _set("linux.uidMappings", _MAP)), "$.linux",
     "a new user namespace needs gidMappings"),
    ("map-no-userns", _both(_set("linux.uidMappings", _MAP), _set("linux.gidMappings", _MAP)),
     "$.linux", "uidMappings/gidMappings given without a user namespace"),
    ("timeoffsets-no-timens", _set("linux.timeOffsets", {"boottime": {"secs": 1}}),
     "$.linux.timeOffsets", "timeOffsets need a time namespace"),
    ("timeoffsets-clock", _both(_ns("time"), _set("linux.timeOffsets", {"realtime": {}})),
     "$.linux.timeOffsets.realtime", "unknown clock 'realtime'"),
    ("hostname-no-uts", _both(_ns("pid"), _set("hostname", "h")), "$.hostname",
     "setting hostname needs a uts namespace (not the host's)"),
    ("domainname-no-linux", _both(_drop("linux"), _set("domainname", "d")),
     "$.domainname", "setting domainname needs a uts namespace"),
    ("device-type", _set("linux.devices", [{"type": "x", "path": "/dev/x"}]),
     "$.linux.devices[0].type", "device type 'x' is not one of c, b, u, p"),
    ("device-major", _set("linux.devices", [{"type": "c", "path": "/dev/x", "minor": 1}]),
     "$.linux.devices[0]", "missing 'major' (REQUIRED for device type 'c')"),
    ("device-path", _set("linux.devices", [{"type": "p", "path": "fifo"}]),
     "$.linux.devices[0].path", "device path 'fifo' must be an absolute path"),
    ("device-mode", _set("linux.devices", [{"type": "p", "path": "/f", "fileMode": 512}]),
     "$.linux.devices[0].fileMode", "fileMode 512 is not in 0..511"),
    ("devcgroup-type", _set("linux.resources", {"devices": [{"allow": True, "type": "z"}]}),
     "$.linux.resources.devices[0].type", "unknown device cgroup type 'z'"),
    ("devcgroup-access", _set("linux.resources", {"devices": [{"allow": True, "access": "rwx"}]}),
     "$.linux.resources.devices[0].access", "access 'rwx' is not made of r, w, m"),
    ("pids-limit-old", _set("linux.resources", {"pids": {}}), "$.linux.resources.pids",
     "missing 'limit' (REQUIRED before runtime-spec 1.3.0)"),
    ("swappiness", _set("linux.resources", {"memory": {"swappiness": 101}}),
     "$.linux.resources.memory.swappiness", "101 is not in 0..100"),
    ("hugepage", _set("linux.resources", {"hugepageLimits": [{"pageSize": "64kB", "limit": 1}]}),
     "$.linux.resources.hugepageLimits[0].pageSize", "page size '64kB' does not match"),
    ("seccomp-action", _set("linux.seccomp", {"defaultAction": "SCMP_ACT_FOO"}),
     "$.linux.seccomp.defaultAction", "unknown seccomp action 'SCMP_ACT_FOO'"),
    ("seccomp-arch", _set("linux.seccomp", {**_SECCOMP, "architectures": ["SCMP_ARCH_Z80"]}),
     "$.linux.seccomp.architectures[0]", "unknown seccomp arch 'SCMP_ARCH_Z80'"),
    ("seccomp-flag", _set("linux.seccomp", {**_SECCOMP, "flags": ["SECCOMP_FILTER_FLAG_X"]}),
     "$.linux.seccomp.flags[0]", "unknown seccomp flag"),
    ("seccomp-names", _set("linux.seccomp", {**_SECCOMP, "syscalls": [
        {"names": [], "action": "SCMP_ACT_ERRNO"}]}),
     "$.linux.seccomp.syscalls[0].names", "needs at least one syscall name"),
    ("seccomp-syscall-action", _set("linux.seccomp", {**_SECCOMP, "syscalls": [
        {"names": ["read"], "action": "ERRNO"}]}),
     "$.linux.seccomp.syscalls[0].action", "unknown seccomp action 'ERRNO'"),
    ("seccomp-op", _set("linux.seccomp", {**_SECCOMP, "syscalls": [
        {"names": ["read"], "action": "SCMP_ACT_ERRNO",
         "args": [{"index": 0, "value": 1, "op": "SCMP_CMP_XX"}]}]}),
     "$.linux.seccomp.syscalls[0].args[0].op", "unknown seccomp operator 'SCMP_CMP_XX'"),
    ("seccomp-notify", _set("linux.seccomp", {**_SECCOMP, "syscalls": [
        {"names": ["mount"], "action": "SCMP_ACT_NOTIFY"}]}),
     "$.linux.seccomp", "SCMP_ACT_NOTIFY needs 'listenerPath'"),
    ("propagation", _set("linux.rootfsPropagation", "rprivate"), "$.linux.rootfsPropagation",
     "unknown rootfs propagation 'rprivate'"),
    ("masked", _set("linux.maskedPaths", ["/proc/kcore", "proc/keys"]), "$.linux.maskedPaths[1]",
     "'proc/keys' must be an absolute path"),
    ("readonly", _set("linux.readonlyPaths", ["sys"]), "$.linux.readonlyPaths[0]",
     "must be an absolute path"),
    ("membw", _set("linux.intelRdt", {"memBwSchema": "L3:0=ff"}), "$.linux.intelRdt.memBwSchema",
     "memBwSchema 'L3:0=ff' does not match '^MB:[^\\n]*$'"),
    ("mpol-mode", _set("linux.memoryPolicy", {"mode": "MPOL_FAST"}), "$.linux.memoryPolicy.mode",
     "unknown memory policy mode 'MPOL_FAST'"),
    ("mpol-flag", _set("linux.memoryPolicy", {"mode": "MPOL_BIND", "flags": ["MPOL_F_X"]}),
     "$.linux.memoryPolicy.flags[0]", "unknown memory policy flag 'MPOL_F_X'"),
    ("personality-missing", _set("linux.personality", {"flags": []}), "$.linux.personality",
     "missing 'domain' (REQUIRED)"),
    ("personality-domain", _set("linux.personality", {"domain": "LINUX64"}),
     "$.linux.personality.domain", "unknown personality domain 'LINUX64'"),
    ("annotation-key", _set("annotations", {"": "x"}), '$.annotations[""]',
     "annotation keys must not be empty"),
    ("null", _set("hostname", None), "$.hostname", "null is not allowed here"),
    ("nested-null", _set("linux.resources", {"memory": {"limit": None}}),
     "$.linux.resources.memory.limit", "null is not allowed here"),
    ("freebsd", _both(_drop("linux"), _set("freebsd", {"jail": {"host": "disable"}})),
     "$.freebsd.jail.host", "'disable' is not one of new, inherit"),
]


@pytest.mark.parametrize(("patch", "path", "fragment"), [p[1:] for p in PROBLEMS],
                         ids=[p[0] for p in PROBLEMS])
def test_each_rule_reports_the_path(patch: Patch, path: str, fragment: str) -> None:
    problems = validate(_spec(patch))
    assert [p for p in problems if p.path == path and fragment in p.message], problems
    assert all(isinstance(p, Problem) for p in problems)


ACCEPTED: list[tuple[str, Patch]] = [
    ("relative-mount-1.2", _both(_set("ociVersion", "1.2.0"),
                                 _set("mounts", [{"destination": "data"}]))),
    ("pids-no-limit-1.3", _both(_set("ociVersion", "1.3.0"), _set("linux.resources.pids", {}))),
    ("device-p-no-numbers", _set("linux.devices", [{"type": "p", "path": "/dev/fifo"}])),
    ("userns-joined", _ns("pid", "user", user="/proc/1/ns/user")),
    ("hostname-joined-uts", _both(_ns("uts", uts="/proc/1/ns/uts"), _set("hostname", "h"))),
    ("idmap-without-mappings", _set("mounts", [{"destination": "/d", "options": ["idmap"]}])),
    ("semver-prerelease", _set("ociVersion", "1.3.0-rc.1+build.5")),
    ("unknown-keys", _set("x-vendor", {"anything": None})),
    ("no-process", _drop("process")),
    ("zos", _both(_drop("root"), _drop("linux"), _set("zos", {}), _set("hostname", "h"))),
]


@pytest.mark.parametrize("patch", [p for _, p in ACCEPTED], ids=[i for i, _ in ACCEPTED])
def test_allowed_variants_have_no_problems(patch: Patch) -> None:
    assert validate(_spec(patch)) == []


def test_relative_mounts_need_a_release_of_1_2_0() -> None:
    mounts = _set("mounts", [{"destination": "data"}])
    assert validate(_spec(_both(_set("ociVersion", "1.2.0-rc.1"), mounts)))
    assert not validate(_spec(_both(_set("ociVersion", "1.10.0"), mounts)))


def test_wrong_python_types_in_a_built_spec_are_reported_alone() -> None:
    spec = _spec()
    spec.hostname = 5  # type: ignore[assignment]
    assert spec.process is not None and spec.process.user is not None
    spec.process.user.uid = -1
    spec.process.cwd = "relative"
    assert spec.linux is not None
    spec.linux.namespaces = "pid"  # type: ignore[assignment]
    spec.root = oci.Root(path=None)  # type: ignore[arg-type]
    assert validate(spec) == [
        Problem("$.process.user.uid", "-1 is out of range for uint32 [0, 4294967295]"),
        Problem("$.root", "missing required key 'path'"),
        Problem("$.hostname", "expected a string, got 5"),
        Problem("$.linux.namespaces", "expected an array, got 'pid'"),
    ]


def test_check_raises_spec_error_listing_every_problem() -> None:
    spec = _spec(_both(_set("ociVersion", "x"), _ns("pid", "pid")))
    with pytest.raises(oci.SpecError) as info:
        check(spec, source="config.json")
    assert info.value.path == "$.ociVersion"
    assert "duplicate namespace 'pid'" in info.value.message
    assert str(info.value).startswith("config.json: $.ociVersion: 'x' is not a SemVer")
    good = _spec()
    assert check(good) is good


def test_validate_state() -> None:
    good = {"ociVersion": "1.0.2", "id": "c", "status": "created", "pid": 0, "bundle": "/b"}
    assert validate_state(oci.State.from_dict(good)) == []
    bad = oci.State.from_dict({**good, "status": "paused", "pid": -1, "ociVersion": "1"})
    assert [p.path for p in validate_state(bad)] == ["$.status", "$.pid", "$.ociVersion"]


# --- features ---------------------------------------------------------------------------------

# `runc features` of runc 1.1.5 (Debian 12), recorded on the machine the tests were written on.
RUNC_1_1_5 = json.loads("""{
 "ociVersionMin": "1.0.0", "ociVersionMax": "1.0.2-dev",
 "hooks": ["prestart", "createRuntime", "createContainer", "startContainer", "poststart",
   "poststop"],
 "mountOptions": ["acl", "async", "atime", "bind", "defaults", "dev", "diratime", "dirsync",
   "exec", "iversion", "lazytime", "loud", "mand", "noacl", "noatime", "nodev", "nodiratime",
   "noexec", "noiversion", "nolazytime", "nomand", "norelatime", "nostrictatime", "nosuid",
   "nosymfollow", "private", "ratime", "rbind", "rdev", "rdiratime", "relatime", "remount",
   "rexec", "rnoatime", "rnodev", "rnodiratime", "rnoexec", "rnorelatime", "rnostrictatime",
   "rnosuid", "rnosymfollow", "ro", "rprivate", "rrelatime", "rro", "rrw", "rshared", "rslave",
   "rstrictatime", "rsuid", "rsymfollow", "runbindable", "rw", "shared", "silent", "slave",
   "strictatime", "suid", "symfollow", "sync", "tmpcopyup", "unbindable"],
 "linux": {
  "namespaces": ["cgroup", "ipc", "mount", "network", "pid", "user", "uts"],
  "capabilities": ["CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_DAC_READ_SEARCH", "CAP_FOWNER",
    "CAP_FSETID", "CAP_KILL", "CAP_SETGID", "CAP_SETUID", "CAP_SETPCAP", "CAP_LINUX_IMMUTABLE",
    "CAP_NET_BIND_SERVICE", "CAP_NET_BROADCAST", "CAP_NET_ADMIN", "CAP_NET_RAW", "CAP_IPC_LOCK",
    "CAP_IPC_OWNER", "CAP_SYS_MODULE", "CAP_SYS_RAWIO", "CAP_SYS_CHROOT", "CAP_SYS_PTRACE",
    "CAP_SYS_PACCT", "CAP_SYS_ADMIN", "CAP_SYS_BOOT", "CAP_SYS_NICE", "CAP_SYS_RESOURCE",
    "CAP_SYS_TIME", "CAP_SYS_TTY_CONFIG", "CAP_MKNOD", "CAP_LEASE", "CAP_AUDIT_WRITE",
    "CAP_AUDIT_CONTROL", "CAP_SETFCAP", "CAP_MAC_OVERRIDE", "CAP_MAC_ADMIN", "CAP_SYSLOG",
    "CAP_WAKE_ALARM", "CAP_BLOCK_SUSPEND", "CAP_AUDIT_READ", "CAP_PERFMON", "CAP_BPF",
    "CAP_CHECKPOINT_RESTORE"],
  "cgroup": {"v1": true, "v2": true, "systemd": true, "systemdUser": true},
  "seccomp": {"enabled": true,
   "actions": ["SCMP_ACT_ALLOW", "SCMP_ACT_ERRNO", "SCMP_ACT_KILL", "SCMP_ACT_KILL_PROCESS",
     "SCMP_ACT_KILL_THREAD", "SCMP_ACT_LOG", "SCMP_ACT_NOTIFY", "SCMP_ACT_TRACE", "SCMP_ACT_TRAP"],
   "operators": ["SCMP_CMP_EQ", "SCMP_CMP_GE", "SCMP_CMP_GT", "SCMP_CMP_LE", "SCMP_CMP_LT",
     "SCMP_CMP_MASKED_EQ", "SCMP_CMP_NE"],
   "archs": ["SCMP_ARCH_AARCH64", "SCMP_ARCH_ARM", "SCMP_ARCH_MIPS", "SCMP_ARCH_MIPS64",
     "SCMP_ARCH_MIPS64N32", "SCMP_ARCH_MIPSEL", "SCMP_ARCH_MIPSEL64", "SCMP_ARCH_MIPSEL64N32",
     "SCMP_ARCH_PPC", "SCMP_ARCH_PPC64", "SCMP_ARCH_PPC64LE", "SCMP_ARCH_S390",
     "SCMP_ARCH_S390X", "SCMP_ARCH_X32", "SCMP_ARCH_X86", "SCMP_ARCH_X86_64"]},
  "apparmor": {"enabled": true}, "selinux": {"enabled": true}},
 "annotations": {"io.github.seccomp.libseccomp.version": "2.5.4",
  "org.opencontainers.runc.checkpoint.enabled": "true",
  "org.opencontainers.runc.commit": "1.1.5+ds1-1+deb12u1",
  "org.opencontainers.runc.version": "1.1.5+ds1"}
}""")
RUNC = oci.Features.from_dict(RUNC_1_1_5)


def _features(patch: Patch | None = None) -> oci.Features:
    doc = copy.deepcopy(RUNC_1_1_5)
    if patch is not None:
        patch(doc)
    return oci.Features.from_dict(doc)


def test_recorded_features_are_valid_and_round_trip() -> None:
    assert validate_features(RUNC) == []
    assert RUNC.to_dict() == RUNC_1_1_5
    assert RUNC.linux is not None and RUNC.linux.capabilities == list(CAPABILITIES)


def test_validate_features_reports_unknown_values() -> None:
    bad = _features(_both(_set("ociVersionMax", "latest"),
                          _set("linux.namespaces", ["pid", "foo"]),
                          _set("linux.capabilities", ["CAP_KILL", "cap_kill"]),
                          _set("linux.seccomp.knownFlags", ["SECCOMP_FILTER_FLAG_X"])))
    assert [p.path for p in validate_features(bad)] == [
        "$.ociVersionMax", "$.linux.namespaces[1]", "$.linux.capabilities[1]",
        "$.linux.seccomp.knownFlags[0]"]


def test_a_plain_spec_is_fully_supported_by_runc() -> None:
    assert unsupported_fields(_spec(), RUNC) == []
    assert unsupported_fields(oci.default_spec(), RUNC) == []


def _unsupported(spec_patch: Patch, features: oci.Features = RUNC) -> list[tuple[str, str]]:
    return [(p.path, p.message) for p in unsupported_fields(_spec(spec_patch), features)]


NEWER = "newer than the runtime's ociVersionMax 1.0.2-dev"
UNSUPPORTED: list[tuple[str, Patch, oci.Features, str, str]] = [
    ("time-ns", _ns("pid", "time"), RUNC, "$.linux.namespaces[1].type",
     "namespace 'time' is not supported by the runtime"),
    ("capability", _set("process.capabilities", {"bounding": ["CAP_KILL", "CAP_NEW_THING"]}),
     RUNC, "$.process.capabilities.bounding[1]", "capability 'CAP_NEW_THING' is not supported"),
    ("hook", _set("hooks", {"poststart": [{"path": "/h"}]}),
     _features(_set("hooks", ["prestart"])), "$.hooks.poststart", "poststart hooks are not"),
    ("mount-option", _set("mounts", [{"destination": "/d", "options": ["rbind", "idmap"]}]),
     RUNC, "$.mounts[0].options[1]", "mount option 'idmap' is not supported"),
    ("idmap-mappings", _set("mounts", [{"destination": "/d", "options": ["rbind"],
                                        "uidMappings": _MAP, "gidMappings": _MAP}]), RUNC,
     "$.mounts[0]", "idmapped mounts (uidMappings/gidMappings) (runtime-spec 1.1.0) is " + NEWER),
    ("idmap-disabled", _set("mounts", [{"destination": "/d", "options": ["idmap"]}]),
     _features(_set("linux.mountExtensions", {"idmap": {"enabled": False}})),
     "$.mounts[0]", "idmapped mounts is not supported by the runtime (features: disabled)"),
    ("seccomp-arch", _set("linux.seccomp", {**_SECCOMP, "architectures": ["SCMP_ARCH_RISCV64"]}),
     RUNC, "$.linux.seccomp.architectures[0]", "seccomp arch 'SCMP_ARCH_RISCV64' is not"),
    ("seccomp-flag-by-version", _set("linux.seccomp", {**_SECCOMP, "flags": [
        "SECCOMP_FILTER_FLAG_SPEC_ALLOW"]}), RUNC, "$.linux.seccomp.flags[0]",
     "SECCOMP_FILTER_FLAG_SPEC_ALLOW (runtime-spec 1.1.0) is " + NEWER),
    ("seccomp-flag-listed", _set("linux.seccomp", {**_SECCOMP, "flags": [
        "SECCOMP_FILTER_FLAG_LOG"]}),
     _features(_set("linux.seccomp.supportedFlags", ["SECCOMP_FILTER_FLAG_TSYNC"])),
     "$.linux.seccomp.flags[0]", "seccomp flag 'SECCOMP_FILTER_FLAG_LOG' is not supported"),
    ("seccomp-action", _set("linux.seccomp", {"defaultAction": "SCMP_ACT_NOTIFY",
                                              "listenerPath": "/s"}),
     _features(_set("linux.seccomp.actions", ["SCMP_ACT_ALLOW"])),
     "$.linux.seccomp.defaultAction", "seccomp action 'SCMP_ACT_NOTIFY' is not supported"),
    ("seccomp-operator", _set("linux.seccomp", {**_SECCOMP, "syscalls": [
        {"names": ["read"], "action": "SCMP_ACT_ERRNO",
         "args": [{"index": 0, "value": 1, "op": "SCMP_CMP_MASKED_EQ"}]}]}),
     _features(_set("linux.seccomp.operators", ["SCMP_CMP_EQ"])),
     "$.linux.seccomp.syscalls[0].args[0].op", "seccomp operator 'SCMP_CMP_MASKED_EQ'"),
    ("seccomp-disabled", _set("linux.seccomp", _SECCOMP),
     _features(_set("linux.seccomp.enabled", False)), "$.linux.seccomp",
     "seccomp is not supported by the runtime"),
    ("apparmor", _set("process.apparmorProfile", "p"),
     _features(_set("linux.apparmor.enabled", False)), "$.process.apparmorProfile", "AppArmor"),
    ("selinux", _set("linux.mountLabel", "l"), _features(_set("linux.selinux.enabled", False)),
     "$.linux.mountLabel", "SELinux is not supported"),
    ("selinux-process", _set("process.selinuxLabel", "l"),
     _features(_set("linux.selinux.enabled", False)), "$.process.selinuxLabel", "SELinux"),
    ("intel-rdt", _set("linux.intelRdt", {"closID": "c"}),
     _features(_set("linux.intelRdt", {"enabled": False})), "$.linux.intelRdt", "Intel RDT"),
    ("intel-rdt-schemata", _set("linux.intelRdt", {"schemata": ["L3:0=f"]}),
     _features(_set("linux.intelRdt", {"enabled": True, "schemata": False})),
     "$.linux.intelRdt.schemata", "intelRdt.schemata is not supported"),
    ("intel-rdt-schemata-version", _set("linux.intelRdt", {"schemata": ["L3:0=f"]}), RUNC,
     "$.linux.intelRdt.schemata", "intelRdt.schemata (runtime-spec 1.3.0) is " + NEWER),
    ("mempolicy-version", _set("linux.memoryPolicy", {"mode": "MPOL_BIND"}), RUNC,
     "$.linux.memoryPolicy", "linux.memoryPolicy (runtime-spec 1.3.0) is " + NEWER),
    ("mempolicy-mode", _set("linux.memoryPolicy", {"mode": "MPOL_LOCAL"}),
     _features(_set("linux.memoryPolicy", {"modes": ["MPOL_BIND"]})),
     "$.linux.memoryPolicy.mode", "memory policy mode 'MPOL_LOCAL' is not supported"),
    ("netdevices-disabled", _set("linux.netDevices", {"eth1": {}}),
     _features(_set("linux.netDevices", {"enabled": False})), "$.linux.netDevices",
     "linux.netDevices is not supported"),
    ("netdevices-version", _set("linux.netDevices", {"eth1": {}}), RUNC, "$.linux.netDevices",
     "linux.netDevices (runtime-spec 1.3.0) is " + NEWER),
    ("unified", _set("linux.resources", {"unified": {"memory.high": "1"}}),
     _features(_set("linux.cgroup.v2", False)), "$.linux.resources.unified", "cgroup v2"),
    ("rdma", _set("linux.resources", {"rdma": {"mlx5": {"hcaHandles": 1}}}),
     _features(_set("linux.cgroup.rdma", False)), "$.linux.resources.rdma", "rdma cgroup"),
    ("domainname", _set("domainname", "d"), RUNC, "$.domainname",
     "domainname (runtime-spec 1.1.0) is " + NEWER + ": the runtime may silently ignore it"),
    ("exec-affinity", _set("process.execCPUAffinity", {"initial": "0"}), RUNC,
     "$.process.execCPUAffinity", "process.execCPUAffinity (runtime-spec 1.2.1)"),
]


@pytest.mark.parametrize(("patch", "features", "path", "fragment"),
                         [u[1:] for u in UNSUPPORTED], ids=[u[0] for u in UNSUPPORTED])
def test_unsupported_fields(
    patch: Patch, features: oci.Features, path: str, fragment: str
) -> None:
    found = _unsupported(patch, features)
    assert [m for p, m in found if p == path and fragment in m], found


SUPPORTED: list[tuple[str, Patch, oci.Features]] = [
    ("unified-v2", _set("linux.resources", {"unified": {"memory.high": "1"}}), RUNC),
    ("notify-listed", _set("linux.seccomp", {"defaultAction": "SCMP_ACT_ALLOW",
                                             "listenerPath": "/s", "syscalls": [
        {"names": ["mount"], "action": "SCMP_ACT_NOTIFY"}]}), RUNC),
    ("kill-process-listed", _set("linux.seccomp", {"defaultAction": "SCMP_ACT_KILL_PROCESS"}),
     RUNC),
    ("create-runtime-hook", _set("hooks", {"createRuntime": [{"path": "/h"}]}), RUNC),
    ("fs-specific-option", _set("mounts", [{"destination": "/t", "type": "tmpfs",
                                            "options": ["size=64k", "newinstance"]}]), RUNC),
    ("mempolicy-listed", _set("linux.memoryPolicy", {"mode": "MPOL_BIND"}),
     _features(_set("linux.memoryPolicy", {"modes": ["MPOL_BIND"]}))),
    ("netdevices-enabled", _set("linux.netDevices", {"eth1": {}}),
     _features(_set("linux.netDevices", {"enabled": True}))),
    ("everything-newest", lambda d: None, oci.Features(oci_version_min="1.0.0",
                                                       oci_version_max="1.3.0")),
    ("newest-minor", _set("domainname", "d"), _features(_set("ociVersionMax", "1.1.0-rc.1"))),
]


@pytest.mark.parametrize(("patch", "features"), [s[1:] for s in SUPPORTED],
                         ids=[s[0] for s in SUPPORTED])
def test_supported_fields_are_not_reported(patch: Patch, features: oci.Features) -> None:
    assert _unsupported(patch, features) == []


def test_everything_against_a_1_3_runtime_is_supported() -> None:
    newest = oci.Features(oci_version_min="1.0.0", oci_version_max="1.3.0")
    assert unsupported_fields(oci.Spec.from_dict(EVERYTHING), newest) == []


@pytest.mark.integration
def test_real_runc_features_against_podkit_specs() -> None:
    runc = require_binary("runc")
    out = subprocess.run([runc, "features"], check=True, capture_output=True, timeout=30).stdout
    features = oci.Features.from_json(out)
    assert validate_features(features) == []
    assert features.to_dict() == json.loads(out)
    assert unsupported_fields(oci.default_spec(), features) == []
    everything = oci.Spec.from_dict(EVERYTHING)
    found = {p.path for p in unsupported_fields(everything, features)}
    if features.linux and features.linux.namespaces is not None and \
            "time" not in features.linux.namespaces:
        assert "$.linux.namespaces[6].type" in found
    if _core_max(features) < (1, 1, 0):
        assert "$.domainname" in found  # runc 1.1.5 ignores it silently: podkit says so


def _core_max(features: oci.Features) -> tuple[int, ...]:
    return tuple(int(x) for x in features.oci_version_max.split("-")[0].split(".")[:3])


# --- minimum_version --------------------------------------------------------------------------

VERSIONED: list[tuple[str, Patch, str]] = [
    ("base", lambda d: None, "1.0.0"),
    ("createRuntime", _set("hooks", {"createRuntime": [{"path": "/h"}]}), "1.0.2"),
    ("prestart-only", _set("hooks", {"prestart": [{"path": "/h"}]}), "1.0.0"),
    ("umask", _set("process.user.umask", 18), "1.0.2"),
    ("personality", _set("linux.personality", {"domain": "LINUX"}), "1.0.2"),
    ("rdma", _set("linux.resources", {"rdma": {}}), "1.0.2"),
    ("useHierarchy", _set("linux.resources", {"memory": {"useHierarchy": False}}), "1.0.2"),
    ("closID", _set("linux.intelRdt", {"closID": "c"}), "1.0.2"),
    ("memBwSchema", _set("linux.intelRdt", {"memBwSchema": "MB:0=1"}), "1.0.2"),
    ("l3CacheSchema", _set("linux.intelRdt", {"l3CacheSchema": "L3:0=f"}), "1.0.0"),
    ("seccomp-flags", _set("linux.seccomp", {**_SECCOMP, "flags": []}), "1.0.2"),
    ("act-log", _set("linux.seccomp", {"defaultAction": "SCMP_ACT_LOG"}), "1.0.2"),
    ("unified", _set("linux.resources", {"unified": {}}), "1.1.0"),
    ("defaultErrnoRet", _set("linux.seccomp", {**_SECCOMP, "defaultErrnoRet": 1}), "1.1.0"),
    ("listenerPath", _set("linux.seccomp", {**_SECCOMP, "listenerPath": "/s"}), "1.1.0"),
    ("errnoRet", _set("linux.seccomp", {**_SECCOMP, "syscalls": [
        {"names": ["x"], "action": "SCMP_ACT_ERRNO", "errnoRet": 1}]}), "1.1.0"),
    ("kill-thread", _set("linux.seccomp", {**_SECCOMP, "syscalls": [
        {"names": ["x"], "action": "SCMP_ACT_KILL_THREAD"}]}), "1.1.0"),
    ("flag-log", _set("linux.seccomp", {**_SECCOMP, "flags": ["SECCOMP_FILTER_FLAG_LOG"]}),
     "1.1.0"),
    ("riscv", _set("linux.seccomp", {**_SECCOMP, "architectures": ["SCMP_ARCH_RISCV64"]}),
     "1.1.0"),
    ("enableCMT", _set("linux.intelRdt", {"enableCMT": True}), "1.1.0"),
    ("time-ns", _ns("time"), "1.1.0"),
    ("timeOffsets", _set("linux.timeOffsets", {}), "1.1.0"),
    ("mount-mappings", _set("mounts", [{"destination": "/d", "uidMappings": []}]), "1.1.0"),
    ("domainname", _set("domainname", ""), "1.1.0"),
    ("burst", _set("linux.resources", {"cpu": {"burst": 0}}), "1.1.0"),
    ("idle", _set("linux.resources", {"cpu": {"idle": 1}}), "1.1.0"),
    ("checkBeforeUpdate", _set("linux.resources", {"memory": {"checkBeforeUpdate": True}}),
     "1.1.0"),
    ("scheduler", _set("process.scheduler", {"policy": "SCHED_OTHER"}), "1.1.0"),
    ("ioPriority", _set("process.ioPriority", {"class": "IOPRIO_CLASS_BE", "priority": 0}),
     "1.1.0"),
    ("idmap", _set("mounts", [{"destination": "/d", "options": ["ridmap"]}]), "1.2.0"),
    ("relative-destination", _set("mounts", [{"destination": "d"}]), "1.2.0"),
    ("execCPUAffinity", _set("process.execCPUAffinity", {}), "1.2.1"),
    ("loongarch", _set("linux.seccomp", {**_SECCOMP, "architectures": ["SCMP_ARCH_LOONGARCH64"]}),
     "1.2.1"),
    ("netDevices", _set("linux.netDevices", {}), "1.3.0"),
    ("memoryPolicy", _set("linux.memoryPolicy", {"mode": "MPOL_DEFAULT"}), "1.3.0"),
    ("schemata", _set("linux.intelRdt", {"schemata": []}), "1.3.0"),
    ("enableMonitoring", _set("linux.intelRdt", {"enableMonitoring": False}), "1.3.0"),
    ("closID-root", _set("linux.intelRdt", {"closID": "/"}), "1.3.0"),
    ("pids-no-limit", _set("linux.resources", {"pids": {}}), "1.3.0"),
    ("pids-limit", _set("linux.resources", {"pids": {"limit": 5}}), "1.0.0"),
]


@pytest.mark.parametrize(("patch", "version"), [v[1:] for v in VERSIONED],
                         ids=[v[0] for v in VERSIONED])
def test_minimum_version(patch: Patch, version: str) -> None:
    spec = _spec(patch)
    assert minimum_version(spec) == version
    assert version in SPEC_VERSIONS


def test_minimum_version_is_the_highest_use_and_uses_name_their_paths() -> None:
    spec = oci.Spec.from_dict(EVERYTHING)
    assert minimum_version(spec) == "1.3.0"
    uses = version_uses(spec)
    assert ("1.2.1", "$.process.execCPUAffinity", "process.execCPUAffinity") in uses
    assert ("1.1.0", "$.linux.namespaces[6]", "the time namespace") in uses
    combined = _spec(_both(_set("domainname", "d"), _set("process.execCPUAffinity", {}),
                           _set("process.user.umask", 0)))
    assert minimum_version(combined) == "1.2.1"
    assert minimum_version(oci.default_spec()) == "1.0.0"


def test_unknown_keys_of_one_object() -> None:
    from podkit.oci import unknown_keys

    spec = oci.Spec.from_dict({"ociVersion": "1.0.2", "hostname": None, "zz": 1, "a.b": 2,
                               "linux": {"fooUnknown": 3}})
    assert [str(p) for p in unknown_keys(spec)] == [
        '$["a.b"]: unknown key, ignored by runtimes', "$.zz: unknown key, ignored by runtimes"]
    assert spec.linux is not None
    assert [str(p) for p in unknown_keys(spec.linux, "$.linux", "not in 1.3")] == [
        "$.linux.fooUnknown: unknown key, not in 1.3"]
