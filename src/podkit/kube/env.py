"""Container environment as the kubelet builds it: ``$(VAR)`` expansion, ``valueFrom`` sources
and ``envFrom`` (``makeEnvironmentVariables`` and the ``expansion`` package)."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

import attrs

from podkit.errors import InvalidArgumentError, quote
from podkit.kube.manifests import ConfigData
from podkit.kube.plan import POD_IP_PLACEHOLDER
from podkit.kube.resource_fields import resource_field_value

__all__ = [
    "EnvContext",
    "container_env",
    "expand",
    "field_ref_value",
    "mapping_for",
]

ENV_NAME = re.compile(r"^[-._a-zA-Z][-._a-zA-Z0-9]*$")


def mapping_for(*tables: Mapping[str, str]) -> Callable[[str], str]:
    """kubelet's MappingFuncFor: the first table with the name wins; unknown stays ``$(name)``."""

    def lookup(name: str) -> str:
        for table in tables:
            if name in table:
                return table[name]
        return f"$({name})"

    return lookup


def _read_reference(rest: str) -> tuple[str, bool, int]:
    """What follows a ``$``: (text, is a variable name, characters consumed)."""
    if rest[0] == "$":
        return "$", False, 1
    if rest[0] == "(":
        close = rest.find(")", 1)
        if close != -1:
            return rest[1:close], True, close + 1
        return "$(", False, 1
    return "$" + rest[0], False, 1


def expand(text: str, mapping: Callable[[str], str]) -> str:
    """Expand ``$(VAR)`` references; ``$$`` is a literal ``$``; a lone ``$`` stays."""
    out: list[str] = []
    checkpoint = 0
    cursor = 0
    while cursor < len(text):
        if text[cursor] == "$" and cursor + 1 < len(text):
            out.append(text[checkpoint:cursor])
            read, is_var, advance = _read_reference(text[cursor + 1:])
            out.append(mapping(read) if is_var else read)
            cursor += advance
            checkpoint = cursor + 1
        cursor += 1
    return "".join(out) + text[checkpoint:]


@attrs.frozen
class EnvContext:
    """What env sources can read: the pod's identity and the ConfigMaps and Secrets loaded."""

    name: str
    namespace: str
    uid: str
    node_name: str
    labels: Mapping[str, str]
    annotations: Mapping[str, str]
    service_account: str
    config_maps: Mapping[tuple[str, str], ConfigData]
    secrets: Mapping[tuple[str, str], ConfigData]
    containers: Mapping[str, Mapping[str, Any]] = attrs.field(factory=dict)  # by name
    node_cpu_milli: int = 0  # allocatable, for resourceFieldRef limits that are not set
    node_memory: int = 0


_SUBSCRIPT = re.compile(r"^metadata\.(labels|annotations)\['([^']*)'\]$")


def field_ref_value(path: str, ctx: EnvContext, where: str, *, volume: bool = False) -> str:
    """The value of a downward API ``fieldRef``; ``status.podIP`` is a placeholder for play."""
    plain = {"metadata.name": ctx.name, "metadata.namespace": ctx.namespace,
             "metadata.uid": ctx.uid}
    if not volume:
        plain |= {"spec.nodeName": ctx.node_name, "spec.serviceAccountName": ctx.service_account,
                  "status.podIP": POD_IP_PLACEHOLDER, "status.podIPs": POD_IP_PLACEHOLDER}
    if path in plain:
        return plain[path]
    m = _SUBSCRIPT.match(path)
    if m:
        table = ctx.labels if m.group(1) == "labels" else ctx.annotations
        return table.get(m.group(2), "")
    raise InvalidArgumentError(f"{where}.fieldPath: {quote(path)} is not supported "
                               f"(supported: {', '.join(sorted(plain))}, "
                               "metadata.labels['KEY'], metadata.annotations['KEY'])")


def _key_ref(ref: Mapping[str, Any], table: Mapping[tuple[str, str], ConfigData], kind: str,
             ctx: EnvContext, where: str) -> str | None:
    """A configMapKeyRef or secretKeyRef value; None when it is optional and missing."""
    name, key = str(ref.get("name", "")), str(ref.get("key", ""))
    optional = bool(ref.get("optional", False))
    data = table.get((ctx.namespace, name))
    if data is None:
        if optional:
            return None
        raise InvalidArgumentError(f"{where}: {kind} {ctx.namespace}/{name!r} not found")
    if key not in data.data:
        if optional:
            return None
        raise InvalidArgumentError(f"{where}: {kind} {ctx.namespace}/{name!r} has no key {key!r}")
    return data.data[key].decode(errors="replace")


def _value_from(source: Mapping[str, Any], container: Mapping[str, Any], ctx: EnvContext,
                where: str) -> str | None:
    if "resourceFieldRef" in source:
        return resource_field_value(source["resourceFieldRef"], container, ctx.containers,
                                    ctx.node_cpu_milli, ctx.node_memory,
                                    f"{where}.resourceFieldRef")
    if "fieldRef" in source:
        return field_ref_value(str(source["fieldRef"].get("fieldPath", "")), ctx,
                               f"{where}.fieldRef")
    if "configMapKeyRef" in source:
        return _key_ref(source["configMapKeyRef"], ctx.config_maps, "ConfigMap", ctx,
                        f"{where}.configMapKeyRef")
    if "secretKeyRef" in source:
        return _key_ref(source["secretKeyRef"], ctx.secrets, "Secret", ctx,
                        f"{where}.secretKeyRef")
    got = ", ".join(sorted(source)) or "none"
    raise InvalidArgumentError(f"{where}: no supported source (fieldRef, resourceFieldRef, "
                               f"configMapKeyRef, secretKeyRef), got {got}")


def _env_from(container: Mapping[str, Any], ctx: EnvContext, where: str,
              warnings: list[str]) -> dict[str, str]:
    env: dict[str, str] = {}
    for i, item in enumerate(container.get("envFrom") or ()):
        here = f"{where}.envFrom[{i}]"
        prefix = str(item.get("prefix", ""))
        if "configMapRef" in item:
            ref, table, kind = item["configMapRef"], ctx.config_maps, "ConfigMap"
        else:
            ref, table, kind = item.get("secretRef") or {}, ctx.secrets, "Secret"
        data = table.get((ctx.namespace, str(ref.get("name", ""))))
        if data is None:
            if ref.get("optional", False):
                continue
            raise InvalidArgumentError(
                f"{here}: {kind} {ctx.namespace}/{str(ref.get('name', ''))!r} not found")
        skipped = []
        for key, raw in data.data.items():
            if not ENV_NAME.match(prefix + key):
                skipped.append(prefix + key)
                continue
            env[prefix + key] = raw.decode(errors="replace")
        if skipped:
            warnings.append(f"{here}: keys skipped, not valid env names: {', '.join(skipped)}")
    return env


def container_env(container: Mapping[str, Any], ctx: EnvContext, where: str,
                  warnings: list[str]) -> dict[str, str]:
    """The final env, envFrom first, then ``env`` in order (each value expanded against what
    came before it; ``valueFrom`` values are not expanded)."""
    env = _env_from(container, ctx, where, warnings)
    for i, var in enumerate(container.get("env") or ()):
        name = str(var.get("name", ""))
        raw = var.get("value")
        if raw not in (None, ""):
            env[name] = expand(str(raw), mapping_for(env))
        elif var.get("valueFrom") is not None:
            got = _value_from(var["valueFrom"], container, ctx, f"{where}.env[{i}].valueFrom")
            if got is not None:
                env[name] = got
        else:
            env[name] = ""
    return env
