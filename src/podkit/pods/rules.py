"""Small pure rules containerd's CRI plugin applies between a CRI config and an OCI spec.

Kept apart from the builders so each rule is one tested function: names, cgroup paths,
resolv.conf text, standard annotations, OOM score clamping, capability resolution.
"""

from __future__ import annotations

import os
import posixpath
from collections.abc import Iterable, Mapping, Sequence
from fnmatch import fnmatchcase

import attrs

from podkit import cgroups, oci
from podkit.errors import InvalidArgumentError, quote
from podkit.pods.config import (
    ContainerConfig,
    ContainerMetadata,
    DNSConfig,
    NamespaceMode,
    PodSandboxMetadata,
    SandboxConfig,
)

__all__ = [
    "ANNOTATION_CONTAINER_NAME",
    "ANNOTATION_CONTAINER_TYPE",
    "ANNOTATION_IMAGE_NAME",
    "ANNOTATION_SANDBOX_ID",
    "ANNOTATION_SANDBOX_IMAGE",
    "ANNOTATION_SANDBOX_LOG_DIR",
    "ANNOTATION_SANDBOX_NAME",
    "ANNOTATION_SANDBOX_NAMESPACE",
    "ANNOTATION_SANDBOX_UID",
    "CONTAINER_TYPE_CONTAINER",
    "CONTAINER_TYPE_SANDBOX",
    "cgroups_path",
    "clamp_oom_score_adj",
    "container_annotations",
    "container_log_path",
    "container_name",
    "current_oom_score_adj",
    "host_hostname",
    "infraless_pid_namespace",
    "matching",
    "merge_env",
    "resolv_conf",
    "resolve_capabilities",
    "sandbox_annotations",
    "sandbox_name",
    "without_default_security_settings",
]

ANNOTATION_CONTAINER_TYPE = "io.kubernetes.cri.container-type"
ANNOTATION_SANDBOX_ID = "io.kubernetes.cri.sandbox-id"
ANNOTATION_SANDBOX_NAMESPACE = "io.kubernetes.cri.sandbox-namespace"
ANNOTATION_SANDBOX_UID = "io.kubernetes.cri.sandbox-uid"
ANNOTATION_SANDBOX_NAME = "io.kubernetes.cri.sandbox-name"
ANNOTATION_SANDBOX_LOG_DIR = "io.kubernetes.cri.sandbox-log-directory"
ANNOTATION_SANDBOX_IMAGE = "io.kubernetes.cri.podsandbox.image-name"
ANNOTATION_CONTAINER_NAME = "io.kubernetes.cri.container-name"
ANNOTATION_IMAGE_NAME = "io.kubernetes.cri.image-name"
CONTAINER_TYPE_SANDBOX = "sandbox"
CONTAINER_TYPE_CONTAINER = "container"


def sandbox_name(md: PodSandboxMetadata) -> str:
    """The unique pod name containerd reserves: ``<name>_<namespace>_<uid>_<attempt>``."""
    return f"{md.name}_{md.namespace}_{md.uid}_{md.attempt}"


def container_name(ctr: ContainerMetadata, pod: PodSandboxMetadata) -> str:
    """The unique container name: ``<ctr>_<pod>_<namespace>_<uid>_<attempt>``."""
    return f"{ctr.name}_{pod.name}_{pod.namespace}_{pod.uid}_{ctr.attempt}"


def cgroups_path(parent: str, id: str, driver: str | None = None) -> str:
    """``linux.cgroupsPath`` for ``id`` under ``parent``.

    With a ``driver`` (``cgroupfs`` or ``systemd``): that driver's form, the kubelet's
    parent in either form converted, an empty one the driver's default
    (``podkit.cgroups.cgroups_path_for``; ``InvalidArgumentError`` for a parent the driver
    cannot take). Without one, containerd's rule: a parent whose last element ends in
    ``.slice`` selects the systemd form ``<slice>:cri-podkit:<id>``; otherwise the cgroupfs
    path ``<parent>/<id>``.
    """
    if driver is not None:
        return cgroups.cgroups_path_for(driver, parent, id)
    base = posixpath.basename(parent.rstrip("/"))
    if base.endswith(".slice"):
        return f"{base}:cri-podkit:{id}"
    return posixpath.join(parent, id)


def resolv_conf(dns: DNSConfig) -> str:
    """resolv.conf text for a CRI DNS config, in containerd's line order."""
    lines = []
    if dns.searches:
        lines.append("search " + " ".join(dns.searches))
    lines.extend(f"nameserver {server}" for server in dns.servers)
    if dns.options:
        lines.append("options " + " ".join(dns.options))
    return "".join(line + "\n" for line in lines)


def sandbox_annotations(id: str, config: SandboxConfig, pause_image: str) -> dict[str, str]:
    """The standard ``io.kubernetes.cri.*`` annotations of a pause container."""
    md = config.metadata
    return {
        ANNOTATION_CONTAINER_TYPE: CONTAINER_TYPE_SANDBOX,
        ANNOTATION_SANDBOX_ID: id,
        ANNOTATION_SANDBOX_NAMESPACE: md.namespace,
        ANNOTATION_SANDBOX_UID: md.uid,
        ANNOTATION_SANDBOX_NAME: md.name,
        ANNOTATION_SANDBOX_LOG_DIR: config.log_directory,
        ANNOTATION_SANDBOX_IMAGE: pause_image,
    }


def container_annotations(
    sandbox_id: str, name: str, image: str, sandbox: SandboxConfig
) -> dict[str, str]:
    """The standard ``io.kubernetes.cri.*`` annotations of an application container."""
    md = sandbox.metadata
    return {
        ANNOTATION_CONTAINER_TYPE: CONTAINER_TYPE_CONTAINER,
        ANNOTATION_SANDBOX_ID: sandbox_id,
        ANNOTATION_SANDBOX_NAMESPACE: md.namespace,
        ANNOTATION_SANDBOX_UID: md.uid,
        ANNOTATION_SANDBOX_NAME: md.name,
        ANNOTATION_CONTAINER_NAME: name,
        ANNOTATION_IMAGE_NAME: image,
    }


def container_log_path(log_directory: str, log_path: str,
                       error: type[InvalidArgumentError] = InvalidArgumentError) -> str:
    """Where a container's log goes: ``log_path`` inside ``log_directory``, normalised.

    As containerd (Go's ``filepath.Join``), an absolute ``log_path`` is still inside the
    directory; a path that leaves it (``../x.log``) is refused, naming the normalised path.
    """
    if not log_directory or not log_path:
        return ""
    directory = posixpath.normpath(log_directory)
    path = posixpath.normpath(posixpath.join(directory, log_path.lstrip("/")))
    if path == directory or not path.startswith(directory.rstrip("/") + "/"):
        raise error(f"log_path {quote(log_path)}: resolves to {quote(path)}, not a file "
                    f"inside the pod's log_directory {quote(directory)}")
    return path


def current_oom_score_adj(pid: int | str = "self") -> int:
    """The OOM score adjustment of a process (the floor a process without CAP_SYS_RESOURCE has)."""
    with open(f"/proc/{pid}/oom_score_adj") as f:
        return int(f.read().strip())


def clamp_oom_score_adj(value: int, floor: int | None) -> int:
    """Clamp ``value`` to [-1000, 1000] and, when ``floor`` is given, to at least ``floor``.

    Without CAP_SYS_RESOURCE a process cannot lower a score below its own, and runc fails;
    containerd's ``restrict_oom_score_adj`` clamps to the caller's score instead.
    """
    value = max(-1000, min(1000, value))
    if floor is not None and value < floor:
        return floor
    return value


def resolve_capabilities(
    base: Sequence[str],
    add: Iterable[str],
    drop: Iterable[str],
    all_known: Sequence[str],
    *,
    current: Sequence[str] | None = None,
    where: str = "",
) -> list[str]:
    """Apply CRI add/drop lists (``ALL`` first, then names) to ``base``, in containerd's order.

    ``ALL`` means ``current``: the capabilities the runtime process can grant (containerd's
    ``cap.Current()``), ``all_known`` when not given. Names are read by
    :func:`podkit.oci.capability_name` (``CAP_`` optional, any case);
    unknown names are an error naming the list (prefixed by ``where``).
    """
    known = set(all_known)
    prefix = f"{where}." if where else ""
    adds = [oci.capability_name(n, f"{prefix}add_capabilities") for n in add]
    drops = [oci.capability_name(n, f"{prefix}drop_capabilities") for n in drop]
    for field, names in (("add_capabilities", adds), ("drop_capabilities", drops)):
        for n in names:
            if n != "CAP_ALL" and n not in known:
                raise InvalidArgumentError(
                    f"unknown capability {quote(n)} in {prefix}{field}")
    caps = list(base)
    if "CAP_ALL" in adds:
        caps = list(all_known if current is None else current)
    if "CAP_ALL" in drops:
        caps = []
    for n in adds:
        if n != "CAP_ALL" and n not in caps:
            caps.append(n)
    drop_set = {n for n in drops if n != "CAP_ALL"}
    return [c for c in caps if c not in drop_set]


def merge_env(*groups: Iterable[str] | Mapping[str, str]) -> list[str]:
    """Merge ``KEY=value`` lists (or mappings) in order; a later key replaces in place."""
    out: dict[str, str] = {}
    for group in groups:
        if isinstance(group, Mapping):
            out.update(group)
            continue
        for entry in group:
            key, _, value = entry.partition("=")
            out[key] = value
    return [f"{k}={v}" for k, v in out.items()]


def host_hostname() -> str:
    """The host's hostname (used when a pod sets none)."""
    return os.uname().nodename


def matching(annotations: Mapping[str, str], patterns: Sequence[str]) -> dict[str, str]:
    """The annotations whose key matches one of the glob ``patterns`` (pass-through lists)."""
    return {k: v for k, v in annotations.items() if any(fnmatchcase(k, p) for p in patterns)}


def without_default_security_settings(spec: oci.Spec) -> None:
    """No AppArmor profile, no seccomp filter, no rlimits (containerd's CRI starting point)."""
    if spec.process is not None:
        spec.process.apparmor_profile = None
        spec.process.rlimits = None
    if spec.linux is not None:
        spec.linux.seccomp = None


def infraless_pid_namespace(config: ContainerConfig, pod: SandboxConfig, *, has_pause: bool,
                            pod_pid_known: bool) -> tuple[ContainerConfig, bool]:
    """A POD pid namespace in a pod without a pause: the config to build with, and whether
    the container owns (or can stand in for) the pod's pid namespace.

    Without a running owner yet (``pod_pid_known`` false) the container gets a new pid
    namespace of its own (mode CONTAINER), which becomes the pod's; once one runs, later POD
    containers join it and can stand in for it when it exits.
    """
    ns = config.linux.security_context.namespace_options
    if has_pause or ns.pid != NamespaceMode.POD:
        return config, False
    if pod_pid_known or pod.linux.security_context.namespace_options.pid == NamespaceMode.NODE:
        return config, True
    own = attrs.evolve(config, linux=attrs.evolve(
        config.linux, security_context=attrs.evolve(
            config.linux.security_context, namespace_options=attrs.evolve(
                ns, pid=NamespaceMode.CONTAINER))))
    return own, True
