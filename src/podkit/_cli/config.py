"""``podkit config show``: the node config a command would run with, as TOML (docs/config.md).

The file (``--config``, ``$PODKIT_CONFIG``, ``/etc/podkit/podkit.toml``), the ``PODKIT_*``
variables and ``--root``/``--state`` are read the way every other command reads them, so this
shows what ``pod run`` or ``kube play`` would use, and refuses what they would refuse.
"""

from __future__ import annotations

import argparse
import sys

from podkit.node import dump_config

from .dirs import node_config

__all__ = ["register"]


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``config`` group."""
    group = subparsers.add_parser("config", help="the node config (docs/config.md)")
    sub = group.add_subparsers(dest="config_command", metavar="COMMAND")
    sub.required = True
    show = sub.add_parser("show", help="the node config in effect, as TOML")
    show.set_defaults(func=cmd_show)


def cmd_show(args: argparse.Namespace) -> int:
    """Print the config: defaults, file, environment and options merged."""
    sys.stdout.write(dump_config(node_config(args)))
    return 0
