"""What the ``podkit`` command says on stderr: one-line errors and warnings printed once.

An error is ``podkit: <what failed>: <why>`` on one line; the command lines runtimes were
started with (1-2 KB for conmon) and the stack appear only with ``--debug``. Bad input with
several problems (a manifest's fields) adds one line per problem under it.
"""

from __future__ import annotations

import logging
import re
import traceback
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TextIO

from podkit.errors import InvalidArgumentError, PodkitError
from podkit.runtime import OCIRuntimeError

__all__ = ["MAX_MESSAGE", "error_line", "log_to", "needs_root_line"]

MAX_MESSAGE = 400
"""The most characters of an error message printed without ``--debug``."""

_COMMAND = re.compile(r" \(command: [^()]*\)")


def _text(exc: BaseException) -> str:
    if isinstance(exc, OCIRuntimeError):
        return exc.message
    if isinstance(exc, KeyboardInterrupt):
        return "interrupted"
    if isinstance(exc, OSError) and exc.strerror:
        where = f": {exc.filename}" if exc.filename else ""
        return f"{exc.strerror.lower()}{where}"
    if isinstance(exc, PodkitError | OSError | TimeoutError):
        return str(exc) or type(exc).__name__
    # not an error podkit raises on purpose: a bug, so say what kind
    return f"internal error: {type(exc).__name__}: {exc} (--debug prints the stack)"


def error_line(exc: BaseException, *, debug: bool = False) -> str:
    """``exc`` as ``podkit: ...`` text: one line, embedded command lines cut, at most
    :data:`MAX_MESSAGE` characters; with ``debug`` the full message, command, runtime stderr
    and stack (several lines)."""
    if debug:
        parts = ["".join(traceback.format_exception(exc)).rstrip(), f"podkit: {exc}"]
        if isinstance(exc, OCIRuntimeError) and exc.stderr:
            parts.append(f"podkit: runtime stderr: {exc.stderr.rstrip()}")
        return "\n".join(parts)
    text, problems = _text(exc), []
    if isinstance(exc, InvalidArgumentError):  # its problems: indented lines under the first
        first, *rest = text.split("\n")
        problems = [line for line in rest if line.startswith("  ")]
        if problems:
            text = first
    lines = [f"podkit: {_cut(text)}", *(f"  {_cut(line)}" for line in problems)]
    return "\n".join(lines)


def _cut(text: str) -> str:
    """One line of at most :data:`MAX_MESSAGE` characters, command lines left out."""
    text = " ".join(_COMMAND.sub("", text).split())
    if len(text) > MAX_MESSAGE:
        text = text[:MAX_MESSAGE] + "... (--debug prints all)"
    return text


def needs_root_line(what: str) -> str:
    """The one line a user who is not root gets."""
    return f"podkit: podkit needs root to {what}"


class _Once(logging.Filter):
    """Lets each distinct message through once per process."""

    seen: set[str] = set()

    def filter(self, record: logging.LogRecord) -> bool:
        text = record.getMessage()
        if text in self.seen:
            return False
        self.seen.add(text)
        return True


class _Format(logging.Formatter):
    """``podkit: warning: text`` (with ``debug``: ``podkit: debug podkit.pods.manager: text``)."""

    def __init__(self, debug: bool) -> None:
        super().__init__()
        self.debug = debug

    def format(self, record: logging.LogRecord) -> str:
        where = f" {record.name}" if self.debug else ""
        return f"podkit: {record.levelname.lower()}{where}: {record.getMessage()}"


@contextmanager
def log_to(stream: TextIO, *, debug: bool = False) -> Iterator[None]:
    """podkit's log records as ``podkit: warning: ...`` lines on ``stream`` while the body
    runs: warnings and errors once per process; with ``debug`` every record, every time."""
    handler = logging.StreamHandler(stream)
    handler.setFormatter(_Format(debug))
    if not debug:
        handler.addFilter(_Once())
    logger = logging.getLogger("podkit")
    old_level = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG if debug else logging.WARNING)
    try:
        yield
    finally:
        logger.removeHandler(handler)
        logger.setLevel(old_level)
