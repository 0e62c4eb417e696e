"""FakeRuntime follows the state machine and raises Runc's error kinds."""

from __future__ import annotations

import signal
import threading

import pytest

from podkit import oci
from podkit.errors import InvalidArgumentError
from podkit.oci import codec
from podkit.runtime import (
    AlreadyExistsError,
    ExecResult,
    NotFoundError,
    NotRunningError,
    Runtime,
    RuntimeTimeoutError,
)
from podkit.runtime.testing import FakeRuntime


def test_is_a_runtime() -> None:
    assert isinstance(FakeRuntime(), Runtime)


def test_lifecycle_and_calls() -> None:
    rt = FakeRuntime()
    pid = rt.create("c1", "/b/c1")
    assert rt.state("c1").status == "created" and rt.state("c1").pid == pid
    rt.start("c1")
    assert [c.id for c in rt.list()] == ["c1"]
    rt.exit("c1", 3)
    st = rt.wait("c1")
    assert (st.exit_code, st.signal) == (3, None)
    assert rt.state("c1").pid == 0 and rt.ps("c1") == []
    rt.delete("c1")
    assert rt.list() == []
    assert rt.calls[0][:2] == ("create", "c1")


def test_errors_match_runc_kinds() -> None:
    rt = FakeRuntime()
    with pytest.raises(NotFoundError):
        rt.state("nope")
    with pytest.raises(InvalidArgumentError):
        rt.state("../x")
    rt.create("c1", "/b")
    with pytest.raises(AlreadyExistsError):
        rt.create("c1", "/b")
    with pytest.raises(NotRunningError):
        rt.exec_sync("c1", ["true"])  # created, not running
    rt.start("c1")
    with pytest.raises(NotRunningError):
        rt.delete("c1")
    rt.pause("c1")
    with pytest.raises(NotRunningError):
        rt.exec_sync("c1", ["true"])
    rt.resume("c1")
    rt.delete("c1", force=True)
    rt.delete("c1", force=True)


def test_stop_escalates_when_term_ignored() -> None:
    rt = FakeRuntime()
    rt.create("c1", "/b")
    rt.start("c1")
    res = rt.stop("c1", timeout=0)
    assert res.escalated and res.signals == [15, 9]
    assert res.exit_status is not None and res.exit_status.exit_code == 137
    assert rt.stop("c1").already_stopped


def test_stop_with_handler() -> None:
    rt = FakeRuntime(ignore_signals=())
    rt.create("c1", "/b")
    rt.start("c1")
    res = rt.stop("c1")
    assert not res.escalated and res.exit_status is not None
    assert res.exit_status.exit_code == 128 + signal.SIGTERM


def test_exec_handler_update_and_wait_timeout() -> None:
    rt = FakeRuntime(exec_handler=lambda id, args: ExecResult(exit_code=len(args), stdout=b"x"))
    rt.create("c1", "/b")
    rt.start("c1")
    assert rt.exec_sync("c1", ["a", "b"]) == ExecResult(exit_code=2, stdout=b"x")
    res = codec.structure({"pids": {"limit": 5}}, oci.LinuxResources)
    rt.update("c1", res)
    assert rt.resources_of("c1") == res
    proc = codec.structure({"cwd": "/", "args": ["sleep"]}, oci.Process)
    pid = rt.exec("c1", proc)
    assert pid in rt.ps("c1")
    with pytest.raises(RuntimeTimeoutError):
        rt.wait("c1", timeout=0.01)
    t = threading.Thread(target=lambda: rt.kill("c1", "KILL"))
    t.start()
    assert rt.wait("c1", timeout=10).exit_code == 137
    t.join()


def test_runc_and_fake_satisfy_the_protocol_at_runtime() -> None:
    from podkit.runtime import Runc

    assert isinstance(Runc("runc"), Runtime)  # checked statically too (mypy --strict)
    assert isinstance(FakeRuntime(), Runtime)
