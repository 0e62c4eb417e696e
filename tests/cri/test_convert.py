"""podkit.cri.convert: CRI messages to podkit models and back, on random messages and models."""

from __future__ import annotations

import signal
import subprocess
import sys
from collections.abc import Callable
from typing import Any

import pytest
from google.protobuf import json_format, message_factory
from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.message import Message
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from podkit.cri import api_pb2 as pb
from podkit.cri import convert
from podkit.cri.convert import ConversionError
from podkit.pods import config as m
from podkit.sandbox import (
    Container,
    ContainerFilter,
    ContainerState,
    ContainerStats,
    Sandbox,
    SandboxFilter,
    SandboxState,
    SandboxStats,
)

SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# --- random CRI messages, built from the descriptor ------------------------------------------

TEXT = st.text(st.characters(codec="utf-8"), max_size=6)
RANGES = {
    FieldDescriptor.TYPE_INT32: (-(2**31), 2**31 - 1),
    FieldDescriptor.TYPE_INT64: (-(2**63), 2**63 - 1),
    FieldDescriptor.TYPE_UINT32: (0, 2**32 - 1),
    FieldDescriptor.TYPE_UINT64: (0, 2**64 - 1),
}


def _scalar(field: FieldDescriptor, unknown_enums: bool) -> st.SearchStrategy[Any]:
    if field.type in RANGES:
        lo, hi = RANGES[field.type]
        return st.integers(lo, hi)
    if field.type == FieldDescriptor.TYPE_STRING:
        return TEXT
    if field.type == FieldDescriptor.TYPE_BYTES:
        return st.binary(max_size=6) | TEXT.map(str.encode)
    if field.type == FieldDescriptor.TYPE_BOOL:
        return st.booleans()
    if field.type == FieldDescriptor.TYPE_DOUBLE:
        return st.floats(allow_nan=False)
    if field.type == FieldDescriptor.TYPE_ENUM:
        assert field.enum_type is not None
        known = st.sampled_from([v.number for v in field.enum_type.values])
        return known | st.integers(100, 200) if unknown_enums else known
    raise AssertionError(f"unhandled field type {field.type} of {field.full_name}")


def messages(
    target: Any, *, unknown_enums: bool = False, depth: int = 0
) -> st.SearchStrategy[Message]:
    """Any message of this type (class or descriptor): every field maybe set, nested a bit."""
    desc: Descriptor = getattr(target, "DESCRIPTOR", target)
    cls = message_factory.GetMessageClass(desc)
    parts: dict[str, st.SearchStrategy[Any]] = {}
    for field in desc.fields:
        sub = field.message_type
        if sub is not None and sub.GetOptions().map_entry:
            parts[field.name] = st.dictionaries(TEXT, TEXT, max_size=3)
        elif sub is not None:
            if depth >= 7:
                continue
            one = messages(sub, unknown_enums=unknown_enums, depth=depth + 1)
            parts[field.name] = st.lists(one, max_size=2) if field.is_repeated else one
        else:
            one = _scalar(field, unknown_enums)
            parts[field.name] = st.lists(one, max_size=3) if field.is_repeated else one

    def build(values: dict[str, Any]) -> Message:
        msg = cls()
        for name, value in values.items():
            target = getattr(msg, name)
            if isinstance(value, dict):
                target.update(value)
            elif isinstance(value, list):
                target.extend(value)
            elif isinstance(value, Message):
                target.CopyFrom(value)
                target.SetInParent()
            else:
                setattr(msg, name, value)
        return msg

    return st.fixed_dictionaries({}, optional=parts).map(build)


def _clear_unsupported_container(msg: pb.ContainerConfig) -> pb.ContainerConfig:
    """What podkit's models can hold of a ContainerConfig, in the shape to_cri sends."""
    msg.ClearField("windows")
    msg.metadata.SetInParent()
    image = msg.image.image
    msg.image.Clear()
    msg.image.image = image
    for mount in msg.mounts:
        mount.ClearField("image")
        mount.ClearField("image_sub_path")
    for kv in msg.envs:
        kv.value = kv.value.decode("utf-8", "replace").encode()
    sc = msg.linux.security_context
    sc.ClearField("apparmor_profile")
    sc.ClearField("seccomp_profile_path")
    sc.namespace_options.SetInParent()
    # Signal aliases come back under the names Python's signal module uses
    msg.stop_signal = SIGNAL_ALIASES.get(msg.stop_signal, msg.stop_signal)
    return msg


SIGNAL_ALIASES = {pb.SIGCLD: pb.SIGCHLD, pb.SIGIOT: pb.SIGABRT, pb.SIGPOLL: pb.SIGIO}


def _clear_unsupported_sandbox(msg: pb.PodSandboxConfig) -> pb.PodSandboxConfig:
    msg.ClearField("windows")
    msg.metadata.SetInParent()
    sc = msg.linux.security_context
    sc.ClearField("seccomp_profile_path")
    sc.namespace_options.SetInParent()
    return msg


# --- random podkit models ----------------------------------------------------------------

INT32 = st.integers(-(2**31), 2**31 - 1)
INT64 = st.integers(-(2**63), 2**63 - 1)
UINT32 = st.integers(0, 2**32 - 1)
UINT64 = st.integers(0, 2**64 - 1)
TEXTS = st.lists(TEXT, max_size=3).map(tuple)
MAP = st.dictionaries(TEXT, TEXT, max_size=3)


def _opt(strategy: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.none() | strategy


def _tuple_of(strategy: st.SearchStrategy[Any]) -> st.SearchStrategy[tuple[Any, ...]]:
    return st.lists(strategy, max_size=2).map(tuple)


id_mappings = st.builds(m.IDMapping, host_id=UINT32, container_id=UINT32, length=UINT32)
namespace_options = st.builds(
    m.NamespaceOption,
    network=st.sampled_from(m.NamespaceMode),
    pid=st.sampled_from(m.NamespaceMode),
    ipc=st.sampled_from(m.NamespaceMode),
    target_id=TEXT,
    userns_options=_opt(st.builds(
        m.UserNamespace, mode=st.sampled_from(m.NamespaceMode),
        uids=_tuple_of(id_mappings), gids=_tuple_of(id_mappings),
    )),
)
selinux = st.builds(m.SELinuxOption, user=TEXT, role=TEXT, type=TEXT, level=TEXT)
profiles = st.builds(m.SecurityProfile, profile_type=st.sampled_from(m.ProfileType),
                     localhost_ref=TEXT)
resources = st.builds(
    m.LinuxContainerResources,
    cpu_period=INT64, cpu_quota=INT64, cpu_shares=INT64, memory_limit_in_bytes=INT64,
    oom_score_adj=INT64, cpuset_cpus=TEXT, cpuset_mems=TEXT,
    hugepage_limits=_tuple_of(st.builds(m.HugepageLimit, page_size=TEXT, limit=UINT64)),
    unified=MAP, memory_swap_limit_in_bytes=INT64,
)
policies = st.sampled_from(m.SupplementalGroupsPolicy)
sandbox_configs = st.builds(
    m.SandboxConfig,
    metadata=st.builds(m.PodSandboxMetadata, name=TEXT, uid=TEXT, namespace=TEXT,
                       attempt=UINT32),
    hostname=TEXT,
    log_directory=TEXT,
    dns_config=_opt(st.builds(m.DNSConfig, servers=TEXTS, searches=TEXTS, options=TEXTS)),
    port_mappings=_tuple_of(st.builds(
        m.PortMapping, container_port=INT32, host_port=INT32,
        protocol=st.sampled_from(m.Protocol), host_ip=TEXT,
    )),
    labels=MAP,
    annotations=MAP,
    linux=st.builds(
        m.LinuxPodSandboxConfig,
        cgroup_parent=TEXT,
        security_context=st.builds(
            m.LinuxSandboxSecurityContext,
            namespace_options=namespace_options, selinux_options=_opt(selinux),
            run_as_user=_opt(INT64), run_as_group=_opt(INT64), readonly_rootfs=st.booleans(),
            supplemental_groups=_tuple_of(INT64), supplemental_groups_policy=policies,
            privileged=st.booleans(), seccomp=_opt(profiles), apparmor=_opt(profiles),
        ),
        sysctls=MAP,
        overhead=_opt(resources),
        resources=_opt(resources),
    ),
)
non_empty_paths = st.lists(TEXT, min_size=1, max_size=3).map(tuple)
container_configs = st.builds(
    m.ContainerConfig,
    metadata=st.builds(m.ContainerMetadata, name=TEXT, attempt=UINT32),
    image=TEXT,
    command=TEXTS,
    args=TEXTS,
    working_dir=TEXT,
    envs=_tuple_of(st.builds(m.KeyValue, key=TEXT, value=TEXT)),
    mounts=_tuple_of(st.builds(
        m.Mount, container_path=TEXT, host_path=TEXT, readonly=st.booleans(),
        selinux_relabel=st.booleans(), propagation=st.sampled_from(m.MountPropagation),
        uid_mappings=_tuple_of(id_mappings), gid_mappings=_tuple_of(id_mappings),
        recursive_read_only=st.booleans(),
    )),
    devices=_tuple_of(st.builds(m.Device, container_path=TEXT, host_path=TEXT,
                                permissions=TEXT)),
    labels=MAP,
    annotations=MAP,
    log_path=TEXT,
    stdin=st.booleans(),
    stdin_once=st.booleans(),
    tty=st.booleans(),
    linux=st.builds(
        m.LinuxContainerConfig,
        resources=_opt(resources),
        security_context=st.builds(
            m.LinuxContainerSecurityContext,
            capabilities=_opt(st.builds(m.Capability, add_capabilities=TEXTS,
                                        drop_capabilities=TEXTS,
                                        add_ambient_capabilities=TEXTS)),
            privileged=st.booleans(), namespace_options=namespace_options,
            selinux_options=_opt(selinux), run_as_user=_opt(INT64), run_as_group=_opt(INT64),
            run_as_username=TEXT, readonly_rootfs=st.booleans(),
            supplemental_groups=_tuple_of(INT64), supplemental_groups_policy=policies,
            no_new_privs=st.booleans(), masked_paths=_opt(non_empty_paths),
            readonly_paths=_opt(non_empty_paths), seccomp=_opt(profiles),
            apparmor=_opt(profiles),
        ),
    ),
    cdi_devices=TEXTS,
    # Linux signal numbers the CRI can name (0: unset)
    stop_signal=st.sampled_from(
        [0, *range(1, 32), *range(signal.SIGRTMIN, signal.SIGRTMAX + 1)]),
)

# --- round trips --------------------------------------------------------------------------


@SETTINGS
@given(sandbox_configs)
def test_sandbox_model_round_trip(config: m.SandboxConfig) -> None:
    msg = convert.sandbox_config_to_cri(config)
    assert convert.sandbox_config_from_cri(pb.PodSandboxConfig.FromString(
        msg.SerializeToString()
    )) == config


@SETTINGS
@given(container_configs)
def test_container_model_round_trip(config: m.ContainerConfig) -> None:
    msg = convert.container_config_to_cri(config)
    assert convert.container_config_from_cri(pb.ContainerConfig.FromString(
        msg.SerializeToString()
    )) == config


# Deep parts drawn on their own and spliced in, so every run reaches them.
def _with_userns(ns: pb.NamespaceOption, userns: pb.UserNamespace | None) -> pb.NamespaceOption:
    if userns is not None:
        ns.userns_options.CopyFrom(userns)
    return ns


NAMESPACES = st.builds(
    _with_userns, messages(pb.NamespaceOption.DESCRIPTOR),
    st.none() | messages(pb.UserNamespace.DESCRIPTOR),
)
RESOURCES = messages(pb.LinuxContainerResources.DESCRIPTOR)


@SETTINGS
@given(messages(pb.PodSandboxConfig.DESCRIPTOR),
       messages(pb.LinuxSandboxSecurityContext.DESCRIPTOR), NAMESPACES, RESOURCES)
def test_sandbox_message_round_trip(
    msg: pb.PodSandboxConfig, sc: pb.LinuxSandboxSecurityContext, ns: pb.NamespaceOption,
    res: pb.LinuxContainerResources,
) -> None:
    sc.namespace_options.CopyFrom(ns)
    msg.linux.security_context.CopyFrom(sc)
    msg.linux.resources.CopyFrom(res)
    msg = _clear_unsupported_sandbox(msg)
    assert convert.sandbox_config_to_cri(convert.sandbox_config_from_cri(msg)) == msg


@SETTINGS
@given(messages(pb.ContainerConfig.DESCRIPTOR),
       messages(pb.LinuxContainerSecurityContext.DESCRIPTOR), NAMESPACES, RESOURCES)
def test_container_message_round_trip(
    msg: pb.ContainerConfig, sc: pb.LinuxContainerSecurityContext, ns: pb.NamespaceOption,
    res: pb.LinuxContainerResources,
) -> None:
    sc.namespace_options.CopyFrom(ns)
    msg.linux.security_context.CopyFrom(sc)
    msg.linux.resources.CopyFrom(res)
    msg = _clear_unsupported_container(msg)
    assert convert.container_config_to_cri(convert.container_config_from_cri(msg)) == msg


def _converts_or_names_a_field(
    convert_fn: Callable[[Any], object], msg: Message
) -> None:
    try:
        convert_fn(msg)
    except ConversionError as exc:
        assert exc.path.startswith("config.")
        assert str(exc).startswith(exc.path + ": ")
        _resolve(msg, exc.path.removeprefix("config."))


def _resolve(msg: Message, path: str) -> None:
    """The error's path names a real field of the message (list indexes included)."""
    target: Any = msg
    for part in path.split("."):
        name, _, index = part.partition("[")
        assert name in target.DESCRIPTOR.fields_by_name, (path, name)
        target = getattr(target, name)
        if index:
            target = target[int(index.rstrip("]"))]


@SETTINGS
@given(messages(pb.PodSandboxConfig.DESCRIPTOR, unknown_enums=True))
def test_any_sandbox_message_converts_or_names_the_field(msg: pb.PodSandboxConfig) -> None:
    _converts_or_names_a_field(convert.sandbox_config_from_cri, msg)


@SETTINGS
@given(messages(pb.ContainerConfig.DESCRIPTOR, unknown_enums=True))
def test_any_container_message_converts_or_names_the_field(msg: pb.ContainerConfig) -> None:
    _converts_or_names_a_field(convert.container_config_from_cri, msg)


# --- specific shapes and errors -----------------------------------------------------------


def _container(**fields: Any) -> pb.ContainerConfig:
    msg = pb.ContainerConfig(
        metadata=pb.ContainerMetadata(name="c"), image=pb.ImageSpec(image="busybox")
    )
    json_format.ParseDict(fields, msg)
    return msg


def test_kubelet_style_sandbox_config() -> None:
    msg = json_format.ParseDict({
        "metadata": {"name": "web", "uid": "u-1", "namespace": "ns", "attempt": 1},
        "hostname": "web",
        "log_directory": "/var/log/pods/ns_web_u-1",
        "dns_config": {"servers": ["10.96.0.10"], "searches": ["ns.svc.cluster.local"],
                       "options": ["ndots:5"]},
        "port_mappings": [{"protocol": "UDP", "container_port": 53, "host_port": 5353}],
        "labels": {"app": "web"},
        "linux": {
            "cgroup_parent": "/kubepods/besteffort/podu-1",
            "security_context": {
                "namespace_options": {"network": "NODE", "pid": "CONTAINER"},
                "run_as_user": {"value": 0},
                "seccomp": {"profile_type": "RuntimeDefault"},
            },
            "sysctls": {"net.ipv4.ip_forward": "1"},
        },
    }, pb.PodSandboxConfig())
    config = convert.sandbox_config_from_cri(msg)
    assert config.metadata == m.PodSandboxMetadata(name="web", uid="u-1", namespace="ns",
                                                   attempt=1)
    assert config.dns_config == m.DNSConfig(servers=("10.96.0.10",),
                                            searches=("ns.svc.cluster.local",),
                                            options=("ndots:5",))
    assert config.port_mappings == (
        m.PortMapping(container_port=53, host_port=5353, protocol=m.Protocol.UDP),
    )
    sc = config.linux.security_context
    assert sc.namespace_options.network is m.NamespaceMode.NODE
    assert sc.namespace_options.pid is m.NamespaceMode.CONTAINER
    assert sc.run_as_user == 0  # set to zero, not absent
    assert sc.run_as_group is None
    assert sc.seccomp == m.SecurityProfile(profile_type=m.ProfileType.RUNTIME_DEFAULT)
    assert sc.apparmor is None
    assert config.linux.sysctls == {"net.ipv4.ip_forward": "1"}
    assert config.linux.resources is None


def test_unset_parts_become_model_defaults() -> None:
    config = convert.sandbox_config_from_cri(
        pb.PodSandboxConfig(metadata=pb.PodSandboxMetadata(name="p"))
    )
    assert config.linux == m.LinuxPodSandboxConfig()
    assert config.dns_config is None
    container = convert.container_config_from_cri(_container())
    assert container.linux == m.LinuxContainerConfig()
    assert container.linux.security_context.masked_paths is None


def test_container_fields_with_other_names() -> None:
    msg = _container(
        CDI_devices=[{"name": "vendor.com/gpu=0"}, {"name": "vendor.com/gpu=1"}],
        envs=[{"key": "A", "value": "w6k="}],  # base64 of "é" in UTF-8
        mounts=[{"container_path": "/d", "host_path": "/h", "uidMappings": [
            {"host_id": 1000, "container_id": 0, "length": 1}]}],
        stop_signal="SIGTERM",
    )
    msg.image.user_specified_image = "docker.io/library/busybox:latest"
    config = convert.container_config_from_cri(msg)
    assert config.cdi_devices == ("vendor.com/gpu=0", "vendor.com/gpu=1")
    assert config.envs == (m.KeyValue(key="A", value="é"),)
    assert config.mounts[0].uid_mappings == (m.IDMapping(host_id=1000, container_id=0,
                                                         length=1),)
    assert config.image == "busybox"
    assert config.stop_signal == signal.SIGTERM == 15  # the Linux number, not the CRI 23
    back = convert.container_config_to_cri(config)
    assert back.stop_signal == pb.SIGTERM
    assert [d.name for d in back.CDI_devices] == list(config.cdi_devices)
    assert back.envs[0].value == "é".encode()


@pytest.mark.parametrize(
    ("legacy", "expected"),
    [
        ("runtime/default", m.SecurityProfile(profile_type=m.ProfileType.RUNTIME_DEFAULT)),
        ("docker/default", m.SecurityProfile(profile_type=m.ProfileType.RUNTIME_DEFAULT)),
        ("unconfined", m.SecurityProfile(profile_type=m.ProfileType.UNCONFINED)),
        ("localhost/prof.json",
         m.SecurityProfile(profile_type=m.ProfileType.LOCALHOST, localhost_ref="prof.json")),
        ("", None),
    ],
)
def test_deprecated_seccomp_path(legacy: str, expected: m.SecurityProfile | None) -> None:
    msg = _container(linux={"security_context": {"seccomp_profile_path": legacy}})
    sc = convert.container_config_from_cri(msg).linux.security_context
    assert sc.seccomp == expected


def test_new_profile_fields_win_over_deprecated_ones() -> None:
    msg = _container(linux={"security_context": {
        "seccomp_profile_path": "unconfined", "apparmor_profile": "unconfined",
        "seccomp": {"profile_type": "Localhost", "localhost_ref": "/p.json"},
        "apparmor": {"profile_type": "RuntimeDefault"},
    }})
    sc = convert.container_config_from_cri(msg).linux.security_context
    assert sc.seccomp == m.SecurityProfile(profile_type=m.ProfileType.LOCALHOST,
                                           localhost_ref="/p.json")
    assert sc.apparmor == m.SecurityProfile(profile_type=m.ProfileType.RUNTIME_DEFAULT)


def test_deprecated_apparmor_name() -> None:
    msg = _container(linux={"security_context": {"apparmor_profile": "localhost/k8s-nginx"}})
    sc = convert.container_config_from_cri(msg).linux.security_context
    assert sc.apparmor == m.SecurityProfile(profile_type=m.ProfileType.LOCALHOST,
                                            localhost_ref="k8s-nginx")


def test_masked_paths_empty_means_runtime_defaults() -> None:
    msg = _container(linux={"security_context": {"masked_paths": ["/proc/kcore"]}})
    sc = convert.container_config_from_cri(msg).linux.security_context
    assert sc.masked_paths == ("/proc/kcore",)
    assert sc.readonly_paths is None


def _error(fn: Callable[[], object]) -> ConversionError:
    with pytest.raises(ConversionError) as info:
        fn()
    return info.value


def test_unknown_enum_names_the_field() -> None:
    msg = pb.PodSandboxConfig(metadata=pb.PodSandboxMetadata(name="p"))
    msg.linux.security_context.namespace_options.pid = 9  # type: ignore[assignment]
    err = _error(lambda: convert.sandbox_config_from_cri(msg))
    assert err.path == "config.linux.security_context.namespace_options.pid"
    assert "unknown NamespaceMode value 9" in str(err)
    assert isinstance(err, ValueError)  # an InvalidArgumentError


@pytest.mark.parametrize(
    ("fields", "path"),
    [
        ({"envs": [{"key": "A", "value": "YQ=="}, {"key": "B", "value": "/w=="}]},
         "config.envs[1].value"),
        ({"mounts": [{"container_path": "/a", "host_path": "/b", "image": {"image": "x"}}]},
         "config.mounts[0].image"),
        ({"mounts": [{"container_path": "/a", "image_sub_path": "sub"}]},
         "config.mounts[0].image_sub_path"),
        ({"stop_signal": 66}, "config.stop_signal"),
        ({"linux": {"security_context": {"seccomp_profile_path": "/etc/prof.json"}}},
         "config.linux.security_context.seccomp_profile_path"),
        ({"linux": {"security_context": {"apparmor_profile": "localhost/"}}},
         "config.linux.security_context.apparmor_profile"),
        ({"mounts": [{}, {"propagation": 5}]}, "config.mounts[1].propagation"),
        ({"linux": {"security_context": {"namespace_options": {"userns_options": {
            "mode": 7}}}}},
         "config.linux.security_context.namespace_options.userns_options.mode"),
    ],
)
def test_container_errors_name_the_field(fields: dict[str, Any], path: str) -> None:
    assert _error(lambda: convert.container_config_from_cri(_container(**fields))).path == path


def test_missing_required_parts() -> None:
    assert _error(lambda: convert.sandbox_config_from_cri(pb.PodSandboxConfig())).path == (
        "config.metadata"
    )
    no_image = pb.ContainerConfig(metadata=pb.ContainerMetadata(name="c"))
    assert _error(lambda: convert.container_config_from_cri(no_image)).path == "config.image"
    no_md = pb.ContainerConfig(image=pb.ImageSpec(image="i"))
    assert _error(lambda: convert.container_config_from_cri(no_md)).path == "config.metadata"
    request = pb.CreateContainerRequest(config=no_md)
    err = _error(lambda: convert.container_config_from_cri(
        request.config, path="config"))
    assert str(err) == "config.metadata: required"


def test_model_values_that_do_not_fit_name_the_field() -> None:
    md = m.PodSandboxMetadata(name="p", attempt=-1)
    err = _error(lambda: convert.sandbox_config_to_cri(m.SandboxConfig(metadata=md)))
    assert err.path == "config.metadata.attempt"
    ports = (m.PortMapping(container_port=80), m.PortMapping(container_port=2**31))
    config = m.SandboxConfig(metadata=m.PodSandboxMetadata(name="p"), port_mappings=ports)
    assert _error(lambda: convert.sandbox_config_to_cri(config)).path == (
        "config.port_mappings[1].container_port"
    )
    for bad in (99, 32, 33, -1, 65):  # not Linux signals, or ones the CRI has no name for
        c = m.ContainerConfig(metadata=m.ContainerMetadata(name="c"), image="i",
                              stop_signal=bad)
        err = _error(lambda: convert.container_config_to_cri(c))  # noqa: B023
        assert err.path == "config.stop_signal"
        assert f"Linux signal {bad} has no CRI Signal name" in str(err)
    bad_env = m.ContainerConfig(metadata=m.ContainerMetadata(name="c"), image="i",
                                envs=(m.KeyValue(key="K", value="\ud800"),))
    assert _error(lambda: convert.container_config_to_cri(bad_env)).path == (
        "config.envs[0].value"
    )
    raw_mode = m.NamespaceOption(pid=7)  # type: ignore[arg-type]
    sc = m.LinuxContainerSecurityContext(namespace_options=raw_mode)
    bad_ns = m.ContainerConfig(metadata=m.ContainerMetadata(name="c"), image="i",
                               linux=m.LinuxContainerConfig(security_context=sc))
    assert _error(lambda: convert.container_config_to_cri(bad_ns)).path == (
        "config.linux.security_context.namespace_options.pid"
    )


def test_resources_for_update_container_resources() -> None:
    req = pb.UpdateContainerResourcesRequest(container_id="c1")
    req.linux.cpu_quota = 50000
    req.linux.unified["memory.high"] = "1G"
    res = convert.linux_resources_from_cri(req.linux)
    assert res == m.LinuxContainerResources(cpu_quota=50000, unified={"memory.high": "1G"})
    assert convert.linux_resources_to_cri(res) == req.linux


# --- filters ------------------------------------------------------------------------------


def test_pod_sandbox_filter() -> None:
    assert convert.pod_sandbox_filter_from_cri(None) == SandboxFilter()
    msg = pb.PodSandboxFilter(id="p1", label_selector={"app": "web"})
    msg.state.state = pb.SANDBOX_NOTREADY
    f = convert.pod_sandbox_filter_from_cri(msg)
    assert f == SandboxFilter(
        id="p1", state=SandboxState.SANDBOX_NOTREADY, label_selector={"app": "web"}
    )
    assert convert.pod_sandbox_filter_to_cri(f) == msg
    # SANDBOX_READY is 0: only the wrapper tells "ready" from "any state".
    ready = pb.PodSandboxFilter(state=pb.PodSandboxStateValue(state=pb.SANDBOX_READY))
    assert convert.pod_sandbox_filter_from_cri(ready).state is SandboxState.SANDBOX_READY
    assert convert.pod_sandbox_filter_from_cri(pb.PodSandboxFilter()).state is None
    bad = pb.PodSandboxFilter(state=pb.PodSandboxStateValue(state=3))  # type: ignore[arg-type]
    assert _error(lambda: convert.pod_sandbox_filter_from_cri(bad)).path == "filter.state.state"


def test_container_filter() -> None:
    assert convert.container_filter_from_cri(None) == ContainerFilter()
    msg = pb.ContainerFilter(id="c1", pod_sandbox_id="p1", label_selector={"tier": "db"})
    msg.state.state = pb.CONTAINER_CREATED
    f = convert.container_filter_from_cri(msg)
    assert f == ContainerFilter(id="c1", state=ContainerState.CONTAINER_CREATED,
                                pod_sandbox_id="p1", label_selector={"tier": "db"})
    assert convert.container_filter_to_cri(f) == msg
    bad = pb.ContainerFilter(state=pb.ContainerStateValue(state=12))  # type: ignore[arg-type]
    assert _error(lambda: convert.container_filter_from_cri(bad)).path == "filter.state.state"


@SETTINGS
@given(st.builds(ContainerFilter, id=TEXT, state=_opt(st.sampled_from(ContainerState)),
                 pod_sandbox_id=TEXT, label_selector=MAP),
       st.builds(SandboxFilter, id=TEXT, state=_opt(st.sampled_from(SandboxState)),
                 label_selector=MAP))
def test_filter_round_trips(cf: ContainerFilter, sf: SandboxFilter) -> None:
    assert convert.container_filter_from_cri(convert.container_filter_to_cri(cf)) == cf
    assert convert.pod_sandbox_filter_from_cri(convert.pod_sandbox_filter_to_cri(sf)) == sf


def test_state_enums_match_the_wire() -> None:
    for ours, theirs in ((SandboxState, pb.PodSandboxState),
                         (ContainerState, pb.ContainerState)):
        assert {e.name: e.value for e in ours} == dict(theirs.items())


# --- statuses and stats -------------------------------------------------------------------


def _sandbox(**fields: Any) -> Sandbox:
    config = m.SandboxConfig(
        metadata=m.PodSandboxMetadata(name="web", uid="u1", namespace="ns", attempt=2),
        labels={"app": "web"}, annotations={"a": "b"},
        linux=m.LinuxPodSandboxConfig(security_context=m.LinuxSandboxSecurityContext(
            namespace_options=m.NamespaceOption(pid=m.NamespaceMode.CONTAINER))),
    )
    values: dict[str, Any] = {
        "id": "p" * 64, "name": "web_ns_u1_2", "config": config,
        "state": SandboxState.SANDBOX_READY, "created_at": 1_700_000_000_000_000_000,
        "ips": ("10.88.0.5", "fd00::5"), "phase": "created",
    }
    values.update(fields)
    return Sandbox(**values)


def _record(**fields: Any) -> Container:
    config = m.ContainerConfig(
        metadata=m.ContainerMetadata(name="httpd", attempt=1), image="/srv/busybox",
        labels={"tier": "web"}, annotations={"k": "v"}, stop_signal=signal.SIGQUIT,
        mounts=(m.Mount(container_path="/www", host_path="/srv/www", readonly=True),),
        linux=m.LinuxContainerConfig(resources=m.LinuxContainerResources(cpu_shares=512)),
    )
    values: dict[str, Any] = {
        "id": "c" * 64, "sandbox_id": "p" * 64, "name": "httpd_web_ns_u1_1", "config": config,
        "state": ContainerState.CONTAINER_EXITED, "created_at": 10, "started_at": 20,
        "finished_at": 30, "exit_code": 137, "reason": "OOMKilled", "message": "m",
        "log_path": "/var/log/pods/web/httpd/1.log", "phase": "created",
    }
    values.update(fields)
    return Container(**values)


def test_pod_sandbox_status() -> None:
    sb = _sandbox()
    status = convert.pod_sandbox_status_to_cri(sb, runtime_handler="runc")
    assert status.id == sb.id
    assert status.metadata == pb.PodSandboxMetadata(name="web", uid="u1", namespace="ns",
                                                    attempt=2)
    assert status.state == pb.SANDBOX_READY
    assert status.created_at == sb.created_at
    assert status.network.ip == "10.88.0.5"
    assert [ip.ip for ip in status.network.additional_ips] == ["fd00::5"]
    assert status.linux.namespaces.options.pid == pb.CONTAINER
    assert dict(status.labels) == {"app": "web"}
    assert dict(status.annotations) == {"a": "b"}
    assert status.runtime_handler == "runc"
    host = convert.pod_sandbox_status_to_cri(_sandbox(ips=(), state=SandboxState.SANDBOX_NOTREADY))
    assert host.network.ip == "" and host.HasField("network")
    assert host.state == pb.SANDBOX_NOTREADY


def test_pod_sandbox_list_item() -> None:
    item = convert.pod_sandbox_to_cri(_sandbox())
    assert (item.id, item.state, item.created_at) == ("p" * 64, pb.SANDBOX_READY,
                                                      1_700_000_000_000_000_000)
    assert item.metadata.name == "web"
    assert dict(item.labels) == {"app": "web"}


def test_container_status() -> None:
    c = _record()
    status = convert.container_status_to_cri(c, image_ref="sha256:abc", image_id="sha256:abc")
    assert status.id == c.id
    assert status.metadata == pb.ContainerMetadata(name="httpd", attempt=1)
    assert status.state == pb.CONTAINER_EXITED
    assert (status.created_at, status.started_at, status.finished_at) == (10, 20, 30)
    assert (status.exit_code, status.reason, status.message) == (137, "OOMKilled", "m")
    assert status.image.image == "/srv/busybox"
    assert (status.image_ref, status.image_id) == ("sha256:abc", "sha256:abc")
    assert status.log_path == "/var/log/pods/web/httpd/1.log"
    assert [(mt.container_path, mt.host_path, mt.readonly) for mt in status.mounts] == [
        ("/www", "/srv/www", True)]
    assert status.resources.linux.cpu_shares == 512
    assert status.stop_signal == pb.SIGQUIT
    assert dict(status.labels) == {"tier": "web"}
    plain = convert.container_status_to_cri(_record(state=ContainerState.CONTAINER_RUNNING))
    assert plain.image_ref == "/srv/busybox"
    assert plain.state == pb.CONTAINER_RUNNING


def test_container_list_item() -> None:
    item = convert.container_to_cri(_record())
    assert (item.id, item.pod_sandbox_id, item.state) == ("c" * 64, "p" * 64,
                                                          pb.CONTAINER_EXITED)
    assert item.image.image == item.image_ref == "/srv/busybox"
    assert item.metadata.name == "httpd"
    assert dict(item.annotations) == {"k": "v"}


def _stats(id: str, n: int) -> ContainerStats:
    return ContainerStats(id=id, timestamp=99, cpu_usage_core_nano_seconds=n,
                          memory_usage_bytes=2 * n, memory_working_set_bytes=n,
                          memory_rss_bytes=n // 2, process_count=3)


def test_container_stats() -> None:
    c = _record()
    out = convert.container_stats_to_cri(_stats(c.id, 1000), c)
    assert out.attributes.id == c.id
    assert out.attributes.metadata.name == "httpd"
    assert dict(out.attributes.labels) == {"tier": "web"}
    assert out.cpu.timestamp == 99
    assert out.cpu.usage_core_nano_seconds.value == 1000
    assert not out.cpu.HasField("usage_nano_cores")  # needs two samples: not reported
    assert (out.memory.working_set_bytes.value, out.memory.usage_bytes.value,
            out.memory.rss_bytes.value) == (1000, 2000, 500)
    bare = convert.container_stats_to_cri(_stats("x", 0))
    assert bare.attributes.id == "x" and not bare.attributes.HasField("metadata")
    assert bare.cpu.HasField("usage_core_nano_seconds")  # zero is a value, not "unknown"
    err = _error(lambda: convert.container_stats_to_cri(_stats("x", -1)))
    assert err.path == "stats.cpu.usage_core_nano_seconds.value"


def test_pod_sandbox_stats() -> None:
    sb, c = _sandbox(), _record()
    stats = SandboxStats(id=sb.id, timestamp=5, cpu_usage_core_nano_seconds=70,
                         memory_working_set_bytes=80, process_count=4,
                         containers=(_stats(c.id, 10), _stats("gone", 20)))
    out = convert.pod_sandbox_stats_to_cri(stats, sb, {c.id: c})
    assert out.attributes.id == sb.id
    assert out.attributes.metadata.namespace == "ns"
    assert out.linux.cpu.usage_core_nano_seconds.value == 70
    assert out.linux.memory.working_set_bytes.value == 80
    assert out.linux.process.process_count.value == 4
    assert [cs.attributes.id for cs in out.linux.containers] == [c.id, "gone"]
    assert out.linux.containers[0].attributes.metadata.name == "httpd"
    assert not out.linux.containers[1].attributes.HasField("metadata")


def test_importing_podkit_cri_does_not_import_grpc() -> None:
    code = (
        "import sys; import podkit.cri, podkit.cri.convert, podkit.cri.api_pb2; "
        "assert 'grpc' not in sys.modules, 'grpc imported'"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60, check=False)
    assert proc.returncode == 0, proc.stderr


def test_signal_numbers() -> None:
    assert convert.signal_number(pb.RUNTIME_DEFAULT) is None
    assert convert.signal_number(pb.SIGTERM) == 15
    assert convert.signal_number(pb.SIGKILL) == 9
    assert convert.signal_number(pb.SIGCLD) == convert.signal_number(pb.SIGCHLD)
    assert convert.signal_number(pb.SIGRTMIN) == signal.SIGRTMIN
    assert convert.signal_number(pb.SIGRTMINPLUS15) == signal.SIGRTMIN + 15
    assert convert.signal_number(pb.SIGRTMAXMINUS14) == signal.SIGRTMAX - 14
    assert convert.signal_number(pb.SIGRTMAX) == signal.SIGRTMAX
    numbers = [convert.signal_number(v) for v in pb.Signal.values() if v]
    assert all(n is not None and 0 < n <= signal.SIGRTMAX for n in numbers)
    with pytest.raises(ConversionError, match="stop_signal: unknown Signal value 66"):
        convert.signal_number(66)
    with pytest.raises(ConversionError, match=r"^config\.stop_signal: unknown Signal value 66"):
        convert.signal_number(66, path="config.stop_signal")


def test_cri_signals_invert_signal_numbers() -> None:
    assert convert.cri_signal(0) == pb.RUNTIME_DEFAULT
    assert convert.cri_signal(signal.SIGTERM) == pb.SIGTERM == 23
    assert convert.cri_signal(signal.SIGRTMIN + 3) == pb.SIGRTMINPLUS3
    assert convert.cri_signal(signal.SIGRTMAX - 1) == pb.SIGRTMAXMINUS1
    # aliases go back under Python's names
    assert convert.cri_signal(signal.SIGCHLD) == pb.SIGCHLD
    assert convert.cri_signal(signal.SIGABRT) == pb.SIGABRT
    assert convert.cri_signal(signal.SIGIO) == pb.SIGIO
    named = [0, *range(1, 32), *range(signal.SIGRTMIN, signal.SIGRTMAX + 1)]
    for n in named:
        assert convert.signal_number(convert.cri_signal(n)) == (n or None)
    for value in pb.Signal.values():
        number = convert.signal_number(value) or 0
        assert convert.signal_number(convert.cri_signal(number)) == (number or None)
    for bad in set(range(-2, 70)) - set(named):
        with pytest.raises(ConversionError, match=rf"^x\.y: Linux signal {bad} has no CRI"):
            convert.cri_signal(bad, path="x.y")
    with pytest.raises(ConversionError, match="not a signal number: True"):
        convert.cri_signal(True)


def test_package_exports() -> None:
    import podkit.cri

    for name in podkit.cri.__all__:
        assert getattr(podkit.cri, name).__doc__, name


def test_model_shape_errors_name_the_field() -> None:
    c = m.ContainerConfig(metadata=m.ContainerMetadata(name="c"), image="i",
                          command="sh")
    err = _error(lambda: convert.container_config_to_cri(c))
    assert err.path == "config.command"
    assert "expected a sequence" in err.problem
    labels = m.SandboxConfig(metadata=m.PodSandboxMetadata(name="p"),
                             labels={"k": 1})  # type: ignore[dict-item]
    assert _error(lambda: convert.sandbox_config_to_cri(labels)).path == "config.labels"


def test_conversion_error_pickles() -> None:
    import pickle

    err = pickle.loads(pickle.dumps(ConversionError("config.image", "required")))
    assert (err.path, err.problem, str(err)) == ("config.image", "required",
                                                 "config.image: required")
