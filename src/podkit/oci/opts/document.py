"""Options on the top of the document: ``ociVersion`` (given, or the minimum the spec needs)
and annotations.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from podkit.oci.opts.core import SpecOpt, SpecOptError, _str, _str_map
from podkit.oci.spec import Spec
from podkit.oci.versions import minimum_version

__all__ = ["with_annotations", "with_minimum_oci_version", "with_oci_version"]

_SEMVER = re.compile(r"\d+\.\d+\.\d+(-[0-9A-Za-z.-]+)?(\+[0-9A-Za-z.-]+)?\Z")


def with_oci_version(version: str) -> SpecOpt:
    """Set ``ociVersion`` (a SemVer string such as ``"1.0.2"``)."""
    value = _str(version, "ociVersion")
    if not _SEMVER.match(value):
        raise SpecOptError(f"invalid ociVersion {value!r}: expected a SemVer such as '1.0.2'")

    def opt(s: Spec) -> None:
        s.oci_version = value

    return opt


def with_minimum_oci_version() -> SpecOpt:
    """Set ``ociVersion`` to the oldest release whose fields the spec uses; apply it last.

    Older runtimes refuse newer versions: crun 1.8 accepts only 1.0.x and 1.1.x.
    """

    def opt(s: Spec) -> None:
        s.oci_version = minimum_version(s)

    return opt


def with_annotations(annotations: Mapping[str, str]) -> SpecOpt:
    """Merge annotations into the spec (a later value for a key wins)."""
    values = _str_map(annotations, "annotation")

    def opt(s: Spec) -> None:
        s.annotations = {**(s.annotations or {}), **values}

    return opt
