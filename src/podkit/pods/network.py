"""A pod's networks: the CRI-to-CNI mappings (bandwidth annotations, quantities), which CNI
failures no retry fixes, and the built-in default network for demos and tests."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from podkit import cni
from podkit._files import atomic_write
from podkit.errors import InvalidArgumentError
from podkit.pods.config import SandboxConfig

__all__ = [
    "attached_networks",
    "bandwidth",
    "cni_args",
    "cni_cannot_run",
    "cni_capability_args",
    "default_network_config",
    "default_networks",
    "network_first",
    "quantity",
]

def cni_args(config: SandboxConfig, sandbox_id: str) -> tuple[tuple[str, str], ...]:
    """The ``CNI_ARGS`` kubelet's pods get: namespace, name, UID and the sandbox ID."""
    md = config.metadata
    return cni.kubernetes_args(md.namespace, md.name, md.uid, sandbox_id)


def cni_capability_args(config: SandboxConfig) -> dict[str, Any]:
    """The pod's CNI capability arguments: host ports, bandwidth, DNS, cgroup, annotations.

    Bad annotations or port mappings raise here, so a caller can check before creating
    anything."""
    kw: dict[str, Any] = {}
    ports = [
        cni.PortMapping(pm.host_port, pm.container_port, pm.protocol.name.lower(),
                        pm.host_ip or None)
        for pm in config.port_mappings if pm.host_port > 0
    ]
    if ports:
        kw["port_mappings"] = ports
    bw = bandwidth(config.annotations)
    if bw is not None:
        kw["bandwidth"] = bw
    if config.dns_config is not None:
        kw["dns"] = cni.DNSConfig(servers=tuple(config.dns_config.servers),
                                  searches=tuple(config.dns_config.searches),
                                  options=tuple(config.dns_config.options))
    if config.linux.cgroup_parent:
        kw["cgroup_path"] = config.linux.cgroup_parent
    if config.annotations:
        kw["pod_annotations"] = dict(config.annotations)
    return cni.capability_args(**kw)


def network_first(config: SandboxConfig) -> bool:
    """Whether the pod's pause (or pinned namespaces) must wait for CNI ADD: the pod asks for
    sysctls of its network namespace, written as the pause starts (one of an interface needs
    that interface; one a plugin also sets must end as the pod asked, as in containerd)."""
    return any(re.split(r"[./]", key, maxsplit=1)[0] == "net" for key in config.linux.sysctls)


def cni_cannot_run(exc: BaseException) -> bool:
    """Whether a CNI DEL failed in a way no retry fixes: a plugin binary is missing or its
    name is invalid, or a value of the pod cannot be passed at all (``ValueError``)."""
    if isinstance(exc, cni.NetworksError):
        return all(cni_cannot_run(e) for e in exc.errors.values())
    return isinstance(exc, cni.PluginNotFoundError | cni.InvalidPluginNameError | ValueError)


def attached_networks(current: cni.Networks, container_id: str) -> cni.Networks:
    """The networks ``container_id`` was added to, with the configs of its ADD as the CNI
    result cache keeps them (a pod made under another network setting is torn down from the
    networks it joined), and those of ``current`` on an interface no entry names (an ADD cut
    short before its result was cached)."""
    atts = {a.ifname: cni.Attachment(cni.NetworkConfigList.from_bytes(a.config, a.path),
                                     a.ifname)
            for a in current.client.cached_attachments(container_id) if a.config}
    if not atts:
        return current
    for att in current.attachments:
        if att.ifname not in atts and att.config.name not in {
                a.config.name for a in atts.values()}:
            atts[att.ifname] = att
    order = sorted(atts.values(), key=lambda a: (a.ifname != "lo", len(a.ifname), a.ifname))
    return cni.Networks.from_attachments(current.client, order)


def bandwidth(annotations: Mapping[str, str]) -> cni.Bandwidth | None:
    """``kubernetes.io/ingress-bandwidth`` / ``egress-bandwidth`` (bits/s) as CNI bandwidth."""
    rates = {}
    for key in ("ingress", "egress"):
        value = annotations.get(f"kubernetes.io/{key}-bandwidth")
        if value:
            rates[key] = quantity(value, f"annotation kubernetes.io/{key}-bandwidth")
    if not rates:
        return None
    burst = 2**32 - 1  # containerd: burst math.MaxUint32
    return cni.Bandwidth(
        ingress_rate=rates.get("ingress", 0), ingress_burst=burst if "ingress" in rates else 0,
        egress_rate=rates.get("egress", 0), egress_burst=burst if "egress" in rates else 0,
    )


_SUFFIXES = {"k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12,
             "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40}


def quantity(text: str, where: str) -> int:
    """A Kubernetes quantity such as ``10M`` or ``1Gi`` as an integer."""
    for suffix in sorted(_SUFFIXES, key=len, reverse=True):
        if text.endswith(suffix) and text[: -len(suffix)].isdigit():
            return int(text[: -len(suffix)]) * _SUFFIXES[suffix]
    if text.isdigit():
        return int(text)
    raise InvalidArgumentError(f"{where}: {text!r} is not a quantity like 10M or 1Gi")


def default_network_config(
    state_dir: str | os.PathLike[str],
    *,
    name: str = "podkit",
    bridge: str = "pk0",
    subnet: str = "10.88.0.0/16",
    masquerade: bool = True,
    ipam_dir: str | os.PathLike[str] | None = None,
) -> cni.NetworkConfigList:
    """Write and load ``<state_dir>/net.d/<name>.conflist``: bridge + host-local + portmap.

    host-local keeps its reservations under ``ipam_dir`` (default ``<state_dir>/ipam``; give
    one dir to every user of a bridge so none hands out an address another holds);
    ``masquerade`` NATs what the pods send out of ``subnet``; portmap has ``snat`` for
    connections from the host, and the list disables CHECK (Debian's portmap CHECK is broken).
    """
    state = Path(state_dir).absolute()
    ipam = Path(ipam_dir).absolute() if ipam_dir is not None else state / "ipam"
    conf = {
        "cniVersion": "1.0.0",
        "name": name,
        "disableCheck": True,
        "plugins": [
            {"type": "bridge", "bridge": bridge, "isGateway": True, "ipMasq": masquerade,
             "hairpinMode": True,
             "ipam": {"type": "host-local", "dataDir": str(ipam),
                      "ranges": [[{"subnet": subnet}]], "routes": [{"dst": "0.0.0.0/0"}]}},
            {"type": "portmap", "capabilities": {"portMappings": True}, "snat": True},
        ],
    }
    path = state / "net.d" / f"{name}.conflist"
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(path, json.dumps(conf, indent=2))
    return cni.load_conflist(path)


def default_networks(
    state_dir: str | os.PathLike[str],
    *,
    plugin_dirs: Sequence[str] = ("/usr/lib/cni", "/opt/cni/bin"),
    **kwargs: Any,
) -> cni.Networks:
    """The built-in pod network for demos and tests: loopback plus :func:`default_network_config`.

    ``kwargs`` go to :func:`default_network_config` (``name``, ``bridge``, ``subnet``,
    ``masquerade``, ``ipam_dir``); the CNI result cache lives in ``<state_dir>/cni-cache``.
    """
    conf = default_network_config(state_dir, **kwargs)
    client = cni.CNI(plugin_dirs=list(plugin_dirs),
                     cache_dir=str(Path(state_dir).absolute() / "cni-cache"))
    return cni.Networks(client, [conf], loopback=True)
