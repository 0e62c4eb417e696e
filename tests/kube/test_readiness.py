"""A kube container's readiness read back by a later process: the probe recorded in the
container's annotation, run once by ``pod wait --for ready`` (``podkit.kube.readiness``)."""

from __future__ import annotations

import json

import attrs
import pytest

from podkit.errors import InvalidArgumentError
from podkit.kube import ProbeSpec
from podkit.kube.lifecycle import config_for
from podkit.kube.readiness import (
    READINESS_ANNOTATION,
    probe_from_json,
    probe_to_json,
    ready_now,
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


def test_ready_now_runs_the_probe_once() -> None:
    code = [1]
    m, c = _played(code, exec_probe("test", "-f", "/ready"))
    [sb] = m.list_sandboxes()
    assert ready_now(m, sb, c) is False
    code[0] = 0
    assert ready_now(m, sb, c) is True
    assert [call for call in m.calls if call[0] == "exec_sync"] == [("exec_sync", c.id)] * 2


def test_no_probe_is_ready_and_the_initial_delay_is_waited() -> None:
    m, c = _played([1], None)
    [sb] = m.list_sandboxes()
    assert ready_now(m, sb, c) is True
    m2, c2 = _played([0], attrs.evolve(exec_probe("true"), initial_delay_seconds=30))
    [sb2] = m2.list_sandboxes()
    started = c2.started_at / 1e9
    assert ready_now(m2, sb2, c2, now=lambda: started + 29) is False
    assert not any(call[0] == "exec_sync" for call in m2.calls)  # not run before the delay
    assert ready_now(m2, sb2, c2, now=lambda: started + 30) is True


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

    with pytest.raises(WaitTimeoutError, match=r"pod 'web': not ready after 0\.2s"):
        wait_for(Open, "web", "", "ready", 0.2,  # type: ignore[arg-type]
                 sleep=lambda s: None)
    assert wait_for(Open, "web", "", "running", 1).pod is not None  # type: ignore[arg-type]
    code[0] = 0
    assert wait_for(Open, "web", "", "ready", 1).pod is not None  # type: ignore[arg-type]
