"""Shared helpers for the SandboxManager integration tests: configs, a leak check, the bridge."""

from __future__ import annotations

import os
import shutil
import subprocess
import uuid
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import attrs

import _leaks
from podkit import cgroups as podkit_cgroups
from podkit.pods.config import (
    ContainerConfig,
    ContainerMetadata,
    LinuxContainerConfig,
    LinuxContainerSecurityContext,
    LinuxPodSandboxConfig,
    LinuxSandboxSecurityContext,
    NamespaceMode,
    NamespaceOption,
    PodSandboxMetadata,
    SandboxConfig,
)
from podkit.pods.steps import Step
from podkit.runtime import Runc
from podkit.sandbox import PauseConfig, SandboxManager, default_networks
from support import require_binary, require_isolated

BRIDGE = "pkpod0"
LEAK_KINDS = ("netns", "link", "mount")


def pod_config(name: str = "", *, host_network: bool = False, **kw: object) -> SandboxConfig:
    """A pod named ``pk-pod-...`` (unique unless ``name`` is given)."""
    ns = NamespaceOption(network=NamespaceMode.NODE if host_network else NamespaceMode.POD)
    linux = kw.pop("linux", None) or LinuxPodSandboxConfig()
    assert isinstance(linux, LinuxPodSandboxConfig)
    linux = attrs.evolve(linux, security_context=LinuxSandboxSecurityContext(namespace_options=ns))
    return SandboxConfig(
        metadata=PodSandboxMetadata(name=name or f"pk-pod-{uuid.uuid4().hex[:8]}",
                                    uid=uuid.uuid4().hex, namespace="pk-test"),
        linux=linux,
        **kw,  # type: ignore[arg-type]
    )


def ctr_config(rootfs: Path, name: str, command: Sequence[str], *,
               pid: NamespaceMode = NamespaceMode.CONTAINER, **kw: object) -> ContainerConfig:
    """A busybox container running ``command`` with its own pid namespace by default
    (a ``linux=`` argument replaces that)."""
    linux = kw.pop("linux", None) or LinuxContainerConfig(
        security_context=LinuxContainerSecurityContext(namespace_options=NamespaceOption(pid=pid)))
    return ContainerConfig(
        metadata=ContainerMetadata(name=name), image=str(rootfs), command=list(command),
        linux=linux,  # type: ignore[arg-type]
        **kw,  # type: ignore[arg-type]
    )


def do_then_fail(step: Step, exc: BaseException,
                 seen: dict[str, object] | None = None) -> Step:
    """``step`` doing its work, then raising ``exc`` (the sandbox kept in ``seen``): put it in
    a manager's ``steps`` table to inject a failure after a step."""
    def do(sb: Any) -> None:
        step.do(sb)
        if seen is not None:
            seen["sandbox"] = sb
        raise exc

    return attrs.evolve(step, do=do)


def make_manager(base: Path, rootfs: Path, *, networks: bool = True, infraless: bool = False,
                 binary: str = "runc", pause: PauseConfig | None = None,
                 **kw: object) -> SandboxManager:
    """A manager with its own dirs under ``base`` and the shared test bridge network
    (``infraless``: ``pause=None``; ``pause``: another pause program on ``rootfs``)."""
    runc_root = base / "runc"
    _leaks.register_runtime_root(runc_root)
    _leaks.register_ipam_dir(base / "state" / "ipam")
    nets = default_networks(base / "state", bridge=BRIDGE, name="pk-pod-net") if networks \
        else None
    return SandboxManager(base / "root", base / "state", Runc(binary, root=runc_root), nets,
                          pause=None if infraless else pause or PauseConfig(rootfs=str(rootfs)),
                          netns_prefix="pk-pod-",
                          **kw)  # type: ignore[arg-type]


def leftovers(base: Path, manager: SandboxManager, cgroups: Sequence[str] = ()) -> list[str]:
    """What a test's manager left: runtime containers, IPAM entries, records, cgroups."""
    out = [f"container {c.id}" for c in manager.runtime.list()]
    ipam = base / "state" / "ipam"
    for f in ipam.rglob("*") if ipam.exists() else ():
        if f.is_file() and f.name != "lock" and not f.name.startswith("last_reserved_ip"):
            out.append(f"ipam {f}")
    for kind in ("sandboxes", "containers"):
        out += [f"record {p}" for p in (base / "state" / kind).glob("*.json")]
        out += [f"dir {p}" for p in (base / "root" / kind).glob("*")]
    for path in cgroups:  # v1: one dir per controller; v2: the one unified dir
        loc = podkit_cgroups.locate(path)
        for d in sorted({str(loc.controller_dir(c)) for c in ("memory", "pids", "cpuacct")
                         if loc.controller_dir(c) is not None}):
            if Path(d).exists():
                out.append(f"cgroup {d}")
    return out


def memory_limit(cgroups_path: str) -> int | None:
    """The memory limit of a container's cgroup, read through ``podkit.cgroups`` (v1 or v2)."""
    sample = podkit_cgroups.stats(cgroups_path)
    assert sample.memory is not None, f"no memory controller for {cgroups_path}"
    return sample.memory.limit


def ensure_bridge() -> Iterator[None]:
    """Create the test bridge up front (the bridge plugin never deletes it); delete it after."""
    subprocess.run(["ip", "link", "add", BRIDGE, "type", "bridge"], check=False,
                   capture_output=True)
    try:
        yield
    finally:
        subprocess.run(["ip", "link", "del", BRIDGE], check=False, capture_output=True)


def pod_bridge() -> Iterator[None]:
    """The module-wide setup of the manager tests: require scripts/isolated, runc and conmon,
    then hold the test bridge (a generator for a fixture to ``yield from``)."""
    require_isolated()
    for b in ("runc", "conmon"):
        require_binary(b)
    yield from ensure_bridge()


def managed(base: Path, rootfs: Path, **kw: object) -> Iterator[SandboxManager]:
    """A :func:`make_manager` manager for one test; afterwards everything is removed and the
    test fails on anything left (runtime containers, IPAM, records, cgroups, netns, links,
    mounts). A generator for a fixture to ``yield from``."""
    before = snapshot()
    m = make_manager(base, rootfs, **kw)
    cgroups: list[str] = []
    try:
        yield m
    finally:
        cgroups = [s.cgroups_path for s in m.list_sandboxes()] + [
            c.cgroups_path for c in m.list_containers()]
        m.remove_all()
        m.close()
    assert leftovers(base, m, cgroups) == []
    assert leaked(before) == []


def copy_rootfs(src: Path, dest: Path) -> Path:
    """A private copy of the busybox rootfs (containers may write to theirs)."""
    shutil.copytree(src, dest, symlinks=True)
    return dest


def snapshot() -> frozenset[str]:
    """The per-test leak baseline: netns, links and mounts of the isolated namespace."""
    return _leaks.snapshot(LEAK_KINDS)


def leaked(before: frozenset[str]) -> list[str]:
    """New netns, links or mounts since ``before``."""
    return _leaks.leaked_since(before, kinds=LEAK_KINDS)


def isolated() -> bool:
    """Whether we run in scripts/isolated as root."""
    return os.environ.get("PODKIT_ISOLATED") == "1" and os.geteuid() == 0
