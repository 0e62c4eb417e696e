"""Unit tests: seccomp in build_sandbox_spec / build_container_spec (containerd's CRI rules).

RuntimeDefault -> podkit's default profile for the final capabilities; Localhost -> the profile
file (absolute path); Unconfined, no profile or privileged -> no filter. The deprecated CRI
``seccomp_profile_path`` strings reach the builders through ``podkit.cri.convert``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from google.protobuf import json_format

from podkit import oci
from podkit.container import (
    ContainerConfigError,
    PodContext,
    build_container_spec,
    validate_container_config,
)
from podkit.cri import api_pb2 as pb
from podkit.cri import convert
from podkit.pods.config import (
    Capability,
    ContainerConfig,
    NamespaceMode,
    ProfileType,
    SandboxConfig,
    SecurityProfile,
)
from podkit.sandbox import (
    SandboxConfigError,
    build_sandbox_spec,
    seccomp_opt,
    validate_sandbox_config,
)

from . import _security as security
from ._security import (
    FILES,
    RUNTIME_DEFAULT,
    UNCONFINED,
    container_config,
    localhost,
    pod_config,
)

FIELD = "linux.security_context.seccomp.localhost_ref"
BLOCK_MKDIR = {
    "defaultAction": "SCMP_ACT_ALLOW",
    "syscalls": [{"names": ["mkdir", "mkdirat"], "action": "SCMP_ACT_ERRNO", "errnoRet": 122}],
}


@pytest.fixture
def profile_file(tmp_path: Path) -> Path:
    path = tmp_path / "block-mkdir.json"
    path.write_text(json.dumps(BLOCK_MKDIR))
    return path


def allowed(spec: oci.Spec) -> set[str]:
    assert spec.linux is not None and spec.linux.seccomp is not None
    return {n for r in spec.linux.seccomp.syscalls or [] if r.action == "SCMP_ACT_ALLOW"
            and not r.args for n in r.names}


# --- sandbox -----------------------------------------------------------------------------


def pod(seccomp: SecurityProfile | None = None, **sc: Any) -> SandboxConfig:
    return pod_config(seccomp=seccomp, **sc)


def sandbox(config: SandboxConfig) -> oci.Spec:
    return build_sandbox_spec(config, id="sb1", files=FILES, netns_path="/run/netns/pk1")


def test_sandbox_runtime_default_gets_the_default_profile_for_pause_caps() -> None:
    spec = sandbox(pod(RUNTIME_DEFAULT))
    assert spec.linux is not None and spec.process is not None
    assert spec.linux.seccomp == oci.default_profile(spec)
    names = allowed(spec)
    assert "chroot" in names  # CAP_SYS_CHROOT is one of the pause's default capabilities
    assert {"mount", "unshare", "setns", "sethostname"}.isdisjoint(names)
    assert oci.validate(spec) == []
    assert spec.oci_version == "1.1.0"


@pytest.mark.parametrize("seccomp", [None, UNCONFINED])
def test_sandbox_without_a_profile_or_unconfined_has_no_filter(
    seccomp: SecurityProfile | None,
) -> None:
    spec = sandbox(pod(seccomp))
    assert spec.linux is not None and spec.linux.seccomp is None


def test_sandbox_privileged_has_no_filter_even_with_a_missing_localhost_file() -> None:
    for profile in (RUNTIME_DEFAULT, localhost("/nonexistent/profile.json")):
        spec = sandbox(pod(profile, privileged=True))
        assert spec.linux is not None and spec.linux.seccomp is None


def test_sandbox_localhost_profile_file(profile_file: Path) -> None:
    spec = sandbox(pod(localhost(str(profile_file))))
    assert spec.linux is not None
    assert spec.linux.seccomp == oci.load_profile(profile_file)
    assert spec.to_dict()["linux"]["seccomp"] == BLOCK_MKDIR
    assert oci.validate(spec) == []


@pytest.mark.parametrize(
    ("profile", "message"),
    [
        (localhost("profiles/block.json"), f"{FIELD} 'profiles/block.json': must be an absolute"),
        (localhost("localhost/block.json"), f"{FIELD} 'localhost/block.json': must be an abs"),
        (localhost(""), f"{FIELD}: required for a Localhost profile"),
        (SecurityProfile(profile_type=ProfileType.RUNTIME_DEFAULT, localhost_ref="/p.json"),
         f"{FIELD} '/p.json': only valid with profile_type LOCALHOST"),
    ],
)
def test_sandbox_bad_localhost_refs(profile: SecurityProfile, message: str) -> None:
    with pytest.raises(SandboxConfigError, match=f"^{message}"):
        validate_sandbox_config(pod(profile))
    with pytest.raises(SandboxConfigError, match=f"^{message}"):
        sandbox(pod(profile))


def test_sandbox_missing_or_invalid_profile_file_fails_in_validate(tmp_path: Path) -> None:
    missing = tmp_path / "missing.json"
    with pytest.raises(SandboxConfigError,
                       match=f"^{FIELD} '{missing}': {missing}: .*no such seccomp profile"):
        validate_sandbox_config(pod(localhost(str(missing))))
    bad = tmp_path / "bad.json"
    bad.write_text('{"defaultAction": "SCMP_ACT_MAYBE"}')
    with pytest.raises(SandboxConfigError,
                       match=rf"^{FIELD} '{bad}': {bad}: \$\.defaultAction: unknown seccomp"):
        validate_sandbox_config(pod(localhost(str(bad))))


# --- container ---------------------------------------------------------------------------


def pod_context(privileged: bool = False) -> PodContext:
    return security.pod_context(pod(privileged=privileged))


def ctr(seccomp: SecurityProfile | None = None, **sc: Any) -> ContainerConfig:
    return container_config(seccomp=seccomp, **sc)


def container(config: ContainerConfig, tmp_path: Path, privileged_pod: bool = False) -> oci.Spec:
    return build_container_spec(config, pod_context(privileged_pod), id="c1",
                                rootfs=str(tmp_path))


def test_container_runtime_default_follows_the_final_capabilities(tmp_path: Path) -> None:
    plain = container(ctr(RUNTIME_DEFAULT), tmp_path)
    assert plain.linux is not None and plain.linux.seccomp == oci.default_profile(plain)
    assert "mount" not in allowed(plain) and "chroot" in allowed(plain)
    admin = container(ctr(RUNTIME_DEFAULT, capabilities=Capability(
        add_capabilities=["SYS_ADMIN"], drop_capabilities=["SYS_CHROOT"])), tmp_path)
    assert {"mount", "unshare", "clone3"} <= allowed(admin)
    assert "chroot" not in allowed(admin)
    none = container(ctr(RUNTIME_DEFAULT, capabilities=Capability(drop_capabilities=["ALL"])),
                     tmp_path)
    assert "chroot" not in allowed(none)
    for spec in (plain, admin, none):
        assert oci.validate(spec) == []


@pytest.mark.parametrize("seccomp", [None, UNCONFINED])
def test_container_without_a_profile_or_unconfined_has_no_filter(
    seccomp: SecurityProfile | None, tmp_path: Path
) -> None:
    spec = container(ctr(seccomp), tmp_path)
    assert spec.linux is not None and spec.linux.seccomp is None


def test_container_privileged_has_no_filter(tmp_path: Path) -> None:
    for profile in (RUNTIME_DEFAULT, localhost("/nonexistent/profile.json")):
        spec = container(ctr(profile, privileged=True), tmp_path, privileged_pod=True)
        assert spec.linux is not None and spec.linux.seccomp is None


def test_container_localhost_profile_file(profile_file: Path, tmp_path: Path) -> None:
    spec = container(ctr(localhost(str(profile_file))), tmp_path)
    assert spec.to_dict()["linux"]["seccomp"] == BLOCK_MKDIR
    assert spec.oci_version == "1.1.0"  # errnoRet


def test_container_container_profile_is_independent_of_the_pods(
    profile_file: Path, tmp_path: Path
) -> None:
    config = ctr(UNCONFINED)
    context = PodContext(id="sb1", config=pod(localhost(str(profile_file))), files=FILES,
                         namespace_paths={"pid": "/proc/42/ns/pid"})
    spec = build_container_spec(config, context, id="c1", rootfs=str(tmp_path))
    assert spec.linux is not None and spec.linux.seccomp is None


def test_container_bad_localhost_refs_fail_in_validate(tmp_path: Path) -> None:
    missing = tmp_path / "missing.json"
    with pytest.raises(ContainerConfigError, match=f"^{FIELD} '{missing}': .*no such seccomp"):
        validate_container_config(ctr(localhost(str(missing))), pod_context())
    with pytest.raises(ContainerConfigError, match=f"^{FIELD} 'rel.json': must be an absolute"):
        container(ctr(localhost("rel.json")), tmp_path)
    notjson = tmp_path / "p.json"
    notjson.write_text("seccomp: yes")
    with pytest.raises(ContainerConfigError, match=f"^{FIELD} '{notjson}': .*malformed JSON"):
        container(ctr(localhost(str(notjson))), tmp_path)


def test_seccomp_opt_matches_containerd_rules(profile_file: Path) -> None:
    assert seccomp_opt(None, privileged=False) is None
    assert seccomp_opt(UNCONFINED, privileged=False) is None
    assert seccomp_opt(RUNTIME_DEFAULT, privileged=True) is None
    assert seccomp_opt(RUNTIME_DEFAULT, privileged=False) is not None
    opt = seccomp_opt(localhost(f"localhost/{profile_file}"), privileged=False)
    assert opt is not None  # the deprecated "localhost/" prefix is trimmed, as containerd does
    spec = oci.generate(oci.default_spec("c1"), opt)
    assert spec.to_dict()["linux"]["seccomp"] == BLOCK_MKDIR
    with pytest.raises(ContainerConfigError):
        seccomp_opt(localhost("x"), privileged=False, error=ContainerConfigError)


# --- the CRI's deprecated strings reach the builders -----------------------------------------


def test_cri_seccomp_profile_path_strings_feed_the_builders(
    profile_file: Path, tmp_path: Path
) -> None:
    def via_cri(legacy: str) -> oci.Spec:
        msg = json_format.ParseDict(
            {"metadata": {"name": "app"}, "image": {"image": "busybox"}, "command": ["true"],
             "linux": {"security_context": {
                 "seccomp_profile_path": legacy}}},
            pb.ContainerConfig(),
        )
        return container(convert.container_config_from_cri(msg), tmp_path)

    default = via_cri("runtime/default")
    assert default.linux is not None and default.linux.seccomp == oci.default_profile(default)
    assert via_cri("docker/default").linux == default.linux
    assert via_cri("unconfined").linux.seccomp is None  # type: ignore[union-attr]
    assert via_cri("").linux.seccomp is None  # type: ignore[union-attr]
    local = via_cri(f"localhost/{profile_file}")
    assert local.to_dict()["linux"]["seccomp"] == BLOCK_MKDIR
    with pytest.raises(ContainerConfigError, match=f"^{FIELD} 'prof.json': must be an abs"):
        via_cri("localhost/prof.json")

    sandbox_msg = json_format.ParseDict(
        {"metadata": {"name": "web"}, "linux": {"security_context": {
            "seccomp": {"profile_type": "Localhost", "localhost_ref": str(profile_file)},
            "namespace_options": {"network": "NODE"}}}},
        pb.PodSandboxConfig(),
    )
    config = convert.sandbox_config_from_cri(sandbox_msg)
    spec = build_sandbox_spec(config, id="sb1", files=FILES)
    assert spec.to_dict()["linux"]["seccomp"] == BLOCK_MKDIR
    assert config.linux.security_context.namespace_options.network == NamespaceMode.NODE
