"""CDI spec models (versions 0.3.0 ... 1.1.0), strict JSON/YAML parsing, validation, versions.

The models are frozen attrs classes; attribute names are the snake_case form of the wire keys
(``hostPath`` -> ``host_path``), ``None`` means *absent* and lists are stored as tuples. Parsing
is strict like the Go library: unknown keys, duplicate keys, wrong types and empty documents are
errors that name the JSON path and the file. Semantic validation follows the Go library rule by
rule (names, env, device nodes, mounts, hooks, intelRdt, netDevices, versions).
"""

from __future__ import annotations

import datetime
import json
import os
import re
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any, TypeVar

import attrs
import yaml

from podkit.cdi import names as _names
from podkit.cdi import validator as _validator
from podkit.errors import InvalidArgumentError

__all__ = [
    "CURRENT_VERSION",
    "HOOK_NAMES",
    "KNOWN_VERSIONS",
    "NO_PERMISSIONS",
    "ContainerEdits",
    "Device",
    "DeviceNode",
    "Hook",
    "IntelRdt",
    "Mount",
    "NetDevice",
    "Spec",
    "SpecError",
    "dump_spec",
    "load_spec",
    "minimum_required_version",
    "model_to_dict",
    "parse_spec",
    "run_spec_validators",
    "validate_container_edits",
    "validate_env",
    "validate_spec",
    "validate_version",
]

CURRENT_VERSION = "1.1.0"
"""The newest CDI spec version podkit understands (``specs-go.CurrentVersion``)."""

KNOWN_VERSIONS: tuple[str, ...] = (
    "1.1.0", "1.0.0", "0.8.0", "0.7.0", "0.6.0", "0.5.0", "0.4.0", "0.3.0", "0.2.0", "0.1.0",
)
"""Every version string the library knows, newest first."""

_EARLIEST_VERSION = "0.3.0"

HOOK_NAMES: tuple[str, ...] = (
    "prestart", "createRuntime", "createContainer", "startContainer", "poststart", "poststop",
)
"""Valid ``hookName`` values (OCI hook stages)."""

NO_PERMISSIONS = "none"
"""Device node ``permissions`` value that creates the node but grants no cgroup access."""

_DEVICE_TYPES = ("", "b", "c", "u", "p")
_PERMISSIONS_RE = re.compile(r"[rwm]+\Z")

T = TypeVar("T")


class SpecError(InvalidArgumentError):
    """A CDI spec that cannot be parsed or is invalid.

    ``message`` keeps the Go library's wording; ``field`` is the JSON path of the offending value
    (``devices[0].containerEdits.env[1]``) and ``source`` the file, when known.
    """

    def __init__(self, message: str, *, field: str | None = None, source: str | None = None):
        self.message = message
        self.field = field
        self.source = source
        where = ", ".join(x for x in (field, f"in {source}" if source else None) if x)
        super().__init__(f"{message} ({where})" if where else message)

    def with_source(self, source: str) -> SpecError:
        """The same error, naming the file it came from."""
        return SpecError(self.message, field=self.field, source=source)


# --- field helpers -------------------------------------------------------------------------

def _tuple(v: Any) -> Any:
    """Store lists as tuples so that the frozen models really are immutable."""
    if v is None or isinstance(v, tuple):
        return v
    return tuple(v)


def _dict(v: Any) -> Any:
    return None if v is None else dict(v)


def _m(wire: str, kind: Any) -> dict[str, Any]:
    return {"wire": wire, "kind": kind}


def _f(wire: str, kind: Any, *, default: Any = None, conv: Any = None) -> Any:
    md = _m(wire, kind)
    if conv is not None:
        return attrs.field(default=default, metadata=md, converter=conv, kw_only=True)
    return attrs.field(default=default, metadata=md, kw_only=True)


# --- models --------------------------------------------------------------------------------

@attrs.frozen(slots=True, kw_only=True)
class DeviceNode:
    """A device node to create in the container (``containerEdits.deviceNodes[]``)."""

    path: str = _f("path", "str", default="")
    host_path: str | None = _f("hostPath", "str")
    type: str | None = _f("type", "str")
    major: int | None = _f("major", "int64")
    minor: int | None = _f("minor", "int64")
    file_mode: int | None = _f("fileMode", "uint32")
    permissions: str | None = _f("permissions", "str")
    uid: int | None = _f("uid", "uint32")
    gid: int | None = _f("gid", "uint32")


@attrs.frozen(slots=True, kw_only=True)
class Mount:
    """A mount to add to the container (``containerEdits.mounts[]``)."""

    host_path: str = _f("hostPath", "str", default="")
    container_path: str = _f("containerPath", "str", default="")
    options: tuple[str, ...] | None = _f("options", ("list", "str"), conv=_tuple)
    type: str | None = _f("type", "str")


@attrs.frozen(slots=True, kw_only=True)
class Hook:
    """An OCI hook to add to the container (``containerEdits.hooks[]``)."""

    hook_name: str = _f("hookName", "str", default="")
    path: str = _f("path", "str", default="")
    args: tuple[str, ...] | None = _f("args", ("list", "str"), conv=_tuple)
    env: tuple[str, ...] | None = _f("env", ("list", "str"), conv=_tuple)
    timeout: int | None = _f("timeout", "int")


@attrs.frozen(slots=True, kw_only=True)
class IntelRdt:
    """Intel RDT (resctrl) class of service for the container (``containerEdits.intelRdt``)."""

    clos_id: str | None = _f("closID", "str")
    l3_cache_schema: str | None = _f("l3CacheSchema", "str")
    mem_bw_schema: str | None = _f("memBwSchema", "str")
    schemata: tuple[str, ...] | None = _f("schemata", ("list", "str"), conv=_tuple)
    enable_monitoring: bool | None = _f("enableMonitoring", "bool")


@attrs.frozen(slots=True, kw_only=True)
class NetDevice:
    """A host network interface moved into the container (``containerEdits.netDevices[]``)."""

    host_interface_name: str = _f("hostInterfaceName", "str", default="")
    name: str = _f("name", "str", default="")


@attrs.frozen(slots=True, kw_only=True)
class ContainerEdits:
    """Edits a spec or a device makes to the OCI spec of a container."""

    env: tuple[str, ...] | None = _f("env", ("list", "str"), conv=_tuple)
    device_nodes: tuple[DeviceNode, ...] | None = _f(
        "deviceNodes", ("list", DeviceNode), conv=_tuple
    )
    hooks: tuple[Hook, ...] | None = _f("hooks", ("list", Hook), conv=_tuple)
    mounts: tuple[Mount, ...] | None = _f("mounts", ("list", Mount), conv=_tuple)
    intel_rdt: IntelRdt | None = attrs.field(default=None, metadata=_m("intelRdt", IntelRdt))
    additional_gids: tuple[int, ...] | None = _f(
        "additionalGids", ("list", "uint32"), conv=_tuple
    )
    net_devices: tuple[NetDevice, ...] | None = _f(
        "netDevices", ("list", NetDevice), conv=_tuple
    )

    def is_empty(self) -> bool:
        """True when the edits would change nothing (all lists empty, no intelRdt)."""
        return not (
            self.env or self.device_nodes or self.hooks or self.mounts
            or self.additional_gids or self.intel_rdt is not None or self.net_devices
        )


@attrs.frozen(slots=True, kw_only=True)
class Device:
    """One device of a spec: its (unqualified) name and the edits it needs."""

    name: str = _f("name", "str", default="")
    annotations: dict[str, str] | None = attrs.field(
        default=None, metadata=_m("annotations", ("map", "str")), converter=_dict
    )
    container_edits: ContainerEdits = attrs.field(
        factory=ContainerEdits, metadata=_m("containerEdits", ContainerEdits)
    )


@attrs.frozen(slots=True, kw_only=True)
class Spec:
    """A CDI spec file: a vendor/class (``kind``), its devices and spec-wide edits.

    >>> spec = Spec.from_dict({"cdiVersion": "0.3.0", "kind": "vendor.com/gpu",
    ...     "devices": [{"name": "0", "containerEdits": {"env": ["GPU=0"]}}]})
    >>> minimum_required_version(spec)
    '0.5.0'
    """

    cdi_version: str = _f("cdiVersion", "str", default="")
    kind: str = _f("kind", "str", default="")
    annotations: dict[str, str] | None = attrs.field(
        default=None, metadata=_m("annotations", ("map", "str")), converter=_dict
    )
    devices: tuple[Device, ...] = _f("devices", ("list", Device), default=(), conv=_tuple)
    container_edits: ContainerEdits | None = attrs.field(
        default=None, metadata=_m("containerEdits", ContainerEdits)
    )

    @property
    def vendor(self) -> str:
        """The vendor part of ``kind`` (before the first ``/``); empty when malformed."""
        return _names.parse_qualifier(self.kind)[0]

    @property
    def class_(self) -> str:
        """The class part of ``kind`` (after the first ``/``)."""
        return _names.parse_qualifier(self.kind)[1]

    @classmethod
    def from_dict(cls, data: Any, *, source: str | None = None) -> Spec:
        """Build a spec from decoded JSON/YAML, strictly (no semantic validation)."""
        if data is None:
            raise SpecError("failed to parse CDI Spec, no Spec data", source=source)
        try:
            return _decode(cls, data, "", yaml_coerce=False)
        except SpecError as e:
            raise e.with_source(source) if source else e from None

    def to_dict(self) -> dict[str, Any]:
        """The wire document: camelCase keys, absent fields left out."""
        return _encode(self)

    def to_json(self, *, indent: int | None = None) -> str:
        """Serialise to JSON (compact by default, like the Go writer)."""
        seps = (",", ":") if indent is None else (",", ": ")
        return json.dumps(self.to_dict(), indent=indent, separators=seps)

    def to_yaml(self) -> str:
        """Serialise to a YAML document starting with ``---``, keys in model order."""
        body = yaml.safe_dump(self.to_dict(), sort_keys=False, default_flow_style=False)
        return "---\n" + body

    def get_device(self, name: str) -> Device | None:
        """The device with this unqualified name, if the spec has it."""
        for dev in self.devices:
            if dev.name == name:
                return dev
        return None


# --- decoding ------------------------------------------------------------------------------

_INT_RANGES = {
    "int": (-(2**63), 2**63 - 1),
    "int64": (-(2**63), 2**63 - 1),
    "uint32": (0, 2**32 - 1),
}
_TABLES: dict[type, tuple[dict[str, tuple[str, Any]], list[tuple[str, str]]]] = {}
_FIRST_CHAR = re.compile(r"\s*(\S)")


def _table(cls: type) -> tuple[dict[str, tuple[str, Any]], list[tuple[str, str]]]:
    tab = _TABLES.get(cls)
    if tab is None:
        fields = attrs.fields(cls)
        by_wire = {f.metadata["wire"]: (f.name, f.metadata["kind"]) for f in fields}
        order = [(f.name, f.metadata["wire"]) for f in fields]
        tab = _TABLES[cls] = (by_wire, order)
    return tab


def _tname(v: Any) -> str:
    if v is None:
        return "null"
    return {bool: "boolean", int: "integer", float: "number", str: "string", list: "array",
            dict: "object"}.get(type(v), type(v).__name__)


def _yaml_str(v: Any) -> str | None:
    """YAML scalars the Go YAML->JSON bridge turns into strings for string fields."""
    if type(v) is bool:
        return "true" if v else "false"
    if type(v) is int:
        return str(v)
    if type(v) is float:
        if v.is_integer() and abs(v) < 1e21:
            return str(int(v))
        return repr(v)
    if isinstance(v, (datetime.date, datetime.datetime)):
        return v.isoformat()
    return None


Decoder = Callable[[Any], Any]


def _join(part: str, field: str | None) -> str:
    if not field:
        return part
    return f"{part}{field}" if field.startswith("[") else f"{part}.{field}"


def _at(e: SpecError, part: str) -> SpecError:
    """The same error one level further out: prefix ``part`` to its JSON path."""
    return SpecError(e.message, field=_join(part, e.field), source=e.source)


def _str_decoder(yaml_coerce: bool) -> Decoder:
    def dec(v: Any) -> str:
        if type(v) is str:
            return v
        if yaml_coerce:
            s = _yaml_str(v)
            if s is not None:
                return s
        raise SpecError(f"failed to parse CDI Spec: expected a string, got {_tname(v)} {v!r}")
    return dec


def _bool(v: Any) -> bool:
    if type(v) is bool:
        return v
    raise SpecError(f"failed to parse CDI Spec: expected a boolean, got {_tname(v)} {v!r}")


def _int_decoder(kind: str) -> Decoder:
    lo, hi = _INT_RANGES[kind]

    def dec(v: Any) -> Any:
        if type(v) is not int:
            if type(v) is float and v.is_integer():
                v = int(v)
            else:
                raise SpecError(f"failed to parse CDI Spec: expected an integer ({kind}), "
                                f"got {_tname(v)} {v!r}")
        if not lo <= v <= hi:
            raise SpecError(f"failed to parse CDI Spec: {v} out of range for {kind}")
        return v
    return dec


def _list_decoder(item: Decoder) -> Decoder:
    def dec(v: Any) -> tuple[Any, ...]:
        if type(v) is not list:
            raise SpecError(f"failed to parse CDI Spec: expected an array, got {_tname(v)} {v!r}")
        try:
            return tuple(map(item, v))
        except SpecError:
            for i, x in enumerate(v):
                try:
                    item(x)
                except SpecError as e:
                    raise _at(e, f"[{i}]") from None
            raise
    return dec


def _map_decoder(yaml_coerce: bool) -> Decoder:
    str_dec = _str_decoder(yaml_coerce)

    def dec(v: Any) -> dict[str, str]:
        if type(v) is not dict:
            raise SpecError(f"failed to parse CDI Spec: expected an object, got {_tname(v)}")
        out: dict[str, str] = {}
        for k, item in v.items():
            key = k if type(k) is str else (_yaml_str(k) if yaml_coerce else None)
            if key is None:
                raise SpecError(f"failed to parse CDI Spec: invalid key {k!r}")
            try:
                out[key] = str_dec(item)
            except SpecError as e:
                raise _at(e, key) from None
        return out
    return dec


_DECODERS: dict[tuple[Any, bool], Decoder] = {}


def _decoder(kind: Any, yaml_coerce: bool) -> Decoder:
    key = (kind, yaml_coerce)
    dec = _DECODERS.get(key)
    if dec is not None:
        return dec
    if kind == "str":
        dec = _str_decoder(yaml_coerce)
    elif kind == "bool":
        dec = _bool
    elif isinstance(kind, str):
        dec = _int_decoder(kind)
    elif isinstance(kind, tuple) and kind[0] == "list":
        dec = _list_decoder(_decoder(kind[1], yaml_coerce))
    elif isinstance(kind, tuple):
        dec = _map_decoder(yaml_coerce)
    else:
        dec = _class_decoder(kind, yaml_coerce)
    _DECODERS[key] = dec
    return dec


def _class_decoder(cls: type, yaml_coerce: bool) -> Decoder:
    """A decoder for one model class: strict keys, no ``__init__`` call (values are final).

    The function is generated once per class (an unrolled ``if key == ...`` chain), which
    keeps parsing within a small factor of plain ``json.loads``.
    """
    fields = attrs.fields(cls)
    ns: dict[str, Any] = {
        "cls": cls, "new": object.__new__, "setattr_": object.__setattr__,
        "SpecError": SpecError, "_at": _at, "_tname": _tname,
    }
    # placeholder first: nested classes may refer back to decoders not built yet
    _DECODERS[(cls, yaml_coerce)] = lambda v: ns["dec"](v)
    lines = [
        "def dec(data):",
        "    if type(data) is not dict:",
        "        raise SpecError('failed to parse CDI Spec: expected an object, got '"
        " + _tname(data))",
    ]
    for i, f in enumerate(fields):
        d = f.default
        if isinstance(d, attrs.Factory):  # type: ignore[arg-type]
            d = d.factory()  # sharing is fine: the models are immutable
        ns[f"D{i}"] = d
        ns[f"F{i}"] = _decoder(f.metadata["kind"], yaml_coerce)
        lines.append(f"    v{i} = D{i}")
    lines.append("    for key, value in data.items():")
    for i, f in enumerate(fields):
        wire = f.metadata["wire"]
        lines.append(f"        {'if' if i == 0 else 'elif'} key == {wire!r}:")
        if f.metadata["kind"] == "str":  # inline fast path for the most common field kind
            lines += [
                "            if type(value) is str:",
                f"                v{i} = value",
                "            elif value is not None:",
            ]
        else:
            lines.append("            if value is not None:")  # JSON null: absent (Go zero)
        lines += [
            "                try:",
            f"                    v{i} = F{i}(value)",
            "                except SpecError as e:",
            f"                    raise _at(e, {wire!r}) from None",
        ]
    lines += [
        "        else:",
        "            raise SpecError(f'failed to parse CDI Spec: unknown field \"{key}\"')",
        "    obj = new(cls)",
    ]
    lines += [f"    setattr_(obj, {f.name!r}, v{i})" for i, f in enumerate(fields)]
    lines.append("    return obj")
    exec(compile("\n".join(lines), f"<cdi decoder {cls.__name__}>", "exec"), ns)
    dec: Decoder = ns["dec"]
    return dec


def _decode(cls: type[T], data: Any, path: str, *, yaml_coerce: bool) -> T:
    dec = _decoder(cls, yaml_coerce)
    try:
        result: T = dec(data)
    except SpecError as e:
        raise (_at(e, path) if path else e) from None
    return result


def _encode(obj: Any) -> dict[str, Any]:
    _, order = _table(type(obj))
    out: dict[str, Any] = {}
    for name, wire in order:
        v = getattr(obj, name)
        if v is None:
            continue
        if attrs.has(type(v)):
            v = _encode(v)
        elif isinstance(v, tuple):
            v = [_encode(x) if attrs.has(type(x)) else x for x in v]
        elif isinstance(v, dict):
            v = dict(v)
        out[wire] = v
    return out


class _StrictLoader(yaml.CSafeLoader if hasattr(yaml, "CSafeLoader") else yaml.SafeLoader):  # type: ignore[misc]
    """PyYAML safe loader that refuses duplicate mapping keys."""


def _construct_mapping(loader: Any, node: yaml.MappingNode, deep: bool = False) -> Any:
    seen: set[Any] = set()
    for key_node, _ in node.value:
        if key_node.tag == "tag:yaml.org,2002:merge":
            continue
        key = loader.construct_object(key_node, deep=True)
        try:
            dup = key in seen
        except TypeError:
            continue
        if dup:
            mark = key_node.start_mark
            raise SpecError(
                f"failed to parse CDI Spec: duplicate key {key!r} "
                f"(line {mark.line + 1}, column {mark.column + 1})"
            )
        seen.add(key)
    return yaml.SafeLoader.construct_mapping(loader, node, deep=deep)


_StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


def _no_dup_pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out = dict(pairs)
    if len(out) != len(pairs):
        seen: set[str] = set()
        for k, _ in pairs:
            if k in seen:
                raise SpecError(f"failed to parse CDI Spec: duplicate key {k!r}")
            seen.add(k)
    return out


_JSON_DECODER = json.JSONDecoder(object_pairs_hook=_no_dup_pairs)


def _load_document(data: str | bytes, fmt: str | None) -> tuple[Any, bool]:
    """Decode a JSON or YAML document; returns (value, came_from_yaml)."""
    text = data.decode("utf-8") if isinstance(data, bytes) else data
    first = _FIRST_CHAR.match(text)
    if fmt != "yaml" and first is not None and first.group(1) in ("{", "["):
        try:
            return _JSON_DECODER.decode(text), False
        except json.JSONDecodeError:
            pass  # not JSON after all: YAML is a superset, let the YAML parser say what's wrong
    try:
        return yaml.load(text, Loader=_StrictLoader), True
    except yaml.YAMLError as e:
        raise SpecError(f"failed to parse CDI Spec: {e}".replace("\n", " ")) from None


def parse_spec(data: str | bytes, *, source: str | None = None, format: str | None = None) -> Spec:
    """Strictly decode a JSON or YAML spec document (no semantic validation).

    ``format`` may be ``"json"`` or ``"yaml"``; by default JSON is tried first when the text
    looks like JSON. Unknown keys, duplicate keys, wrong types and an empty document raise
    :class:`SpecError`.
    """
    try:
        doc, from_yaml = _load_document(data, format)
        if doc is None:
            raise SpecError("failed to parse CDI Spec, no Spec data")
        return _decode(Spec, doc, "", yaml_coerce=from_yaml)
    except SpecError as e:
        raise e.with_source(source) if source else e from None
    except UnicodeDecodeError as e:
        raise SpecError(f"failed to parse CDI Spec: {e}", source=source) from None


def load_spec(path: str | os.PathLike[str]) -> Spec:
    """Read, parse and validate a spec file (``ReadSpec``), with the process-wide validator."""
    p = os.fspath(path)
    try:
        raw = Path(p).read_bytes()
    except OSError as e:
        raise SpecError(f'failed to read CDI Spec "{p}": {e.strerror or e}') from None
    return spec_from_file_data(raw, p, validators=_validator.active(None))


def spec_from_file_data(raw: bytes, path: str, *,
                        validators: Sequence[_validator.SpecValidator] = ()) -> Spec:
    """Parse and validate the bytes of spec file ``path`` (format chosen by extension).

    ``validators`` run after parsing and before the built-in checks, as in the Go library.
    """
    p = path
    fmt = "json" if p.endswith(".json") else "yaml" if p.endswith(".yaml") else None
    spec = parse_spec(raw, source=p, format=fmt)
    run_spec_validators(spec, validators, p)
    try:
        validate_spec(spec)
    except SpecError as e:
        raise e.with_source(p) from None
    return spec


def run_spec_validators(spec: Spec, validators: Sequence[_validator.SpecValidator],
                        source: str | None = None) -> None:
    """Run each validator; the first rejection raises ``SpecError`` naming the validator."""
    for fn in validators:
        try:
            fn(spec)
        except SpecError as e:
            raise SpecError(f"rejected by spec validator {_validator.describe(fn)}: "
                            f"{e.message}", field=e.field, source=source) from None
        except Exception as e:
            raise SpecError(f"rejected by spec validator {_validator.describe(fn)}: "
                            f"{type(e).__name__}: {e}", source=source) from e


def model_to_dict(model: object) -> dict[str, Any]:
    """The wire form (camelCase keys, absent fields left out) of any CDI model."""
    if not attrs.has(type(model)):
        raise TypeError(f"not a CDI model: {type(model).__name__}")
    return _encode(model)


def dump_spec(spec: Spec, name: str) -> str:
    """Encode a spec for a file called ``name``: JSON for ``.json``, else YAML."""
    return spec.to_json() if name.endswith(".json") else spec.to_yaml()


# --- versions ------------------------------------------------------------------------------

def _all_edits(spec: Spec) -> Iterable[ContainerEdits]:
    if spec.container_edits is not None:
        yield spec.container_edits
    for dev in spec.devices:
        yield dev.container_edits


def _needs_1_1_0(spec: Spec) -> bool:
    for e in _all_edits(spec):
        if e.net_devices:
            return True
        rdt = e.intel_rdt
        if rdt is not None and (rdt.schemata is not None or rdt.enable_monitoring):
            return True
    return False


def _needs_0_7_0(spec: Spec) -> bool:
    return any(e.intel_rdt is not None or e.additional_gids for e in _all_edits(spec))


def _needs_0_6_0(spec: Spec) -> bool:
    if spec.annotations or any(d.annotations for d in spec.devices):
        return True
    _, _, cls = spec.kind.partition("/")
    return "." in cls


def _needs_0_5_0(spec: Spec) -> bool:
    for dev in spec.devices:
        if dev.name[:1].isascii() and dev.name[:1].isdigit():
            return True
    return any(n.host_path for e in _all_edits(spec) for n in e.device_nodes or ())


def _needs_0_4_0(spec: Spec) -> bool:
    return any(m.type for e in _all_edits(spec) for m in e.mounts or ())


_VERSION_PREDICATES: tuple[tuple[str, Callable[[Spec], bool]], ...] = (
    ("1.1.0", _needs_1_1_0),
    ("0.7.0", _needs_0_7_0),
    ("0.6.0", _needs_0_6_0),
    ("0.5.0", _needs_0_5_0),
    ("0.4.0", _needs_0_4_0),
)


_VERSION_KEYS = {v: tuple(int(x) for x in v.split(".")) for v in KNOWN_VERSIONS}


def _version_key(v: str) -> tuple[int, ...]:
    return _VERSION_KEYS.get(v) or tuple(int(x) for x in v.split("."))


def minimum_required_version(spec: Spec) -> str:
    """The oldest spec version that has every feature ``spec`` uses (no leading ``v``)."""
    for version, needs in _VERSION_PREDICATES:
        if needs(spec):
            return version
    return _EARLIEST_VERSION


def validate_version(spec: Spec) -> None:
    """Check ``cdiVersion`` is a known version and new enough for the features used."""
    raw = spec.cdi_version
    version = raw[1:] if raw.startswith("v") else raw
    if version not in KNOWN_VERSIONS:
        raise SpecError(f'invalid version "{raw}"', field="cdiVersion")
    minimum = minimum_required_version(spec)
    if _version_key(minimum) > _version_key(version):
        raise SpecError(f"the spec version must be at least v{minimum}", field="cdiVersion")


# --- validation ----------------------------------------------------------------------------

def validate_env(env: Iterable[str], field: str = "env") -> None:
    """Every entry must be ``KEY=VALUE`` with a non-empty key."""
    for i, e in enumerate(env):
        if e.find("=") <= 0:
            raise SpecError(f'invalid environment variable "{e}"', field=f"{field}[{i}]")


def _validate_device_node(n: DeviceNode, field: str) -> None:
    if not n.path:
        raise SpecError("invalid (empty) device path", field=f"{field}.path")
    if (n.type or "") not in _DEVICE_TYPES:
        raise SpecError(f'device "{n.path}": invalid type "{n.type}"', field=f"{field}.type")
    p = n.permissions
    if p and p != NO_PERMISSIONS and not _PERMISSIONS_RE.match(p):
        raise SpecError(
            f'device "{n.path}": invalid permissions "{p}"', field=f"{field}.permissions"
        )


def _validate_hook(h: Hook, field: str) -> None:
    if h.hook_name not in HOOK_NAMES:
        raise SpecError(f'invalid hook name "{h.hook_name}"', field=f"{field}.hookName")
    if not h.path:
        raise SpecError(f'invalid hook "{h.hook_name}" with empty path', field=f"{field}.path")
    try:
        validate_env(h.env or (), f"{field}.env")
    except SpecError as e:
        raise SpecError(f'invalid hook "{h.hook_name}": {e.message}', field=e.field) from None


def _validate_mount(m: Mount, field: str) -> None:
    if not m.host_path:
        raise SpecError("invalid mount, empty host path", field=f"{field}.hostPath")
    if not m.container_path:
        raise SpecError("invalid mount, empty container path", field=f"{field}.containerPath")


def _validate_intel_rdt(r: IntelRdt, field: str) -> None:
    c = r.clos_id
    if c and c != "/" and (len(c) >= 4096 or c in (".", "..") or "/" in c or "\n" in c):
        raise SpecError("invalid ClosID", field=f"{field}.closID")


def _validate_net_devices(devs: Iterable[NetDevice], field: str) -> None:
    hosts: set[str] = set()
    names: set[str] = set()
    for i, d in enumerate(devs):
        f = f"{field}[{i}]"
        if not d.host_interface_name:
            raise SpecError("invalid linux net device, empty HostInterfaceName",
                            field=f"{f}.hostInterfaceName")
        if not d.name:
            raise SpecError("invalid linux net device, empty Name", field=f"{f}.name")
        if d.host_interface_name in hosts:
            raise SpecError(f'invalid linux net device, duplicate HostInterfaceName '
                            f'"{d.host_interface_name}"', field=f"{f}.hostInterfaceName")
        if d.name in names:
            raise SpecError(f'invalid linux net device, duplicate Name "{d.name}"',
                            field=f"{f}.name")
        hosts.add(d.host_interface_name)
        names.add(d.name)


def validate_container_edits(edits: ContainerEdits, field: str = "containerEdits") -> None:
    """Validate one set of edits (env, device nodes, hooks, mounts, intelRdt, netDevices)."""
    if edits.env:
        try:
            validate_env(edits.env, f"{field}.env")
        except SpecError as e:
            raise SpecError(f"invalid container edits: {e.message}", field=e.field) from None
    for i, n in enumerate(edits.device_nodes or ()):
        _validate_device_node(n, f"{field}.deviceNodes[{i}]")
    for i, h in enumerate(edits.hooks or ()):
        _validate_hook(h, f"{field}.hooks[{i}]")
    for i, m in enumerate(edits.mounts or ()):
        _validate_mount(m, f"{field}.mounts[{i}]")
    if edits.intel_rdt is not None:
        _validate_intel_rdt(edits.intel_rdt, f"{field}.intelRdt")
    if edits.net_devices:
        _validate_net_devices(edits.net_devices, f"{field}.netDevices")


def _validate_device(dev: Device, field: str) -> None:
    try:
        _names.validate_device_name(dev.name)
    except InvalidArgumentError as e:
        raise SpecError(str(e), field=f"{field}.name") from None
    edits = dev.container_edits
    if edits.is_empty():
        raise SpecError("invalid device, empty device edits", field=f"{field}.containerEdits")
    try:
        validate_container_edits(edits, f"{field}.containerEdits")
    except SpecError as e:
        raise SpecError(f'invalid device "{dev.name}": {e.message}', field=e.field) from None


def validate_spec(spec: Spec) -> None:
    """Validate a parsed spec like the Go library's ``ReadSpec``; first failure wins.

    Order: version, vendor and class names, spec-level edits, each device (name, non-empty
    edits, edits, duplicates), at least one device. Raises :class:`SpecError`.
    """
    try:
        validate_version(spec)
        vendor, class_ = _names.parse_qualifier(spec.kind)
        try:
            _names.validate_vendor_name(vendor)
            _names.validate_class_name(class_)
        except InvalidArgumentError as e:
            raise SpecError(str(e), field="kind") from None
        if spec.container_edits is not None:
            validate_container_edits(spec.container_edits)
        seen: set[str] = set()
        for i, dev in enumerate(spec.devices):
            try:
                _validate_device(dev, f"devices[{i}]")
            except SpecError as e:
                raise SpecError(f'failed add device "{dev.name}": {e.message}',
                                field=e.field) from None
            if dev.name in seen:
                raise SpecError(f'invalid spec, multiple device "{dev.name}"',
                                field=f"devices[{i}].name")
            seen.add(dev.name)
        if not spec.devices:
            raise SpecError("invalid spec, no devices", field="devices")
    except SpecError as e:
        raise SpecError(f"invalid CDI Spec: {e.message}", field=e.field, source=e.source) from None

