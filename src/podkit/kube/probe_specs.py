"""Probes and lifecycle hooks of a container manifest as ``ProbeSpec`` and exec commands."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs

from podkit.errors import InvalidArgumentError, quote
from podkit.kube.plan import ProbeSpec

__all__ = ["exec_hook", "probe_spec", "resolve_port"]

_TIMINGS = ("initialDelaySeconds", "periodSeconds", "timeoutSeconds", "successThreshold",
            "failureThreshold")
_PROBE_DEFAULTS = {"initialDelaySeconds": 0, "periodSeconds": 10, "timeoutSeconds": 1,
                   "successThreshold": 1, "failureThreshold": 3}


def resolve_port(port: object, container: Mapping[str, Any], where: str) -> int:
    """A probe port: a number, or the name of one of the container's ports (kubelet's
    findPortByName)."""
    if isinstance(port, int) and not isinstance(port, bool):
        number = port
    elif isinstance(port, str) and port.isdigit():
        number = int(port)
    else:
        named = {p.get("name"): p.get("containerPort") for p in container.get("ports") or ()}
        if port not in named:
            raise InvalidArgumentError(
                f"{where}: port {quote(port)} is neither a number nor a named container port")
        number = int(named[port])
    if not 1 <= number <= 65535:
        raise InvalidArgumentError(f"{where}: port {number} is not in 1-65535")
    return number


def _timings(probe: Mapping[str, Any], where: str) -> dict[str, int]:
    out = {}
    for key in _TIMINGS:
        raw = probe.get(key, _PROBE_DEFAULTS[key])
        floor = 0 if key == "initialDelaySeconds" else 1
        if isinstance(raw, bool) or not isinstance(raw, int) or raw < floor:
            raise InvalidArgumentError(f"{where}.{key}: {quote(raw)} must be an integer >= {floor}")
        out[key] = raw
    return out


def probe_spec(probe: Mapping[str, Any] | None, container: Mapping[str, Any], where: str,
               ) -> ProbeSpec | None:
    """One readiness/liveness/startup probe; exactly one of exec, httpGet, tcpSocket."""
    if not probe:
        return None
    kinds = [k for k in ("exec", "httpGet", "tcpSocket", "grpc") if k in probe]
    if len(kinds) != 1 or kinds[0] == "grpc":
        raise InvalidArgumentError(f"{where}: needs exactly one of exec, httpGet, tcpSocket "
                                   f"(got {', '.join(kinds) or 'none'})")
    t = _timings(probe, where)
    kind = kinds[0]
    timed = ProbeSpec(kind=kind, initial_delay_seconds=t["initialDelaySeconds"],
                      period_seconds=t["periodSeconds"], timeout_seconds=t["timeoutSeconds"],
                      success_threshold=t["successThreshold"],
                      failure_threshold=t["failureThreshold"])
    body = probe[kind] or {}
    if kind == "exec":
        command = tuple(str(c) for c in body.get("command") or ())
        if not command:
            raise InvalidArgumentError(f"{where}.exec.command: must not be empty")
        return attrs.evolve(timed, command=command)
    port = resolve_port(body.get("port"), container, f"{where}.{kind}.port")
    if kind == "tcpSocket":
        return attrs.evolve(timed, host=str(body.get("host", "")), port=port)
    scheme = str(body.get("scheme", "HTTP"))
    if scheme not in ("HTTP", "HTTPS"):
        raise InvalidArgumentError(f"{where}.httpGet.scheme: {quote(scheme)} is not HTTP or HTTPS")
    headers = tuple((str(h.get("name", "")), str(h.get("value", "")))
                    for h in body.get("httpHeaders") or ())
    return attrs.evolve(timed, host=str(body.get("host", "")), port=port,
                        path=str(body.get("path") or "/"), scheme=scheme, http_headers=headers)


def exec_hook(handler: Mapping[str, Any] | None, where: str) -> tuple[str, ...]:
    """A postStart/preStop handler's exec command; other handler kinds are refused."""
    if not handler:
        return ()
    if set(handler) != {"exec"}:
        raise InvalidArgumentError(f"{where}: only exec handlers are supported "
                                   f"(got {', '.join(sorted(handler))})")
    command = tuple(str(c) for c in (handler["exec"] or {}).get("command") or ())
    if not command:
        raise InvalidArgumentError(f"{where}.exec.command: must not be empty")
    return command
