#!/usr/bin/env python3
"""A CI job with podkit as a library: build an image, run a pod, check it, tear it down.

1. a root filesystem in a directory (static busybox, its applets, a web page) made into an
   image with ``image.build_from_rootfs`` (the same tree gives the same digest);
2. a pod on the built-in pause (``builtin_pause``: catatonit, made in the store once) with two
   containers of that image: ``web`` (httpd) and ``probe`` (waits until web answers over the
   pod's shared network namespace, then says ``ready``);
3. wait for the readiness condition (``ready`` in probe's log), exec into web, read the logs;
4. tear everything down, print a JSON summary on stdout and exit 0 (every check passed),
   1 (a check failed) or 2 (the job could not run).

Run as root on a machine with runc, conmon, the CNI plugins, busybox-static and catatonit
(``make test`` installs them), inside a network namespace of its own in CI::

    python examples/ci_pods.py --root /tmp/ci/root --state /tmp/ci/state
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from podkit import image
from podkit.container import ContainerConfig, ContainerMetadata
from podkit.errors import PodkitError
from podkit.runtime import Runc, read_cri_log
from podkit.sandbox import (
    PodSandboxMetadata,
    SandboxConfig,
    SandboxManager,
    builtin_pause,
    default_networks,
)

IMAGE = "localhost/ci/web:1"
PAGE = "hello from the CI pod\n"


def make_rootfs(dest: Path, busybox: str = "/bin/busybox") -> Path:
    """busybox and a symlink per applet in ``bin``, a page in ``www``."""
    (dest / "bin").mkdir(parents=True)
    (dest / "www").mkdir()
    shutil.copy(busybox, dest / "bin" / "busybox")
    applets = subprocess.run([busybox, "--list"], capture_output=True, text=True, check=True,
                             timeout=30).stdout.split()
    for applet in applets:
        if applet != "busybox":
            (dest / "bin" / applet).symlink_to("busybox")
    (dest / "www" / "index.html").write_text(PAGE)
    return dest


def container(name: str, *command: str) -> ContainerConfig:
    return ContainerConfig(metadata=ContainerMetadata(name=name), image=IMAGE,
                           command=list(command), log_path=f"{name}.log")


def log_text(mgr: SandboxManager, id: str) -> str:
    path = mgr.container_log_file(id)
    if not Path(path).exists():
        return ""
    return "".join(line.content.decode() + "\n" for line in read_cri_log(path))


def wait_for(condition: Callable[[], bool], timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)
    return True


def run(args: argparse.Namespace, summary: dict[str, Any]) -> bool:
    """The job; what it saw goes into ``summary``; whether every check passed."""
    root, state = Path(args.root), Path(args.state)
    store = image.ImageStore(root)
    with tempfile.TemporaryDirectory(prefix="ci-rootfs-") as tmp:
        rootfs = make_rootfs(Path(tmp) / "rootfs")
        img = image.build_from_rootfs(store, rootfs, IMAGE, config=image.ImageConfig(
            env=("PATH=/bin",), cmd=("sh",)))
    summary["image"] = {"name": img.name, "digest": img.manifest.digest}
    mgr = SandboxManager(root / "pods", state, Runc(root=state / "runc"),
                         default_networks(state, bridge=args.bridge), pause=builtin_pause(store),
                         images=store)
    checks: dict[str, bool] = {}
    summary["checks"] = checks
    try:
        mgr.recover()
        pod = mgr.run_sandbox(SandboxConfig(
            metadata=PodSandboxMetadata(name="ci", namespace="ci", uid=uuid.uuid4().hex),
            hostname="ci", log_directory=str(state / "logs")))
        summary["pod"] = {"id": pod.id, "ip": pod.ip}
        web = mgr.create_container(pod.id, container("web", "httpd", "-f", "-p", "8080",
                                                     "-h", "/www"))
        probe = mgr.create_container(pod.id, container(
            "probe", "sh", "-c", "until wget -q -O /dev/null http://127.0.0.1:8080/; do "
            "sleep 0.1; done; echo ready; exec sleep 3600"))
        for id in (web, probe):
            mgr.start_container(id)
        checks["ready"] = wait_for(lambda: "ready" in log_text(mgr, probe), args.timeout)
        if checks["ready"]:
            got = mgr.exec_sync(web, ["wget", "-q", "-O", "-", "http://127.0.0.1:8080/"],
                                timeout=10)
            summary["exec"] = {"exit_code": got.exit_code, "stdout": got.stdout.decode()}
            checks["page"] = got.exit_code == 0 and got.stdout.decode() == args.expect
        summary["containers"] = [
            {"name": c.config.metadata.name, "id": c.id, "state": c.state.name,
             "exit_code": c.exit_code} for c in (mgr.container_status(i) for i in (web, probe))]
        checks["running"] = all(c["state"] == "CONTAINER_RUNNING"
                                for c in summary["containers"])
        summary["logs"] = {"probe": log_text(mgr, probe), "web": log_text(mgr, web)}
    finally:
        mgr.remove_all()  # every pod of this state dir: containers, pause, network, netns
        mgr.close()
    return bool(checks) and all(checks.values())


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--root", default="/var/lib/podkit-ci", help="image store and pod files")
    p.add_argument("--state", default="/run/podkit-ci", help="records and runtime state")
    p.add_argument("--bridge", default="pkci0", help="the pod network's bridge")
    p.add_argument("--timeout", type=float, default=60.0, help="seconds to wait for ready")
    p.add_argument("--expect", default=PAGE, help="the page web must serve (default: ours)")
    args = p.parse_args(argv)
    summary: dict[str, Any] = {"ok": False}
    started = time.monotonic()
    try:
        summary["ok"] = run(args, summary)
        code = 0 if summary["ok"] else 1
    except (PodkitError, OSError, subprocess.SubprocessError) as exc:
        summary["error"] = f"{type(exc).__name__}: {exc}"
        code = 2
    summary["seconds"] = round(time.monotonic() - started, 3)
    json.dump(summary, sys.stdout, indent=2)
    print()
    return code


if __name__ == "__main__":
    sys.exit(main())
