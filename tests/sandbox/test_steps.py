"""run_sandbox's steps as objects (pods.steps), the pid-namespace rule of infra-less pods, and
records by step name: what an earlier version wrote is undone through the same table."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import cattrs
import pytest

from podkit.errors import PodkitError
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
from podkit.pods.rules import infraless_pid_namespace
from podkit.pods.steps import Step, undo_steps
from podkit.runtime.testing import FakeRuntime
from podkit.sandbox import (
    INFRALESS_STEPS,
    SANDBOX_STEPS,
    USERNS_STEPS,
    PauseConfig,
    Sandbox,
    SandboxManager,
)

from ._fakes import FakeSupervisor, host_pod


def pod(pid: NamespaceMode = NamespaceMode.POD) -> SandboxConfig:
    ns = NamespaceOption(pid=pid)
    return SandboxConfig(metadata=PodSandboxMetadata(name="p"), linux=LinuxPodSandboxConfig(
        security_context=LinuxSandboxSecurityContext(namespace_options=ns)))


def ctr(pid: NamespaceMode) -> ContainerConfig:
    sc = LinuxContainerSecurityContext(namespace_options=NamespaceOption(pid=pid))
    return ContainerConfig(metadata=ContainerMetadata(name="c"), image="/img",
                           linux=LinuxContainerConfig(security_context=sc))


def test_undo_steps_reverses_and_keeps_what_failed() -> None:
    done: list[str] = []

    def undo(name: str) -> Any:
        def run(sb: Sandbox) -> None:
            if name == "files":
                raise PodkitError("busy")
            done.append(name)
        return run

    table = {n: Step(n, lambda sb: None, undo(n)) for n in ("netns", "network", "files", "pause")}
    sb = Sandbox(id="a" * 64, name="n", config=pod(), created_at=0,
                 steps=("netns", "network", "files", "pause"))
    saved: list[tuple[str, ...]] = []
    errors = undo_steps(sb, table, lambda s: saved.append(s.steps))
    assert done == ["pause", "network", "netns"] and [str(e) for e in errors] == ["busy"]
    assert sb.steps == ("files",) and saved[-1] == ("files",)


def test_a_step_the_table_lacks_stays_recorded() -> None:
    sb = Sandbox(id="b" * 64, name="n", config=pod(), created_at=0, steps=("gone",))
    errors = undo_steps(sb, {}, lambda s: None)
    assert len(errors) == 1 and sb.steps == ("gone",)


def test_every_recorded_name_is_in_the_table(tmp_path: Path) -> None:
    rt = FakeRuntime()
    m = SandboxManager(tmp_path / "root", tmp_path / "state", rt, None,
                       supervisor=FakeSupervisor(rt))
    try:
        assert set(SANDBOX_STEPS) | set(INFRALESS_STEPS) | set(USERNS_STEPS) == set(m.steps)
        assert all(name == step.name for name, step in m.steps.items())
    finally:
        m.close()


def test_a_record_an_earlier_version_left_is_undone(tmp_path: Path) -> None:
    """The record format is the step names: a half-made pod recorded by the code before the
    step table (same JSON) is rolled back by recover()."""
    rootfs = tmp_path / "rootfs"
    rootfs.mkdir()
    rt = FakeRuntime()
    sb = Sandbox(id="c" * 64, name="pk-pod-a_pk_u1_0", config=host_pod(), created_at=1,
                 steps=("files", "pause"))
    state = tmp_path / "state" / "sandboxes"
    state.mkdir(parents=True)
    (state / f"{sb.id}.json").write_text(json.dumps(cattrs.Converter().unstructure(sb)))
    (tmp_path / "root" / "sandboxes" / sb.id).mkdir(parents=True)
    m = SandboxManager(tmp_path / "root", tmp_path / "state", rt, None,
                       pause=PauseConfig(rootfs=str(rootfs)), supervisor=FakeSupervisor(rt))
    try:
        report = m.recover()
        assert report.rolled_back == (sb.id,) and report.errors == ()
        assert list(state.iterdir()) == []
        assert not (tmp_path / "root" / "sandboxes" / sb.id).exists()
    finally:
        m.close()


@pytest.mark.parametrize(("has_pause", "known", "pod_pid", "want_pid", "owner"), [
    (True, True, NamespaceMode.POD, NamespaceMode.POD, False),
    (False, False, NamespaceMode.POD, NamespaceMode.CONTAINER, True),  # becomes the pod's
    (False, True, NamespaceMode.POD, NamespaceMode.POD, True),  # joins, can stand in
    (False, False, NamespaceMode.NODE, NamespaceMode.POD, True),
])
def test_infraless_pid_namespace(has_pause: bool, known: bool, pod_pid: NamespaceMode,
                                 want_pid: NamespaceMode, owner: bool) -> None:
    config, is_owner = infraless_pid_namespace(ctr(NamespaceMode.POD), pod(pod_pid),
                                               has_pause=has_pause, pod_pid_known=known)
    assert config.linux.security_context.namespace_options.pid == want_pid
    assert is_owner == owner


def test_infraless_pid_namespace_leaves_other_modes() -> None:
    for mode in (NamespaceMode.CONTAINER, NamespaceMode.NODE, NamespaceMode.TARGET):
        config = ctr(mode)
        assert infraless_pid_namespace(config, pod(), has_pause=False,
                                       pod_pid_known=False) == (config, False)
