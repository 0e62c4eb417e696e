"""Hostile pod and container configs through SandboxManager with real runc, conmon and CNI.

Each is refused before anything exists (no netns, no CNI attachment, no record, the name
still free), and a container's log never lands outside its pod's ``log_directory``.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path

import attrs
import pytest

from podkit.container import ContainerConfigError
from podkit.pods.config import DNSConfig, LinuxPodSandboxConfig, PodSandboxMetadata, SandboxConfig
from podkit.runtime import read_cri_log
from podkit.sandbox import ContainerState, SandboxConfigError, SandboxManager

from ._pods import ctr_config, managed, pod_config

pytestmark = pytest.mark.integration


@pytest.fixture
def mgr(bridge: None, rootfs: Path, tmp_path: Path) -> Iterator[SandboxManager]:
    yield from managed(tmp_path / "m", rootfs)


def _state(mgr: SandboxManager, tmp_path: Path) -> list[str]:
    """Pinned netns of this manager, its records and pod dirs."""
    netns = [n for n in os.listdir(mgr.netns_dir) if n.startswith(mgr.netns_prefix)] \
        if os.path.isdir(mgr.netns_dir) else []
    base = tmp_path / "m"
    return sorted(netns + [str(p) for kind in ("sandboxes", "containers")
                           for d in (base / "state" / kind, base / "root" / kind)
                           for p in d.glob("*")])


def _hostile(md: PodSandboxMetadata, target: Path) -> list[SandboxConfig]:
    good = pod_config()
    sysctls = LinuxPodSandboxConfig(sysctls={str(target): "1"})
    return [
        attrs.evolve(good, metadata=attrs.evolve(md, name=md.name + "\0")),  # issue 11 defect 4
        attrs.evolve(good, metadata=attrs.evolve(md, uid=md.uid + ";IP=10.88.9.9")),
        attrs.evolve(good, metadata=md, hostname="pk_pod"),
        attrs.evolve(good, metadata=md, dns_config=DNSConfig(servers=["10.0.0.1\nsearch x"])),
        attrs.evolve(pod_config(linux=sysctls), metadata=md),
    ]


def test_hostile_pods_create_nothing_and_keep_the_name_free(
    mgr: SandboxManager, tmp_path: Path
) -> None:
    md = pod_config().metadata
    target = tmp_path / "written-by-sysctl"
    before = _state(mgr, tmp_path)
    for config in _hostile(md, target):
        with pytest.raises(SandboxConfigError):
            mgr.run_sandbox(config)
        assert _state(mgr, tmp_path) == before
        assert mgr.list_sandboxes() == []
    assert not target.exists()
    sb = mgr.run_sandbox(attrs.evolve(pod_config(), metadata=md))  # the name was never taken
    assert sb.ip.startswith("10.88.")
    mgr.remove_sandbox(sb.id)


def test_infraless_pod_refuses_a_sysctl_path(bridge: None, rootfs: Path, tmp_path: Path) -> None:
    target = tmp_path / "pwned"
    for m in managed(tmp_path / "m", rootfs, infraless=True):
        with pytest.raises(SandboxConfigError, match=r"^linux\.sysctls key '/"):
            m.run_sandbox(pod_config(linux=LinuxPodSandboxConfig(sysctls={str(target): "1"})))
        assert m.list_sandboxes() == [] and not target.exists()


def test_log_path_outside_the_log_directory_is_refused(
    mgr: SandboxManager, rootfs: Path, tmp_path: Path
) -> None:
    logs = tmp_path / "logs" / "pod"
    sb = mgr.run_sandbox(pod_config(log_directory=str(logs)))
    outside = tmp_path / "logs" / "escaped.log"
    for path in ("../escaped.log", "/../escaped.log", "x/../../escaped.log"):
        with pytest.raises(ContainerConfigError, match=f"resolves to '{outside}'"):
            mgr.create_container(sb.id, ctr_config(rootfs, "esc", ["echo", "x"], log_path=path))
    assert mgr.list_containers() == []
    cid = mgr.create_container(sb.id, ctr_config(rootfs, "esc", ["echo", "inside"],
                                                 log_path="/esc.log"))
    assert mgr.container_log_file(cid) == str(logs / "esc.log")
    mgr.start_container(cid)
    deadline = time.monotonic() + 20
    while mgr.container_status(cid).state != ContainerState.CONTAINER_EXITED:
        assert time.monotonic() < deadline, "the container did not exit"
        time.sleep(0.05)
    assert [e.content for e in read_cri_log(logs / "esc.log")] == [b"inside"]
    assert not outside.exists() and not (tmp_path / "logs" / "esc.log").exists()
    mgr.remove_sandbox(sb.id)
