"""build_container_spec's ``checked``: the config checks run once per build unless the caller
ran them already (create_container does, before it makes the rootfs); the spec is the same."""

from __future__ import annotations

from pathlib import Path

import pytest

from podkit.container import ContainerConfigError, PodContext, build_container_spec
from podkit.pods import container_spec
from podkit.pods.config import (
    ContainerConfig,
    ContainerMetadata,
    LinuxContainerConfig,
    LinuxContainerSecurityContext,
    PodSandboxMetadata,
    SandboxConfig,
)
from podkit.sandbox import SandboxFiles

POD = PodContext(id="sb1", config=SandboxConfig(metadata=PodSandboxMetadata(
    name="web", uid="u1", namespace="ns")), files=SandboxFiles.under("/run/pk/sb1"),
    namespace_paths={"network": "/proc/42/ns/net", "ipc": "/proc/42/ns/ipc",
                     "uts": "/proc/42/ns/uts", "pid": "/proc/42/ns/pid"})


def _config(**kw: object) -> ContainerConfig:
    return ContainerConfig(metadata=ContainerMetadata(name="app"), image="/img",
                           command=["sleep", "1"], **kw)  # type: ignore[arg-type]


@pytest.fixture
def rootfs(tmp_path: Path) -> Path:
    (tmp_path / "etc").mkdir()
    (tmp_path / "etc" / "passwd").write_text("root:x:0:0::/root:/bin/sh\n")
    (tmp_path / "etc" / "group").write_text("root:x:0:\n")
    return tmp_path


def _count_checks(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    calls: list[str] = []
    real = container_spec.check_container_config

    def check(config: ContainerConfig, pod: PodContext) -> None:
        calls.append(config.metadata.name)
        real(config, pod)

    monkeypatch.setattr(container_spec, "check_container_config", check)
    return calls


def test_checks_run_once_unless_the_caller_ran_them(
        rootfs: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls = _count_checks(monkeypatch)
    plain = build_container_spec(_config(), POD, id="c1", rootfs=str(rootfs))
    assert calls == ["app"]
    checked = build_container_spec(_config(), POD, id="c1", rootfs=str(rootfs), checked=True)
    assert calls == ["app"]
    assert checked.to_json() == plain.to_json()


def test_a_bad_config_is_refused_without_checked(rootfs: Path) -> None:
    bad = _config(linux=LinuxContainerConfig(
        security_context=LinuxContainerSecurityContext(privileged=True)))
    with pytest.raises(ContainerConfigError, match="no privileged container allowed"):
        build_container_spec(bad, POD, id="c1", rootfs=str(rootfs))


def test_each_build_is_a_new_spec(rootfs: Path) -> None:
    """Built in place on a new default spec: two builds share no part."""
    a = build_container_spec(_config(), POD, id="c1", rootfs=str(rootfs))
    b = build_container_spec(_config(), POD, id="c1", rootfs=str(rootfs))
    assert a.to_json() == b.to_json()
    assert a.process is not None and b.process is not None
    a.process.args.append("changed")
    assert a.process.env is not b.process.env and "changed" not in b.process.args
    assert a.linux is not None and b.linux is not None and a.linux is not b.linux
