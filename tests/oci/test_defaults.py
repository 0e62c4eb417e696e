"""Tests for podkit.oci.defaults: containerd's default Unix spec and the ``runc spec`` template."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from conftest import require_binary
from podkit import oci
from podkit.errors import InvalidArgumentError


def test_default_spec_is_containerds_default_unix_spec() -> None:
    d = oci.default_spec("web", "k8s.io").to_dict()
    caps = list(oci.DEFAULT_UNIX_CAPABILITIES)
    assert d["ociVersion"] == oci.VERSION
    assert d["root"] == {"path": "rootfs"}
    assert d["process"] == {
        "user": {"uid": 0, "gid": 0},
        "cwd": "/",
        "capabilities": {"bounding": caps, "effective": caps, "permitted": caps},
        "rlimits": [{"type": "RLIMIT_NOFILE", "hard": 1024, "soft": 1024}],
        "noNewPrivileges": True,
    }
    assert "env" not in d["process"] and "args" not in d["process"]
    assert d["linux"] == {
        "resources": {"devices": [{"allow": False, "access": "rwm"}]},
        "cgroupsPath": "/k8s.io/web",
        "namespaces": [{"type": t} for t in ("pid", "ipc", "uts", "mount", "network")],
        "maskedPaths": [
            "/proc/acpi", "/proc/asound", "/proc/kcore", "/proc/keys", "/proc/latency_stats",
            "/proc/timer_list", "/proc/timer_stats", "/proc/sched_debug", "/sys/firmware",
            "/sys/devices/virtual/powercap", "/proc/scsi",
        ],
        "readonlyPaths": ["/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger"],
    }
    assert d["mounts"] == [
        {"destination": "/proc", "type": "proc", "source": "proc",
         "options": ["nosuid", "noexec", "nodev"]},
        {"destination": "/dev", "type": "tmpfs", "source": "tmpfs",
         "options": ["nosuid", "strictatime", "mode=755", "size=65536k"]},
        {"destination": "/dev/pts", "type": "devpts", "source": "devpts",
         "options": ["nosuid", "noexec", "newinstance", "ptmxmode=0666", "mode=0620", "gid=5"]},
        {"destination": "/dev/shm", "type": "tmpfs", "source": "shm",
         "options": ["nosuid", "noexec", "nodev", "mode=1777", "size=65536k"]},
        {"destination": "/dev/mqueue", "type": "mqueue", "source": "mqueue",
         "options": ["nosuid", "noexec", "nodev"]},
        {"destination": "/sys", "type": "sysfs", "source": "sysfs",
         "options": ["nosuid", "noexec", "nodev", "ro"]},
        {"destination": "/run", "type": "tmpfs", "source": "tmpfs",
         "options": ["nosuid", "strictatime", "mode=755", "size=65536k"]},
    ]
    assert set(d) == {"ociVersion", "root", "process", "linux", "mounts"}


def test_default_capabilities_are_containerd_v2_0_set() -> None:
    assert len(oci.DEFAULT_UNIX_CAPABILITIES) == 14
    assert {"CAP_MKNOD", "CAP_NET_RAW", "CAP_AUDIT_WRITE", "CAP_KILL"} <= set(
        oci.DEFAULT_UNIX_CAPABILITIES
    )
    assert "CAP_SYS_ADMIN" not in oci.DEFAULT_UNIX_CAPABILITIES


def test_default_spec_without_id_has_no_cgroups_path() -> None:
    spec = oci.default_spec()
    assert spec.linux is not None and spec.linux.cgroups_path is None
    assert oci.default_spec("c1").linux.cgroups_path == "/default/c1"  # type: ignore[union-attr]


@pytest.mark.parametrize(("id_", "ns"), [("../x", "default"), ("a/b", "default"), ("ok", "..")])
def test_default_spec_rejects_ids_that_escape_the_cgroup(id_: str, ns: str) -> None:
    with pytest.raises(InvalidArgumentError, match=r"\.\.|a/b"):
        oci.default_spec(id_, ns)


def test_each_call_returns_a_fresh_spec() -> None:
    a, b = oci.default_spec(), oci.default_spec()
    assert a == b
    a.mounts[0].options.append("ro")  # type: ignore[index,union-attr]
    a.process.capabilities.bounding.clear()  # type: ignore[union-attr]
    assert b == oci.default_spec()
    assert oci.default_mounts()[0].options == ["nosuid", "noexec", "nodev"]


def test_default_spec_round_trips_through_json() -> None:
    spec = oci.default_spec("x")
    assert oci.Spec.from_json(spec.to_json()) == spec


def test_known_capabilities_are_indexed_by_bit() -> None:
    caps = oci.KNOWN_CAPABILITIES
    assert len(caps) == len(set(caps)) == 41
    assert caps[0] == "CAP_CHOWN" and caps[5] == "CAP_KILL" and caps[21] == "CAP_SYS_ADMIN"
    assert caps[40] == "CAP_CHECKPOINT_RESTORE"


@pytest.mark.integration
def test_runc_spec_equals_real_runc_spec_output(tmp_path: Path) -> None:
    runc = require_binary("runc")
    subprocess.run([runc, "spec"], cwd=tmp_path, check=True, timeout=30, env={"PATH": "/bin"})
    real = json.loads((tmp_path / "config.json").read_text())
    assert oci.runc_spec().to_dict() == real
    assert real["ociVersion"] == oci.RUNC_SPEC_VERSION
