"""The guest kernel: Debian's generic ``linux-image-*-amd64`` fetched with ``apt-get download``,
unpacked with ``dpkg-deb -x``, its modules.dep made with busybox ``depmod`` (the package leaves
that to its postinst), and the load order of the modules the guest needs read from it.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

BUSYBOX = Path("/bin/busybox")
META_PACKAGE = "linux-image-amd64"

# What the guest loads at boot, in this order (dependencies first, from modules.dep): virtio
# PCI and 9p for the root, overlay for the writable layer, the rng so early getrandom() does
# not wait, then what pods need (bridge, veth, netfilter for the CNI plugins and iptables-nft).
# Anything else the kernel asks for later is loaded by busybox modprobe inside the guest.
# crc32c_generic is libcrc32c's soft dependency (its init asks the crypto API for "crc32c"
# and fails with ENOENT when no modprobe can load it yet), so it is named before netfilter.
BOOT_MODULES = ("virtio_pci", "virtio_rng", "9pnet_virtio", "9p", "overlay")
POD_MODULES = ("crc32c_generic", "bridge", "br_netfilter", "veth", "nf_tables", "nft_compat",
               "nft_chain_nat", "nf_nat", "nf_conntrack", "xt_conntrack", "xt_MASQUERADE",
               "xt_comment", "xt_addrtype", "xt_mark", "xt_multiport", "ip_tables",
               "iptable_filter", "iptable_nat")


@dataclass(frozen=True)
class Kernel:
    """An unpacked kernel package: its root (``boot/``, ``lib/modules/``) and version."""

    root: Path
    version: str

    @property
    def vmlinuz(self) -> Path:
        return self.root / "boot" / f"vmlinuz-{self.version}"

    @property
    def modules(self) -> Path:
        return self.root / "lib" / "modules" / self.version


def default_package() -> str:
    """The versioned image package Debian's ``linux-image-amd64`` points at today."""
    out = subprocess.run(["apt-cache", "depends", META_PACKAGE], check=True,
                         capture_output=True, text=True).stdout
    return parse_depends(out)


def parse_depends(apt_cache_output: str) -> str:
    m = re.search(r"^\s*Depends:\s*(linux-image-\S+-amd64)\s*$", apt_cache_output, re.M)
    if not m:
        raise RuntimeError(f"{META_PACKAGE} depends on no linux-image-*-amd64 package")
    return m.group(1)


def _download(package: str, debs: Path) -> Path:
    found = sorted(debs.glob(f"{package}_*_amd64.deb"))
    if found:
        return found[-1]
    debs.mkdir(parents=True, exist_ok=True)
    cmd = ["apt-get", "download", "-q", package]
    if subprocess.run(cmd, cwd=debs).returncode != 0:
        subprocess.run(["apt-get", "update", "-q"], check=True)
        subprocess.run(cmd, cwd=debs, check=True)
    found = sorted(debs.glob(f"{package}_*_amd64.deb"))
    if not found:
        raise RuntimeError(f"apt-get download {package} left no .deb in {debs}")
    return found[-1]


def fetch(cache: Path, package: str | None = None) -> Kernel:
    """Download and unpack the kernel package into ``cache`` once; later calls reuse it."""
    package = package or default_package()
    root = cache / package
    if not root.is_dir():
        deb = _download(package, cache / "debs")
        partial = cache / f"{package}.partial"
        shutil.rmtree(partial, ignore_errors=True)
        subprocess.run(["dpkg-deb", "-x", str(deb), str(partial)], check=True)
        partial.rename(root)
    versions = sorted(p.name for p in (root / "lib" / "modules").iterdir())
    if len(versions) != 1:
        raise RuntimeError(f"expected one module tree in {root}, found {versions}")
    kernel = Kernel(root, versions[0])
    if not (kernel.modules / "modules.dep").exists():
        subprocess.run([str(BUSYBOX), "depmod", "-b", str(root), kernel.version], check=True)
    return kernel


def module_name(path: str) -> str:
    """``kernel/net/9p/9pnet_virtio.ko`` -> ``9pnet_virtio`` (dashes read as underscores)."""
    base = path.rsplit("/", 1)[-1]
    base = re.sub(r"\.ko(\.(xz|gz|zst))?$", "", base)
    return base.replace("-", "_")


def parse_modules_dep(text: str) -> dict[str, tuple[str, list[str]]]:
    """modules.dep as {name: (path, [paths it depends on])}."""
    out: dict[str, tuple[str, list[str]]] = {}
    for line in text.splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        path, _, deps = line.partition(":")
        out[module_name(path.strip())] = (path.strip(), deps.split())
    return out


def load_order(deps: dict[str, tuple[str, list[str]]], wanted: tuple[str, ...],
               builtin: frozenset[str] = frozenset()) -> list[str]:
    """Paths to insmod so each module comes after what it needs, each once.

    A wanted module built into the kernel is skipped; one neither built in nor in ``deps`` is
    an error (a guest without 9p or overlay cannot boot, so say so before starting it).
    """
    order: list[str] = []

    def visit(name: str, trail: tuple[str, ...]) -> None:
        if name in builtin:
            return
        if name not in deps:
            raise KeyError(f"kernel module {name} not found (needed by {' <- '.join(trail)})")
        path, needs = deps[name]
        if path in order:
            return
        if name in trail:
            raise ValueError(f"module dependency cycle: {' -> '.join((*trail, name))}")
        for dep in needs:
            visit(module_name(dep), (*trail, name))
        order.append(path)

    for name in wanted:
        visit(name.replace("-", "_"), ())
    return order


def builtin_modules(kernel: Kernel) -> frozenset[str]:
    path = kernel.modules / "modules.builtin"
    if not path.exists():
        return frozenset()
    return frozenset(module_name(line) for line in path.read_text().split())


def guest_modules(kernel: Kernel) -> list[str]:
    """The boot and pod modules of ``kernel`` in load order (paths under its module tree)."""
    deps = parse_modules_dep((kernel.modules / "modules.dep").read_text())
    return load_order(deps, BOOT_MODULES + POD_MODULES, builtin_modules(kernel))
