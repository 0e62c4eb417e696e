"""Which fields of a spec a runtime would silently ignore (its ``features``, or its version).

``check_spec`` compares a spec with what the runtime says it supports; ``KNOWN_APPLIED`` lists
fields runtimes are known to honour although the version they report predates them.
``Runc(strict=False)`` warns with ``UnsupportedFieldWarning`` instead of refusing.
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Collection, Sequence

from podkit import oci
from podkit.runtime.errors import UnsupportedOperationError

__all__ = ["KNOWN_APPLIED", "UnsupportedFieldWarning", "check_spec", "refuse_or_warn"]


class UnsupportedFieldWarning(UserWarning):
    """The spec uses fields this runtime would silently ignore (``Runc(strict=False)``).

    ``problems`` holds them as ``oci.Problem`` (JSON path + why), as ``check_spec`` returns them.
    """

    def __init__(self, message: str, problems: Sequence[oci.Problem] = ()) -> None:
        super().__init__(message)
        self.problems: list[oci.Problem] = list(problems)


_SEMVER_CORE = re.compile(r"^\d+\.\d+\.\d+")

# JSON paths (list indexes as ``[]``) of fields a runtime applies although the runtime-spec
# version it reports predates them (checked on this machine: runc-empirical.md §5 for
# ``domainname``, the rest in tests/runtime/test_runc_integration.py and
# tests/sandbox/test_seccomp_integration.py): crun 1.8.1 reports 1.0.0, runc 1.1.5 1.0.2-dev.
_SECCOMP_ERRNO = frozenset({"$.linux.seccomp.defaultErrnoRet",
                            "$.linux.seccomp.syscalls[].errnoRet"})
KNOWN_APPLIED: dict[str, frozenset[str]] = {
    "crun": frozenset({
        "$.domainname",
        "$.process.user.umask",
        "$.linux.personality",
        "$.hooks.createRuntime",
        "$.hooks.createContainer",
        "$.hooks.startContainer",
    }) | _SECCOMP_ERRNO,
    "runc": _SECCOMP_ERRNO,
}
_INDEX = re.compile(r"\[\d+\]")


def check_spec(
    spec: oci.Spec,
    features: oci.Features | None = None,
    spec_version: str | None = None,
    *,
    applied: Collection[str] = (),
) -> list[oci.Problem]:
    """Fields of ``spec`` the runtime would silently ignore (``str(problem)``: "path: why").

    ``oci.unsupported_fields`` against the runtime's ``features`` where it has them, else
    against what its ``--version`` says (``spec_version``: ociVersionMin/Max, nothing else
    known; no version check when it reports none). ``applied``: JSON paths the runtime is known
    to honour anyway (``[]`` for any list index). Unknown top-level keys are always reported:
    runtimes ignore them.
    """
    problems = oci.unknown_keys(spec)
    if features is None and spec_version and _SEMVER_CORE.match(spec_version):
        features = oci.Features(oci_version_min=spec_version, oci_version_max=spec_version)
    if features is not None:
        problems += [p for p in oci.unsupported_fields(spec, features)
                     if p.path not in applied and _INDEX.sub("[]", p.path) not in applied]
    return problems


def refuse_or_warn(problems: Sequence[oci.Problem], runtime: str, argv: Sequence[str],
                   strict: bool) -> None:
    """Nothing without ``problems``; else ``UnsupportedOperationError`` when ``strict``, or an
    ``UnsupportedFieldWarning`` pointing at the caller of the runtime's ``create``/``run``."""
    if not problems:
        return
    text = "; ".join(map(str, problems))
    if strict:
        raise UnsupportedOperationError(f"{runtime} would silently ignore: {text}", argv)
    warnings.warn(UnsupportedFieldWarning(f"{runtime} will ignore: {text}", problems),
                  stacklevel=4)
