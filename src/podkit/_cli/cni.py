"""``podkit cni add|check|del|status|gc|version NETWORK`` (a cnitool work-alike) and ``cni ls``.

Network configs come from ``NETCONFPATH`` (default ``/etc/cni/net.d``), plugins from
``CNI_PATH`` (default ``/opt/cni/bin:/usr/lib/cni``), as with cnitool; ``CNI_ARGS`` and
``CAP_ARGS`` are honoured when the options are not given; ``del`` uses the ADD's cached ones.
``status`` and ``gc`` need a 1.1.0 list whose plugins support it (exit 1 otherwise). The result
cache is shared with cnitool/containerd (``/var/lib/cni`` unless ``--cache-dir``).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
from typing import Any

from podkit import cni
from podkit.errors import InvalidArgumentError

from .output import Column, add_output_options, emit

DEFAULT_NETCONFPATH = "/etc/cni/net.d"
DEFAULT_CNI_PATH = "/opt/cni/bin:/usr/lib/cni"


def _client(args: argparse.Namespace) -> cni.CNI:
    dirs = [d for d in os.environ.get("CNI_PATH", DEFAULT_CNI_PATH).split(os.pathsep) if d]
    return cni.CNI(dirs, cache_dir=args.cache_dir, timeout=args.timeout)


def _network(args: argparse.Namespace) -> cni.NetworkConfigList:
    return cni.load_network(os.environ.get("NETCONFPATH", DEFAULT_NETCONFPATH), args.network)


def _pairs(text: str, where: str) -> list[tuple[str, str]]:
    out = []
    for item in filter(None, text.split(";")):
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise InvalidArgumentError(f"{where}: {item!r} is not KEY=VALUE")
        out.append((key, value))
    return out


def _runtime(args: argparse.Namespace) -> cni.RuntimeConf:
    netns = args.netns or ""
    cid = args.id
    if not cid:
        if not netns:
            raise InvalidArgumentError("--id is required when --netns is not given")
        cid = "cnitool-" + hashlib.sha512(netns.encode()).hexdigest()[:12]
    raw_args = args.args if args.args is not None else os.environ.get("CNI_ARGS", "")
    pairs = _pairs(raw_args, "--args" if args.args is not None else "CNI_ARGS")
    raw_caps = args.cap_args if args.cap_args is not None else os.environ.get("CAP_ARGS", "")
    caps: dict[str, Any] = {}
    if raw_caps:
        try:
            caps = json.loads(raw_caps)
        except ValueError as e:
            raise InvalidArgumentError(f"--cap-args: invalid JSON: {e}") from None
        if not isinstance(caps, dict):
            raise InvalidArgumentError("--cap-args: must be a JSON object")
    return cni.RuntimeConf(cid, netns, args.ifname, pairs, caps)


def _print(doc: Any) -> None:
    sys.stdout.write(json.dumps(doc, indent=4) + "\n")


def _add(args: argparse.Namespace) -> int:
    result = _client(args).add(_network(args), _runtime(args))
    _print(result.to_dict())
    return 0


def _check(args: argparse.Namespace) -> int:
    _client(args).check(_network(args), _runtime(args))
    return 0


def _del(args: argparse.Namespace) -> int:
    _client(args).delete(_network(args), _runtime(args))
    return 0


def _status(args: argparse.Namespace) -> int:
    _client(args).status(_network(args))
    return 0


def _gc(args: argparse.Namespace) -> int:
    valid = []
    for item in args.valid or ():
        cid, sep, ifname = item.rpartition(":")
        if not sep or not cid or not ifname:
            raise InvalidArgumentError(f"--valid {item!r}: expected CONTAINER_ID:IFNAME")
        valid.append((cid, ifname))
    _client(args).gc(_network(args), valid)
    return 0


def _version(args: argparse.Namespace) -> int:
    client = _client(args)
    conf = _network(args)
    out = {}
    for plugin in conf.plugins:
        info = client.plugin_versions(plugin.type)
        out[plugin.type] = {"cniVersion": info.cni_version,
                            "supportedVersions": list(info.supported_versions)}
    _print({"network": conf.name, "cniVersion": conf.cni_version, "plugins": out})
    return 0


def _network_record(conf: cni.NetworkConfigList) -> dict[str, Any]:
    return {"name": conf.name, "cni_version": conf.cni_version,
            "plugins": [p.type for p in conf.plugins], "file": conf.source,
            "disable_check": conf.disable_check, "disable_gc": conf.disable_gc}


_COLUMNS = (Column("name", "NAME"), Column("cni_version", "CNIVERSION"),
            Column("plugins", "PLUGINS"), Column("file", "FILE"))


def _ls(args: argparse.Namespace) -> int:
    directory = os.environ.get("NETCONFPATH", DEFAULT_NETCONFPATH)
    networks = cni.load_networks(directory) if os.path.isdir(directory) else []
    emit(args, [_network_record(n) for n in networks], _COLUMNS, id_key="name")
    return 0


def register(subparsers: Any) -> None:
    """Add the ``cni`` command group."""
    group = subparsers.add_parser("cni", help="run CNI networks (cnitool work-alike)",
                                  description=__doc__,
                                  formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = group.add_subparsers(dest="cni_command", metavar="VERB")
    sub.required = True
    verbs = (("add", _add, "attach a container to NETWORK and print the result"),
             ("check", _check, "CHECK an attachment"),
             ("del", _del, "detach a container from NETWORK"),
             ("status", _status, "ask every plugin of NETWORK for its STATUS"),
             ("gc", _gc, "garbage-collect NETWORK's stale attachments"),
             ("version", _version, "print the VERSION answers of NETWORK's plugins"))
    for name, func, text in verbs:
        p = sub.add_parser(name, help=text, description=text)
        p.add_argument("network", metavar="NETWORK", help="network name in NETCONFPATH")
        p.add_argument("--cache-dir", default="/var/lib/cni",
                       help="result cache directory (default /var/lib/cni)")
        p.add_argument("--timeout", type=float, default=60.0,
                       help="seconds per plugin exec (default 60)")
        if name in ("add", "check", "del"):
            p.add_argument("--netns", help="path of the container's network namespace")
            p.add_argument("--id", help="container ID (default: derived from --netns)")
            p.add_argument("--ifname", default=os.environ.get("CNI_IFNAME", "eth0"),
                           help="interface name in the container (default eth0)")
            p.add_argument("--args", help="CNI_ARGS as K=V;K2=V2 (default: $CNI_ARGS)")
            p.add_argument("--cap-args", help="capability args as a JSON object "
                                              "(default: $CAP_ARGS; del: the ADD's, cached)")
        if name == "gc":
            p.add_argument("--valid", action="append", metavar="ID:IFNAME",
                           help="an attachment to keep (repeatable)")
        if name != "version":
            p.set_defaults(needs_root="run CNI plugins")
        p.set_defaults(func=func)
    p = sub.add_parser("ls", help="list the networks in NETCONFPATH (-q: names only)")
    add_output_options(p)
    p.set_defaults(func=_ls)
