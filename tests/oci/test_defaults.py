"""Tests for podkit.oci.defaults: containerd's default Unix spec and the ``runc spec`` template."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from podkit import oci
from podkit.errors import InvalidArgumentError
from support import require_binary

from .helpers import schema_validator


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


def _generated_specs(tmp_path: Path) -> dict[str, oci.Spec]:
    rootfs = tmp_path / "rootfs"
    (rootfs / "etc").mkdir(parents=True)
    (rootfs / "etc" / "passwd").write_text("app:x:1000:1000::/:/bin/sh\n")
    (rootfs / "etc" / "group").write_text("app:x:1000:\nextra:x:2000:app\n")
    base = oci.default_spec("web", "k8s.io")
    return {
        "default": base,
        "runc": oci.runc_spec(),
        "process": oci.generate(
            base, oci.with_process_args("sh", "-c", "true"), oci.with_default_path_env(),
            oci.with_env({"A": "1"}), oci.with_tty(), oci.with_tty_size(80, 24),
            oci.with_process_cwd("/srv"), oci.with_rlimit("RLIMIT_NPROC", 10, 20),
            oci.with_oom_score_adj(100), oci.with_umask(0o22), oci.with_no_new_privileges(),
        ),
        "user": oci.generate(
            base, oci.with_rootfs_path(str(rootfs)), oci.with_user("app"),
            oci.with_additional_gids("app"), oci.with_user_namespace([(0, 100000, 65536)],
                                                                     [(0, 100000, 65536)]),
            oci.with_ambient_capabilities(["CAP_NET_BIND_SERVICE"]),
        ),
        "linux": oci.generate(
            base, oci.with_hostname("h"), oci.with_domainname("d"),
            oci.with_linux_namespace("network", "/run/netns/pk"), oci.with_host_namespace("ipc"),
            oci.with_linux_device("/dev/null", "rwm"), oci.with_default_unix_devices(),
            oci.with_sysctls({"net.ipv4.ip_forward": "1"}), oci.with_annotations({"a.b/c": "d"}),
            oci.with_host_resolvconf(), oci.with_dev_shm_size(1024), oci.without_run_mount(),
            oci.with_rootfs_readonly(), oci.with_selinux_label("system_u:system_r:x:s0"),
        ),
        "resources": oci.generate(
            base, oci.with_memory_limit(1 << 30), oci.with_memory_swap(2 << 30),
            oci.with_cpu_shares(512), oci.with_cpus("0-1"), oci.with_cpus_mems("0"),
            oci.with_cpu_cfs(50000, 100000), oci.with_cpu_burst(10), oci.with_cpu_rt(1, 2),
            oci.with_pids_limit(100), oci.with_hugepage_limits({"2MB": 0}),
            oci.with_unified({"memory.high": "max"}), oci.with_cgroup("/podkit/web"),
            oci.with_blockio(oci.LinuxBlockIO(weight=10)), oci.with_rdt("c1", "L3:0=f", "MB:0=50"),
        ),
        "privileged": oci.generate(
            base, oci.with_privileged(), oci.with_all_devices_allowed(), oci.with_new_privileges(),
        ),
        "minimum-version": oci.generate(base, oci.with_minimum_oci_version()),
    }


def test_default_and_generated_specs_match_the_official_schema(
    shared: Path, tmp_path: Path
) -> None:
    validator = schema_validator(shared)
    for name, spec in _generated_specs(tmp_path).items():
        doc = json.loads(spec.to_json())
        errors = [f"{list(e.absolute_path)}: {e.message}" for e in validator.iter_errors(doc)]
        assert errors == [], name
        assert oci.validate(spec) == [], name


def test_schema_check_can_fail(shared: Path) -> None:
    doc = oci.default_spec().to_dict()
    doc["process"]["rlimits"][0]["type"] = "nofile"
    assert list(schema_validator(shared).iter_errors(doc))


def test_minimum_oci_version_of_the_default_spec() -> None:
    assert oci.generate(oci.default_spec(), oci.with_minimum_oci_version()).oci_version == "1.0.0"
    spec = oci.generate(
        oci.default_spec(), oci.with_domainname("d"), oci.with_minimum_oci_version()
    )
    assert spec.oci_version == "1.1.0"
    assert oci.generate(oci.default_spec(), oci.with_oci_version("1.0.2")).oci_version == "1.0.2"
    with pytest.raises(InvalidArgumentError, match=r"ociVersion '1\.0'"):
        oci.with_oci_version("1.0")
