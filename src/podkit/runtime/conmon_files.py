"""What podkit and conmon keep on disk for a container under conmon, and how it is read.

podkit's record (``conmon.json``, a ``ConmonContainer``), conmon's exit files (the exit code as
decimal text, ``128 + N`` for signal N), the links to bundles in the socket dir (named by
``attach_link_name``), and the private (0700) directories and (0600) files they live in.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import os
from pathlib import Path
from typing import Any

import attrs

from podkit.errors import InvalidArgumentError
from podkit.runtime.base import ExitStatus
from podkit.runtime.errors import OCIRuntimeError

__all__ = [
    "META",
    "PRIVATE_DIR",
    "PRIVATE_FILE",
    "SUN_PATH_MAX",
    "ConmonContainer",
    "attach_link_name",
    "exit_status_from_code",
    "link_target",
    "now_rfc3339",
    "private_dir",
    "read_int_file",
]

META = "conmon.json"
SUN_PATH_MAX = 107  # sizeof(sockaddr_un.sun_path) - 1: conmon cuts a link path of this length
PRIVATE_DIR = 0o700
PRIVATE_FILE = 0o600


@attrs.define(slots=True, kw_only=True)
class ConmonContainer:
    """What podkit recorded when it started a container under conmon (``conmon.json``)."""

    id: str
    bundle: str
    log_path: str
    pid: int
    conmon_pid: int
    tty: bool = False
    stdin: bool = False
    runtime: list[str] = attrs.field(factory=list)
    created: str = ""

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict."""
        return {
            "id": self.id,
            "bundle": self.bundle,
            "logPath": self.log_path,
            "pid": self.pid,
            "conmonPid": self.conmon_pid,
            "tty": self.tty,
            "stdin": self.stdin,
            "runtime": self.runtime,
            "created": self.created,
        }

    @classmethod
    def from_dict(cls, data: Any, source: str) -> ConmonContainer:
        """Inverse of :meth:`to_dict`; ``source`` names the file in errors."""
        try:
            return cls(
                id=str(data["id"]),
                bundle=str(data["bundle"]),
                log_path=str(data["logPath"]),
                pid=int(data["pid"]),
                conmon_pid=int(data["conmonPid"]),
                tty=bool(data.get("tty", False)),
                stdin=bool(data.get("stdin", False)),
                runtime=[str(a) for a in data.get("runtime", [])],
                created=str(data.get("created", "")),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise InvalidArgumentError(f"corrupt conmon state {source}: {exc!r}") from None


def now_rfc3339() -> str:
    return _dt.datetime.now(_dt.UTC).isoformat().replace("+00:00", "Z")


def attach_link_name(socket_dir: Path, id: str) -> str:
    """conmon's ``--cuuid``: the name of the link to the bundle in ``socket_dir``.

    ``id``, unless ``socket_dir/id`` is exactly 107 bytes: conmon would cut that name by one
    character (podkit could not find it; IDs differing only at the end would share it), so a
    hashed name of another length, which no ID can be (``_`` first), is used instead.
    """
    if len(os.fsencode(socket_dir)) + 1 + len(id) != SUN_PATH_MAX:
        return id
    digest = hashlib.sha256(id.encode()).hexdigest()
    return "_" + digest[: 32 if len(id) == 32 else 31]


def private_dir(path: Path) -> None:
    """Create ``path`` (parents as needed) and make it 0700."""
    path.mkdir(parents=True, exist_ok=True, mode=PRIVATE_DIR)
    os.chmod(path, PRIVATE_DIR)


def link_target(link: Path) -> Path | None:
    """Where the symlink ``link`` points (``None`` when it is not a symlink)."""
    try:
        return Path(os.readlink(link))
    except OSError:
        return None


def read_int_file(path: Path) -> int | None:
    try:
        text = path.read_text().strip()
    except FileNotFoundError:
        return None
    try:
        return int(text)
    except ValueError:
        raise OCIRuntimeError(f"unexpected content {text[:40]!r} in {path}") from None


def exit_status_from_code(code: int, exited_at: _dt.datetime | None) -> ExitStatus:
    # conmon folds "killed by signal N" into 128 + N, like a shell; report the signal for
    # codes in the signal range, as CRI does (an explicit `exit 137` looks the same).
    sig = code - 128 if 128 < code <= 128 + 64 else None
    return ExitStatus(exit_code=code, signal=sig, exited_at=exited_at)
