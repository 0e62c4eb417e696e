"""The node config of a command: ``--config FILE``, ``--root``, ``--state`` and the options that
set one config key each (``--runtime`` is ``runtime.name``), over ``podkit.node.load_config``.

One meaning everywhere, given before the group (``podkit --root X pod ls``) or after it
(``podkit pod ls --root X``): the root holds what lasts (the image store, pod files), the state
what a reboot may clear (records, conmon and runtime state, netns pins, ``podkit run``
bundles). A root given without a state keeps its state inside it (``ROOT/state``), so two
roots never share one. Precedence, lowest first: a command's own defaults, the config file
(``--config``, ``$PODKIT_CONFIG``, ``/etc/podkit/podkit.toml``), ``PODKIT_*`` variables, the
options.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from podkit.node import CONFIG_ENV, CONFIG_FILE, DEFAULT_ROOT, DEFAULT_STATE, NodeConfig
from podkit.node import load_config as _load

__all__ = ["DEFAULT_ROOT", "DEFAULT_STATE", "OPTIONS", "ROOT_ENV", "STATE_ENV",
           "add_dir_options", "add_node_options", "node_config", "podkit_root",
           "podkit_state"]

ROOT_ENV = "PODKIT_ROOT"
STATE_ENV = "PODKIT_STATE"

OPTIONS: dict[str, tuple[str, str, dict[str, Any]]] = {
    # argparse dest: (node config key, option, add_argument keywords)
    "root": ("root", "--root", {"metavar": "DIR", "help": "podkit's root: images, pod files "
                                f"(default ${ROOT_ENV} or {DEFAULT_ROOT})"}),
    "state": ("state", "--state", {"metavar": "DIR", "help": "podkit's state: records, "
                                   f"runtime state (default ${STATE_ENV}, else ROOT/state when "
                                   f"a root is given, else {DEFAULT_STATE})"}),
    "runtime": ("runtime.name", "--runtime", {"help": "OCI runtime binary (runc, crun)"}),
    "runtime_root": ("runtime.root", "--runtime-root", {
        "metavar": "DIR", "help": "the runtime's state dir (its --root; default "
        "STATE/<runtime>)"}),
    "cgroup_driver": ("cgroups.driver", "--cgroup-driver", {
        "choices": ("cgroupfs", "systemd"), "help": "who makes the cgroups (default: systemd "
        "when it is PID 1 on cgroup v2, else cgroupfs)"}),
    "cgroup_parent": ("cgroups.parent", "--cgroup-parent", {
        "metavar": "PARENT", "help": "cgroup parent of pods that name none (default "
        "/podkit/<tag of the state dir> for cgroupfs)"}),
    "image_root": ("image_root", "--image-root", {
        "metavar": "DIR", "help": "image store for image references (default: the root, the "
        "store podkit image fills)"}),
    "log_root": ("log_root", "--log-root", {
        "metavar": "DIR", "help": "pod log directories go under it (default ROOT/logs)"}),
    "pause_rootfs": ("pause.rootfs", "--pause-rootfs", {
        "metavar": "DIR", "help": "the pause: a rootfs with a sleep program (busybox)"}),
    "pause_image": ("pause.image", "--pause-image", {
        "metavar": "REF", "help": "the pause: an image in the image store (or a rootfs "
        "directory)"}),
    "network": ("network.name", "--network", {
        "metavar": "NAME", "help": "the pods' network: builtin (podkit's bridge), host, none, "
        "or a network of --cni-conf-dir (default: builtin, or every network of the conf dir "
        "when one is set)"}),
    "cni_conf_dir": ("network.conf_dir", "--cni-conf-dir", {
        "metavar": "DIR", "help": "CNI network configs (.conflist, .conf)"}),
    "cni_bin_dir": ("network.bin_dirs", "--cni-bin-dir", {
        "metavar": "DIR", "action": "append", "help": "CNI plugin dir (repeatable; default "
        "/opt/cni/bin and /usr/lib/cni)"}),
    "max_networks": ("network.max_networks", "--max-networks", {
        "type": int, "metavar": "N", "help": "networks of the conf dir each pod joins "
        "(default 1, as kubelet)"}),
    "cdi_spec_dir": ("cdi.spec_dirs", "--cdi-spec-dir", {
        "metavar": "DIR", "action": "append", "help": "CDI spec dir (repeatable; default "
        "/etc/cdi and /var/run/cdi)"}),
    "registry_config_dir": ("registry.hosts_dir", "--registry-config-dir", {
        "metavar": "DIR", "help": "registry hosts in containerd's hosts.toml layout "
        "(default /etc/podkit/certs.d)"}),
    "authfile": ("registry.auth_file", "--authfile", {
        "metavar": "FILE", "help": "Docker config.json with registry credentials (default: "
        "$REGISTRY_AUTH_FILE, $DOCKER_CONFIG, ~/.docker/config.json)"}),
    "socket": ("cri.socket", "--socket", {"metavar": "PATH", "help": "the gRPC socket "
                                          "(default /run/podkit/cri.sock)"}),
    "streaming_address": ("cri.streaming_address", "--streaming-address", {
        "metavar": "HOST:PORT", "help": "the exec/attach/port-forward server (default "
        "127.0.0.1 on a free port; '' turns streaming off)"}),
}
"""Every option that sets a node config key; unset (``None``) unless given."""


def add_dir_options(p: argparse.ArgumentParser) -> None:
    """Add ``--config``, ``--root`` and ``--state``; unset unless given, so either placement
    wins."""
    p.add_argument("--config", default=argparse.SUPPRESS, metavar="FILE",
                   help=f"the node config (TOML; default ${CONFIG_ENV}, else {CONFIG_FILE} "
                   "when it exists): docs/config.md")
    add_node_options(p, "root", "state", default=argparse.SUPPRESS)


def add_node_options(p: argparse.ArgumentParser, *dests: str, default: Any = None) -> None:
    """Add the options of :data:`OPTIONS` named by ``dests`` (each sets its config key)."""
    for dest in dests:
        _, option, kw = OPTIONS[dest]
        p.add_argument(option, dest=dest, default=default, **kw)


def node_config(args: argparse.Namespace, defaults: Mapping[str, Any] | None = None,
                ) -> NodeConfig:
    """The node config of the command line: ``defaults`` (the command's own), the config
    file, the environment, then every :data:`OPTIONS` option given."""
    overrides: dict[str, Any] = {}
    origins: dict[str, str] = {}
    for dest, (key, option, _) in OPTIONS.items():
        value = getattr(args, dest, None)
        if value is not None:
            overrides[key] = value
            origins[key] = option
    return _load(getattr(args, "config", None), overrides=overrides, defaults=defaults,
                 origins=origins)


def podkit_root(args: argparse.Namespace) -> Path:
    """The root: ``--root``, else ``$PODKIT_ROOT``, else the config's, else
    ``/var/lib/podkit``."""
    return Path(node_config(args).root_dir).absolute()


def podkit_state(args: argparse.Namespace) -> Path:
    """The state: ``--state``, else ``$PODKIT_STATE``, else the config's, else ``ROOT/state``
    for a set root, else ``/run/podkit``."""
    return Path(node_config(args).state_dir).absolute()
