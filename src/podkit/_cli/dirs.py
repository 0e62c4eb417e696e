"""Where podkit keeps its files: ``--root`` / ``PODKIT_ROOT`` and ``--state`` / ``PODKIT_STATE``.

One meaning everywhere, given before the group (``podkit --root X pod ls``) or after it
(``podkit pod ls --root X``): the root holds what lasts (the image store, pod files), the state
what a reboot may clear (records, conmon and runtime state, ``podkit run`` bundles). A root
given without a state keeps its state inside it (``ROOT/state``), so two roots never share one.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

__all__ = ["DEFAULT_ROOT", "DEFAULT_STATE", "ROOT_ENV", "STATE_ENV", "add_dir_options",
           "podkit_root", "podkit_state"]

DEFAULT_ROOT = "/var/lib/podkit"
DEFAULT_STATE = "/run/podkit"
ROOT_ENV = "PODKIT_ROOT"
STATE_ENV = "PODKIT_STATE"


def add_dir_options(p: argparse.ArgumentParser) -> None:
    """Add ``--root`` and ``--state``; unset unless given, so either placement wins."""
    p.add_argument("--root", default=argparse.SUPPRESS, metavar="DIR",
                   help=f"podkit's root: images, pod files (default ${ROOT_ENV} or "
                   f"{DEFAULT_ROOT})")
    p.add_argument("--state", default=argparse.SUPPRESS, metavar="DIR",
                   help=f"podkit's state: records, runtime state (default ${STATE_ENV}, "
                   f"else ROOT/state when a root is given, else {DEFAULT_STATE})")


def _given_root(args: argparse.Namespace) -> str:
    return str(getattr(args, "root", "") or os.environ.get(ROOT_ENV, ""))


def podkit_root(args: argparse.Namespace) -> Path:
    """``--root``, else ``$PODKIT_ROOT``, else ``/var/lib/podkit``."""
    return Path(_given_root(args) or DEFAULT_ROOT).absolute()


def podkit_state(args: argparse.Namespace) -> Path:
    """``--state``, else ``$PODKIT_STATE``, else ``ROOT/state`` for a given root, else
    ``/run/podkit``."""
    state = str(getattr(args, "state", "") or os.environ.get(STATE_ENV, ""))
    if state:
        return Path(state).absolute()
    if _given_root(args):
        return podkit_root(args) / "state"
    return Path(DEFAULT_STATE)
