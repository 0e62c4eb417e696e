"""A private containerd for bench_vs_containerd: its config, start/stop, image import, cleanup.

Everything it makes lives under one temp dir (root, state, socket, CNI conf, host-local
reservations, runc state) plus ``/run/containerd``, which it covers with a tmpfs in the
benchmark's own mount namespace (scripts/isolated), because the shims put their sockets there
whatever the config says. The pure parts (config text, conflist, what to clean up) are unit
tested in tests/test_bench_vs_containerd.py.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import time
from collections.abc import Callable, Iterable
from pathlib import Path

CNI_BIN = "/usr/lib/cni"
SHIM_DIR = "/run/containerd"
# Plugins a CRI run does not need; some would write outside the temp dir (opt: /opt/containerd).
DISABLED_PLUGINS = (
    "io.containerd.internal.v1.opt",
    "io.containerd.snapshotter.v1.btrfs",
    "io.containerd.snapshotter.v1.zfs",
    "io.containerd.snapshotter.v1.devmapper",
    "io.containerd.snapshotter.v1.aufs",
    "io.containerd.tracing.processor.v1.otlp",
    "io.containerd.internal.v1.tracing",
)


def _toml_str(value: str) -> str:
    return json.dumps(value)  # a JSON string is a valid TOML basic string


def config_toml(base: Path, *, sandbox_image: str, cni_conf_dir: Path,
                registry_config_dir: Path | None = None) -> str:
    """containerd 1.6 ``config.toml`` (version 2) of a private instance under ``base``."""
    for name, value in (("sandbox_image", sandbox_image), ("base", str(base))):
        if not value or '"' in value or "\n" in value:
            raise ValueError(f"config_toml: {name} {value!r} is empty or not a plain string")
    cri = 'plugins."io.containerd.grpc.v1.cri"'
    runc = f"{cri}.containerd.runtimes.runc"
    lines = [
        "version = 2",
        f"root = {_toml_str(str(base / 'root'))}",
        f"state = {_toml_str(str(base / 'state'))}",
        f"disabled_plugins = [{', '.join(_toml_str(p) for p in DISABLED_PLUGINS)}]",
        "",
        "[grpc]",
        f"  address = {_toml_str(str(base / 'containerd.sock'))}",
        "[ttrpc]",
        f"  address = {_toml_str(str(base / 'containerd.sock.ttrpc'))}",
        "[debug]",
        '  address = ""',
        '  level = "warn"',
        "[metrics]",
        '  address = ""',
        "",
        f"[{cri}]",
        f"  sandbox_image = {_toml_str(sandbox_image)}",
        "  restrict_oom_score_adj = true",
        "  disable_tcp_service = true",
        '  stream_server_address = "127.0.0.1"',
        '  stream_server_port = "0"',
        "  enable_selinux = false",
        f"[{cri}.containerd]",
        '  snapshotter = "overlayfs"',
        '  default_runtime_name = "runc"',
        f"[{runc}]",
        '  runtime_type = "io.containerd.runc.v2"',
        f"[{runc}.options]",
        "  SystemdCgroup = false",
        f"  Root = {_toml_str(str(base / 'runc'))}",
        f"[{cri}.cni]",
        f"  bin_dir = {_toml_str(CNI_BIN)}",
        f"  conf_dir = {_toml_str(str(cni_conf_dir))}",
        "  max_conf_num = 1",
    ]
    if registry_config_dir is not None:
        lines += [f"[{cri}.registry]",
                  f"  config_path = {_toml_str(str(registry_config_dir))}"]
    return "\n".join(lines) + "\n"


def conflist(name: str, bridge: str, subnet: str, ipam_dir: Path) -> dict[str, object]:
    """The pod network both servers get: bridge (no masquerade) + host-local + portmap.

    Both servers add the loopback plugin themselves (podkit: ``loopback=True``, containerd's
    CRI: ``WithLoNetwork``), so the chain is loopback + bridge + portmap on each side.
    """
    if not re.fullmatch(r"[a-z0-9-]{1,15}", bridge):
        raise ValueError(f"conflist: bridge name {bridge!r} is not a 1-15 char interface name")
    return {
        "cniVersion": "1.0.0",
        "name": name,
        "disableCheck": True,
        "plugins": [
            {"type": "bridge", "bridge": bridge, "isGateway": True, "ipMasq": False,
             "hairpinMode": True,
             "ipam": {"type": "host-local", "dataDir": str(ipam_dir),
                      "ranges": [[{"subnet": subnet}]], "routes": [{"dst": "0.0.0.0/0"}]}},
            {"type": "portmap", "capabilities": {"portMappings": True}, "snat": True},
        ],
    }


def write_conflist(conf_dir: Path, conf: dict[str, object]) -> Path:
    conf_dir.mkdir(parents=True, exist_ok=True)
    path = conf_dir / f"10-{conf['name']}.conflist"
    path.write_text(json.dumps(conf, indent=2))
    return path


def ensure_installed() -> None:
    """Install Debian's containerd (bench only) when ``containerd`` or ``ctr`` is missing.

    ``make bench`` installs it before entering scripts/isolated, whose network namespace has
    no route to the mirrors; this is the fallback for a run outside ``make``."""
    if shutil.which("containerd") and shutil.which("ctr"):
        return
    if os.geteuid() != 0:
        raise RuntimeError("containerd is missing and this is not root: apt-get install containerd")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    subprocess.run(["apt-get", "update", "-q"], env=env, check=False)
    subprocess.run(["apt-get", "install", "-y", "-q", "containerd"], env=env, check=False)
    if not (shutil.which("containerd") and shutil.which("ctr")):
        raise RuntimeError("containerd is missing and apt-get could not install it (no network "
                           "inside scripts/isolated): run `make bench`, or apt-get install "
                           "containerd first")


def mounts_under(mountinfo: str, base: str) -> list[str]:
    """Mount points at or below ``base`` in a /proc/self/mountinfo text, deepest first."""
    base = base.rstrip("/")
    found = []
    for line in mountinfo.splitlines():
        fields = line.split()
        if len(fields) < 5:
            continue
        point = fields[4].replace("\\040", " ")
        if point == base or point.startswith(base + "/"):
            found.append(point)
    return sorted(set(found), key=lambda p: (-p.count("/"), p))


def cni_chains(iptables_save: str, network: str) -> list[str]:
    """Chains in an ``iptables-save`` text that rules for CNI network ``network`` jump to
    (portmap's ``CNI-DN-*``, the bridge plugin's masquerade ``CNI-*``), found by the comment
    the plugins put on them."""
    chains: list[str] = []
    marker = f'name: \\"{network}\\"'
    for line in iptables_save.splitlines():
        if not line.startswith("-A ") or marker not in line:
            continue
        m = re.search(r"-j (CNI-[A-Za-z0-9_-]+)", line)
        if m and m.group(1) not in chains and not m.group(1).startswith("CNI-HOSTPORT"):
            chains.append(m.group(1))
    return chains


def remove_cni_chains(network: str) -> list[str]:
    """Delete the nat chains the CNI plugins made for ``network`` (rules jumping to them first)."""
    out = subprocess.run(["iptables-save", "-t", "nat"], capture_output=True, text=True,
                         check=False)
    if out.returncode != 0:
        return []
    chains = cni_chains(out.stdout, network)
    for line in out.stdout.splitlines():
        if line.startswith("-A ") and any(line.endswith(f"-j {c}") for c in chains):
            subprocess.run(["iptables", "-t", "nat", "-D", *shlex.split(line[3:])],
                           capture_output=True, check=False)
    for chain in chains:
        subprocess.run(["iptables", "-t", "nat", "-F", chain], capture_output=True, check=False)
        subprocess.run(["iptables", "-t", "nat", "-X", chain], capture_output=True, check=False)
    return chains


def pids_matching(comm_prefix: str, needle: str) -> list[int]:
    """PIDs whose name starts with ``comm_prefix`` and whose command line contains ``needle``."""
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            comm = Path(f"/proc/{entry}/comm").read_text().strip()
            if not comm.startswith(comm_prefix):
                continue
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ")
        except OSError:
            continue
        if needle.encode() in cmdline:
            pids.append(int(entry))
    return pids


def rss_kib(pid: int) -> int:
    """VmRSS of ``pid`` in KiB (0 when it is gone)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def open_fds(pid: int) -> int:
    try:
        return len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return 0



def terminate(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM a server we started (by PID), wait up to 60 s, then SIGKILL; reaped either way."""
    if proc.poll() is None:
        os.kill(proc.pid, signal.SIGTERM)
    try:
        proc.wait(60)
    except subprocess.TimeoutExpired:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()

class Containerd:
    """A private containerd under ``base`` (config written by :func:`config_toml`)."""

    def __init__(self, base: Path, config: str) -> None:
        self.base = base
        self.config_path = base / "config.toml"
        self.config_path.write_text(config)
        self.socket = base / "containerd.sock"
        self.proc: subprocess.Popen[bytes] | None = None
        self._made_shim_dir = False
        self._mounted_shim_dir = False

    @property
    def address(self) -> str:
        return f"unix://{self.socket}"

    def cover_shim_dir(self) -> None:
        """A tmpfs over /run/containerd in this (private) mount namespace: the shims' sockets."""
        if os.environ.get("PODKIT_ISOLATED") != "1":
            raise RuntimeError("a private containerd needs scripts/isolated (its mount namespace)")
        if not os.path.isdir(SHIM_DIR):
            os.makedirs(SHIM_DIR)
            self._made_shim_dir = True
        subprocess.run(["mount", "-t", "tmpfs", "-o", "mode=711", "pk-vs-containerd", SHIM_DIR],
                       check=True)
        self._mounted_shim_dir = True

    def start(self, argv: Callable[[list[str]], list[str]] = list) -> None:
        """Start containerd (``argv`` may wrap its command line, e.g. to enter a cgroup)."""
        log = open(self.base / "containerd.log", "ab")  # noqa: SIM115
        self.proc = subprocess.Popen(argv(["containerd", "--config", str(self.config_path)]),
                                     stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                                     start_new_session=True)
        log.close()
        for _ in range(600):
            if self.socket.exists():
                return
            if self.proc.poll() is not None:
                break
            time.sleep(0.05)
        raise RuntimeError(f"containerd did not start: {self.log_tail()}")

    def log_tail(self) -> str:
        try:
            return (self.base / "containerd.log").read_text()[-3000:]
        except OSError:
            return ""

    def stop(self) -> None:
        """SIGTERM containerd (by PID) and wait; its shims and pods keep running."""
        if self.proc is None:
            return
        terminate(self.proc)
        self.proc = None
        self.socket.unlink(missing_ok=True)

    def import_archive(self, tar: Path) -> None:
        subprocess.run(["ctr", "-a", str(self.socket), "-n", "k8s.io", "images", "import",
                        str(tar)], check=True, capture_output=True)

    def shim_pids(self) -> list[int]:
        return pids_matching("containerd-shim", str(self.socket))

    def cleanup(self, bridge: str, network: str) -> None:
        """Stop containerd, end its shims and their containers, remove what it made."""
        self.stop()
        for pid in self.shim_pids():
            _kill(pid)
        runc_root = self.base / "runc"
        if runc_root.is_dir():
            for ns_dir in runc_root.iterdir():
                for ctr in ns_dir.iterdir() if ns_dir.is_dir() else ():
                    subprocess.run(["runc", "--root", str(ns_dir), "delete", "--force", ctr.name],
                                   capture_output=True, check=False)
        remove_cni_chains(network)
        subprocess.run(["ip", "link", "del", bridge], capture_output=True, check=False)
        for netns in Path("/run/netns").glob("cni-*"):  # containerd's names, private tmpfs
            subprocess.run(["umount", "-l", str(netns)], capture_output=True, check=False)
            netns.unlink(missing_ok=True)
        unmount_under(self.base)
        if self._mounted_shim_dir:
            subprocess.run(["umount", "-l", SHIM_DIR], capture_output=True, check=False)
            self._mounted_shim_dir = False
        if self._made_shim_dir:
            os.rmdir(SHIM_DIR)
            self._made_shim_dir = False


def unmount_under(base: Path) -> None:
    """Lazily unmount every mount at or below ``base`` (rootfs overlays left by a crash)."""
    for point in mounts_under(Path("/proc/self/mountinfo").read_text(), str(base)):
        subprocess.run(["umount", "-l", point], capture_output=True, check=False)


def _kill(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)


def kill_all(pids: Iterable[int]) -> None:
    for pid in pids:
        _kill(pid)
