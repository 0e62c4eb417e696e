"""``podkit run``, ``podkit ps`` and ``podkit rm``: run an OCI bundle (or a bare config.json)
with runc/crun."""

from __future__ import annotations

import argparse
import datetime
import json
import shutil
import uuid
from pathlib import Path

from podkit import oci
from podkit._files import validate_id
from podkit.errors import AlreadyExistsError, InvalidArgumentError, NotFoundError
from podkit.node import build_runtime
from podkit.runtime import Bundle, InheritIO, Runc

from .dirs import DEFAULT_STATE, add_dir_options, add_node_options, node_config, podkit_state
from .output import Column, add_output_options, emit

DEFAULT_ROOT = f"{DEFAULT_STATE}/runc"

__all__ = ["DEFAULT_ROOT", "register"]


def _runtime_args(p: argparse.ArgumentParser) -> None:
    add_dir_options(p)
    add_node_options(p, "runtime", "runtime_root")


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the top-level ``run``, ``ps`` and ``rm`` commands."""
    run = subparsers.add_parser(
        "run",
        help="run a container from an OCI bundle dir or config.json",
        description="Create and start a container with runc/crun; wait for it unless -d. "
        "The exit code is the container's (128+signal when killed). Its bundle (a config.json "
        "next to the rootfs) is made under STATE/run/ID and removed when the container is "
        "(at exit, or by podkit rm after -d).",
    )
    run.add_argument("source", help="bundle directory (with config.json) or an OCI config JSON")
    run.add_argument("--rootfs", help="root filesystem directory (overrides root.path)")
    _runtime_args(run)
    run.add_argument("--id", help="container ID (default: generated)")
    run.add_argument("-d", "--detach", action="store_true", help="print the ID and return")
    run.add_argument("--no-tty", action="store_true",
                     help="force process.terminal=false (no TTY support in podkit run)")
    run.add_argument("--strict", action="store_true",
                     help="refuse spec fields the runtime would silently ignore")
    run.add_argument("--timeout", type=float, default=None,
                     help="kill and remove the container after this many seconds")
    run.add_argument("--network", choices=("host", "none"), default=None,
                     help="host: the host's network namespace; none: a new one with only "
                     "loopback (default: as the spec says)")
    run.set_defaults(func=cmd_run, needs_root="run containers")

    ps = subparsers.add_parser("ps", help="list containers of a runtime state dir")
    _runtime_args(ps)
    add_output_options(ps)
    ps.add_argument("--json", dest="output", action="store_const", const="json",
                    help="the same as -o json")
    ps.set_defaults(func=cmd_ps)

    rm = subparsers.add_parser("rm", help="delete containers podkit run -d started (and their "
                               "bundles)")
    rm.add_argument("ids", nargs="+", metavar="ID")
    rm.add_argument("-f", "--force", action="store_true", help="kill running ones first")
    _runtime_args(rm)
    rm.set_defaults(func=cmd_rm, needs_root="delete containers")


def _runc(args: argparse.Namespace, *, strict: bool = False) -> Runc:
    """The runtime of the node config: its state in STATE/<runtime> (or --runtime-root)."""
    return build_runtime(node_config(args), strict=strict)


def _with_network(spec: oci.Spec, mode: str | None) -> oci.Spec:
    """``--network``: host drops the spec's network namespace, none asks for a new one."""
    if mode is None:
        return spec
    return oci.generate(spec, oci.with_host_namespace("network") if mode == "host"
                        else oci.with_linux_namespace("network"))


def _bundle_dir(args: argparse.Namespace, cid: str) -> Path:
    return podkit_state(args) / "run" / cid


def _load_spec(source: Path) -> oci.Spec:
    if source.is_dir():
        config = source / "config.json"
        if not config.is_file():
            raise InvalidArgumentError(f"{source}: not a bundle (no config.json)")
        return oci.Spec.load(config)
    if source.is_file():
        return oci.Spec.load(source)
    raise InvalidArgumentError(f"{source}: no such bundle directory or config file")


def _rootfs(args: argparse.Namespace, source: Path, spec: oci.Spec) -> Path:
    if args.rootfs:
        return Path(args.rootfs).absolute()
    if spec.root is None:
        raise InvalidArgumentError(f"{source}: no root.path and no --rootfs")
    base = source if source.is_dir() else source.parent
    return (base / spec.root.path).absolute()


def cmd_run(args: argparse.Namespace) -> int:
    """Run a container; return its exit code (foreground) or 0 (detached)."""
    source = Path(args.source)
    spec = _load_spec(source)
    if spec.process is None:
        raise InvalidArgumentError(f"{source}: the spec has no process to run")
    if args.no_tty:
        spec.process.terminal = False
    if spec.process.terminal:
        raise InvalidArgumentError(
            f"{source}: process.terminal is true; podkit run has no TTY, pass --no-tty"
        )
    spec = _with_network(spec, args.network)
    cid = args.id or f"podkit-{uuid.uuid4().hex[:12]}"
    validate_id(cid, "container ID (--id)")
    rt = _runc(args, strict=args.strict)
    rootfs = _rootfs(args, source, spec)
    # Never modify the caller's bundle: write our own config.json next to the same rootfs.
    where = _bundle_dir(args, cid)
    where.parent.mkdir(parents=True, exist_ok=True)
    try:
        where.mkdir()
    except FileExistsError:
        raise AlreadyExistsError(f"container {cid!r}: {where} exists (podkit rm {cid})") from None
    detached = False
    try:
        bundle = Bundle.create(where, spec, rootfs=rootfs)
        if args.detach:
            pid = rt.run(cid, bundle, detach=True, io=InheritIO(), timeout=args.timeout)
            detached = True
            print(json.dumps({"id": cid, "pid": pid, "bundle": str(bundle.path)}))
            return 0
        return rt.run(cid, bundle, io=InheritIO(), timeout=args.timeout)
    finally:
        if not detached:
            shutil.rmtree(where, ignore_errors=True)


def cmd_rm(args: argparse.Namespace) -> int:
    """Delete containers and their bundles under the state dir."""
    rt = _runc(args)
    for cid in args.ids:
        validate_id(cid, "container ID")
        where = _bundle_dir(args, cid)
        known = rt.root is not None and rt.root.is_dir() and cid in {c.id for c in rt.list()}
        if not known and not where.exists():
            raise NotFoundError(f"container {cid!r}: not found")
        if known:
            rt.delete(cid, force=args.force)
        shutil.rmtree(where, ignore_errors=True)
    return 0


def _created(value: datetime.datetime | None) -> str | None:
    return value.astimezone(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ") if value else None


_COLUMNS = (Column("id", "ID"), Column("pid", "PID"), Column("status", "STATUS"),
            Column("created", "CREATED"), Column("bundle", "BUNDLE"))


def cmd_ps(args: argparse.Namespace) -> int:
    """Print the containers under the runtime's state dir."""
    rt = _runc(args)
    containers = rt.list() if rt.root is not None and rt.root.is_dir() else []
    emit(args, [{"id": c.id, "pid": c.pid, "status": c.status, "created": _created(c.created),
                 "bundle": c.bundle} for c in containers], _COLUMNS)
    return 0
