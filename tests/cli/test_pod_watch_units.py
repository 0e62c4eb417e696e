"""``pod wait`` and ``pod stats`` logic over the in-memory ``FakePodManager``: the conditions,
the readiness seam, not-found and timeout outcomes, CPU percent and the stats records."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import pytest

from podkit._cli.exits import ExitCode, exit_code_for
from podkit._cli.pod_wait import Snapshot, WaitTimeoutError, reached, wait_for
from podkit._cli.pod_watch import cpu_percent, sample, stats_records
from podkit.errors import ConflictError, NotFoundError
from podkit.pods.config import ContainerConfig, ContainerMetadata, PodSandboxMetadata
from podkit.pods.testing import FakeNetworks, FakePodManager
from podkit.sandbox import Container, ContainerStats, Sandbox, SandboxConfig


def pod(fake: FakePodManager, name: str = "web", containers: tuple[str, ...] = ("a", "b"),
        start: bool = True) -> tuple[Sandbox, list[str]]:
    sb = fake.run_sandbox(SandboxConfig(metadata=PodSandboxMetadata(name=name, uid=name)))
    ids = []
    for c in containers:
        cid = fake.create_container(sb.id, ContainerConfig(
            metadata=ContainerMetadata(name=c), image="/rootfs"))
        if start:
            fake.start_container(cid)
        ids.append(cid)
    return sb, ids


def opener(fake: FakePodManager, busy: list[bool] | None = None) -> Any:
    """What ``wait_for`` calls for each look: the fake as a context manager (``busy``: each
    look pops one flag; True answers as a state dir locked by another command would)."""
    @contextlib.contextmanager
    def open_manager() -> Iterator[FakePodManager]:
        if busy and busy.pop(0):
            raise ConflictError("state dir is locked by another process")
        yield fake
    return open_manager


def snap(fake: FakePodManager, sb: Sandbox | None, ctr: str = "") -> Snapshot:
    if sb is None:
        return Snapshot(None)
    cs = [c for c in fake.list_containers() if c.sandbox_id == sb.id
          and (not ctr or c.config.metadata.name == ctr)]
    return Snapshot(fake.sandbox_status(sb.id), tuple(cs))


def test_conditions_of_a_pod() -> None:
    fake = FakePodManager(networks=FakeNetworks())
    sb, (a, b) = pod(fake)
    s = snap(fake, sb)
    assert reached(s, "running", []) and reached(s, "ready", [])
    assert not reached(s, "exited", []) and not reached(s, "deleted", [])
    fake.exit(a, 3)
    s = snap(fake, sb)
    assert not reached(s, "running", []) and not reached(s, "exited", [])
    assert "a EXITED (exit 3)" in s.describe() and "b RUNNING" in s.describe()
    fake.exit(b, 0)
    assert reached(snap(fake, sb), "exited", [])
    assert reached(Snapshot(None), "deleted", []) and not reached(Snapshot(None), "running", [])


def test_conditions_of_a_container_and_of_an_empty_pod() -> None:
    fake = FakePodManager(networks=FakeNetworks())
    sb, (a, _) = pod(fake)
    assert reached(snap(fake, sb, "a"), "running", [], container=True)
    fake.exit(a)
    assert reached(snap(fake, sb, "a"), "exited", [], container=True)
    assert reached(snap(fake, sb, "b"), "running", [], container=True)
    gone = Snapshot(fake.sandbox_status(sb.id))  # the pod is there, the container is not
    assert reached(gone, "deleted", [], container=True)
    assert not reached(gone, "exited", [], container=True)
    empty, _ = pod(fake, "empty", ())
    assert reached(snap(fake, empty), "running", [])
    assert not reached(snap(fake, empty), "exited", [])
    fake.stop_sandbox(empty.id)
    assert reached(snap(fake, empty), "exited", [])
    assert "no containers" in snap(fake, empty).describe()


def test_created_containers_are_not_running() -> None:
    fake = FakePodManager(networks=FakeNetworks())
    sb, _ = pod(fake, start=False)
    s = snap(fake, sb)
    assert not reached(s, "running", []) and not reached(s, "exited", [])
    assert "a CREATED" in s.describe()


def test_ready_asks_every_readiness_hook() -> None:
    fake = FakePodManager(networks=FakeNetworks())
    sb, _ = pod(fake)
    asked: list[str] = []

    def probe(p: Sandbox, c: Container) -> bool:
        asked.append(c.config.metadata.name)
        return c.config.metadata.name != "b"

    s = snap(fake, sb)
    assert reached(s, "running", [probe]) and asked == []  # running ignores probes
    assert not reached(s, "ready", [probe]) and asked == ["a", "b"]
    assert reached(snap(fake, sb, "a"), "ready", [probe], container=True)


def test_wait_for_returns_once_reached() -> None:
    fake = FakePodManager(networks=FakeNetworks())
    _, (a, b) = pod(fake)
    sleeps: list[float] = []

    def sleep(s: float) -> None:
        sleeps.append(s)
        fake.exit(a if len(sleeps) == 1 else b)

    got = wait_for(opener(fake), "web", "", "exited", 60, sleep=sleep)
    assert got.pod is not None and len(sleeps) == 2
    assert sleeps == sorted(sleeps)  # looks back off


def test_wait_for_skips_a_busy_state_dir() -> None:
    fake = FakePodManager(networks=FakeNetworks())
    pod(fake)
    busy = [True, True, False]
    sleeps: list[float] = []
    wait_for(opener(fake, busy), "web", "a", "running", 60, sleep=sleeps.append)
    assert len(sleeps) == 2 and busy == []


def test_wait_for_deleted_and_not_found() -> None:
    fake = FakePodManager(networks=FakeNetworks())
    sb, _ = pod(fake)

    def rm(_: float) -> None:
        fake.remove_sandbox(sb.id)

    assert wait_for(opener(fake), "web", "", "deleted", 60, sleep=rm).pod is None
    assert wait_for(opener(fake), "nope", "", "deleted", 60).pod is None
    with pytest.raises(NotFoundError, match="pod 'nope': not found") as info:
        wait_for(opener(fake), "nope", "", "running", 60)
    assert exit_code_for(info.value) == ExitCode.NOT_FOUND
    pod(fake, "web2")
    with pytest.raises(NotFoundError, match="pod 'web2' container 'zz': not found"):
        wait_for(opener(fake), "web2", "zz", "exited", 60)


def test_wait_for_timeout_says_the_state() -> None:
    fake = FakePodManager(networks=FakeNetworks())
    _, (a, _) = pod(fake)
    fake.exit(a, 2)
    with pytest.raises(WaitTimeoutError) as info:
        wait_for(opener(fake), "web", "", "ready", 0)
    assert str(info.value) == ("pod 'web': not ready after 0s; it is: pod READY, "
                               "a EXITED (exit 2), b RUNNING")
    assert exit_code_for(info.value) == ExitCode.TIMEOUT
    with pytest.raises(WaitTimeoutError, match="state dir busy"):
        wait_for(opener(fake, [True]), "web", "", "ready", 0)
    with pytest.raises(ValueError, match="'up'"):
        wait_for(opener(fake), "web", "", "up", 1)


def stats(cpu: int, t: int, cid: str = "c1") -> ContainerStats:
    return ContainerStats(id=cid, timestamp=t, cpu_usage_core_nano_seconds=cpu,
                          memory_usage_bytes=4096, memory_working_set_bytes=2048,
                          memory_rss_bytes=1024, process_count=3)


def test_cpu_percent_of_one_core() -> None:
    assert cpu_percent(stats(0, 0), stats(500_000_000, 1_000_000_000)) == 50.0
    assert cpu_percent(stats(0, 0), stats(3_000_000_000, 1_000_000_000)) == 300.0
    assert cpu_percent(None, stats(5, 5)) == 0.0
    assert cpu_percent(stats(5, 5), stats(9, 5)) == 0.0  # no time passed
    assert cpu_percent(stats(9, 0), stats(5, 5)) == 0.0  # a counter that went back


def test_stats_records_and_sample() -> None:
    before = {"c1": ("web", "p1", "app", stats(0, 0))}
    after = {"c1": ("web", "p1", "app", stats(250_000_000, 1_000_000_000)),
             "c2": ("web", "p1", "new", stats(7, 1_000_000_000, "c2"))}
    recs = stats_records(before, after)
    assert recs[0] == {
        "pod": "web", "pod_id": "p1", "container": "app", "container_id": "c1",
        "timestamp": 1_000_000_000, "cpu_usage_core_nano_seconds": 250_000_000,
        "cpu_percent": 25.0, "memory_working_set_bytes": 2048, "memory_usage_bytes": 4096,
        "memory_rss_bytes": 1024, "process_count": 3}
    assert recs[1]["cpu_percent"] == 0.0  # no earlier sample
    fake = FakePodManager(networks=FakeNetworks())
    sb, (a, b) = pod(fake)
    other, _ = pod(fake, "other", ("x",))
    fake.exit(b)
    mgr: Any = fake
    got = sample(mgr, "web")
    assert list(got) == [a] and got[a][:3] == ("web", sb.id, "a")
    others = {c.id for c in fake.list_containers() if c.sandbox_id == other.id}
    assert set(sample(mgr, "")) == {a, *others}
