"""``podkit image pull|import|ls|inspect|rm|prune``: the image store from the command line."""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time
from typing import Any, TextIO

from podkit.image import (
    Credentials,
    ImageStore,
    Platform,
    Progress,
    Registry,
    import_image,
)

DEFAULT_ROOT = "/var/lib/podkit"


class ProgressBar:
    """A one-line progress bar over every blob of a pull or import (thread-safe)."""

    def __init__(self, label: str, out: TextIO | None = None) -> None:
        self._label = label
        self._out = out if out is not None else sys.stderr
        self._blobs: dict[str, tuple[int, int, str]] = {}
        self._lock = threading.Lock()
        self._last = 0.0
        self._tty = self._out.isatty()

    def __call__(self, event: Progress) -> None:
        with self._lock:
            self._blobs[event.digest] = (event.done, event.total, event.status)
            now = time.monotonic()
            if event.status in ("copying", "waiting") and now - self._last < 0.1:
                return
            self._last = now
            self._draw(final=False)

    def _draw(self, final: bool) -> None:
        done = sum(d for d, _, _ in self._blobs.values())
        total = sum(t for _, t, _ in self._blobs.values()) or 1
        finished = sum(1 for _, _, s in self._blobs.values() if s in ("done", "exists"))
        width = 30
        fill = int(width * min(done, total) / total)
        line = (f"{self._label} [{'#' * fill}{'.' * (width - fill)}] "
                f"{done / 1e6:7.1f}/{total / 1e6:.1f} MB  {finished}/{len(self._blobs)} blobs")
        if self._tty:
            self._out.write("\r" + line + ("\n" if final else ""))
        elif final:
            self._out.write(line + "\n")
        self._out.flush()

    def finish(self) -> None:
        """Draw the final state and end the line."""
        with self._lock:
            if self._blobs:
                self._draw(final=True)


def _store(args: argparse.Namespace) -> ImageStore:
    return ImageStore(args.root)


def _pull(args: argparse.Namespace) -> int:
    creds = None
    if args.user:
        user, _, password = args.user.partition(":")
        creds = Credentials(user, password)
    registry = Registry(auth=creds, plain_http=True if args.plain_http else None)
    bar = None if args.quiet else ProgressBar(f"pull {args.reference}")
    platform = Platform.parse(args.platform) if args.platform else None
    try:
        image = registry.pull(_store(args), args.reference, platform=platform, progress=bar)
    finally:
        if bar is not None:
            bar.finish()
    print(f"{image.name} {image.manifest.digest}")
    return 0


def _import(args: argparse.Namespace) -> int:
    bar = None if args.quiet else ProgressBar(f"import {args.path}")
    platform = Platform.parse(args.platform) if args.platform else None
    try:
        images = import_image(_store(args), args.path, args.reference, platform=platform,
                              progress=bar)
    finally:
        if bar is not None:
            bar.finish()
    for image in images:
        print(f"{image.name} {image.manifest.digest}")
    return 0


def _ls(args: argparse.Namespace) -> int:
    images = _store(args).list()
    if args.quiet:
        for image in images:
            print(image.name)
        return 0
    rows = [("REFERENCE", "DIGEST", "PLATFORM", "SIZE")]
    for image in images:
        rows.append((image.name, image.target.digest[:19], str(image.platform or "-"),
                     f"{image.size / 1e6:.1f} MB"))
    widths = [max(len(r[i]) for r in rows) for i in range(4)]
    for row in rows:
        print("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())
    return 0


def _inspect(args: argparse.Namespace) -> int:
    store = _store(args)
    out: list[dict[str, Any]] = []
    for ref in args.references:
        image = store.get(ref)
        record = image.to_dict()
        cfg = store.config(image)
        record["imageConfig"] = {
            "env": list(cfg.env), "entrypoint": cfg.entrypoint and list(cfg.entrypoint),
            "cmd": cfg.cmd and list(cfg.cmd), "workingDir": cfg.working_dir, "user": cfg.user,
            "exposedPorts": list(cfg.exposed_ports), "volumes": list(cfg.volumes),
            "labels": cfg.labels, "stopSignal": cfg.stop_signal,
        }
        record["chainIds"] = image.chain_ids
        out.append(record)
    print(json.dumps(out, indent=2))
    return 0


def _rm(args: argparse.Namespace) -> int:
    store = _store(args)
    for ref in args.references:
        print(store.remove(ref).name)
    if args.prune:
        result = store.gc()
        print(f"removed {len(result.blobs)} blobs, {len(result.snapshots)} snapshots, "
              f"{result.bytes_freed / 1e6:.1f} MB")
    return 0


def _prune(args: argparse.Namespace) -> int:
    result = _store(args).gc()
    print(f"removed {len(result.blobs)} blobs, {len(result.snapshots)} snapshots, "
          f"{result.bytes_freed / 1e6:.1f} MB")
    return 0


def register(subparsers: Any) -> None:
    """Add the ``image`` group to the ``podkit`` command."""
    group = subparsers.add_parser("image", help="pull, import, list and remove OCI images")
    sub = group.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True

    def leaf(name: str, help_: str) -> argparse.ArgumentParser:
        p: argparse.ArgumentParser = sub.add_parser(name, help=help_)
        p.add_argument("--root", default=DEFAULT_ROOT,
                       help=f"podkit state root (default {DEFAULT_ROOT})")
        return p

    p = leaf("pull", "pull an image from a registry")
    p.add_argument("reference")
    p.add_argument("--platform", help="os/arch[/variant] (default: this machine)")
    p.add_argument("--user", help="USER:PASSWORD for the registry")
    p.add_argument("--plain-http", action="store_true", help="use HTTP instead of HTTPS")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=_pull)

    p = leaf("import", "import an OCI layout, OCI archive or docker save archive")
    p.add_argument("path")
    p.add_argument("reference", nargs="?", help="name for an unnamed (or single) image")
    p.add_argument("--platform", help="os/arch[/variant] (default: this machine)")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=_import)

    p = leaf("ls", "list images")
    p.add_argument("-q", "--quiet", action="store_true", help="names only")
    p.set_defaults(func=_ls)

    p = leaf("inspect", "show image records and configs as JSON")
    p.add_argument("references", nargs="+")
    p.set_defaults(func=_inspect)

    p = leaf("rm", "remove image records")
    p.add_argument("references", nargs="+")
    p.add_argument("--prune", action="store_true", help="also garbage-collect afterwards")
    p.set_defaults(func=_rm)

    p = leaf("prune", "delete blobs and snapshots no image uses")
    p.set_defaults(func=_prune)
