"""``CNI``: the runtime-side client (libcni's ``CNIConfig``) with podkit's safety additions.

Semantics follow libcni: ADD runs the chain in order and caches the final result with its
runtime config; CHECK and DEL get the cached result as ``prevResult``; DEL runs in reverse with
the ADD's cached CNI args and capability args (as libcni's GC and CRI-O do) and removes the cache
entry; GC first DELs stale cached attachments. On top of that:

* verbs by version: CHECK needs a 0.4.0+ list, STATUS and GC a 1.1.0+ list; asking an older
  list raises ``UnsupportedCommandError`` (libcni silently does nothing for STATUS/GC);
* version pre-flight: before ADD, STATUS or GC runs anything, every plugin's VERSION answer
  (cached by binary path and mtime) must list the network's version, and every binary must exist
  (``IncompatibleVersionError`` otherwise);
* rollback: when ADD fails at plugin k, DEL runs for plugins k..1 in reverse and the ADD error
  carries any rollback errors; nothing is cached;
* the cache entry is written atomically, a corrupt one never blocks DEL, and operations on one
  attachment are serialised across processes with a file lock;
* every exec has a timeout that kills the plugin's whole process group.
"""

from __future__ import annotations

import logging
import os
import re
import threading
import types
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import attrs

from podkit.cni.cache import CachedAttachment, CacheError, ResultCache, converted_result
from podkit.cni.config import ConfigError, NetworkConfigList, PluginConfig
from podkit.cni.invoke import (
    Exec,
    PluginInfo,
    RawExec,
    build_gc_request,
    build_request,
    build_status_request,
    plugin_env,
)
from podkit.cni.types import (
    CURRENT_VERSION,
    ERR_INCOMPATIBLE_VERSION,
    ERR_INVALID_ENVIRONMENT_VARIABLES,
    ERR_INVALID_NETWORK_CONFIG,
    ERR_UNKNOWN,
    ERR_UNKNOWN_CONTAINER,
    AnyResult,
    CNIError,
    parse_result,
    version_at_least,
)
from podkit.errors import AlreadyExistsError, InvalidArgumentError

__all__ = [
    "CNI",
    "VERB_SINCE",
    "AttachmentExistsError",
    "GCError",
    "IncompatibleVersionError",
    "RuntimeConf",
    "UnsupportedCommandError",
    "validate_container_id",
    "validate_ifname",
    "validate_network_name",
    "with_cached_runtime",
]

log = logging.getLogger("podkit.cni")

_NAME_RE = re.compile(r"[a-zA-Z0-9][a-zA-Z0-9_.\-]*\Z")
DEFAULT_TIMEOUT = 60.0

#: The first list version that has each verb (CNI spec: CHECK 0.4.0, STATUS and GC 1.1.0).
VERB_SINCE = {"CHECK": "0.4.0", "STATUS": "1.1.0", "GC": "1.1.0"}


def _pairs(value: Mapping[str, str] | Iterable[tuple[str, str]]) -> tuple[tuple[str, str], ...]:
    items = value.items() if isinstance(value, Mapping) else value
    out = []
    for item in items:
        k, v = item
        out.append((str(k), str(v)))
    return tuple(out)


def _jsonable(value: Any, where: str) -> Any:
    """Plain JSON data from ``value``; typed helpers (``to_json()``) are expanded."""
    to_json = getattr(value, "to_json", None)
    if callable(to_json):
        value = to_json()
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, Mapping):
        out = {}
        for k, v in value.items():
            if not isinstance(k, str) or not k:
                raise InvalidArgumentError(f"capability args {where}: key {k!r} is not a "
                                           "non-empty string")
            out[k] = _jsonable(v, f"{where}.{k}")
        return out
    if isinstance(value, (list, tuple)):
        return [_jsonable(v, f"{where}[{i}]") for i, v in enumerate(value)]
    raise InvalidArgumentError(f"capability args {where}: {type(value).__name__} value "
                               f"{value!r} is not JSON")


def _caps(value: Mapping[str, Any]) -> Mapping[str, Any]:
    return types.MappingProxyType(_jsonable(value, "$"))


@attrs.frozen
class RuntimeConf:
    """One attachment: container ID, netns path, interface name, CNI_ARGS pairs, capability args.

    ``args`` become ``CNI_ARGS`` (``K=V;...``); ``capability_args`` fill ``runtimeConfig`` for the
    plugins that declare those capabilities (see ``podkit.cni.capabilities``; typed helpers
    such as ``PortMapping`` may be used as values directly). Non-JSON values are refused here.
    """

    container_id: str
    netns: str = ""
    ifname: str = "eth0"
    args: tuple[tuple[str, str], ...] = attrs.field(default=(), converter=_pairs)
    capability_args: Mapping[str, Any] = attrs.field(factory=dict, converter=_caps)


class AttachmentExistsError(CNIError, AlreadyExistsError):
    """ADD of an attachment that is already added (the spec forbids ADD twice without DEL)."""


class UnsupportedCommandError(CNIError):
    """A verb the list's ``cniVersion`` does not have (CHECK below 0.4.0, STATUS/GC below 1.1.0)."""


class IncompatibleVersionError(CNIError):
    """The pre-flight found a plugin that does not support the list's version; nothing ran."""


def _require_verb(conf: NetworkConfigList, command: str) -> None:
    """Raise ``UnsupportedCommandError`` unless ``conf``'s version has ``command``."""
    since = VERB_SINCE[command]
    if not version_at_least(conf.cni_version, since):
        raise UnsupportedCommandError(
            ERR_INCOMPATIBLE_VERSION, f'configuration version "{conf.cni_version}" does not '
            f"support the {command} command", f"{command} needs cniVersion {since} or later",
            network=conf.name, command=command)


def with_cached_runtime(rt: RuntimeConf, entry: CachedAttachment) -> RuntimeConf:
    """``rt`` with the ADD's cached CNI args and capability args (cached keys win)."""
    caps = {**rt.capability_args, **entry.capability_args}
    return attrs.evolve(rt, args=entry.cni_args or rt.args, capability_args=caps)


class GCError(CNIError):
    """GC finished but some DELs or GC execs failed; ``errors`` holds each of them."""

    def __init__(self, network: str, errors: Sequence[BaseException]) -> None:
        super().__init__(ERR_UNKNOWN, "garbage collection failed",
                         "[" + " ".join(str(e) for e in errors) + "]", network=network)
        self.errors = tuple(errors)


def validate_container_id(container_id: str) -> None:
    """libcni's rule: non-empty (code 3) and ``[a-zA-Z0-9][a-zA-Z0-9_.-]*`` (code 4)."""
    if not container_id:
        raise CNIError(ERR_UNKNOWN_CONTAINER, "missing containerID")
    if not _NAME_RE.match(container_id):
        raise CNIError(ERR_INVALID_ENVIRONMENT_VARIABLES, "invalid characters in containerID",
                       container_id)


def validate_network_name(name: str) -> None:
    """libcni's rule: non-empty and ``[a-zA-Z0-9][a-zA-Z0-9_.-]*`` (code 7)."""
    if not name:
        raise CNIError(ERR_INVALID_NETWORK_CONFIG, "missing network name")
    if not _NAME_RE.match(name):
        raise CNIError(ERR_INVALID_NETWORK_CONFIG, "invalid characters found in network name",
                       name)


def validate_ifname(ifname: str) -> None:
    """libcni's rule: 1..15 bytes, not ``.``/``..``, no ``/``, ``:`` or whitespace (code 4)."""
    code = ERR_INVALID_ENVIRONMENT_VARIABLES
    if not ifname:
        raise CNIError(code, "interface name is empty")
    if len(ifname.encode()) > 15:
        raise CNIError(code, "interface name is too long",
                       "interface name should be less than 16 characters")
    if ifname in (".", ".."):
        raise CNIError(code, "interface name is . or ..")
    if any(c in "/:" or c.isspace() for c in ifname):
        raise CNIError(code, "interface name contains / or : or whitespace characters", ifname)


class CNI:
    """A CNI client over ``plugin_dirs`` with its result cache in ``cache_dir``.

    ``exec`` is the plugin runner (default ``RawExec()``), ``timeout`` the per-exec limit in
    seconds (``None``: none), ``preflight`` turns the VERSION check before ADD, STATUS and GC
    on or off, ``env`` the base environment handed to plugins (default: this process's, read
    per call).
    """

    def __init__(
        self,
        plugin_dirs: Sequence[str | os.PathLike[str]],
        cache_dir: str | os.PathLike[str] = "/var/lib/cni",
        exec: Exec | None = None,
        *,
        timeout: float | None = DEFAULT_TIMEOUT,
        preflight: bool = True,
        env: Mapping[str, str] | None = None,
    ) -> None:
        self.plugin_dirs = tuple(os.fspath(d) for d in plugin_dirs)
        self.cache = ResultCache(cache_dir)
        self.exec: Exec = exec if exec is not None else RawExec()
        self.timeout = timeout
        self.preflight = preflight
        self.env = None if env is None else dict(env)
        self._versions: dict[tuple[str, int, int, int], PluginInfo] = {}
        self._versions_lock = threading.Lock()

    @property
    def cache_dir(self) -> str:
        """Where results are cached (``<cache_dir>/results``)."""
        return os.fspath(self.cache.cache_dir)

    # ------------------------------------------------------------------ helpers

    def _env(self, command: str, rt: RuntimeConf | None) -> dict[str, str]:
        if rt is None:
            return plugin_env(command, path=self.plugin_dirs, base=self.env)
        return plugin_env(command, container_id=rt.container_id, netns=rt.netns,
                          ifname=rt.ifname, args=rt.args, path=self.plugin_dirs, base=self.env)

    def _find(self, plugin: PluginConfig, ctx: dict[str, Any]) -> str:
        try:
            return self.exec.find_in_path(plugin.type, self.plugin_dirs)
        except CNIError as e:
            raise e.with_context(plugin=plugin.type, **ctx) from None

    def _run(self, plugin: PluginConfig, path: str, stdin: bytes, env: Mapping[str, str],
             timeout: float | None, ctx: dict[str, Any]) -> bytes:
        try:
            return self.exec.exec_plugin(path, stdin, env, timeout)
        except CNIError as e:
            raise e.with_context(plugin=plugin.type, **ctx) from None

    def _timeout(self, timeout: float | None) -> float | None:
        return self.timeout if timeout is None else timeout

    @staticmethod
    def _ctx(conf: NetworkConfigList, command: str, rt: RuntimeConf | None) -> dict[str, Any]:
        ctx: dict[str, Any] = {"network": conf.name, "command": command}
        if rt is not None:
            ctx.update(container_id=rt.container_id, ifname=rt.ifname)
        return ctx

    # ------------------------------------------------------------------ versions

    def plugin_versions(self, plugin_type: str, *, timeout: float | None = None) -> PluginInfo:
        """The VERSION answer of plugin ``plugin_type`` (cached by binary path and mtime)."""
        path = self.exec.find_in_path(plugin_type, self.plugin_dirs)
        return self._plugin_info(path, plugin_type, timeout)

    def _plugin_info(self, path: str, plugin_type: str, timeout: float | None) -> PluginInfo:
        try:
            st = os.stat(path)
            key: tuple[str, int, int, int] | None = (path, st.st_mtime_ns, st.st_size, st.st_ino)
        except OSError:
            key = None
        if key is not None:
            with self._versions_lock:
                hit = self._versions.get(key)
            if hit is not None:
                return hit
        base = dict(os.environ if self.env is None else self.env)
        env = plugin_env("VERSION", netns="dummy", ifname="dummy", path="dummy", base=base)
        stdin = b'{"cniVersion":"' + CURRENT_VERSION.encode() + b'"}'
        try:
            out = self.exec.exec_plugin(path, stdin, env, self._timeout(timeout))
            info = self.exec.decode(out)
        except CNIError as e:
            if e.msg == "unknown CNI_COMMAND: VERSION":
                info = PluginInfo("0.1.0", ("0.1.0",))
            else:
                raise e.with_context(plugin=plugin_type, command="VERSION") from None
        if key is not None:
            with self._versions_lock:
                self._versions[key] = info
        return info

    def validate(self, conf: NetworkConfigList, *, timeout: float | None = None) -> list[str]:
        """Check every binary exists and supports the list version; return the capabilities.

        Raises ``CNIError`` listing every problem (``[e1 e2 ...]``, like libcni).
        """
        errors = []
        for plugin in conf.plugins:
            try:
                path = self.exec.find_in_path(plugin.type, self.plugin_dirs)
                info = self._plugin_info(path, plugin.type, timeout)
                if not info.supports(conf.cni_version):
                    errors.append(f'plugin {plugin.type} does not support config version '
                                  f'"{conf.cni_version or "0.1.0"}" (supports '
                                  f'{" ".join(info.supported_versions)})')
            except CNIError as e:
                errors.append(str(e))
        if errors:
            raise CNIError(ERR_INCOMPATIBLE_VERSION, f'network "{conf.name}" is not usable',
                           "[" + " ".join(errors) + "]", network=conf.name)
        return list(conf.capabilities)

    def _preflight(self, conf: NetworkConfigList, paths: Sequence[str],
                   timeout: float | None, ctx: dict[str, Any]) -> None:
        for plugin, path in zip(conf.plugins, paths, strict=True):
            info = self._plugin_info(path, plugin.type, timeout)
            if not info.supports(conf.cni_version):
                raise IncompatibleVersionError(
                    ERR_INCOMPATIBLE_VERSION, "incompatible CNI versions",
                    f'config is "{conf.cni_version}", plugin supports '
                    f'[{" ".join(info.supported_versions)}]; nothing was run',
                    plugin.type, **ctx,
                )

    # ------------------------------------------------------------------ verbs

    def add(self, conf: NetworkConfigList, rt: RuntimeConf, *,
            timeout: float | None = None) -> AnyResult:
        """Run ADD through the chain, cache and return the final result.

        On failure everything already added is rolled back (DEL in reverse) and the error is
        raised with ``rollback_errors``; no cache entry is left. ADD of an attachment that is
        already cached raises ``AttachmentExistsError`` without running anything.
        """
        ctx = self._ctx(conf, "ADD", rt)
        try:
            validate_network_name(conf.name)
            validate_container_id(rt.container_id)
            validate_ifname(rt.ifname)
        except CNIError as e:
            raise e.with_context(**ctx) from None
        if not conf.plugins:
            raise ConfigError(f'network "{conf.name}" has no plugins', conf.source)
        tmo = self._timeout(timeout)
        with self.cache.lock(conf.name, rt.container_id, rt.ifname):
            return self._add_locked(conf, rt, tmo, ctx)

    def _add_locked(self, conf: NetworkConfigList, rt: RuntimeConf, tmo: float | None,
                    ctx: dict[str, Any]) -> AnyResult:
        cached = self.cache.path(conf.name, rt.container_id, rt.ifname)
        if cached.exists():
            # a second ADD would fail in the plugins and its rollback would tear down the
            # working attachment: refuse before anything runs
            raise AttachmentExistsError(
                ERR_UNKNOWN, f"attachment is already added (cache entry {cached}); "
                "DEL it before adding it again", **ctx)
        paths = [self._find(p, ctx) for p in conf.plugins]
        if self.preflight:
            self._preflight(conf, paths, tmo, ctx)
        env = self._env("ADD", rt)
        prev: AnyResult | None = None
        for k, (plugin, path) in enumerate(zip(conf.plugins, paths, strict=True)):
            stdin = build_request(plugin, conf.name, conf.cni_version, prev,
                                  rt.capability_args)
            try:
                out = self._run(plugin, path, stdin, env, tmo, ctx)
                prev = parse_result(out, conf.cni_version)
            except CNIError as e:
                err = e.with_context(plugin=plugin.type, **ctx)
                rollback = self._rollback(conf, rt, paths, k, prev, tmo)
                raise err.with_context(rollback_errors=tuple(rollback)) from None
        assert prev is not None
        try:
            self.cache.write(conf.name, rt.container_id, rt.ifname, config=conf.raw,
                             netns=rt.netns, cni_args=rt.args,
                             capability_args=rt.capability_args, result=prev)
        except (OSError, CNIError) as e:
            rollback = self._rollback(conf, rt, paths, len(paths) - 1, prev, tmo)
            raise CNIError(ERR_UNKNOWN, f'failed to set network "{conf.name}" cached '
                                        f"result: {e}", rollback_errors=tuple(rollback),
                           **ctx) from None
        return prev

    def _rollback(self, conf: NetworkConfigList, rt: RuntimeConf, paths: Sequence[str],
                  k: int, prev: AnyResult | None, timeout: float | None) -> list[CNIError]:
        """DEL plugins k..0 (reverse), best effort; returns the errors."""
        ctx = self._ctx(conf, "DEL", rt)
        prev_conv: AnyResult | None = None
        if prev is not None and version_at_least(conf.cni_version, "0.4.0"):
            try:
                prev_conv = prev.to_version(conf.cni_version)
            except CNIError:
                prev_conv = None
        env = self._env("DEL", rt)
        errors = []
        for i in range(k, -1, -1):
            plugin = conf.plugins[i]
            stdin = build_request(plugin, conf.name, conf.cni_version, prev_conv,
                                  rt.capability_args)
            try:
                self._run(plugin, paths[i], stdin, env, timeout, ctx)
            except CNIError as e:
                log.warning("rollback of %s failed: %s", plugin.type, e)
                errors.append(e)
        return errors

    def check(self, conf: NetworkConfigList, rt: RuntimeConf, *,
              timeout: float | None = None) -> None:
        """Run CHECK through the chain with the cached result (0.4.0+, unless disableCheck)."""
        ctx = self._ctx(conf, "CHECK", rt)
        try:
            _require_verb(conf, "CHECK")
        except CNIError as e:
            raise e.with_context(**ctx) from None
        if conf.disable_check:
            return
        tmo = self._timeout(timeout)
        with self.cache.lock(conf.name, rt.container_id, rt.ifname):
            try:
                prev = self.cache.read_result(conf.name, rt.container_id, rt.ifname,
                                              conf.cni_version)
            except CNIError as e:
                raise CNIError(e.code, f'failed to get network "{conf.name}" cached result: '
                                       f"{e.msg}", **ctx) from None
            if prev is None:
                raise CNIError(ERR_UNKNOWN_CONTAINER, "no cached result for this attachment "
                               "(CHECK needs a successful ADD first)", **ctx)
            env = self._env("CHECK", rt)
            for plugin in conf.plugins:
                path = self._find(plugin, ctx)
                stdin = build_request(plugin, conf.name, conf.cni_version, prev,
                                      rt.capability_args)
                self._run(plugin, path, stdin, env, tmo, ctx)

    def delete(self, conf: NetworkConfigList, rt: RuntimeConf, *,
               timeout: float | None = None) -> None:
        """Run DEL through the chain in reverse, then remove the cache entry.

        The ADD's cached CNI args and capability args are used (cached keys win over ``rt``'s),
        so a DEL without them still removes e.g. portmap's rules. A corrupt or unconvertible
        cache entry is logged, removed and DEL goes on without ``prevResult``. The first plugin
        failure stops DEL and keeps the entry (retry later).
        """
        with self.cache.lock(conf.name, rt.container_id, rt.ifname):
            self._delete_locked(conf, rt, self._timeout(timeout))

    def _delete_locked(self, conf: NetworkConfigList, rt: RuntimeConf,
                       tmo: float | None) -> None:
        ctx = self._ctx(conf, "DEL", rt)
        rt, prev = self._del_inputs(conf, rt)
        env = self._env("DEL", rt)
        for plugin in reversed(conf.plugins):
            path = self._find(plugin, ctx)
            stdin = build_request(plugin, conf.name, conf.cni_version, prev,
                                  rt.capability_args)
            self._run(plugin, path, stdin, env, tmo, ctx)
        self.cache.remove(conf.name, rt.container_id, rt.ifname)

    def _del_inputs(self, conf: NetworkConfigList,
                    rt: RuntimeConf) -> tuple[RuntimeConf, AnyResult | None]:
        """The runtime config DEL runs with (cached args merged in) and its ``prevResult``."""
        try:
            entry = self.cache.read(conf.name, rt.container_id, rt.ifname)
        except CacheError as e:
            self._drop_unusable(conf, rt, e)
            return rt, None
        if entry is None:
            return rt, None
        rt = with_cached_runtime(rt, entry)
        if not version_at_least(conf.cni_version, "0.4.0"):
            return rt, None  # DEL sends no prevResult below 0.4.0
        try:
            return rt, converted_result(entry, conf.cni_version)
        except CacheError as e:
            self._drop_unusable(conf, rt, e)
            return rt, None

    def _drop_unusable(self, conf: NetworkConfigList, rt: RuntimeConf, e: CacheError) -> None:
        log.warning('network "%s" container "%s" ifname "%s": ignoring unusable cache entry '
                    "%s: %s", conf.name, rt.container_id, rt.ifname, e.path, e.msg)
        self.cache.remove(conf.name, rt.container_id, rt.ifname)

    def _verb_preflight(self, conf: NetworkConfigList, command: str,
                        timeout: float | None) -> list[str]:
        """STATUS/GC: the list's version must have the verb and every plugin must support it.

        Returns the plugin paths. Plugins older than CNI 1.1 do not know STATUS/GC and answer
        e.g. ``missing containerID``; they are refused here before anything runs.
        """
        ctx = self._ctx(conf, command, None)
        _require_verb(conf, command)
        paths = [self._find(p, ctx) for p in conf.plugins]
        if self.preflight:
            self._preflight(conf, paths, self._timeout(timeout), ctx)
        return paths

    def status(self, conf: NetworkConfigList, *, timeout: float | None = None) -> None:
        """Run STATUS on every plugin of a 1.1.0+ list (``UnsupportedCommandError`` below).

        The first error is raised with its code (50: not available, 51: limited).
        """
        paths = self._verb_preflight(conf, "STATUS", timeout)
        ctx = self._ctx(conf, "STATUS", None)
        env = self._env("STATUS", None)
        for plugin, path in zip(conf.plugins, paths, strict=True):
            stdin = build_status_request(plugin, conf.name, conf.cni_version)
            self._run(plugin, path, stdin, env, self._timeout(timeout), ctx)

    def gc(self, conf: NetworkConfigList,
           valid_attachments: Iterable[tuple[str, str]] | None,
           *, timeout: float | None = None) -> None:
        """Garbage-collect a 1.1.0+ list: DEL cached attachments not in ``valid_attachments``
        (``(container_id, ifname)`` pairs), then send GC to every plugin.

        Older lists raise ``UnsupportedCommandError`` (nothing runs); ``disableGC`` makes this a
        no-op; ``None`` means "nothing is valid". Errors are collected and raised together as
        ``GCError``.
        """
        if conf.disable_gc:
            _require_verb(conf, "GC")
            return
        self._verb_preflight(conf, "GC", timeout)
        valid = None if valid_attachments is None else [
            (str(c), str(i)) for c, i in valid_attachments]
        with self.cache.network_lock(conf.name):  # the spec: GC is exclusive with ADD/DEL
            self._gc_locked(conf, valid, timeout)

    def _gc_locked(self, conf: NetworkConfigList, valid: list[tuple[str, str]] | None,
                   timeout: float | None) -> None:
        keep = set(valid or ())
        errors: list[BaseException] = []
        for att in self.cache.attachments():
            if att.network != conf.name or (att.container_id, att.ifname) in keep:
                continue
            rt = RuntimeConf(att.container_id, att.netns, att.ifname, att.cni_args,
                             att.capability_args)
            try:
                self._delete_locked(conf, rt, self._timeout(timeout))
            except CNIError as e:
                errors.append(e)
        ctx = self._ctx(conf, "GC", None)
        env = self._env("GC", None)
        for plugin in conf.plugins:
            try:
                path = self._find(plugin, ctx)
                stdin = build_gc_request(plugin, conf.name, conf.cni_version, valid)
                self._run(plugin, path, stdin, env, self._timeout(timeout), ctx)
            except CNIError as e:
                errors.append(e)
        if errors:
            raise GCError(conf.name, errors)

    # ------------------------------------------------------------------ cache readers

    def cached_result(self, conf: NetworkConfigList, rt: RuntimeConf) -> AnyResult | None:
        """The cached ADD result converted to the list's version, or ``None``."""
        return self.cache.read_result(conf.name, rt.container_id, rt.ifname, conf.cni_version)

    def cached_config(self, conf: NetworkConfigList,
                      rt: RuntimeConf) -> tuple[bytes, RuntimeConf] | None:
        """The cached list bytes and ``rt`` with the cached CNI args / capability args."""
        entry = self.cache.read(conf.name, rt.container_id, rt.ifname)
        if entry is None:
            return None
        if not entry.config:
            raise CacheError(f'read cached network "{conf.name}" config has wrong kind: '
                             "legacy result-only entry", entry.path)
        new_rt = attrs.evolve(rt, args=entry.cni_args or rt.args,
                              capability_args=entry.capability_args)
        return entry.config, new_rt

    def cached_attachments(self, container_id: str = "") -> list[CachedAttachment]:
        """Every cache entry (of one container if given), sorted by file name."""
        return self.cache.attachments(container_id)
