"""The ``podkit`` command's exit codes, and which error kind exits with which.

Scripts branch on these, so they never change meaning (docs/cli.md has the table). Commands
that run a program (``pod exec``, ``podkit run`` in the foreground) exit with its code instead.
"""

from __future__ import annotations

import enum

from podkit import errors
from podkit.cni import PluginTimeoutError
from podkit.runtime import OCIRuntimeError, RuntimeTimeoutError

__all__ = ["ExitCode", "exit_code_for"]


class ExitCode(enum.IntEnum):
    """What a ``podkit`` exit status means."""

    OK = 0
    FAILURE = 1
    """Any other failure."""
    USAGE = 2
    """A bad option or argument (argparse), or bad input a command was given (a file's field)."""
    NOT_FOUND = 3
    """The pod, container, image, network, device or file named does not exist."""
    ALREADY_EXISTS = 4
    """The name or ID to create is taken."""
    CONFLICT = 5
    """The thing is in the wrong state for the request, or busy (locked by another process)."""
    TIMEOUT = 6
    """A wait, runtime command or plugin did not finish in time."""
    PERMISSION = 7
    """Not allowed: the command needs root, or a file or directory is not writable."""
    RUNTIME = 8
    """The OCI runtime (runc, crun) failed."""
    INTERRUPTED = 130
    """Interrupted by SIGINT (Ctrl-C), as shells report it."""


# first match wins: the specific kinds before the broad ones they derive from
_KINDS: tuple[tuple[type[BaseException] | tuple[type[BaseException], ...], ExitCode], ...] = (
    ((TimeoutError, RuntimeTimeoutError, PluginTimeoutError), ExitCode.TIMEOUT),
    (PermissionError, ExitCode.PERMISSION),
    ((errors.NotFoundError, FileNotFoundError), ExitCode.NOT_FOUND),
    ((errors.AlreadyExistsError, FileExistsError), ExitCode.ALREADY_EXISTS),
    (errors.ConflictError, ExitCode.CONFLICT),
    (errors.InvalidArgumentError, ExitCode.USAGE),
    (OCIRuntimeError, ExitCode.RUNTIME),
    (KeyboardInterrupt, ExitCode.INTERRUPTED),
)


def exit_code_for(exc: BaseException) -> ExitCode:
    """The exit code of a command that failed with ``exc``."""
    for kinds, code in _KINDS:
        if isinstance(exc, kinds):
            return code
    return ExitCode.FAILURE
