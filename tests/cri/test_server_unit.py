"""Unit tests of the reference server's pure parts (no root, no grpc server)."""

from __future__ import annotations

import socket
import threading
import time
from pathlib import Path

import pytest

from podkit.cri import api_pb2 as pb
from podkit.cri.server import (
    ContainerImage,
    UnimplementedError,
    _legacy_record,
    _repo,
    claim_socket,
    status_code_name,
)
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


def test_server_record_of_an_older_version_loads() -> None:
    # per-container records of older servers (recover() hands them to the manager); the
    # oldest kept the CRI stop signal, which lives in the manager's config now
    old = {"container_id": "c1", "image": "busybox", "rootfs_id": "k", "rootfs": "/r",
           "stop_signal": pb.SIGTERM}
    assert _legacy_record(old) == ContainerImage(container_id="c1", image="busybox",
                                                   rootfs_id="k", rootfs="/r")
    with pytest.raises(TypeError, match="not a JSON object: list"):
        _legacy_record(["c1"])


@pytest.mark.parametrize(("name", "repo"), [
    ("docker.io/library/busybox:1.36", "docker.io/library/busybox"),
    ("localhost:5000/a/b:t", "localhost:5000/a/b"),
    ("localhost:5000/a/b@sha256:00", "localhost:5000/a/b"),
    ("localhost:5000/a", "localhost:5000/a"),
])
def test_repository(name: str, repo: str) -> None:
    assert _repo(name) == repo


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
            "import podkit.cri.server as s; print(s.CRIService.__name__)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "CRIService"


def test_events_stream_that_falls_behind_is_ended(monkeypatch: pytest.MonkeyPatch) -> None:
    from podkit.cri import server as srv

    monkeypatch.setattr(srv, "EVENTS_BACKLOG", 2)
    svc = object.__new__(srv.CRIService)  # only the events part is used here
    svc.events = srv._Events()
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


def test_service_gives_its_store_to_a_manager_without_one(tmp_path: Path) -> None:
    """The manager resolves container images: the service hands it its store (or refuses a
    manager that resolves in another one)."""
    from podkit.cri.server import CRIService
    from podkit.image import ImageStore
    from podkit.runtime.testing import FakeRuntime
    from podkit.sandbox import SandboxManager
    from sandbox.test_manager import FakeSupervisor

    rt = FakeRuntime()
    store = ImageStore(tmp_path / "images")
    with SandboxManager(tmp_path / "root", tmp_path / "state", rt, None,
                        supervisor=FakeSupervisor(rt)) as m:
        assert m.images is None
        CRIService(m, store, rootfs_mode="copy")
        assert m.images is store and m.rootfs_mode == "copy"
        CRIService(m, ImageStore(tmp_path / "images"))  # the same store, another object
        with pytest.raises(InvalidArgumentError, match="another store"):
            CRIService(m, ImageStore(tmp_path / "other"))
        with pytest.raises(InvalidArgumentError, match="rootfs_mode 'bogus'"):
            CRIService(m, store, rootfs_mode="bogus")
        assert not (tmp_path / "state" / "cri").exists()  # no files of its own


def test_stopped_never_overtakes_started(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                         ) -> None:
    """The exit monitor may see a container exit while StartContainer is still announcing it:
    subscribers still get STARTED before STOPPED."""
    from podkit.cri.server import CRIService
    from podkit.image import ImageStore
    from podkit.runtime.testing import FakeRuntime
    from podkit.sandbox import PauseConfig, SandboxManager
    from sandbox.test_manager import FakeSupervisor, ctr, host_pod

    rootfs = tmp_path / "rootfs"
    (rootfs / "etc").mkdir(parents=True)
    rt = FakeRuntime()
    with SandboxManager(tmp_path / "root", tmp_path / "state", rt, None,
                        pause=PauseConfig(rootfs=str(rootfs)),
                        supervisor=FakeSupervisor(rt)) as m:
        svc = CRIService(m, ImageStore(tmp_path / "images"))
        events = svc.events.subscribe()
        sid = m.run_sandbox(host_pod()).id
        cid = m.create_container(sid, ctr(rootfs))
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
        rt.exit(cid, 3)
        svc.poll_exits()
        starter.join()
        got = [events.get_nowait() for _ in range(events.qsize())]
        assert [(e.container_id, e.container_event_type) for e in got] == [
            (cid, pb.CONTAINER_STARTED_EVENT), (cid, pb.CONTAINER_STOPPED_EVENT)]
        m.stop_sandbox(sid)
        m.remove_sandbox(sid)


def test_exec_argv_with_nul_is_refused_before_the_manager() -> None:
    """A NUL in ExecSync's or Exec's cmd used to be cut silently by the C string (exit 0)."""
    from podkit.cri.server import CRIService

    class _NoManager:
        def __getattr__(self, name: str) -> object:
            raise AssertionError(f"the manager was called: {name}")

    service = CRIService.__new__(CRIService)
    service.manager = _NoManager()  # type: ignore[assignment]
    with pytest.raises(InvalidArgumentError, match=r"cmd\[2\] 'true\\x00; x': contains a NUL"):
        service.ExecSync(pb.ExecSyncRequest(container_id="c", cmd=["sh", "-c", "true\0; x"]))
    with pytest.raises(InvalidArgumentError, match="cmd: required"):
        service.ExecSync(pb.ExecSyncRequest(container_id="c"))
