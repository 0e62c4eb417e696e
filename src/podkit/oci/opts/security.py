"""Options on the security of the process: masked and read-only paths, SELinux label,
AppArmor profile, seccomp off, privileged, no_new_privileges.
"""

from __future__ import annotations

from collections.abc import Iterable

from podkit.oci.opts.capabilities import with_all_current_capabilities
from podkit.oci.opts.compose import compose
from podkit.oci.opts.core import SpecOpt, _abs_path, _linux, _process, _str, _strings
from podkit.oci.opts.mounts import with_writeable_cgroupfs, with_writeable_sysfs
from podkit.oci.spec import Spec

__all__ = [
    "with_apparmor_profile",
    "with_masked_paths",
    "with_new_privileges",
    "with_no_new_privileges",
    "with_privileged",
    "with_readonly_paths",
    "with_seccomp_unconfined",
    "with_selinux_label",
]


def with_masked_paths(paths: Iterable[str] | None) -> SpecOpt:
    """Replace ``linux.maskedPaths`` (``None`` removes the list)."""
    values = None if paths is None else [_abs_path(p, "masked path") for p in _strings(
        paths, "masked path")]

    def opt(s: Spec) -> None:
        _linux(s).masked_paths = None if values is None else list(values)

    return opt


def with_readonly_paths(paths: Iterable[str] | None) -> SpecOpt:
    """Replace ``linux.readonlyPaths`` (``None`` removes the list)."""
    values = None if paths is None else [_abs_path(p, "readonly path") for p in _strings(
        paths, "readonly path")]

    def opt(s: Spec) -> None:
        _linux(s).readonly_paths = None if values is None else list(values)

    return opt


def with_selinux_label(label: str) -> SpecOpt:
    """Set the process SELinux label (``""`` removes it)."""
    value = _str(label, "SELinux label", empty=True)

    def opt(s: Spec) -> None:
        _process(s).selinux_label = value or None

    return opt


def with_apparmor_profile(profile: str) -> SpecOpt:
    """Set the process AppArmor profile (``""`` removes it)."""
    value = _str(profile, "AppArmor profile", empty=True)

    def opt(s: Spec) -> None:
        _process(s).apparmor_profile = value or None

    return opt


def with_seccomp_unconfined() -> SpecOpt:
    """Remove the seccomp filter."""

    def opt(s: Spec) -> None:
        _linux(s).seccomp = None

    return opt


def with_privileged(status_path: str = "/proc/self/status") -> SpecOpt:
    """A privileged container: caller's capabilities, no masks, writable sys/cgroup, no LSMs."""
    return compose(
        with_all_current_capabilities(status_path),
        with_masked_paths(None),
        with_readonly_paths(None),
        with_writeable_sysfs(),
        with_writeable_cgroupfs(),
        with_selinux_label(""),
        with_apparmor_profile(""),
        with_seccomp_unconfined(),
    )


def with_new_privileges() -> SpecOpt:
    """Allow gaining privileges through setuid binaries (``noNewPrivileges: false``)."""

    def opt(s: Spec) -> None:
        _process(s).no_new_privileges = False

    return opt


def with_no_new_privileges() -> SpecOpt:
    """Forbid gaining privileges through setuid binaries (``noNewPrivileges: true``)."""

    def opt(s: Spec) -> None:
        _process(s).no_new_privileges = True

    return opt
