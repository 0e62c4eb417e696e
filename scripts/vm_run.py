"""``scripts/vm``: boot a cgroup-v2-only guest whose root is this machine's own filesystem and
run one command in it, streaming its output and returning its exit code (docs/hosts.md).

QEMU runs with software emulation (TCG): on this machine kind KVM accepts the VM but the guest
hangs once the kernel is entered. The guest prints a per-run marker line with the command's
exit code before it powers off; the host strips that line from the stream and exits with it.
"""

from __future__ import annotations

import argparse
import os
import re
import secrets
import selectors
import shutil
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import vm_initramfs
import vm_kernel

REPO = Path(__file__).resolve().parents[1]
QEMU = "qemu-system-x86_64"
NO_REPORT = 125  # the guest ended without reporting the command's exit code
TIMED_OUT = 124


def cache_dir() -> Path:
    return Path(os.environ.get("PODKIT_VM_CACHE") or REPO / ".vm")


def _env_item(text: str) -> tuple[str, str]:
    name, sep, value = text.partition("=")
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
        raise argparse.ArgumentTypeError(f"not an environment variable name: {name!r}")
    return name, value if sep else os.environ.get(name, "")


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="scripts/vm", description=__doc__.split("\n\n")[0])
    p.add_argument("--cache", type=Path, default=None,
                   help="where the kernel is kept (default: $PODKIT_VM_CACHE or .vm/)")
    p.add_argument("--kernel-package", default=None,
                   help="Debian kernel package (default: what linux-image-amd64 depends on)")
    sub = p.add_subparsers(dest="action", required=True)
    sub.add_parser("setup", help="download and unpack the kernel, check QEMU and busybox")
    run = sub.add_parser("run", help="boot the guest and run a command in it")
    run.add_argument("--systemd", action="store_true",
                     help="boot the host's systemd as PID 1 and run the command as a unit")
    run.add_argument("--memory", default="2G", help="guest memory (QEMU -m syntax)")
    run.add_argument("--cpus", type=int, default=2, help="guest vCPUs")
    run.add_argument("--workdir", default=str(REPO), help="where the command runs")
    run.add_argument("-e", "--env", action="append", type=_env_item, default=[],
                     metavar="NAME[=VALUE]", help="export to the command (repeatable)")
    run.add_argument("--timeout", type=float, default=None, help="seconds before killing it")
    run.add_argument("--9p-cache", dest="ninep_cache", default="loose",
                     choices=("none", "loose", "mmap", "fscache"),
                     help="9p cache mode for the read-only host root (loose: fastest)")
    run.add_argument("--verbose", action="store_true", help="show kernel (and systemd) messages")
    run.add_argument("command", nargs="+", help="the command (after --)")
    args = p.parse_args(argv)
    if args.action == "run" and args.command and args.command[0] == "--":
        args.command = args.command[1:]
    if args.action == "run" and not args.command:
        p.error("run needs a command after --")
    return args


def kernel_cmdline(*, verbose: bool) -> str:
    parts = ["console=ttyS0", "panic=-1", "8250.nr_uarts=1", "cgroup_no_v1=all",
             "systemd.unified_cgroup_hierarchy=1"]
    if not verbose:
        parts += ["quiet", "loglevel=3"]
    return " ".join(parts)


def qemu_command(*, kernel: Path, initrd: Path, append: str, memory: str, cpus: int) -> list[str]:
    """QEMU with TCG, no devices but the serial console, the 9p root share and an rng."""
    return [QEMU, "-accel", "tcg,thread=multi", "-machine", "pc", "-cpu", "max",
            "-smp", str(cpus), "-m", memory, "-nodefaults", "-no-user-config",
            "-display", "none", "-monitor", "none", "-serial", "stdio", "-no-reboot",
            "-kernel", str(kernel), "-initrd", str(initrd), "-append", append,
            "-virtfs", "local,path=/,mount_tag=host,security_model=none,readonly=on,"
            "multidevs=remap",
            "-device", "virtio-rng-pci"]


@dataclass
class ConsoleFilter:
    """Pass the guest's console through, minus carriage returns and the marker lines.

    ``MARKER=<rc>`` gives the exit code; ``MARKER-booted`` is stage 2 starting (boot time).
    A partial line is held back only while it could still become a marker line.
    """

    marker: str
    exit_code: int | None = None
    booted: bool = False
    _line: bytes = b""
    _shown: bool = False  # part of the current line was already passed through

    def feed(self, data: bytes) -> bytes:
        out = bytearray()
        for piece in re.split(rb"(\n)", data.replace(b"\r", b"")):
            if piece == b"\n":
                if self._shown:
                    out += b"\n"
                elif not self._take(self._line):
                    out += self._line + b"\n"
                self._line, self._shown = b"", False
            elif piece:
                self._line += piece
                if self._shown:
                    out += piece
                elif not self._may_be_marker(self._line):
                    out += self._line
                    self._shown = True
        return bytes(out)

    def _may_be_marker(self, line: bytes) -> bool:
        mark = self.marker.encode()
        return line.startswith(mark) or mark.startswith(line)

    def _take(self, line: bytes) -> bool:
        text = line.decode(errors="replace")
        m = re.fullmatch(re.escape(self.marker) + r"=(\d+)", text)
        if m:
            self.exit_code = int(m.group(1))
            return True
        if text == self.marker + "-booted":
            self.booted = True
            return True
        return False


def _check_tools() -> None:
    if shutil.which(QEMU) is None:
        raise SystemExit(f"scripts/vm: {QEMU} not found: apt-get install qemu-system-x86 "
                         "(make test-cgroupv2 installs it)")
    if not vm_kernel.BUSYBOX.exists():
        raise SystemExit("scripts/vm: /bin/busybox not found: apt-get install busybox-static")


def setup(args: argparse.Namespace) -> vm_kernel.Kernel:
    _check_tools()
    kernel = vm_kernel.fetch(args.cache or cache_dir(), args.kernel_package)
    vm_kernel.guest_modules(kernel)  # fail here, not in the guest, if a module is missing
    return kernel


def _stream(proc: subprocess.Popen[bytes], filt: ConsoleFilter, deadline: float | None,
            started: float) -> bool:
    """Copy the console to stdout until QEMU exits; False when the deadline passed."""
    assert proc.stdout is not None
    fd = proc.stdout.fileno()
    os.set_blocking(fd, True)
    sel = selectors.DefaultSelector()
    sel.register(fd, selectors.EVENT_READ)
    while True:
        wait = None if deadline is None else max(0.0, deadline - time.monotonic())
        if wait == 0.0 or not sel.select(wait):
            return False
        chunk = os.read(fd, 65536)
        if not chunk:
            return True
        was_booted = filt.booted
        sys.stdout.buffer.write(filt.feed(chunk))
        sys.stdout.buffer.flush()
        if filt.booted and not was_booted:
            print(f"podkit-vm: booted in {time.monotonic() - started:.1f} s", file=sys.stderr,
                  flush=True)


HIDDEN = ("/tmp", "/var/tmp", "/run")  # tmpfs in the guest: the host's files there are not seen


def kept_dir(workdir: str) -> str:
    """The workdir when it lies under a directory the guest mounts tmpfs on (a CI clone in
    /tmp): stage 1 binds it back over the tmpfs. Empty otherwise; the tmpfs itself is refused."""
    path = Path(workdir).resolve()
    for hidden in HIDDEN:
        if path == Path(hidden):
            raise SystemExit(f"scripts/vm: {path} is tmpfs in the guest: use a checkout in it "
                             "or elsewhere")
        if Path(hidden) in path.parents:
            return str(path)
    return ""


def run(args: argparse.Namespace) -> int:
    keep = kept_dir(args.workdir)
    kernel = setup(args)
    marker = "@@podkit-vm-" + secrets.token_hex(8)
    mode = "systemd" if args.systemd else "sh"
    initrd_bytes = vm_initramfs.base_archive(kernel, vm_kernel.guest_modules(kernel),
                                             args.ninep_cache)
    initrd_bytes += vm_initramfs.run_archive(args.command, workdir=args.workdir,
                                             env=dict(args.env), marker=marker, mode=mode,
                                             verbose=args.verbose, keep=keep)
    initrd = (args.cache or cache_dir()) / f"initrd-{os.getpid()}.cpio"
    initrd.write_bytes(initrd_bytes)
    cmd = qemu_command(kernel=kernel.vmlinuz, initrd=initrd, memory=args.memory, cpus=args.cpus,
                       append=kernel_cmdline(verbose=args.verbose))
    filt = ConsoleFilter(marker)
    started = time.monotonic()
    deadline = None if args.timeout is None else started + args.timeout
    try:
        with subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE) as proc:
            try:
                finished = _stream(proc, filt, deadline, started)
            finally:
                if proc.poll() is None:
                    proc.kill()
    finally:
        initrd.unlink(missing_ok=True)
    took = time.monotonic() - started
    if not finished:
        print(f"podkit-vm: timed out after {took:.0f} s", file=sys.stderr)
        return TIMED_OUT
    if filt.exit_code is None:
        print(f"podkit-vm: the guest ended after {took:.1f} s without reporting an exit code "
              f"(QEMU exit {proc.returncode}; run with --verbose to see the kernel)",
              file=sys.stderr)
        return NO_REPORT
    print(f"podkit-vm: exit {filt.exit_code} after {took:.1f} s", file=sys.stderr)
    return filt.exit_code


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    if args.action == "setup":
        kernel = setup(args)
        print(f"podkit-vm: kernel {kernel.version} in {kernel.root}")
        return 0
    return run(args)
