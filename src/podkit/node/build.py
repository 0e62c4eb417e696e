"""Assembling a node from its config: the runtime, the pod networks, the CDI devices, the pause
and the ``SandboxManager`` over them (``podkit.cri.build_service`` puts a CRI service on top).

A manager called ``name`` keeps its files in ``ROOT/<name>`` and its records, runtime state,
CNI cache, network namespace pins and scratch files in ``STATE/<name>``; without a configured
cgroup parent its pods go under ``/podkit/<tag of STATE/name>``. So two roots (two CI jobs)
never share a name, a lock, a pin, a cgroup or a recovery; ``podkit pod`` and ``podkit kube``
use ``pods``, ``podkit cri serve`` uses ``cri``.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from pathlib import Path

from podkit import cdi, cgroups, cni, image, oci
from podkit.errors import InvalidArgumentError, PodkitError
from podkit.node.config import NodeConfig
from podkit.pods.network import default_network_config
from podkit.runtime import InProcessSupervisor, Runc, Supervisor
from podkit.sandbox import PauseConfig, SandboxManager, builtin_pause

__all__ = ["build_manager", "build_networks", "build_registry", "build_runtime",
           "manager_dirs", "pause_config"]

NetworkLoader = Callable[[], cni.Networks]


def manager_dirs(config: NodeConfig, name: str = "pods") -> tuple[Path, Path]:
    """The root and state dirs of the manager called ``name``: ``ROOT/name``, ``STATE/name``."""
    if not name or "/" in name or name in (".", ".."):
        raise InvalidArgumentError(f"manager name {name!r}: want one path element")
    return (Path(config.root_dir).absolute() / name, Path(config.state_dir).absolute() / name)


def _driver(config: NodeConfig) -> cgroups.Driver:
    return cgroups.resolve_driver(config.cgroups.driver or None, "cgroups.driver")


def build_runtime(config: NodeConfig, state_dir: str | os.PathLike[str] | None = None, *,
                  strict: bool = False) -> Runc:
    """The OCI runtime of ``runtime.name``: its state in ``runtime.root``, else
    ``<state_dir>/<binary name>`` (``state_dir``: the node's state), its scratch files in
    ``<state_dir>/tmp``, ``--systemd-cgroup`` for the systemd driver."""
    state = Path(state_dir if state_dir is not None else config.state_dir).absolute()
    binary = config.runtime.name
    root = config.runtime.root or state / Path(binary).name
    return Runc(binary, root=root, systemd_cgroup=_driver(config).systemd, strict=strict,
                scratch_dir=state / "tmp")


def _builtin(config: NodeConfig, client: cni.CNI, state: Path) -> cni.Networks:
    b = config.network.builtin
    conf = default_network_config(state, bridge=b.bridge, subnet=b.subnet,
                                  masquerade=b.masquerade, ipam_dir=b.ipam_dir)
    return cni.Networks(client, [conf], loopback=True)


def build_networks(config: NodeConfig, state_dir: str | os.PathLike[str], *,
                   required: bool = True) -> tuple[cni.Networks | None, NetworkLoader | None]:
    """The pod networks of ``network.name`` and, for CNI configs, their loader (tried again
    while they are missing: a config written after the start is picked up).

    ``builtin`` writes podkit's bridge conflist under ``state_dir/net.d``; ``host`` and
    ``none`` give loopback alone (the frontends put ``host`` pods in the node's network); a
    name loads that network of ``network.conf_dir``; "" every network there (up to
    ``max_networks``), or ``builtin`` without a conf dir. A named network that cannot be
    loaded is an error when ``required`` (a manager about to run pods), else left to the
    loader (one that only lists and removes pods needs none: they are torn down with the
    configs cached at their ADD). The CNI result cache is ``state_dir/cni-cache``.
    """
    net = config.network
    state = Path(state_dir).absolute()
    client = cni.CNI(plugin_dirs=list(net.bin_dirs), cache_dir=str(state / "cni-cache"))
    if net.name in ("host", "none"):
        return cni.Networks(client, [], loopback=True), None
    if net.name == "builtin" or (not net.name and not net.conf_dir):
        return _builtin(config, client, state), None
    if not net.conf_dir:
        raise InvalidArgumentError(
            f"network.name {net.name!r}: not builtin, host or none, and no network.conf_dir "
            "to find it in (--cni-conf-dir DIR)")
    conf_dir = Path(net.conf_dir)
    if not conf_dir.is_dir():
        raise InvalidArgumentError(f"network.conf_dir {conf_dir}: not a directory")

    def load() -> cni.Networks:
        if net.name:
            return cni.Networks(client, [cni.load_network(conf_dir, net.name)], loopback=True)
        return cni.Networks.from_dir(client, conf_dir, max_networks=net.max_networks,
                                     loopback=True)

    try:
        return load(), load
    except cni.NoConfigsFoundError:
        if net.name and required:
            raise
        return None, load  # NetworkReady false until a config appears (host pods work)
    except PodkitError:
        if required:
            raise
        return None, load


class _CDIOnFirstUse:
    """A CDI cache made when a container first asks for a device (a command that runs no
    such container never scans the spec dirs)."""

    def __init__(self, spec_dirs: Sequence[str]) -> None:
        self.spec_dirs = tuple(spec_dirs)
        self._cache: cdi.Cache | None = None

    def inject_devices(self, spec: oci.Spec, names: Sequence[str]) -> object:
        if self._cache is None:
            self._cache = cdi.Cache(self.spec_dirs, auto_refresh=False)
        return self._cache.inject_devices(spec, list(names))


def _builtin_pause(config: NodeConfig, images: image.ImageStore | None) -> PauseConfig:
    """The built-in pause, used when ``pause.image`` and ``pause.rootfs`` are both unset:
    podkit's own pause image, made once from catatonit in ``images``."""
    if images is None:
        raise InvalidArgumentError(
            "the built-in pause needs the image store (image_root); or set pause.image or "
            "pause.rootfs")
    return builtin_pause(images)


def pause_config(config: NodeConfig, images: image.ImageStore | None = None) -> PauseConfig:
    """The pause of ``[pause]``: a rootfs directory, an image (resolved by the manager in its
    store), else the built-in one (made in ``images``)."""
    if config.pause.rootfs:
        return PauseConfig(rootfs=config.pause.rootfs)
    if config.pause.image:
        return PauseConfig(image=config.pause.image)
    return _builtin_pause(config, images)


def build_registry(config: NodeConfig) -> image.Registry:
    """The registry client of ``[registry]`` (a bad ``hosts.toml`` raises here)."""
    auth = image.AuthFile(config.registry.auth_file or None)
    return image.Registry(auth=auth, hosts=image.RegistryHosts.load(config.registry.hosts_dir))


def build_manager(config: NodeConfig, *, name: str = "pods", pause: bool = True,
                  watch_cdi: bool = False) -> SandboxManager:
    """The ``SandboxManager`` of ``config``, called ``name`` (its dirs: :func:`manager_dirs`).

    ``pause=False`` makes one without a pause: infra-less pods, or a manager that lists,
    stops and removes pods (nothing about the pause is resolved or made). The image store
    under ``image_root`` is opened when the manager may run pods or it exists. CDI specs are
    read when a container first names a device, or with ``watch_cdi`` at once and again on
    every change (a server). Not recovered: call ``recover()``. Raises ``ConflictError``
    while another manager holds the state dir.
    """
    root, state = manager_dirs(config, name)
    driver = _driver(config)
    runtime = build_runtime(config, state)
    supervisor: Supervisor | None = None
    if config.runtime.supervisor == "in-process":
        supervisor = InProcessSupervisor(runtime)
    networks, loader = build_networks(config, state, required=pause)  # a bad network first
    store_root = Path(config.images_dir).absolute()
    images = image.ImageStore(store_root) if pause or (store_root / "image").is_dir() else None
    pause_of = pause_config(config, images) if pause else None
    devices = (cdi.Cache(config.cdi.spec_dirs, auto_refresh=True) if watch_cdi
               else _CDIOnFirstUse(config.cdi.spec_dirs))
    try:
        return SandboxManager(
            root, state, runtime, networks, cdi=devices, pause=pause_of, supervisor=supervisor,
            netns_dir=str(Path(config.netns_dir).absolute()) if config.netns_dir
            else str(state / "netns"),
            netns_prefix=config.netns_prefix, images=images, network_loader=loader,
            cgroup_driver=driver.value, cgroup_parent=config.cgroup_parent(str(state), driver))
    except BaseException:
        if isinstance(devices, cdi.Cache):
            devices.close()  # its watcher thread
        raise
