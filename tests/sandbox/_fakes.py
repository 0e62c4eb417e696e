"""Fakes for the SandboxManager unit tests (no root): a supervisor over ``FakeRuntime`` and
a host-network pod config."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from podkit.errors import NotFoundError
from podkit.pods.config import (
    LinuxPodSandboxConfig,
    LinuxSandboxSecurityContext,
    NamespaceMode,
    NamespaceOption,
    PodSandboxMetadata,
    SandboxConfig,
)
from podkit.runtime import ExecResult, ExitStatus
from podkit.runtime.errors import OCIRuntimeError
from podkit.runtime.testing import FakeRuntime


class FakeSupervisor:
    """Supervisor over FakeRuntime; ``fail_start`` makes the next start fail."""

    def __init__(self, rt: FakeRuntime) -> None:
        self.rt = rt
        self.fail_start: set[str] = set()

    def start(self, id: str, bundle: Any, *, log_path: Any, tty: bool = False,
              stdin: bool = False, stdin_once: bool = False) -> int:
        if id in self.fail_start:
            raise OCIRuntimeError("fake: exec: no such file")
        pid = self.rt.create(id, bundle)
        self.rt.start(id)
        return pid

    def wait(self, id: str, timeout: float | None = None) -> ExitStatus:
        return self.rt.wait(id, timeout)

    def exec_sync(self, id: str, args: Sequence[str], timeout: float | None = None
                  ) -> ExecResult:
        return self.rt.exec_sync(id, args, timeout)

    def delete(self, id: str, force: bool = False) -> None:
        if id not in self.rt.containers:
            raise NotFoundError(f"not supervised: {id}")
        self.rt.delete(id, force=force)

    def attach(self, id: str) -> Any:
        raise NotImplementedError

    def resize(self, id: str, rows: int, cols: int) -> None:
        raise NotImplementedError

    def reopen_log(self, id: str) -> None:
        pass

    def stop(self, id: str, timeout: float = 10.0) -> ExitStatus:
        raise NotImplementedError


def host_pod(name: str = "pk-pod-a", **kw: Any) -> SandboxConfig:
    ns = NamespaceOption(network=NamespaceMode.NODE, ipc=NamespaceMode.NODE)
    return SandboxConfig(
        metadata=PodSandboxMetadata(name=name, uid="u1", namespace="pk"),
        linux=LinuxPodSandboxConfig(
            security_context=LinuxSandboxSecurityContext(namespace_options=ns)), **kw)
