"""The pause container builder: ``build_sandbox_spec`` (pure) from a CRI-shaped ``SandboxConfig``.

``build_sandbox_spec`` turns a pod config into the OCI spec of its pause container, following
containerd's CRI plugin rule for rule, as a list of ``oci`` spec options read top to bottom.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import attrs

from podkit import apparmor, idmap, oci
from podkit.errors import InvalidArgumentError
from podkit.pods import checks, rules, security, userns
from podkit.pods.config import (
    LinuxContainerResources,
    NamespaceMode,
    ProfileType,
    SandboxConfig,
    SecurityProfile,
)
from podkit.pods.security import selinux_label

__all__ = [
    "SandboxConfigError",
    "SandboxFiles",
    "apparmor_opt",
    "build_sandbox_spec",
    "pod_cgroups_path",
    "seccomp_opt",
    "selinux_label",
    "validate_sandbox_config",
    "with_pod_user_namespace",
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
    (``security.resolve_seccomp`` gives the choice as a value.)
    """
    return security.resolve_seccomp(profile, privileged=privileged, error=error).opt()


def apparmor_opt(
    profile: SecurityProfile | None,
    *,
    privileged: bool,
    host: apparmor.AppArmorHost | None = None,
    error: type[InvalidArgumentError] = SandboxConfigError,
) -> oci.SpecOpt | None:
    """The AppArmor option for a container's CRI ``SecurityProfile`` (containerd's
    ``generateApparmorSpecOpts``); ``host`` defaults to this machine (``apparmor.HOST``).

    The rules are ``security.resolve_apparmor``'s; podkit's default profile is loaded on the
    host when the option is applied (if the kernel does not list it yet). Bad profiles raise
    ``error`` naming the field; host faults raise ``apparmor.AppArmorError``.
    """
    name = security.resolve_apparmor(profile, privileged=privileged, host=host, error=error,
                                     load=False)
    if not name:
        return None
    if profile is not None and profile.profile_type == ProfileType.LOCALHOST:
        return oci.with_apparmor_profile(name)
    return _with_default_apparmor(host or apparmor.HOST)


def _with_default_apparmor(host: apparmor.AppArmorHost) -> oci.SpecOpt:
    def opt(spec: oci.Spec) -> None:
        host.ensure_default_profile(apparmor.DEFAULT_PROFILE)
        oci.with_apparmor_profile(apparmor.DEFAULT_PROFILE)(spec)

    return opt


def validate_sandbox_config(config: SandboxConfig) -> None:
    """Refuse configs containerd refuses, and any string that could not reach its file, argv
    or CNI arg (``checks``), before anything is created; a Localhost seccomp profile is read
    and checked too."""
    _check(config)
    sc = config.linux.security_context
    security.resolve_seccomp(sc.seccomp, privileged=sc.privileged, error=SandboxConfigError)


def _check(config: SandboxConfig) -> None:
    """The checks of ``config`` that need nothing but the config."""
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
    userns.check_sandbox(config, SandboxConfigError)
    for pm in config.port_mappings:
        if not 0 < pm.container_port < 65536 or not 0 <= pm.host_port < 65536:
            raise SandboxConfigError(f"port_mappings: invalid port in {pm!r}")


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
    seccomp: security.Seccomp | None = None,
    cgroup_driver: str | None = None,
) -> oci.Spec:
    """The OCI spec of a pod's pause container (containerd's ``sandboxContainerSpec``).

    ``files`` are the hostname/hosts/resolv.conf/shm paths the manager prepares; ``netns_path``
    is the pinned network namespace (required unless the pod uses the host network);
    ``userns_path`` the pinned user namespace of a pod with one (``userns_options`` POD: the
    namespace that owns ``netns_path``);
    ``oom_score_floor`` clamps the pause's OOM score when lowering it is not permitted.
    ``seccomp`` is the pod's resolved seccomp choice (``security.resolve_seccomp``; resolved
    here, reading a Localhost profile, when not given): with it the build does no I/O.
    The pause gets no AppArmor profile, whatever ``security_context.apparmor`` says (containerd:
    the sandbox security context does not provide one).
    ``cgroup_driver`` (``cgroupfs``, ``systemd``) gives the pause its driver's cgroups path
    (:func:`pod_cgroups_path`); without one, a ``cgroup_parent`` follows containerd's rule
    (``rules.cgroups_path``) and no parent leaves ``/<cgroup_namespace>/<id>``.
    """
    _check(config)
    sc = config.linux.security_context
    if seccomp is None:
        seccomp = security.resolve_seccomp(sc.seccomp, privileged=sc.privileged,
                                           error=SandboxConfigError)
    if not args:
        raise SandboxConfigError("pause command: no command specified")
    ns = sc.namespace_options
    if ns.network != NamespaceMode.NODE and not netns_path:
        raise SandboxConfigError("a pod network namespace path is required unless network is NODE")
    opts = [
        *_pause_process(config, id, args=args, env=env, cwd=cwd, rootfs=rootfs,
                        cgroup_driver=cgroup_driver),
        *_pause_namespaces(config, netns_path, userns_path),
        *_pause_mounts(files, host_ipc=ns.ipc == NamespaceMode.NODE),
        *_pause_settings(config, id, pause_image, oom_score_floor, pod_annotations),
    ]
    # seccomp last (before the version): the default profile follows the final capabilities.
    opt = seccomp.opt()
    if opt is not None:
        opts.append(opt)
    opts.append(oci.with_minimum_oci_version())
    return oci.generate(oci.default_spec(id, cgroup_namespace), *opts)


def pod_cgroups_path(config: SandboxConfig, id: str, driver: str) -> str:
    """``linux.cgroupsPath`` of ``id`` under the pod's ``cgroup_parent`` for ``driver``;
    ``SandboxConfigError`` naming the parent, the driver and both forms when it cannot."""
    try:
        return rules.cgroups_path(config.linux.cgroup_parent, id, driver)
    except InvalidArgumentError as exc:
        raise SandboxConfigError(f"linux.{exc}") from None


def _pause_process(config: SandboxConfig, id: str, *, args: Sequence[str], env: Sequence[str],
                   cwd: str, rootfs: str, cgroup_driver: str | None) -> list[oci.SpecOpt]:
    """Root, process, hostname and cgroup of the pause."""
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
    if cgroup_driver is not None:
        opts.append(oci.with_cgroup(pod_cgroups_path(config, id, cgroup_driver)))
    elif config.linux.cgroup_parent:
        opts.append(oci.with_cgroup(rules.cgroups_path(config.linux.cgroup_parent, id)))
    return opts


def _pause_namespaces(config: SandboxConfig, netns_path: str | None,
                      userns_path: str | None) -> list[oci.SpecOpt]:
    """The pod's namespaces: host network also means the host's UTS namespace."""
    ns = config.linux.security_context.namespace_options
    opts: list[oci.SpecOpt] = []
    if ns.network == NamespaceMode.NODE:
        opts += [oci.with_host_namespace("network"), oci.with_host_namespace("uts")]
    else:
        assert netns_path is not None
        opts.append(oci.with_namespace_path("network", netns_path))
    if ns.pid == NamespaceMode.NODE:
        opts.append(oci.with_host_namespace("pid"))
    if ns.ipc == NamespaceMode.NODE:
        opts.append(oci.with_host_namespace("ipc"))
    ids = userns.pod_id_map(config)
    if ids is not None:
        opts.append(with_pod_user_namespace(ids, userns_path))
    return opts


def with_pod_user_namespace(ids: idmap.IDMap, path: str | None) -> oci.SpecOpt:
    """The pod's user namespace: its maps, joined at ``path`` (its pin) when given."""
    opts = [oci.with_user_namespace([(r.container_id, r.host_id, r.size) for r in ids.uids],
                                    [(r.container_id, r.host_id, r.size) for r in ids.gids])]
    if path:
        opts.append(oci.with_namespace_path("user", path))
    return oci.compose(*opts)


def _pause_mounts(files: SandboxFiles, *, host_ipc: bool) -> list[oci.SpecOpt]:
    """/dev/shm (the pod's tmpfs, or the host's) and resolv.conf, bind-mounted read-only."""
    shm_source = "/dev/shm" if host_ipc else files.shm
    return [
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


def _pause_settings(config: SandboxConfig, id: str, pause_image: str,
                    oom_score_floor: int | None,
                    pod_annotations: Sequence[str]) -> list[oci.SpecOpt]:
    """SELinux label, groups, sysctls, CPU shares, OOM score, annotations, privileged, user
    (in containerd's order)."""
    sc = config.linux.security_context
    opts: list[oci.SpecOpt] = []
    label = security.selinux_label(sc.selinux_options)
    if label and not sc.privileged:
        opts.append(oci.with_selinux_label(label))
    if sc.supplemental_groups:
        opts.append(oci.with_append_additional_groups(*(str(g) for g in sc.supplemental_groups)))
    if config.linux.sysctls:
        opts.append(oci.with_sysctls(config.linux.sysctls))
    opts.append(oci.with_cpu_shares(DEFAULT_SANDBOX_CPU_SHARES))
    opts.append(oci.with_oom_score_adj(
        rules.clamp_oom_score_adj(SANDBOX_OOM_SCORE_ADJ, oom_score_floor)))
    opts.append(oci.with_annotations({
        **rules.matching(config.annotations, pod_annotations),
        **_resource_annotations(config.linux.resources),
        **rules.sandbox_annotations(id, config, pause_image),
    }))
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
    return opts
