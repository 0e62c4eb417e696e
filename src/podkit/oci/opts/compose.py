"""Applying options: ``generate`` (a changed copy of a base spec) and ``compose`` (one of many).
"""

from __future__ import annotations

from podkit.oci.opts.core import SpecOpt
from podkit.oci.spec import Spec

__all__ = ["compose", "generate"]


def generate(base: Spec, *opts: SpecOpt) -> Spec:
    """Apply ``opts`` in order to a copy of ``base`` and return it; ``base`` is never touched.

    If an option raises, the error propagates and no spec is returned.
    """
    spec = base.copy()
    for opt in opts:
        opt(spec)
    return spec


def compose(*opts: SpecOpt) -> SpecOpt:
    """Combine options into one that applies them in order."""
    chain = tuple(opts)

    def opt(spec: Spec) -> None:
        for o in chain:
            o(spec)

    return opt
