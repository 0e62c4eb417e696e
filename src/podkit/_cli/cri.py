"""``podkit cri serve``: the reference CRI server on a Unix socket.

Everything lives under ``--root``: the image store (the one ``podkit image ... --root`` uses),
``cri/root`` (pod files, bundles) and ``cri/state`` (records, conmon and runtime state). A new
server over the same root adopts every pod and container an earlier one left. PullImage goes
through ``--registry-config-dir`` (containerd's ``hosts.toml`` layout; point it at
``/etc/containerd/certs.d`` to share containerd's) with the request's credentials, else those
of ``--authfile`` (Docker's ``config.json``; default: the usual places). glibc's malloc arenas
are capped at 2 and its mmap threshold kept at 128 KiB (``MALLOC_ARENA_MAX`` and
``MALLOC_MMAP_THRESHOLD_`` in the server's environment win), and freed memory goes back to
the system before serving and then once a second: docs/performance.md.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
import threading
from pathlib import Path
from types import FrameType

from podkit import _linux
from podkit.errors import InvalidArgumentError
from podkit.image.hosts import CONTAINERD_DIR as CONTAINERD_HOSTS_DIR
from podkit.image.hosts import DEFAULT_DIR as DEFAULT_HOSTS_DIR

DEFAULT_ROOT = "/var/lib/podkit"
DEFAULT_SOCKET = "/run/podkit/cri.sock"
MALLOC_ARENAS = 2  # glibc's arenas for the server's threads (docs/performance.md)
MALLOC_MMAP_THRESHOLD = 128 << 10  # glibc's first threshold, kept from moving up (same)

_log = logging.getLogger("podkit.cri")


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``cri`` group."""
    group = subparsers.add_parser("cri", help="the reference CRI (kubelet) server")
    sub = group.add_subparsers(dest="cri_command", metavar="COMMAND")
    sub.required = True
    p = sub.add_parser("serve", help="serve RuntimeService and ImageService on a Unix socket")
    p.add_argument("--socket", default=DEFAULT_SOCKET, help=f"default {DEFAULT_SOCKET}")
    p.add_argument("--root", default=DEFAULT_ROOT,
                   help=f"image store, pod files and records (default {DEFAULT_ROOT})")
    p.add_argument("--cni-conf-dir", default="/etc/cni/net.d", help="CNI network configs")
    p.add_argument("--cni-bin-dir", action="append", default=None,
                   help="CNI plugin dir (repeatable; default /opt/cni/bin and /usr/lib/cni)")
    p.add_argument("--runtime", default="runc", choices=("runc", "crun"),
                   help="OCI runtime binary")
    p.add_argument("--cgroup-driver", choices=("cgroupfs", "systemd"), default=None,
                   help="who makes the cgroups, reported to kubelet by RuntimeConfig "
                        "(default: systemd when it is PID 1 on cgroup v2, else cgroupfs)")
    p.add_argument("--pause-image", required=True,
                   help="pause image reference in the store, or a rootfs directory")
    p.add_argument("--cdi-spec-dir", action="append", default=None,
                   help="CDI spec dir (repeatable; default /etc/cdi and /var/run/cdi)")
    p.add_argument("--streaming-address", default="127.0.0.1:0",
                   help="HOST:PORT of the exec/attach/port-forward server (default "
                        "127.0.0.1 on a free port; '' turns streaming off)")
    p.add_argument("--max-networks", type=int, default=1,
                   help="networks of the conf dir attached to each pod (default 1, as kubelet)")
    p.add_argument("--registry-config-dir", default=str(DEFAULT_HOSTS_DIR), metavar="DIR",
                   help="registry hosts directory in containerd's hosts.toml format (default "
                        f"{DEFAULT_HOSTS_DIR}; {CONTAINERD_HOSTS_DIR} reads containerd's)")
    p.add_argument("--authfile", metavar="FILE",
                   help="Docker config.json with registry credentials, used when a PullImage "
                        "request has none (default: $REGISTRY_AUTH_FILE, $DOCKER_CONFIG, "
                        "~/.docker/config.json)")
    p.set_defaults(func=cmd_serve)


def cmd_serve(args: argparse.Namespace) -> int:
    """Recover the root, serve until SIGTERM/SIGINT, then stop cleanly (pods keep running)."""
    from podkit import cdi, cgroups, cni
    from podkit.cri.server import CRIService, claim_socket, manager_streaming, pause_config, serve
    from podkit.image import AuthFile, ImageStore, RegistryHosts
    from podkit.runtime import Runc
    from podkit.sandbox import SandboxManager

    _tune_malloc()
    done = threading.Event()

    def stop(signum: int, frame: FrameType | None) -> None:
        done.set()

    # from the start: a signal during recovery stops the server as soon as it is up
    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    claim_socket(args.socket)  # before any work: refuse when another server listens
    hosts = RegistryHosts.load(args.registry_config_dir)  # a bad hosts.toml fails the start
    auth = AuthFile(args.authfile)
    root = Path(args.root).absolute()
    state = root / "cri" / "state"
    store = ImageStore(root)
    pause = pause_config(store, args.pause_image)
    bin_dirs = args.cni_bin_dir or ["/opt/cni/bin", "/usr/lib/cni"]
    conf_dir = Path(args.cni_conf_dir)
    if not conf_dir.is_dir():
        raise InvalidArgumentError(f"--cni-conf-dir {conf_dir}: not a directory")
    client = cni.CNI(plugin_dirs=bin_dirs, cache_dir=str(state / "cni-cache"))

    def load_networks() -> cni.Networks:
        return cni.Networks.from_dir(client, conf_dir, max_networks=args.max_networks or None,
                                     loopback=True)

    try:
        networks: cni.Networks | None = load_networks()
    except cni.NoConfigsFoundError:
        networks = None  # NetworkReady false until a config appears (host-network pods work)
    cache = cdi.Cache(args.cdi_spec_dir) if args.cdi_spec_dir else cdi.Cache()
    driver = cgroups.resolve_driver(args.cgroup_driver, "--cgroup-driver")
    runtime = Runc(args.runtime, root=state / args.runtime, systemd_cgroup=driver.systemd)
    manager = SandboxManager(root / "cri" / "root", state, runtime, networks, cdi=cache,
                             pause=pause, netns_prefix="podkit-cri-", images=store,
                             network_loader=load_networks, cgroup_driver=driver)
    try:
        report = manager.recover()
        for err in report.errors:
            print(f"podkit cri: recovery: {err}", file=sys.stderr)
        streaming = None
        if args.streaming_address:
            host, _, port = args.streaming_address.rpartition(":")
            if not host or not port.isdigit():
                raise InvalidArgumentError(
                    f"--streaming-address {args.streaming_address!r}: want HOST:PORT")
            streaming = manager_streaming(manager, (host.strip("[]"), int(port)))
        try:
            server = serve(args.socket, CRIService(
                manager, store, pause_image=pause.image, runtime_handler=args.runtime,
                streaming=streaming, registry_hosts=hosts, auth=auth))
        except BaseException:
            if streaming is not None:
                streaming.stop()
            raise
        where = f", streaming on {streaming.base_url}" if streaming is not None else ""
        _linux.malloc_trim()  # what the imports and the recovery freed
        print(f"podkit cri: serving on {server.address}{where} ({len(report.sandboxes)} pods, "
              f"{len(report.containers)} containers recovered)", file=sys.stderr, flush=True)
        while not done.wait(1.0):
            _linux.malloc_trim()  # what a burst of calls (a pull: MBs of buffers) freed
        server.stop()
        if streaming is not None:
            streaming.stop()
        print("podkit cri: stopped", file=sys.stderr, flush=True)
    finally:
        manager.close()
    return 0


def _tune_malloc() -> None:
    """Before any thread starts: the gRPC threads share a few malloc arenas instead of each
    keeping its own (13 MB kept after pulls), and blocks of 128 KiB and more keep their own
    mappings (glibc would raise that threshold as big buffers are freed, and fill the heap
    with them: 7 MB more after the start alone). ``$MALLOC_ARENA_MAX`` and
    ``$MALLOC_MMAP_THRESHOLD_``, when set, win."""
    if "MALLOC_ARENA_MAX" in os.environ:
        _log.debug("malloc arenas: MALLOC_ARENA_MAX=%s from the environment",
                   os.environ["MALLOC_ARENA_MAX"])
    elif _linux.set_malloc_arena_max(MALLOC_ARENAS):
        _log.debug("malloc arenas: at most %d", MALLOC_ARENAS)
    if "MALLOC_MMAP_THRESHOLD_" in os.environ:
        _log.debug("malloc mmap threshold: MALLOC_MMAP_THRESHOLD_=%s from the environment",
                   os.environ["MALLOC_MMAP_THRESHOLD_"])
    elif _linux.set_malloc_mmap_threshold(MALLOC_MMAP_THRESHOLD):
        _log.debug("malloc mmap threshold: %d bytes", MALLOC_MMAP_THRESHOLD)
