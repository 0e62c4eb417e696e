"""Unit tests of the reference server's pure parts (no root, no grpc server)."""

from __future__ import annotations

import signal
import socket
import threading
import time
from pathlib import Path

import pytest

from podkit._config import (
    ContainerConfig,
    ContainerMetadata,
    KeyValue,
    LinuxContainerConfig,
    LinuxContainerSecurityContext,
)
from podkit.cri import api_pb2 as pb
from podkit.cri.server import (
    ContainerImage,
    UnimplementedError,
    _apply_image_config,
    _container_image,
    _repo,
    _signal_value,
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
from podkit.image import ImageConfig, ImageNotFoundError
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


def _cfg(**kw: object) -> ContainerConfig:
    return ContainerConfig(metadata=ContainerMetadata(name="c"), image="img", **kw)  # type: ignore[arg-type]


IMAGE = ImageConfig(env=("PATH=/bin", "A=image"), entrypoint=("/entry",), cmd=("default",),
                    working_dir="/work", user="app:app")


def test_image_config_defaults() -> None:
    out = _apply_image_config(_cfg(envs=(KeyValue(key="A", value="config"),)), IMAGE)
    assert list(out.command) == ["/entry", "default"] and list(out.args) == []
    assert [(e.key, e.value) for e in out.envs] == [
        ("PATH", "/bin"), ("A", "image"), ("A", "config")]  # the config's comes last and wins
    assert out.working_dir == "/work"
    assert out.linux.security_context.run_as_username == "app:app"


def test_config_overrides_image() -> None:
    sc = LinuxContainerSecurityContext(run_as_user=1000)
    out = _apply_image_config(
        _cfg(command=("sh",), args=("-c", "x"), working_dir="/w",
             linux=LinuxContainerConfig(security_context=sc)), IMAGE)
    assert list(out.command) == ["sh", "-c", "x"]
    assert out.working_dir == "/w"
    assert out.linux.security_context.run_as_username == ""
    assert out.linux.security_context.run_as_user == 1000
    # args alone replace Cmd and keep the entrypoint
    assert list(_apply_image_config(_cfg(args=("x",)), IMAGE).command) == ["/entry", "x"]


def test_no_command_anywhere() -> None:
    with pytest.raises(InvalidArgumentError, match=r"config\.command.*no command specified"):
        _apply_image_config(_cfg(), ImageConfig())


@pytest.mark.parametrize(("text", "value"), [  # Linux signal numbers, not the CRI enum
    ("SIGTERM", signal.SIGTERM), ("TERM", signal.SIGTERM), ("15", signal.SIGTERM),
    ("sigquit", signal.SIGQUIT), ("SIGRTMIN+3", signal.SIGRTMIN + 3),
    ("SIGRTMAX-2", signal.SIGRTMAX - 2), ("40", 40), (" usr1 ", signal.SIGUSR1),
    ("SIGNOPE", None), ("99", None), ("0", None), ("32", None), ("RUNTIME_DEFAULT", None),
    ("", 0), (None, 0),
])
def test_stop_signal_of_image(text: str | None, value: int | None) -> None:
    if value is None:
        with pytest.raises(InvalidArgumentError, match="StopSignal"):
            _signal_value(text, "StopSignal of image x")
    else:
        assert _signal_value(text, "StopSignal of image x") == value


def test_server_record_of_an_older_version_loads() -> None:
    # records once kept the CRI stop signal; it lives in the manager's config now
    old = {"container_id": "c1", "image": "busybox", "rootfs_id": "k", "rootfs": "/r",
           "stop_signal": pb.SIGTERM}
    assert _container_image(old) == ContainerImage(container_id="c1", image="busybox",
                                                   rootfs_id="k", rootfs="/r")
    with pytest.raises(TypeError, match="not a JSON object: list"):
        _container_image(["c1"])


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
