"""The ``podkit pod`` CLI as a child process over one pod of busybox containers, for the
exec/logs/attach/wait/stats/top integration tests (test_pod_io_*.py, test_pod_watch_*.py)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import _leaks
from podkit._cli.podctx import manager
from podkit.cli import build_parser
from podkit.sandbox import SandboxManager
from support import require_binary, require_isolated

CLI = [sys.executable, "-m", "podkit.cli"]


class PodCLI:
    """``podkit`` with the test's own --root/--state; one pod from ``containers`` (YAML)."""

    def __init__(self, base: Path, rootfs: Path, pod: str, runtime: str = "runc") -> None:
        self.base, self.rootfs, self.pod = base, rootfs, pod
        self.dirs = ["--root", str(base / "root"), "--state", str(base / "state")]
        self.runtime = runtime

    def argv(self, *words: str) -> list[str]:
        """The command line; ``--runtime`` goes before a ``--`` (the command's own words)."""
        cut = words.index("--") if "--" in words else len(words)
        opts = ["--runtime", self.runtime] if words[:1] == ("pod",) else []
        return [*CLI, *self.dirs, *words[:cut], *opts, *words[cut:]]

    def run(self, *words: str, input: bytes | None = None,
            timeout: float = 120) -> subprocess.CompletedProcess[bytes]:
        return subprocess.run(self.argv(*words), input=input, capture_output=True,
                              timeout=timeout, check=False)

    def ok(self, *words: str, input: bytes | None = None) -> str:
        res = self.run(*words, input=input)
        assert res.returncode == 0, (words, res.returncode, res.stderr.decode())
        return res.stdout.decode()

    def popen(self, *words: str, **kw: Any) -> subprocess.Popen[bytes]:
        return subprocess.Popen(self.argv(*words), **kw)

    def start(self, containers: str) -> None:
        """``pod run`` of a pod named ``self.pod`` with ``containers`` (a YAML list)."""
        f = self.base / f"{self.pod}.yaml"
        f.write_text(f"sandbox:\n  metadata: {{name: {self.pod}, namespace: pk-cli}}\n"
                     f"  log_directory: {self.base / 'logs'}\n"
                     f"pause: {{rootfs: {self.rootfs}}}\n"
                     "containers:\n" + textwrap.indent(textwrap.dedent(containers), "  "))
        self.ok("pod", "run", str(f))

    def inspect(self, container: str = "") -> Any:
        return json.loads(self.ok("pod", "inspect", self.pod, *[container][:bool(container)],
                                  "-o", "json"))

    def manager(self) -> SandboxManager:
        """The manager the CLI opens (close it soon: the CLI needs the state dir too)."""
        args = build_parser().parse_args(["pod", "ls", *self.dirs])
        return manager(args)

    def wait_until(self, what: str, check: Any, limit: float = 60) -> None:
        """Poll ``check()`` until true; fail naming ``what`` after ``limit`` s (a hang guard)."""
        end = time.monotonic() + limit
        while not check():
            assert time.monotonic() < end, f"gave up waiting for {what}"
            time.sleep(0.05)


def pod_cli(base: Path, busybox_rootfs: Path, pod: str,
            runtime: str = "runc") -> Iterator[PodCLI]:
    """Require the real parts; yield the CLI; remove the pod and the bridge afterwards."""
    require_isolated()
    for b in (runtime, "conmon"):
        require_binary(b)
    _leaks.register_runtime_root(base / "state" / "pods" / "runc")
    _leaks.register_ipam_dir(base / "state" / "pods" / "ipam")
    rootfs = base / "rootfs"
    shutil.copytree(busybox_rootfs, rootfs, symlinks=True)
    cli = PodCLI(base, rootfs, pod, runtime)
    try:
        yield cli
    finally:
        cli.run("pod", "rm", pod)
        # the CLI's built-in network: its bridge lives in the private namespace of the run
        subprocess.run(["ip", "link", "del", "pk0"], check=False, capture_output=True)


def read_until(stream: Any, needle: bytes, limit: int = 1 << 20) -> bytes:
    """Read ``stream`` (a pipe) until ``needle`` has appeared; everything read."""
    got = b""
    while needle not in got:
        chunk = stream.read1(4096) if hasattr(stream, "read1") else stream.read(4096)
        assert chunk, f"EOF before {needle!r}; got {got[-400:]!r}"
        got += chunk
        assert len(got) < limit
    return got


def lines_of(text: bytes) -> Sequence[str]:
    return text.decode().replace("\r\n", "\n").splitlines()
