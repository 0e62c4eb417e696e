"""The pause container builder: ``build_sandbox_spec`` (pure) from a CRI-shaped ``SandboxConfig``.

``build_sandbox_spec`` turns a pod config into the OCI spec of its pause container, following
containerd's CRI plugin rule for rule, as a list of ``oci`` spec options read top to bottom.
"""

from __future__ import annotations

import os
import posixpath
from collections.abc import Sequence
from pathlib import Path

import attrs

from podkit import apparmor, oci
from podkit.errors import InvalidArgumentError
from podkit.pods import checks, rules
from podkit.pods.config import (
    LinuxContainerResources,
    NamespaceMode,
    ProfileType,
    SandboxConfig,
    SecurityProfile,
    SELinuxOption,
)

__all__ = [
    "SandboxConfigError",
    "SandboxFiles",
    "apparmor_opt",
    "build_sandbox_spec",
    "seccomp_opt",
    "selinux_label",
    "validate_sandbox_config",
]

SANDBOX_OOM_SCORE_ADJ = -998
"""The OOM score containerd gives pause containers (kubelet's pod-infra value)."""

DEFAULT_SANDBOX_CPU_SHARES = 2
_SHM_OPTIONS = ["rbind", "ro", "nosuid", "nodev", "noexec"]
_POD_NAMESPACE_MODES = (NamespaceMode.POD, NamespaceMode.NODE)


class SandboxConfigError(InvalidArgumentError):
    """A pod config that cannot be built; the message names the config field."""


@attrs.frozen(kw_only=True)
class SandboxFiles:
    """Where a sandbox's per-pod files live on the host (written by the manager)."""

    hostname: str
    hosts: str
    resolv_conf: str
    shm: str

    @classmethod
    def under(cls, directory: str | os.PathLike[str]) -> SandboxFiles:
        """The standard layout: ``hostname``, ``hosts``, ``resolv.conf``, ``shm`` under a dir."""
        d = Path(directory)
        return cls(
            hostname=str(d / "hostname"),
            hosts=str(d / "hosts"),
            resolv_conf=str(d / "resolv.conf"),
            shm=str(d / "shm"),
        )


def selinux_label(options: SELinuxOption | None) -> str:
    """``user:role:type:level`` from CRI SELinux options; ``""`` when none are set."""
    if options is None or not any((options.user, options.role, options.type, options.level)):
        return ""
    parts = [options.user, options.role, options.type]
    if options.level:
        parts.append(options.level)
    return ":".join(parts)


_SECCOMP_FIELD = "linux.security_context.seccomp"


def seccomp_opt(
    profile: SecurityProfile | None,
    *,
    privileged: bool,
    error: type[InvalidArgumentError] = SandboxConfigError,
) -> oci.SpecOpt | None:
    """The seccomp option for a CRI ``SecurityProfile`` (containerd's ``generateSeccompSpecOpts``).

    RuntimeDefault: podkit's default profile (``oci.with_default_seccomp``, computed from the
    capabilities when applied, so apply it after them); Localhost: the OCI ``linux.seccomp``
    file at ``localhost_ref`` (an absolute path), read and checked now; Unconfined, no profile
    or ``privileged``: no filter (``None``). Bad profiles raise ``error`` naming the field.
    """
    if privileged or profile is None:
        return None
    ref = profile.localhost_ref
    kind = profile.profile_type
    if kind != ProfileType.LOCALHOST and ref:
        raise error(
            f"{_SECCOMP_FIELD}.localhost_ref {ref!r}: only valid with profile_type LOCALHOST"
        )
    if kind == ProfileType.UNCONFINED:
        return None
    if kind == ProfileType.RUNTIME_DEFAULT:
        return oci.with_default_seccomp()
    if kind != ProfileType.LOCALHOST:
        raise error(f"{_SECCOMP_FIELD}.profile_type {kind!r}: unknown profile type")
    if not ref:
        raise error(f"{_SECCOMP_FIELD}.localhost_ref: required for a Localhost profile")
    path = ref.removeprefix("localhost/")  # the deprecated string form, as containerd allows
    if not posixpath.isabs(path):
        raise error(f"{_SECCOMP_FIELD}.localhost_ref {ref!r}: must be an absolute path")
    try:
        return oci.with_seccomp_profile(path)
    except oci.SeccompProfileError as e:
        raise error(f"{_SECCOMP_FIELD}.localhost_ref {ref!r}: {e}") from e


_APPARMOR_FIELD = "linux.security_context.apparmor"


def apparmor_opt(
    profile: SecurityProfile | None,
    *,
    privileged: bool,
    host: apparmor.AppArmorHost | None = None,
    error: type[InvalidArgumentError] = SandboxConfigError,
) -> oci.SpecOpt | None:
    """The AppArmor option for a container's CRI ``SecurityProfile`` (containerd's
    ``generateApparmorSpecOpts``); ``host`` defaults to this machine (``apparmor.HOST``).

    Unset or RuntimeDefault: podkit's default profile (``apparmor.DEFAULT_PROFILE``, loaded on
    the host when the option is applied if the kernel does not list it yet), none when
    ``privileged``; Localhost: the loaded profile named by ``localhost_ref`` (a leading
    ``localhost/`` is trimmed); Unconfined: none. On a host without AppArmor an unset profile
    means none and anything but Unconfined is refused. Bad profiles raise ``error`` naming the
    field; host faults (parser missing, profiles list unreadable) raise ``apparmor.AppArmorError``.
    """
    host = host or apparmor.HOST
    kind = profile.profile_type if profile is not None else None
    ref = profile.localhost_ref if profile is not None else ""
    if kind is not None and kind != ProfileType.LOCALHOST and ref:
        raise error(
            f"{_APPARMOR_FIELD}.localhost_ref {ref!r}: only valid with profile_type LOCALHOST"
        )
    if kind is not None and kind not in (
        ProfileType.RUNTIME_DEFAULT, ProfileType.UNCONFINED, ProfileType.LOCALHOST
    ):
        raise error(f"{_APPARMOR_FIELD}.profile_type {kind!r}: unknown profile type")
    if not host.enabled():
        if kind is None or kind == ProfileType.UNCONFINED:
            return None
        raise error(
            f"{_APPARMOR_FIELD}: AppArmor is not enabled on this host; profile_type "
            f"{kind.name} needs it (leave the profile unset or use UNCONFINED)"
        )
    if kind == ProfileType.UNCONFINED:
        return None
    if kind == ProfileType.LOCALHOST:
        name = ref.removeprefix("localhost/")  # the deprecated string form, as containerd trims
        if not name:
            raise error(f"{_APPARMOR_FIELD}.localhost_ref: required for a Localhost profile")
        if name not in host.loaded_profiles():
            raise error(
                f"{_APPARMOR_FIELD}.localhost_ref {ref!r}: AppArmor profile {name!r} is not "
                f"loaded (not listed in {host.profiles_file})"
            )
        return oci.with_apparmor_profile(name)
    if privileged:  # unset or RuntimeDefault
        return None
    if not host.is_loaded(apparmor.DEFAULT_PROFILE):
        host.find_parser()  # it will have to be loaded: fail now if it cannot be
    return _with_default_apparmor(host)


def _with_default_apparmor(host: apparmor.AppArmorHost) -> oci.SpecOpt:
    def opt(spec: oci.Spec) -> None:
        host.ensure_default_profile(apparmor.DEFAULT_PROFILE)
        oci.with_apparmor_profile(apparmor.DEFAULT_PROFILE)(spec)

    return opt


def validate_sandbox_config(config: SandboxConfig) -> None:
    """Refuse configs containerd refuses, and any string that could not reach its file, argv
    or CNI arg (``_config_checks``), before anything is created."""
    _validated(config)


def _validated(config: SandboxConfig) -> oci.SpecOpt | None:
    """Check ``config``; its seccomp option (a profile file is read once, here)."""
    checks.check_sandbox_config(config, SandboxConfigError)
    ns = config.linux.security_context.namespace_options
    for field in ("network", "ipc"):
        mode = getattr(ns, field)
        if mode not in _POD_NAMESPACE_MODES:
            raise SandboxConfigError(
                f"linux.security_context.namespace_options.{field}: {mode.name} is only valid "
                "for containers; a pod uses POD or NODE"
            )
    if ns.pid == NamespaceMode.TARGET:
        raise SandboxConfigError(
            "linux.security_context.namespace_options.pid: TARGET is only valid for containers"
        )
    userns = ns.userns_options
    if userns is not None and userns.mode not in (NamespaceMode.NODE, NamespaceMode.POD):
        raise SandboxConfigError(
            f"linux.security_context.namespace_options.userns_options.mode: {userns.mode.name} "
            "is not supported (use NODE or POD)"
        )
    if userns is not None and userns.mode == NamespaceMode.POD:
        if len(userns.uids) != 1 or len(userns.gids) != 1:
            raise SandboxConfigError(
                "linux.security_context.namespace_options.userns_options: POD mode needs exactly "
                "one uid and one gid mapping"
            )
        for m in (*userns.uids, *userns.gids):
            if m.length < 1:
                raise SandboxConfigError(
                    f"userns_options mapping {m!r}: length must be at least 1"
                )
    for pm in config.port_mappings:
        if not 0 < pm.container_port < 65536 or not 0 <= pm.host_port < 65536:
            raise SandboxConfigError(f"port_mappings: invalid port in {pm!r}")
    sc = config.linux.security_context
    return seccomp_opt(sc.seccomp, privileged=sc.privileged)  # a bad profile fails here


def _resource_annotations(res: LinuxContainerResources | None) -> dict[str, str]:
    if res is None:
        return {}
    return {
        "io.kubernetes.cri.sandbox-cpu-period": str(res.cpu_period),
        "io.kubernetes.cri.sandbox-cpu-quota": str(res.cpu_quota),
        "io.kubernetes.cri.sandbox-cpu-shares": str(res.cpu_shares),
        "io.kubernetes.cri.sandbox-memory": str(res.memory_limit_in_bytes),
    }


def build_sandbox_spec(
    config: SandboxConfig,
    *,
    id: str,
    files: SandboxFiles,
    args: Sequence[str] = ("/pause",),
    env: Sequence[str] = (),
    cwd: str = "",
    rootfs: str = "rootfs",
    netns_path: str | None = None,
    userns_path: str | None = None,
    pause_image: str = "",
    oom_score_floor: int | None = None,
    pod_annotations: Sequence[str] = (),
    cgroup_namespace: str = "podkit",
) -> oci.Spec:
    """The OCI spec of a pod's pause container (containerd's ``sandboxContainerSpec``).

    ``files`` are the hostname/hosts/resolv.conf/shm paths the manager prepares; ``netns_path``
    is the pinned network namespace (required unless the pod uses the host network);
    ``oom_score_floor`` clamps the pause's OOM score when lowering it is not permitted.
    The pause gets no AppArmor profile, whatever ``security_context.apparmor`` says (containerd:
    the sandbox security context does not provide one).
    """
    seccomp = _validated(config)
    if not args:
        raise SandboxConfigError("pause command: no command specified")
    sc = config.linux.security_context
    ns = sc.namespace_options
    host_network = ns.network == NamespaceMode.NODE
    host_ipc = ns.ipc == NamespaceMode.NODE
    if not host_network and not netns_path:
        raise SandboxConfigError("a pod network namespace path is required unless network is NODE")

    opts: list[oci.SpecOpt] = [
        oci.without_run_mount(),
        rules.without_default_security_settings,
        oci.with_rootfs_path(rootfs),
        oci.with_env(list(env)),
        oci.with_rootfs_readonly(),
        oci.with_process_args(*args),
    ]
    if config.hostname:
        opts.append(oci.with_hostname(config.hostname))
    if cwd:
        opts.append(oci.with_process_cwd(cwd))
    if config.linux.cgroup_parent:
        opts.append(oci.with_cgroup(rules.cgroups_path(config.linux.cgroup_parent, id)))

    # Namespaces: host network also means the host's UTS namespace.
    if host_network:
        opts += [oci.with_host_namespace("network"), oci.with_host_namespace("uts")]
    else:
        assert netns_path is not None
        opts.append(oci.with_namespace_path("network", netns_path))
    if ns.pid == NamespaceMode.NODE:
        opts.append(oci.with_host_namespace("pid"))
    if host_ipc:
        opts.append(oci.with_host_namespace("ipc"))
    userns = ns.userns_options
    if userns is not None and userns.mode == NamespaceMode.POD:
        opts.append(
            oci.with_user_namespace(
                [(m.container_id, m.host_id, m.length) for m in userns.uids],
                [(m.container_id, m.host_id, m.length) for m in userns.gids],
            )
        )
        if userns_path:
            opts.append(oci.with_namespace_path("user", userns_path))

    shm_source = "/dev/shm" if host_ipc else files.shm
    opts += [
        oci.without_mounts("/dev/shm"),
        oci.with_mounts(
            [
                oci.Mount(
                    destination="/dev/shm", type="bind", source=shm_source,
                    options=list(_SHM_OPTIONS),
                ),
                oci.Mount(
                    destination="/etc/resolv.conf", type="bind", source=files.resolv_conf,
                    options=list(_SHM_OPTIONS),
                ),
            ]
        ),
    ]

    label = selinux_label(sc.selinux_options)
    if label and not sc.privileged:
        opts.append(oci.with_selinux_label(label))
    if sc.supplemental_groups:
        opts.append(oci.with_append_additional_groups(*(str(g) for g in sc.supplemental_groups)))
    if config.linux.sysctls:
        opts.append(oci.with_sysctls(config.linux.sysctls))
    opts.append(oci.with_cpu_shares(DEFAULT_SANDBOX_CPU_SHARES))
    opts.append(
        oci.with_oom_score_adj(
            rules.clamp_oom_score_adj(SANDBOX_OOM_SCORE_ADJ, oom_score_floor)
        )
    )
    opts.append(
        oci.with_annotations(
            {
                **rules.matching(config.annotations, pod_annotations),
                **_resource_annotations(config.linux.resources),
                **rules.sandbox_annotations(id, config, pause_image),
            }
        )
    )
    if sc.privileged:
        opts += [oci.with_selinux_label(""), oci.with_writeable_sysfs()]
    if sc.run_as_user is not None:
        user = str(sc.run_as_user)
        if sc.run_as_group is not None:
            user += f":{sc.run_as_group}"
        opts.append(oci.with_user(user))
    elif sc.run_as_group is not None:
        raise SandboxConfigError(
            "linux.security_context.run_as_group: needs run_as_user to be set"
        )

    # seccomp last (before the version): the default profile follows the final capabilities.
    if seccomp is not None:
        opts.append(seccomp)

    opts.append(oci.with_minimum_oci_version())
    return oci.generate(oci.default_spec(id, cgroup_namespace), *opts)
