"""A scripted fake ``Exec`` for testing code that uses ``podkit.cni`` without real plugins.

``FakeExec`` pretends every plugin in ``plugins`` is installed in the first plugin dir; it
records each call (plugin, command, env, decoded stdin) and answers from a script::

    fake = FakeExec()
    fake.on("bridge", "ADD", result={"cniVersion": "1.0.0", "ips": [{"address": "10.0.0.2/24"}]})
    fake.on("portmap", "ADD", error=CNIError(999, "boom"))
    client = CNI(["/opt/cni/bin"], cache_dir=tmp, exec=fake)

Without a script entry, ADD echoes ``prevResult`` (or an empty result of the config's
version), CHECK/DEL/STATUS/GC succeed, and VERSION reports every spec version.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import attrs

from podkit.cni.invoke import (
    InvalidPluginNameError,
    PluginInfo,
    PluginNotFoundError,
    PluginTimeoutError,
    decode_version_info,
)
from podkit.cni.types import ALL_VERSIONS, ERR_INVALID_NETWORK_CONFIG, ERR_UNKNOWN, CNIError

__all__ = ["FakeCall", "FakeExec", "Handler", "timeout_error"]


@attrs.frozen
class FakeCall:
    """One recorded exec: plugin type, verb, full env, raw stdin and its decoded form."""

    plugin: str
    command: str
    env: Mapping[str, str]
    stdin: bytes
    config: Mapping[str, Any]


#: A handler gets the call and returns stdout bytes, a JSON-able dict, or raises ``CNIError``.
Handler = Callable[[FakeCall], "bytes | Mapping[str, Any] | None"]


class FakeExec:
    """An in-memory ``Exec``: scripted answers per (plugin, command), every call recorded."""

    def __init__(self, plugins: Sequence[str] | None = None,
                 versions: Sequence[str] = ALL_VERSIONS) -> None:
        self.plugins = None if plugins is None else set(plugins)
        self.versions = tuple(versions)
        self.calls: list[FakeCall] = []
        self._script: dict[tuple[str, str], list[Handler]] = {}
        self._sticky: dict[tuple[str, str], Handler] = {}

    def on(self, plugin: str, command: str, *, result: Mapping[str, Any] | None = None,
           error: CNIError | None = None, stdout: bytes | None = None,
           handler: Handler | None = None, times: int | None = None) -> None:
        """Script ``plugin``'s answer to ``command``; ``times=None`` keeps it for every call,
        ``times=n`` answers only the next n calls (queued in order)."""
        if handler is None:
            def handler(call: FakeCall) -> bytes | Mapping[str, Any] | None:
                if error is not None:
                    raise error
                if stdout is not None:
                    return stdout
                return result
        key = (plugin, command)
        if times is None:
            self._sticky[key] = handler
        else:
            self._script.setdefault(key, []).extend([handler] * times)

    def find_in_path(self, plugin: str, paths: Sequence[str]) -> str:
        """A path in the first plugin dir, if the plugin is "installed"."""
        if not plugin:
            raise InvalidPluginNameError(ERR_INVALID_NETWORK_CONFIG, "no plugin name provided")
        if "/" in plugin:
            raise InvalidPluginNameError(ERR_INVALID_NETWORK_CONFIG,
                                         f"invalid plugin name: {plugin}", plugin=plugin)
        if not paths:
            raise PluginNotFoundError(ERR_UNKNOWN, "no paths provided", plugin=plugin)
        if self.plugins is not None and plugin not in self.plugins:
            raise PluginNotFoundError(
                ERR_UNKNOWN, f'failed to find plugin "{plugin}" in path [{" ".join(paths)}]',
                plugin=plugin)
        return os.path.join(paths[0], plugin)

    def decode(self, version_output: bytes) -> PluginInfo:
        """Same decoder as ``RawExec``."""
        return decode_version_info(version_output)

    def calls_for(self, command: str) -> list[FakeCall]:
        """Recorded calls of one verb, in order."""
        return [c for c in self.calls if c.command == command]

    def exec_plugin(self, plugin_path: str, stdin_data: bytes, environ: Mapping[str, str],
                    timeout: float | None) -> bytes:
        """Record the call and answer from the script."""
        plugin = os.path.basename(plugin_path)
        command = environ.get("CNI_COMMAND", "")
        try:
            config = json.loads(stdin_data)
        except ValueError:
            config = {}
        call = FakeCall(plugin, command, dict(environ), stdin_data, config)
        self.calls.append(call)
        key = (plugin, command)
        queue = self._script.get(key)
        handler = queue.pop(0) if queue else self._sticky.get(key)
        out = self._default(call) if handler is None else handler(call)
        if out is None:
            return b""
        if isinstance(out, bytes):
            return out
        return json.dumps(out).encode()

    def _default(self, call: FakeCall) -> Mapping[str, Any] | None:
        if call.command == "VERSION":
            return {"cniVersion": self.versions[-1], "supportedVersions": list(self.versions)}
        if call.command == "ADD":
            prev = call.config.get("prevResult")
            if isinstance(prev, dict):
                return prev
            return {"cniVersion": call.config.get("cniVersion", "1.0.0")}
        return None


def timeout_error(seconds: float) -> PluginTimeoutError:
    """The error ``RawExec`` raises on a timeout, for scripting ``FakeExec``."""
    return PluginTimeoutError(ERR_UNKNOWN, f"timed out after {seconds:g}s; process group killed")
