"""Qualified CDI device names (``vendor/class=name``): parsing, formatting, validation.

Mirrors the Go library's ``pkg/parser``: the same splitting rules, the same character classes
(ASCII letters and digits only) and the same error wording.
"""

from __future__ import annotations

import re

from podkit.errors import InvalidArgumentError

__all__ = [
    "InvalidNameError",
    "is_alpha_numeric",
    "is_digit",
    "is_letter",
    "is_qualified_name",
    "parse_device",
    "parse_qualified_name",
    "parse_qualifier",
    "qualified_name",
    "validate_class_name",
    "validate_device_name",
    "validate_vendor_name",
]


class InvalidNameError(InvalidArgumentError):
    """A vendor, class, device or qualified device name that breaks the naming rules."""


def is_letter(c: str) -> bool:
    """ASCII letter."""
    return ("a" <= c <= "z") or ("A" <= c <= "Z")


def is_digit(c: str) -> bool:
    """ASCII digit."""
    return "0" <= c <= "9"


def is_alpha_numeric(c: str) -> bool:
    """ASCII letter or digit."""
    return is_letter(c) or is_digit(c)


def qualified_name(vendor: str, class_: str, name: str) -> str:
    """Format ``vendor/class=name`` (no validation)."""
    return f"{vendor}/{class_}={name}"


def parse_qualifier(kind: str) -> tuple[str, str]:
    """Split ``vendor/class`` at the first ``/``; on failure return ``("", kind)``."""
    vendor, sep, class_ = kind.partition("/")
    if not sep or not vendor or not class_:
        return "", kind
    return vendor, class_


def parse_device(device: str) -> tuple[str, str, str]:
    """Split ``vendor/class=name`` without validating; on failure ``("", "", device)``."""
    if not device or device[0] == "/":
        return "", "", device
    qualifier, sep, name = device.partition("=")
    if not sep or not qualifier or not name:
        return "", "", device
    vendor, class_ = parse_qualifier(qualifier)
    if not vendor:
        return "", "", device
    return vendor, class_, name


_VENDOR_OR_CLASS_OK = re.compile(r"[A-Za-z](?:[A-Za-z0-9_.-]*[A-Za-z0-9])?\Z")
_DEVICE_OK = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9_.:-]*[A-Za-z0-9])?\Z")


def _vendor_or_class_problem(name: str) -> str | None:
    if _VENDOR_OR_CLASS_OK.match(name):
        return None
    if not name:
        return "empty name"
    if not is_letter(name[0]):
        return f'"{name}", should start with letter'
    for c in name[1:-1]:
        if not (is_alpha_numeric(c) or c in "_-."):
            return f"invalid character '{c}' in name \"{name}\""
    if not is_alpha_numeric(name[-1]):
        return f'"{name}", should end with a letter or digit'
    return None


def validate_vendor_name(vendor: str) -> None:
    """Vendor: starts with a letter, ends with a letter/digit, inner ``[A-Za-z0-9_.-]``."""
    problem = _vendor_or_class_problem(vendor)
    if problem:
        raise InvalidNameError(f"invalid vendor. {problem}")


def validate_class_name(class_: str) -> None:
    """Class: the same rules as the vendor (a ``.`` needs spec version 0.6.0)."""
    problem = _vendor_or_class_problem(class_)
    if problem:
        raise InvalidNameError(f"invalid class. {problem}")


def validate_device_name(name: str) -> None:
    """Device name: starts and ends with a letter/digit, inner ``[A-Za-z0-9_.:-]``.

    (The Go library says "invalid class" for a bad first character; podkit says "invalid name".)
    """
    if _DEVICE_OK.match(name):
        return
    if not name:
        raise InvalidNameError("invalid (empty) device name")
    if not is_alpha_numeric(name[0]):
        raise InvalidNameError(f'invalid name "{name}", should start with a letter or digit')
    if len(name) == 1:
        return
    for c in name[1:-1]:
        if not (is_alpha_numeric(c) or c in "_-.:"):
            raise InvalidNameError(f"invalid character '{c}' in device name \"{name}\"")
    if not is_alpha_numeric(name[-1]):
        raise InvalidNameError(f'invalid name "{name}", should end with a letter or digit')


def parse_qualified_name(device: str) -> tuple[str, str, str]:
    """Split and validate ``vendor/class=name``; returns ``(vendor, class, name)``.

    >>> parse_qualified_name("vendor.com/gpu=0")
    ('vendor.com', 'gpu', '0')
    """
    vendor, class_, name = parse_device(device)
    if not vendor:
        raise InvalidNameError(f'unqualified device "{device}", missing vendor '
                               "(expected vendor/class=name)")
    try:
        validate_vendor_name(vendor)
        validate_class_name(class_)
        validate_device_name(name)
    except InvalidNameError as e:
        raise InvalidNameError(f'invalid device "{device}": {e}') from None
    return vendor, class_, name


def is_qualified_name(device: str) -> bool:
    """True when ``device`` is a valid ``vendor/class=name``."""
    try:
        parse_qualified_name(device)
    except InvalidNameError:
        return False
    return True
