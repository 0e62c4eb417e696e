"""Network configuration loading, as libcni's ``conf.go`` does it (same rules, same messages).

A network configuration list (``.conflist``) names the network and chains plugins; a legacy
single-plugin config (``.conf``/``.json``) is up-converted into a one-plugin list. Plugin objects
may also come from a sibling directory named after the network (``<dir>/<name>/*.conf``) unless
``loadOnlyInlinedPlugins`` is set. Parsed models are frozen and keep the raw bytes of the file
and of every plugin object (the cache stores the file bytes; stdin is built from the plugin's).
"""

from __future__ import annotations

import os
import types
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs

from podkit.cni._wire import go_dumps, go_type, loads_object
from podkit.cni.types import CURRENT_VERSION, parse_version
from podkit.errors import InvalidArgumentError, NotFoundError

__all__ = [
    "ConfigError",
    "NetworkConfigList",
    "NetworkNotFoundError",
    "NoConfigsFoundError",
    "PluginConfig",
    "conf_files",
    "load_conf",
    "load_conflist",
    "load_network",
    "load_networks",
    "plugin_from_bytes",
]

StrPath = str | os.PathLike[str]


class ConfigError(InvalidArgumentError):
    """An unparsable or invalid network configuration; names the file when known."""

    def __init__(self, message: str, source: str | None = None) -> None:
        self.message = message
        self.source = source
        super().__init__(f"{source}: {message}" if source else message)


class NoConfigsFoundError(NotFoundError):
    """A config directory holds no network configuration at all (libcni's message)."""

    def __init__(self, directory: str) -> None:
        self.directory = directory
        super().__init__(f"no net configurations found in {directory}")


class NetworkNotFoundError(NotFoundError):
    """A config directory holds configurations, but none with the requested name."""

    def __init__(self, directory: str, name: str) -> None:
        self.directory = directory
        self.name = name
        super().__init__(f'no net configuration with name "{name}" in {directory}')


def _frozen_map(m: Mapping[str, bool]) -> Mapping[str, bool]:
    return types.MappingProxyType(dict(m))


@attrs.frozen
class PluginConfig:
    """One plugin object of a list: its ``type``, declared ``capabilities`` and raw bytes.

    ``raw`` holds the object as loaded (inlined objects re-marshalled like libcni, sibling
    ``.conf`` files verbatim); ``to_dict()`` decodes a fresh copy.
    """

    type: str
    raw: bytes = attrs.field(repr=False)
    name: str | None = None
    cni_version: str | None = None
    capabilities: Mapping[str, bool] = attrs.field(factory=dict, converter=_frozen_map)
    source: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """A fresh decoded copy of the plugin object."""
        return loads_object(self.raw)

    @property
    def enabled_capabilities(self) -> tuple[str, ...]:
        """Capability names declared ``true`` (the ones a runtime may fill in)."""
        return tuple(k for k, v in self.capabilities.items() if v is True)


def plugin_from_bytes(data: bytes, source: str | None = None) -> PluginConfig:
    """Parse one plugin object (libcni ``NetworkPluginConfFromBytes``: only ``type`` required)."""
    try:
        obj = loads_object(data)
    except ValueError as e:
        raise ConfigError(f"error parsing configuration: {e}", source) from None
    return _plugin_from_obj(obj, data, source)


def _plugin_from_obj(obj: Mapping[str, Any], data: bytes, source: str | None) -> PluginConfig:
    ptype = obj.get("type")
    if not isinstance(ptype, str) or not ptype:
        raise ConfigError("error parsing configuration: missing 'type'", source)
    name = obj.get("name")
    version = obj.get("cniVersion")
    caps = obj.get("capabilities")
    return PluginConfig(
        type=ptype,
        raw=data,
        name=name if isinstance(name, str) else None,
        cni_version=version if isinstance(version, str) else None,
        capabilities={k: v for k, v in caps.items() if isinstance(v, bool)}
        if isinstance(caps, dict) else {},
        source=source,
    )


def _bool_field(raw: Mapping[str, Any], key: str) -> bool:
    value = raw.get(key, False)
    if isinstance(value, bool):
        return value
    if isinstance(value, str):
        if value.lower() == "true":
            return True
        if value.lower() == "false":
            return False
        raise ValueError(f'invalid value "{value}" for {key}')
    raise ValueError(f"invalid type {go_type(value)} for {key}")


def _select_version(raw: Mapping[str, Any]) -> tuple[str, tuple[str, ...]]:
    version = raw.get("cniVersion", "")
    if not isinstance(version, str):
        raise ValueError(f"invalid cniVersion type {go_type(version)}")
    if "cniVersions" not in raw:
        return version, ()
    entries = raw["cniVersions"]
    if not isinstance(entries, list):
        raise ValueError(f"invalid type for cniVersions: {go_type(entries)}")
    current = parse_version(CURRENT_VERSION)
    candidates: list[tuple[tuple[int, int, int], str]] = []
    for i, entry in enumerate(entries):
        if not isinstance(entry, str):
            raise ValueError(f"invalid cniVersions entry {entry!r} at index {i}: not a string")
        try:
            parsed = parse_version(entry)
        except ValueError as e:
            raise ValueError(f"invalid cniVersions entry {entry} at index {i}: {e}") from None
        if parsed <= current:
            candidates.append((parsed, entry))
    if version:
        try:
            own = parse_version(version)
        except ValueError:
            own = None
        if own is not None and own <= current:
            candidates.append((own, version))
    chosen = max(candidates)[1] if candidates else version
    return chosen, tuple(e for e in entries if isinstance(e, str))


@attrs.frozen
class NetworkConfigList:
    """A parsed network configuration list (libcni ``NetworkConfigList``).

    ``cni_version`` is the selected version (``cniVersions`` taken into account); ``raw`` the
    whole original document, which the result cache stores.
    """

    name: str
    cni_version: str
    plugins: tuple[PluginConfig, ...]
    raw: bytes = attrs.field(repr=False)
    cni_versions: tuple[str, ...] = ()
    disable_check: bool = False
    disable_gc: bool = False
    load_only_inlined_plugins: bool = False
    source: str | None = None

    @classmethod
    def from_bytes(cls, data: bytes | str, source: str | None = None) -> NetworkConfigList:
        """Parse a list document (libcni ``NetworkConfFromBytes``); no sibling-dir plugins."""
        raw_bytes = data.encode() if isinstance(data, str) else bytes(data)
        prefix = "error parsing configuration list"
        try:
            raw = loads_object(raw_bytes)
        except ValueError as e:
            raise ConfigError(f"{prefix}: {e}", source) from None
        try:
            if "name" not in raw:
                raise ValueError("no name")
            name = raw["name"]
            if not isinstance(name, str):
                raise ValueError(f"invalid name type {go_type(name)}")
            version, versions = _select_version(raw)
            disable_check = _bool_field(raw, "disableCheck")
            disable_gc = _bool_field(raw, "disableGC")
            only_inlined = _bool_field(raw, "loadOnlyInlinedPlugins")
            plugins_raw = raw.get("plugins")
            if "plugins" not in raw:
                if only_inlined:
                    raise ValueError("`loadOnlyInlinedPlugins` is true, and no 'plugins' key")
                plugins_raw = []
            elif not isinstance(plugins_raw, list):
                raise ValueError(f"invalid 'plugins' type {go_type(plugins_raw)}")
            elif not plugins_raw:
                raise ValueError("no plugins in list")
        except ValueError as e:
            raise ConfigError(f"{prefix}: {e}", source) from None
        plugins = []
        for i, obj in enumerate(plugins_raw):
            if not isinstance(obj, dict):
                raise ConfigError(f"failed to parse plugin config {i}: error parsing "
                                  f"configuration: expected an object, got {go_type(obj)}", source)
            try:
                plugins.append(_plugin_from_obj(obj, go_dumps(obj), source))
            except ConfigError as e:
                raise ConfigError(f"failed to parse plugin config {i}: {e.message}",
                                  source) from None
        return cls(
            name=name, cni_version=version, plugins=tuple(plugins), raw=raw_bytes,
            cni_versions=versions, disable_check=disable_check, disable_gc=disable_gc,
            load_only_inlined_plugins=only_inlined, source=source,
        )

    @classmethod
    def from_plugin(cls, plugin: PluginConfig) -> NetworkConfigList:
        """Up-convert a single-plugin config into a list (libcni ``ConfListFromConf``)."""
        obj = plugin.to_dict()
        doc: dict[str, Any] = {"name": obj.get("name"), "cniVersion": obj.get("cniVersion"),
                               "plugins": [obj]}
        if doc["name"] is None:
            del doc["name"]
        if doc["cniVersion"] is None:
            del doc["cniVersion"]
        return cls.from_bytes(go_dumps(doc), source=plugin.source)

    def to_dict(self) -> dict[str, Any]:
        """A fresh decoded copy of the original document."""
        return loads_object(self.raw)

    @property
    def capabilities(self) -> tuple[str, ...]:
        """Union of the capability names the plugins enable, in first-seen order."""
        seen: dict[str, None] = {}
        for p in self.plugins:
            for cap in p.enabled_capabilities:
                seen.setdefault(cap, None)
        return tuple(seen)


def _read(path: StrPath) -> bytes:
    try:
        return Path(path).read_bytes()
    except OSError as e:
        raise ConfigError(f"error reading file: {e.strerror}", os.fspath(path)) from None


def conf_files(directory: StrPath, extensions: tuple[str, ...]) -> list[str]:
    """Regular files in ``directory`` with one of ``extensions``, sorted (missing dir: [])."""
    try:
        entries = list(os.scandir(directory))
    except FileNotFoundError:
        return []
    except OSError as e:
        raise ConfigError(f"error listing directory: {e.strerror}", os.fspath(directory)) from None
    out = []
    for entry in entries:
        if entry.is_dir():
            continue
        if os.path.splitext(entry.name)[1] in extensions:
            out.append(os.path.join(os.fspath(directory), entry.name))
    return sorted(out)


def load_conflist(path: StrPath) -> NetworkConfigList:
    """Load a ``.conflist`` file, plus ``<dir>/<name>/*.conf`` plugins unless inlined-only."""
    source = os.fspath(path)
    conf = NetworkConfigList.from_bytes(_read(path), source=source)
    if conf.load_only_inlined_plugins:
        return conf
    extra = []
    subdir = os.path.join(os.path.dirname(source), conf.name)
    if conf.name and os.path.isdir(subdir):
        for file in conf_files(subdir, (".conf",)):
            extra.append(plugin_from_bytes(_read(file), source=file))
    if not conf.plugins and not extra:
        raise ConfigError("no plugin configs found", source)
    if extra:
        conf = attrs.evolve(conf, plugins=conf.plugins + tuple(extra))
    return conf


def load_conf(path: StrPath) -> NetworkConfigList:
    """Load a legacy single-plugin ``.conf``/``.json`` file, up-converted into a list."""
    source = os.fspath(path)
    plugin = plugin_from_bytes(_read(path), source=source)
    return NetworkConfigList.from_plugin(plugin)


def load_network(directory: StrPath, name: str) -> NetworkConfigList:
    """Find network ``name`` in ``directory`` (libcni ``LoadNetworkConf``).

    ``.conflist`` files first, in sorted order (an unparsable one aborts the search, as in
    libcni), then legacy ``.conf``/``.json`` files. Raises ``NoConfigsFoundError`` or
    ``NetworkNotFoundError``.
    """
    dir_s = os.fspath(directory)
    lists = conf_files(dir_s, (".conflist",))
    for file in lists:
        conf = load_conflist(file)
        if conf.name == name:
            return conf
    singles = conf_files(dir_s, (".conf", ".json"))
    for file in singles:
        plugin = plugin_from_bytes(_read(file), source=file)
        if plugin.name == name:
            return NetworkConfigList.from_plugin(plugin)
    if not lists and not singles:
        raise NoConfigsFoundError(dir_s)
    raise NetworkNotFoundError(dir_s, name)


def load_networks(directory: StrPath) -> list[NetworkConfigList]:
    """Every network in ``directory`` (``.conflist``/``.conf``/``.json``, sorted), like go-cni.

    Any unparsable file aborts with its error; an empty directory gives ``[]``.
    """
    out = []
    for file in conf_files(directory, (".conf", ".conflist", ".json")):
        out.append(load_conflist(file) if file.endswith(".conflist") else load_conf(file))
    return out
