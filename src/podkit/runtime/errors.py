"""Typed errors of the OCI runtime adapter, parsed from runc's and crun's own messages.

runc and crun report failures as a non-zero exit plus a message on stderr and, with
``--log FILE --log-format json``, as JSON records ``{"level": "error", "msg": ...}`` in the log.
:func:`parse_runtime_error` takes either text and returns the most specific error kind, so
callers catch ``runtime.NotFoundError`` for both runtimes although their texts differ
(runc: ``container does not exist``; crun: ``error opening file `<root>/<id>/status`: No such
file or directory``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence

from podkit import errors as _base

__all__ = [
    "AlreadyExistsError",
    "NotFoundError",
    "NotRunningError",
    "OCIRuntimeError",
    "RuntimeTimeoutError",
    "UnsupportedOperationError",
    "classify",
    "last_error_message",
    "parse_runtime_error",
]


class OCIRuntimeError(_base.PodkitError):
    """A runtime (runc, crun) command failed; carries its own message, argv and stderr.

    ``str(err)`` is ``"<runtime message> (command: <argv>)"`` so logs show both what the runtime
    said and what podkit asked it to do.
    """

    def __init__(
        self,
        message: str,
        command: Sequence[str] = (),
        stderr: str = "",
    ) -> None:
        self.message = message
        self.command = list(command)
        self.stderr = stderr
        text = message
        if self.command:
            text = f"{message} (command: {' '.join(self.command)})"
        super().__init__(text)


class NotFoundError(OCIRuntimeError, _base.NotFoundError):
    """The container (or the runtime binary) does not exist."""


class AlreadyExistsError(OCIRuntimeError, _base.AlreadyExistsError):
    """A container with that ID already exists in the runtime's state root."""


class NotRunningError(OCIRuntimeError, _base.ConflictError):
    """The container is in the wrong state for the request (stopped, paused, already started)."""


class UnsupportedOperationError(OCIRuntimeError):
    """The runtime has no such command (crun 1.8.1: ``events``, ``features``, ``checkpoint``)."""


class RuntimeTimeoutError(OCIRuntimeError):
    """A runtime command or a wait did not finish in time; its process group was killed."""


# (pattern, class), first match wins, tried on the message with quoted parts (IDs, paths)
# blanked out. Texts are runc 1.1.5 and crun 1.8.1 (tests/runtime/data, runc-empirical.md).
_RULES: tuple[tuple[re.Pattern[str], type[OCIRuntimeError]], ...] = (
    (re.compile(r"unknown command|no help topic|no such command", re.I),
     UnsupportedOperationError),
    (re.compile(r"already exists", re.I), AlreadyExistsError),
    (re.compile(r"container does not exist|error opening file .*no such file"
                r"|cannot open directory .*no such file", re.I), NotFoundError),
    (re.compile(r"paused|not running|not stopped|is not in .* state|no such process"
                r"|process already finished|stopped container|in a stopped state"
                r"|already running", re.I),
     NotRunningError),
)
# Tried on the raw message first: the telling part is inside quotes.
_RAW_RULES: tuple[tuple[re.Pattern[str], type[OCIRuntimeError]], ...] = (
    # crun `start` of a started container: its exec fifo is gone
    (re.compile(r"exec\.fifo`?: no such file", re.I), NotRunningError),
)
_QUOTED = re.compile(r"`[^`]*`|'[^']*'")


def _records(text: str) -> list[dict[str, object]]:
    out: list[dict[str, object]] = []
    for line in text.splitlines():
        line = line.strip()
        if not line.startswith("{"):
            continue
        try:
            obj = json.loads(line)
        except ValueError:
            continue
        if isinstance(obj, dict):
            out.append(obj)
    return out


_LOGFMT_MSG = re.compile(r'level=error\s+msg="((?:[^"\\]|\\.)*)"')


def last_error_message(text: str) -> str:
    """The last ``level == "error"`` message in a runtime log or stderr, else the stripped text.

    Understands JSON log lines (any key order: runc writes ``level`` first, crun ``msg`` first),
    runc's logfmt stderr (``time=... level=error msg="..."``) and plain text.
    """
    msg = ""
    for rec in _records(text):
        if rec.get("level") == "error" and isinstance(rec.get("msg"), str):
            msg = str(rec["msg"]).strip()
    if msg:
        return msg
    found = _LOGFMT_MSG.findall(text)
    if found:
        return str(json.loads(f'"{found[-1]}"')).strip()
    lines = [ln.strip() for ln in text.splitlines()]
    lines = [ln for ln in lines if ln and not ln.startswith("{")]
    return lines[-1] if lines else text.strip()


def classify(message: str) -> type[OCIRuntimeError]:
    """The error class for a runtime message (``OCIRuntimeError`` when nothing more specific)."""
    for pattern, cls in _RAW_RULES:
        if pattern.search(message):
            return cls
    blanked = _QUOTED.sub("``", message)
    for pattern, cls in _RULES:
        if pattern.search(blanked):
            return cls
    return OCIRuntimeError


def parse_runtime_error(
    log_bytes_or_stderr: bytes | str,
    command: Sequence[str],
    runtime_name: str = "runc",
) -> OCIRuntimeError:
    """Turn a failed command's JSON log (or stderr text) into the typed error it describes.

    ``runtime_name`` prefixes the message when the runtime's own text does not name itself,
    so a message always says which runtime failed.
    """
    text = (
        log_bytes_or_stderr.decode(errors="replace")
        if isinstance(log_bytes_or_stderr, bytes)
        else log_bytes_or_stderr
    )
    message = last_error_message(text)
    if not message:
        message = "failed without an error message"
    cls = classify(message)
    if not message.startswith(runtime_name):
        message = f"{runtime_name}: {message}"
    return cls(message, command, text)
