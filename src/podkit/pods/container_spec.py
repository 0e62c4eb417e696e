"""The container builder: ``build_container_spec`` (pure) from a CRI-shaped ``ContainerConfig``.

``build_container_spec`` follows containerd's CRI plugin (``buildLinuxSpec`` and
``containerSpecOpts``) as a list of ``oci`` spec options, applied in containerd's order,
with CDI injection last.
"""

from __future__ import annotations

import posixpath
from collections.abc import Mapping, Sequence
from typing import Protocol

import attrs

from podkit import cgroups, oci
from podkit.apparmor import AppArmorHost
from podkit.cdi.annotations import devices_from_request
from podkit.errors import InvalidArgumentError, quote
from podkit.pods import checks, rules, userns
from podkit.pods.config import (
    Capability,
    ContainerConfig,
    IDMapping,
    LinuxContainerResources,
    LinuxContainerSecurityContext,
    Mount,
    MountPropagation,
    NamespaceMode,
    SandboxConfig,
    SupplementalGroupsPolicy,
)
from podkit.pods.sandbox_spec import SandboxFiles, with_pod_user_namespace
from podkit.pods.security import ContainerSecurity, resolve_container_security, selinux_label

__all__ = [
    "ContainerConfigError",
    "DeviceInjector",
    "ImageDefaults",
    "PodContext",
    "build_container_spec",
    "check_container_config",
    "reads_rootfs",
    "resolve_security",
    "resources_opts",
    "validate_container_config",
]

_CGROUP_MOUNT = oci.Mount(
    destination="/sys/fs/cgroup",
    type="cgroup",
    source="cgroup",
    options=["nosuid", "noexec", "nodev", "relatime", "ro"],
)


class ContainerConfigError(InvalidArgumentError):
    """A container config that cannot be built; the message names the config field."""


class DeviceInjector(Protocol):
    """What the builder needs from a CDI cache (``podkit.cdi.Cache`` satisfies it)."""

    def inject_devices(self, spec: oci.Spec, names: Sequence[str]) -> object:
        """Apply the named CDI devices to ``spec`` (all or nothing)."""
        ...


@attrs.frozen(kw_only=True)
class ImageDefaults:
    """What an image contributes to a container spec (Docker/OCI image config fields)."""

    env: tuple[str, ...] = ()
    entrypoint: tuple[str, ...] = ()
    cmd: tuple[str, ...] = ()
    working_dir: str = ""
    user: str = ""
    name: str = ""


@attrs.frozen(kw_only=True)
class PodContext:
    """What a container needs to know about its pod.

    ``namespace_paths`` maps ``network``/``ipc``/``uts``/``pid``/``user`` to namespace files:
    ``/proc/<pause pid>/ns/<type>`` for a pod with a pause container, or pinned bind mounts.
    """

    id: str
    config: SandboxConfig
    files: SandboxFiles
    namespace_paths: Mapping[str, str]
    hostname: str = ""


def validate_container_config(
    config: ContainerConfig, pod: PodContext, *, apparmor_host: AppArmorHost | None = None
) -> None:
    """Refuse configs containerd refuses, and any string that could not reach its path, argv
    or env (``checks``), before anything is created; its security profiles are looked up.

    ``apparmor_host`` is where AppArmor profiles are looked up (default: this machine);
    validating loads nothing there.
    """
    check_container_config(config, pod)
    sc = config.linux.security_context
    resolve_container_security(
        sc.apparmor, sc.seccomp, privileged=sc.privileged, error=ContainerConfigError,
        apparmor_host=apparmor_host, host_capabilities=(), load=False)


def resolve_security(
    config: ContainerConfig, *, apparmor_host: AppArmorHost | None = None,
    host_capabilities: Sequence[str] | None = None, load: bool = True,
) -> ContainerSecurity:
    """The container's security context resolved on this host (``security``): its AppArmor
    profile (podkit's default loaded when ``load``), seccomp filter and grantable
    capabilities, for :func:`build_container_spec` ``security=``."""
    sc = config.linux.security_context
    return resolve_container_security(
        sc.apparmor, sc.seccomp, privileged=sc.privileged, error=ContainerConfigError,
        apparmor_host=apparmor_host, host_capabilities=host_capabilities, load=load)


def check_container_config(config: ContainerConfig, pod: PodContext) -> None:
    """The checks of ``config`` that need nothing but the config and its pod (no profile
    lookups: :func:`validate_container_config` does those too)."""
    checks.check_container_config(config, pod.config, ContainerConfigError)
    userns.check_container(config, pod.config, ContainerConfigError)
    sc = config.linux.security_context
    _check_capability_names(sc.capabilities)
    if sc.privileged and not pod.config.linux.security_context.privileged:
        raise ContainerConfigError(
            "linux.security_context.privileged: no privileged container allowed in sandbox"
        )
    ns = sc.namespace_options
    if ns.pid == NamespaceMode.TARGET and not ns.target_id:
        raise ContainerConfigError(
            "linux.security_context.namespace_options.target_id: required for pid TARGET"
        )
    for i, m in enumerate(config.mounts):
        if m.recursive_read_only and not m.readonly:
            raise ContainerConfigError(
                f"mounts[{i}]: recursive_read_only needs readonly to be set"
            )
        if m.recursive_read_only and m.propagation != MountPropagation.PROPAGATION_PRIVATE:
            raise ContainerConfigError(
                f"mounts[{i}]: recursive_read_only needs PROPAGATION_PRIVATE"
            )
    for i, d in enumerate(config.devices):
        if not d.permissions or set(d.permissions) - set("rwm"):
            raise ContainerConfigError(
                f"devices[{i}].permissions {quote(d.permissions)}: must be a subset of 'rwm'"
            )


def _process_args(config: ContainerConfig, image: ImageDefaults) -> list[str]:
    """Docker semantics: command replaces entrypoint (and drops cmd); args replace cmd."""
    if config.command:
        args = [*config.command, *config.args]
    elif config.args:
        args = [*image.entrypoint, *config.args]
    else:
        args = [*image.entrypoint, *image.cmd]
    if not args:
        raise ContainerConfigError("command: no command specified")
    return args


def _mount_options(m: Mount, i: int) -> tuple[list[str], str | None]:
    """Bind options and the rootfs propagation a CRI mount needs."""
    options = ["rbind"]
    propagation = None
    if m.propagation == MountPropagation.PROPAGATION_BIDIRECTIONAL:
        options.append("rshared")
        propagation = "rshared"
    elif m.propagation == MountPropagation.PROPAGATION_HOST_TO_CONTAINER:
        options.append("rslave")
        propagation = "rslave"
    else:
        options.append("rprivate")
    if m.recursive_read_only:
        options.append("rro")
    else:
        options.append("ro" if m.readonly else "rw")
    return options, propagation


def _with_cri_mounts(
    config: ContainerConfig, pod: PodContext, host_ipc: bool, readonly: bool
) -> oci.SpecOpt:
    """CRI mounts plus /etc/hostname, /etc/hosts, /etc/resolv.conf, /dev/shm, sorted by depth."""

    own_userns = userns.pod_id_map(pod.config) is not None  # podkit ID-maps the sources

    def opt(spec: oci.Spec) -> None:
        cri: list[oci.Mount] = []
        strongest = {"rshared": 2, "rslave": 1}
        propagation: str | None = None
        for i, m in enumerate(config.mounts):
            options, prop = _mount_options(m, i)
            mount = oci.Mount(
                destination=m.container_path, type="bind", source=m.host_path, options=options
            )
            if (m.uid_mappings or m.gid_mappings) and not own_userns:
                mount.uid_mappings = [_id_mapping(x) for x in m.uid_mappings]
                mount.gid_mappings = [_id_mapping(x) for x in m.gid_mappings]
            cri.append(mount)
            if prop and strongest[prop] > strongest.get(propagation or "", 0):
                propagation = prop
        taken = {posixpath.normpath(m.destination) for m in cri}
        ro_opt = "ro" if readonly else "rw"
        extra: list[oci.Mount] = []
        for dest, source in (
            ("/etc/hostname", pod.files.hostname),
            ("/etc/hosts", pod.files.hosts),
            ("/etc/resolv.conf", pod.files.resolv_conf),
        ):
            if dest not in taken:
                extra.append(
                    oci.Mount(destination=dest, type="bind", source=source,
                              options=["rbind", "rprivate", ro_opt])
                )
        if "/dev/shm" not in taken:
            extra.append(
                oci.Mount(destination="/dev/shm", type="bind",
                          source="/dev/shm" if host_ipc else pod.files.shm,
                          options=["rbind", "rprivate", "rw"])
            )
        user_mounts = sorted(
            [*cri, *extra], key=lambda m: posixpath.normpath(m.destination).count("/")
        )
        overridden = {posixpath.normpath(m.destination) for m in user_mounts}
        dev_given = "/dev" in overridden
        defaults = [
            m for m in spec.mounts or []
            if posixpath.normpath(m.destination) not in overridden
            and not (dev_given and m.destination.startswith("/dev/"))
        ]
        spec.mounts = [*defaults, *user_mounts]
        if "/sys/fs/cgroup" not in overridden:
            spec.mounts.append(oci.Mount(
                destination=_CGROUP_MOUNT.destination, type=_CGROUP_MOUNT.type,
                source=_CGROUP_MOUNT.source, options=list(_CGROUP_MOUNT.options or []),
            ))
        if propagation is not None:
            if spec.linux is None:
                spec.linux = oci.Linux()
            spec.linux.rootfs_propagation = propagation

    return opt


def _id_mapping(m: IDMapping) -> oci.LinuxIDMapping:
    return oci.LinuxIDMapping(container_id=m.container_id, host_id=m.host_id, size=m.length)


_CAPS_FIELD = "linux.security_context.capabilities"


def _with_cri_capabilities(
    cap: Capability | None, *, privileged: bool, current: Sequence[str]
) -> oci.SpecOpt:
    """CRI add/drop lists on the spec's capabilities; ``ALL`` means ``current``."""

    def opt(spec: oci.Spec) -> None:
        if privileged or cap is None:
            return
        caps = spec.process.capabilities if spec.process else None
        base = list((caps.bounding if caps else None) or [])
        resolved = rules.resolve_capabilities(
            base, cap.add_capabilities, cap.drop_capabilities, oci.KNOWN_CAPABILITIES,
            current=current, where=_CAPS_FIELD,
        )
        oci.with_capabilities(resolved)(spec)
        if cap.add_ambient_capabilities:
            oci.with_ambient_capabilities(_ambient(cap, current))(spec)

    return opt


def _ambient(cap: Capability, current: Sequence[str]) -> list[str]:
    return rules.resolve_capabilities(
        [], cap.add_ambient_capabilities, [], oci.KNOWN_CAPABILITIES, current=current,
        where=f"{_CAPS_FIELD}.add_ambient",
    )


def _check_capability_names(cap: Capability | None) -> None:
    """Unknown capability names fail before anything is created, naming the list."""
    if cap is None:
        return
    try:
        _with_cri_capabilities(cap, privileged=False, current=())(oci.Spec())
    except InvalidArgumentError as e:
        raise ContainerConfigError(str(e)) from None


def _without_ambient_caps(spec: oci.Spec) -> None:
    if spec.process is not None and spec.process.capabilities is not None:
        spec.process.capabilities.ambient = None


def resources_opts(res: LinuxContainerResources, swap_accounting: bool | None = None,
                   ) -> list[oci.SpecOpt]:
    """The spec options setting the cgroup limits ``res`` asks for (only the given ones);
    memory and swap by containerd's rule (``oci.with_memory_and_swap``), ``swap_accounting``
    defaulting to this host's (``cgroups.swap_available()``)."""
    opts: list[oci.SpecOpt] = []
    if res.cpu_period:
        opts.append(oci.with_cpu_period(res.cpu_period))
    if res.cpu_quota:
        opts.append(oci.with_cpu_quota(res.cpu_quota))
    if res.cpu_shares:
        opts.append(oci.with_cpu_shares(res.cpu_shares))
    if res.cpuset_cpus:
        opts.append(oci.with_cpus(res.cpuset_cpus))
    if res.cpuset_mems:
        opts.append(oci.with_cpus_mems(res.cpuset_mems))
    if res.memory_limit_in_bytes or res.memory_swap_limit_in_bytes:
        opts.append(oci.with_memory_and_swap(
            res.memory_limit_in_bytes, res.memory_swap_limit_in_bytes,
            swap_accounting=cgroups.swap_available() if swap_accounting is None
            else swap_accounting))
    if res.hugepage_limits:
        opts.append(
            oci.with_hugepage_limits({h.page_size: h.limit for h in res.hugepage_limits})
        )
    if res.unified:
        opts.append(oci.with_unified(res.unified))
    return opts


def build_container_spec(
    config: ContainerConfig,
    pod: PodContext,
    *,
    id: str,
    rootfs: str,
    image: ImageDefaults | None = None,
    target_pid_namespace: str | None = None,
    oom_score_floor: int | None = None,
    cdi: DeviceInjector | None = None,
    container_annotations: Sequence[str] = (),
    pod_annotations: Sequence[str] = (),
    cgroup_namespace: str = "podkit",
    apparmor_host: AppArmorHost | None = None,
    host_capabilities: Sequence[str] | None = None,
    security: ContainerSecurity | None = None,
    cgroup_driver: str | None = None,
    checked: bool = False,
) -> oci.Spec:
    """The OCI spec of an application container in ``pod`` (containerd's container spec).

    ``rootfs`` is the container's root directory (absolute: user names are resolved in it);
    ``target_pid_namespace`` is the pid namespace file of the TARGET container when
    ``namespace_options.pid`` is TARGET; ``cdi`` resolves ``cdi_devices`` and ``cdi.k8s.io/``
    annotations, applied last. ``security`` is the container's resolved security context
    (:func:`resolve_security`); when not given it is resolved here: AppArmor profiles are
    checked against ``apparmor_host`` (default: this machine), where podkit's default profile
    is loaded if it is needed, and ``host_capabilities`` are what the runtime started from
    here can grant, which ``ALL`` and ``privileged`` resolve to (default:
    ``oci.current_capabilities()`` of this process). ``cgroup_driver`` (``cgroupfs``,
    ``systemd``) gives the container its driver's cgroups path under the pod's
    ``cgroup_parent``; without one, containerd's rule (``rules.cgroups_path``). ``checked``:
    the caller ran :func:`check_container_config` on this config and pod already.
    """
    if not checked:
        check_container_config(config, pod)
    if security is None:
        security = resolve_security(config, apparmor_host=apparmor_host,
                                    host_capabilities=host_capabilities)
    img = image or ImageDefaults()
    opts = [
        *_process_opts(config, pod, img, rootfs),
        *_file_opts(config, pod),
        *_capability_opts(config, list(security.capabilities)),
        *_settings_opts(config, pod, id, img, oom_score_floor, container_annotations,
                        pod_annotations, cgroup_driver),
        *_namespace_opts(config, pod, target_pid_namespace),
        *_platform_opts(config, img, rootfs, security, cdi),
        *_mapped_user_opts(config, pod, img),
        oci.with_minimum_oci_version(),
    ]
    spec = oci.default_spec(id, cgroup_namespace)  # a new one: changed in place, not copied
    oci.compose(*opts)(spec)
    return spec


def _process_opts(config: ContainerConfig, pod: PodContext, img: ImageDefaults,
                  rootfs: str) -> list[oci.SpecOpt]:
    """Root, argv, working dir, tty and env (HOSTNAME, the image's, the config's)."""
    opts: list[oci.SpecOpt] = [
        oci.without_run_mount(),
        rules.without_default_security_settings,
        oci.with_rootfs_path(rootfs),
        oci.with_process_args(*_process_args(config, img)),
        oci.with_default_path_env(),
        oci.with_new_privileges(),
    ]
    cwd = config.working_dir or img.working_dir
    if cwd:
        opts.append(oci.with_process_cwd(cwd))
    if config.tty:
        opts.append(oci.with_tty())
    hostname = pod.hostname or pod.config.hostname or rules.host_hostname()
    opts.append(oci.with_env(rules.merge_env(
        [f"HOSTNAME={hostname}"], img.env, [f"{kv.key}={kv.value}" for kv in config.envs])))
    return opts


def _file_opts(config: ContainerConfig, pod: PodContext) -> list[oci.SpecOpt]:
    """Mounts, masked and read-only paths, devices."""
    sc = config.linux.security_context
    host_ipc = pod.config.linux.security_context.namespace_options.ipc == NamespaceMode.NODE
    opts: list[oci.SpecOpt] = [
        _with_cri_mounts(config, pod, host_ipc, sc.readonly_rootfs),
        oci.with_masked_paths(list(sc.masked_paths or ())),
        oci.with_readonly_paths(list(sc.readonly_paths or ())),
    ]
    if sc.masked_paths is None:
        opts.append(oci.with_masked_paths(list(oci.DEFAULT_MASKED_PATHS)))
    if sc.readonly_paths is None:
        opts.append(oci.with_readonly_paths(list(oci.DEFAULT_READONLY_PATHS)))
    for d in config.devices:
        opts.append(oci.with_devices(d.host_path, d.container_path, d.permissions))
    return opts


def _capability_opts(config: ContainerConfig, current: list[str]) -> list[oci.SpecOpt]:
    """The CRI capability lists, or everything ``current`` grants when privileged."""
    sc = config.linux.security_context
    opts = [_with_cri_capabilities(sc.capabilities, privileged=sc.privileged, current=current)]
    if sc.privileged:
        opts += [
            oci.with_privileged(),
            oci.with_capabilities(current),  # what this process can grant, not all known
            oci.with_devices("/dev", "/dev", "rwm"),
            oci.with_all_devices_allowed(),
        ]
    opts.append(_without_ambient_caps)
    if sc.capabilities is not None and sc.capabilities.add_ambient_capabilities:
        opts.append(oci.with_ambient_capabilities(_ambient(sc.capabilities, current)))
    return opts


def _settings_opts(config: ContainerConfig, pod: PodContext, id: str, img: ImageDefaults,
                   oom_score_floor: int | None, container_annotations: Sequence[str],
                   pod_annotations: Sequence[str], cgroup_driver: str | None,
                   ) -> list[oci.SpecOpt]:
    """SELinux label, no_new_privs, read-only root, resources, OOM score, cgroup, annotations."""
    sc = config.linux.security_context
    opts: list[oci.SpecOpt] = []
    label = selinux_label(sc.selinux_options or pod.config.linux.security_context.selinux_options)
    if label and not sc.privileged:
        opts.append(oci.with_selinux_label(label))
    if sc.no_new_privs:
        opts.append(oci.with_no_new_privileges())
    if sc.readonly_rootfs:
        opts.append(oci.with_rootfs_readonly())
    res = config.linux.resources
    if res is not None:
        opts += resources_opts(res)
        if res.oom_score_adj:
            opts.append(oci.with_oom_score_adj(
                rules.clamp_oom_score_adj(res.oom_score_adj, oom_score_floor)))
    parent = pod.config.linux.cgroup_parent
    if cgroup_driver is not None:
        try:
            opts.append(oci.with_cgroup(rules.cgroups_path(parent, id, cgroup_driver)))
        except InvalidArgumentError as exc:
            raise ContainerConfigError(f"pod linux.{exc}") from None
    elif parent:
        opts.append(oci.with_cgroup(rules.cgroups_path(parent, id)))
    opts.append(oci.with_annotations({
        **rules.matching(pod.config.annotations, pod_annotations),
        **rules.matching(config.annotations, container_annotations),
        **rules.container_annotations(pod.id, config.metadata.name, img.name or config.image,
                                      pod.config),
    }))
    return opts


def _namespace_opts(config: ContainerConfig, pod: PodContext,
                    target_pid_namespace: str | None) -> list[oci.SpecOpt]:
    """Always join the pod's network, ipc and uts; pid per mode; user when POD."""
    ns = config.linux.security_context.namespace_options
    pod_ns = pod.config.linux.security_context.namespace_options
    paths = pod.namespace_paths
    opts: list[oci.SpecOpt] = []
    for t in ("network", "ipc", "uts"):
        if t in paths:
            opts.append(oci.with_linux_namespace(t, paths[t]))
        else:
            opts.append(oci.with_host_namespace(t))
    if ns.pid == NamespaceMode.NODE or pod_ns.pid == NamespaceMode.NODE:
        opts.append(oci.with_host_namespace("pid"))
    elif ns.pid == NamespaceMode.POD:
        if "pid" not in paths:
            raise ContainerConfigError(
                "linux.security_context.namespace_options.pid: POD needs the pod's pid namespace"
            )
        opts.append(oci.with_linux_namespace("pid", paths["pid"]))
    elif ns.pid == NamespaceMode.TARGET:
        if not target_pid_namespace:
            raise ContainerConfigError(
                f"namespace_options.target_id {ns.target_id!r}: target container is not running"
            )
        opts.append(oci.with_linux_namespace("pid", target_pid_namespace))
    ids = userns.pod_id_map(pod.config)
    if ids is not None:
        opts.append(with_pod_user_namespace(ids, paths.get("user")))
    return opts


def reads_rootfs(config: ContainerConfig, image: ImageDefaults | None) -> bool:
    """Whether :func:`build_container_spec` reads the rootfs: only for a user (the config's or
    the image's) to resolve in its passwd and group files."""
    return bool(_user_string(config.linux.security_context) or (image and image.user))


def _platform_opts(config: ContainerConfig, img: ImageDefaults, rootfs: str,
                   security: ContainerSecurity, cdi: DeviceInjector | None) -> list[oci.SpecOpt]:
    """containerd's platformSpecOpts: user and groups, AppArmor, seccomp, then CDI last."""
    sc = config.linux.security_context
    opts: list[oci.SpecOpt] = []
    user = _user_string(sc) or img.user
    if user:
        opts.append(oci.with_user(user, rootfs=rootfs))
        if sc.supplemental_groups_policy == SupplementalGroupsPolicy.MERGE:
            opts.append(oci.with_additional_gids(user, rootfs=rootfs))
    if sc.supplemental_groups:
        opts.append(oci.with_append_additional_groups(*(str(g) for g in sc.supplemental_groups)))
    if security.apparmor_profile:  # after with_privileged: a Localhost profile applies even then
        opts.append(oci.with_apparmor_profile(security.apparmor_profile))
    seccomp = security.seccomp.opt()
    if seccomp is not None:  # after the capabilities: the default profile follows them
        opts.append(seccomp)
    devices = devices_from_request(config.cdi_devices, config.annotations)
    if devices:
        if cdi is None:
            raise ContainerConfigError(
                f"CDI devices {devices} requested but no CDI cache is configured"
            )
        injector = cdi

        def with_cdi_devices(spec: oci.Spec) -> None:
            injector.inject_devices(spec, devices)

        opts.append(with_cdi_devices)
    return opts


def _mapped_user_opts(config: ContainerConfig, pod: PodContext,
                      img: ImageDefaults) -> list[oci.SpecOpt]:
    """In a pod with its own user namespace: refuse a process user (resolved from the config
    or the image) whose IDs the pod's map lacks."""
    ids = userns.pod_id_map(pod.config)
    if ids is None:
        return []
    source = ("linux.security_context run_as_user/run_as_username/run_as_group"
              if _user_string(config.linux.security_context) else
              f"the image's User {img.user!r}" if img.user else "the default user")

    def opt(spec: oci.Spec) -> None:
        user = spec.process.user if spec.process is not None else None
        if user is None:
            return
        missing = userns.unmapped_user(user.uid or 0, user.gid or 0, user.additional_gids or (),
                                       ids)
        if missing:
            r = ids.uids[0]
            raise ContainerConfigError(
                f"{missing} of the process user (from {source}) is not mapped in the pod's "
                f"user namespace (container IDs {r.container_id}-{r.container_id + r.size - 1})")

    return [opt]


def _user_string(sc: LinuxContainerSecurityContext) -> str:
    """containerd's ``generateUserString``: username or uid, plus ``:gid`` when a group is set."""
    if sc.run_as_username:
        user = sc.run_as_username
    elif sc.run_as_user is not None:
        user = str(sc.run_as_user)
    else:
        if sc.run_as_group is not None:
            raise ContainerConfigError(
                "linux.security_context.run_as_group: needs run_as_user or run_as_username"
            )
        return ""
    if sc.run_as_group is not None:
        user += f":{sc.run_as_group}"
    return user
