"""Unknown values of the enumerated fields of a spec, found without importing the models.

The loader (``Spec.from_dict`` & co.) refuses such values when ``strict``; this module sits below
``spec`` so the models can call it without a circle. It walks a model object by attribute name
(``ENUM_FIELDS``, in the order ``validate`` reports them), so it knows the spec's shape but not
its classes; ``validate.enum_problems`` gives the same list from the full validation.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import attrs

from podkit.oci.codec import key_path, wire_fields
from podkit.oci.problem import Problem
from podkit.oci.values import (
    _CAP_SETS,
    _IOPRIO_CLASSES,
    _MPOL_FLAGS,
    _MPOL_MODES,
    _PERSONALITY_DOMAINS,
    _PROPAGATIONS,
    _RLIMIT_RE,
    _SCHED_FLAGS,
    _SCHED_POLICIES,
    _SECCOMP_ACTIONS,
    _SECCOMP_ARCHES,
    _SECCOMP_FLAGS,
    _SECCOMP_OPS,
    _TIME_CLOCKS,
    CAPABILITIES,
    NAMESPACE_TYPES,
    RLIMITS,
)

__all__ = ["ENUM_FIELDS", "UNKNOWN", "EnumField", "unknown_values"]

UNKNOWN = "unknown "
"""How every unknown-value message starts (``validate.enum_problems`` filters on it)."""


@attrs.frozen
class EnumField:
    """One enumerated field: its attribute path from the spec, the known values and their noun.

    A path step ``[]`` walks a list, ``{}`` the keys of a map; ``only`` skips values it does not
    match (they are a pattern problem of ``validate``, not an unknown value). A field with
    ``each`` is a list of objects whose own fields are checked item by item, in that order.
    """

    path: tuple[str, ...]
    known: frozenset[str]
    what: str
    only: re.Pattern[str] | None = None
    each: tuple[EnumField, ...] = ()


def _steps(path: str) -> tuple[str, ...]:
    return tuple(s for part in path.split(".") for s in _split_brackets(part))


def _field(path: str, known: Any, what: str, only: re.Pattern[str] | None = None) -> EnumField:
    return EnumField(_steps(path), frozenset(known), what, only)


def _each(path: str, *fields: EnumField) -> EnumField:
    return EnumField(_steps(path), frozenset(), "", each=fields)


def _split_brackets(part: str) -> Iterator[str]:
    for marker in ("[]", "{}"):
        if part.endswith(marker):
            yield part.removesuffix(marker)
            yield marker
            return
    yield part


ENUM_FIELDS: tuple[EnumField, ...] = (
    *(_field(f"process.capabilities.{s}[]", CAPABILITIES, "capability") for s in _CAP_SETS),
    _field("process.rlimits[].type", RLIMITS, "rlimit", _RLIMIT_RE),
    _field("process.scheduler.policy", _SCHED_POLICIES, "scheduler policy"),
    _field("process.scheduler.flags[]", _SCHED_FLAGS, "scheduler flag"),
    _field("process.io_priority.class_", _IOPRIO_CLASSES, "I/O priority class"),
    _field("linux.namespaces[].type", NAMESPACE_TYPES, "namespace type"),
    _field("linux.time_offsets{}", _TIME_CLOCKS, "clock"),
    _field("linux.resources.devices[].type", ("a", "b", "c"), "device cgroup type"),
    _field("linux.seccomp.default_action", _SECCOMP_ACTIONS, "seccomp action"),
    _field("linux.seccomp.architectures[]", _SECCOMP_ARCHES, "seccomp arch"),
    _field("linux.seccomp.flags[]", _SECCOMP_FLAGS, "seccomp flag"),
    _each(
        "linux.seccomp.syscalls[]",
        _field("action", _SECCOMP_ACTIONS, "seccomp action"),
        _field("args[].op", _SECCOMP_OPS, "seccomp operator"),
    ),
    _field("linux.rootfs_propagation", _PROPAGATIONS, "rootfs propagation"),
    _field("linux.memory_policy.mode", _MPOL_MODES, "memory policy mode"),
    _field("linux.memory_policy.flags[]", _MPOL_FLAGS, "memory policy flag"),
    _field("linux.personality.domain", _PERSONALITY_DOMAINS, "personality domain"),
)
"""The enumerated fields of a runtime spec, in the order their problems are reported."""


def _wire(obj: object, attr: str) -> str:
    for f in wire_fields(type(obj)):
        if f.name == attr:
            return f.wire
    return attr


def _values(obj: Any, steps: tuple[str, ...], path: str) -> Iterator[tuple[Any, str]]:
    """(value, JSON path) of every value at ``steps`` below ``obj``; absent parts yield nothing."""
    if obj is None:
        return
    if not steps:
        yield obj, path
        return
    step, rest = steps[0], steps[1:]
    if step == "[]":
        for i, item in enumerate(obj if isinstance(obj, list) else ()):
            yield from _values(item, rest, f"{path}[{i}]")
    elif step == "{}":
        for key in obj if isinstance(obj, dict) else ():
            yield key, key_path(path, key)
    else:
        yield from _values(getattr(obj, step, None), rest, f"{path}.{_wire(obj, step)}")


def _is_unknown(field: EnumField, value: object) -> bool:
    if not isinstance(value, str) or value in field.known:
        return False
    return field.only is None or field.only.match(value) is not None


def _unknown(obj: object, fields: tuple[EnumField, ...], path: str) -> Iterator[Problem]:
    for field in fields:
        for value, where in _values(obj, field.path, path):
            if field.each:
                yield from _unknown(value, field.each, where)
            elif _is_unknown(field, value):
                yield Problem(where, f"{UNKNOWN}{field.what} {value!r}")


def unknown_values(spec: object) -> list[Problem]:
    """A problem for every value of an enumerated field that ``ENUM_FIELDS`` does not know."""
    return list(_unknown(spec, ENUM_FIELDS, "$"))
