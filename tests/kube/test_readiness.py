"""A kube container's readiness read back by a later process: the probe recorded in the
container's annotation, run once by ``pod wait --for ready`` (``podkit.kube.readiness``)."""

from __future__ import annotations

import json

import attrs
import pytest

from podkit.errors import InvalidArgumentError
from podkit.kube import ProbeSpec
from podkit.kube.lifecycle import config_for
from podkit.kube.probes import ProbeResult
from podkit.kube.readiness import (
    INIT_ANNOTATION,
    READINESS_ANNOTATION,
    as_init,
    completed_init,
    probe_from_json,
    probe_readiness,
    probe_to_json,
)
from podkit.kube.runner import play
from podkit.pods.testing import FakePodManager
from podkit.runtime import ExecResult
from podkit.sandbox import Container

from .play_support import FakeClock, ctr, exec_probe, pod

HTTP = ProbeSpec(kind="httpGet", port=8080, path="/healthz", scheme="HTTPS",
                 http_headers=(("X-A", "1"),), initial_delay_seconds=5, period_seconds=2,
                 timeout_seconds=3, success_threshold=2, failure_threshold=4)


def test_the_probe_goes_through_json_unchanged() -> None:
    for spec in (HTTP, exec_probe("test", "-f", "/ready"), ProbeSpec(kind="tcpSocket", port=1)):
        assert probe_from_json(probe_to_json(spec), "here") == spec


@pytest.mark.parametrize(("text", "why"), [
    ("{", "Expecting"), ("[1]", "want an object"), ('{"kind": "exec", "bogus": 1}',
                                                    "want an object with fields of command"),
    ('{"kind": "exec", "http_headers": [1]}', "")])
def test_a_bad_annotation_names_the_container(text: str, why: str) -> None:
    with pytest.raises(InvalidArgumentError, match=(
            r"pod 'web' container 'app': annotation podkit.kube/readinessProbe .* is not a "
            r"probe: " + why)):
        probe_from_json(text, "pod 'web' container 'app'")


def test_config_for_records_the_readiness_probe_only() -> None:
    plain = config_for(ctr("app", liveness=HTTP), 0, "10.0.0.2")
    assert READINESS_ANNOTATION not in plain.annotations
    ready = config_for(ctr("app", readiness=HTTP), 1, "10.0.0.2")
    assert json.loads(ready.annotations[READINESS_ANNOTATION])["path"] == "/healthz"
    assert probe_from_json(ready.annotations[READINESS_ANNOTATION], "x") == HTTP


def _played(exec_code: list[int], readiness: ProbeSpec | None) -> tuple[FakePodManager,
                                                                          Container]:
    """A pod played (without --wait) on a fake manager whose execs exit ``exec_code[0]``."""
    m = FakePodManager(networks=["fake"], exec_handler=lambda id, cmd, t: ExecResult(
        exit_code=exec_code[0]))  # type: ignore[arg-type]
    kw = {"readiness": readiness} if readiness else {}
    play(m, [pod("web", apps=[ctr("app", **kw)])], clock=FakeClock().clock)
    [c] = m.list_containers()
    return m, c


def test_probe_readiness_runs_the_probe_once_and_says_why() -> None:
    code = [1]
    m, c = _played(code, exec_probe("test", "-f", "/ready"))
    [sb] = m.list_sandboxes()
    assert probe_readiness(m, sb, c) == ProbeResult(False, "exit code 1")
    code[0] = 0
    assert probe_readiness(m, sb, c) == ProbeResult(True, "exit code 0")
    assert [call for call in m.calls if call[0] == "exec_sync"] == [("exec_sync", c.id)] * 2


def test_no_probe_is_ready_and_the_initial_delay_is_waited() -> None:
    m, c = _played([1], None)
    [sb] = m.list_sandboxes()
    assert probe_readiness(m, sb, c) == ProbeResult(True, "no readiness probe")
    m2, c2 = _played([0], attrs.evolve(exec_probe("true"), initial_delay_seconds=30))
    [sb2] = m2.list_sandboxes()
    started = c2.started_at / 1e9
    assert probe_readiness(m2, sb2, c2, now=lambda: started + 29) == ProbeResult(
        False, "not run before initialDelaySeconds (30s)")
    assert not any(call[0] == "exec_sync" for call in m2.calls)  # not run before the delay
    assert probe_readiness(m2, sb2, c2, now=lambda: started + 30).ok


def test_pod_wait_asks_the_kube_check() -> None:
    from podkit._cli.pod_wait import READINESS, WaitTimeoutError, kube_readiness, wait_for

    assert kube_readiness in READINESS
    code = [1]
    m, _ = _played(code, exec_probe("test", "-f", "/ready"))

    class Open:
        def __enter__(self) -> FakePodManager:
            return m

        def __exit__(self, *exc: object) -> None:
            pass

    with pytest.raises(WaitTimeoutError) as info:
        wait_for(Open, "web", "", "ready", 0.2,  # type: ignore[arg-type]
                 sleep=lambda s: None)
    assert str(info.value) == ("pod 'web': not ready after 0.2s; it is: pod READY, app RUNNING "
                               "(readiness probe: exit code 1)")
    assert wait_for(Open, "web", "", "running", 1).pod is not None  # type: ignore[arg-type]
    code[0] = 0
    assert wait_for(Open, "web", "", "ready", 1).pod is not None  # type: ignore[arg-type]


def test_init_containers_are_marked_and_a_completed_one_does_not_count() -> None:
    from podkit._cli.pod_wait import Snapshot, reached

    m = FakePodManager(networks=["fake"])
    plan = pod("web", init=[ctr("setup")], apps=[ctr("app")])
    init_plan = as_init(plan.init_containers[0])
    assert init_plan.config.annotations[INIT_ANNOTATION] == "true"
    assert INIT_ANNOTATION not in plan.init_containers[0].config.annotations  # a copy

    sb = m.run_sandbox(plan.sandbox)
    ids = {}
    for name, cfg in (("setup", init_plan.config), ("app", plan.containers[0].config)):
        ids[name] = m.create_container(sb.id, cfg)
        m.start_container(ids[name])
    [sb] = m.list_sandboxes()

    def snap() -> Snapshot:
        return Snapshot(sb, tuple(m.list_containers()))

    m.exit(ids["setup"], 0)
    setup = m.container_status(ids["setup"])
    assert completed_init(setup) and not completed_init(m.container_status(ids["app"]))
    assert reached(snap(), "running", []) and reached(snap(), "ready", [])
    # watched by name, the init container is what it is: exited, not running
    assert not reached(Snapshot(sb, (setup,)), "running", [], container=True)
    # a failed init container is not set aside; nor is an exited app container
    bad = m.create_container(sb.id, attrs.evolve(init_plan.config, metadata=attrs.evolve(
        init_plan.config.metadata, name="bad")))
    m.start_container(bad)
    m.exit(bad, 1)
    assert not completed_init(m.container_status(bad)) and not reached(snap(), "running", [])
