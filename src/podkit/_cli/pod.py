"""``podkit pod run|ls|stop|rm|exec|logs``: pods from a YAML file, run by a SandboxManager.

The YAML mirrors the CRI shapes field for field (snake_case), enums by name::

    pause: {rootfs: /srv/busybox}            # or --pause-rootfs; or {image: REF}
    sandbox:
      metadata: {name: web, namespace: demo}
      hostname: web
      log_directory: /var/log/pods/web
      port_mappings: [{container_port: 80, host_port: 8080}]
    containers:
      - metadata: {name: httpd}
        image: /srv/busybox                   # a rootfs directory
        command: [httpd, -f, -p, "80"]
        log_path: httpd.log
      - metadata: {name: app}
        image: localhost/app:1                # or an image in the --image-root store

Image references, image IDs and digests are resolved in the image store under
``--image-root`` (default ``/var/lib/podkit``, the store ``podkit image`` fills); each such
container gets its own rootfs there, removed with the container.

Pods run under conmon and outlive the command; every command opens the same state dir and
``recover()``s it first, so a half-done run from a killed command is undone.
"""

from __future__ import annotations

import argparse
import enum
import sys
from pathlib import Path
from typing import Any

import attrs
import cattrs
import yaml

from podkit.container import (
    ContainerConfig,
    MountPropagation,
    SupplementalGroupsPolicy,
)
from podkit.errors import InvalidArgumentError, NotFoundError
from podkit.image import ImageStore
from podkit.runtime import Runc, read_cri_log
from podkit.sandbox import (
    Container,
    ContainerFilter,
    NamespaceMode,
    PauseConfig,
    ProfileType,
    Protocol,
    Sandbox,
    SandboxConfig,
    SandboxManager,
    default_networks,
)

DEFAULT_ROOT = "/var/lib/podkit/pods"
DEFAULT_STATE = "/run/podkit/pods"
DEFAULT_IMAGE_ROOT = "/var/lib/podkit"


@attrs.frozen(kw_only=True)
class PodFile:
    """A pod file: the sandbox config, its containers, and optionally the pause rootfs
    (a directory) or pause image (a reference in the image store)."""

    sandbox: SandboxConfig
    containers: tuple[ContainerConfig, ...] = ()
    pause_rootfs: str = ""
    pause_image: str = ""


def _converter() -> cattrs.Converter:
    conv = cattrs.Converter(forbid_extra_keys=True)

    def enum_hook(value: Any, cls: type[enum.Enum]) -> enum.Enum:
        if isinstance(value, str):  # RUNTIME_DEFAULT, runtime_default or the CRI's RuntimeDefault
            by_name = {m.name.replace("_", "").lower(): m for m in cls}
            try:
                return by_name[value.replace("_", "").lower()]
            except KeyError:
                raise ValueError(
                    f"{value!r} is not one of {', '.join(m.name for m in cls)}") from None
        return cls(value)

    # per class: the int hook would win for IntEnums registered through their Enum base
    for cls in (Protocol, MountPropagation, NamespaceMode, SupplementalGroupsPolicy, ProfileType):
        conv.register_structure_hook(cls, enum_hook)
    return conv


def load_pod_file(path: str | Path) -> PodFile:
    """Parse a pod YAML file; errors name the file and the field (``$.sandbox.hostname``)."""
    p = Path(path)
    try:
        data = yaml.safe_load(p.read_text())
    except OSError as exc:
        raise InvalidArgumentError(f"{p}: {exc.strerror}") from None
    except yaml.YAMLError as exc:
        raise InvalidArgumentError(f"{p}: not valid YAML: {exc}") from None
    if not isinstance(data, dict) or "sandbox" not in data:
        raise InvalidArgumentError(f"{p}: expected a mapping with a 'sandbox' key")
    unknown = set(data) - {"sandbox", "containers", "pause"}
    if unknown:
        raise InvalidArgumentError(f"{p}: unknown top-level keys {sorted(unknown)}")
    conv = _converter()
    try:
        where = "$.sandbox"
        sandbox = conv.structure(data["sandbox"], SandboxConfig)
        containers = []
        for i, c in enumerate(data.get("containers") or []):
            where = f"$.containers[{i}]"
            containers.append(conv.structure(c, ContainerConfig))
    except cattrs.BaseValidationError as exc:
        detail = "; ".join(cattrs.transform_error(exc, path=where))
        raise InvalidArgumentError(f"{p}: {detail}") from None
    pause = data.get("pause") or {}
    if not isinstance(pause, dict) or set(pause) - {"rootfs", "image"} or len(pause) > 1:
        raise InvalidArgumentError(
            f"{p}: pause must be a mapping with only 'rootfs' or only 'image'")
    return PodFile(sandbox=sandbox, containers=tuple(containers),
                   pause_rootfs=str(pause.get("rootfs", "")),
                   pause_image=str(pause.get("image", "")))


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--root", default=DEFAULT_ROOT, help="pod files and bundles")
    p.add_argument("--state", default=DEFAULT_STATE, help="records, conmon and runtime state")
    p.add_argument("--runtime", default="runc", help="OCI runtime binary (runc, crun)")
    p.add_argument("--pause-rootfs", default="", help="rootfs with a sleep program (busybox)")
    p.add_argument("--image-root", default=DEFAULT_IMAGE_ROOT,
                   help=f"image store for image references (default {DEFAULT_IMAGE_ROOT}, "
                   "as for podkit image --root)")


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``pod`` group."""
    group = subparsers.add_parser("pod", help="run pods (sandbox + containers) from YAML")
    sub = group.add_subparsers(dest="pod_command", metavar="COMMAND")
    sub.required = True

    run = sub.add_parser("run", help="run a pod and its containers from a YAML file")
    run.add_argument("file", help="pod YAML (sandbox, containers, pause)")
    run.add_argument("--no-pause", action="store_true",
                     help="infra-less pod: IPC/UTS pinned by bind mounts, no pause container")
    _common(run)
    run.set_defaults(func=cmd_run)

    ls = sub.add_parser("ls", help="list pods and their containers")
    _common(ls)
    ls.set_defaults(func=cmd_ls)

    for name, func, text in (("stop", cmd_stop, "stop a pod (its containers, pause, network)"),
                             ("rm", cmd_rm, "remove a pod (stopping it first)")):
        p = sub.add_parser(name, help=text)
        p.add_argument("pod", nargs="+", help="pod ID (or a unique prefix) or name")
        _common(p)
        p.set_defaults(func=func)

    ex = sub.add_parser("exec", help="run a command in a container and print its output")
    ex.add_argument("pod", help="pod ID prefix or name")
    ex.add_argument("container", help="container name")
    ex.add_argument("cmd", nargs=argparse.REMAINDER, help="command (after --)")
    ex.add_argument("--timeout", type=float, default=None)
    _common(ex)
    ex.set_defaults(func=cmd_exec)

    logs = sub.add_parser("logs", help="print a container's CRI log")
    logs.add_argument("pod", help="pod ID prefix or name")
    logs.add_argument("container", help="container name")
    _common(logs)
    logs.set_defaults(func=cmd_logs)


def _image_store(args: argparse.Namespace, needed: bool) -> ImageStore | None:
    """The store under ``--image-root`` when the pod needs it or it exists (removals need the
    store that holds their containers' rootfs); ``None`` otherwise (nothing is created)."""
    if needed or (Path(args.image_root) / "image").is_dir():
        return ImageStore(args.image_root)
    return None


def _manager(args: argparse.Namespace, pause_rootfs: str = "", *, pause_image: str = "",
             infraless: bool = False, images_needed: bool = False) -> SandboxManager:
    state = Path(args.state)
    # commands other than run never start a pause: "/" stands in for its rootfs
    pause = None if infraless else PauseConfig(
        rootfs="" if pause_image else (pause_rootfs or args.pause_rootfs or "/"),
        image=pause_image)
    mgr = SandboxManager(args.root, state, Runc(args.runtime, root=state / "runc"),
                         default_networks(state), pause=pause,
                         images=_image_store(args, images_needed or bool(pause_image)))
    mgr.recover()
    return mgr


def _find_pod(mgr: SandboxManager, ref: str) -> Sandbox:
    pods = mgr.list_sandboxes()
    hits = [s for s in pods if s.config.metadata.name == ref] or \
        [s for s in pods if s.id.startswith(ref)]
    if len(hits) != 1:
        raise NotFoundError(f"pod {ref!r}: " + ("not found" if not hits else "ambiguous"))
    return hits[0]


def _find_container(mgr: SandboxManager, pod: Sandbox, name: str) -> Container:
    for c in mgr.list_containers(ContainerFilter(pod_sandbox_id=pod.id)):
        if c.config.metadata.name == name or c.id.startswith(name):
            return c
    raise NotFoundError(f"pod {pod.config.metadata.name!r} has no container {name!r}")


def cmd_run(args: argparse.Namespace) -> int:
    """Run the pod, then create and start each container; undo the pod if one fails."""
    pod = load_pod_file(args.file)
    pause = args.pause_rootfs or pod.pause_rootfs
    image = "" if args.pause_rootfs else pod.pause_image
    if not pause and not image and not args.no_pause:
        raise InvalidArgumentError(
            f"{args.file}: no pause rootfs (pause.rootfs, pause.image, --pause-rootfs or "
            "--no-pause)")
    needed = any(not c.image.startswith("/") for c in pod.containers)
    with _manager(args, pause, pause_image=image, infraless=args.no_pause,
                  images_needed=needed) as mgr:
        sb = mgr.run_sandbox(pod.sandbox)
        try:
            ids = []
            for cfg in pod.containers:
                cid = mgr.create_container(sb.id, cfg)
                mgr.start_container(cid)
                ids.append((cfg.metadata.name, cid))
        except BaseException:
            mgr.remove_sandbox(sb.id)
            raise
        print(f"pod {sb.config.metadata.name} {sb.id[:12]} ip {sb.ip or 'host network'}")
        for name, cid in ids:
            print(f"  container {name} {cid[:12]}")
    return 0


def cmd_ls(args: argparse.Namespace) -> int:
    """A table of pods, each followed by its containers."""
    with _manager(args) as mgr:
        rows = [("POD ID", "NAME", "STATE", "IP", "CONTAINER", "STATE", "EXIT")]
        for sb in mgr.list_sandboxes():
            rows.append((sb.id[:12], sb.config.metadata.name, sb.state.name.removeprefix(
                "SANDBOX_"), sb.ip or "host", "", "", ""))
            for c in mgr.list_containers(ContainerFilter(pod_sandbox_id=sb.id)):
                rows.append(("", "", "", "", c.config.metadata.name,
                             c.state.name.removeprefix("CONTAINER_"),
                             str(c.exit_code) if c.finished_at else ""))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for r in rows:
        print("  ".join(v.ljust(widths[i]) for i, v in enumerate(r)).rstrip())
    return 0


def cmd_stop(args: argparse.Namespace) -> int:
    """Stop pods."""
    with _manager(args) as mgr:
        for ref in args.pod:
            mgr.stop_sandbox(_find_pod(mgr, ref).id)
    return 0


def cmd_rm(args: argparse.Namespace) -> int:
    """Remove pods."""
    with _manager(args) as mgr:
        for ref in args.pod:
            mgr.remove_sandbox(_find_pod(mgr, ref).id)
    return 0


def cmd_exec(args: argparse.Namespace) -> int:
    """exec_sync; the command's output and exit code."""
    cmd = args.cmd[1:] if args.cmd[:1] == ["--"] else args.cmd
    if not cmd:
        raise InvalidArgumentError("exec: no command given (podkit pod exec POD CTR -- cmd ...)")
    with _manager(args) as mgr:
        c = _find_container(mgr, _find_pod(mgr, args.pod), args.container)
        res = mgr.exec_sync(c.id, cmd, args.timeout)
    sys.stdout.buffer.write(res.stdout)
    sys.stderr.buffer.write(res.stderr)
    return res.exit_code


def cmd_logs(args: argparse.Namespace) -> int:
    """Print the container's log lines (stdout to stdout, stderr to stderr)."""
    with _manager(args) as mgr:
        c = _find_container(mgr, _find_pod(mgr, args.pod), args.container)
        path = mgr.container_log_file(c.id)
    if not Path(path).exists():
        return 0
    for line in read_cri_log(path):
        out = sys.stdout if line.stream == "stdout" else sys.stderr
        out.buffer.write(line.content + (b"\n" if line.complete else b""))
    return 0
