"""``podkit pod run|ls|inspect|stop|rm`` (and ``pod_io``'s commands): pods from a YAML file,
run by a SandboxManager.

The YAML mirrors the CRI shapes field for field (snake_case), enums by name::

    pause: {rootfs: /srv/busybox}            # or --pause-rootfs; or {image: REF}; or none:
                                             # the built-in pause (catatonit)
    sandbox:
      metadata: {name: web, namespace: demo}
      hostname: web
      log_directory: /var/log/pods/web
      port_mappings: [{container_port: 80, host_port: 8080}]
    containers:
      - metadata: {name: httpd}
        image: /srv/busybox                   # a rootfs directory
        command: [httpd, -f, -p, "80"]
        log_path: httpd.log
      - metadata: {name: app}
        image: localhost/app:1                # or an image in the --image-root store

Image references, image IDs and digests are resolved in the image store under
``--image-root`` (default ``/var/lib/podkit``, the store ``podkit image`` fills); each such
container gets its own rootfs there, removed with the container.

Pods run under conmon and outlive the command; every command opens the same state dir and
``recover()``s it first, so a half-done run from a killed command is undone.
"""

from __future__ import annotations

import argparse
import enum
from pathlib import Path
from typing import Any

import attrs
import cattrs
import yaml

from podkit.container import (
    ContainerConfig,
    MountPropagation,
    SupplementalGroupsPolicy,
)
from podkit.errors import InvalidArgumentError
from podkit.node import NodeConfig, PauseSettings
from podkit.sandbox import (
    ContainerFilter,
    NamespaceMode,
    ProfileType,
    Protocol,
    SandboxConfig,
)

from . import pod_io
from .dirs import node_config
from .output import add_output_options, emit
from .podctx import (
    DEFAULT_IMAGE_ROOT,
    DEFAULT_ROOT,
    DEFAULT_STATE,
    add_common,
    add_run_options,
    devices,
    find_container,
    find_pod,
    manager,
    pod_network,
    with_devices,
)
from .podview import CONTAINER_COLUMNS, POD_COLUMNS, container_record, pod_record

__all__ = ["DEFAULT_IMAGE_ROOT", "DEFAULT_ROOT", "DEFAULT_STATE", "PodFile", "load_pod_file",
           "register"]


@attrs.frozen(kw_only=True)
class PodFile:
    """A pod file: the sandbox config, its containers, and optionally the pause rootfs
    (a directory) or pause image (a reference in the image store)."""

    sandbox: SandboxConfig
    containers: tuple[ContainerConfig, ...] = ()
    pause_rootfs: str = ""
    pause_image: str = ""


def _converter() -> cattrs.Converter:
    conv = cattrs.Converter(forbid_extra_keys=True)

    def enum_hook(value: Any, cls: type[enum.Enum]) -> enum.Enum:
        if isinstance(value, str):  # RUNTIME_DEFAULT, runtime_default or the CRI's RuntimeDefault
            by_name = {m.name.replace("_", "").lower(): m for m in cls}
            try:
                return by_name[value.replace("_", "").lower()]
            except KeyError:
                raise ValueError(
                    f"{value!r} is not one of {', '.join(m.name for m in cls)}") from None
        return cls(value)

    # per class: the int hook would win for IntEnums registered through their Enum base
    for cls in (Protocol, MountPropagation, NamespaceMode, SupplementalGroupsPolicy, ProfileType):
        conv.register_structure_hook(cls, enum_hook)
    return conv


def load_pod_file(path: str | Path) -> PodFile:
    """Parse a pod YAML file; errors name the file and the field (``$.sandbox.hostname``)."""
    p = Path(path)
    try:
        data = yaml.safe_load(p.read_text())
    except OSError as exc:
        raise InvalidArgumentError(f"{p}: {exc.strerror}") from None
    except yaml.YAMLError as exc:
        raise InvalidArgumentError(f"{p}: not valid YAML: {exc}") from None
    if not isinstance(data, dict) or "sandbox" not in data:
        raise InvalidArgumentError(f"{p}: expected a mapping with a 'sandbox' key")
    unknown = set(data) - {"sandbox", "containers", "pause"}
    if unknown:
        raise InvalidArgumentError(f"{p}: unknown top-level keys {sorted(unknown)}")
    conv = _converter()
    try:
        where = "$.sandbox"
        sandbox = conv.structure(data["sandbox"], SandboxConfig)
        containers = []
        for i, c in enumerate(data.get("containers") or []):
            where = f"$.containers[{i}]"
            containers.append(conv.structure(c, ContainerConfig))
    except cattrs.BaseValidationError as exc:
        detail = "; ".join(cattrs.transform_error(exc, path=where))
        raise InvalidArgumentError(f"{p}: {detail}") from None
    pause = data.get("pause") or {}
    if not isinstance(pause, dict) or set(pause) - {"rootfs", "image"} or len(pause) > 1:
        raise InvalidArgumentError(
            f"{p}: pause must be a mapping with only 'rootfs' or only 'image'")
    return PodFile(sandbox=sandbox, containers=tuple(containers),
                   pause_rootfs=str(pause.get("rootfs", "")),
                   pause_image=str(pause.get("image", "")))


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``pod`` group."""
    group = subparsers.add_parser("pod", help="run pods (sandbox + containers) from YAML")
    sub = group.add_subparsers(dest="pod_command", metavar="COMMAND")
    sub.required = True

    run = sub.add_parser("run", help="run a pod and its containers from a YAML file")
    run.add_argument("file", help="pod YAML (sandbox, containers, pause)")
    run.add_argument("--no-pause", action="store_true",
                     help="infra-less pod: IPC/UTS pinned by bind mounts, no pause container")
    add_common(run)
    add_run_options(run)
    add_output_options(run)
    run.set_defaults(func=cmd_run)

    ls = sub.add_parser("ls", help="list pods and their containers")
    add_common(ls)
    add_output_options(ls)
    ls.set_defaults(func=cmd_ls)

    inspect = sub.add_parser("inspect", help="a pod's (or a container's) full status")
    inspect.add_argument("pod", help="pod ID (or a unique prefix) or name")
    inspect.add_argument("container", nargs="?", help="container name or ID prefix")
    add_common(inspect)
    add_output_options(inspect, default="json")
    inspect.set_defaults(func=cmd_inspect)

    for name, func, text in (("stop", cmd_stop, "stop a pod (its containers, pause, network)"),
                             ("rm", cmd_rm, "remove a pod (stopping it first)")):
        p = sub.add_parser(name, help=text)
        p.add_argument("pod", nargs="+", help="pod ID (or a unique prefix) or name")
        add_common(p)
        p.set_defaults(func=func)

    pod_io.register(sub)


def _runtime(config: NodeConfig) -> str:
    return Path(config.runtime.name).name


def cmd_run(args: argparse.Namespace) -> int:
    """Run the pod, then create and start each container; undo the pod if one fails."""
    pod = load_pod_file(args.file)
    config = node_config(args)
    names = devices(args)
    if (pod.pause_rootfs or pod.pause_image) and not (args.pause_rootfs or args.pause_image):
        config = attrs.evolve(config, pause=PauseSettings(rootfs=pod.pause_rootfs,
                                                          image=pod.pause_image))
    with manager(args, config, pause=not args.no_pause) as mgr:
        sb = mgr.run_sandbox(pod_network(config, pod.sandbox))
        try:
            for cfg in pod.containers:
                cfg = with_devices(cfg, names)
                mgr.start_container(mgr.create_container(sb.id, cfg))
        except BaseException:
            mgr.remove_sandbox(sb.id)
            raise
        emit(args, pod_record(mgr, mgr.sandbox_status(sb.id), _runtime(config)), POD_COLUMNS)
    return 0


def cmd_ls(args: argparse.Namespace) -> int:
    """Every pod with its containers."""
    config = node_config(args)
    with manager(args, config) as mgr:
        records = [pod_record(mgr, sb, _runtime(config)) for sb in mgr.list_sandboxes()]
    emit(args, records, POD_COLUMNS)
    return 0


def cmd_inspect(args: argparse.Namespace) -> int:
    """One pod's status (containers included), or one container's."""
    config = node_config(args)
    with manager(args, config) as mgr:
        sb = mgr.sandbox_status(find_pod(mgr, args.pod).id)
        if args.container:
            c = mgr.container_status(find_container(mgr, sb, args.container).id)
            emit(args, container_record(mgr, c), CONTAINER_COLUMNS)
            return 0
        containers = [mgr.container_status(c.id) for c in
                      mgr.list_containers(ContainerFilter(pod_sandbox_id=sb.id))]
        emit(args, pod_record(mgr, sb, _runtime(config), containers=containers), POD_COLUMNS)
    return 0


def cmd_stop(args: argparse.Namespace) -> int:
    """Stop pods."""
    with manager(args) as mgr:
        for ref in args.pod:
            mgr.stop_sandbox(find_pod(mgr, ref).id)
    return 0


def cmd_rm(args: argparse.Namespace) -> int:
    """Remove pods."""
    with manager(args) as mgr:
        for ref in args.pod:
            mgr.remove_sandbox(find_pod(mgr, ref).id)
    return 0
