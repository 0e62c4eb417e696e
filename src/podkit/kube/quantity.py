"""Kubernetes resource quantities (``100m``, ``0.5``, ``128Mi``, ``1e3``) as exact numbers."""

from __future__ import annotations

import math
import re
from fractions import Fraction

from podkit.errors import InvalidArgumentError, quote

__all__ = ["milli_value", "parse_quantity", "value"]

_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL: dict[str, Fraction] = {
    "n": Fraction(1, 10**9), "u": Fraction(1, 10**6), "m": Fraction(1, 1000), "": Fraction(1),
    "k": Fraction(10**3), "M": Fraction(10**6), "G": Fraction(10**9), "T": Fraction(10**12),
    "P": Fraction(10**15), "E": Fraction(10**18)}
_FORM = re.compile(r"^([+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+))(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]|"
                   r"[eE][+-]?[0-9]+)?$")


def parse_quantity(text: object, where: str = "quantity") -> Fraction:
    """The exact value of a quantity; a YAML number counts as its decimal form."""
    if isinstance(text, bool) or not isinstance(text, (str, int, float)):
        raise InvalidArgumentError(f"{where}: {quote(text)} is not a quantity")
    m = _FORM.match(str(text).strip())
    if m is None:
        raise InvalidArgumentError(
            f"{where}: {quote(text)} is not a quantity (like 100m, 0.5, 128Mi or 1e3)")
    number, suffix = Fraction(m.group(1)), m.group(2) or ""
    if len(suffix) > 1 and suffix[0] in "eE":
        return number * Fraction(10) ** int(suffix[1:])
    if suffix in _BINARY:
        return number * _BINARY[suffix]
    return number * _DECIMAL[suffix]


def value(text: object, where: str = "quantity") -> int:
    """The quantity rounded up to an integer, as ``Quantity.Value()``."""
    return math.ceil(parse_quantity(text, where))


def milli_value(text: object, where: str = "quantity") -> int:
    """Thousandths rounded up, as ``Quantity.MilliValue()`` (CPU in millicores)."""
    return math.ceil(parse_quantity(text, where) * 1000)
