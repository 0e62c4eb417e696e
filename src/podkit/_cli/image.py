"""``podkit image pull|import|build|export|ls|inspect|rm|prune|login|logout``: images from the
command line."""

from __future__ import annotations

import argparse
import getpass
import json
import shlex
import sys
import threading
import time
from pathlib import Path
from typing import Any, TextIO

from podkit.errors import InvalidArgumentError
from podkit.image import (
    AuthFile,
    Credentials,
    Image,
    ImageConfig,
    ImageNotFoundError,
    ImageStore,
    Platform,
    Progress,
    Registry,
    RegistryHosts,
    build_from_rootfs,
    export_image,
    import_image,
)
from podkit.image.auth import AuthSource
from podkit.image.hosts import DEFAULT_DIR

from .dirs import DEFAULT_ROOT, add_dir_options, node_config
from .output import Column, add_output_options, cell, emit

__all__ = ["DEFAULT_ROOT", "ProgressBar", "register"]


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


def _images_root(args: argparse.Namespace) -> Path:
    """The image store's root: the node config's ``image_root``, else the root."""
    return Path(node_config(args).images_dir).absolute()


def _store(args: argparse.Namespace) -> ImageStore:
    return ImageStore(_images_root(args))


def _creds(value: str) -> Credentials:
    user, sep, password = value.partition(":")
    if not sep:
        password = getpass.getpass(f"password for {user}: ")
    return Credentials(user, password)


def _auth(args: argparse.Namespace) -> AuthSource:
    """``--creds`` for every registry, else the auth file (``--authfile`` or the usual places)."""
    if args.creds:
        return _creds(args.creds)
    return AuthFile(args.authfile)


def _pull(args: argparse.Namespace) -> int:
    hosts = RegistryHosts.load(args.registry_config_dir,
                               scheme="http" if args.plain_http else None)
    registry = Registry(auth=_auth(args), hosts=hosts)
    bar = None if args.quiet else ProgressBar(f"pull {args.reference}")
    platform = Platform.parse(args.platform) if args.platform else None
    try:
        image = registry.pull(_store(args), args.reference, platform=platform, progress=bar)
    finally:
        if bar is not None:
            bar.finish()
    print(f"{image.name} {image.manifest.digest}")
    return 0


def _login(args: argparse.Namespace) -> int:
    user = args.username if args.username is not None else input("Username: ")
    if args.password_stdin:
        password = sys.stdin.readline().rstrip("\n")
    elif args.password is not None:
        password = args.password
    else:
        password = getpass.getpass("Password: ")
    if not user or not password:
        raise InvalidArgumentError("login: a username and a password are required")
    creds = Credentials(user, password)
    if not args.no_verify:
        hosts = RegistryHosts.load(args.registry_config_dir,
                                   scheme="http" if args.plain_http else None)
        Registry(auth=creds, hosts=hosts, retries=1).check_login(args.registry)
    auth = AuthFile(args.authfile)
    auth.login(args.registry, creds)
    print(f"Login Succeeded ({auth.path})")
    return 0


def _logout(args: argparse.Namespace) -> int:
    auth = AuthFile(args.authfile)
    if not auth.logout(args.registry):
        print(f"not logged in to {args.registry} ({auth.path})", file=sys.stderr)
        return 1
    print(f"Removed login credentials for {args.registry} ({auth.path})")
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


def _argv(value: str, option: str) -> tuple[str, ...]:
    """``--entrypoint``/``--cmd``: a JSON array (``'["sleep", "1"]'``) or words as a shell
    splits them (``'sleep 1'``)."""
    try:
        if value.lstrip().startswith("["):
            argv = json.loads(value)
            if not isinstance(argv, list) or not all(isinstance(a, str) for a in argv):
                raise ValueError("not a list of strings")
            return tuple(argv)
        return tuple(shlex.split(value))
    except ValueError as exc:
        raise InvalidArgumentError(f"{option} {value!r}: {exc}") from None


def _pairs(values: list[str], option: str) -> dict[str, str]:
    out = {}
    for value in values:
        key, sep, rest = value.partition("=")
        if not sep or not key:
            raise InvalidArgumentError(f"{option} {value!r}: want KEY=VALUE")
        out[key] = rest
    return out


def _owner(value: str | None) -> tuple[int, int] | None:
    if value is None:
        return None
    uid, sep, gid = value.partition(":")
    if not sep or not uid.isdigit() or not gid.isdigit():
        raise InvalidArgumentError(f"--owner {value!r}: want UID:GID (numbers, 0:0 for root)")
    return int(uid), int(gid)


def _build(args: argparse.Namespace) -> int:
    env = _pairs(args.env, "--env")
    config = ImageConfig(
        env=tuple(f"{k}={v}" for k, v in env.items()),
        entrypoint=None if args.entrypoint is None else _argv(args.entrypoint, "--entrypoint"),
        cmd=None if args.cmd is None else _argv(args.cmd, "--cmd"),
        working_dir=args.workdir, user=args.user, labels=_pairs(args.label, "--label"))
    image = build_from_rootfs(_store(args), args.from_dir, args.reference, config=config,
                              owner=_owner(args.owner))
    print(f"{image.name} {image.manifest.digest}")
    return 0


def _export(args: argparse.Namespace) -> int:
    print(export_image(_store(args), args.references, args.path))
    return 0


def _image_record(image: Image) -> dict[str, Any]:
    """An image as ``image ls`` lists it (snake_case keys; docs/cli.md)."""
    return {
        "name": image.name,
        "id": image.config.digest,
        "digest": image.target.digest,
        "manifest_digest": image.manifest.digest,
        "platform": str(image.platform) if image.platform else None,
        "size": image.size,
        "created": image.created or None,
    }


def _size(value: Any) -> str:
    return f"{(value or 0) / 1e6:.1f} MB"


_COLUMNS = (Column("name", "REFERENCE"), Column("digest", "DIGEST", lambda v: str(v)[:19]),
            Column("platform", "PLATFORM", lambda v: cell(v) or "-"),
            Column("size", "SIZE", _size))


def _existing_store(args: argparse.Namespace) -> ImageStore | None:
    """The store under the root if there is one: a listing makes no directories."""
    return _store(args) if (_images_root(args) / "image").is_dir() else None


def _ls(args: argparse.Namespace) -> int:
    store = _existing_store(args)
    images = store.list() if store is not None else []
    emit(args, [_image_record(i) for i in images], _COLUMNS, id_key="name")
    return 0


def _inspect(args: argparse.Namespace) -> int:
    store = _existing_store(args)
    if store is None:
        raise ImageNotFoundError(
            f"image {args.references[0]!r}: not found (no image store in {_images_root(args)})")
    out: list[dict[str, Any]] = []
    for ref in args.references:
        image = store.get(ref)
        record = _image_record(image)
        cfg = store.config(image)
        record.update({
            "target": image.target.to_dict(),  # OCI descriptors keep the OCI field names
            "manifest": image.manifest.to_dict(),
            "config": image.config.to_dict(),
            "layers": [layer.to_dict() for layer in image.layers],
            "diff_ids": list(image.diff_ids),
            "chain_ids": image.chain_ids,
            "image_config": {
                "env": list(cfg.env), "entrypoint": cfg.entrypoint and list(cfg.entrypoint),
                "cmd": cfg.cmd and list(cfg.cmd), "working_dir": cfg.working_dir,
                "user": cfg.user, "exposed_ports": list(cfg.exposed_ports),
                "volumes": list(cfg.volumes), "labels": cfg.labels,
                "stop_signal": cfg.stop_signal,
            },
        })
        out.append(record)
    emit(args, out, _COLUMNS, id_key="name")
    return 0


def _rm(args: argparse.Namespace) -> int:
    store = _store(args)
    for ref in args.references:
        for image in store.remove(ref):
            print(image.name)
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


_IMAGE_HELP = ("NAME[:TAG], NAME[:TAG]@DIGEST, an image ID (sha256:HEX or HEX) or 6+ hex "
               "digits of one")


def _build_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("reference", help="name of the image (NAME:TAG)")
    p.add_argument("--from-dir", required=True, metavar="DIR",
                   help="the root filesystem to put in the image")
    p.add_argument("--entrypoint", metavar="ARGV",
                   help="Entrypoint: a JSON array or words ('/bin/sh -c')")
    p.add_argument("--cmd", metavar="ARGV", help="Cmd: a JSON array or words ('sleep 3600')")
    p.add_argument("--env", action="append", default=[], metavar="KEY=VALUE",
                   help="Env entry (repeatable)")
    p.add_argument("--workdir", metavar="DIR", help="WorkingDir")
    p.add_argument("--user", metavar="USER[:GROUP]", help="User")
    p.add_argument("--label", action="append", default=[], metavar="KEY=VALUE",
                   help="Labels entry (repeatable)")
    p.add_argument("--owner", metavar="UID:GID",
                   help="owner of every file in the image (default: as on disk)")
    p.set_defaults(func=_build)


def _hosts_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--registry-config-dir", default=str(DEFAULT_DIR), metavar="DIR",
                   help="registry hosts directory in containerd's hosts.toml format (default "
                   f"{DEFAULT_DIR}; /etc/containerd/certs.d reads containerd's)")
    p.add_argument("--plain-http", action="store_true",
                   help="use HTTP for registries without a hosts.toml entry")


def register(subparsers: Any) -> None:
    """Add the ``image`` group to the ``podkit`` command."""
    group = subparsers.add_parser("image", help="pull, import, list and remove OCI images")
    sub = group.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True

    def leaf(name: str, help_: str) -> argparse.ArgumentParser:
        p: argparse.ArgumentParser = sub.add_parser(name, help=help_)
        add_dir_options(p)  # the store is ROOT/image
        return p

    p = leaf("pull", "pull an image from a registry")
    p.add_argument("reference")
    p.add_argument("--platform", help="os/arch[/variant] (default: this machine)")
    p.add_argument("--creds", "--user", dest="creds", metavar="USER[:PASSWORD]",
                   help="credentials for the registry (else from the auth file)")
    p.add_argument("--authfile", help="Docker config.json with credentials (default: "
                   "$REGISTRY_AUTH_FILE, $DOCKER_CONFIG/config.json, ~/.docker/config.json)")
    _hosts_args(p)
    p.add_argument("-q", "--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=_pull)

    p = sub.add_parser("login", help="check credentials and store them in the auth file")
    p.add_argument("registry", help="registry host[:port] (docker.io for Docker Hub)")
    p.add_argument("-u", "--username")
    p.add_argument("-p", "--password", help="insecure: visible to ps; prefer --password-stdin")
    p.add_argument("--password-stdin", action="store_true", help="read the password from stdin")
    p.add_argument("--authfile", help="the config.json to write (default as for pull)")
    p.add_argument("--no-verify", action="store_true",
                   help="store without checking at the registry")
    _hosts_args(p)
    p.set_defaults(func=_login)

    p = sub.add_parser("logout", help="remove stored credentials from the auth file")
    p.add_argument("registry")
    p.add_argument("--authfile", help="the config.json to edit (default as for pull)")
    p.set_defaults(func=_logout)

    p = leaf("import", "import an OCI layout, OCI archive or docker save archive")
    p.add_argument("path")
    p.add_argument("reference", nargs="?", help="name for an unnamed (or single) image")
    p.add_argument("--platform", help="os/arch[/variant] (default: this machine)")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=_import)

    _build_args(leaf("build", "make a one-layer image of a directory (the same tree: the same "
                     "digest)"))

    p = leaf("export", "write images as an OCI layout (a directory, or an archive: *.tar)")
    p.add_argument("path", help="the new directory or .tar file (ctr images import reads it)")
    p.add_argument("references", nargs="+")
    p.set_defaults(func=_export)

    p = leaf("ls", "list images (-q: references only)")
    add_output_options(p)
    p.set_defaults(func=_ls)

    p = leaf("inspect", "show image records and configs (JSON by default)")
    p.add_argument("references", nargs="+", metavar="IMAGE", help=_IMAGE_HELP)
    add_output_options(p, default="json")
    p.set_defaults(func=_inspect)

    p = leaf("rm", "remove image records (an ID or NAME@DIGEST: every name of it)")
    p.add_argument("references", nargs="+", metavar="IMAGE", help=_IMAGE_HELP)
    p.add_argument("--prune", action="store_true", help="also garbage-collect afterwards")
    p.set_defaults(func=_rm)

    p = leaf("prune", "delete blobs and snapshots no image uses")
    p.set_defaults(func=_prune)
