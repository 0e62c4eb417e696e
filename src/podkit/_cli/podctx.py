"""What every ``podkit pod`` command shares: the common options, the manager they open, and
how a pod or container reference on the command line is found."""

from __future__ import annotations

import argparse
import time
from collections.abc import Sequence
from pathlib import Path

import attrs

from podkit import cdi
from podkit.container import ContainerConfig
from podkit.errors import ConflictError, InvalidArgumentError, NotFoundError
from podkit.node import NodeConfig, build_manager, manager_dirs
from podkit.sandbox import (
    Container,
    ContainerFilter,
    NamespaceMode,
    Sandbox,
    SandboxConfig,
    SandboxManager,
)

from . import dirs

DEFAULT_ROOT = f"{dirs.DEFAULT_ROOT}/pods"
DEFAULT_STATE = f"{dirs.DEFAULT_STATE}/pods"
DEFAULT_IMAGE_ROOT = dirs.DEFAULT_ROOT
LOCK_WAIT = 10.0
"""Seconds a command waits for the state dir while another podkit command holds it."""
NODE_OPTIONS = ("runtime", "pause_rootfs", "pause_image", "image_root", "cgroup_driver",
                "cgroup_parent", "cni_conf_dir", "cni_bin_dir", "cdi_spec_dir")
"""The node config options of every pod command (``--root``, ``--state``, ``--config`` are
global: ``dirs``)."""


def add_common(p: argparse.ArgumentParser) -> None:
    """The options of every pod command."""
    dirs.add_dir_options(p)
    dirs.add_node_options(p, *NODE_OPTIONS)
    p.set_defaults(needs_root="run pods")


def add_run_options(p: argparse.ArgumentParser) -> None:
    """The options of commands that run pods (``pod run``, ``kube play``): the network and
    CDI devices."""
    dirs.add_node_options(p, "network")
    p.add_argument("--device", action="append", default=[], metavar="CDI_DEVICE",
                   help="a CDI device (vendor.com/class=name) for every container "
                   "(repeatable)")


def devices(args: argparse.Namespace) -> tuple[str, ...]:
    """The ``--device`` names, each a valid qualified CDI device name."""
    for name in args.device:
        try:
            cdi.parse_qualified_name(name)
        except cdi.InvalidNameError as exc:
            raise InvalidArgumentError(f"--device {name!r}: {exc}") from None
    return tuple(args.device)


def pod_network(config: NodeConfig, sandbox: SandboxConfig) -> SandboxConfig:
    """``sandbox`` in the node's network namespace when the network is ``host`` (no hostname:
    the node's); else as it is."""
    if config.network.name != "host":
        return sandbox
    linux = sandbox.linux
    ns = attrs.evolve(linux.security_context.namespace_options, network=NamespaceMode.NODE)
    return attrs.evolve(sandbox, hostname="", linux=attrs.evolve(
        linux, security_context=attrs.evolve(linux.security_context, namespace_options=ns)))


def with_devices(container: ContainerConfig, names: Sequence[str]) -> ContainerConfig:
    """``container`` with the CDI devices ``names`` added (each once)."""
    if not names:
        return container
    return attrs.evolve(container, cdi_devices=tuple(dict.fromkeys(
        [*container.cdi_devices, *names])))


def pod_root(args: argparse.Namespace) -> Path:
    """Pod files and bundles: ``ROOT/pods``."""
    return manager_dirs(dirs.node_config(args))[0]


def pod_state(args: argparse.Namespace) -> Path:
    """Pod records, conmon and runtime state: ``STATE/pods``."""
    return manager_dirs(dirs.node_config(args))[1]


def manager(args: argparse.Namespace, config: NodeConfig | None = None, *,
            pause: bool = False) -> SandboxManager:
    """The ``pods`` manager of the command's node config (``config``, else the command
    line's), recovered. Without ``pause`` it can stop, remove and inspect pods and run
    infra-less ones."""
    config = config if config is not None else dirs.node_config(args)
    deadline = time.monotonic() + LOCK_WAIT
    while True:  # another podkit command (a `pod wait` taking a look) may hold the state dir
        try:
            mgr = build_manager(config, pause=pause)
            break
        except ConflictError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.02)
    try:
        mgr.recover()
    except BaseException:
        mgr.close()
        raise
    return mgr


def find_pod(mgr: SandboxManager, ref: str) -> Sandbox:
    pods = mgr.list_sandboxes()
    hits = [s for s in pods if s.config.metadata.name == ref] or \
        [s for s in pods if s.id.startswith(ref)]
    if len(hits) != 1:
        raise NotFoundError(f"pod {ref!r}: " + ("not found" if not hits else "ambiguous"))
    return hits[0]


def find_container(mgr: SandboxManager, pod: Sandbox, name: str) -> Container:
    for c in mgr.list_containers(ContainerFilter(pod_sandbox_id=pod.id)):
        if c.config.metadata.name == name or c.id.startswith(name):
            return c
    raise NotFoundError(f"pod {pod.config.metadata.name!r} has no container {name!r}")
