"""Reading cgroup files: single numbers, ``key value`` maps, PSI lines; a missing file of an
enabled controller is a ``CgroupFileError`` naming it, never a silent zero."""

from __future__ import annotations

from pathlib import Path

import attrs

from podkit.errors import PodkitError

__all__ = ["CgroupFileError", "PsiData", "PsiStats", "read_int", "read_keyed", "read_psi",
           "read_text"]


class CgroupFileError(PodkitError):
    """A cgroup file the detected version and controllers promise is missing or unreadable."""


def read_text(path: Path) -> str:
    """The file's text; ``CgroupFileError`` naming it when it cannot be read."""
    try:
        return path.read_text()
    except OSError as e:
        raise CgroupFileError(f"cannot read cgroup file {path}: {e.strerror or e}") from e


def read_int(path: Path, unlimited: int | None = None) -> int | None:
    """One number; ``max`` (v2) or a value >= ``unlimited`` (v1's huge limit) is ``None``."""
    text = read_text(path).strip()
    if text == "max":
        return None
    try:
        value = int(text)
    except ValueError as e:
        raise CgroupFileError(f"cgroup file {path}: not a number: {text[:40]!r}") from e
    return None if unlimited is not None and value >= unlimited else value


def read_keyed(path: Path) -> dict[str, int]:
    """A ``key value`` per line file (``memory.stat``, ``cpu.stat``, ``memory.events``)."""
    out: dict[str, int] = {}
    for line in read_text(path).splitlines():
        key, _, value = line.partition(" ")
        try:
            out[key] = int(value)
        except ValueError:
            continue
    return out


@attrs.frozen
class PsiData:
    """One PSI line: the share of time stalled over 10, 60 and 300 s, and the total in µs."""

    avg10: float
    avg60: float
    avg300: float
    total: int


@attrs.frozen
class PsiStats:
    """A ``*.pressure`` file: ``some`` tasks stalled, and ``full`` (all; ``None`` when the
    kernel does not report it, as for cpu before 5.13)."""

    some: PsiData
    full: PsiData | None = None


def read_psi(path: Path) -> PsiStats | None:
    """A pressure file; ``None`` when it does not exist (kernel without PSI)."""
    if not path.exists():
        return None
    lines: dict[str, PsiData] = {}
    for line in read_text(path).splitlines():
        kind, *pairs = line.split()
        values = dict(p.split("=", 1) for p in pairs if "=" in p)
        try:
            lines[kind] = PsiData(float(values["avg10"]), float(values["avg60"]),
                                  float(values["avg300"]), int(values["total"]))
        except (KeyError, ValueError) as e:
            raise CgroupFileError(f"cgroup file {path}: bad line {line!r}") from e
    if "some" not in lines:
        raise CgroupFileError(f"cgroup file {path}: no 'some' line")
    return PsiStats(lines["some"], lines.get("full"))
