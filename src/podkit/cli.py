"""The ``podkit`` command: one sub-command group per layer."""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

# Modules under podkit._cli that define ``register(subparsers)``; each adds its own group.
_GROUPS: tuple[str, ...] = ("image", "cdi", "runtime", "cni", "pod", "cri")


def build_parser() -> argparse.ArgumentParser:
    """The argument parser with every layer's sub-commands registered."""
    parser = argparse.ArgumentParser(prog="podkit", description=__doc__)
    sub = parser.add_subparsers(dest="group", metavar="COMMAND")
    sub.required = True
    for name in _GROUPS:
        importlib.import_module(f"podkit._cli.{name}").register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; returns the process exit code."""
    from podkit.errors import PodkitError

    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        rc: int = args.func(args)
    except PodkitError as e:
        print(f"podkit: {e}", file=sys.stderr)
        return 1
    return rc


if __name__ == "__main__":
    sys.exit(main())
