"""What every spec option shares: ``SpecOpt``, its errors, argument checks, section getters.

The getters (``_process``, ``_linux``, ``_resources``, ...) create a spec section when absent, so
an option never has to; the checks raise ``SpecOptError`` naming the bad value.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

from podkit.errors import InvalidArgumentError, NotFoundError
from podkit.oci.defaults import KNOWN_CAPABILITIES
from podkit.oci.spec import (
    Linux,
    LinuxCapabilities,
    LinuxCPU,
    LinuxMemory,
    LinuxResources,
    Process,
    Spec,
    User,
)
from podkit.oci.values import NAMESPACE_TYPES

__all__ = ["SpecOpt", "SpecOptError", "UserLookupError"]

_INT64 = (-(2**63), 2**63 - 1)
_UINT64 = (0, 2**64 - 1)
_UINT32 = (0, 2**32 - 1)


SpecOpt = Callable[[Spec], None]
"""An option: edits the spec it is given in place (``generate`` hands it a copy)."""


class SpecOptError(InvalidArgumentError):
    """A spec option got a bad value, or cannot apply to the spec it was given."""


class UserLookupError(SpecOptError, NotFoundError):
    """A user or group name is not in the container rootfs' ``/etc/passwd`` / ``/etc/group``."""


def _process(s: Spec) -> Process:
    if s.process is None:
        s.process = Process()
    return s.process


def _user(s: Spec) -> User:
    p = _process(s)
    if p.user is None:
        p.user = User(uid=0, gid=0)
    return p.user


def _linux(s: Spec) -> Linux:
    if s.linux is None:
        s.linux = Linux()
    return s.linux


def _resources(s: Spec) -> LinuxResources:
    lx = _linux(s)
    if lx.resources is None:
        lx.resources = LinuxResources()
    return lx.resources


def _cpu(s: Spec) -> LinuxCPU:
    r = _resources(s)
    if r.cpu is None:
        r.cpu = LinuxCPU()
    return r.cpu


def _memory(s: Spec) -> LinuxMemory:
    r = _resources(s)
    if r.memory is None:
        r.memory = LinuxMemory()
    return r.memory


def _caps(s: Spec) -> LinuxCapabilities:
    p = _process(s)
    if p.capabilities is None:
        p.capabilities = LinuxCapabilities()
    return p.capabilities


def _int(value: object, what: str, lo: int, hi: int) -> int:
    if type(value) is not int:
        raise SpecOptError(f"invalid {what} {value!r}: must be an integer")
    if not lo <= value <= hi:
        raise SpecOptError(f"invalid {what} {value}: must be in [{lo}, {hi}]")
    return value


def _str(value: object, what: str, *, empty: bool = False) -> str:
    if not isinstance(value, str):
        raise SpecOptError(f"invalid {what} {value!r}: must be a string")
    if not empty and not value:
        raise SpecOptError(f"invalid {what}: must not be empty")
    if "\0" in value:
        raise SpecOptError(f"invalid {what} {value!r}: contains a NUL byte")
    return value


def _abs_path(value: object, what: str) -> str:
    path = _str(value, what)
    if not path.startswith("/"):
        raise SpecOptError(f"invalid {what} {path!r}: must be an absolute path")
    return path


def _strings(values: Iterable[str] | None, what: str) -> list[str]:
    if values is None:
        return []
    if isinstance(values, str):
        raise SpecOptError(f"invalid {what} {values!r}: expected a list of strings, not a string")
    return [_str(v, what) for v in values]


def _str_map(values: Mapping[str, str], what: str) -> dict[str, str]:
    if not isinstance(values, Mapping):
        raise SpecOptError(f"invalid {what} {values!r}: expected a mapping of strings")
    return {_str(k, f"{what} key"): _str(v, f"{what} value for {k!r}", empty=True)
            for k, v in values.items()}


def _cap_names(caps: Iterable[str] | None) -> list[str]:
    names = _strings(caps, "capability")
    for c in names:
        if c not in KNOWN_CAPABILITIES:
            raise SpecOptError(f"unknown capability {c!r}: expected a CAP_* name such as CAP_KILL")
    return list(dict.fromkeys(names))


def _namespace_type(value: object) -> str:
    t = _str(value, "namespace type")
    if t not in NAMESPACE_TYPES:
        raise SpecOptError(
            f"unknown namespace type {t!r}: expected one of {', '.join(sorted(NAMESPACE_TYPES))}"
        )
    return t


def _access(value: object) -> str:
    perms = _str(value, "device permissions")
    if len(set(perms)) != len(perms) or not set(perms) <= set("rwm"):
        raise SpecOptError(f"invalid device permissions {perms!r}: use letters of 'rwm' once each")
    return perms
