"""Pod volumes and container mounts as the kubelet sets them up: emptyDir, hostPath, configMap,
secret and downwardAPI volumes, and ``volumeMounts`` with readOnly, subPath and propagation."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from podkit.container import Mount, MountPropagation
from podkit.errors import InvalidArgumentError, quote
from podkit.kube.env import EnvContext, expand, field_ref_value, mapping_for
from podkit.kube.plan import VolumePlan
from podkit.kube.quantity import value
from podkit.kube.resource_fields import resource_field_value

__all__ = [
    "DEFAULT_MODE",
    "HOST_PATH_TYPES",
    "PROPAGATION",
    "VOLUME_KINDS",
    "container_mounts",
    "format_map",
    "go_quote",
    "pod_dir",
    "volume_plans",
]

DEFAULT_MODE = 0o644  # the API default of configMap, secret and downwardAPI defaultMode
VOLUME_KINDS = ("emptyDir", "hostPath", "configMap", "secret", "downwardAPI")
HOST_PATH_TYPES = ("", "DirectoryOrCreate", "Directory", "FileOrCreate", "File", "Socket",
                   "CharDevice", "BlockDevice")
PROPAGATION = {"None": MountPropagation.PROPAGATION_PRIVATE,
               "HostToContainer": MountPropagation.PROPAGATION_HOST_TO_CONTAINER,
               "Bidirectional": MountPropagation.PROPAGATION_BIDIRECTIONAL}
# Volumes the kubelet always mounts read-only (their plugins' ReadOnly attribute).
_READ_ONLY_KINDS = ("configMap", "secret", "downwardAPI")
_FS_GROUP_KINDS = ("emptyDir", "configMap", "secret", "downwardAPI")
_ESCAPES = {"\a": "\\a", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t",
            "\v": "\\v", "\\": "\\\\", '"': '\\"'}


def pod_dir(volumes_root: str, namespace: str, name: str, uid: str) -> str:
    """The pod's own directory, ``<volumes_root>/<namespace>_<name>_<uid>``."""
    return f"{volumes_root.rstrip('/')}/{namespace}_{name}_{uid}"


def go_quote(text: str) -> str:
    """Go's ``%q`` of a string: double quotes, C escapes, non-printables as \\x/\\u."""
    out = ['"']
    for ch in text:
        if ch in _ESCAPES:
            out.append(_ESCAPES[ch])
        elif ch.isprintable():
            out.append(ch)
        elif ord(ch) < 0x80:
            out.append(f"\\x{ord(ch):02x}")
        elif ord(ch) <= 0xFFFF:
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(f"\\U{ord(ch):08x}")
    out.append('"')
    return "".join(out)


def format_map(table: Mapping[str, str]) -> str:
    """The downward API file of labels or annotations: sorted ``key="value"`` lines."""
    return "\n".join(f"{k}={go_quote(str(table[k]))}" for k in sorted(table))


def _mode(raw: object, where: str) -> int:
    if isinstance(raw, bool) or not isinstance(raw, int) or not 0 <= raw <= 0o777:
        raise InvalidArgumentError(f"{where}: {quote(raw)} is not a file mode 0-0777 (0-511)")
    return raw


def _relative(path: object, where: str) -> str:
    text = str(path or "")
    if not text or text.startswith("/") or ".." in text.split("/"):
        raise InvalidArgumentError(
            f"{where}: {quote(path)} must be a relative path without '..'")
    return text


def _data_files(vol: Mapping[str, Any], kind: str, ctx: EnvContext, where: str,
                ) -> tuple[tuple[str, bytes, int], ...]:
    """Files of a configMap or secret volume: every key, or ``items`` (key -> path, mode)."""
    ref_key = "name" if kind == "configMap" else "secretName"
    name = str(vol.get(ref_key, ""))
    table = ctx.config_maps if kind == "configMap" else ctx.secrets
    default = _mode(vol.get("defaultMode", DEFAULT_MODE), f"{where}.defaultMode")
    data = table.get((ctx.namespace, name))
    optional = bool(vol.get("optional", False))
    if data is None:
        if optional:
            return ()
        label = "ConfigMap" if kind == "configMap" else "Secret"
        raise InvalidArgumentError(f"{where}.{ref_key}: {label} {ctx.namespace}/{name!r} "
                                   "not found (load it or set optional: true)")
    items = vol.get("items")
    if not items:
        return tuple((k, v, default) for k, v in sorted(data.data.items()))
    files = []
    for i, item in enumerate(items):
        here = f"{where}.items[{i}]"
        key = str(item.get("key", ""))
        if key not in data.data:
            if optional:
                continue
            raise InvalidArgumentError(f"{here}.key: {key!r} is not in {data.kind} "
                                       f"{ctx.namespace}/{name}")
        mode = _mode(item.get("mode", default), f"{here}.mode")
        files.append((_relative(item.get("path"), f"{here}.path"), data.data[key], mode))
    return tuple(files)


def _downward_text(item: Mapping[str, Any], ctx: EnvContext, here: str) -> str:
    """One downwardAPI item's content."""
    if item.get("resourceFieldRef"):
        return resource_field_value(item["resourceFieldRef"], None, ctx.containers,
                                    ctx.node_cpu_milli, ctx.node_memory,
                                    f"{here}.resourceFieldRef")
    ref = item.get("fieldRef")
    if not ref:
        raise InvalidArgumentError(f"{here}: needs fieldRef or resourceFieldRef")
    path = str(ref.get("fieldPath", ""))
    if path == "metadata.labels":
        return format_map(ctx.labels)
    if path == "metadata.annotations":
        return format_map(ctx.annotations)
    return field_ref_value(path, ctx, f"{here}.fieldRef", volume=True)


def _downward_files(vol: Mapping[str, Any], ctx: EnvContext, where: str,
                    ) -> tuple[tuple[str, bytes, int], ...]:
    default = _mode(vol.get("defaultMode", DEFAULT_MODE), f"{where}.defaultMode")
    files = []
    for i, item in enumerate(vol.get("items") or ()):
        here = f"{where}.items[{i}]"
        files.append((_relative(item.get("path"), f"{here}.path"),
                      _downward_text(item, ctx, here).encode(),
                      _mode(item.get("mode", default), f"{here}.mode")))
    return tuple(files)


def _plan_one(vol: Mapping[str, Any], base: str, fs_group: int | None, ctx: EnvContext,
              where: str) -> VolumePlan:
    name = str(vol.get("name", ""))
    kinds = [k for k in VOLUME_KINDS if k in vol]
    if len(kinds) != 1:
        other = sorted(set(vol) - {"name", *VOLUME_KINDS})
        got = f"got {', '.join(kinds + other)}" if kinds or other else "got none"
        raise InvalidArgumentError(f"{where}: volume {name!r} needs exactly one supported source "
                                   f"({', '.join(VOLUME_KINDS)}); {got}")
    kind = kinds[0]
    src = vol[kind] or {}
    group = fs_group if kind in _FS_GROUP_KINDS else None
    here = f"{where}.{kind}"
    if kind == "hostPath":
        path = str(src.get("path", ""))
        if not path.startswith("/"):
            raise InvalidArgumentError(f"{here}.path: {quote(path)} must be an absolute path")
        kind_of = str(src.get("type", ""))
        if kind_of not in HOST_PATH_TYPES:
            raise InvalidArgumentError(f"{here}.type: {quote(kind_of)} is not one of "
                                       f"{', '.join(t or repr('') for t in HOST_PATH_TYPES)}")
        return VolumePlan(name=name, kind=kind, host_path=path, host_path_type=kind_of)
    host_path = f"{base}/volumes/{name}"
    if kind == "emptyDir":
        medium = str(src.get("medium", ""))
        if medium not in ("", "Memory"):
            raise InvalidArgumentError(f"{here}.medium: {quote(medium)} is not '' or 'Memory'")
        limit = src.get("sizeLimit")
        size = value(limit, f"{here}.sizeLimit") if limit is not None else None
        return VolumePlan(name=name, kind=kind, host_path=host_path, medium=medium,
                          size_limit=size, fs_group=group)
    if kind == "downwardAPI":
        files = _downward_files(src, ctx, here)
    else:
        files = _data_files(src, kind, ctx, here)
    return VolumePlan(name=name, kind=kind, host_path=host_path, files=files, fs_group=group)


def volume_plans(spec: Mapping[str, Any], base: str, ctx: EnvContext) -> tuple[VolumePlan, ...]:
    """The pod's volumes; ``base`` is its :func:`pod_dir`. fsGroup goes on the volumes whose
    ownership the kubelet manages (emptyDir, configMap, secret, downwardAPI)."""
    fs_group = ((spec.get("securityContext") or {}).get("fsGroup"))
    return tuple(_plan_one(v, base, fs_group, ctx, f"spec.volumes[{i}]")
                 for i, v in enumerate(spec.get("volumes") or ()))


def container_mounts(container: Mapping[str, Any], volumes: Sequence[VolumePlan],
                     env: Mapping[str, str], where: str) -> tuple[Mount, ...]:
    """CRI mounts of a container's volumeMounts; subPath (or subPathExpr, expanded with the
    container's env) is a path inside the volume."""
    by_name = {v.name: v for v in volumes}
    mounts = []
    for i, vm in enumerate(container.get("volumeMounts") or ()):
        here = f"{where}.volumeMounts[{i}]"
        vol = by_name.get(str(vm.get("name", "")))
        if vol is None:
            raise InvalidArgumentError(f"{here}.name: no volume named {quote(vm.get('name'))}")
        sub = vm.get("subPath") or ""
        if vm.get("subPathExpr"):
            sub = expand(str(vm["subPathExpr"]), mapping_for(env))
        host = vol.host_path
        if sub:
            host = f"{host.rstrip('/')}/{_relative(sub, f'{here}.subPath')}"
        propagation = str(vm.get("mountPropagation") or "None")
        if propagation not in PROPAGATION:
            raise InvalidArgumentError(f"{here}.mountPropagation: {quote(propagation)} is not "
                                       f"one of {', '.join(PROPAGATION)}")
        mounts.append(Mount(
            container_path=str(vm.get("mountPath", "")),
            host_path=host,
            readonly=bool(vm.get("readOnly", False)) or vol.kind in _READ_ONLY_KINDS,
            propagation=PROPAGATION[propagation],
        ))
    return tuple(mounts)
