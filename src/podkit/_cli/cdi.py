"""``podkit cdi list|show|validate|dirs|inject|watch``: CDI spec dirs from the command line."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

import yaml

from podkit import cdi, oci
from podkit.errors import InvalidArgumentError

from .output import Column, add_output_options, emit


def _validator(args: argparse.Namespace) -> cdi.SpecValidator | None:
    """The ``--schema`` / ``--schema-file`` validator, if asked for."""
    if not args.schema and not args.schema_file:
        return None
    from podkit.cdi import schema

    if args.schema_file:
        return schema.SchemaValidator.from_file(args.schema_file)
    return schema.builtin()


def _cache(args: argparse.Namespace, *, auto_refresh: bool = False) -> cdi.Cache:
    dirs = args.spec_dirs or cdi.DEFAULT_SPEC_DIRS
    return cdi.Cache(dirs, auto_refresh=auto_refresh, spec_validator=_validator(args))


def _emit(data: Any, fmt: str) -> None:
    if fmt == "yaml":
        sys.stdout.write(yaml.safe_dump(data, sort_keys=False, default_flow_style=False))
    else:
        sys.stdout.write(json.dumps(data, indent=2) + "\n")


def _device_info(d: cdi.LoadedDevice) -> dict[str, Any]:
    """A device as ``list``/``show`` print it: snake_case keys; the device and the spec's
    edits keep the CDI spec's own field names."""
    spec_edits = d.spec.spec.container_edits
    return {
        "name": d.qualified_name,
        "spec": d.spec.path,
        "priority": d.spec.priority,
        "cdi_version": d.spec.spec.cdi_version,
        "device": cdi.model_to_dict(d.device),
        "spec_container_edits": cdi.model_to_dict(spec_edits) if spec_edits is not None else {},
    }


_NAME = Column("name", "NAME")
_DEVICE_COLUMNS = (_NAME, Column("spec", "SPEC"), Column("priority", "PRIORITY"))


def _list(args: argparse.Namespace) -> int:
    with _cache(args) as c:
        devices = [c.get_device(n) for n in c.list_devices()]
    records = [_device_info(d) for d in devices if d is not None]
    emit(args, records, _DEVICE_COLUMNS if args.verbose else (_NAME,), id_key="name")
    return 0


def _show(args: argparse.Namespace) -> int:
    cdi.parse_qualified_name(args.name)  # a malformed name is a name error, not "unknown"
    with _cache(args) as c:
        d = c.get_device(args.name)
        if d is None:
            raise cdi.UnresolvableDevicesError([args.name])
        emit(args, _device_info(d), _DEVICE_COLUMNS, id_key="name")
    return 0


def _validate(args: argparse.Namespace) -> int:
    problems: dict[str, list[str]] = {}
    if args.files:
        extra = _validator(args)
        for f in args.files:
            try:
                spec = cdi.load_spec(f)
                cdi.run_spec_validators(spec, [extra] if extra else [], f)
            except cdi.SpecError as e:
                problems[f] = [str(e)]
    else:
        with _cache(args) as c:
            problems = c.errors
    if args.output == "text":
        for path, msgs in sorted(problems.items()):
            for m in msgs:
                print(f"{path}: {m}")
        if not problems:
            print("ok")
    else:
        _emit(problems, args.output)
    return 1 if problems else 0


_DIR_COLUMNS = (Column("priority", "PRIORITY"), Column("path", "PATH"),
                Column("errors", "ERRORS", lambda v: "; ".join(v)))


def _dirs(args: argparse.Namespace) -> int:
    with _cache(args) as c:
        errors = c.errors
        rows: list[dict[str, Any]] = [
            {"priority": i, "path": d, "errors": errors.get(d, [])}
            for i, d in enumerate(c.spec_dirs)
        ]
    emit(args, rows, _DIR_COLUMNS, id_key="path")
    return 0


def _inject(args: argparse.Namespace) -> int:
    try:
        if args.oci_json == "-":
            text = sys.stdin.read()
        else:
            with open(args.oci_json) as f:
                text = f.read()
    except OSError as e:
        raise InvalidArgumentError(f"cannot read OCI spec {args.oci_json}: {e.strerror}") from e
    spec = oci.Spec.from_json(text)
    with _cache(args) as c:
        c.inject_devices(spec, args.names)
    if args.output == "yaml":
        _emit(spec.to_dict(), "yaml")
    else:
        sys.stdout.write(spec.to_json(indent=2) + "\n")
    return 0


def _watch(args: argparse.Namespace) -> int:
    with _cache(args, auto_refresh=True) as c:
        for msg in sorted(c.dir_errors.items()):
            print(f"warning: {msg[0]}: {msg[1]}", file=sys.stderr)
        previous: list[str] | None = None
        changes = 0
        while True:
            current = c.list_devices()
            if current != previous:
                if args.output == "text":
                    print("devices: " + (", ".join(current) or "(none)"), flush=True)
                else:
                    _emit(current, args.output)
                    sys.stdout.flush()
                if previous is not None:
                    changes += 1
                previous = current
            if args.count and changes >= args.count:
                return 0
            try:
                c.wait_for_change(timeout=1.0)
            except KeyboardInterrupt:  # pragma: no cover - interactive
                return 0


def register(subparsers: Any) -> None:
    """Add the ``cdi`` command group."""
    p = subparsers.add_parser("cdi", help="CDI devices: list, show, validate, inject, watch",
                              description=__doc__)
    p.add_argument("--spec-dir", dest="spec_dirs", action="append", metavar="DIR",
                   help="spec directory, lowest priority first (repeat; default "
                        "/etc/cdi then /var/run/cdi)")
    p.add_argument("--schema", action="store_true",
                   help="also validate every spec against the official CDI JSON schema")
    p.add_argument("--schema-file", metavar="SCHEMA_JSON",
                   help="also validate every spec against this JSON schema file")
    sub = p.add_subparsers(dest="cdi_command", metavar="COMMAND")
    sub.required = True

    def out(sp: argparse.ArgumentParser, default: str = "text") -> None:
        sp.add_argument("-o", "--output", choices=("text", "json", "yaml"), default=default)

    sp = sub.add_parser("list", help="list resolvable devices (-q: names only)")
    sp.add_argument("-v", "--verbose", action="store_true",
                    help="also show the spec file and its priority")
    add_output_options(sp)
    sp.set_defaults(func=_list)

    sp = sub.add_parser("show", help="show one device and where it comes from")
    sp.add_argument("name", help="qualified device name vendor/class=name")
    add_output_options(sp, default="json")
    sp.set_defaults(func=_show)

    sp = sub.add_parser("validate", help="report invalid spec files (exit 1 if any)")
    sp.add_argument("files", nargs="*", help="spec files to check (default: the spec dirs)")
    out(sp)
    sp.set_defaults(func=_validate)

    sp = sub.add_parser("dirs", help="spec directories, priorities and errors")
    add_output_options(sp)
    sp.set_defaults(func=_dirs)

    sp = sub.add_parser("inject", help="inject devices into an OCI config.json, print it")
    sp.add_argument("oci_json", metavar="OCI_JSON", help="config.json path, or - for stdin")
    sp.add_argument("names", metavar="NAME", nargs="+", help="qualified device names")
    out(sp, "json")
    sp.set_defaults(func=_inject)

    sp = sub.add_parser("watch", help="print the device list whenever it changes")
    sp.add_argument("--count", type=int, default=0, help="exit after N changes (0: never)")
    out(sp)
    sp.set_defaults(func=_watch)
