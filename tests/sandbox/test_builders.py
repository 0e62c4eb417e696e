"""Unit tests for build_sandbox_spec and build_container_spec (containerd's CRI rules)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from podkit import oci
from podkit.container import (
    ContainerConfigError,
    ImageDefaults,
    PodContext,
    build_container_spec,
)
from podkit.pods.config import (
    Capability,
    ContainerConfig,
    ContainerMetadata,
    Device,
    IDMapping,
    KeyValue,
    LinuxContainerConfig,
    LinuxContainerResources,
    LinuxContainerSecurityContext,
    LinuxPodSandboxConfig,
    LinuxSandboxSecurityContext,
    Mount,
    MountPropagation,
    NamespaceMode,
    NamespaceOption,
    PodSandboxMetadata,
    SandboxConfig,
    UserNamespace,
)
from podkit.sandbox import SandboxConfigError, SandboxFiles, build_sandbox_spec

FILES = SandboxFiles.under("/run/pk/sb1")


def pod_config(**linux: Any) -> SandboxConfig:
    return SandboxConfig(
        metadata=PodSandboxMetadata(name="web", uid="u1", namespace="ns"),
        hostname="web-0",
        linux=LinuxPodSandboxConfig(**linux),
    )


def security(**kw: Any) -> LinuxSandboxSecurityContext:
    return LinuxSandboxSecurityContext(namespace_options=NamespaceOption(**kw))


def ns_types(spec: oci.Spec) -> dict[str, str | None]:
    assert spec.linux is not None and spec.linux.namespaces is not None
    return {n.type: n.path for n in spec.linux.namespaces}


def mount(spec: oci.Spec, dest: str) -> oci.Mount:
    matches = [m for m in spec.mounts or [] if m.destination == dest]
    assert len(matches) == 1, f"{dest}: {matches}"
    return matches[0]


# --- sandbox -----------------------------------------------------------------------------


def test_sandbox_spec_pod_network() -> None:
    spec = build_sandbox_spec(
        pod_config(sysctls={"net.ipv4.ip_unprivileged_port_start": "0"}),
        id="sb1", files=FILES, netns_path="/run/netns/pk1", oom_score_floor=None,
        pause_image="pause:3.9",
    )
    assert ns_types(spec) == {
        "pid": None, "ipc": None, "uts": None, "mount": None, "network": "/run/netns/pk1"
    }
    assert spec.hostname == "web-0"
    assert spec.root == oci.Root(path="rootfs", readonly=True)
    assert spec.process is not None
    assert spec.process.args == ["/pause"]
    assert spec.process.oom_score_adj == -998
    assert spec.process.rlimits is None and spec.process.apparmor_profile is None
    assert spec.linux is not None and spec.linux.seccomp is None
    assert spec.linux.sysctl == {"net.ipv4.ip_unprivileged_port_start": "0"}
    assert spec.linux.resources is not None and spec.linux.resources.cpu is not None
    assert spec.linux.resources.cpu.shares == 2
    assert spec.linux.cgroups_path == "/podkit/sb1"
    assert "/run" not in [m.destination for m in spec.mounts or []]
    shm = mount(spec, "/dev/shm")
    assert (shm.type, shm.source, shm.options) == (
        "bind", "/run/pk/sb1/shm", ["rbind", "ro", "nosuid", "nodev", "noexec"]
    )
    assert mount(spec, "/etc/resolv.conf").source == "/run/pk/sb1/resolv.conf"
    assert spec.annotations is not None
    assert spec.annotations["io.kubernetes.cri.container-type"] == "sandbox"
    assert spec.annotations["io.kubernetes.cri.podsandbox.image-name"] == "pause:3.9"
    assert oci.validate(spec) == []
    assert spec.oci_version == oci.minimum_version(spec)


def test_sandbox_host_namespaces() -> None:
    sc = security(network=NamespaceMode.NODE, pid=NamespaceMode.NODE, ipc=NamespaceMode.NODE)
    spec = build_sandbox_spec(pod_config(security_context=sc), id="sb1", files=FILES)
    assert ns_types(spec) == {"mount": None}
    assert mount(spec, "/dev/shm").source == "/dev/shm"


def test_sandbox_oom_score_clamped_to_floor_and_cgroup_parent() -> None:
    spec = build_sandbox_spec(
        pod_config(cgroup_parent="kubepods-besteffort.slice"),
        id="sb1", files=FILES, netns_path="/n", oom_score_floor=0,
    )
    assert spec.process is not None and spec.process.oom_score_adj == 0
    assert spec.linux is not None
    assert spec.linux.cgroups_path == "kubepods-besteffort.slice:cri-podkit:sb1"


def test_sandbox_user_namespace_pod_mode() -> None:
    userns = UserNamespace(
        mode=NamespaceMode.POD,
        uids=[IDMapping(host_id=100000, container_id=0, length=65536)],
        gids=[IDMapping(host_id=100000, container_id=0, length=65536)],
    )
    spec = build_sandbox_spec(
        pod_config(security_context=security(userns_options=userns)),
        id="sb1", files=FILES, netns_path="/n", userns_path="/pinned/user",
    )
    assert ns_types(spec)["user"] == "/pinned/user"
    assert spec.linux is not None and spec.linux.uid_mappings == [
        oci.LinuxIDMapping(container_id=0, host_id=100000, size=65536)
    ]


def test_sandbox_privileged_gets_rw_sysfs_but_default_caps() -> None:
    sc = LinuxSandboxSecurityContext(privileged=True)
    spec = build_sandbox_spec(pod_config(security_context=sc), id="sb1", files=FILES,
                              netns_path="/n")
    assert "ro" not in (mount(spec, "/sys").options or [])
    assert spec.process is not None and spec.process.capabilities is not None
    assert spec.process.capabilities.bounding == list(oci.DEFAULT_UNIX_CAPABILITIES)


def test_sandbox_resources_become_annotations() -> None:
    res = LinuxContainerResources(cpu_period=100000, cpu_quota=50000, cpu_shares=512,
                                  memory_limit_in_bytes=1 << 20)
    spec = build_sandbox_spec(pod_config(resources=res), id="sb1", files=FILES, netns_path="/n")
    assert spec.annotations is not None
    assert spec.annotations["io.kubernetes.cri.sandbox-cpu-quota"] == "50000"
    assert spec.annotations["io.kubernetes.cri.sandbox-memory"] == str(1 << 20)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"network": NamespaceMode.CONTAINER}, "namespace_options.network: CONTAINER"),
        ({"ipc": NamespaceMode.TARGET}, "namespace_options.ipc: TARGET"),
        ({"pid": NamespaceMode.TARGET}, "namespace_options.pid: TARGET"),
        ({"userns_options": UserNamespace(mode=NamespaceMode.CONTAINER)}, "userns_options.mode"),
        ({"userns_options": UserNamespace(mode=NamespaceMode.POD)},
         r"userns_options\.uids: mode POD needs a mapping"),
    ],
)
def test_sandbox_bad_namespace_options(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(SandboxConfigError, match=message):
        build_sandbox_spec(pod_config(security_context=security(**kwargs)), id="s", files=FILES,
                           netns_path="/n")


def test_sandbox_needs_netns_unless_host_network_and_a_name() -> None:
    with pytest.raises(SandboxConfigError, match="network namespace path is required"):
        build_sandbox_spec(pod_config(), id="s", files=FILES)
    bad = SandboxConfig(metadata=PodSandboxMetadata(name="a_b"))
    with pytest.raises(SandboxConfigError, match=r"metadata\.name 'a_b'"):
        build_sandbox_spec(bad, id="s", files=FILES, netns_path="/n")


# --- container ---------------------------------------------------------------------------

POD = PodContext(
    id="sb1",
    config=pod_config(),
    files=FILES,
    namespace_paths={
        "network": "/proc/42/ns/net", "ipc": "/proc/42/ns/ipc", "uts": "/proc/42/ns/uts",
        "pid": "/proc/42/ns/pid",
    },
)


def ctr(**kw: Any) -> ContainerConfig:
    kw.setdefault("command", ["sleep", "1"])
    return ContainerConfig(metadata=ContainerMetadata(name="app"), image="/img", **kw)


def ctr_security(**kw: Any) -> LinuxContainerConfig:
    return LinuxContainerConfig(security_context=LinuxContainerSecurityContext(**kw))


def build(config: ContainerConfig, rootfs: Path, **kw: Any) -> oci.Spec:
    return build_container_spec(config, kw.pop("pod", POD), id="c1", rootfs=str(rootfs), **kw)


@pytest.fixture
def rootfs(tmp_path: Path) -> Path:
    (tmp_path / "etc").mkdir()
    (tmp_path / "etc" / "passwd").write_text(
        "root:x:0:0::/root:/bin/sh\napp:x:1000:1001::/:/bin/sh\n"
    )
    (tmp_path / "etc" / "group").write_text("root:x:0:\napp:x:1001:\n")
    return tmp_path


def test_container_joins_pod_namespaces_with_own_pid_by_default(rootfs: Path) -> None:
    spec = build(ctr(linux=ctr_security(
        namespace_options=NamespaceOption(pid=NamespaceMode.CONTAINER)
    )), rootfs)
    assert ns_types(spec) == {
        "pid": None, "ipc": "/proc/42/ns/ipc", "uts": "/proc/42/ns/uts", "mount": None,
        "network": "/proc/42/ns/net",
    }
    spec = build(ctr(), rootfs)
    assert ns_types(spec)["pid"] == "/proc/42/ns/pid"


def test_container_target_pid_namespace(rootfs: Path) -> None:
    config = ctr(linux=ctr_security(
        namespace_options=NamespaceOption(pid=NamespaceMode.TARGET, target_id="other")
    ))
    spec = build(config, rootfs, target_pid_namespace="/proc/77/ns/pid")
    assert ns_types(spec)["pid"] == "/proc/77/ns/pid"
    with pytest.raises(ContainerConfigError, match="target container is not running"):
        build(config, rootfs)


def test_container_args_follow_docker_semantics(rootfs: Path) -> None:
    image = ImageDefaults(entrypoint=("/entry",), cmd=("default",), env=("A=1", "PATH=/img"))
    spec = build(ctr(command=[], args=["x"]), rootfs, image=image)
    assert spec.process is not None and spec.process.args == ["/entry", "x"]
    spec = build(ctr(command=[]), rootfs, image=image)
    assert spec.process is not None and spec.process.args == ["/entry", "default"]
    spec = build(ctr(command=["/bin/sh"], args=["-c", "true"]), rootfs, image=image)
    assert spec.process is not None and spec.process.args == ["/bin/sh", "-c", "true"]
    with pytest.raises(ContainerConfigError, match="no command specified"):
        build(ctr(command=[]), rootfs)


def test_container_env_order(rootfs: Path) -> None:
    image = ImageDefaults(env=("A=1", "PATH=/img"))
    spec = build(ctr(envs=[KeyValue(key="A", value="2"), KeyValue(key="B", value="3")]), rootfs,
                 image=image)
    assert spec.process is not None and spec.process.env == [
        "PATH=/img", "HOSTNAME=web-0", "A=2", "B=3"
    ]


def test_container_mounts_and_propagation(rootfs: Path) -> None:
    mounts = [
        Mount(container_path="/data/deep", host_path="/srv/d", readonly=True),
        Mount(container_path="/data", host_path="/srv", propagation=(
            MountPropagation.PROPAGATION_HOST_TO_CONTAINER)),
        Mount(container_path="/etc/hosts", host_path="/my/hosts"),
    ]
    spec = build(ctr(mounts=mounts), rootfs)
    dests = [m.destination for m in spec.mounts or []]
    assert dests.index("/data") < dests.index("/data/deep")
    assert mount(spec, "/data/deep").options == ["rbind", "rprivate", "ro"]
    assert mount(spec, "/data").options == ["rbind", "rslave", "rw"]
    assert mount(spec, "/etc/hosts").source == "/my/hosts"
    assert mount(spec, "/etc/hostname").source == "/run/pk/sb1/hostname"
    assert mount(spec, "/etc/resolv.conf").source == "/run/pk/sb1/resolv.conf"
    assert mount(spec, "/dev/shm").source == "/run/pk/sb1/shm"
    assert mount(spec, "/sys/fs/cgroup").options == ["nosuid", "noexec", "nodev", "relatime", "ro"]
    assert spec.linux is not None and spec.linux.rootfs_propagation == "rslave"
    with pytest.raises(ContainerConfigError, match=r"mounts\[0\].container_path 'rel'"):
        build(ctr(mounts=[Mount(container_path="rel", host_path="/x")]), rootfs)


def test_container_capabilities_add_drop(rootfs: Path) -> None:
    caps = Capability(add_capabilities=["NET_ADMIN"], drop_capabilities=["KILL", "chown"])
    spec = build(ctr(linux=ctr_security(capabilities=caps)), rootfs)
    assert spec.process is not None and spec.process.capabilities is not None
    bounding = spec.process.capabilities.bounding or []
    assert "CAP_NET_ADMIN" in bounding
    assert "CAP_KILL" not in bounding and "CAP_CHOWN" not in bounding
    assert spec.process.capabilities.ambient is None
    spec = build(ctr(linux=ctr_security(capabilities=Capability(drop_capabilities=["ALL"]))),
                 rootfs)
    assert spec.process is not None and spec.process.capabilities is not None
    assert spec.process.capabilities.bounding == []
    with pytest.raises(Exception, match="CAP_BOGUS"):
        build(ctr(linux=ctr_security(capabilities=Capability(add_capabilities=["bogus"]))), rootfs)


def test_container_privileged_requires_privileged_pod(rootfs: Path) -> None:
    with pytest.raises(ContainerConfigError, match="no privileged container allowed in sandbox"):
        build(ctr(linux=ctr_security(privileged=True)), rootfs)


def test_container_user_readonly_resources(rootfs: Path) -> None:
    res = LinuxContainerResources(memory_limit_in_bytes=64 << 20, cpu_shares=256,
                                  cpu_quota=20000, cpu_period=100000, oom_score_adj=-5)
    spec = build(
        ctr(linux=LinuxContainerConfig(
            resources=res,
            security_context=LinuxContainerSecurityContext(
                run_as_username="app", readonly_rootfs=True, no_new_privs=True,
                supplemental_groups=[3000],
            ),
        )),
        rootfs, oom_score_floor=0,
    )
    assert spec.process is not None and spec.process.user is not None
    assert (spec.process.user.uid, spec.process.user.gid) == (1000, 1001)
    assert 3000 in (spec.process.user.additional_gids or [])
    assert spec.process.no_new_privileges is True
    assert spec.process.oom_score_adj == 0
    assert spec.root is not None and spec.root.readonly is True
    assert mount(spec, "/etc/hostname").options == ["rbind", "rprivate", "ro"]
    assert spec.linux is not None and spec.linux.resources is not None
    assert spec.linux.resources.memory is not None
    assert spec.linux.resources.memory.limit == 64 << 20
    assert spec.linux.resources.cpu is not None
    assert (spec.linux.resources.cpu.shares, spec.linux.resources.cpu.quota) == (256, 20000)


def test_container_devices_and_annotations(rootfs: Path) -> None:
    spec = build(ctr(devices=[Device(container_path="/dev/pk-null", host_path="/dev/null",
                                     permissions="rw")]), rootfs)
    assert spec.linux is not None and spec.linux.devices is not None
    dev = spec.linux.devices[-1]
    assert (dev.path, dev.type, dev.major, dev.minor) == ("/dev/pk-null", "c", 1, 3)
    assert spec.annotations is not None
    assert spec.annotations["io.kubernetes.cri.container-name"] == "app"
    assert spec.annotations["io.kubernetes.cri.sandbox-id"] == "sb1"
    with pytest.raises(ContainerConfigError, match=r"permissions 'rwx'"):
        build(ctr(devices=[Device(container_path="/dev/x", host_path="/dev/null",
                                  permissions="rwx")]), rootfs)


class RecordingInjector:
    def __init__(self) -> None:
        self.calls: list[list[str]] = []

    def inject_devices(self, spec: oci.Spec, names: Any) -> None:
        self.calls.append(list(names))
        spec.process.env = [*(spec.process.env or []), "CDI=1"]  # type: ignore[union-attr]


def test_container_cdi_devices_last_and_deduplicated(rootfs: Path) -> None:
    cdi = RecordingInjector()
    config = ctr(
        cdi_devices=["vendor.com/gpu=0"],
        annotations={"cdi.k8s.io/x": "vendor.com/gpu=0,vendor.com/gpu=1"},
    )
    spec = build(config, rootfs, cdi=cdi)
    assert cdi.calls == [["vendor.com/gpu=0", "vendor.com/gpu=1"]]
    assert spec.process is not None and (spec.process.env or [])[-1] == "CDI=1"
    with pytest.raises(ContainerConfigError, match="no CDI cache"):
        build(config, rootfs)
