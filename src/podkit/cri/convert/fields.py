"""The conversion error and the small field helpers every CRI conversion uses."""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, TypeVar

from podkit.errors import InvalidArgumentError, quote

__all__ = [
    "ConversionError",
    "each",
    "enum_number",
    "enum_value",
    "fill_fields",
    "set_field",
    "strings",
]


E = TypeVar("E", bound=enum.IntEnum)


T = TypeVar("T")


class ConversionError(InvalidArgumentError):
    """A CRI message (or podkit model) that cannot be converted; ``path`` names the CRI field."""

    def __init__(self, path: str, problem: str) -> None:
        super().__init__(f"{path}: {problem}")
        self.path = path
        self.problem = problem

    def __reduce__(self) -> tuple[type[ConversionError], tuple[str, str]]:
        return (type(self), (self.path, self.problem))


def enum_value(cls: type[E], value: int, path: str) -> E:
    try:
        return cls(value)
    except ValueError:
        names = ", ".join(f"{m.name}={m.value}" for m in cls)
        raise ConversionError(path, f"unknown {cls.__name__} value {value} ({names})") from None


def enum_number(cls: type[E], value: object, path: str) -> int:
    """A model enum value as its CRI number, refusing what the CRI enum does not define."""
    if isinstance(value, cls):
        return int(value)
    if isinstance(value, int) and not isinstance(value, bool):
        return int(enum_value(cls, value, path))
    raise ConversionError(path, f"{quote(value)} is not a {cls.__name__}")


def set_field(msg: Any, field: str, value: object, path: str) -> None:
    """Assign one scalar (or extend one repeated scalar) field, naming it when the value is bad."""
    try:
        if isinstance(value, (list, tuple)):
            getattr(msg, field).extend(value)
        elif isinstance(value, dict):
            getattr(msg, field).update(value)
        else:
            setattr(msg, field, value)
    except (TypeError, ValueError) as exc:
        raise ConversionError(f"{path}.{field}", f"{quote(value)} does not fit: {exc}") from None
    except AttributeError:  # a single value for a repeated or map field
        raise ConversionError(
            f"{path}.{field}", f"{quote(value)}: expected a sequence or mapping"
        ) from None


def fill_fields(msg: Any, path: str, values: Mapping[str, object]) -> None:
    for field, value in values.items():
        if isinstance(value, Sequence) and not isinstance(value, (str, bytes)):
            value = list(value)
        set_field(msg, field, value, path)


def each(
    items: Iterable[T], path: str, convert: Callable[[T, str], Any]
) -> list[Any]:
    return [convert(item, f"{path}[{i}]") for i, item in enumerate(items)]


def strings(values: Sequence[str] | None) -> tuple[str, ...]:
    return tuple(values or ())
