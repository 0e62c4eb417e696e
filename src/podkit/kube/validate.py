"""The Pod rules the API server enforces and the kubelet relies on, each problem with its field
path (``spec.containers[1].name``), all of them reported at once."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from podkit import oci
from podkit.cdi import ANNOTATION_PREFIX as CDI_PREFIX
from podkit.cdi import AnnotationError, parse_annotations
from podkit.errors import InvalidArgumentError, quote
from podkit.kube.env import ENV_NAME
from podkit.kube.fields import POD_FIELDS, shape_problems
from podkit.kube.quantity import parse_quantity
from podkit.kube.volumes import HOST_PATH_TYPES, PROPAGATION

__all__ = [
    "PodValidationError",
    "is_dns1123_label",
    "is_dns1123_subdomain",
    "is_port_name",
    "pod_problems",
    "validate_pod",
]

Problem = tuple[str, str]
_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_PORT_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_QUALIFIED = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_SYSCTL = re.compile(r"^([a-z0-9]([-_a-z0-9]*[a-z0-9])?[./])*[a-z0-9]([-_a-z0-9]*[a-z0-9])?$")
_RESTART = ("Always", "OnFailure", "Never")
_PULL = ("Always", "IfNotPresent", "Never")
_PROTOCOLS = ("TCP", "UDP", "SCTP")


class PodValidationError(InvalidArgumentError):
    """A pod the API server would refuse; ``problems`` lists (field path, message)."""

    def __init__(self, message: str, problems: list[Problem]) -> None:
        super().__init__(message)
        self.problems = problems


def is_dns1123_label(name: object) -> bool:
    """Lowercase alphanumerics and ``-``, starting and ending alphanumeric, at most 63."""
    return isinstance(name, str) and len(name) <= 63 and bool(_LABEL.match(name))


def is_dns1123_subdomain(name: object) -> bool:
    """DNS-1123 labels joined by dots, at most 253 characters."""
    return (isinstance(name, str) and 0 < len(name) <= 253
            and all(_LABEL.match(part) for part in name.split(".")))


def is_port_name(name: object) -> bool:
    """IANA_SVC_NAME: at most 15, lowercase alphanumerics and ``-``, a letter, no ``--``."""
    return (isinstance(name, str) and len(name) <= 15 and bool(_PORT_NAME.match(name))
            and "--" not in name and any(c.isalpha() for c in name))


def _is_qualified_key(key: object) -> bool:
    if not isinstance(key, str) or not key:
        return False
    prefix, _, name = key.rpartition("/")
    if "/" in key and not is_dns1123_subdomain(prefix):
        return False
    return len(name) <= 63 and bool(_QUALIFIED.match(name))


def _int_in(value: object, low: int, high: int) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and low <= value <= high


def _metadata(meta: Mapping[str, Any]) -> Iterator[Problem]:
    if not is_dns1123_subdomain(meta.get("name")):
        yield "metadata.name", f"{quote(meta.get('name'))} is not a DNS-1123 subdomain"
    namespace = meta.get("namespace") or "default"
    if not is_dns1123_label(namespace):
        yield "metadata.namespace", f"{quote(namespace)} is not a DNS-1123 label"
    for key, val in (meta.get("labels") or {}).items():
        if not _is_qualified_key(key):
            yield f"metadata.labels.{key}", f"{quote(key)} is not a valid label key"
        if not isinstance(val, str) or not (len(val) <= 63 and
                                            (val == "" or _QUALIFIED.match(val))):
            yield f"metadata.labels.{key}", f"{quote(val)} is not a valid label value (a string)"
    for key, val in (meta.get("annotations") or {}).items():
        if not _is_qualified_key(key):
            yield f"metadata.annotations.{key}", f"{quote(key)} is not a valid annotation key"
        if not isinstance(val, str):
            yield f"metadata.annotations.{key}", f"{quote(val)} must be a string (quote it)"
        elif isinstance(key, str) and key.startswith(CDI_PREFIX):
            try:
                parse_annotations({key: val})
            except AnnotationError as exc:
                yield f"metadata.annotations.{key}", str(exc)


def _ports(ctr: Mapping[str, Any], where: str, host_network: bool) -> Iterator[Problem]:
    names: set[str] = set()
    for j, p in enumerate(ctr.get("ports") or ()):
        here = f"{where}.ports[{j}]"
        if not _int_in(p.get("containerPort"), 1, 65535):
            yield f"{here}.containerPort", f"{quote(p.get('containerPort'))} is not in 1-65535"
        if p.get("hostPort") is not None and not _int_in(p.get("hostPort"), 0, 65535):
            yield f"{here}.hostPort", f"{quote(p.get('hostPort'))} is not in 1-65535"
        elif host_network and p.get("hostPort") and p.get("hostPort") != p.get("containerPort"):
            yield f"{here}.hostPort", "must equal containerPort with hostNetwork"
        if (p.get("protocol") or "TCP") not in _PROTOCOLS:
            yield f"{here}.protocol", f"{quote(p.get('protocol'))} is not TCP, UDP or SCTP"
        name = p.get("name")
        if name is not None:
            if not is_port_name(name):
                yield f"{here}.name", f"{quote(name)} is not a valid port name (IANA_SVC_NAME)"
            elif name in names:
                yield f"{here}.name", f"duplicate port name {quote(name)}"
            names.add(str(name))


def _env(ctr: Mapping[str, Any], where: str) -> Iterator[Problem]:
    for j, var in enumerate(ctr.get("env") or ()):
        here = f"{where}.env[{j}]"
        if not isinstance(var.get("name"), str) or not ENV_NAME.match(var["name"]):
            yield f"{here}.name", (f"{quote(var.get('name'))} is not a valid environment "
                                   "variable name ([-._a-zA-Z][-._a-zA-Z0-9]*)")
        if var.get("value") is not None and not isinstance(var["value"], str):
            yield f"{here}.value", f"{quote(var['value'])} must be a string (quote it)"
        source = var.get("valueFrom")
        if source is not None:
            if var.get("value") not in (None, ""):
                yield f"{here}.valueFrom", "may not be set with value"
            if not isinstance(source, dict) or len(source) != 1:
                yield f"{here}.valueFrom", "needs exactly one source"
    for j, item in enumerate(ctr.get("envFrom") or ()):
        refs = [k for k in ("configMapRef", "secretRef") if k in item]
        if len(refs) != 1:
            yield f"{where}.envFrom[{j}]", "needs exactly one of configMapRef, secretRef"


def _resources(ctr: Mapping[str, Any], where: str) -> Iterator[Problem]:
    res = ctr.get("resources") or {}
    values: dict[str, dict[str, Any]] = {"requests": {}, "limits": {}}
    for part in values:
        for name, raw in (res.get(part) or {}).items():
            try:
                values[part][name] = parse_quantity(raw)
            except InvalidArgumentError:
                yield f"{where}.resources.{part}.{name}", f"{quote(raw)} is not a quantity"
                continue
            if values[part][name] < 0:
                yield f"{where}.resources.{part}.{name}", "must not be negative"
    for name, request in values["requests"].items():
        limit = values["limits"].get(name)
        if limit is not None and request > limit:
            yield (f"{where}.resources.requests.{name}",
                   f"must be less than or equal to the {name} limit")


def _mounts(ctr: Mapping[str, Any], where: str, volumes: set[str]) -> Iterator[Problem]:
    privileged = bool((ctr.get("securityContext") or {}).get("privileged"))
    paths: set[str] = set()
    for j, vm in enumerate(ctr.get("volumeMounts") or ()):
        here = f"{where}.volumeMounts[{j}]"
        if vm.get("name") not in volumes:
            yield f"{here}.name", f"no volume named {quote(vm.get('name'))}"
        path = vm.get("mountPath")
        if not isinstance(path, str) or not path:
            yield f"{here}.mountPath", "required"
        elif path in paths:
            yield f"{here}.mountPath", f"{path!r} is mounted twice"
        paths.add(str(path))
        sub = vm.get("subPath")
        if sub and vm.get("subPathExpr"):
            yield f"{here}.subPathExpr", "may not be set with subPath"
        if sub and (str(sub).startswith("/") or ".." in str(sub).split("/")):
            yield f"{here}.subPath", f"{quote(sub)} must be a relative path without '..'"
        prop = vm.get("mountPropagation")
        if prop is not None and prop not in PROPAGATION:
            yield (f"{here}.mountPropagation",
                   f"{quote(prop)} is not one of {', '.join(PROPAGATION)}")
        if prop == "Bidirectional" and not privileged:
            yield f"{here}.mountPropagation", "Bidirectional needs a privileged container"


def _security(ctr: Mapping[str, Any], where: str) -> Iterator[Problem]:
    sc = ctr.get("securityContext") or {}
    here = f"{where}.securityContext"
    for key in ("runAsUser", "runAsGroup"):
        if sc.get(key) is not None and not _int_in(sc[key], 0, 2**31 - 1):
            yield f"{here}.{key}", f"{quote(sc[key])} is not a non-negative integer"
    if sc.get("allowPrivilegeEscalation") is False:
        if sc.get("privileged"):
            yield (f"{here}.allowPrivilegeEscalation",
                   "cannot be false with privileged: true")
        named = (sc.get("capabilities") or {}).get("add") or ()
        adds = {oci.capability_name(str(c)) for c in named if str(c).strip()}  # as granted
        if "CAP_SYS_ADMIN" in adds:
            yield (f"{here}.allowPrivilegeEscalation",
                   "cannot be false with capability SYS_ADMIN added")
    if sc.get("procMount") not in (None, "Default", "Unmasked"):
        yield f"{here}.procMount", f"{quote(sc['procMount'])} is not Default or Unmasked"


def _container(ctr: Mapping[str, Any], where: str, spec: Mapping[str, Any], init: bool,
               volumes: set[str]) -> Iterator[Problem]:
    if not is_dns1123_label(ctr.get("name")):
        yield f"{where}.name", f"{quote(ctr.get('name'))} is not a DNS-1123 label"
    if not isinstance(ctr.get("image"), str) or not ctr["image"].strip():
        yield f"{where}.image", "required"
    if ctr.get("imagePullPolicy") not in (None, *_PULL):
        yield f"{where}.imagePullPolicy", f"{quote(ctr['imagePullPolicy'])} is not one of " \
                                          f"{', '.join(_PULL)}"
    if init:
        for key in ("readinessProbe", "livenessProbe", "startupProbe", "lifecycle"):
            if ctr.get(key):
                yield f"{where}.{key}", "may not be set for init containers"
    for key in ("livenessProbe", "startupProbe"):
        if (ctr.get(key) or {}).get("successThreshold", 1) != 1:
            yield f"{where}.{key}.successThreshold", "must be 1"
    checks: list[Callable[[], Iterator[Problem]]] = [
        lambda: _ports(ctr, where, bool(spec.get("hostNetwork"))),
        lambda: _env(ctr, where), lambda: _resources(ctr, where),
        lambda: _mounts(ctr, where, volumes), lambda: _security(ctr, where)]
    for check in checks:
        yield from check()


def _host_ports(spec: Mapping[str, Any]) -> Iterator[Problem]:
    """Two app containers (or two ports) may not claim the same hostIP/protocol/hostPort."""
    seen: dict[tuple[str, str, int], str] = {}
    for i, ctr in enumerate(spec.get("containers") or ()):
        for j, p in enumerate(ctr.get("ports") or ()):
            port = p.get("hostPort")
            if not _int_in(port, 1, 65535):
                continue
            key = (str(p.get("hostIP") or ""), str(p.get("protocol") or "TCP"), int(port))
            here = f"spec.containers[{i}].ports[{j}].hostPort"
            if key in seen:
                yield here, f"host port {key[1]}/{port} is already used by {seen[key]}"
            else:
                seen[key] = here


def _volumes(spec: Mapping[str, Any]) -> Iterator[Problem]:
    names: set[str] = set()
    for i, vol in enumerate(spec.get("volumes") or ()):
        name = vol.get("name")
        if not is_dns1123_label(name):
            yield f"spec.volumes[{i}].name", f"{quote(name)} is not a DNS-1123 label"
        elif name in names:
            yield f"spec.volumes[{i}].name", f"duplicate volume name {quote(name)}"
        names.add(str(name))
        host = vol.get("hostPath")
        if isinstance(host, dict) and host.get("type", "") not in HOST_PATH_TYPES:
            yield f"spec.volumes[{i}].hostPath.type", f"{quote(host.get('type'))} is not a " \
                                                       "hostPath type"


def _pod_spec(spec: Mapping[str, Any]) -> Iterator[Problem]:
    if not spec.get("containers"):
        yield "spec.containers", "a pod needs at least one container"
    if spec.get("restartPolicy", "Always") not in _RESTART:
        yield "spec.restartPolicy", f"{quote(spec['restartPolicy'])} is not one of " \
                                    f"{', '.join(_RESTART)}"
    grace = spec.get("terminationGracePeriodSeconds")
    if grace is not None and not _int_in(grace, 0, 2**62):
        yield "spec.terminationGracePeriodSeconds", f"{quote(grace)} must be >= 0"
    for key in ("hostname", "subdomain"):
        if spec.get(key) is not None and not is_dns1123_label(spec[key]):
            yield f"spec.{key}", f"{quote(spec[key])} is not a DNS-1123 label"
    dns = spec.get("dnsConfig") or {}
    if spec.get("dnsPolicy") == "None" and not dns.get("nameservers"):
        yield "spec.dnsConfig.nameservers", "dnsPolicy None needs at least one nameserver"
    if len(dns.get("nameservers") or ()) > 3:
        yield "spec.dnsConfig.nameservers", "at most 3 nameservers"
    if len(dns.get("searches") or ()) > 32:
        yield "spec.dnsConfig.searches", "at most 32 search domains"
    for i, s in enumerate((spec.get("securityContext") or {}).get("sysctls") or ()):
        if not isinstance(s.get("name"), str) or not _SYSCTL.match(s["name"]):
            yield f"spec.securityContext.sysctls[{i}].name", f"{quote(s.get('name'))} is not " \
                                                             "a sysctl name"


def pod_problems(pod: Mapping[str, Any]) -> list[Problem]:
    """Every rule a pod manifest breaks, as (field path, message); a manifest whose objects
    and lists have the wrong shape gets only those problems."""
    shape = list(shape_problems(pod, POD_FIELDS))
    if shape:
        return shape
    spec = pod.get("spec") or {}
    problems = [*_metadata(pod.get("metadata") or {}), *_pod_spec(spec), *_volumes(spec)]
    volumes = {str(v.get("name")) for v in spec.get("volumes") or ()}
    names: dict[str, str] = {}
    for field, init in (("initContainers", True), ("containers", False)):
        for i, ctr in enumerate(spec.get(field) or ()):
            where = f"spec.{field}[{i}]"
            problems.extend(_container(ctr, where, spec, init, volumes))
            name = str(ctr.get("name"))
            if name in names:
                problems.append((f"{where}.name", f"duplicate container name {name!r} "
                                                  f"(also {names[name]})"))
            names.setdefault(name, where)
    problems.extend(_host_ports(spec))
    return problems


def validate_pod(pod: Mapping[str, Any], *, source: str = "pod",
                 where: Callable[[str], str] | None = None) -> None:
    """Refuse a pod the API server would refuse; ``where`` turns a field path into
    ``file:line:column`` for the message."""
    problems = pod_problems(pod)
    if not problems:
        return
    lines = [f"{source}: invalid pod ({len(problems)} problem"
             f"{'s' if len(problems) > 1 else ''}):"]
    for path, message in problems:
        at = f"{where(path)}: " if where else ""
        lines.append(f"  {at}{path}: {message}")
    raise PodValidationError("\n".join(lines), problems)
