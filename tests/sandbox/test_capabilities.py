"""ALL and privileged resolve to the capabilities this process can grant (issue 11 defect 12).

containerd resolves them with ``cap.Current()``; a child that execs (runc) keeps only what is
also in the bounding set, so podkit uses ``CapEff`` ∩ ``CapBnd``. The capability source is
faked here: a status file for ``oci.current_capabilities``, ``host_capabilities`` for builders.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from podkit import apparmor, oci
from podkit.container import PodContext, build_container_spec
from podkit.kube.validate import pod_problems
from podkit.pods import rules
from podkit.pods.config import (
    Capability,
    ContainerConfig,
    ContainerMetadata,
    LinuxContainerConfig,
    LinuxContainerSecurityContext,
    LinuxPodSandboxConfig,
    LinuxSandboxSecurityContext,
    PodSandboxMetadata,
    SandboxConfig,
)
from podkit.sandbox import SandboxFiles

NO_APPARMOR = apparmor.AppArmorHost(enabled_file="/nonexistent/apparmor/enabled")
HOST = ["CAP_CHOWN", "CAP_KILL", "CAP_NET_RAW", "CAP_SYS_ADMIN"]
"""A fake capability source: a host that lacks most capabilities (CAP_SYS_RESOURCE among them)."""


def mask(names: list[str]) -> str:
    return f"{sum(1 << oci.KNOWN_CAPABILITIES.index(n) for n in names):016x}"


def status(tmp_path: Path, **lines: str) -> str:
    path = tmp_path / "status"
    path.write_text("Name:\tpodkit\n" + "".join(f"{k}:\t{v}\n" for k, v in lines.items()))
    return str(path)


def test_current_capabilities_is_effective_within_bounding(tmp_path: Path) -> None:
    full = "000001ffffffffff"
    no_time = [c for c in oci.KNOWN_CAPABILITIES if c != "CAP_SYS_TIME"]
    assert oci.current_capabilities(status(tmp_path, CapEff=full, CapBnd=mask(no_time))) == \
        no_time  # prctl(PR_CAPBSET_DROP) leaves CapEff alone; runc would lack SYS_TIME
    assert oci.current_capabilities(status(tmp_path, CapEff=mask(HOST), CapBnd=full)) == HOST
    assert oci.current_capabilities(status(tmp_path, CapEff=mask(HOST))) == HOST  # no CapBnd line
    with pytest.raises(oci.SpecOptError, match="no valid CapEff line in"):
        oci.current_capabilities(status(tmp_path, CapBnd=full, CapEff="zz"))


def test_current_capabilities_of_this_process() -> None:
    lines = dict(line.split(":\t") for line in Path("/proc/self/status").read_text().splitlines()
                 if line.startswith(("CapEff", "CapBnd")))
    expected = int(lines["CapEff"], 16) & int(lines["CapBnd"], 16)
    got = oci.current_capabilities()
    assert sum(1 << oci.KNOWN_CAPABILITIES.index(c) for c in got) == \
        expected & (2 ** len(oci.KNOWN_CAPABILITIES) - 1)


def test_privileged_option_uses_the_bounding_set(tmp_path: Path) -> None:
    path = status(tmp_path, CapEff="000001ffffffffff", CapBnd=mask(HOST))
    for opt in (oci.with_privileged(path), oci.with_all_current_capabilities(path)):
        caps = oci.generate(oci.runc_spec(), opt).process.capabilities  # type: ignore[union-attr]
        assert caps is not None and caps.bounding == caps.effective == caps.permitted == HOST


def test_resolve_all_means_current() -> None:
    known = list(oci.KNOWN_CAPABILITIES)
    resolve = rules.resolve_capabilities
    assert resolve(["CAP_KILL"], ["ALL"], [], known, current=HOST) == HOST
    assert resolve([], ["ALL"], ["kill"], known, current=HOST) == [
        "CAP_CHOWN", "CAP_NET_RAW", "CAP_SYS_ADMIN"]
    assert resolve(HOST, ["sys_time"], ["ALL"], known, current=HOST) == ["CAP_SYS_TIME"]
    assert resolve([], ["ALL"], [], known) == known  # no source given: every known one


def pod(privileged: bool = False) -> PodContext:
    config = SandboxConfig(
        metadata=PodSandboxMetadata(name="web", uid="u1", namespace="ns"),
        linux=LinuxPodSandboxConfig(
            security_context=LinuxSandboxSecurityContext(privileged=privileged)))
    return PodContext(id="sb1", config=config, files=SandboxFiles.under("/run/pk/sb1"),
                      namespace_paths={"network": "/proc/42/ns/net", "pid": "/proc/42/ns/pid"})


def container(**security: Any) -> ContainerConfig:
    return ContainerConfig(
        metadata=ContainerMetadata(name="app"), image="/img", command=["sleep", "1"],
        linux=LinuxContainerConfig(security_context=LinuxContainerSecurityContext(**security)))


def caps_of(config: ContainerConfig, tmp_path: Path, **kw: Any) -> oci.LinuxCapabilities:
    spec = build_container_spec(config, kw.pop("pod", pod()), id="c1", rootfs=str(tmp_path),
                                apparmor_host=NO_APPARMOR, **kw)
    assert spec.process is not None and spec.process.capabilities is not None
    return spec.process.capabilities


@pytest.mark.parametrize(("capability", "expected"), [
    (Capability(add_capabilities=["ALL"]), HOST),
    (Capability(add_capabilities=["all"], drop_capabilities=["NET_RAW"]),
     ["CAP_CHOWN", "CAP_KILL", "CAP_SYS_ADMIN"]),
    (Capability(drop_capabilities=["ALL"]), []),
    (Capability(add_capabilities=["KILL"], drop_capabilities=["ALL"]), ["CAP_KILL"]),
])
def test_container_all_resolves_to_the_host_capabilities(
    tmp_path: Path, capability: Capability, expected: list[str]
) -> None:
    caps = caps_of(container(capabilities=capability), tmp_path, host_capabilities=HOST)
    assert caps.bounding == caps.effective == caps.permitted == expected


def test_container_ambient_all_and_privileged_use_the_host_capabilities(tmp_path: Path) -> None:
    caps = caps_of(container(capabilities=Capability(add_ambient_capabilities=["ALL"])),
                   tmp_path, host_capabilities=HOST)
    assert caps.ambient == caps.inheritable == HOST
    caps = caps_of(container(privileged=True), tmp_path, pod=pod(privileged=True),
                   host_capabilities=HOST)
    assert caps.bounding == caps.effective == caps.permitted == HOST


def test_container_default_source_is_this_process(tmp_path: Path) -> None:
    current = oci.current_capabilities()
    caps = caps_of(container(capabilities=Capability(add_capabilities=["ALL"])), tmp_path)
    assert caps.bounding == current
    caps = caps_of(container(privileged=True), tmp_path, pod=pod(privileged=True))
    assert caps.bounding == current


# -- oci.capability_name: the one rule for capability names in CRI configs and manifests ----


@pytest.mark.parametrize(("name", "expected"), [
    ("SYS_ADMIN", "CAP_SYS_ADMIN"), ("sys_admin", "CAP_SYS_ADMIN"),
    ("CAP_SYS_ADMIN", "CAP_SYS_ADMIN"), ("cap_sys_admin", "CAP_SYS_ADMIN"),
    (" Sys_Admin\t", "CAP_SYS_ADMIN"), ("all", "CAP_ALL"), ("CAP_ALL", "CAP_ALL"),
    ("bogus", "CAP_BOGUS"),
])
def test_capability_name(name: str, expected: str) -> None:
    assert oci.capability_name(name) == expected


@pytest.mark.parametrize("name", ["", "   "])
def test_capability_name_refuses_empty_names_saying_where(name: str) -> None:
    with pytest.raises(oci.SpecOptError, match=r"empty capability name in spec\.add$"):
        oci.capability_name(name, "spec.add")
    with pytest.raises(oci.SpecOptError, match="capability name 7: must be a string"):
        oci.capability_name(7)  # type: ignore[arg-type]


@st.composite
def spellings(draw: st.DrawFn) -> str:
    """A known capability as a CRI config or a manifest may spell it."""
    cap = draw(st.sampled_from(oci.KNOWN_CAPABILITIES))
    if draw(st.booleans()):
        cap = cap.removeprefix("CAP_")
    cased = "".join(c.lower() if draw(st.booleans()) else c for c in cap)
    pad = draw(st.sampled_from(["", " ", "\t"]))
    return pad + cased + pad


@given(spellings())
def test_a_policy_using_capability_name_sees_what_podkit_grants(tmp_path_factory: Any,
                                                                 spelling: str) -> None:
    """Whatever the spelling, the name a policy compares is the one in the spec podkit
    builds, and kube validation reads it the same way: no spelling slips past a check."""
    caps = caps_of(container(capabilities=Capability(add_capabilities=[spelling],
                                                     drop_capabilities=["ALL"])),
                   tmp_path_factory.getbasetemp(), host_capabilities=HOST)
    assert caps.bounding == [oci.capability_name(spelling)]
    problems = pod_problems({"metadata": {"name": "p"}, "spec": {"containers": [{
        "name": "c", "image": "i", "securityContext": {
            "allowPrivilegeEscalation": False, "capabilities": {"add": [spelling]}}}]}})
    admin = oci.capability_name(spelling) == "CAP_SYS_ADMIN"
    assert [m for _, m in problems] == (
        ["cannot be false with capability SYS_ADMIN added"] if admin else [])
