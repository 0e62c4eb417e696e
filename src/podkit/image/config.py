"""The image configuration (``config`` of an OCI/Docker image) and the spec options it implies.

``spec_opts(config, command, args, rootfs)`` gives ``oci`` spec options with Docker/CRI
semantics: a CRI ``command`` replaces the image ``Entrypoint`` (and drops its ``Cmd``),
``args`` alone replace ``Cmd``; no command at all is an error; image ``Env`` is merged by key
over a default ``PATH``; ``WorkingDir`` sets the cwd; ``User`` is resolved against the rootfs
``/etc/passwd`` and ``/etc/group`` (with the user's supplementary groups).
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from typing import Any

import attrs

from podkit import oci
from podkit.image.errors import ImageError

__all__ = ["ImageConfig", "parse_config", "process_args", "spec_opts"]


def _strs(value: Any, what: str, where: str) -> tuple[str, ...] | None:
    if value is None:
        return None
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ImageError(f"{where}: {what} must be a list of strings, got {value!r:.80}")
    return tuple(value)


def _keys(value: Any, what: str, where: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if not isinstance(value, dict):
        raise ImageError(f"{where}: {what} must be an object, got {value!r:.80}")
    return tuple(sorted(str(k) for k in value))


@attrs.frozen(slots=True)
class ImageConfig:
    """The runtime part of an image config (``config`` object of the OCI image config).

    ``entrypoint``/``cmd`` are ``None`` when absent; ``exposed_ports`` (``"80/tcp"``) and
    ``volumes`` are the keys of the corresponding JSON objects.
    """

    env: tuple[str, ...] = ()
    entrypoint: tuple[str, ...] | None = None
    cmd: tuple[str, ...] | None = None
    working_dir: str | None = None
    user: str | None = None
    exposed_ports: tuple[str, ...] = ()
    volumes: tuple[str, ...] = ()
    labels: dict[str, str] = attrs.Factory(dict)
    stop_signal: str | None = None
    os: str | None = None
    architecture: str | None = None


def parse_config(raw: bytes, where: str) -> ImageConfig:
    """Parse an image config blob; ``where`` (digest and reference) names it in errors."""
    try:
        data = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as e:
        raise ImageError(f"{where}: image config is not valid JSON: {e}") from None
    if not isinstance(data, dict):
        raise ImageError(f"{where}: image config must be a JSON object")
    cfg = data.get("config") or {}
    if not isinstance(cfg, dict):
        raise ImageError(f"{where}: config must be an object")
    labels = cfg.get("Labels") or {}
    if not isinstance(labels, dict):
        raise ImageError(f"{where}: config.Labels must be an object")

    def text(key: str) -> str | None:
        value = cfg.get(key)
        if value is None or value == "":
            return None
        if not isinstance(value, str):
            raise ImageError(f"{where}: config.{key} must be a string, got {value!r:.80}")
        return value

    return ImageConfig(
        env=_strs(cfg.get("Env"), "config.Env", where) or (),
        entrypoint=_strs(cfg.get("Entrypoint"), "config.Entrypoint", where),
        cmd=_strs(cfg.get("Cmd"), "config.Cmd", where),
        working_dir=text("WorkingDir"),
        user=text("User"),
        exposed_ports=_keys(cfg.get("ExposedPorts"), "config.ExposedPorts", where),
        volumes=_keys(cfg.get("Volumes"), "config.Volumes", where),
        labels={str(k): str(v) for k, v in labels.items()},
        stop_signal=text("StopSignal"),
        os=data.get("os") if isinstance(data.get("os"), str) else None,
        architecture=data.get("architecture")
        if isinstance(data.get("architecture"), str) else None,
    )


def process_args(config: ImageConfig, command: Sequence[str] | None = None,
                 args: Sequence[str] | None = None) -> list[str]:
    """The container's argv with Docker/CRI semantics (containerd's ``WithProcessArgs``).

    ``command`` replaces the entrypoint and drops the image ``Cmd``; ``args`` alone replace
    ``Cmd`` and keep the entrypoint (an empty ``command`` counts as none, as in CRI).
    Raises ``ImageError("no command specified")`` if the result is empty.
    """
    cmd_: list[str] = list(command or [])
    args_: list[str] = list(args or [])
    if not cmd_:
        if not args_:
            args_ = list(config.cmd or [])
        if config.entrypoint != ("",):
            cmd_ = list(config.entrypoint or [])
    argv = cmd_ + args_
    if not argv:
        raise ImageError("no command specified: the image has no Entrypoint or Cmd and none "
                         "was given")
    return argv


def spec_opts(config: ImageConfig, command: Sequence[str] | None = None,
              args: Sequence[str] | None = None,
              rootfs: str | os.PathLike[str] | None = None) -> list[oci.SpecOpt]:
    """``oci`` spec options applying an image config: PATH + Env, args, cwd, user and groups.

    ``rootfs`` is where user and group names are looked up (default: the spec's absolute
    ``root.path`` when the options are applied); a numeric user without ``rootfs`` gets no
    supplementary groups.
    """
    opts: list[oci.SpecOpt] = [oci.with_default_path_env()]
    if config.env:
        opts.append(oci.with_env(list(config.env)))
    opts.append(oci.with_process_args(*process_args(config, command, args)))
    if config.working_dir:
        opts.append(oci.with_process_cwd(config.working_dir))
    if config.user:
        opts.append(oci.with_user(config.user, rootfs=rootfs))
        name = config.user.split(":")[0]
        if rootfs is not None or not name.isdigit():
            opts.append(oci.with_additional_gids(name, rootfs=rootfs))
    return opts
