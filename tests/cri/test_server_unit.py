"""Unit tests of the reference server's pure parts (no root, no grpc server)."""

from __future__ import annotations

import socket
import threading
import time
from pathlib import Path

import pytest

from podkit.cri import api_pb2 as pb
from podkit.cri.service import (
    UnimplementedError,
    claim_socket,
    status_code_name,
)
from podkit.cri.service.base import repo
from podkit.errors import (
    AlreadyExistsError,
    ConflictError,
    InvalidArgumentError,
    NotFoundError,
    PodkitError,
)
from podkit.image import ImageNotFoundError
from podkit.runtime.errors import NotRunningError, RuntimeTimeoutError


@pytest.mark.parametrize(("exc", "code"), [
    (NotFoundError("x"), "NOT_FOUND"),
    (ImageNotFoundError("x"), "NOT_FOUND"),
    (AlreadyExistsError("x"), "ALREADY_EXISTS"),
    (InvalidArgumentError("x"), "INVALID_ARGUMENT"),
    (ConflictError("x"), "FAILED_PRECONDITION"),
    (NotRunningError("x"), "FAILED_PRECONDITION"),
    (RuntimeTimeoutError("x"), "DEADLINE_EXCEEDED"),
    (UnimplementedError("x"), "UNIMPLEMENTED"),
    (PodkitError("x"), "UNKNOWN"),
])
def test_status_codes(exc: Exception, code: str) -> None:
    assert status_code_name(exc) == code


@pytest.mark.parametrize(("name", "want"), [
    ("docker.io/library/busybox:1.36", "docker.io/library/busybox"),
    ("localhost:5000/a/b:t", "localhost:5000/a/b"),
    ("localhost:5000/a/b@sha256:00", "localhost:5000/a/b"),
    ("localhost:5000/a", "localhost:5000/a"),
])
def test_repository(name: str, want: str) -> None:
    assert repo(name) == want


def test_claim_socket(tmp_path: Path) -> None:
    path = tmp_path / "s.sock"
    claim_socket(path)  # nothing there
    with socket.socket(socket.AF_UNIX) as s:
        s.bind(str(path))
    assert path.exists()
    claim_socket(path)  # stale: nobody listens
    assert not path.exists()
    with socket.socket(socket.AF_UNIX) as s:
        s.bind(str(path))
        s.listen()
        with pytest.raises(ConflictError, match="another server is listening"):
            claim_socket(path)
    path.unlink()
    path.write_text("")
    with pytest.raises(InvalidArgumentError, match="not a socket"):
        claim_socket(path)
    assert path.exists()


def test_importing_podkit_cri_needs_no_grpc() -> None:
    import subprocess
    import sys

    code = ("import sys; sys.modules['grpc'] = None; import podkit.cri; "
            "import podkit.cri.service as s; print(s.CRIService.__name__)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "CRIService"


def test_events_stream_that_falls_behind_is_ended(monkeypatch: pytest.MonkeyPatch) -> None:
    from podkit.cri import service as srv
    from podkit.cri.service import events

    monkeypatch.setattr(events, "EVENTS_BACKLOG", 2)
    svc = object.__new__(srv.CRIService)  # only the events part is used here
    svc.events = events.EventBus()
    deadline = time.monotonic() + 30  # a broken stream fails the test instead of hanging
    stream = svc.GetContainerEvents(pb.GetEventsRequest(), lambda: time.monotonic() < deadline)
    got: list[str] = []
    reader = threading.Thread(target=lambda: got.append(next(stream).container_id))
    reader.start()  # the stream subscribes when it is first read
    while not svc.events.subscribers:
        time.sleep(0.01)
    svc.events.publish(pb.ContainerEventResponse(container_id="a"))
    reader.join()
    assert got == ["a"]  # a subscriber that keeps up gets everything
    for name in "bcd":  # one more than the backlog while the stream does not read
        svc.events.publish(pb.ContainerEventResponse(container_id=name))
    assert svc.events.subscribers == 0
    assert [next(stream).container_id for _ in range(2)] == ["b", "c"]
    with pytest.raises(srv.EventsOverflowError, match="behind") as exc:
        next(stream)
    assert status_code_name(exc.value) == "RESOURCE_EXHAUSTED"


def test_service_takes_a_manager_made_for_it(tmp_path: Path) -> None:
    """The manager resolves container images in the service's store, with its rootfs mode and
    network loader: the service checks that and never changes the manager's settings."""
    from podkit.cri.service import CRIService
    from podkit.image import ImageStore
    from podkit.pods.testing import FakePodManager

    store = ImageStore(tmp_path / "images")
    with pytest.raises(InvalidArgumentError, match="no image store"):
        CRIService(FakePodManager(), store)
    m = FakePodManager(tmp_path / "root", tmp_path / "state", images=store, rootfs_mode="copy")
    CRIService(m, store, rootfs_mode="copy")
    CRIService(m, ImageStore(tmp_path / "images"))  # the same store, another object
    with pytest.raises(InvalidArgumentError, match="another store"):
        CRIService(m, ImageStore(tmp_path / "other"))
    with pytest.raises(InvalidArgumentError, match="rootfs_mode 'overlay': the manager makes"):
        CRIService(m, store, rootfs_mode="overlay")
    with pytest.raises(InvalidArgumentError, match="rootfs_mode 'bogus'"):
        CRIService(m, store, rootfs_mode="bogus")
    with pytest.raises(InvalidArgumentError, match="network_loader: give it to the manager"):
        CRIService(m, store, network_loader=lambda: None)
    assert (m.images, m.rootfs_mode, m.network_loader) == (store, "copy", None)  # untouched
    assert not (tmp_path / "state").exists()  # no files of its own


def test_stopped_never_overtakes_started(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                         ) -> None:
    """The exit monitor may see a container exit while StartContainer is still announcing it:
    subscribers still get STARTED before STOPPED."""
    from cri.helpers import container_config, pod_config
    from podkit.cri.service import CRIService
    from podkit.image import ImageStore
    from podkit.pods.testing import FakeNetworks, FakePodManager

    store = ImageStore(tmp_path / "images")
    m = FakePodManager(images=store, networks=FakeNetworks())
    svc = CRIService(m, store)
    events = svc.events.subscribe()
    sid = svc.RunPodSandbox(pb.RunPodSandboxRequest(config=pod_config())).pod_sandbox_id
    cid = svc.CreateContainer(pb.CreateContainerRequest(
        pod_sandbox_id=sid, config=container_config("c"))).container_id
    events.queue.clear()  # only the start and the exit matter here
    announcing = threading.Event()
    real_status = m.sandbox_status

    def slow_status(id: str) -> object:
        if threading.current_thread() is starter and not announcing.is_set():
            announcing.set()
            time.sleep(0.3)  # STARTED is being built: the exit is noticed meanwhile
        return real_status(id)

    monkeypatch.setattr(m, "sandbox_status", slow_status)
    starter = threading.Thread(
        target=svc.StartContainer, args=(pb.StartContainerRequest(container_id=cid),))
    starter.start()
    assert announcing.wait(10)
    m.exit(cid, 3)
    svc.poll_exits()
    starter.join()
    got = [events.get_nowait() for _ in range(events.qsize())]
    assert [(e.container_id, e.container_event_type) for e in got] == [
        (cid, pb.CONTAINER_STARTED_EVENT), (cid, pb.CONTAINER_STOPPED_EVENT)]


def test_exec_argv_with_nul_is_refused_before_the_manager() -> None:
    """A NUL in ExecSync's or Exec's cmd used to be cut silently by the C string (exit 0)."""
    from podkit.cri.service import CRIService

    class _NoManager:
        def __getattr__(self, name: str) -> object:
            raise AssertionError(f"the manager was called: {name}")

    service = CRIService.__new__(CRIService)
    service.manager = _NoManager()  # type: ignore[assignment]
    with pytest.raises(InvalidArgumentError, match=r"cmd\[2\] 'true\\x00; x': contains a NUL"):
        service.ExecSync(pb.ExecSyncRequest(container_id="c", cmd=["sh", "-c", "true\0; x"]))
    with pytest.raises(InvalidArgumentError, match="cmd: required"):
        service.ExecSync(pb.ExecSyncRequest(container_id="c"))
