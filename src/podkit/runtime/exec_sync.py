"""exec_sync's parts shared by both supervisors: one foreground runtime exec, and its process.

``run_capped`` runs a foreground ``runtime exec`` with its output capped per stream and, after a
timeout, returns (raises) only once the exec'd process, its process group and the runtime are
gone. ``container_process`` is the container's own process running other args: what the
conmon-backed supervisor hands to ``exec --process`` (conmon's ``--exec`` ran the same).
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from podkit import oci
from podkit.errors import InvalidArgumentError
from podkit.oci import codec
from podkit.runtime.base import ExecResult
from podkit.runtime.command import CommandResult, logged_error
from podkit.runtime.io import CappedOutput
from podkit.runtime.monitor import PidFileProcess

__all__ = ["container_process", "exec_files", "exec_spec", "run_capped"]

RunExec = Callable[[CappedOutput, Callable[[], None]], CommandResult]
"""``(output, on_timeout) -> result``: one foreground exec writing into ``output``."""


@contextlib.contextmanager
def exec_files(
    scratch: str | os.PathLike[str], id: str, spec: Mapping[str, Any] | None
) -> Iterator[tuple[str, str]]:
    """A fresh pid file path in ``scratch`` (the runtime writes it) and the path of a process
    spec file next to it (holding ``spec`` when given); both removed at the end."""
    fd, pid_path = tempfile.mkstemp(dir=scratch, prefix=f"{id}-sync-", suffix=".pid")
    os.close(fd)
    os.unlink(pid_path)
    spec_path = pid_path[:-4] + ".json"
    try:
        if spec is not None:
            with open(spec_path, "x") as f:
                f.write(json.dumps(spec))
        yield pid_path, spec_path
    finally:
        for path in (pid_path, spec_path):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path)


def run_capped(
    run: RunExec, pid_path: str | os.PathLike[str],
    error: Callable[[CommandResult], Exception],
) -> ExecResult:
    """``run`` the exec; its exit code (``128+N`` when killed by signal N) and capped output.

    A timeout (or any error) inside ``run`` kills the process named by ``pid_path`` with its
    group and waits until it is reaped before re-raising; a failure the runtime logged is
    raised as ``error(result)``.
    """
    with CappedOutput() as output, PidFileProcess(pid_path) as victim:
        try:
            res = run(output, victim.kill)
        except BaseException:  # timed out (or interrupted): the runtime was killed mid-way
            victim.kill()  # the pid file may have appeared while the runtime was killed
            victim.wait_gone()
            raise
        stdout, stderr = output.finish()
    if res.returncode != 0 and logged_error(res.log):
        raise error(res)
    rc = res.returncode if res.returncode >= 0 else 128 - res.returncode
    return ExecResult(exit_code=rc, stdout=stdout, stderr=stderr)


def exec_spec(id: str, process: oci.Process | Mapping[str, Any]) -> dict[str, Any]:
    """``process`` as the JSON ``exec --process`` reads; ``InvalidArgumentError`` without args
    or with a terminal (exec_sync collects output through pipes)."""
    spec = codec.unstructure(process) if isinstance(process, oci.Process) else dict(process)
    if not spec.get("args") or spec.get("terminal"):
        raise InvalidArgumentError(f"exec_sync into {id}: no args, or a terminal asked for")
    return spec


def container_process(bundle: str | os.PathLike[str], args: Sequence[str]) -> dict[str, Any]:
    """The ``process`` of ``bundle``'s config.json running ``args``: no terminal, cwd ``/`` and
    uid/gid 0 where unset; every other setting (env, user, capabilities, apparmor...) kept."""
    if isinstance(args, str) or not args:
        raise InvalidArgumentError(f"exec args must be a non-empty list, got {args!r}")
    config = Path(bundle) / "config.json"
    try:
        base = json.loads(config.read_bytes()).get("process") or {}
    except (OSError, ValueError) as exc:
        raise InvalidArgumentError(f"cannot read process of {config}: {exc}") from None
    process = {k: v for k, v in base.items() if k != "consoleSize"}
    process.update(args=list(args), terminal=False)
    process.setdefault("cwd", "/")
    process.setdefault("user", {"uid": 0, "gid": 0})
    return process
