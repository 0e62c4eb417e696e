"""Composable spec options: tiny functions that each change one concept of a ``Spec``.

A ``SpecOpt`` is ``Callable[[Spec], None]`` that edits the spec in place. ``generate(base, *opts)``
applies options in order to a copy of ``base`` (later options win), so building a container
spec reads top to bottom, as with containerd's ``pkg/oci`` ``SpecOpts``::

    spec = generate(default_spec("web"), with_process_args("sh", "-c", "id"), with_hostname("web"))

Every ``with_*`` function checks its arguments when called and returns the option; an option
that cannot apply raises a ``SpecOptError`` (an ``InvalidArgumentError``) naming the value. The
spec sections an option needs (``process``, ``linux``, ``linux.resources``, ...) are created when
absent. Options that read the host (devices, current capabilities) or the container's rootfs
(user and group names) take the thing they read as a parameter, so tests can replace it.

The options live in one module per part of the spec (``process``, ``mounts``, ``namespaces``,
``users`` over the rootfs' ``passwd`` database, ``capabilities``, ``security``, ``devices`` over
``hostdevices``, ``resources``, ``document``); ``core`` holds what they share and ``compose``
applies them. Every name is importable from here.
"""

from __future__ import annotations

from podkit.oci.opts.capabilities import (
    capability_name,
    current_capabilities,
    with_added_capabilities,
    with_all_current_capabilities,
    with_all_known_capabilities,
    with_ambient_capabilities,
    with_capabilities,
    with_dropped_capabilities,
)
from podkit.oci.opts.compose import compose, generate
from podkit.oci.opts.core import SpecOpt, SpecOptError, UserLookupError
from podkit.oci.opts.devices import (
    with_all_devices_allowed,
    with_default_unix_devices,
    with_devices,
    with_linux_device,
)
from podkit.oci.opts.document import with_annotations, with_minimum_oci_version, with_oci_version
from podkit.oci.opts.hostdevices import DeviceStat, HostFS
from podkit.oci.opts.mounts import (
    with_dev_shm_size,
    with_host_hosts_file,
    with_host_localtime,
    with_host_resolvconf,
    with_mounts,
    with_rootfs_path,
    with_rootfs_readonly,
    with_writeable_cgroupfs,
    with_writeable_sysfs,
    without_mounts,
    without_run_mount,
)
from podkit.oci.opts.namespaces import (
    with_host_namespace,
    with_linux_namespace,
    with_namespace_path,
    with_sysctls,
    with_user_namespace,
    without_namespace,
)
from podkit.oci.opts.process import (
    with_default_path_env,
    with_domainname,
    with_env,
    with_hostname,
    with_oom_score_adj,
    with_process_args,
    with_process_cwd,
    with_rlimit,
    with_rlimits,
    with_tty,
    with_tty_size,
    with_umask,
)
from podkit.oci.opts.resources import (
    with_blockio,
    with_cgroup,
    with_cpu_burst,
    with_cpu_cfs,
    with_cpu_period,
    with_cpu_quota,
    with_cpu_rt,
    with_cpu_shares,
    with_cpus,
    with_cpus_mems,
    with_hugepage_limits,
    with_memory_and_swap,
    with_memory_limit,
    with_memory_swap,
    with_pids_limit,
    with_rdt,
    with_resources,
    with_unified,
)
from podkit.oci.opts.security import (
    with_apparmor_profile,
    with_masked_paths,
    with_new_privileges,
    with_no_new_privileges,
    with_privileged,
    with_readonly_paths,
    with_seccomp_unconfined,
    with_selinux_label,
)
from podkit.oci.opts.users import (
    with_additional_gids,
    with_append_additional_groups,
    with_uid_gid,
    with_user,
    with_user_id,
    with_username,
)

__all__ = [
    "DeviceStat",
    "HostFS",
    "SpecOpt",
    "SpecOptError",
    "UserLookupError",
    "capability_name",
    "compose",
    "current_capabilities",
    "generate",
    "with_added_capabilities",
    "with_additional_gids",
    "with_all_current_capabilities",
    "with_all_devices_allowed",
    "with_all_known_capabilities",
    "with_ambient_capabilities",
    "with_annotations",
    "with_apparmor_profile",
    "with_append_additional_groups",
    "with_blockio",
    "with_capabilities",
    "with_cgroup",
    "with_cpu_burst",
    "with_cpu_cfs",
    "with_cpu_period",
    "with_cpu_quota",
    "with_cpu_rt",
    "with_cpu_shares",
    "with_cpus",
    "with_cpus_mems",
    "with_default_path_env",
    "with_default_unix_devices",
    "with_dev_shm_size",
    "with_devices",
    "with_domainname",
    "with_dropped_capabilities",
    "with_env",
    "with_host_hosts_file",
    "with_host_localtime",
    "with_host_namespace",
    "with_host_resolvconf",
    "with_hostname",
    "with_hugepage_limits",
    "with_linux_device",
    "with_linux_namespace",
    "with_masked_paths",
    "with_memory_and_swap",
    "with_memory_limit",
    "with_memory_swap",
    "with_minimum_oci_version",
    "with_mounts",
    "with_namespace_path",
    "with_new_privileges",
    "with_no_new_privileges",
    "with_oci_version",
    "with_oom_score_adj",
    "with_pids_limit",
    "with_privileged",
    "with_process_args",
    "with_process_cwd",
    "with_rdt",
    "with_readonly_paths",
    "with_resources",
    "with_rlimit",
    "with_rlimits",
    "with_rootfs_path",
    "with_rootfs_readonly",
    "with_seccomp_unconfined",
    "with_selinux_label",
    "with_sysctls",
    "with_tty",
    "with_tty_size",
    "with_uid_gid",
    "with_umask",
    "with_unified",
    "with_user",
    "with_user_id",
    "with_user_namespace",
    "with_username",
    "with_writeable_cgroupfs",
    "with_writeable_sysfs",
    "without_mounts",
    "without_namespace",
    "without_run_mount",
]
