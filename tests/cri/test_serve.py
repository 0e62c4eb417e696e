"""``serve()`` and ``Server`` over the in-memory pod API and a real gRPC server on a temp
socket: the lifecycle calls on the service, in order; a failed start leaves no server and no
socket; stop is final and idempotent."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from podkit.cri import CRIService, Server, serve
from podkit.cri import api_pb2 as pb
from podkit.errors import ConflictError, InvalidArgumentError
from podkit.image import ImageStore
from podkit.pods.testing import FakeNetworks, FakePodManager

grpc = pytest.importorskip("grpc")


class Noting(CRIService):
    """Notes the lifecycle calls the server makes."""

    def __init__(self, *args: Any, **kw: Any) -> None:
        super().__init__(*args, **kw)
        self.noted: list[str] = []

    def recover(self) -> list[str]:
        self.noted.append("recover")
        return super().recover()

    def start_monitor(self, interval: float = 1.0) -> None:
        self.noted.append("start_monitor")
        super().start_monitor(interval)

    def stop_monitor(self) -> None:
        self.noted.append("stop_monitor")
        super().stop_monitor()

    def close(self) -> None:
        self.noted.append("close")
        super().close()


def _service(tmp_path: Path) -> Noting:
    store = ImageStore(tmp_path / "images")
    return Noting(FakePodManager(images=store, networks=FakeNetworks()), store)


def test_serve_runs_the_lifecycle_in_order(tmp_path: Path) -> None:
    from podkit.cri.api_pb2_grpc import RuntimeServiceStub

    service = _service(tmp_path)
    with serve(tmp_path / "cri.sock", service) as server:
        assert service.noted == ["recover", "start_monitor"]
        assert (tmp_path / "cri.sock").stat().st_mode & 0o777 == 0o660
        with grpc.insecure_channel(server.address) as channel:
            assert RuntimeServiceStub(channel).Version(pb.VersionRequest()).runtime_name == \
                "podkit"
        assert not server.wait(0)
    assert server.wait(0)
    # stop_monitor once by the server, once more inside close (a no-op then)
    assert service.noted[2:] == ["stop_monitor", "close", "stop_monitor"]
    assert not (tmp_path / "cri.sock").exists()
    server.stop()  # again: nothing
    assert service.noted.count("close") == 1


def test_a_server_starts_once(tmp_path: Path) -> None:
    server = Server(tmp_path / "cri.sock", _service(tmp_path)).start()
    try:
        with pytest.raises(ConflictError, match="already started"):
            server.start()
    finally:
        server.stop()


def test_a_failed_start_leaves_no_server_and_no_socket(tmp_path: Path) -> None:
    service = _service(tmp_path)
    long = tmp_path / ("d" * 120)
    long.mkdir()
    with pytest.raises(RuntimeError):  # gRPC cannot bind a path longer than sun_path
        serve(long / "cri.sock", service)
    assert list(long.iterdir()) == []
    server = serve(tmp_path / "cri.sock", service)  # the same service serves elsewhere
    server.stop()


def test_another_server_on_the_socket_is_refused_first(tmp_path: Path) -> None:
    first = serve(tmp_path / "cri.sock", _service(tmp_path))
    try:
        second = _service(tmp_path)
        with pytest.raises(ConflictError, match="another server is listening"):
            serve(tmp_path / "cri.sock", second)
        assert second.noted == []  # refused before recover
    finally:
        first.stop()


def test_max_workers_is_checked(tmp_path: Path) -> None:
    with pytest.raises(InvalidArgumentError, match="max_workers 0: must be at least 1"):
        Server(tmp_path / "cri.sock", _service(tmp_path), max_workers=0)


def test_close_runs_the_closers_last_first_once_even_after_a_failure(tmp_path: Path) -> None:
    service = _service(tmp_path)
    ran: list[str] = []

    def fails() -> None:
        ran.append("fails")
        raise OSError("gone")

    service.closers += [lambda: ran.append("first"), fails, lambda: ran.append("last")]
    with pytest.raises(OSError, match="gone"):
        service.close()
    assert ran == ["last", "fails", "first"]
    service.close()  # nothing twice
    assert ran == ["last", "fails", "first"]
