"""SandboxManager failure paths with real parts: a fault at every run_sandbox step is undone;
a manager killed with SIGKILL mid-operation is cleaned up by a new one (``recover``)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import attrs
import pytest

from podkit import netns
from podkit.errors import PodkitError
from podkit.pods.steps import Step
from podkit.sandbox import (
    SANDBOX_STEPS,
    ContainerState,
    PauseConfig,
    Sandbox,
    SandboxState,
)
from support import REPO

from ._pods import (
    ctr_config,
    do_then_fail,
    leaked,
    leftovers,
    make_manager,
    pod_config,
    snapshot,
)

pytestmark = pytest.mark.integration


class Injected(PodkitError):
    """The fault a test injects."""


@pytest.mark.parametrize("step", ["record", *SANDBOX_STEPS, "infraless-namespaces"])
def test_fault_at_every_run_sandbox_step_is_undone(
    bridge: None, rootfs: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, step: str
) -> None:
    """The step does its work, then fails: everything done so far (this step too) is undone."""
    before = snapshot()
    base = tmp_path / "m"
    infraless = step.startswith("infraless-")
    step = step.removeprefix("infraless-")
    m = make_manager(base, rootfs, infraless=infraless)
    seen: dict[str, object] = {}
    if step == "record":
        def fail_save(obj: object) -> None:
            raise Injected("disk full")

        monkeypatch.setattr(m.records, "save", fail_save)
    else:
        monkeypatch.setitem(m.steps, step,
                            do_then_fail(m.steps[step], Injected(f"after {step}"), seen))
    cfg = pod_config()
    try:
        with pytest.raises(Injected):
            m.run_sandbox(cfg)
        monkeypatch.undo()
        assert m.list_sandboxes() == []
        sb = seen.get("sandbox")
        if sb is not None:
            assert not netns.exists(sb.netns_path)  # type: ignore[attr-defined]
        assert leftovers(base, m) == []
        assert leaked(before) == []
        again = m.run_sandbox(cfg)  # the name was released
        m.remove_sandbox(again.id)
    finally:
        monkeypatch.undo()
        m.remove_all()
        m.close()
    assert leftovers(base, m) == []
    assert leaked(before) == []


def test_real_pause_failure_is_undone(bridge: None, rootfs: Path, tmp_path: Path) -> None:
    before = snapshot()
    base = tmp_path / "m"
    m = make_manager(base, rootfs, pause=PauseConfig(rootfs=str(rootfs), args=("/no/such/pause",)))
    try:
        with pytest.raises(PodkitError, match="no/such/pause"):
            m.run_sandbox(pod_config())
        assert m.list_sandboxes() == []
    finally:
        m.remove_all()
        m.close()
    assert leftovers(base, m) == []
    assert leaked(before) == []


def _failing(step: Step, exc: Exception, started: threading.Event,
             first: threading.Event | None, then: threading.Event) -> Step:
    """``step`` (``started`` set) doing its work, then (once ``first`` is set) raising ``exc``
    (``then`` set)."""
    def do(sb: Sandbox) -> None:
        started.set()
        step.do(sb)
        if first is not None:
            assert first.wait(10)
            time.sleep(0.01)  # the first failure reaches the manager meanwhile
        then.set()
        raise exc

    return attrs.evolve(step, do=do)


@pytest.mark.parametrize("first", ["files", "pause", "network"])
def test_network_and_the_pause_side_failing_together_are_undone(
    bridge: None, rootfs: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, first: str
) -> None:
    """CNI ADD (helper thread) runs alongside the pod files and the pause: both sides fail
    after doing their work; the first failure is raised with the other's as a note, and every
    step of both sides is undone."""
    before = snapshot()
    base = tmp_path / "m"
    m = make_manager(base, rootfs)
    side = "pause" if first == "network" else first
    side_started, side_failed = threading.Event(), threading.Event()
    net_started, net_failed = threading.Event(), threading.Event()
    # each side fails once the other is under way (a side that failed stops the other's
    # next step), the second only after the first failed
    monkeypatch.setitem(m.steps, "network", _failing(
        m.steps["network"], Injected("network"), net_started,
        side_failed if first != "network" else side_started, net_failed))
    monkeypatch.setitem(m.steps, side, _failing(
        m.steps[side], Injected(side), side_started,
        net_failed if first == "network" else net_started, side_failed))
    try:
        with pytest.raises(Injected, match=first) as info:
            m.run_sandbox(pod_config())
        other = "pod files and pause" if first == "network" else "network setup"
        assert info.value.__notes__ == [f"the {other} meanwhile failed too: "
                                        f"{'network' if first != 'network' else side}"]
        monkeypatch.undo()
        assert m.list_sandboxes() == []
        assert leftovers(base, m) == []
        assert leaked(before) == []
    finally:
        monkeypatch.undo()
        m.remove_all()
        m.close()
    assert leaked(before) == []


def test_remove_failing_while_cni_del_runs_still_stops_the_pod(
    bridge: None, rootfs: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """remove_sandbox deletes the pause while CNI DEL runs; if that fails the stop still
    completes (network and netns gone, record kept), and a second remove finishes the job."""
    before = snapshot()
    base = tmp_path / "m"
    m = make_manager(base, rootfs)
    try:
        sb = m.run_sandbox(pod_config())
        cid = m.create_container(sb.id, ctr_config(rootfs, "app", ["sleep", "600"]))
        m.start_container(cid)

        def fail(sb: Sandbox) -> None:
            raise Injected("pause delete")

        monkeypatch.setitem(m.steps, "pause", attrs.evolve(m.steps["pause"], undo=fail))
        with pytest.raises(Injected, match="pause delete"):
            m.remove_sandbox(sb.id)
        monkeypatch.undo()
        status = m.sandbox_status(sb.id)
        assert status.state == SandboxState.SANDBOX_NOTREADY
        assert "network" not in status.steps and "pause" in status.steps
        assert not netns.exists(sb.netns_path)
        assert m.list_containers() == []  # deleted before the pause
        m.remove_sandbox(sb.id)
        assert leftovers(base, m) == []
    finally:
        monkeypatch.undo()
        m.remove_all()
        m.close()
    assert leaked(before) == []


_CHILD = """
import signal, sys, time
import attrs
sys.path[:0] = [{tests!r}]
from pathlib import Path
from sandbox._pods import make_manager, pod_config, ctr_config
from podkit.sandbox import SandboxManager

base, rootfs, mode = Path({base!r}), Path({rootfs!r}), {mode!r}
m = make_manager(base, rootfs)
if mode == "mid":
    original = m.steps["pause"]
    def hang(sb):
        original.do(sb)               # netns, CNI, files and the pause exist; not recorded READY
        print("HANG", flush=True)
        time.sleep(600)
    m.steps["pause"] = attrs.evolve(original, do=hang)
sb = m.run_sandbox(pod_config())
cid = m.create_container(sb.id, ctr_config(rootfs, "app", ["sleep", "600"]))
m.start_container(cid)
half = m.create_container(sb.id, ctr_config(rootfs, "half", ["true"]))
print("READY", flush=True)
time.sleep(600)
"""


@pytest.mark.parametrize("mode", ["mid", "done"])
def test_killed_manager_is_recovered_by_a_new_one(
    bridge: None, rootfs: Path, tmp_path: Path, mode: str
) -> None:
    before = snapshot()
    base = tmp_path / "m"
    code = textwrap.dedent(_CHILD).format(tests=str(REPO / "tests"), base=str(base),
                                          rootfs=str(rootfs), mode=mode)
    child = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True, cwd=REPO)
    try:
        assert child.stdout is not None
        line = child.stdout.readline().strip()
        assert line == ("HANG" if mode == "mid" else "READY"), child.stderr.read() if \
            child.stderr else ""
    finally:
        os.kill(child.pid, signal.SIGKILL)
        child.wait()
    assert snapshot() != before  # the dead manager left a pod behind

    m = make_manager(base, rootfs)
    report = m.recover()
    try:
        if mode == "mid":
            assert len(report.rolled_back) == 1 and report.sandboxes == ()
            assert m.list_sandboxes() == []
        else:
            assert len(report.sandboxes) == 1 and len(report.containers) == 2
            [sb] = m.list_sandboxes()
            assert sb.ip.startswith("10.88.")
            app, half = m.list_containers()
            assert app.state == ContainerState.CONTAINER_RUNNING
            assert half.state == ContainerState.CONTAINER_CREATED
            assert m.exec_sync(app.id, ["echo", "adopted"], timeout=10).stdout == b"adopted\n"
            m.stop_container(app.id, 0)
            assert m.container_status(app.id).exit_code == 137
        assert report.errors == ()
        m.remove_all()
    finally:
        m.close()
    assert leftovers(base, m) == []
    assert leaked(before) == []
