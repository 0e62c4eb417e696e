"""Up-front checks of every string in pod and container configs (issue 11 defects 4, 7, 16).

Each hostile value is refused by ``validate_*_config`` with an error naming the field path,
before anything is created; the manager-level test shows nothing is left behind.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import attrs
import pytest

from podkit import apparmor
from podkit.container import ContainerConfigError, PodContext, validate_container_config
from podkit.errors import InvalidArgumentError
from podkit.pods import rules
from podkit.pods.checks import config_strings
from podkit.pods.config import (
    Capability,
    ContainerConfig,
    ContainerMetadata,
    Device,
    DNSConfig,
    HugepageLimit,
    KeyValue,
    LinuxContainerConfig,
    LinuxContainerResources,
    LinuxContainerSecurityContext,
    LinuxPodSandboxConfig,
    LinuxSandboxSecurityContext,
    Mount,
    NamespaceMode,
    NamespaceOption,
    PodSandboxMetadata,
    PortMapping,
    ProfileType,
    SandboxConfig,
    SecurityProfile,
    SELinuxOption,
)
from podkit.runtime.testing import FakeRuntime
from podkit.sandbox import (
    PauseConfig,
    SandboxConfigError,
    SandboxFiles,
    SandboxManager,
    validate_sandbox_config,
)
from support import walk

from .test_manager import FakeSupervisor

NO_APPARMOR = apparmor.AppArmorHost(enabled_file="/nonexistent/apparmor/enabled")
LOG_DIR = "/var/log/pods/pk_web_u1"


def pod(**kw: Any) -> SandboxConfig:
    kw.setdefault("metadata", PodSandboxMetadata(name="web", uid="u1", namespace="ns"))
    kw.setdefault("hostname", "web-0")
    return SandboxConfig(log_directory=LOG_DIR, **kw)


def pod_md(**kw: Any) -> SandboxConfig:
    return attrs.evolve(pod(), metadata=attrs.evolve(pod().metadata, **kw))


def pod_linux(**kw: Any) -> SandboxConfig:
    return pod(linux=LinuxPodSandboxConfig(**kw))


def pod_sc(**kw: Any) -> SandboxConfig:
    return pod_linux(security_context=LinuxSandboxSecurityContext(**kw))


def ctr(**kw: Any) -> ContainerConfig:
    kw.setdefault("command", ["sleep", "1"])
    kw.setdefault("metadata", ContainerMetadata(name="app"))
    return ContainerConfig(image="/img", **kw)


def ctr_sc(**kw: Any) -> ContainerConfig:
    return ctr(linux=LinuxContainerConfig(security_context=LinuxContainerSecurityContext(**kw)))


def ctr_res(**kw: Any) -> ContainerConfig:
    return ctr(linux=LinuxContainerConfig(resources=LinuxContainerResources(**kw)))


def context(config: SandboxConfig) -> PodContext:
    return PodContext(id="sb1", config=config, files=SandboxFiles.under("/run/pk/sb1"),
                      namespace_paths={"network": "/proc/42/ns/net", "pid": "/proc/42/ns/pid"})


def check_container(config: ContainerConfig, sandbox: SandboxConfig | None = None) -> None:
    validate_container_config(config, context(sandbox or pod()), apparmor_host=NO_APPARMOR)


def test_valid_configs_pass() -> None:
    validate_sandbox_config(pod(
        dns_config=DNSConfig(servers=["10.0.0.10", "fd00::10"], searches=["ns.svc", "svc."],
                             options=["ndots:5", "edns0"]),
        port_mappings=[PortMapping(container_port=80, host_port=8080, host_ip="127.0.0.1")],
        labels={"app": "web"}, annotations={"a/b": ""},
        linux=LinuxPodSandboxConfig(
            cgroup_parent="/kubepods/besteffort", sysctls={
                "net.ipv4.ip_unprivileged_port_start": "0", "kernel/shm_rmid_forced": "1",
                "net.ipv4.conf.eth0.forwarding": "1"})))
    validate_sandbox_config(pod_md(namespace=""))  # an empty namespace stays allowed
    check_container(ctr(
        working_dir="/srv", envs=[KeyValue(key="A", value="x=y"), KeyValue(key="B.c", value="")],
        mounts=[Mount(container_path="/data/../data", host_path="/tmp")],
        devices=[Device(container_path="/dev/xnull", host_path="/dev/null")],
        log_path="app/0.log",
        linux=LinuxContainerConfig(resources=LinuxContainerResources(
            cpuset_cpus="0-1,3", cpuset_mems="0", unified={"memory.high": "max"},
            hugepage_limits=[HugepageLimit(page_size="2MB", limit=0)]))))


HOSTILE_PODS: list[tuple[Callable[[], SandboxConfig], str]] = [
    (lambda: pod_md(name=""), r"^metadata\.name: must not be empty$"),
    (lambda: pod_md(name="web\0x"), r"^metadata\.name 'web\\x00x': contains a NUL byte$"),
    (lambda: pod_md(name="a_b"), r"^metadata\.name 'a_b': must not contain '_'$"),
    (lambda: pod_md(name="a/b"), r"^metadata\.name 'a/b': must not contain '/'$"),
    (lambda: pod_md(name="web;IP=10.88.0.9"), r"^metadata\.name .*must not contain ';' '='$"),
    (lambda: pod_md(namespace="n_s"), r"^metadata\.namespace 'n_s': must not contain '_'"),
    (lambda: pod_md(namespace="n\0"), r"^metadata\.namespace 'n\\x00': contains a NUL"),
    (lambda: pod_md(uid="u;K8S_POD_NAME=x"), r"^metadata\.uid .*must not contain ';' or '='"),
    (lambda: pod_md(uid="u\0"), r"^metadata\.uid 'u\\x00': contains a NUL"),
    (lambda: pod_md(attempt=-1), r"^metadata\.attempt -1: must be in"),
    (lambda: pod(hostname="h\0"), r"^hostname 'h\\x00': contains a NUL"),
    (lambda: pod(hostname="web_0"), r"^hostname 'web_0': not an RFC 1123 host name"),
    (lambda: pod(hostname="-web"), r"^hostname '-web': not an RFC 1123"),
    (lambda: pod(hostname="web..x"), r"^hostname 'web\.\.x': not an RFC 1123"),
    (lambda: pod(hostname="web\nx"), r"^hostname 'web\\nx': not an RFC 1123"),
    (lambda: pod(hostname="h" * 65), r"^hostname 'h+': longer than 64 characters \(65\)"),
    (lambda: attrs.evolve(pod(), log_directory="logs/pods"),
     r"^log_directory 'logs/pods': must be absolute$"),
    (lambda: attrs.evolve(pod(), log_directory="/logs\0"), r"^log_directory '/logs\\x00'"),
    (lambda: pod(dns_config=DNSConfig(servers=["8.8.8.8\nnameserver 10.0.0.1"])),
     r"^dns_config\.servers\[0\] '8\.8\.8\.8\\nnameserver 10\.0\.0\.1': not an IP address"),
    (lambda: pod(dns_config=DNSConfig(servers=["dns.example"])),
     r"^dns_config\.servers\[0\] 'dns\.example': not an IP address"),
    (lambda: pod(dns_config=DNSConfig(searches=["a", "b c"])),
     r"^dns_config\.searches\[1\] 'b c': must be non-empty, without spaces"),
    (lambda: pod(dns_config=DNSConfig(searches=[""])), r"^dns_config\.searches\[0\] ''"),
    (lambda: pod(dns_config=DNSConfig(options=["ndots:5\nsearch evil"])),
     r"^dns_config\.options\[0\] 'ndots:5\\nsearch evil'"),
    (lambda: pod(port_mappings=[PortMapping(container_port=80, host_port=80, host_ip="me")]),
     r"^port_mappings\[0\]\.host_ip 'me': not an IP address"),
    (lambda: pod(labels={"": "x"}), r"^labels: empty key$"),
    (lambda: pod(labels={"app": "x\0"}), r"^labels\['app'\] 'x\\x00': contains a NUL"),
    (lambda: pod(annotations={"a\0": "x"}), r"^annotations key 'a\\x00': contains a NUL"),
    (lambda: pod_linux(cgroup_parent="/kubepods/../../etc"),
     r"^linux\.cgroup_parent '/kubepods/\.\./\.\./etc': must not contain '\.\.' elements"),
    (lambda: pod_linux(cgroup_parent="/kubepods\0"), r"^linux\.cgroup_parent .*NUL"),
    (lambda: pod_linux(sysctls={"/etc/passwd": "x"}),
     r"^linux\.sysctls key '/etc/passwd': not a sysctl name"),
    (lambda: pod_linux(sysctls={"../../etc/passwd": "x"}), r"^linux\.sysctls key '\.\./"),
    (lambda: pod_linux(sysctls={".kernel": "x"}), r"^linux\.sysctls key '\.kernel'"),
    (lambda: pod_linux(sysctls={"net.ipv4.ip_forward": "1\0"}),
     r"^linux\.sysctls\['net\.ipv4\.ip_forward'\] '1\\x00': contains a NUL"),
    (lambda: pod_linux(resources=LinuxContainerResources(cpuset_cpus="0\n1")),
     r"^linux\.resources\.cpuset_cpus '0\\n1': not a cpuset list"),
    (lambda: pod_linux(overhead=LinuxContainerResources(unified={"../cgroup.procs": "1"})),
     r"^linux\.overhead\.unified key '\.\./cgroup\.procs': not a cgroup v2 file name"),
    (lambda: pod_sc(selinux_options=SELinuxOption(user="u:r")),
     r"^linux\.security_context\.selinux_options\.user 'u:r': must not contain ':'"),
    (lambda: pod_sc(seccomp=SecurityProfile(profile_type=ProfileType.LOCALHOST,
                                            localhost_ref="/etc/p.json\0")),
     r"^linux\.security_context\.seccomp\.localhost_ref '/etc/p\.json\\x00': contains a NUL"),
    (lambda: pod_sc(namespace_options=NamespaceOption(target_id="x\0")),
     r"^linux\.security_context\.namespace_options\.target_id 'x\\x00'"),
]


@pytest.mark.parametrize(("make", "message"), HOSTILE_PODS)
def test_hostile_pod_values_are_refused_naming_the_field(
    make: Callable[[], SandboxConfig], message: str
) -> None:
    with pytest.raises(SandboxConfigError, match=message):
        validate_sandbox_config(make())


HOSTILE_CONTAINERS: list[tuple[Callable[[], ContainerConfig], str]] = [
    (lambda: ctr(metadata=ContainerMetadata(name="")), r"^metadata\.name: must not be empty$"),
    (lambda: ctr(metadata=ContainerMetadata(name="a\0")), r"^metadata\.name 'a\\x00': .*NUL"),
    (lambda: ctr(metadata=ContainerMetadata(name="a_b")), r"^metadata\.name 'a_b': must not"),
    (lambda: ctr(metadata=ContainerMetadata(name="app", attempt=2**32)),
     r"^metadata\.attempt 4294967296"),
    (lambda: attrs.evolve(ctr(), image="/img\0"), r"^image '/img\\x00': contains a NUL"),
    (lambda: ctr(command=["sh", "-c\0"]), r"^command\[1\] '-c\\x00': contains a NUL"),
    (lambda: ctr(args=["\0"]), r"^args\[0\] '\\x00': contains a NUL"),
    (lambda: ctr(working_dir="srv"), r"^working_dir 'srv': must be absolute$"),
    (lambda: ctr(working_dir="/srv\0"), r"^working_dir '/srv\\x00': contains a NUL"),
    (lambda: ctr(envs=[KeyValue(key="", value="x")]), r"^envs\[0\]\.key '': must be non-empty"),
    (lambda: ctr(envs=[KeyValue(key="A", value="1"), KeyValue(key="B=C", value="x")]),
     r"^envs\[1\]\.key 'B=C': must be non-empty and without '='"),
    (lambda: ctr(envs=[KeyValue(key="A\0B", value="x")]), r"^envs\[0\]\.key 'A\\x00B': .*NUL"),
    (lambda: ctr(envs=[KeyValue(key="A", value="x\0y")]),
     r"^envs\[0\]\.value 'x\\x00y': contains a NUL"),
    (lambda: ctr(mounts=[Mount(container_path="data", host_path="/d")]),
     r"^mounts\[0\]\.container_path 'data': must be absolute$"),
    (lambda: ctr(mounts=[Mount(container_path="/data", host_path="../../etc")]),
     r"^mounts\[0\]\.host_path '\.\./\.\./etc': must be absolute$"),
    (lambda: ctr(mounts=[Mount(container_path="/data", host_path="/d\0")]),
     r"^mounts\[0\]\.host_path '/d\\x00': contains a NUL"),
    (lambda: ctr(devices=[Device(container_path="xnull", host_path="/dev/null")]),
     r"^devices\[0\]\.container_path 'xnull': must be absolute$"),
    (lambda: ctr(devices=[Device(container_path="/dev/x", host_path="dev/null")]),
     r"^devices\[0\]\.host_path 'dev/null': must be absolute$"),
    (lambda: ctr(devices=[Device(container_path="/dev/x", host_path="/dev/null",
                                 permissions="rwx")]),
     r"^devices\[0\]\.permissions 'rwx': must be a subset of 'rwm'"),
    (lambda: ctr(labels={"": "v"}), r"^labels: empty key$"),
    (lambda: ctr(annotations={"k": "\0"}), r"^annotations\['k'\] '\\x00': contains a NUL"),
    (lambda: ctr(log_path="../../x.log"),
     r"^log_path '\.\./\.\./x\.log': resolves to '/var/log/x\.log', not a file inside the "
     r"pod's log_directory '/var/log/pods/pk_web_u1'$"),
    (lambda: ctr(log_path="app/../../other_pod/0.log"),
     r"resolves to '/var/log/pods/other_pod/0\.log', not a file inside"),
    (lambda: ctr(log_path="/../../../etc/cron.d/x"), r"resolves to '/var/etc/cron\.d/x'"),
    (lambda: ctr(log_path="."), r"^log_path '\.': resolves to '/var/log/pods/pk_web_u1', not"),
    (lambda: ctr(log_path="x.log\0"), r"^log_path 'x\.log\\x00': contains a NUL"),
    (lambda: ctr(cdi_devices=["vendor.com/gpu=0\0"]), r"^cdi_devices\[0\] .*contains a NUL"),
    (lambda: ctr_sc(run_as_username="app:0"),
     r"^linux\.security_context\.run_as_username 'app:0': must not contain ':'"),
    (lambda: ctr_sc(masked_paths=["proc/kcore"]),
     r"^linux\.security_context\.masked_paths\[0\] 'proc/kcore': must be absolute"),
    (lambda: ctr_sc(readonly_paths=["/proc/sys\0"]),
     r"^linux\.security_context\.readonly_paths\[0\] .*NUL"),
    (lambda: ctr_sc(capabilities=Capability(add_capabilities=["BOGUS"])),
     r"^unknown capability 'CAP_BOGUS' in linux\.security_context\.capabilities\."
     r"add_capabilities$"),
    (lambda: ctr_sc(capabilities=Capability(drop_capabilities=["NET_RAW\0"])),
     r"^linux\.security_context\.capabilities\.drop_capabilities\[0\] .*NUL"),
    (lambda: ctr_sc(capabilities=Capability(add_ambient_capabilities=["fly"])),
     r"^unknown capability 'CAP_FLY' in linux\.security_context\.capabilities\.add_ambient"),
    (lambda: ctr_sc(apparmor=SecurityProfile(profile_type=ProfileType.LOCALHOST,
                                             localhost_ref="p\0")),
     r"^linux\.security_context\.apparmor\.localhost_ref 'p\\x00': contains a NUL"),
    (lambda: ctr_sc(namespace_options=NamespaceOption(pid=NamespaceMode.TARGET,
                                                      target_id="c\0")),
     r"^linux\.security_context\.namespace_options\.target_id 'c\\x00'"),
    (lambda: ctr_res(cpuset_mems="0;1"), r"^linux\.resources\.cpuset_mems '0;1': not a cpuset"),
    (lambda: ctr_res(hugepage_limits=[HugepageLimit(page_size="2MB/../../x", limit=1)]),
     r"^linux\.resources\.hugepage_limits\[0\]\.page_size '2MB/\.\./\.\./x'"),
    (lambda: ctr_res(unified={"memory.max/../../x": "1"}),
     r"^linux\.resources\.unified key 'memory\.max/\.\./\.\./x'"),
]


@pytest.mark.parametrize(("make", "message"), HOSTILE_CONTAINERS)
def test_hostile_container_values_are_refused_naming_the_field(
    make: Callable[[], ContainerConfig], message: str
) -> None:
    with pytest.raises(ContainerConfigError, match=message):
        check_container(make())


WRONG_TYPES: list[tuple[Callable[[], Any], str]] = [
    (lambda: ctr(command="sleep 1"), r"^command 'sleep 1': must be a list, not str$"),
    (lambda: ctr(args=["x", 1]), r"^args\[1\] 1: must be a string, not int$"),
    (lambda: attrs.evolve(ctr(), image=None), r"^image None: must be a string, not NoneType"),
    (lambda: ctr(labels={"a": 1}), r"^labels\['a'\] 1: must be a string, not int$"),
    (lambda: ctr_sc(namespace_options=NamespaceOption(pid=1)),
     r"^linux\.security_context\.namespace_options\.pid 1: must be a NamespaceMode "
     r"\(POD, CONTAINER, NODE, TARGET\), not int$"),
    (lambda: ctr_sc(run_as_user="0"),
     r"^linux\.security_context\.run_as_user '0': must be an integer, not str$"),
    (lambda: ctr(mounts=["/data"]), r"^mounts\[0\] '/data': must be a Mount, not str$"),
    (lambda: ctr(tty=1), r"^tty 1: must be a boolean, not int$"),
]


@pytest.mark.parametrize(("make", "message"), WRONG_TYPES)
def test_wrong_types_are_refused_naming_the_field(make: Callable[[], Any], message: str) -> None:
    """A plain int for an enum, a string for a list: refused, not stored half-made."""
    with pytest.raises(ContainerConfigError, match=message):
        check_container(make())
    with pytest.raises(SandboxConfigError, match=r"^metadata\.attempt '0': must be an integer"):
        validate_sandbox_config(pod_md(attempt="0"))
    with pytest.raises(SandboxConfigError, match=r"^dns_config\.servers '10\.0\.0\.1': must"):
        validate_sandbox_config(pod(dns_config=DNSConfig(servers="10.0.0.1")))


def test_one_name_rule_for_pods_and_containers() -> None:
    for name in ("", "a_b", "a/b", "a;b", "a=b", "a\0b", ".", "..", "a\nb", "a" * 254):
        with pytest.raises(SandboxConfigError) as pod_error:
            validate_sandbox_config(pod_md(name=name))
        with pytest.raises(ContainerConfigError) as ctr_error:
            check_container(ctr(metadata=ContainerMetadata(name=name)))
        assert str(pod_error.value) == str(ctr_error.value)
    validate_sandbox_config(pod_md(name="a" * 253))
    check_container(ctr(metadata=ContainerMetadata(name="a.b-c" * 50)))


def test_error_quotes_a_long_hostile_value_bounded() -> None:
    name = "a" * 10_000 + "\0"
    with pytest.raises(SandboxConfigError) as e:
        validate_sandbox_config(pod_md(name=name))
    text = str(e.value)
    assert text.startswith("metadata.name 'aaaa") and "(10001 characters)" in text
    assert len(text) < 250
    with pytest.raises(ContainerConfigError) as e2:
        check_container(ctr(log_path="../" * 3000 + "x"))
    assert len(str(e2.value)) < 400 and "(9001 characters)" in str(e2.value)


def test_container_log_path_stays_inside_the_log_directory() -> None:
    path = rules.container_log_path
    assert path(LOG_DIR, "app/0.log") == f"{LOG_DIR}/app/0.log"
    assert path(LOG_DIR + "/", "./app//0.log") == f"{LOG_DIR}/app/0.log"
    assert path(LOG_DIR, "/app/0.log") == f"{LOG_DIR}/app/0.log"  # Go's filepath.Join
    assert path(LOG_DIR, "a/../b.log") == f"{LOG_DIR}/b.log"
    assert path("", "x.log") == "" and path(LOG_DIR, "") == ""  # containerd: no log file
    assert path("/", "x.log") == "/x.log"
    with pytest.raises(InvalidArgumentError, match=r"resolves to '/var/log/pods/pk_web_u1x'"):
        path(LOG_DIR, "../pk_web_u1x")  # a sibling sharing the prefix is outside too


def test_config_strings_walks_every_field() -> None:
    config = ctr(envs=[KeyValue(key="K", value="V")], labels={"l": "v"},
                 mounts=[Mount(container_path="/c", host_path="/h")])
    found = dict(config_strings(config))
    assert found["envs[0].key"] == "K" and found["envs[0].value"] == "V"
    assert found["labels key"] == "l" and found["labels['l']"] == "v"
    assert found["mounts[0].host_path"] == "/h" and found["command[1]"] == "1"
    assert found["linux.security_context.namespace_options.target_id"] == ""


# --- through the manager (fakes): nothing is created, the name stays free -----------------


@pytest.fixture
def manager(tmp_path: Path) -> Iterator[tuple[SandboxManager, FakeRuntime]]:
    rootfs = tmp_path / "rootfs"
    (rootfs / "etc").mkdir(parents=True)
    rt = FakeRuntime()
    m = SandboxManager(tmp_path / "root", tmp_path / "state", rt, None,
                       pause=PauseConfig(rootfs=str(rootfs)), supervisor=FakeSupervisor(rt))
    yield m, rt
    m.close()


def host_pod(**kw: Any) -> SandboxConfig:
    ns = NamespaceOption(network=NamespaceMode.NODE, ipc=NamespaceMode.NODE)
    return attrs.evolve(pod(**kw), hostname="", linux=LinuxPodSandboxConfig(
        security_context=LinuxSandboxSecurityContext(namespace_options=ns)))


def files_under(tmp_path: Path) -> list[str]:
    return sorted(str(p.relative_to(tmp_path)) for p in walk(tmp_path)
                  if "rootfs" not in p.parts)


def test_manager_refuses_a_nul_pod_name_before_anything_exists(
    manager: tuple[SandboxManager, FakeRuntime], tmp_path: Path
) -> None:
    m, rt = manager
    before = files_under(tmp_path)
    for config in (host_pod(metadata=PodSandboxMetadata(name="web\0", uid="u1")),
                   host_pod(metadata=PodSandboxMetadata(name="", uid="u1"))):
        with pytest.raises(SandboxConfigError, match=r"^metadata\.name"):
            m.run_sandbox(config)
    assert files_under(tmp_path) == before and rt.containers == {} and m.list_sandboxes() == []


def test_manager_refuses_an_escaping_log_path_before_anything_exists(
    manager: tuple[SandboxManager, FakeRuntime], tmp_path: Path
) -> None:
    m, _rt = manager
    sb = m.run_sandbox(host_pod())
    rootfs = tmp_path / "rootfs"
    before = files_under(tmp_path)
    with pytest.raises(ContainerConfigError, match=r"resolves to '/var/log/x\.log'"):
        m.create_container(sb.id, attrs.evolve(ctr(log_path="../../x.log"), image=str(rootfs)))
    assert files_under(tmp_path) == before and m.list_containers() == []
    cid = m.create_container(sb.id, attrs.evolve(ctr(log_path="/app/0.log"), image=str(rootfs)))
    assert m.container_log_file(cid) == f"{LOG_DIR}/app/0.log"  # inside, as containerd joins
    m.remove_sandbox(sb.id)
