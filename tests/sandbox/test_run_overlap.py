"""run_sandbox's overlap (no real parts): CNI ADD runs alongside the pod files and the pause
(``pods.steps.network_alongside``); a failure of either side stops the other's next step,
waits for what is in flight and raises the first failure with the other as a note; pods with
network sysctls keep the pause after ADD (``pods.network.network_first``)."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from podkit import oci
from podkit.errors import PodkitError
from podkit.pods.config import LinuxPodSandboxConfig, PodSandboxMetadata, SandboxConfig
from podkit.pods.network import network_first
from podkit.pods.pause import PauseRootfs
from podkit.pods.sandbox_spec import build_sandbox_spec
from podkit.pods.steps import SandboxSteps, Step, network_alongside
from podkit.runtime.testing import FakeRuntime
from podkit.sandbox import PauseConfig, Sandbox

from ._fakes import FakeSupervisor

WAIT = 10.0  # a guard against a hang, never reached when the code is right


def sandbox(sysctls: dict[str, str] | None = None) -> Sandbox:
    cfg = SandboxConfig(metadata=PodSandboxMetadata(name="p"),
                        linux=LinuxPodSandboxConfig(sysctls=sysctls or {}))
    return Sandbox(id="c" * 64, name="n", config=cfg, created_at=0)


def step(do: Callable[[Sandbox], None]) -> Step:
    return Step("network", do, lambda sb: None)


class NetFailed(PodkitError):
    """The network side's fault."""


class SideFailed(PodkitError):
    """The files/pause side's fault."""


def test_both_sides_run_at_once() -> None:
    """ADD waits for the pause to start and the pause for ADD to start: serial would hang."""
    add_started, pause_started = threading.Event(), threading.Event()
    done: list[str] = []

    def add(sb: Sandbox) -> None:
        add_started.set()
        assert pause_started.wait(WAIT)
        done.append("network")

    def pause(sb: Sandbox) -> None:
        assert add_started.wait(WAIT)
        pause_started.set()
        done.append("pause")

    network_alongside(sandbox(), [add], [(lambda sb: done.append("files"), 0), (pause, 0)])
    assert sorted(done) == ["files", "network", "pause"]
    assert done.index("files") < done.index("pause")


def test_network_failing_first_stops_the_next_step_and_waits_for_the_one_in_flight() -> None:
    started, failed = threading.Event(), threading.Event()
    done: list[str] = []

    def add(sb: Sandbox) -> None:
        assert started.wait(WAIT)
        failed.set()
        raise NetFailed("add")

    def files(sb: Sandbox) -> None:
        started.set()
        assert failed.wait(WAIT)
        time.sleep(0.01)  # the failure is recorded meanwhile
        done.append("files")

    with pytest.raises(NetFailed) as info:
        network_alongside(sandbox(), [add], [(files, 0), (lambda sb: done.append("pause"), 0)])
    assert done == ["files"]  # in flight: finished; the pause: never started
    assert not getattr(info.value, "__notes__", [])


def test_side_failing_first_waits_for_the_network_in_flight() -> None:
    failed = threading.Event()
    done: list[str] = []

    def add(sb: Sandbox) -> None:
        assert failed.wait(WAIT)
        done.append("network")

    def pause(sb: Sandbox) -> None:
        failed.set()
        raise SideFailed("pause")

    with pytest.raises(SideFailed):
        network_alongside(sandbox(), [add], [(pause, 0)])
    assert done == ["network"]  # ADD completed before the error reached the caller


@pytest.mark.parametrize("first", ["network", "side"])
def test_both_failing_raise_the_first_with_the_other_as_a_note(first: str) -> None:
    started, net_failed, side_failed = threading.Event(), threading.Event(), threading.Event()

    def add(sb: Sandbox) -> None:
        assert started.wait(WAIT)  # a side step not yet begun would not begin at all
        if first == "side":
            assert side_failed.wait(WAIT)
            time.sleep(0.01)
        net_failed.set()
        raise NetFailed("add")

    def pause(sb: Sandbox) -> None:
        started.set()
        if first == "network":
            assert net_failed.wait(WAIT)
            time.sleep(0.01)
        side_failed.set()
        raise SideFailed("pause")

    with pytest.raises(NetFailed if first == "network" else SideFailed) as info:
        network_alongside(sandbox(), [add], [(pause, 0)])
    [note] = info.value.__notes__
    if first == "network":
        assert note == "the pod files and pause meanwhile failed too: pause"
    else:
        assert note == "the network setup meanwhile failed too: add"


def test_an_interrupt_is_raised_before_an_earlier_failure() -> None:
    started, net_failed = threading.Event(), threading.Event()

    def add(sb: Sandbox) -> None:
        assert started.wait(WAIT)
        net_failed.set()
        raise NetFailed("add")

    def pause(sb: Sandbox) -> None:
        started.set()
        assert net_failed.wait(WAIT)
        time.sleep(0.01)
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt) as info:
        network_alongside(sandbox(), [add], [(pause, 0)])
    assert info.value.__notes__ == ["the network setup meanwhile failed too: add"]


def test_a_step_waits_for_the_netns_and_not_for_add() -> None:
    """The pause (needs 1) starts once the netns (the first network step) exists, while ADD
    (the second) still waits for it."""
    done: list[str] = []
    pause_started = threading.Event()

    def add(sb: Sandbox) -> None:
        assert pause_started.wait(WAIT)
        done.append("network")

    def pause(sb: Sandbox) -> None:
        pause_started.set()
        done.append("pause")

    network_alongside(sandbox(), [lambda sb: done.append("netns"), add],
                      [(lambda sb: done.append("files"), 0), (pause, 1)])
    assert done.index("netns") < done.index("pause") < done.index("network")


def test_a_failed_netns_stops_both_sides() -> None:
    """The netns fails: ADD is not run, nor the pause that waits for the netns; the files
    step under way completes first."""
    done: list[str] = []
    started, netns_failed = threading.Event(), threading.Event()

    def netns(sb: Sandbox) -> None:
        assert started.wait(WAIT)
        netns_failed.set()
        raise NetFailed("netns")

    def files(sb: Sandbox) -> None:
        started.set()
        assert netns_failed.wait(WAIT)
        done.append("files")

    with pytest.raises(NetFailed, match="netns"):
        network_alongside(sandbox(), [netns, lambda sb: done.append("network")],
                          [(files, 0), (lambda sb: done.append("pause"), 1)])
    assert done == ["files"]


def test_a_failed_side_stops_the_network_before_add() -> None:
    """The files fail while the netns is being made: ADD is not started."""
    done: list[str] = []
    files_failed = threading.Event()

    def netns(sb: Sandbox) -> None:
        assert files_failed.wait(WAIT)
        time.sleep(0.01)  # the failure is recorded meanwhile
        done.append("netns")

    def files(sb: Sandbox) -> None:
        files_failed.set()
        raise SideFailed("files")

    with pytest.raises(SideFailed):
        network_alongside(sandbox(), [netns, lambda sb: done.append("network")], [(files, 0)])
    assert done == ["netns"]


@pytest.mark.parametrize(("sysctls", "first"), [
    ({}, False),
    ({"kernel.shm_rmid_forced": "1"}, False),
    ({"network.x": "1"}, False),
    ({"net.ipv4.ip_unprivileged_port_start": "0"}, True),
    ({"kernel.msgmax": "1", "net.ipv4.conf.eth0.forwarding": "1"}, True),
    ({"net/ipv4/conf/eth0.100/forwarding": "1"}, True),
])
def test_network_sysctls_keep_the_pause_after_add(sysctls: dict[str, str], first: bool) -> None:
    assert network_first(sandbox(sysctls).config) is first


def test_the_pause_bundle_is_written_without_fsync(tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """The pause's config.json is the spec the builder makes, written with no fsync (nothing
    needs it after a power loss; containerd's bundles have none either)."""
    rootfs = tmp_path / "rootfs"
    rootfs.mkdir()
    rt, pause = FakeRuntime(), PauseConfig(rootfs=str(rootfs), args=("sleep", "9"), env=("A=1",))
    steps = SandboxSteps(root_dir=tmp_path / "root", supervisor=FakeSupervisor(rt), runtime=rt,
                         pause=PauseRootfs(pause, None),
                         networks=lambda: None, oom_score_floor=0)
    sb = sandbox({"kernel.shm_rmid_forced": "1"})
    sb.netns_path = "/run/netns/x"
    steps.sandbox_dir(sb.id).mkdir(parents=True)
    synced: list[int] = []
    monkeypatch.setattr(os, "fsync", synced.append)
    steps.write_pause_bundle(sb)
    assert synced == []
    written = oci.Spec.load(steps.sandbox_dir(sb.id) / "bundle" / "config.json")
    want = build_sandbox_spec(sb.config, id=sb.id, files=steps.files(sb), args=pause.args,
                              env=pause.env, rootfs=str(rootfs), netns_path=sb.netns_path,
                              oom_score_floor=0)
    assert written == want
    assert sb.cgroups_path and sb.cgroups_path == want.linux.cgroups_path  # type: ignore[union-attr]
