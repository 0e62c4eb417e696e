"""Running CNI plugin binaries: the ``Exec`` seam, the real ``RawExec`` and the wire protocol.

The request side is pure functions that build exactly what libcni sends: the environment
(caller's env + the six ``CNI_*`` variables) and the stdin document (plugin object with ``name``
and ``cniVersion`` injected, ``prevResult`` chained, ``runtimeConfig`` from the declared
capabilities only, compact JSON with sorted keys). ``RawExec`` runs a binary through
``podkit._proc`` in its own process group with a deadline: on timeout the whole group is killed
and reading stops, so a grandchild holding the pipes can never hang the caller.
"""

from __future__ import annotations

import errno
import logging
import os
import signal
import time
from collections.abc import Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

import attrs

from podkit import _proc
from podkit.cni._wire import go_dumps, loads_object
from podkit.cni.config import PluginConfig
from podkit.cni.types import (
    ERR_INVALID_NETWORK_CONFIG,
    ERR_UNKNOWN,
    AnyResult,
    CNIError,
)

__all__ = [
    "CNI_ENV_VARS",
    "Exec",
    "InvalidPluginNameError",
    "PluginInfo",
    "PluginNotFoundError",
    "PluginTimeoutError",
    "RawExec",
    "build_gc_request",
    "build_request",
    "build_status_request",
    "decode_version_info",
    "find_in_path",
    "parse_error_output",
    "plugin_env",
]

log = logging.getLogger("podkit.cni")

#: The six variables set for every plugin exec (always all six, empty when unset).
CNI_ENV_VARS = ("CNI_COMMAND", "CNI_CONTAINERID", "CNI_NETNS", "CNI_ARGS", "CNI_IFNAME",
                "CNI_PATH")


class PluginNotFoundError(CNIError):
    """No plugin binary of that type on the plugin path."""


class InvalidPluginNameError(CNIError):
    """A plugin type that is empty or contains a path separator."""


class PluginTimeoutError(CNIError):
    """The plugin did not finish within its deadline; its process group was killed."""


@attrs.frozen
class PluginInfo:
    """A plugin's VERSION answer: its own ``cniVersion`` and the versions it supports."""

    cni_version: str
    supported_versions: tuple[str, ...]

    def supports(self, version: str) -> bool:
        """True if ``version`` (``""`` means 0.1.0) is literally in the supported list."""
        return (version or "0.1.0") in self.supported_versions


def decode_version_info(output: bytes) -> PluginInfo:
    """Decode a VERSION reply like libcni's ``PluginDecoder``."""
    try:
        doc = loads_object(output)
    except ValueError as e:
        raise CNIError(ERR_UNKNOWN, f"decoding version info: {e}") from None
    version = doc.get("cniVersion")
    if not isinstance(version, str) or not version:
        raise CNIError(ERR_UNKNOWN, "decoding version info: missing field cniVersion")
    supported = doc.get("supportedVersions")
    if supported is None:
        if version == "0.2.0":
            return PluginInfo(version, ("0.1.0", "0.2.0"))
        raise CNIError(ERR_UNKNOWN, "decoding version info: missing field supportedVersions")
    if not isinstance(supported, list) or not all(isinstance(v, str) for v in supported):
        raise CNIError(ERR_UNKNOWN, f"decoding version info: invalid supportedVersions "
                                    f"{supported!r}")
    return PluginInfo(version, tuple(supported))


def find_in_path(plugin: str, paths: Sequence[str]) -> str:
    """The first ``dir/plugin`` that is a regular file, in ``paths`` order (libcni rules)."""
    if not plugin:
        raise InvalidPluginNameError(ERR_INVALID_NETWORK_CONFIG, "no plugin name provided")
    if os.sep in plugin or "\0" in plugin:
        raise InvalidPluginNameError(ERR_INVALID_NETWORK_CONFIG,
                                     f"invalid plugin name: {plugin}", plugin=plugin)
    if not paths:
        raise PluginNotFoundError(ERR_UNKNOWN, "no paths provided", plugin=plugin)
    for d in paths:
        candidate = os.path.join(d, plugin)
        if os.path.isfile(candidate):
            return candidate
    raise PluginNotFoundError(
        ERR_UNKNOWN, f'failed to find plugin "{plugin}" in path [{" ".join(paths)}]',
        plugin=plugin,
    )


# ------------------------------------------------------------------------- request building


def plugin_env(
    command: str,
    *,
    container_id: str = "",
    netns: str = "",
    ifname: str = "",
    args: Sequence[tuple[str, str]] = (),
    path: Sequence[str] | str = (),
    base: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """The environment of one exec: ``base`` (default: this process's) + the six CNI vars."""
    env = dict(os.environ if base is None else base)
    env.update({
        "CNI_COMMAND": command,
        "CNI_CONTAINERID": container_id,
        "CNI_NETNS": netns,
        "CNI_ARGS": ";".join(f"{k}={v}" for k, v in args),
        "CNI_IFNAME": ifname,
        "CNI_PATH": path if isinstance(path, str) else os.pathsep.join(path),
    })
    return env


def _result_for_prev(result: AnyResult) -> dict[str, Any]:
    return result.to_dict()


def build_request(
    plugin: PluginConfig,
    network: str,
    cni_version: str,
    prev_result: AnyResult | None = None,
    capability_args: Mapping[str, Any] | None = None,
) -> bytes:
    """The stdin of an ADD/CHECK/DEL exec, byte-identical to libcni's.

    ``name``/``cniVersion`` overwrite the plugin's own; ``prevResult`` is the result re-serialised
    (1.x drops an empty ``dns``); ``runtimeConfig`` holds only the capabilities the plugin
    declares ``true`` that the runtime provides, and is set only when non-empty.
    """
    obj = plugin.to_dict()
    obj["name"] = network
    obj["cniVersion"] = cni_version
    if prev_result is not None:
        obj["prevResult"] = _result_for_prev(prev_result)
    if capability_args:
        rc = {cap: capability_args[cap] for cap, on in plugin.capabilities.items()
              if on is True and cap in capability_args}
        if rc:
            obj["runtimeConfig"] = rc
    return go_dumps(obj)


def build_status_request(plugin: PluginConfig, network: str, cni_version: str) -> bytes:
    """The stdin of a STATUS exec: plugin object + ``name`` + ``cniVersion``."""
    obj = plugin.to_dict()
    obj["name"] = network
    obj["cniVersion"] = cni_version
    return go_dumps(obj)


def build_gc_request(
    plugin: PluginConfig,
    network: str,
    cni_version: str,
    valid_attachments: Sequence[tuple[str, str]] | None,
) -> bytes:
    """The stdin of a GC exec: both attachment keys (spec tag and main spelling), like libcni."""
    obj = plugin.to_dict()
    obj["name"] = network
    obj["cniVersion"] = cni_version
    value = None if valid_attachments is None else [
        {"containerID": cid, "ifname": ifn} for cid, ifn in valid_attachments
    ]
    obj["cni.dev/valid-attachments"] = value
    obj["cni.dev/attachments"] = value
    return go_dumps(obj)


def parse_error_output(stdout: bytes, stderr: bytes, status: str) -> CNIError:
    """Map a failed exec to ``CNIError`` with libcni's fallbacks for non-JSON output.

    ``status`` is the exit description (``exit status 1``, ``signal: killed``).
    """
    out = stdout.decode("utf-8", "replace")
    err = stderr.decode("utf-8", "replace")
    if out.strip():
        try:
            doc = loads_object(out)
            code = doc.get("code", 0)
            msg = doc.get("msg", "")
            details = doc.get("details", "")
            if isinstance(code, bool) or not isinstance(code, int) or code < 0:
                raise ValueError(f"invalid error code {code!r}")
            if not isinstance(msg, str) or not isinstance(details, str):
                raise ValueError("msg and details must be strings")
            return CNIError(code, msg, details, stderr=err)
        except ValueError as e:
            return CNIError(ERR_UNKNOWN, f'netplugin failed but error parsing its diagnostic '
                                         f'message "{out.strip()}": {e}', stderr=err)
    if err.strip():
        return CNIError(ERR_UNKNOWN, f'netplugin failed: "{err.strip()}": {status}', stderr=err)
    return CNIError(ERR_UNKNOWN, f"netplugin failed with no error message: {status}")


# ------------------------------------------------------------------------------- Exec seam


@runtime_checkable
class Exec(Protocol):
    """How plugins are run (libcni's ``invoke.Exec``); replace it to test or to sandbox."""

    def exec_plugin(self, plugin_path: str, stdin_data: bytes, environ: Mapping[str, str],
                    timeout: float | None) -> bytes:
        """Run ``plugin_path`` with ``environ`` and ``stdin_data``; stdout on success.

        Raises ``CNIError`` (parsed from the plugin's output) on failure and
        ``PluginTimeoutError`` when ``timeout`` seconds pass.
        """
        ...

    def find_in_path(self, plugin: str, paths: Sequence[str]) -> str:
        """The path of plugin type ``plugin`` on ``paths``."""
        ...

    def decode(self, version_output: bytes) -> PluginInfo:
        """Decode a VERSION reply."""
        ...


def _status(returncode: int) -> str:
    if returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = f"signal {-returncode}"
        pretty = {"SIGKILL": "killed", "SIGTERM": "terminated", "SIGSEGV": "segmentation fault",
                  "SIGABRT": "aborted"}.get(name, name)
        return f"signal: {pretty}"
    return f"exit status {returncode}"


class RawExec:
    """Runs plugin binaries for real: own process group, explicit env, deadline, retries.

    ``grace`` is how long to keep reading after the plugin exited while a leftover descendant
    still holds its stdout/stderr (then podkit stops reading, never waiting on such a pipe).
    ``max_output`` caps the bytes kept of stdout and of stderr each (``None``: no cap).
    Plugin stderr of successful runs is logged on the ``podkit.cni`` logger.
    """

    def __init__(self, *, grace: float = 0.2, busy_retries: int = 5,
                 busy_delay: float = 1.0, max_output: int | None = None) -> None:
        self.grace = grace
        self.busy_retries = busy_retries
        self.busy_delay = busy_delay
        self.max_output = max_output

    def find_in_path(self, plugin: str, paths: Sequence[str]) -> str:
        """See ``find_in_path``."""
        return find_in_path(plugin, paths)

    def decode(self, version_output: bytes) -> PluginInfo:
        """See ``decode_version_info``."""
        return decode_version_info(version_output)

    def exec_plugin(self, plugin_path: str, stdin_data: bytes, environ: Mapping[str, str],
                    timeout: float | None) -> bytes:
        """Run one plugin; see ``Exec.exec_plugin``."""
        deadline = None if timeout is None else time.monotonic() + timeout
        try:
            res = self._run(plugin_path, stdin_data, environ, deadline)
        except _proc.ProcTimeout as e:
            raise PluginTimeoutError(
                ERR_UNKNOWN,
                f"timed out after {timeout:g}s; process group {e.pid} killed",
                stderr=e.stderr.data.decode("utf-8", "replace"),
            ) from None
        out, err = res.stdout.data, res.stderr.data
        if res.returncode != 0:
            raise parse_error_output(out, err, _status(res.returncode))
        if err.strip():
            log.info("%s stderr: %s", plugin_path, err.decode("utf-8", "replace").rstrip())
        return out

    def _run(self, plugin_path: str, stdin_data: bytes, environ: Mapping[str, str],
             deadline: float | None) -> _proc.Result:
        """``_proc.run`` the plugin in its own process group, retrying a busy binary."""
        attempt = 0
        while True:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            try:
                return _proc.run([plugin_path], env=dict(environ), stdin=stdin_data,
                                 timeout=left, cap=self.max_output, grace=self.grace,
                                 session=False)
            except _proc.ProcTimeout:
                raise
            except OSError as e:
                busy = e.errno == errno.ETXTBSY
                late = deadline is not None and time.monotonic() + self.busy_delay > deadline
                if busy and attempt < self.busy_retries and not late:
                    attempt += 1
                    time.sleep(self.busy_delay)
                    continue
                raise CNIError(ERR_UNKNOWN, f"failed to execute {plugin_path}: "
                                            f"{e.strerror or e}") from None
