"""Integration: specs from ``default_spec()`` + options run under real runc and crun.

The container process reports what it sees (hostname, env, ids, mounts, capabilities, cgroup,
read-only root) and the test compares it with what the options asked for. runc and crun are
driven directly with ``subprocess`` (``<runtime> --root <tmp> run --bundle <dir> <id>``); crun
needs the private mount namespace of ``scripts/isolated`` (no cgroup2 ``unified`` mount).
"""

from __future__ import annotations

import os
import re
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from _runtimes import OneShotRuntime, report
from podkit import oci
from support import make_busybox_rootfs, require, require_binary, require_isolated, require_root

pytestmark = pytest.mark.integration

CAPS = ["CAP_CHOWN", "CAP_KILL", "CAP_NET_BIND_SERVICE"]  # bits 0, 5, 10
CAP_MASK = (1 << 0) | (1 << 5) | (1 << 10)

SCRIPT = """
echo "hostname=$(hostname)"
echo "greeting=$PODKIT_GREETING"
echo "id=$(id -u):$(id -g):$(id -G)"
echo "cap=$(grep CapEff /proc/self/status | cut -f2)"
echo "oom=$(cat /proc/self/oom_score_adj)"
grep -E ':(memory|pids|[a-z,]*memory[a-z,]*):' /proc/self/cgroup | head -n1 | sed 's/^/cgroup=/'
grep -E ' /data tmpfs ' /proc/mounts | sed 's/^/tmpfsmount=/'
echo "bind=$(cat /mnt/host/hello.txt)"
echo written > /data/file && echo "tmpfs=$(cat /data/file)"
touch /tmp/probe 2>/dev/null && echo root=rw || echo root=ro
"""


@pytest.fixture(scope="module")
def rootfs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A private busybox rootfs (the tests add mountpoints) with users app (1000) and groups."""
    require(Path("/bin/busybox").exists(), "busybox-static not installed (/bin/busybox)")
    root = make_busybox_rootfs(tmp_path_factory.mktemp("oci-rt") / "rootfs")
    (root / "data").mkdir(mode=0o1777)  # runc gives a tmpfs the mode of its mountpoint
    (root / "data").chmod(0o1777)
    (root / "mnt" / "host").mkdir(parents=True)
    return root


class Runtime(OneShotRuntime):
    """A runtime whose containers get fresh ``pk-oci-`` IDs."""

    def run(self, bundle: Path, spec: oci.Spec) -> subprocess.CompletedProcess[str]:  # type: ignore[override]
        return super().run(f"pk-oci-{uuid.uuid4().hex[:12]}", spec, bundle)


@pytest.fixture(params=["runc", "crun"])
def runtime(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Runtime]:
    require_root()
    if request.param == "crun":
        require_isolated()  # crun 1.8.1 refuses hybrid cgroups outside scripts/isolated
    rt = Runtime(require_binary(request.param), tmp_path / f"{request.param}-root")
    try:
        yield rt
    finally:
        rt.cleanup()
    assert not list(rt.root.glob("pk-oci-*")), "runtime state left behind"


def _cgroup_dirs(name: str) -> list[Path]:
    """The cgroup ``name`` in every mounted hierarchy (cgroup v1 controllers, or v2).

    A hierarchy root has ``cgroup.procs``; the tmpfs scripts/isolated puts over ``unified``
    (where crun leaves directories that vanish with the namespace) does not count.
    """
    root = Path("/sys/fs/cgroup")
    candidates = [root / name, *root.glob(f"*/{name}")]
    return [
        p for p in candidates
        if p.is_dir() and os.path.ismount(p.parent) and (p.parent / "cgroup.procs").exists()
    ]


def test_default_spec_with_options_runs(runtime: Runtime, rootfs: Path, tmp_path: Path) -> None:
    host_dir = tmp_path / "host"
    host_dir.mkdir()
    (host_dir / "hello.txt").write_text("hello from the host\n")
    cgroup = f"pk-oci-cg-{uuid.uuid4().hex[:10]}"
    spec = oci.generate(
        oci.default_spec(),
        oci.with_rootfs_path(str(rootfs)),
        oci.with_rootfs_readonly(),
        oci.with_process_args("sh", "-c", SCRIPT),
        oci.with_default_path_env(),
        oci.with_env(["PODKIT_GREETING=hello from podkit"]),
        oci.with_hostname("pk-oci-host"),
        oci.with_user("app"),
        oci.with_additional_gids("app"),
        oci.with_capabilities(CAPS),
        oci.with_ambient_capabilities(CAPS),  # uid 1000 keeps them across execve
        oci.with_oom_score_adj(500),
        oci.with_cgroup(f"/{cgroup}"),
        oci.with_pids_limit(64),
        oci.with_mounts([
            oci.Mount(destination="/data", type="tmpfs", source="tmpfs",
                      options=["nosuid", "nodev", "mode=1777", "size=1m"]),
            oci.Mount(destination="/mnt/host", type="bind", source=str(host_dir),
                      options=["rbind", "ro"]),
        ]),
        oci.without_run_mount(),
        oci.with_minimum_oci_version(),  # crun 1.8 refuses ociVersion >= 1.2.0
    )
    assert oci.validate(spec) == []

    result = runtime.run(tmp_path / "bundle", spec)

    assert result.returncode == 0, result.stderr
    seen = report(result.stdout)
    assert seen["hostname"] == "pk-oci-host"
    assert seen["greeting"] == "hello from podkit"
    uid, gid, groups = seen["id"].split(":")
    assert (uid, gid) == ("1000", "1000")
    assert sorted(map(int, groups.split())) == [10, 1000, 2000]  # wheel, app, extra
    assert int(seen["cap"], 16) == CAP_MASK
    assert seen["oom"] == "500"
    assert seen["cgroup"].endswith(f":/{cgroup}")
    assert seen["tmpfsmount"].startswith("tmpfs /data tmpfs ")
    assert "nosuid" in seen["tmpfsmount"] and "nodev" in seen["tmpfsmount"]
    assert seen["bind"] == "hello from the host"
    assert seen.get("tmpfs") == "written", result.stdout + result.stderr
    assert seen["root"] == "ro"
    assert not (rootfs / "tmp" / "probe").exists()
    assert _cgroup_dirs(cgroup) == [], "the container's cgroup outlived it"


def test_root_process_gets_exactly_the_capabilities_set(
    runtime: Runtime, rootfs: Path, tmp_path: Path
) -> None:
    spec = oci.generate(
        oci.default_spec(),
        oci.with_rootfs_path(str(rootfs)),
        oci.with_rootfs_readonly(),
        oci.with_cgroup(f"/pk-oci-cg-{uuid.uuid4().hex[:10]}"),
        oci.with_default_path_env(),
        oci.with_dropped_capabilities(oci.DEFAULT_UNIX_CAPABILITIES),
        oci.with_added_capabilities(["CAP_SYS_CHROOT", "CAP_KILL"]),
        oci.with_process_args("sh", "-c", "grep -E '^Cap(Eff|Bnd)' /proc/self/status; id -u"),
        oci.with_minimum_oci_version(),
    )
    result = runtime.run(tmp_path / "bundle", spec)
    assert result.returncode == 0, result.stderr
    caps = dict(re.findall(r"(Cap\w+):\s+([0-9a-f]+)", result.stdout))
    expected = (1 << 18) | (1 << 5)
    assert int(caps["CapEff"], 16) == expected and int(caps["CapBnd"], 16) == expected
    assert result.stdout.split()[-1] == "0"


def test_failing_process_exit_code_and_no_leftovers(
    runtime: Runtime, rootfs: Path, tmp_path: Path
) -> None:
    cgroup = f"pk-oci-cg-{uuid.uuid4().hex[:10]}"
    spec = oci.generate(
        oci.default_spec(),
        oci.with_rootfs_path(str(rootfs)),
        oci.with_cgroup(f"/{cgroup}"),
        oci.with_default_path_env(),
        oci.with_process_args("sh", "-c", "exit 7"),
        oci.with_minimum_oci_version(),
    )
    result = runtime.run(tmp_path / "bundle", spec)
    assert result.returncode == 7
    assert _cgroup_dirs(cgroup) == []


def test_runtime_reports_a_missing_binary(runtime: Runtime, rootfs: Path, tmp_path: Path) -> None:
    spec = oci.generate(
        oci.default_spec(),
        oci.with_rootfs_path(str(rootfs)),
        oci.with_cgroup(f"/pk-oci-cg-{uuid.uuid4().hex[:10]}"),
        oci.with_process_args("/bin/does-not-exist"),
        oci.with_minimum_oci_version(),
    )
    result = runtime.run(tmp_path / "bundle", spec)
    assert result.returncode != 0
    assert "does-not-exist" in result.stderr or "No such file" in result.stderr


def test_runc_spec_template_runs_under_runc(rootfs: Path, tmp_path: Path) -> None:
    require_root()
    rt = Runtime(require_binary("runc"), tmp_path / "runc-root")
    spec = oci.generate(
        oci.runc_spec(),
        oci.with_rootfs_path(str(rootfs)),
        oci.with_process_args("hostname"),
        oci.with_cgroup(f"/pk-oci-cg-{uuid.uuid4().hex[:10]}"),
    )
    spec.process.terminal = False  # type: ignore[union-attr]
    try:
        result = rt.run(tmp_path / "bundle", spec)
    finally:
        rt.cleanup()
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "runc"
    assert os.path.isdir(rootfs / "bin")
