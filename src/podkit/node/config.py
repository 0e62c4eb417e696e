"""The node configuration: everything ``build_manager`` and ``build_service`` need, as models.

One frozen attrs class per TOML table (``[runtime]``, ``[network]``, ...), each field with its
default, a one-line doc and, where the type says too little, a check. The models are pure: no
file is read and no directory made here (``podkit.node.load`` reads TOML, the environment and
overrides; ``podkit.node.build`` assembles a manager). ``fields()`` walks the model for the docs
table and the loader, so a new field is documented and loadable by being declared.
"""

from __future__ import annotations

import hashlib
import ipaddress
import posixpath
from collections.abc import Callable, Iterator
from typing import Any

import attrs

__all__ = [
    "DEFAULT_ROOT",
    "DEFAULT_STATE",
    "NETWORK_MODES",
    "CDISettings",
    "CRISettings",
    "CgroupSettings",
    "ConfigField",
    "NetworkBuiltin",
    "NetworkSettings",
    "NodeConfig",
    "PauseSettings",
    "RegistrySettings",
    "RuntimeSettings",
    "fields",
]

DEFAULT_ROOT = "/var/lib/podkit"
"""The root when none is configured: what lasts (the image store, pod files)."""
DEFAULT_STATE = "/run/podkit"
"""The state when neither a state nor a root is configured: what a reboot may clear."""
NETWORK_MODES = ("builtin", "host", "none")
"""The ``network.name`` values that are not a CNI network of ``network.conf_dir``."""

Check = Callable[[Any], str]
"""A field's check: "" when the value is good, else what is wrong with it."""
_TABLE = {"table": True}  # a field holding a table's model (its type)


def _setting(default: Any, doc: str, *, check: Check | None = None, path: bool = False,
             ) -> Any:
    """A field with its docs line; ``path``: a file-relative path in a config file."""
    meta = {"doc": doc, "check": check, "path": path}
    if isinstance(default, tuple):
        return attrs.field(default=default, converter=tuple, metadata=meta)
    return attrs.field(default=default, metadata=meta)


def _one_of(*choices: str) -> Check:
    def check(value: Any) -> str:
        return "" if value in choices else "want " + " or ".join(repr(c) for c in choices)
    return check


def _positive(value: Any) -> str:
    return "" if value >= 1 else "want 1 or more"


def _subnet(value: Any) -> str:
    try:
        ipaddress.ip_network(value)
    except ValueError as exc:
        return f"not a subnet in CIDR form like 10.88.0.0/16 ({exc})"
    return ""


def _host_port(value: Any) -> str:
    if value == "":
        return ""
    host, _, port = value.rpartition(":")
    return "" if host and port.isdigit() else "want HOST:PORT (or '' for none)"


def _bridge(value: Any) -> str:
    ok = 0 < len(value) < 16 and "/" not in value and not any(c.isspace() for c in value)
    return "" if ok else "not a Linux interface name (1 to 15 characters, no '/' or space)"


def _netns_prefix(value: Any) -> str:
    return "" if "/" not in value else "a name prefix, not a path (no '/')"


@attrs.frozen(kw_only=True)
class RuntimeSettings:
    """``[runtime]``: the OCI runtime and who supervises its containers."""

    name: str = _setting("runc", "OCI runtime binary (`runc`, `crun` or a path); also the CRI "
                         "runtime handler")
    root: str = _setting("", "the runtime's state dir (its `--root`); `\"\"`: the manager's "
                         "state dir`/<binary name>`", path=True)
    supervisor: str = _setting("conmon", "who keeps container processes, logs and exit codes: "
                               "`conmon` (they outlive podkit) or `in-process`",
                               check=_one_of("conmon", "in-process"))


@attrs.frozen(kw_only=True)
class CgroupSettings:
    """``[cgroups]``: who makes the cgroups and where pods go."""

    driver: str = _setting("", "`cgroupfs` or `systemd`; `\"\"`: systemd when it is PID 1 on "
                           "cgroup v2, else cgroupfs",
                           check=_one_of("", "cgroupfs", "systemd"))
    parent: str = _setting("", "the cgroup parent of pods that name none; `\"\"`: "
                           "`/podkit/<tag of the state dir>` (cgroupfs), `system.slice` "
                           "(systemd)")


@attrs.frozen(kw_only=True)
class NetworkBuiltin:
    """``[network.builtin]``: podkit's own bridge network (``network.name = "builtin"``)."""

    bridge: str = _setting("pk0", "the bridge the pods' veths join", check=_bridge)
    subnet: str = _setting("10.88.0.0/16", "the pods' addresses (host-local IPAM); the "
                           "bridge is their gateway", check=_subnet)
    masquerade: bool = _setting(True, "masquerade traffic from the pods that leaves the subnet")
    ipam_dir: str = _setting("/var/lib/cni/networks", "host-local's reservations, shared by "
                             "every root on this host (two roots on one bridge never hand out "
                             "one address twice)", path=True)


@attrs.frozen(kw_only=True)
class NetworkSettings:
    """``[network]``: which network pods join."""

    name: str = _setting("", "`builtin`, `host`, `none`, or the name of a network in "
                         "`conf_dir`; `\"\"`: every network of `conf_dir` (up to "
                         "`max_networks`) when it is set, else `builtin`")
    conf_dir: str = _setting("", "CNI network configs (`.conflist`, `.conf`); `cri serve`: "
                             "`/etc/cni/net.d`", path=True)
    bin_dirs: tuple[str, ...] = _setting(("/opt/cni/bin", "/usr/lib/cni"),
                                         "where CNI plugins are looked for, in order",
                                         path=True)
    max_networks: int = _setting(1, "networks of `conf_dir` each pod joins (`eth0`, `eth1`, "
                                 "...), as kubelet's one", check=_positive)
    builtin: NetworkBuiltin = attrs.field(factory=NetworkBuiltin, metadata=_TABLE)


@attrs.frozen(kw_only=True)
class CDISettings:
    """``[cdi]``: where CDI device specs are read."""

    spec_dirs: tuple[str, ...] = _setting(("/etc/cdi", "/var/run/cdi"),
                                          "CDI spec dirs, later ones win", path=True)


@attrs.frozen(kw_only=True)
class PauseSettings:
    """``[pause]``: the pause container; neither set: the built-in pause."""

    image: str = _setting("", "a pause image in the image store (its Entrypoint, Cmd and Env "
                          "run)")
    rootfs: str = _setting("", "or a rootfs directory with a `sleep` (busybox)", path=True)


@attrs.frozen(kw_only=True)
class RegistrySettings:
    """``[registry]``: how pulls reach registries."""

    hosts_dir: str = _setting("/etc/podkit/certs.d", "registry hosts in containerd's "
                              "`hosts.toml` layout (`/etc/containerd/certs.d` shares "
                              "containerd's)", path=True)
    auth_file: str = _setting("", "Docker `config.json` credentials; `\"\"`: "
                              "`$REGISTRY_AUTH_FILE`, `$DOCKER_CONFIG`, "
                              "`~/.docker/config.json`", path=True)


@attrs.frozen(kw_only=True)
class CRISettings:
    """``[cri]``: the CRI server (``podkit cri serve``, ``build_service``)."""

    socket: str = _setting("/run/podkit/cri.sock", "the gRPC Unix socket", path=True)
    streaming_address: str = _setting("127.0.0.1:0", "`HOST:PORT` of the exec/attach/"
                                      "port-forward server (port 0: a free one); `\"\"`: off",
                                      check=_host_port)
    runtime_name: str = _setting("podkit", "what `Version` answers as `runtime_name`")


@attrs.frozen(kw_only=True)
class NodeConfig:
    """A node: its directories, runtime, cgroups, network, CDI, pause, registries and CRI
    server. ``load_config`` reads one from TOML, the environment and overrides; every field
    has a default, so ``NodeConfig()`` is a working node on this host's usual paths."""

    root: str = _setting("", f"what lasts: the image store, pod files; `\"\"`: "
                         f"`{DEFAULT_ROOT}`", path=True)
    state: str = _setting("", "what a reboot may clear: records, runtime state, netns pins; "
                          f"`\"\"`: `ROOT/state` when a root is set, else `{DEFAULT_STATE}`",
                          path=True)
    image_root: str = _setting("", "the image store's root (`IMAGE_ROOT/image`); `\"\"`: the "
                               "root", path=True)
    log_root: str = _setting("", "pod log directories of `kube play`; `\"\"`: `ROOT/logs`",
                             path=True)
    netns_dir: str = _setting("", "where pod network namespaces are pinned; `\"\"`: the "
                              "manager's state dir`/netns`", path=True)
    netns_prefix: str = _setting("podkit-", "the name prefix of pinned network namespaces",
                                 check=_netns_prefix)
    runtime: RuntimeSettings = attrs.field(factory=RuntimeSettings, metadata=_TABLE)
    cgroups: CgroupSettings = attrs.field(factory=CgroupSettings, metadata=_TABLE)
    network: NetworkSettings = attrs.field(factory=NetworkSettings, metadata=_TABLE)
    cdi: CDISettings = attrs.field(factory=CDISettings, metadata=_TABLE)
    pause: PauseSettings = attrs.field(factory=PauseSettings, metadata=_TABLE)
    registry: RegistrySettings = attrs.field(factory=RegistrySettings, metadata=_TABLE)
    cri: CRISettings = attrs.field(factory=CRISettings, metadata=_TABLE)

    # -- where things go (pure: nothing is made) ------------------------------------------------

    @property
    def root_dir(self) -> str:
        """The root, or its default."""
        return self.root or DEFAULT_ROOT

    @property
    def state_dir(self) -> str:
        """The state; without one ``ROOT/state`` for a set root (two roots never share state),
        else the default."""
        if self.state:
            return self.state
        return posixpath.join(self.root, "state") if self.root else DEFAULT_STATE

    @property
    def images_dir(self) -> str:
        """The root of the image store (the store is ``images_dir/image``)."""
        return self.image_root or self.root_dir

    @property
    def log_dir(self) -> str:
        """Where ``kube play`` puts pod log directories."""
        return self.log_root or posixpath.join(self.root_dir, "logs")

    def cgroup_parent(self, manager_state: str, driver: str) -> str:
        """The parent of pods that name none: ``cgroups.parent``, else for the cgroupfs
        ``driver`` ``/podkit/<tag>``, the tag a digest of the manager's state dir, so two
        roots never share one; "" for systemd (``system.slice``: a slice podkit made would
        outlive it)."""
        if self.cgroups.parent:
            return self.cgroups.parent
        if driver == "systemd":
            return ""
        return "/podkit/" + hashlib.sha256(manager_state.encode()).hexdigest()[:12]


@attrs.frozen
class ConfigField:
    """One key of the node config: its dotted TOML key, type, default, doc and check."""

    key: str
    type: Any
    default: Any
    doc: str
    check: Check | None
    path: bool

    @property
    def env(self) -> str:
        """Its environment variable: ``PODKIT_`` and the key in capitals, ``.`` as ``_``."""
        return "PODKIT_" + self.key.upper().replace(".", "_")


def fields(cls: type[Any] = NodeConfig, prefix: str = "") -> Iterator[ConfigField]:
    """Every key of the config model, tables depth first, in declaration order."""
    types = attrs.resolve_types(cls)
    for f in attrs.fields(types):
        if f.metadata.get("table"):
            yield from fields(f.type, f"{prefix}{f.name}.")
            continue
        yield ConfigField(key=prefix + f.name, type=f.type, default=f.default,
                          doc=f.metadata["doc"], check=f.metadata["check"],
                          path=f.metadata["path"])
