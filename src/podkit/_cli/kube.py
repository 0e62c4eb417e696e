"""``podkit kube play|down FILE...``: Kubernetes manifests run as pods, and removed again.

``play`` maps every Pod (and the pod template of each Deployment, StatefulSet, DaemonSet and
Job) the way the kubelet does (``podkit.kube``), then runs the plans on the pod manager:
volumes, sandbox, init containers, app containers; with ``--wait`` until every pod is Ready
(or, for restartPolicy Never/OnFailure, Succeeded). ``down`` removes exactly what the same
files describe. Exit codes: already exists, timeout and failure are distinct (docs/kube.md).
"""

from __future__ import annotations

import argparse
import contextlib
import signal
import sys
from collections.abc import Iterator
from pathlib import Path
from types import FrameType
from typing import Any

import attrs

from podkit.errors import InvalidArgumentError
from podkit.kube import PodPlan, parse_resolv_conf
from podkit.kube.manifests import load_manifests
from podkit.kube.planner import plan_pods
from podkit.kube.runner import PlayError, PlayResult, down, play
from podkit.node import NodeConfig, build_registry
from podkit.sandbox import DNSConfig

from .dirs import add_node_options, node_config
from .output import Column, add_output_options, render, short_id
from .pod_time import parse_duration
from .podctx import add_common, add_run_options, devices, manager, pod_network, with_devices

__all__ = ["RESOLV_CONF", "host_dns", "plans", "print_result", "register",
           "sigterm_interrupts"]

RESOLV_CONF = "/etc/resolv.conf"
"""The host's DNS the pods get (the kubelet's ``--resolv-conf`` default)."""

COLUMNS = (Column("pod", "POD"), Column("pod_id", "POD ID", short_id), Column("ip", "IP"),
           Column("ports", "HOST PORTS"), Column("container", "CONTAINER"),
           Column("id", "CONTAINER ID", short_id), Column("state", "STATE"),
           Column("restarts", "RESTARTS"), Column("status", "POD STATUS"))


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``kube`` group."""
    group = subparsers.add_parser("kube", help="run Kubernetes Pod manifests (kube play/down)")
    sub = group.add_subparsers(dest="kube_command", metavar="COMMAND")
    sub.required = True

    p = sub.add_parser("play", help="run the pods of Kubernetes manifests")
    _inputs(p)
    p.add_argument("--wait", action="store_true",
                   help="wait until every pod is Ready (Job-like pods: Succeeded), restarting "
                   "containers and running probes meanwhile")
    p.add_argument("--timeout", default="5m", help="how long to wait (default 5m)")
    p.add_argument("--replace", action="store_true", help="bring existing pods down first")
    p.add_argument("--rm-on-failure", action="store_true",
                   help="remove the pods when one fails or times out (default: leave them)")
    fields = p.add_mutually_exclusive_group()
    fields.add_argument("--strict", action="store_true",
                        help="Kubernetes fields podkit does not map are errors, not warnings")
    fields.add_argument("--lenient", action="store_true",
                        help="unknown and duplicate manifest fields are warnings, not errors")
    add_node_options(p, "registry_config_dir", "authfile")
    add_run_options(p)
    add_output_options(p, quiet=False)
    add_common(p)
    p.set_defaults(func=cmd_play)

    d = sub.add_parser("down", help="remove the pods the manifests describe")
    _inputs(d)
    add_common(d)
    d.set_defaults(func=cmd_down)


def _inputs(p: argparse.ArgumentParser) -> None:
    p.add_argument("files", nargs="+", metavar="FILE", help="YAML manifests")
    p.add_argument("--configmap", action="append", default=[], metavar="FILE",
                   help="ConfigMap manifest(s) for volumes and env (repeatable)")
    p.add_argument("--secret", action="append", default=[], metavar="FILE",
                   help="Secret manifest(s) for volumes and env (repeatable)")
    add_node_options(p, "log_root")
    p.add_argument("--resolv-conf", default=RESOLV_CONF, metavar="FILE",
                   help="the host DNS for dnsPolicy Default (and ClusterFirst, which falls "
                   f"back to it); '' for none (default {RESOLV_CONF})")


def host_dns(path: str) -> DNSConfig | None:
    """The DNS in ``path`` (a resolv.conf) as the kubelet reads its ``--resolv-conf``: None for
    "" or a missing default; another file that cannot be read is an error naming it."""
    if not path:
        return None
    try:
        return parse_resolv_conf(Path(path).read_text())
    except FileNotFoundError:
        if path == RESOLV_CONF:
            return None
        raise InvalidArgumentError(f"--resolv-conf {path}: no such file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise InvalidArgumentError(f"--resolv-conf {path}: cannot read it: {exc}") from None


def plans(args: argparse.Namespace, config: NodeConfig, *, strict: bool = False,
          lenient: bool = False) -> list[PodPlan]:
    """The pod plans of the files on the command line (volumes under ROOT/kube, logs under
    the config's log dir); unknown fields are refused (``lenient``: a warning each)."""
    manifests = load_manifests(args.files, configmap_files=args.configmap,
                               secret_files=args.secret, lenient=lenient)
    for line in manifests.warnings:
        print(f"podkit: warning: {line}", file=sys.stderr)
    return plan_pods(manifests, volumes_root=str(Path(config.root_dir).absolute() / "kube"),
                     log_root=str(Path(config.log_dir).absolute()), strict=strict,
                     host_dns=host_dns(args.resolv_conf))


def _for_node(plan: PodPlan, config: NodeConfig, names: tuple[str, ...]) -> PodPlan:
    """``plan`` in the node's network (``--network host``) with the ``--device`` devices."""
    def ctrs(plans: tuple[Any, ...]) -> tuple[Any, ...]:
        return tuple(attrs.evolve(c, config=with_devices(c.config, names)) for c in plans)

    return attrs.evolve(plan, sandbox=pod_network(config, plan.sandbox),
                        init_containers=ctrs(plan.init_containers),
                        containers=ctrs(plan.containers))


def _rows(result: PlayResult) -> list[dict[str, Any]]:
    rows = []
    for p in result.pods:
        ports = ",".join(f"{h}->{c}/{proto.lower()}" for h, c, proto in p.host_ports)
        for c in p.containers:
            rows.append({"pod": f"{p.namespace}/{p.name}", "pod_id": p.sandbox_id,
                         "ip": p.ip or "host", "ports": ports,
                         "container": c.name + (" (init)" if c.init else ""), "id": c.id,
                         "state": c.state + (f" ({c.exit_code})" if c.exit_code else ""),
                         "restarts": c.restarts, "status": p.status})
    return rows


def print_result(args: argparse.Namespace, result: PlayResult) -> None:
    """The result as ``args.output``: a table row per container, or the JSON/YAML document."""
    if args.output == "table":
        sys.stdout.write(render("table", _rows(result), COLUMNS))
    else:
        sys.stdout.write(render(args.output, result.to_json()))
    sys.stdout.flush()


@contextlib.contextmanager
def sigterm_interrupts() -> Iterator[None]:
    """Within it SIGTERM (a cancelled CI job, ``timeout``, ``kill``) stops play as Ctrl-C
    does: KeyboardInterrupt, so what play made is removed. Later SIGTERMs are ignored until the
    block ends, so that clean-up runs to its end (a Python no-op handler, not SIG_IGN, which
    the programs it starts would inherit)."""
    def later(signum: int, frame: FrameType | None) -> None:
        pass

    def on_term(signum: int, frame: FrameType | None) -> None:
        signal.signal(signal.SIGTERM, later)
        raise KeyboardInterrupt

    old = signal.signal(signal.SIGTERM, on_term)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, old)


def cmd_play(args: argparse.Namespace) -> int:
    """Map, then run; warnings on stderr; on a failure the pods left are printed first."""
    timeout = parse_duration(args.timeout, "--timeout")
    config = node_config(args)
    names = devices(args)
    todo = [_for_node(p, config, names)
            for p in plans(args, config, strict=args.strict, lenient=args.lenient)]
    for plan in todo:
        if plan.warnings:  # one warning per pod, listing every field
            print(f"podkit: warning: {plan.source}: {'; '.join(plan.warnings)}",
                  file=sys.stderr)
    registry = build_registry(config)
    with sigterm_interrupts(), manager(args, config, pause=True) as mgr:
        store = mgr.images
        assert store is not None

        def pull(ref: str) -> None:
            registry.pull(store, ref)

        try:
            result = play(mgr, todo, wait=args.wait, timeout=timeout, replace=args.replace,
                          rm_on_failure=args.rm_on_failure, pull=pull)
        except PlayError as exc:
            if exc.result.pods and not args.rm_on_failure:
                print_result(args, exc.result)
            raise
    print_result(args, result)
    return 0


def cmd_down(args: argparse.Namespace) -> int:
    """Remove what the files describe (their unknown fields do not matter); one note per
    pod."""
    config = node_config(args)
    todo = plans(args, config, lenient=True)
    with manager(args, config) as mgr:
        result = down(mgr, todo)
    for note in result.notes:
        print(note)
    return 0
