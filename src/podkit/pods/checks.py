"""Field checks for CRI pod and container configs, run before anything is created.

Every string of a config may reach a path, an argv, an environment, a file or a CNI arg, so
none may hold a NUL byte; fields with a format of their own (hostname, sysctl and environment
names, DNS lines, cpusets, log paths) get the rule kubelet or containerd applies. Each check
raises the caller's ``error`` class with the field path and a bounded quote of the value.
"""

from __future__ import annotations

import enum
import ipaddress
import posixpath
import re
import types
import typing
from collections.abc import Iterator, Mapping, Sequence

import attrs

from podkit.errors import InvalidArgumentError, quote
from podkit.pods import rules
from podkit.pods.config import ContainerConfig, LinuxContainerResources, SandboxConfig

__all__ = [
    "check_container_config",
    "check_sandbox_config",
    "config_strings",
]

Error = type[InvalidArgumentError]

_HOSTNAME_LABEL = re.compile(r"[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?")
_SYSCTL_SEGMENT = r"[a-z0-9]([-_a-z0-9]*[a-z0-9])?"
_SYSCTL_NAME = re.compile(rf"({_SYSCTL_SEGMENT}[./])*{_SYSCTL_SEGMENT}")
_CPUSET = re.compile(r"\d+(-\d+)?(,\d+(-\d+)?)*")
_PAGE_SIZE = re.compile(r"\d+(KB|MB|GB|TB|PB)")
_UNIFIED_KEY = re.compile(r"[A-Za-z0-9_]+\.[A-Za-z0-9_.-]+")
_NAME_FORBIDDEN = "_/;="
NAME_MAX = 253
"""The longest pod or container name (a Kubernetes object name, a DNS subdomain)."""
_CNI_ARG_FORBIDDEN = ";="
_SCALARS: dict[object, str] = {str: "a string", int: "an integer", bool: "a boolean"}


def config_strings(obj: object, path: str = "") -> Iterator[tuple[str, str]]:
    """Every string in an attrs config tree with its field path (``envs[2].value``)."""
    if isinstance(obj, str):
        yield path, obj
    elif attrs.has(type(obj)):
        for f in attrs.fields(type(obj)):  # type: ignore[arg-type]
            yield from config_strings(getattr(obj, f.name), f"{path}.{f.name}" if path else f.name)
    elif isinstance(obj, Mapping):
        for key, value in obj.items():
            yield f"{path} key", key
            yield from config_strings(value, f"{path}[{quote(key)}]")
    elif isinstance(obj, list | tuple):
        for i, value in enumerate(obj):
            yield from config_strings(value, f"{path}[{i}]")


def _type_error(value: object, path: str, expected: str, error: Error) -> InvalidArgumentError:
    return error(f"{path} {quote(value)}: must be {expected}, not {type(value).__name__}")


def _typed(value: object, tp: object, path: str, error: Error) -> None:
    """``value`` has the declared type ``tp`` (strings, ints, enums, lists, maps, models)."""
    args = typing.get_args(tp)
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return
        tp = next(a for a in args if a is not type(None))
        args, origin = typing.get_args(tp), typing.get_origin(tp)
    if origin in (Sequence, list, tuple):
        if isinstance(value, str | bytes) or not isinstance(value, Sequence):
            raise _type_error(value, path, "a list", error)
        for i, item in enumerate(value):
            _typed(item, args[0], f"{path}[{i}]", error)
    elif origin in (dict, Mapping):
        if not isinstance(value, Mapping):
            raise _type_error(value, path, "a mapping", error)
        for key, item in value.items():
            _typed(key, args[0], f"{path} key", error)
            _typed(item, args[1], f"{path}[{quote(key)}]", error)
    elif isinstance(tp, type) and issubclass(tp, enum.Enum):
        if not isinstance(value, tp):
            raise _type_error(value, path, f"a {tp.__name__} ({', '.join(tp.__members__)})",
                              error)
    elif tp in _SCALARS:
        assert isinstance(tp, type)
        if not isinstance(value, tp) or (tp is int and isinstance(value, bool)):
            raise _type_error(value, path, _SCALARS[tp], error)
    elif isinstance(tp, type) and attrs.has(tp):
        if not isinstance(value, tp):
            raise _type_error(value, path, f"a {tp.__name__}", error)
        for f in attrs.fields(attrs.resolve_types(tp)):
            _typed(getattr(value, f.name), f.type, f"{path}.{f.name}" if path else f.name,
                   error)


def _no_nul(obj: object, error: Error) -> None:
    for path, value in config_strings(obj):
        if "\0" in value:
            raise error(f"{path} {quote(value)}: contains a NUL byte")


def _name(value: str, field: str, error: Error, *, required: bool) -> None:
    """Pod and container metadata names: one rule (they build the unique names and CNI args)."""
    if required and not value:
        raise error(f"{field}: must not be empty")
    if len(value) > NAME_MAX:
        raise error(f"{field} {quote(value)}: longer than {NAME_MAX} characters ({len(value)})")
    if value in (".", ".."):
        raise error(f"{field} {value!r}: not a name")
    bad = sorted({c for c in value if c in _NAME_FORBIDDEN or not c.isprintable()})
    if bad:
        raise error(f"{field} {quote(value)}: must not contain {' '.join(map(repr, bad))}")


def _hostname(value: str, error: Error) -> None:
    """RFC 1123 host name, at most 64 bytes (the kernel's limit for ``sethostname``)."""
    if not value:
        return
    if len(value) > 64:
        raise error(f"hostname {quote(value)}: longer than 64 characters ({len(value)})")
    if not all(_HOSTNAME_LABEL.fullmatch(label) for label in value.split(".")):
        raise error(
            f"hostname {quote(value)}: not an RFC 1123 host name (dot-separated labels of "
            "letters, digits and '-', not starting or ending with '-')"
        )


def _no_space(value: str, field: str, error: Error) -> None:
    if not value or any(c.isspace() or not c.isprintable() for c in value):
        raise error(f"{field} {quote(value)}: must be non-empty, without spaces or control "
                    "characters (it becomes a resolv.conf word)")


def _dns(config: SandboxConfig, error: Error) -> None:
    dns = config.dns_config
    if dns is None:
        return
    for i, server in enumerate(dns.servers):
        try:
            ipaddress.ip_address(server)
        except ValueError:
            raise error(f"dns_config.servers[{i}] {quote(server)}: not an IP address") from None
    for i, search in enumerate(dns.searches):
        _no_space(search, f"dns_config.searches[{i}]", error)
    for i, option in enumerate(dns.options):
        _no_space(option, f"dns_config.options[{i}]", error)


def _absolute(value: str, field: str, error: Error, *, required: bool = True) -> None:
    if not value and not required:
        return
    if not posixpath.isabs(value):
        raise error(f"{field} {quote(value)}: must be absolute")


def _no_dotdot(value: str, field: str, error: Error) -> None:
    if ".." in value.split("/"):
        raise error(f"{field} {quote(value)}: must not contain '..' elements")


def _resources(res: LinuxContainerResources | None, field: str, error: Error) -> None:
    if res is None:
        return
    for name in ("cpuset_cpus", "cpuset_mems"):
        value = getattr(res, name)
        if value and not _CPUSET.fullmatch(value):
            raise error(f"{field}.{name} {quote(value)}: not a cpuset list such as '0-3,5'")
    for i, h in enumerate(res.hugepage_limits):
        if not _PAGE_SIZE.fullmatch(h.page_size):
            raise error(f"{field}.hugepage_limits[{i}].page_size {quote(h.page_size)}: "
                        "expected a size such as '2MB' or '1GB'")
    for key in res.unified:
        if not _UNIFIED_KEY.fullmatch(key):
            raise error(f"{field}.unified key {quote(key)}: not a cgroup v2 file name such as "
                        "'memory.high'")


def _keys(values: Mapping[str, str], field: str, error: Error) -> None:
    for key in values:
        if not key:
            raise error(f"{field}: empty key")


def _selinux(options: object, field: str, error: Error) -> None:
    if options is None:
        return
    for part in ("user", "role", "type"):
        value = getattr(options, part)
        if ":" in value:
            raise error(f"{field}.{part} {quote(value)}: must not contain ':'")


def check_sandbox_config(config: SandboxConfig, error: Error) -> None:
    """Refuse a pod config whose strings could not reach their files, argv or CNI args."""
    _typed(config, SandboxConfig, "", error)
    _no_nul(config, error)
    md = config.metadata
    _name(md.name, "metadata.name", error, required=True)
    _name(md.namespace, "metadata.namespace", error, required=False)
    if any(c in md.uid for c in _CNI_ARG_FORBIDDEN):
        raise error(f"metadata.uid {quote(md.uid)}: must not contain ';' or '=' (a CNI arg)")
    if not 0 <= md.attempt < 2**32:
        raise error(f"metadata.attempt {md.attempt}: must be in [0, 2**32)")
    _hostname(config.hostname, error)
    _absolute(config.log_directory, "log_directory", error, required=False)
    _dns(config, error)
    for i, pm in enumerate(config.port_mappings):
        if pm.host_ip:
            try:
                ipaddress.ip_address(pm.host_ip)
            except ValueError:
                raise error(f"port_mappings[{i}].host_ip {quote(pm.host_ip)}: not an IP "
                            "address") from None
    _keys(config.labels, "labels", error)
    _keys(config.annotations, "annotations", error)
    linux = config.linux
    _no_dotdot(linux.cgroup_parent, "linux.cgroup_parent", error)
    for key in linux.sysctls:
        if len(key) > 253 or not _SYSCTL_NAME.fullmatch(key):
            raise error(f"linux.sysctls key {quote(key)}: not a sysctl name such as "
                        "'net.ipv4.ip_forward'")
    _resources(linux.overhead, "linux.overhead", error)
    _resources(linux.resources, "linux.resources", error)
    _selinux(linux.security_context.selinux_options, "linux.security_context.selinux_options",
             error)


def check_container_config(config: ContainerConfig, sandbox: SandboxConfig,
                           error: Error) -> None:
    """Refuse a container config whose strings could not reach their paths, argv or env."""
    _typed(config, ContainerConfig, "", error)
    _no_nul(config, error)
    _name(config.metadata.name, "metadata.name", error, required=True)
    if not 0 <= config.metadata.attempt < 2**32:
        raise error(f"metadata.attempt {config.metadata.attempt}: must be in [0, 2**32)")
    _absolute(config.working_dir, "working_dir", error, required=False)
    for i, kv in enumerate(config.envs):
        if not kv.key or "=" in kv.key:
            raise error(f"envs[{i}].key {quote(kv.key)}: must be non-empty and without '='")
    for i, m in enumerate(config.mounts):
        _absolute(m.container_path, f"mounts[{i}].container_path", error)
        _absolute(m.host_path, f"mounts[{i}].host_path", error)
    for i, d in enumerate(config.devices):
        _absolute(d.container_path, f"devices[{i}].container_path", error)
        _absolute(d.host_path, f"devices[{i}].host_path", error)
    _keys(config.labels, "labels", error)
    _keys(config.annotations, "annotations", error)
    rules.container_log_path(sandbox.log_directory, config.log_path, error)
    _resources(config.linux.resources, "linux.resources", error)
    sc = config.linux.security_context
    field = "linux.security_context"
    if ":" in sc.run_as_username:
        raise error(f"{field}.run_as_username {quote(sc.run_as_username)}: must not contain ':'")
    for name in ("masked_paths", "readonly_paths"):
        for i, path in enumerate(getattr(sc, name) or ()):
            _absolute(path, f"{field}.{name}[{i}]", error)
    _selinux(sc.selinux_options, f"{field}.selinux_options", error)
