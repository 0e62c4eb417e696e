"""Shared helpers for the OCI tests: strategies for every model, the official schema, a full spec.

``wire_docs(cls)`` draws JSON documents (plain dicts) for any OCI model class, built from the
codec's own field tables: every field absent, present (right JSON type, any integer of its kind's
range) or an explicit ``null``, plus unknown ``x-`` keys with arbitrary JSON values. With
``schema_values=True`` enumerated and patterned strings are drawn from the valid values plus a few
invalid ones, so that validation has something to accept and something to reject.
"""

from __future__ import annotations

import functools
import json
import typing
from pathlib import Path
from typing import Any

import attrs
from hypothesis import strategies as st

from podkit import oci
from podkit.oci import features as ft
from podkit.oci.codec import wire_fields
from podkit.oci.validate import CAPABILITIES, NAMESPACE_TYPES
from podkit.oci.values import INT_RANGES

JSON_LEAVES = (
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=8)
)
JSON = st.recursive(
    JSON_LEAVES,
    lambda inner: st.lists(inner, max_size=3)
    | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=6,
)
EXTRA_KEYS = st.text(max_size=6).map(lambda s: "x-" + s)


def _bad(*valid: str, bad: tuple[str, ...] = ("BOGUS",)) -> st.SearchStrategy[str]:
    return st.sampled_from(sorted(valid) + list(bad))


_ACTIONS = _bad("SCMP_ACT_KILL", "SCMP_ACT_KILL_PROCESS", "SCMP_ACT_ERRNO", "SCMP_ACT_ALLOW",
                "SCMP_ACT_LOG", "SCMP_ACT_NOTIFY", "SCMP_ACT_TRACE")
_CAPS = st.lists(_bad(*CAPABILITIES[:6], "CAP_BPF", bad=("CAP_BOGUS", "cap_chown")), max_size=3)

# (class, attribute) -> strategy of the attribute's value, for schema-interesting values.
SCHEMA_VALUES: dict[tuple[type, str], st.SearchStrategy[Any]] = {
    (oci.Spec, "oci_version"): st.sampled_from(["1.0.0", "1.0.2", "1.2.0", "1.3.0", "0.5.0-dev"]),
    (oci.Mount, "destination"): st.sampled_from(["/proc", "/dev/shm", "data", ""]),
    (oci.Mount, "options"): st.lists(_bad("ro", "nosuid", "idmap", "ridmap", "rbind"), max_size=3),
    (oci.Process, "cwd"): st.sampled_from(["/", "/home/app", "relative"]),
    (oci.LinuxCapabilities, "bounding"): _CAPS,
    (oci.LinuxCapabilities, "effective"): _CAPS,
    (oci.LinuxCapabilities, "permitted"): _CAPS,
    (oci.LinuxCapabilities, "inheritable"): _CAPS,
    (oci.LinuxCapabilities, "ambient"): _CAPS,
    (oci.POSIXRlimit, "type"): _bad("RLIMIT_NOFILE", "RLIMIT_CORE", bad=("RLIMIT_BOGUS", "nofile")),
    (oci.Scheduler, "policy"): _bad("SCHED_OTHER", "SCHED_FIFO", "SCHED_DEADLINE"),
    (oci.Scheduler, "flags"): st.lists(_bad("SCHED_FLAG_RECLAIM", "SCHED_FLAG_KEEP_POLICY"),
                                       max_size=2),
    (oci.IOPriority, "class_"): _bad("IOPRIO_CLASS_RT", "IOPRIO_CLASS_BE", "IOPRIO_CLASS_IDLE"),
    (oci.IOPriority, "priority"): st.integers(-1, 8),
    (oci.CPUAffinity, "initial"): st.sampled_from(["0-3", "1,2", "", "x"]),
    (oci.CPUAffinity, "final"): st.sampled_from(["0-3", "7", "all"]),
    (oci.Hook, "path"): st.sampled_from(["/bin/hook", "hook"]),
    (oci.Hook, "timeout"): st.integers(-1, 3),
    (oci.LinuxNamespace, "type"): _bad(*NAMESPACE_TYPES, bad=("foo",)),
    (oci.LinuxNamespace, "path"): st.sampled_from(["/proc/1/ns/net", "ns"]),
    (oci.LinuxDevice, "type"): _bad("c", "b", "u", "p", bad=("x", "cb")),
    (oci.LinuxDevice, "path"): st.sampled_from(["/dev/fuse", "dev/x"]),
    (oci.LinuxDevice, "file_mode"): st.integers(0, 600),
    (oci.LinuxDeviceCgroup, "type"): _bad("a", "b", "c", bad=("z",)),
    (oci.LinuxDeviceCgroup, "access"): st.sampled_from(["rwm", "r", "", "x"]),
    (oci.LinuxHugepageLimit, "page_size"): st.sampled_from(["2MB", "1GB", "64kB", "0MB"]),
    (oci.LinuxIntelRdt, "mem_bw_schema"): st.sampled_from(["MB:0=20", "L3:0=ff", "MB:\n"]),
    (oci.LinuxMemoryPolicy, "mode"): _bad("MPOL_BIND", "MPOL_LOCAL", "MPOL_DEFAULT"),
    (oci.LinuxMemoryPolicy, "flags"): st.lists(_bad("MPOL_F_STATIC_NODES"), max_size=2),
    (oci.LinuxMemory, "swappiness"): st.integers(0, 120),
    (oci.LinuxSeccomp, "default_action"): _ACTIONS,
    (oci.LinuxSeccomp, "architectures"): st.lists(_bad("SCMP_ARCH_X86_64", "SCMP_ARCH_RISCV64"),
                                                  max_size=2),
    (oci.LinuxSeccomp, "flags"): st.lists(_bad("SECCOMP_FILTER_FLAG_TSYNC",
                                               "SECCOMP_FILTER_FLAG_LOG"), max_size=2),
    (oci.LinuxSeccomp, "listener_path"): st.sampled_from(["/run/seccomp.sock"]),
    (oci.LinuxSyscall, "action"): _ACTIONS,
    (oci.LinuxSyscall, "names"): st.lists(st.sampled_from(["read", "mount"]), max_size=2),
    (oci.LinuxSeccompArg, "op"): _bad("SCMP_CMP_EQ", "SCMP_CMP_MASKED_EQ"),
    (oci.Linux, "rootfs_propagation"): _bad("private", "shared", "slave", "unbindable"),
    (oci.Linux, "masked_paths"): st.lists(st.sampled_from(["/proc/kcore", "proc"]), max_size=2),
    (oci.LinuxPersonality, "domain"): _bad("LINUX", "LINUX32"),
    (oci.State, "status"): _bad("creating", "created", "running", "stopped", bad=("paused",)),
    (oci.State, "pid"): st.integers(-2, 10**6),
    (oci.State, "oci_version"): st.sampled_from(["1.0.2", "1.3.0"]),
    (ft.Features, "oci_version_min"): st.sampled_from(["1.0.0"]),
    (ft.Features, "oci_version_max"): st.sampled_from(["1.0.2-dev", "1.3.0"]),
    (ft.LinuxFeatures, "namespaces"): st.lists(_bad(*NAMESPACE_TYPES, bad=("foo",)), max_size=3),
    (ft.LinuxFeatures, "capabilities"): _CAPS,
    (ft.SeccompFeatures, "actions"): st.lists(_ACTIONS, max_size=2),
}


def _strip(tp: Any) -> Any:
    args = [a for a in typing.get_args(tp) if a is not type(None)]
    return args[0] if type(None) in typing.get_args(tp) else tp


def _value(tp: Any, kind: str | None, schema_values: bool) -> st.SearchStrategy[Any]:
    tp = _strip(tp)
    origin = typing.get_origin(tp)
    if tp is str:
        return st.text(max_size=8)
    if tp is bool:
        return st.booleans()
    if tp is int:
        lo, hi = INT_RANGES[kind or "int64"]
        return st.integers(lo, hi)
    if origin is list:
        return st.lists(_value(typing.get_args(tp)[0], kind, schema_values), max_size=2)
    if origin is dict:
        item = _value(typing.get_args(tp)[1], kind, schema_values)
        return st.dictionaries(st.text(max_size=6), item, max_size=2)
    if attrs.has(tp):
        return wire_docs(tp, schema_values=schema_values)
    raise TypeError(tp)


@functools.cache
def wire_docs(cls: type, *, schema_values: bool = False) -> st.SearchStrategy[dict[str, Any]]:
    """JSON documents for model ``cls`` (see the module docstring)."""
    required: dict[str, st.SearchStrategy[Any]] = {}
    optional: dict[str, st.SearchStrategy[Any]] = {}
    for f in wire_fields(cls):
        value = SCHEMA_VALUES.get((cls, f.name)) if schema_values else None
        if value is None:
            value = _value(f.type, f.int_kind, schema_values)
        if f.required:
            required[f.wire] = value
        elif schema_values:  # mostly real values, rarely an explicit null
            optional[f.wire] = st.integers(0, 29).flatmap(
                lambda i, v=value: st.none() if i == 0 else v  # type: ignore[misc]
            )
        else:
            optional[f.wire] = value | st.none()
    known = st.fixed_dictionaries(required, optional=optional)
    extras = st.dictionaries(EXTRA_KEYS, JSON, max_size=2)
    return st.builds(lambda k, e: {**e, **k}, known, extras)


def model_objects(cls: type, *, schema_values: bool = False) -> st.SearchStrategy[Any]:
    """Model instances of ``cls`` (decoded from ``wire_docs``)."""
    from podkit.oci.codec import structure

    return wire_docs(cls, schema_values=schema_values).map(lambda d: structure(d, cls))


def schema_validator(shared: Path, name: str = "config-schema.json") -> Any:
    """A jsonschema Draft4 validator for one of the official schema files (cross-file refs)."""
    from jsonschema import Draft4Validator
    from referencing import Registry, Resource
    from referencing.jsonschema import DRAFT4

    base = shared / "fixtures" / "oci" / "schema"
    registry: Registry[Any] = Registry().with_resources(
        (p.name, Resource.from_contents(json.loads(p.read_text()), default_specification=DRAFT4))
        for p in base.glob("*.json")
    )
    return Draft4Validator(json.loads((base / name).read_text()), registry=registry)


# Every object and field of runtime-spec 1.3 config.json for Linux (reference/oci.md section 2).
EVERYTHING: dict[str, Any] = {
    "ociVersion": "1.3.0",
    "root": {"path": "rootfs", "readonly": True},
    "mounts": [
        {"destination": "/proc", "type": "proc", "source": "proc", "options": ["nosuid"]},
        {
            "destination": "/data", "type": "bind", "source": "/srv", "options": ["rbind", "idmap"],
            "uidMappings": [{"containerID": 0, "hostID": 100000, "size": 65536}],
            "gidMappings": [{"containerID": 0, "hostID": 100000, "size": 65536}],
        },
    ],
    "process": {
        "terminal": True,
        "consoleSize": {"height": 25, "width": 80},
        "user": {"uid": 1000, "gid": 1000, "umask": 18, "additionalGids": [10, 20]},
        "args": ["sh", "-c", "true"],
        "env": ["PATH=/bin"],
        "cwd": "/home/app",
        "capabilities": {
            "bounding": ["CAP_KILL"], "effective": ["CAP_KILL"], "inheritable": [],
            "permitted": ["CAP_KILL"], "ambient": [],
        },
        "rlimits": [{"type": "RLIMIT_NOFILE", "soft": 1024, "hard": 4096}],
        "noNewPrivileges": True,
        "apparmorProfile": "unconfined",
        "oomScoreAdj": 0,
        "selinuxLabel": "system_u:system_r:container_t:s0",
        "scheduler": {
            "policy": "SCHED_DEADLINE", "nice": -5, "priority": 0,
            "flags": ["SCHED_FLAG_RESET_ON_FORK"], "runtime": 10, "deadline": 20, "period": 30,
        },
        "ioPriority": {"class": "IOPRIO_CLASS_BE", "priority": 4},
        "execCPUAffinity": {"initial": "0", "final": "0-3"},
    },
    "hostname": "h",
    "domainname": "d.example",
    "hooks": {
        kind: [{"path": "/bin/hook", "args": ["hook", kind], "env": ["A=1"], "timeout": 5}]
        for kind in (
            "prestart", "createRuntime", "createContainer", "startContainer", "poststart",
            "poststop",
        )
    },
    "annotations": {"org.example.key": "value"},
    "linux": {
        "namespaces": [
            {"type": t} for t in ("pid", "network", "mount", "ipc", "uts", "cgroup", "time")
        ] + [{"type": "user"}],
        "uidMappings": [{"containerID": 0, "hostID": 100000, "size": 65536}],
        "gidMappings": [{"containerID": 0, "hostID": 100000, "size": 65536}],
        "timeOffsets": {"boottime": {"secs": -5, "nanosecs": 7}, "monotonic": {"secs": 1}},
        "devices": [
            {"type": "c", "path": "/dev/fuse", "major": 10, "minor": 229, "fileMode": 438,
             "uid": 0, "gid": 0},
            {"type": "p", "path": "/dev/fifo"},
        ],
        "netDevices": {"eth1": {"name": "net1"}, "eth2": {}},
        "cgroupsPath": "/podkit/c1",
        "resources": {
            "devices": [
                {"allow": False, "access": "rwm"},
                {"allow": True, "type": "c", "major": 10, "minor": 229, "access": "rw"},
            ],
            "memory": {
                "limit": 1 << 30, "reservation": 1 << 29, "swap": 1 << 31, "kernel": -1,
                "kernelTCP": -1, "swappiness": 0, "disableOOMKiller": False,
                "useHierarchy": True, "checkBeforeUpdate": True,
            },
            "cpu": {
                "shares": 1024, "quota": 100000, "burst": 1000, "period": 100000,
                "realtimeRuntime": 950000, "realtimePeriod": 1000000, "cpus": "0-1", "mems": "0",
                "idle": 0,
            },
            "pids": {"limit": -1},
            "blockIO": {
                "weight": 500, "leafWeight": 300,
                "weightDevice": [{"major": 8, "minor": 0, "weight": 500, "leafWeight": 300}],
                "throttleReadBpsDevice": [{"major": 8, "minor": 0, "rate": 600}],
                "throttleWriteBpsDevice": [{"major": 8, "minor": 0, "rate": 600}],
                "throttleReadIOPSDevice": [{"major": 8, "minor": 0, "rate": 60}],
                "throttleWriteIOPSDevice": [{"major": 8, "minor": 0, "rate": 60}],
            },
            "hugepageLimits": [{"pageSize": "2MB", "limit": 1 << 21}],
            "network": {"classID": 1048577, "priorities": [{"name": "eth0", "priority": 5}]},
            "rdma": {"mlx5_1": {"hcaHandles": 3, "hcaObjects": 10000}},
            "unified": {"memory.high": "1073741824"},
        },
        "intelRdt": {
            "closID": "guaranteed", "schemata": ["L3:0=ff"], "l3CacheSchema": "L3:0=ff",
            "memBwSchema": "MB:0=20", "enableMonitoring": True,
        },
        "memoryPolicy": {"mode": "MPOL_BIND", "nodes": "0-1", "flags": ["MPOL_F_STATIC_NODES"]},
        "sysctl": {"net.ipv4.ip_forward": "1"},
        "seccomp": {
            "defaultAction": "SCMP_ACT_ERRNO", "defaultErrnoRet": 1,
            "architectures": ["SCMP_ARCH_X86_64"], "flags": ["SECCOMP_FILTER_FLAG_LOG"],
            "listenerPath": "/run/seccomp.sock", "listenerMetadata": "meta",
            "syscalls": [
                {"names": ["mount"], "action": "SCMP_ACT_NOTIFY", "errnoRet": 1,
                 "args": [{"index": 0, "value": 1, "valueTwo": 2, "op": "SCMP_CMP_MASKED_EQ"}]},
            ],
        },
        "rootfsPropagation": "private",
        "maskedPaths": ["/proc/kcore"],
        "readonlyPaths": ["/proc/sys"],
        "mountLabel": "system_u:object_r:container_file_t:s0",
        "personality": {"domain": "LINUX", "flags": []},
    },
}
