"""AppArmor on the host: is it enabled, which profiles are loaded, podkit's default profile.

The container builder asks this module three things, the way containerd's CRI plugin does:
whether the kernel enforces AppArmor, whether a named profile is loaded (the kernel lists them
in ``/sys/kernel/security/apparmor/profiles``, one ``name (mode)`` a line), and, for
RuntimeDefault, to make sure podkit's own default profile (:data:`DEFAULT_PROFILE`) is loaded:
rendered from :func:`render_default_profile` into a temporary file and loaded with
``apparmor_parser -Kr <file>`` when the kernel does not list it yet.

    host = apparmor.HOST                       # the real host; AppArmorHost(...) for a fake one
    if host.enabled():
        host.ensure_default_profile()          # loads "podkit-default" once
        "podkit-default" in host.loaded_profiles()

Every path and the parser binary are fields of :class:`AppArmorHost`, so tests (and hosts with
unusual layouts) point it at their own files and a stand-in ``apparmor_parser``.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import subprocess
import tempfile

import attrs

from podkit.errors import InvalidArgumentError, PodkitError

__all__ = [
    "DEFAULT_PROFILE",
    "HOST",
    "AppArmorError",
    "AppArmorHost",
    "enabled",
    "ensure_default_profile",
    "loaded_profiles",
    "render_default_profile",
]

DEFAULT_PROFILE = "podkit-default"
"""The name podkit loads its default profile under (containerd: ``cri-containerd.apparmor.d``)."""

ENABLED_FILE = "/sys/module/apparmor/parameters/enabled"
PROFILES_FILE = "/sys/kernel/security/apparmor/profiles"
POLICY_DIR = "/etc/apparmor.d"
CURRENT_FILE = "/proc/self/attr/current"
_SEARCH_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
_PROFILE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*\Z")
# a peer name safe to write unquoted into a rule (profile names, path-named profiles, hats)
_PEER_NAME = re.compile(r"[A-Za-z0-9_./:+-]+\Z")
_OUTPUT_LIMIT = 2000


class AppArmorError(PodkitError):
    """The host could not answer or do what AppArmor needs (parser missing or failing,
    profiles list unreadable); the message names the file or command."""


def render_default_profile(
    name: str = DEFAULT_PROFILE,
    *,
    abi: bool = False,
    tunables: bool = False,
    base_abstraction: bool = False,
    manager_profile: str = "unconfined",
) -> str:
    """The text of podkit's default container profile (pure).

    In the spirit of Docker's and containerd's default: ordinary file, network and capability
    use stays allowed (capabilities and seccomp do the finer work), while mounting, writing to
    kernel knobs under ``/proc`` and ``/sys``, and reading firmware and security files are
    denied; signals come from the host, the OCI runtimes and the manager's own profile
    (``manager_profile``), and ptrace stays among the profile's own processes. ``abi``,
    ``tunables`` and ``base_abstraction`` say whether the host's policy directory has
    ``abi/3.0``, ``tunables/global`` and ``abstractions/base`` to include.
    """
    if not _PROFILE_NAME.match(name):
        raise InvalidArgumentError(
            f"AppArmor profile name {name!r}: must match [A-Za-z0-9][A-Za-z0-9_.-]*"
        )
    peers = ["unconfined", "runc", "crun"]
    if manager_profile not in peers and _PEER_NAME.match(manager_profile):
        peers.append(manager_profile)
    lines = [f"# {name}: podkit's default AppArmor profile for pod containers.",
             "# Written by podkit.apparmor and loaded with apparmor_parser -Kr; edits are lost.",
             ""]
    if abi:
        lines.append("abi <abi/3.0>,")
    lines.append("#include <tunables/global>" if tunables else "@{PROC}=/proc/")
    lines += ["", f"profile {name} flags=(attach_disconnected,mediate_deleted) {{"]
    if base_abstraction:
        lines += ["  #include <abstractions/base>", ""]
    lines += [
        "  # what a container ordinarily does; capabilities and seccomp narrow it further",
        "  network,",
        "  capability,",
        "  file,",
        "  umount,",
        "",
        "  # signals: from host processes, the OCI runtimes and the manager; and among the",
        "  # container's own processes",
        *(f"  signal (receive) peer={p}," for p in peers),
        f"  signal (send,receive) peer={name},",
        "",
        "  # ptrace only between processes confined by this same profile",
        f"  ptrace (trace,tracedby,read,readby) peer={name},",
        "",
        "  # no mounts of any kind",
        "  deny mount,",
        "",
        "  # /proc: writes only below /proc/<pid>/ and to /proc/sys/kernel/shm*",
        "  deny @{PROC}/* w,",
        "  deny @{PROC}/{[^1-9/],[^1-9/][^0-9/],[^1-9s/][^0-9y/][^0-9s/],"
        "[^1-9/][^0-9/][^0-9/][^0-9/]*}/** w,",
        "  deny @{PROC}/sys/[^k]** w,",
        "  deny @{PROC}/sys/kernel/{?,??,[^s][^h][^m]**} w,",
        "  deny @{PROC}/sysrq-trigger rwklx,",
        "  deny @{PROC}/kcore rwklx,",
        "",
        "  # /sys: writes only below /sys/fs/cgroup; firmware, powercap and LSM files hidden",
        "  deny /sys/[^f]*/** wklx,",
        "  deny /sys/f[^s]*/** wklx,",
        "  deny /sys/fs/[^c]*/** wklx,",
        "  deny /sys/fs/c[^g]*/** wklx,",
        "  deny /sys/fs/cg[^r]*/** wklx,",
        "  deny /sys/firmware/** rwklx,",
        "  deny /sys/devices/virtual/powercap/** rwklx,",
        "  deny /sys/kernel/security/** rwklx,",
        "}",
        "",
    ]
    return "\n".join(lines)


def _profile_name(line: str) -> str:
    """``name`` from a ``name (mode)`` line (names may contain spaces; the mode may be absent)."""
    line = line.strip()
    if line.endswith(")"):
        head, sep, _ = line.rpartition(" (")
        if sep:
            return head
    return line


@attrs.frozen(kw_only=True)
class AppArmorHost:
    """Where AppArmor lives on a host, and how to load a profile into it.

    The defaults are the real kernel files and ``apparmor_parser`` looked up in the sbin/bin
    directories; ``timeout`` bounds one parser run (its process group is killed after it).
    """

    enabled_file: str = ENABLED_FILE
    profiles_file: str = PROFILES_FILE
    parser: str = "apparmor_parser"
    policy_dir: str = POLICY_DIR
    current_file: str = CURRENT_FILE
    tmp_dir: str | None = None
    timeout: float = 60.0

    def enabled(self) -> bool:
        """Whether the kernel enforces AppArmor: the module parameter reads ``Y`` and its
        securityfs directory (where the profiles list lives) is there (runc's test)."""
        try:
            with open(self.enabled_file, "rb") as f:
                flag = f.read(1)
        except OSError:
            return False
        return flag == b"Y" and os.path.isdir(os.path.dirname(self.profiles_file))

    def loaded_profiles(self) -> frozenset[str]:
        """The names of the profiles the kernel has loaded (any mode)."""
        try:
            with open(self.profiles_file, encoding="utf-8", errors="surrogateescape") as f:
                text = f.read()
        except OSError as e:
            raise AppArmorError(
                f"cannot read the loaded AppArmor profiles from {self.profiles_file}: "
                f"{e.strerror or e}"
            ) from e
        return frozenset(n for n in map(_profile_name, text.splitlines()) if n)

    def is_loaded(self, name: str) -> bool:
        """Whether a profile called ``name`` is loaded."""
        return name in self.loaded_profiles()

    def find_parser(self) -> str:
        """The ``apparmor_parser`` to run (a path, or a name looked up in sbin/bin)."""
        if os.sep in self.parser:
            found = self.parser if os.access(self.parser, os.X_OK) else None
            where = "not an executable file"
        else:
            found = shutil.which(self.parser, path=_SEARCH_PATH)
            where = f"not found in {_SEARCH_PATH}"
        if found is None:
            raise AppArmorError(
                f"AppArmor parser {self.parser!r}: {where}; it is needed to load the default "
                f"profile {DEFAULT_PROFILE!r}: install apparmor (the package with apparmor_parser)"
            )
        return found

    def default_profile_text(self, name: str = DEFAULT_PROFILE) -> str:
        """:func:`render_default_profile` for this host: the includes its policy directory
        has, and the profile podkit itself runs under as the manager's signal peer."""
        def has(part: str) -> bool:
            return os.path.exists(os.path.join(self.policy_dir, part))

        return render_default_profile(
            name, abi=has("abi/3.0"), tunables=has("tunables/global"),
            base_abstraction=has("abstractions/base"), manager_profile=self._own_profile(),
        )

    def _own_profile(self) -> str:
        try:
            with open(self.current_file, encoding="utf-8", errors="replace") as f:
                label = f.read()
        except OSError:
            return "unconfined"  # as containerd assumes when it cannot tell
        return label.strip().split(" (", 1)[0] or "unconfined"

    def load(self, text: str, *, name: str) -> None:
        """Load (or replace) a profile: ``text`` into a temporary file, then
        ``apparmor_parser -Kr <file>``; the file is removed afterwards."""
        parser = self.find_parser()
        fd, path = tempfile.mkstemp(prefix=f"{name}.", suffix=".apparmor", dir=self.tmp_dir)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                f.write(text)
            self._run([parser, "-Kr", path], name)
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path)

    def _run(self, argv: list[str], name: str) -> None:
        env = {"PATH": _SEARCH_PATH, "LC_ALL": "C"}
        try:
            proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                    stderr=subprocess.STDOUT, env=env, start_new_session=True)
        except OSError as e:
            raise AppArmorError(
                f"loading AppArmor profile {name!r}: cannot run {argv[0]}: {e.strerror or e}"
            ) from e
        try:
            out, _ = proc.communicate(timeout=self.timeout)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
            raise AppArmorError(
                f"loading AppArmor profile {name!r}: {' '.join(argv)} did not finish within "
                f"{self.timeout} s; its process group was killed"
            ) from None
        if proc.returncode != 0:
            detail = out.decode("utf-8", "replace").strip()[-_OUTPUT_LIMIT:]
            raise AppArmorError(
                f"loading AppArmor profile {name!r}: {' '.join(argv)} exited with status "
                f"{proc.returncode}" + (f": {detail}" if detail else "")
            )

    def ensure_default_profile(self, name: str = DEFAULT_PROFILE) -> bool:
        """Load podkit's default profile under ``name`` unless the kernel lists it already
        (as containerd's ``LoadDefaultProfile``); True when it was loaded now."""
        if self.is_loaded(name):
            return False
        self.load(self.default_profile_text(name), name=name)
        if not self.is_loaded(name):
            raise AppArmorError(
                f"AppArmor profile {name!r} was loaded by {self.parser} but is not listed in "
                f"{self.profiles_file}"
            )
        return True


HOST = AppArmorHost()
"""The real host (kernel files, ``apparmor_parser`` from sbin/bin): what the builders use when
no host is given (looked up at call time, so a test may swap it)."""


def enabled(host: AppArmorHost | None = None) -> bool:
    """Whether ``host`` (by default :data:`HOST`, this machine) enforces AppArmor."""
    return (host or HOST).enabled()


def loaded_profiles(host: AppArmorHost | None = None) -> frozenset[str]:
    """The names of the AppArmor profiles ``host`` (by default :data:`HOST`) has loaded."""
    return (host or HOST).loaded_profiles()


def ensure_default_profile(
    name: str = DEFAULT_PROFILE, *, host: AppArmorHost | None = None
) -> bool:
    """Make sure podkit's default profile is loaded on ``host`` (by default :data:`HOST`);
    True when it was loaded now."""
    return (host or HOST).ensure_default_profile(name)
