"""Integration: seccomp profiles from the builders, enforced by real runc and crun.

Containers built by ``build_container_spec`` / ``build_sandbox_spec`` run a busybox shell that
reports what the kernel let it do. RuntimeDefault must allow ordinary work and refuse namespace
creation and mounts unless CAP_SYS_ADMIN is kept; Unconfined is the control (the same
``unshare -U`` succeeds, so it is seccomp that refused it); a Localhost profile file decides
the errno a blocked syscall returns.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from _runtimes import OneShotRuntime, report
from podkit import oci
from podkit.container import ContainerConfigError, PodContext, build_container_spec
from podkit.pods.config import (
    Capability,
    ContainerConfig,
    ContainerMetadata,
    LinuxContainerConfig,
    LinuxContainerSecurityContext,
    LinuxPodSandboxConfig,
    LinuxSandboxSecurityContext,
    NamespaceMode,
    NamespaceOption,
    PodSandboxMetadata,
    ProfileType,
    SandboxConfig,
    SecurityProfile,
)
from podkit.runtime import Runc
from podkit.sandbox import SandboxConfigError, SandboxFiles, SandboxManager, build_sandbox_spec
from support import require_binary, require_isolated, require_root

from ._pods import managed, snapshot

pytestmark = pytest.mark.integration

RUNTIME_DEFAULT = SecurityProfile(profile_type=ProfileType.RUNTIME_DEFAULT)
UNCONFINED = SecurityProfile(profile_type=ProfileType.UNCONFINED)

PROBE = """
echo "seccomp=$(grep '^Seccomp:' /proc/self/status | cut -f2)"
ls / >/dev/null && echo ls=ok
cat /proc/self/status >/dev/null && echo cat=ok
(echo child >/dev/null) && echo fork=ok
unshare -U true 2>/tmp/err; echo "userns=$? $(cat /tmp/err)"
unshare -m true 2>/tmp/err; echo "mountns=$? $(cat /tmp/err)"
mount -t tmpfs pk-seccomp /tmp 2>/tmp/err; echo "mount=$? $(cat /tmp/err)"
"""


class Runtime(OneShotRuntime):
    """A runtime whose runs must succeed; they return the ``key=value`` lines printed."""

    def run(self, cid: str, spec: oci.Spec, bundle: Path) -> dict[str, str]:  # type: ignore[override]
        assert spec.linux is not None and spec.linux.cgroups_path
        out = super().run(cid, spec, bundle)
        assert out.returncode == 0, out.stdout + out.stderr
        return report(out.stdout)


@pytest.fixture(params=["runc", "crun"])
def runtime(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Runtime]:
    require_root()
    require_isolated()  # crun 1.8.1 refuses hybrid cgroups outside scripts/isolated
    rt = Runtime(require_binary(request.param), tmp_path / f"{request.param}-root")
    try:
        yield rt
    finally:
        rt.cleanup()
    assert not rt.root.exists() or not any(rt.root.iterdir()), "runtime state left behind"


@pytest.fixture
def files(tmp_path: Path) -> SandboxFiles:
    files = SandboxFiles.under(tmp_path / "pod")
    Path(files.shm).mkdir(parents=True)
    Path(files.hostname).write_text("pk-seccomp\n")
    Path(files.hosts).write_text("127.0.0.1 localhost\n")
    Path(files.resolv_conf).write_text("")
    return files


def pod_config(seccomp: SecurityProfile | None = None) -> SandboxConfig:
    return SandboxConfig(
        metadata=PodSandboxMetadata(name="pk-seccomp", uid="u1", namespace="test"),
        linux=LinuxPodSandboxConfig(security_context=LinuxSandboxSecurityContext(
            seccomp=seccomp,
            namespace_options=NamespaceOption(network=NamespaceMode.NODE),
        )),
    )


def new_id() -> str:
    return f"pk-seccomp-{uuid.uuid4().hex[:12]}"


def app_spec(
    cid: str, rootfs: Path, files: SandboxFiles, script: str, seccomp: SecurityProfile | None,
    caps: Capability | None = None,
) -> oci.Spec:
    config = ContainerConfig(
        metadata=ContainerMetadata(name="app"), image=str(rootfs),
        command=["sh", "-c", script],
        linux=LinuxContainerConfig(security_context=LinuxContainerSecurityContext(
            seccomp=seccomp, capabilities=caps,
            namespace_options=NamespaceOption(pid=NamespaceMode.CONTAINER),
        )),
    )
    context = PodContext(id="pk-seccomp-pod", config=pod_config(), files=files,
                         namespace_paths={})
    return build_container_spec(config, context, id=cid, rootfs=str(rootfs))


def run_app(
    runtime: Runtime, tmp_path: Path, rootfs: Path, files: SandboxFiles, script: str,
    seccomp: SecurityProfile | None, caps: Capability | None = None,
) -> dict[str, str]:
    cid = new_id()
    spec = app_spec(cid, rootfs, files, script, seccomp, caps)
    return runtime.run(cid, spec, tmp_path / "bundle")


def test_runtime_default_allows_ordinary_work_and_refuses_namespaces(
    runtime: Runtime, rootfs: Path, files: SandboxFiles, tmp_path: Path
) -> None:
    seen = run_app(runtime, tmp_path, rootfs, files, PROBE, RUNTIME_DEFAULT)
    assert seen["seccomp"] == "2"  # SECCOMP_MODE_FILTER
    assert (seen["ls"], seen["cat"], seen["fork"]) == ("ok", "ok", "ok")
    for key in ("userns", "mountns", "mount"):
        assert not seen[key].startswith("0"), (key, seen)
    assert "Operation not permitted" in seen["userns"]
    assert "Operation not permitted" in seen["mountns"]


def test_unconfined_is_the_control(
    runtime: Runtime, rootfs: Path, files: SandboxFiles, tmp_path: Path
) -> None:
    """Without a filter the same user namespace is allowed: seccomp refused it above."""
    seen = run_app(runtime, tmp_path, rootfs, files, PROBE, UNCONFINED)
    assert seen["seccomp"] == "0"
    assert seen["userns"].startswith("0"), seen
    assert not seen["mountns"].startswith("0")  # no CAP_SYS_ADMIN either way


def test_runtime_default_with_cap_sys_admin_allows_mounts(
    runtime: Runtime, rootfs: Path, files: SandboxFiles, tmp_path: Path
) -> None:
    caps = Capability(add_capabilities=["SYS_ADMIN"])
    seen = run_app(runtime, tmp_path, rootfs, files, PROBE, RUNTIME_DEFAULT, caps)
    assert seen["seccomp"] == "2"
    assert seen["userns"].startswith("0"), seen
    assert seen["mountns"].startswith("0"), seen
    assert seen["mount"].startswith("0"), seen


def test_localhost_profile_file_decides_the_errno(
    runtime: Runtime, rootfs: Path, files: SandboxFiles, tmp_path: Path
) -> None:
    profile = tmp_path / "block-mkdir.json"
    profile.write_text(json.dumps({
        "defaultAction": "SCMP_ACT_ALLOW",
        "syscalls": [{"names": ["mkdir", "mkdirat"], "action": "SCMP_ACT_ERRNO",
                      "errnoRet": 122}],  # EDQUOT: nothing else would say "Disk quota"
    }))
    script = ("echo \"seccomp=$(grep '^Seccomp:' /proc/self/status | cut -f2)\";"
              " mkdir /tmp/pk-x 2>/tmp/err; echo \"mkdir=$? $(cat /tmp/err)\";"
              " touch /tmp/pk-file && echo touch=ok")
    localhost = SecurityProfile(profile_type=ProfileType.LOCALHOST, localhost_ref=str(profile))
    seen = run_app(runtime, tmp_path, rootfs, files, script, localhost)
    assert seen["seccomp"] == "2"
    assert seen["mkdir"].startswith("1 ") and "Disk quota exceeded" in seen["mkdir"], seen
    assert seen["touch"] == "ok"


def test_default_errno_ret_is_honoured(
    runtime: Runtime, rootfs: Path, files: SandboxFiles, tmp_path: Path
) -> None:
    """runc 1.1.5 and crun 1.8.1 report an older runtime-spec but apply defaultErrnoRet."""
    profile = oci.default_profile()
    profile.default_errno_ret = 122
    path = tmp_path / "default-edquot.json"
    oci.codec.dump(profile, path)
    localhost = SecurityProfile(profile_type=ProfileType.LOCALHOST, localhost_ref=str(path))
    script = "unshare -U true 2>/tmp/err; echo \"userns=$? $(cat /tmp/err)\""
    seen = run_app(runtime, tmp_path, rootfs, files, script, localhost)
    assert "Disk quota exceeded" in seen["userns"], seen
    # so podkit's runtime adapter does not warn that they would be ignored
    spec = oci.default_spec()
    oci.with_seccomp_profile(profile)(spec)
    assert spec.linux is not None and spec.linux.seccomp is not None
    assert any(s.errno_ret for s in spec.linux.seccomp.syscalls or [])
    assert Runc(runtime.binary).check_spec(spec) == []


def test_pause_container_runtime_default(
    runtime: Runtime, rootfs: Path, files: SandboxFiles, tmp_path: Path
) -> None:
    cid = new_id()
    spec = build_sandbox_spec(
        pod_config(RUNTIME_DEFAULT), id=cid, files=files, rootfs=str(rootfs),
        args=["sh", "-c", PROBE.replace("/tmp/err", "/dev/null")], env=["PATH=/bin"],
        oom_score_floor=0,
    )
    seen = runtime.run(cid, spec, tmp_path / "b")
    assert seen["seccomp"] == "2"
    assert seen["ls"] == "ok"
    assert not seen["userns"].startswith("0")


# --- through the SandboxManager (runc + conmon) --------------------------------------------


@pytest.fixture
def manager(rootfs: Path, tmp_path: Path) -> Iterator[SandboxManager]:
    require_isolated()
    for binary in ("runc", "conmon"):
        require_binary(binary)
    yield from managed(tmp_path / "m", rootfs, networks=False)


def host_pod(seccomp: SecurityProfile | None) -> SandboxConfig:
    return SandboxConfig(
        metadata=PodSandboxMetadata(name=new_id(), uid=uuid.uuid4().hex, namespace="pk-test"),
        linux=LinuxPodSandboxConfig(security_context=LinuxSandboxSecurityContext(
            seccomp=seccomp, namespace_options=NamespaceOption(network=NamespaceMode.NODE),
        )),
    )


def seccomp_mode(pid: int) -> str:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("Seccomp:"):
            return line.split()[1]
    raise AssertionError(f"no Seccomp line for pid {pid}")


def test_manager_pod_and_container_runtime_default(
    manager: SandboxManager, rootfs: Path, tmp_path: Path
) -> None:
    sb = manager.run_sandbox(host_pod(RUNTIME_DEFAULT))
    assert seccomp_mode(manager.sandbox_status(sb.id).pid) == "2"
    config = ContainerConfig(
        metadata=ContainerMetadata(name="app"), image=str(rootfs), command=["sleep", "600"],
        linux=LinuxContainerConfig(security_context=LinuxContainerSecurityContext(
            seccomp=RUNTIME_DEFAULT,
            namespace_options=NamespaceOption(pid=NamespaceMode.CONTAINER),
        )),
    )
    cid = manager.create_container(sb.id, config)
    manager.start_container(cid)
    assert seccomp_mode(manager.container_status(cid).pid) == "2"
    res = manager.exec_sync(cid, ["sh", "-c", "ls / >/dev/null && unshare -U true"], timeout=10)
    assert res.exit_code != 0 and b"Operation not permitted" in res.stderr, res
    manager.remove_sandbox(sb.id)


def test_manager_refuses_bad_localhost_profiles_before_creating_anything(
    manager: SandboxManager, rootfs: Path, tmp_path: Path
) -> None:
    missing = SecurityProfile(profile_type=ProfileType.LOCALHOST,
                              localhost_ref=str(tmp_path / "missing.json"))
    with pytest.raises(SandboxConfigError, match=r"seccomp\.localhost_ref .*missing\.json"):
        manager.run_sandbox(host_pod(missing))
    assert manager.list_sandboxes() == []
    sb = manager.run_sandbox(host_pod(None))
    assert seccomp_mode(manager.sandbox_status(sb.id).pid) == "0"
    before = snapshot()
    config = ContainerConfig(
        metadata=ContainerMetadata(name="app"), image=str(rootfs), command=["true"],
        linux=LinuxContainerConfig(security_context=LinuxContainerSecurityContext(
            seccomp=missing, namespace_options=NamespaceOption(pid=NamespaceMode.CONTAINER),
        )),
    )
    with pytest.raises(ContainerConfigError, match=r"seccomp\.localhost_ref .*missing\.json"):
        manager.create_container(sb.id, config)
    assert manager.list_containers() == []
    assert snapshot() == before
    assert not list((tmp_path / "m" / "root" / "containers").glob("*"))
    manager.remove_sandbox(sb.id)
