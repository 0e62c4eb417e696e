"""Security resolution: a CRI security context into plain values the spec builders apply.

Everything here asks the host: a Localhost seccomp profile is read and checked, AppArmor
profiles are looked up in the kernel's list (and podkit's default profile loaded through
``apparmor_parser`` when ``load``), and the capabilities this process can grant are read. The
builders (``sandbox_spec``, ``container_spec``) take the result and do no I/O of their own.
Bad profiles raise the caller's ``error`` class, naming the config field.
"""

from __future__ import annotations

import posixpath
from collections.abc import Sequence

import attrs

from podkit import apparmor, oci
from podkit.errors import InvalidArgumentError
from podkit.pods.config import ProfileType, SecurityProfile, SELinuxOption

__all__ = [
    "ContainerSecurity",
    "Seccomp",
    "resolve_apparmor",
    "resolve_container_security",
    "resolve_seccomp",
    "selinux_label",
]

SECCOMP_FIELD = "linux.security_context.seccomp"
APPARMOR_FIELD = "linux.security_context.apparmor"


@attrs.frozen
class Seccomp:
    """A resolved seccomp choice: podkit's ``default`` profile (computed from the final
    capabilities when applied), a loaded ``profile``, or neither (no filter)."""

    default: bool = False
    profile: oci.LinuxSeccomp | None = None

    def opt(self) -> oci.SpecOpt | None:
        """The spec option setting it (``None``: no filter)."""
        if self.default:
            return oci.with_default_seccomp()
        return oci.with_seccomp_profile(self.profile) if self.profile is not None else None


@attrs.frozen(kw_only=True)
class ContainerSecurity:
    """What a container's security context resolved to on this host.

    ``apparmor_profile``: the profile to set (``""``: none); ``seccomp``: the filter;
    ``capabilities``: what the runtime started from here can grant (``ALL`` and
    ``privileged`` resolve to these).
    """

    apparmor_profile: str = ""
    seccomp: Seccomp = Seccomp()
    capabilities: tuple[str, ...] = ()


def selinux_label(options: SELinuxOption | None) -> str:
    """``user:role:type:level`` from CRI SELinux options; ``""`` when none are set."""
    if options is None or not any((options.user, options.role, options.type, options.level)):
        return ""
    parts = [options.user, options.role, options.type]
    if options.level:
        parts.append(options.level)
    return ":".join(parts)


def resolve_seccomp(profile: SecurityProfile | None, *, privileged: bool,
                    error: type[InvalidArgumentError]) -> Seccomp:
    """containerd's ``generateSeccompSpecOpts``: RuntimeDefault is podkit's default profile;
    Localhost the OCI ``linux.seccomp`` file at ``localhost_ref`` (an absolute path), read and
    checked now; Unconfined, no profile or ``privileged``: no filter."""
    if privileged or profile is None:
        return Seccomp()
    ref = profile.localhost_ref
    kind = profile.profile_type
    if kind != ProfileType.LOCALHOST and ref:
        raise error(
            f"{SECCOMP_FIELD}.localhost_ref {ref!r}: only valid with profile_type LOCALHOST")
    if kind == ProfileType.UNCONFINED:
        return Seccomp()
    if kind == ProfileType.RUNTIME_DEFAULT:
        return Seccomp(default=True)
    if kind != ProfileType.LOCALHOST:
        raise error(f"{SECCOMP_FIELD}.profile_type {kind!r}: unknown profile type")
    if not ref:
        raise error(f"{SECCOMP_FIELD}.localhost_ref: required for a Localhost profile")
    path = ref.removeprefix("localhost/")  # the deprecated string form, as containerd allows
    if not posixpath.isabs(path):
        raise error(f"{SECCOMP_FIELD}.localhost_ref {ref!r}: must be an absolute path")
    try:
        return Seccomp(profile=oci.load_profile(path))
    except oci.SeccompProfileError as e:
        raise error(f"{SECCOMP_FIELD}.localhost_ref {ref!r}: {e}") from e


def resolve_apparmor(profile: SecurityProfile | None, *, privileged: bool,
                     host: apparmor.AppArmorHost | None, error: type[InvalidArgumentError],
                     load: bool) -> str:
    """containerd's ``generateApparmorSpecOpts``: the AppArmor profile to set (``""``: none).

    Unset or RuntimeDefault: podkit's default profile (loaded on ``host`` now when ``load``
    and the kernel does not list it yet; without ``load`` only checked to be loadable), none
    when ``privileged``; Localhost: the loaded profile named by ``localhost_ref`` (a leading
    ``localhost/`` is trimmed); Unconfined: none. On a host without AppArmor an unset profile
    means none and anything but Unconfined is refused. ``host`` defaults to this machine
    (``apparmor.HOST``); its faults (parser missing or failing, profiles list unreadable)
    raise ``apparmor.AppArmorError``.
    """
    host = host or apparmor.HOST
    kind = profile.profile_type if profile is not None else None
    ref = profile.localhost_ref if profile is not None else ""
    if kind is not None and kind != ProfileType.LOCALHOST and ref:
        raise error(
            f"{APPARMOR_FIELD}.localhost_ref {ref!r}: only valid with profile_type LOCALHOST")
    if kind is not None and kind not in (
        ProfileType.RUNTIME_DEFAULT, ProfileType.UNCONFINED, ProfileType.LOCALHOST
    ):
        raise error(f"{APPARMOR_FIELD}.profile_type {kind!r}: unknown profile type")
    if not host.enabled():
        if kind is None or kind == ProfileType.UNCONFINED:
            return ""
        raise error(
            f"{APPARMOR_FIELD}: AppArmor is not enabled on this host; profile_type "
            f"{kind.name} needs it (leave the profile unset or use UNCONFINED)")
    if kind == ProfileType.UNCONFINED:
        return ""
    if kind == ProfileType.LOCALHOST:
        name = ref.removeprefix("localhost/")  # the deprecated string form, as containerd trims
        if not name:
            raise error(f"{APPARMOR_FIELD}.localhost_ref: required for a Localhost profile")
        if name not in host.loaded_profiles():
            raise error(
                f"{APPARMOR_FIELD}.localhost_ref {ref!r}: AppArmor profile {name!r} is not "
                f"loaded (not listed in {host.profiles_file})")
        return name
    if privileged:  # unset or RuntimeDefault
        return ""
    if load:
        host.ensure_default_profile(apparmor.DEFAULT_PROFILE)
    elif not host.is_loaded(apparmor.DEFAULT_PROFILE):
        host.find_parser()  # it will have to be loaded: fail now if it cannot be
    return apparmor.DEFAULT_PROFILE


def resolve_container_security(
    apparmor_profile: SecurityProfile | None, seccomp: SecurityProfile | None, *,
    privileged: bool, error: type[InvalidArgumentError],
    apparmor_host: apparmor.AppArmorHost | None = None,
    host_capabilities: Sequence[str] | None = None, load: bool = True,
) -> ContainerSecurity:
    """A container's AppArmor profile, seccomp filter and grantable capabilities (default:
    ``oci.current_capabilities()`` of this process). ``load``: see :func:`resolve_apparmor`."""
    return ContainerSecurity(
        apparmor_profile=resolve_apparmor(apparmor_profile, privileged=privileged,
                                          host=apparmor_host, error=error, load=load),
        seccomp=resolve_seccomp(seccomp, privileged=privileged, error=error),
        capabilities=tuple(oci.current_capabilities() if host_capabilities is None
                           else host_capabilities),
    )
