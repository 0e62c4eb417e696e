"""``podkit run`` and ``podkit ps``: run an OCI bundle (or a bare config.json) with runc/crun."""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import uuid
from pathlib import Path

from podkit import oci
from podkit.errors import InvalidArgumentError
from podkit.runtime import Bundle, InheritIO, Runc

DEFAULT_ROOT = "/run/podkit/runc"


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the top-level ``run`` and ``ps`` commands."""
    run = subparsers.add_parser(
        "run",
        help="run a container from an OCI bundle dir or config.json",
        description="Create and start a container with runc/crun; wait for it unless -d. "
        "The exit code is the container's (128+signal when killed).",
    )
    run.add_argument("source", help="bundle directory (with config.json) or an OCI config JSON")
    run.add_argument("--rootfs", help="root filesystem directory (overrides root.path)")
    run.add_argument("--runtime", default="runc", help="runtime binary (runc, crun, ...)")
    run.add_argument("--root", default=DEFAULT_ROOT, help="runtime state dir (--root)")
    run.add_argument("--id", help="container ID (default: generated)")
    run.add_argument("-d", "--detach", action="store_true", help="print the ID and return")
    run.add_argument("--no-tty", action="store_true",
                     help="force process.terminal=false (no TTY support in podkit run)")
    run.add_argument("--strict", action="store_true",
                     help="refuse spec fields the runtime would silently ignore")
    run.add_argument("--timeout", type=float, default=None,
                     help="kill and remove the container after this many seconds")
    run.set_defaults(func=cmd_run)

    ps = subparsers.add_parser("ps", help="list containers of a runtime state dir")
    ps.add_argument("--runtime", default="runc", help="runtime binary (runc, crun, ...)")
    ps.add_argument("--root", default=DEFAULT_ROOT, help="runtime state dir (--root)")
    ps.add_argument("--json", action="store_true", help="print JSON instead of a table")
    ps.set_defaults(func=cmd_ps)


def _load_spec(source: Path) -> oci.Spec:
    if source.is_dir():
        config = source / "config.json"
        if not config.is_file():
            raise InvalidArgumentError(f"{source}: not a bundle (no config.json)")
        return oci.Spec.load(config)
    if source.is_file():
        return oci.Spec.load(source)
    raise InvalidArgumentError(f"{source}: no such bundle directory or config file")


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
    cid = args.id or f"podkit-{uuid.uuid4().hex[:12]}"
    rt = Runc(args.runtime, root=args.root, strict=args.strict)
    # Never modify the caller's bundle: write our own config.json next to the same rootfs.
    rootfs = Path(args.rootfs) if args.rootfs else None
    if rootfs is None:
        base = source if source.is_dir() else source.parent
        if spec.root is None:
            raise InvalidArgumentError(f"{source}: no root.path and no --rootfs")
        rootfs = (base / spec.root.path).absolute()
    tmp = Path(tempfile.mkdtemp(prefix=f"podkit-run-{cid}-"))
    bundle = Bundle.create(tmp, spec, rootfs=rootfs)
    if args.detach:
        pid = rt.run(cid, bundle, detach=True, io=InheritIO(), timeout=args.timeout)
        print(json.dumps({"id": cid, "pid": pid, "bundle": str(bundle.path)}))
        return 0
    try:
        return rt.run(cid, bundle, io=InheritIO(), timeout=args.timeout)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def cmd_ps(args: argparse.Namespace) -> int:
    """Print the containers under ``--root``."""
    rt = Runc(args.runtime, root=args.root)
    containers = rt.list() if Path(args.root).is_dir() else []
    if args.json:
        print(json.dumps([
            {"id": c.id, "pid": c.pid, "status": c.status, "bundle": c.bundle,
             "created": c.created.isoformat() if c.created else None}
            for c in containers
        ], indent=2))
        return 0
    rows = [("ID", "PID", "STATUS", "CREATED", "BUNDLE")]
    for c in containers:
        created = c.created.strftime("%Y-%m-%dT%H:%M:%SZ") if c.created else ""
        rows.append((c.id, str(c.pid), c.status, created, c.bundle))
    widths = [max(len(r[i]) for r in rows) for i in range(4)]
    for r in rows:
        sys.stdout.write("  ".join(v.ljust(widths[i]) for i, v in enumerate(r[:4])))
        sys.stdout.write(f"  {r[4]}\n")
    return 0
