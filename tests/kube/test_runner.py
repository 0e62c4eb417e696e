"""``podkit.kube`` play/down over ``FakePodManager`` with a stepping clock: existence checks,
pull policies, init containers, restarts with the kubelet's back-off, probes, hooks, undo."""

from __future__ import annotations

from pathlib import Path

import attrs
import pytest

from podkit.container import ContainerConfig
from podkit.errors import AlreadyExistsError, InvalidArgumentError, NotFoundError
from podkit.kube import POD_IP_PLACEHOLDER, VolumePlan
from podkit.kube.lifecycle import backoff_delay, config_for, log_path_for, should_restart
from podkit.kube.runner import PlayTimeoutError, PodFailedError, down, find_pods, play
from podkit.pods.testing import FakePodManager
from podkit.runtime import ExecResult
from podkit.sandbox import ContainerFilter, ContainerState

from .play_support import FakeClock, FakeStore, ctr, exec_probe, pod


def _mgr(**kw: object) -> FakePodManager:
    return FakePodManager(networks=["fake"], **kw)  # type: ignore[arg-type]


def _containers(m: FakePodManager) -> list[tuple[str, int, str]]:
    return [(c.config.metadata.name, c.config.metadata.attempt, c.state.name)
            for c in m.list_containers(ContainerFilter())]


# -- pure rules ---------------------------------------------------------------------------


def test_backoff_doubles_from_10s_to_300s() -> None:
    assert [backoff_delay(n) for n in range(7)] == [10, 20, 40, 80, 160, 300, 300]
    assert backoff_delay(100) == 300


@pytest.mark.parametrize(("policy", "code", "restart"), [
    ("Always", 0, True), ("Always", 1, True), ("OnFailure", 0, False),
    ("OnFailure", 2, True), ("Never", 0, False), ("Never", 137, False)])
def test_should_restart(policy: str, code: int, restart: bool) -> None:
    assert should_restart(policy, code) is restart


def test_log_path_and_pod_ip_per_attempt() -> None:
    plan = ctr("web", envs=[("IP", POD_IP_PLACEHOLDER), ("URL", f"http://{POD_IP_PLACEHOLDER}/"),
                            ("X", "y")])
    cfg = config_for(plan, 3, "10.1.2.3")
    assert cfg.log_path == "web/3.log" and cfg.metadata.attempt == 3
    assert [(e.key, e.value) for e in cfg.envs] == [
        ("IP", "10.1.2.3"), ("URL", "http://10.1.2.3/"), ("X", "y")]
    assert log_path_for(attrs.evolve(plan.config, log_path="custom.txt"), 2) == "custom.txt"


def test_pod_ip_in_command_and_args() -> None:
    plan = ctr("web", command=("echo", f"ip={POD_IP_PLACEHOLDER}"))
    plan = attrs.evolve(plan, config=attrs.evolve(
        plan.config, args=[POD_IP_PLACEHOLDER, "$(OTHER)", "plain"]))
    cfg = config_for(plan, 0, "10.1.2.3")
    assert list(cfg.command) == ["echo", "ip=10.1.2.3"]
    assert list(cfg.args) == ["10.1.2.3", "$(OTHER)", "plain"]


# -- play and down ------------------------------------------------------------------------


def test_play_and_down_are_the_packages_library_face() -> None:
    import podkit.kube
    from podkit.kube import runner

    for name in ("play", "down", "PlayResult", "PodResult", "DownResult", "PodFailedError",
                 "PlayTimeoutError"):
        assert getattr(podkit.kube, name) is getattr(runner, name)
        assert name in podkit.kube.__all__


def test_play_starts_labelled_pod_and_refuses_a_second_play() -> None:
    m, fc = _mgr(), FakeClock()
    plan = pod("web", apps=[ctr("a"), ctr("b")])
    result = play(m, [plan], clock=fc.clock)
    [p] = result.pods
    assert (p.name, p.namespace, p.status) == ("web", "default", "Running")
    assert p.ip.startswith("10.88.0.") and [c.name for c in p.containers] == ["a", "b"]
    assert all(c.state == "running" for c in p.containers)
    [sb] = find_pods(m, plan)
    assert sb.config.labels["io.kubernetes.pod.uid"] == plan.uid
    with pytest.raises(AlreadyExistsError, match=r"pod default/web .* exists: sandbox"):
        play(m, [plan], clock=fc.clock)
    assert len(m.list_sandboxes()) == 1
    again = play(m, [plan], replace=True, clock=fc.clock)
    assert [s.id for s in m.list_sandboxes()] == [again.pods[0].sandbox_id] != [sb.id]
    assert p.to_json()["containers"][0]["restart_count"] == 0  # type: ignore[index]


def test_down_is_idempotent_and_runs_pre_stop() -> None:
    calls: list[list[str]] = []
    m = _mgr(exec_handler=lambda id, cmd, t: calls.append(cmd) or ExecResult(exit_code=0))
    plan = pod("web", apps=[ctr("a", pre_stop=("sh", "-c", "echo bye"))])
    play(m, [plan], clock=FakeClock().clock)
    first = down(m, [plan])
    assert len(first.removed) == 1 and "removed sandbox" in first.notes[0]
    assert calls == [["sh", "-c", "echo bye"]]
    assert m.list_sandboxes() == [] and m.list_containers() == []
    second = down(m, [plan])
    assert second.removed == () and second.notes == (
        "pod default/web: not running (nothing to remove)",)


def test_pull_policies() -> None:
    pulled: list[str] = []
    store = FakeStore({"localhost/have:1"})
    m = _mgr(images=store)
    never = pod("a", apps=[ctr("c", image="localhost/missing:1", pull="Never")])
    with pytest.raises(NotFoundError, match=r"container 'c' image 'localhost/missing:1'.*"
                       r"imagePullPolicy is Never \(ErrImageNeverPull\)"):
        play(m, [never], pull=pulled.append, clock=FakeClock().clock)
    assert m.list_sandboxes() == [] and pulled == []

    plan = pod("b", apps=[ctr("have", image="localhost/have:1"),
                          ctr("miss", image="localhost/missing:1"),
                          ctr("always", image="localhost/have:1", pull="Always")])
    play(m, [plan], pull=pulled.append, clock=FakeClock().clock)
    assert pulled == ["localhost/missing:1", "localhost/have:1"]


def test_a_failure_while_making_the_pod_undoes_it(tmp_path: Path) -> None:
    m = _mgr()
    vols = (VolumePlan(name="data", kind="emptyDir", host_path=str(tmp_path / "p" / "data")),
            VolumePlan(name="host", kind="hostPath", host_path=str(tmp_path / "made"),
                       host_path_type="DirectoryOrCreate"))
    plan = pod("web", apps=[ctr("ok"), ctr("bad")], volumes=vols)
    create = m.create_container

    def failing(sandbox_id: str, config: ContainerConfig) -> str:
        if config.metadata.name == "bad":
            raise InvalidArgumentError("container 'bad': no such rootfs")
        return create(sandbox_id, config)

    m.create_container = failing  # type: ignore[method-assign]
    with pytest.raises(InvalidArgumentError, match="no such rootfs"):
        play(m, [plan], clock=FakeClock().clock)
    assert m.list_sandboxes() == [] and m.list_containers() == []
    assert not (tmp_path / "p").exists()  # the emptyDir and the pod's volume dir
    assert not (tmp_path / "made").exists()  # a hostPath this play made, still empty

    vols = (VolumePlan(name="host", kind="hostPath", host_path=str(tmp_path / "nope"),
                       host_path_type="Directory"),)
    before = len(m.calls)
    with pytest.raises(InvalidArgumentError, match=r"volume 'host'.*does not exist"):
        play(m, [pod("web", volumes=vols)], clock=FakeClock().clock)
    assert m.list_sandboxes() == [] and len(m.calls) == before  # no sandbox at all


def test_run_as_non_root_refuses_a_root_user() -> None:
    m = _mgr()
    plan = pod("web", apps=[ctr("app", run_as_non_root=True)])
    with pytest.raises(InvalidArgumentError, match="runAsNonRoot is set and the image will "
                       "run as root"):
        play(m, [plan], clock=FakeClock().clock)
    assert m.list_sandboxes() == [] and m.list_containers() == []


def _exit_running(m: FakePodManager, name: str, code: int) -> None:
    for c in m.list_containers(ContainerFilter(state=ContainerState.CONTAINER_RUNNING)):
        if c.config.metadata.name == name:
            m.exit(c.id, code)


def test_init_containers_run_in_order_before_the_apps() -> None:
    m = _mgr()
    order: list[str] = []

    def finish(_: float) -> None:
        for c in m.list_containers(ContainerFilter(state=ContainerState.CONTAINER_RUNNING)):
            if c.config.metadata.name.startswith("init"):
                order.append(c.config.metadata.name)
                m.exit(c.id, 0)

    plan = pod("web", init=[ctr("init1"), ctr("init2")], apps=[ctr("app")])
    result = play(m, [plan], clock=FakeClock(finish).clock)
    assert order == ["init1", "init2"]
    assert [(c.name, c.init, c.state, c.exit_code) for c in result.pods[0].containers] == [
        ("init1", True, "exited", 0), ("init2", True, "exited", 0),
        ("app", False, "running", None)]


def test_failing_init_container_leaves_the_pod_unless_rm_on_failure() -> None:
    m = _mgr()
    fc = FakeClock(lambda _: _exit_running(m, "init", 3))
    plan = pod("job", init=[ctr("init")], policy="Never")
    with pytest.raises(PodFailedError, match="pod default/job init container 'init': exited "
                       "with code 3") as info:
        play(m, [plan], wait=True, clock=fc.clock)
    assert [p.status for p in info.value.result.pods] == ["Failed"]
    assert len(m.list_sandboxes()) == 1 and _containers(m) == [("init", 0, "CONTAINER_EXITED")]
    down(m, [plan])
    with pytest.raises(PodFailedError):
        play(m, [plan], wait=True, rm_on_failure=True, clock=fc.clock)
    assert m.list_sandboxes() == []


def test_init_container_retried_with_back_off_until_it_passes() -> None:
    m = _mgr()
    codes = [1, 1, 0]

    def finish(_: float) -> None:
        if any(c.config.metadata.name == "init" for c in m.list_containers(
                ContainerFilter(state=ContainerState.CONTAINER_RUNNING))):
            _exit_running(m, "init", codes.pop(0))

    fc = FakeClock(finish)
    plan = pod("web", init=[ctr("init")], policy="Always")
    result = play(m, [plan], wait=True, timeout=600, clock=fc.clock)
    assert [s for s in fc.slept if s >= 10] == [10, 20]
    init = result.pods[0].containers[0]
    assert (init.restarts, init.exit_code) == (2, 0)


def test_init_container_back_off_stops_at_the_timeout() -> None:
    m = _mgr()
    fc = FakeClock(lambda _: _exit_running(m, "init", 1))
    with pytest.raises(PlayTimeoutError, match=r"init container 'init': exited with code 1.*"
                       "next try after back-off 40s"):
        play(m, [pod("web", init=[ctr("init")], policy="Always")], wait=True, timeout=60,
             clock=fc.clock)
    assert len(m.list_sandboxes()) == 1  # left for inspection


def test_wait_restarts_an_exited_container_with_back_off() -> None:
    m = _mgr(exec_handler=lambda id, cmd, t: ExecResult(
        exit_code=0 if m.container_status(id).config.metadata.attempt else 1))
    crashes = [True]

    def crash(_: float) -> None:
        if crashes:
            crashes.pop()
            _exit_running(m, "app", 2)

    fc = FakeClock(crash)
    plan = pod("web", apps=[ctr("app", readiness=exec_probe("ready", period_seconds=1))])
    result = play(m, [plan], wait=True, timeout=120, clock=fc.clock)
    [app] = result.pods[0].containers
    assert (app.restarts, app.state, result.pods[0].status) == (1, "running", "Ready")
    assert sum(fc.slept) >= 10
    [c] = m.list_containers()  # the dead attempt is removed once the new one runs
    assert (c.config.metadata.attempt, c.config.log_path) == (1, "app/1.log")


def test_wait_for_readiness_and_timeout_naming_the_probe() -> None:
    ready = [False]
    m = _mgr(exec_handler=lambda id, cmd, t: ExecResult(exit_code=0 if ready[0] else 1,
                                                        stdout=b"not yet"))
    probe = exec_probe("check", period_seconds=1)
    plan = pod("web", apps=[ctr("app", readiness=probe)])
    with pytest.raises(PlayTimeoutError, match=r"pod default/web to be Ready: container "
                       r"'app': running, readiness probe Failure \(exit code 1: not yet\)"):
        play(m, [plan], wait=True, timeout=5, clock=FakeClock().clock)
    down(m, [plan])
    fc = FakeClock(lambda t: ready.__setitem__(0, t > 1003))
    result = play(m, [plan], wait=True, timeout=30, clock=fc.clock)
    assert result.pods[0].status == "Ready"


def test_liveness_failure_restarts_the_container() -> None:
    m = _mgr(exec_handler=lambda id, cmd, t: ExecResult(exit_code=1))
    probe = exec_probe("alive", period_seconds=1, failure_threshold=2)
    plan = pod("web", apps=[ctr("app", liveness=probe, readiness=probe)])
    with pytest.raises(PlayTimeoutError, match="liveness probe Failure"):
        play(m, [plan], wait=True, timeout=25, clock=FakeClock().clock)
    [c] = m.list_containers()
    assert c.config.metadata.attempt >= 1


def test_jobs_succeed_or_fail_by_exit_code() -> None:
    m = _mgr()
    fc = FakeClock(lambda _: _exit_running(m, "app", 0))
    result = play(m, [pod("job", policy="OnFailure")], wait=True, clock=fc.clock)
    assert result.pods[0].status == "Succeeded"
    fc = FakeClock(lambda _: _exit_running(m, "app", 4))
    with pytest.raises(PodFailedError, match="pod default/never failed: container 'app': "
                       "exited with code 4"):
        play(m, [pod("never", policy="Never")], wait=True, clock=fc.clock)


def test_failing_post_start_hook_kills_the_container() -> None:
    m = _mgr(exec_handler=lambda id, cmd, t: ExecResult(exit_code=7, stderr=b"boom"))
    plan = pod("web", apps=[ctr("app", post_start=("hook",))], policy="Never")
    with pytest.raises(PodFailedError, match=r"postStart hook failed: \['hook'\] exited 7: "
                       "boom"):
        play(m, [plan], wait=True, clock=FakeClock().clock)


def test_an_interrupt_removes_what_play_made(tmp_path: Path) -> None:
    m = _mgr()

    def interrupt(_: float) -> None:
        raise KeyboardInterrupt

    vol = VolumePlan(name="data", kind="emptyDir", host_path=str(tmp_path / "b" / "data"))
    never_ready = exec_probe("check", period_seconds=1)
    plans = [pod("a"), pod("b", apps=[ctr("app", readiness=never_ready)], volumes=(vol,))]
    m.exec_handler = lambda id, cmd, t: ExecResult(exit_code=1)
    with pytest.raises(KeyboardInterrupt):
        play(m, plans, wait=True, clock=FakeClock(interrupt).clock)
    assert m.list_sandboxes() == [] and m.list_containers() == []
    assert not (tmp_path / "b").exists()


def test_a_failed_pull_names_the_pod_and_keeps_its_kind() -> None:
    def refuse(ref: str) -> None:
        raise NotFoundError(f"manifest unknown: {ref}")

    m = _mgr(images=FakeStore())
    plan = pod("web", apps=[ctr("app", image="localhost/gone:1")])
    with pytest.raises(NotFoundError, match=r"pod default/web \(test.yaml#0 \(Pod/web\)\) "
                       r"container 'app' image 'localhost/gone:1': pull \(IfNotPresent\): "
                       "manifest unknown: localhost/gone:1"):
        play(m, [plan], pull=refuse, clock=FakeClock().clock)
    assert m.list_sandboxes() == []
