"""``podkit cri serve``: the reference CRI server on a Unix socket.

It runs ``podkit.cri.build_service`` of the node config (docs/config.md): the image store
under the root (the one ``podkit image ... --root`` uses), pod files in ``ROOT/cri``, records,
conmon and runtime state in ``STATE/cri``. A new server over the same root and state adopts
every pod and container an earlier one left. PullImage goes through ``registry.hosts_dir``
(containerd's ``hosts.toml`` layout; ``/etc/containerd/certs.d`` shares containerd's) with the
request's credentials, else those of ``registry.auth_file``. The network is every config of
``network.conf_dir`` (``/etc/cni/net.d`` unless configured); network namespaces are pinned in
``/var/run/netns`` unless configured. glibc's malloc arenas are capped at 2 and its mmap
threshold kept at 128 KiB (``MALLOC_ARENA_MAX`` and ``MALLOC_MMAP_THRESHOLD_`` in the server's
environment win), and freed memory goes back to the system before serving and then once a
second: docs/performance.md.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
import threading
from types import FrameType
from typing import Any

from podkit import _linux

from .dirs import add_node_options, node_config

SERVE_DEFAULTS = {"network.conf_dir": "/etc/cni/net.d", "netns_dir": "/var/run/netns",
                  "netns_prefix": "podkit-cri-"}
"""The server's own defaults, under the node config: kubelet's CNI conf dir, and network
namespaces where ``ip netns`` and containerd pin them."""
MALLOC_ARENAS = 2  # glibc's arenas for the server's threads (docs/performance.md)
MALLOC_MMAP_THRESHOLD = 128 << 10  # glibc's first threshold, kept from moving up (same)
SERVE_OPTIONS = ("socket", "image_root", "network", "cni_conf_dir", "cni_bin_dir",
                 "max_networks", "runtime", "cgroup_driver", "cgroup_parent", "pause_image",
                 "cdi_spec_dir", "streaming_address", "registry_config_dir", "authfile")

_log = logging.getLogger("podkit.cri")


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``cri`` group."""
    group = subparsers.add_parser("cri", help="the reference CRI (kubelet) server")
    sub = group.add_subparsers(dest="cri_command", metavar="COMMAND")
    sub.required = True
    p = sub.add_parser("serve", help="serve RuntimeService and ImageService on a Unix socket")
    add_node_options(p, *SERVE_OPTIONS)
    p.set_defaults(func=cmd_serve)


def cmd_serve(args: argparse.Namespace) -> int:
    """Recover the root, serve until SIGTERM/SIGINT, then stop cleanly (pods keep running)."""
    from podkit.cri import build_service
    from podkit.cri.service import claim_socket, serve
    from podkit.sandbox import SandboxManager

    _tune_malloc()
    done = threading.Event()

    def stop(signum: int, frame: FrameType | None) -> None:
        done.set()

    # from the start: a signal during recovery stops the server as soon as it is up
    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    config = node_config(args, defaults=SERVE_DEFAULTS)
    claim_socket(config.cri.socket)  # before any work: refuse when another server listens
    service = build_service(config)  # a bad hosts.toml fails before anything is made
    manager = service.manager
    assert isinstance(manager, SandboxManager)  # the one build_service makes
    streaming: Any = service.streaming
    server = None
    try:
        report = manager.recover()
        for err in report.errors:
            print(f"podkit cri: recovery: {err}", file=sys.stderr)
        server = serve(config.cri.socket, service)
        where = f", streaming on {streaming.base_url}" if streaming is not None else ""
        _linux.malloc_trim()  # what the imports and the recovery freed
        print(f"podkit cri: serving on {server.address}{where} ({len(report.sandboxes)} pods, "
              f"{len(report.containers)} containers recovered)", file=sys.stderr, flush=True)
        while not done.wait(1.0):
            _linux.malloc_trim()  # what a burst of calls (a pull: MBs of buffers) freed
    finally:  # the service's close() stops its streaming server and closes its manager
        if server is not None:
            server.stop()
        else:
            service.close()
    print("podkit cri: stopped", file=sys.stderr, flush=True)
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
