"""SandboxManager logic with fakes (no root): names, records, validation, rollback, recovery.

Pods here use the host network and host IPC, so no netns, CNI or shm mount is involved; the
runtime is ``FakeRuntime`` behind a small in-memory supervisor.
"""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import attrs
import pytest

from podkit.cgroups import Hierarchy, cgroup_dir
from podkit.errors import (
    AlreadyExistsError,
    ConflictError,
    InvalidArgumentError,
    NotFoundError,
    PodkitError,
)
from podkit.pods import processes
from podkit.pods.config import (
    Capability,
    ContainerConfig,
    ContainerMetadata,
    LinuxContainerConfig,
    LinuxContainerResources,
    LinuxContainerSecurityContext,
    Mount,
    NamespaceMode,
    NamespaceOption,
    PodSandboxMetadata,
    SandboxConfig,
)
from podkit.pods.network import quantity
from podkit.runtime import ExitStatus
from podkit.runtime.errors import OCIRuntimeError
from podkit.runtime.testing import FakeRuntime
from podkit.sandbox import (
    ContainerFilter,
    ContainerState,
    PauseConfig,
    SandboxFilter,
    SandboxManager,
    SandboxState,
)

from ._fakes import FakeSupervisor, host_pod
from ._pods import do_then_fail


def ctr(rootfs: Path, name: str = "c", **kw: Any) -> ContainerConfig:
    return ContainerConfig(metadata=ContainerMetadata(name=name), image=str(rootfs),
                           command=["sleep", "1"], **kw)


@pytest.fixture
def rootfs(tmp_path: Path) -> Path:
    r = tmp_path / "rootfs"
    (r / "etc").mkdir(parents=True)
    (r / "etc" / "passwd").write_text("root:x:0:0::/:/bin/sh\n")
    return r


@pytest.fixture
def parts(tmp_path: Path, rootfs: Path) -> Iterator[tuple[SandboxManager, FakeRuntime,
                                                          FakeSupervisor]]:
    rt = FakeRuntime()
    sup = FakeSupervisor(rt)
    m = SandboxManager(tmp_path / "root", tmp_path / "state", rt, None,
                       pause=PauseConfig(rootfs=str(rootfs)), supervisor=sup)
    yield m, rt, sup
    m.close()


def on_disk(tmp_path: Path) -> list[str]:
    out = []
    for kind in ("sandboxes", "containers"):
        out += [p.name for p in (tmp_path / "state" / kind).iterdir()]
        out += [p.name for p in (tmp_path / "root" / kind).iterdir()]
    return out


def test_lifecycle_records_and_filters(parts: Any, tmp_path: Path, rootfs: Path) -> None:
    m, rt, _ = parts
    sb = m.run_sandbox(host_pod(labels={"app": "web"}))
    assert sb.state == SandboxState.SANDBOX_READY and sb.steps == ("files", "pause")
    record = json.loads((tmp_path / "state" / "sandboxes" / f"{sb.id}.json").read_text())
    assert record["phase"] == "created" and record["config"]["labels"] == {"app": "web"}
    assert (tmp_path / "root" / "sandboxes" / sb.id / "hostname").read_text() == \
        os.uname().nodename + "\n"
    cid = m.create_container(sb.id, ctr(rootfs, labels={"tier": "x"}))
    assert cid not in rt.containers  # the runtime sees it at start
    assert m.container_status(cid).state == ContainerState.CONTAINER_CREATED
    m.start_container(cid)
    with pytest.raises(ConflictError, match="not CREATED"):
        m.start_container(cid)
    assert [s.id for s in m.list_sandboxes(SandboxFilter(label_selector={"app": "web"}))] == \
        [sb.id]
    assert m.list_sandboxes(SandboxFilter(label_selector={"app": "db"})) == []
    assert [c.id for c in m.list_containers(ContainerFilter(pod_sandbox_id=sb.id))] == [cid]
    assert m.list_containers(ContainerFilter(state=ContainerState.CONTAINER_EXITED)) == []
    rt.exit(cid, 3)
    c = m.container_status(cid)
    assert (c.state, c.exit_code, c.reason) == (ContainerState.CONTAINER_EXITED, 3, "Error")
    m.stop_sandbox(sb.id)
    m.stop_sandbox(sb.id)
    assert m.sandbox_status(sb.id).state == SandboxState.SANDBOX_NOTREADY
    with pytest.raises(ConflictError, match="not ready"):
        m.create_container(sb.id, ctr(rootfs, "late"))
    m.remove_sandbox(sb.id)
    m.remove_sandbox(sb.id)
    m.stop_sandbox("nope")
    m.remove_container("nope")
    m.stop_container("nope")
    assert on_disk(tmp_path) == [] and rt.containers == {}
    with pytest.raises(NotFoundError):
        m.sandbox_status(sb.id)


def test_stop_container_escalates_and_uses_the_stop_signal(parts: Any, rootfs: Path) -> None:
    m, rt, _ = parts
    sb = m.run_sandbox(host_pod())
    cid = m.create_container(sb.id, ctr(rootfs))
    m.start_container(cid)
    m.stop_container(cid, timeout=0.1)  # the fake init ignores SIGTERM
    assert m.container_status(cid).exit_code == 137
    kills = [c for c in rt.calls if c[0] == "kill" and c[1] == cid]
    assert [k[2] for k in kills] == [15, 9]
    c2 = m.create_container(sb.id, ctr(rootfs, "c2", stop_signal=2))
    m.start_container(c2)
    m.stop_container(c2, timeout=5)
    assert m.container_status(c2).exit_code == 130
    m.remove_sandbox(sb.id)


@pytest.mark.parametrize("step", ["files", "pause"])
def test_failure_undoes_every_step(parts: Any, tmp_path: Path, step: str,
                                   monkeypatch: pytest.MonkeyPatch) -> None:
    m, rt, _sup = parts
    monkeypatch.setitem(m.steps, step, do_then_fail(m.steps[step], PodkitError("injected")))
    with pytest.raises(PodkitError, match="injected"):
        m.run_sandbox(host_pod())
    assert on_disk(tmp_path) == [] and rt.containers == {}
    monkeypatch.undo()
    m.remove_sandbox(m.run_sandbox(host_pod()).id)  # the name is free again


def test_start_failure_is_recorded_and_leaves_nothing_in_the_runtime(
    parts: Any, rootfs: Path
) -> None:
    m, rt, sup = parts
    sb = m.run_sandbox(host_pod())
    cid = m.create_container(sb.id, ctr(rootfs))
    sup.fail_start.add(cid)
    with pytest.raises(OCIRuntimeError):
        m.start_container(cid)
    c = m.container_status(cid)
    assert (c.state, c.reason) == (ContainerState.CONTAINER_EXITED, "StartError")
    assert cid not in rt.containers
    m.remove_sandbox(sb.id)


def test_undo_failure_keeps_the_record_for_recover(
    parts: Any, tmp_path: Path, rootfs: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    m, rt, sup = parts

    def fail_pause(sb: Any) -> None:
        raise PodkitError("pause failed")

    def fail_undo(sb: Any) -> None:
        raise PodkitError("cannot clean files")

    monkeypatch.setitem(m.steps, "pause", attrs.evolve(m.steps["pause"], do=fail_pause))
    monkeypatch.setitem(m.steps, "files", attrs.evolve(m.steps["files"], undo=fail_undo))
    with pytest.raises(PodkitError, match="pause failed") as info:
        m.run_sandbox(host_pod())
    assert any("cannot clean files" in n for n in info.value.__notes__)
    monkeypatch.undo()
    m.close()
    m2 = SandboxManager(tmp_path / "root", tmp_path / "state", rt, None,
                        pause=PauseConfig(rootfs=str(rootfs)), supervisor=sup)
    report = m2.recover()
    assert len(report.rolled_back) == 1 and report.errors == ()
    assert on_disk(tmp_path) == []
    m2.close()


def test_recover_adopts_and_remove_all(parts: Any, tmp_path: Path, rootfs: Path) -> None:
    m, rt, sup = parts
    sb = m.run_sandbox(host_pod())
    cid = m.create_container(sb.id, ctr(rootfs))
    m.start_container(cid)
    m.close()
    m2 = SandboxManager(tmp_path / "root", tmp_path / "state", rt, None,
                        pause=PauseConfig(rootfs=str(rootfs)), supervisor=sup)
    report = m2.recover()
    assert report.sandboxes == (sb.id,) and report.containers == (cid,)
    assert m2.container_status(cid).state == ContainerState.CONTAINER_RUNNING
    with pytest.raises(AlreadyExistsError):
        m2.run_sandbox(host_pod())  # the name index was rebuilt
    m2.remove_all()
    assert on_disk(tmp_path) == [] and rt.containers == {}
    m2.close()


def test_one_manager_per_state_dir(parts: Any, tmp_path: Path, rootfs: Path) -> None:
    _m, rt, sup = parts
    with pytest.raises(ConflictError, match="locked"):
        SandboxManager(tmp_path / "root", tmp_path / "state", rt, None,
                       pause=PauseConfig(rootfs=str(rootfs)), supervisor=sup)


def test_constructor_errors(tmp_path: Path, rootfs: Path) -> None:
    rt = FakeRuntime()
    with pytest.raises(InvalidArgumentError, match="give a supervisor"):
        SandboxManager(tmp_path / "r", tmp_path / "s", rt, None)  # pause=None: infra-less
    with pytest.raises(InvalidArgumentError, match="not a directory"):
        SandboxManager(tmp_path / "r", tmp_path / "s", rt, None,
                       pause=PauseConfig(rootfs=str(tmp_path / "missing")))
    with pytest.raises(InvalidArgumentError, match="give a supervisor"):
        SandboxManager(tmp_path / "r", tmp_path / "s", rt, None,
                       pause=PauseConfig(rootfs=str(rootfs)))


def _sc(**kw: Any) -> LinuxContainerConfig:
    return LinuxContainerConfig(security_context=LinuxContainerSecurityContext(**kw))


@pytest.mark.parametrize(("make", "message"), [
    (lambda r: ctr(r, linux=_sc(capabilities=Capability(add_capabilities=["BOGUS"]))),
     "unknown capability 'CAP_BOGUS'"),
    (lambda r: ctr(r, mounts=[Mount(container_path="data", host_path="/tmp")]),
     "must be absolute"),
    (lambda r: ctr(r / "missing"), "must be an existing rootfs directory"),
    (lambda r: ctr(r, linux=_sc(privileged=True)), "no privileged container allowed"),
    (lambda r: ctr(r, linux=_sc(namespace_options=NamespaceOption(
        pid=NamespaceMode.TARGET, target_id="nope"))), "no such container"),
    (lambda r: ctr(r, cdi_devices=["vendor.com/gpu=0"]), "no CDI cache"),
    (lambda r: ctr(r, name="bad_name"), "must not contain"),
    (lambda r: ctr(r, stop_signal=32), r"stop_signal 32: not a Linux signal the CRI can name"),
    (lambda r: ctr(r, stop_signal=33), r"stop_signal 33: "),
    (lambda r: ctr(r, stop_signal=65), r"stop_signal 65: "),
    (lambda r: ctr(r, stop_signal=-15), r"stop_signal -15: "),
])
def test_bad_container_configs_fail_before_anything_is_created(
    parts: Any, tmp_path: Path, rootfs: Path, make: Any, message: str
) -> None:
    m, _rt, _ = parts
    sb = m.run_sandbox(host_pod())
    before = on_disk(tmp_path)
    with pytest.raises(InvalidArgumentError, match=message):
        m.create_container(sb.id, make(rootfs))
    assert on_disk(tmp_path) == before
    assert m.list_containers() == []
    m.create_container(sb.id, ctr(rootfs))  # the name was not taken
    m.remove_sandbox(sb.id)


def test_stop_signals_the_cri_can_name_are_kept(parts: Any, rootfs: Path) -> None:
    m, _rt, _ = parts
    sb = m.run_sandbox(host_pod())
    for i, sig in enumerate((0, 1, 15, 31, 34, 64)):
        cid = m.create_container(sb.id, ctr(rootfs, name=f"c{i}", stop_signal=sig))
        assert m.container_status(cid).config.stop_signal == sig
    m.remove_sandbox(sb.id)


@pytest.mark.parametrize(("config", "message"), [
    (host_pod(name="bad_name"), "must not contain"),
    (host_pod(hostname="h"), "must be empty for a host-network pod"),
    (SandboxConfig(metadata=PodSandboxMetadata(name="p")), "needs networks"),
])
def test_bad_sandbox_configs_fail_before_anything_is_created(
    parts: Any, tmp_path: Path, config: SandboxConfig, message: str
) -> None:
    m, rt, _ = parts
    with pytest.raises(InvalidArgumentError, match=message):
        m.run_sandbox(config)
    assert on_disk(tmp_path) == [] and rt.containers == {}


def test_update_resources_and_target_pid(parts: Any, rootfs: Path) -> None:
    m, rt, _ = parts
    sb = m.run_sandbox(host_pod())
    target = m.create_container(sb.id, ctr(rootfs, "t"))
    m.start_container(target)
    cid = m.create_container(sb.id, ctr(rootfs, "d", linux=_sc(
        namespace_options=NamespaceOption(pid=NamespaceMode.TARGET, target_id=target))))
    spec = json.loads((m.root_dir / "containers" / cid / "bundle" / "config.json").read_text())
    pid_ns = [n for n in spec["linux"]["namespaces"] if n["type"] == "pid"]
    assert pid_ns == [{"type": "pid", "path": f"/proc/{rt.containers[target].state.pid}/ns/pid"}]
    m.update_container_resources(target, LinuxContainerResources(memory_limit_in_bytes=1 << 26))
    res = rt.resources_of(target)
    assert res is not None and res.memory is not None and res.memory.limit == 1 << 26
    assert m.container_status(target).config.linux.resources is not None
    m.remove_sandbox(sb.id)


def test_quantities_and_cgroup_dirs() -> None:
    assert quantity("10M", "x") == 10_000_000
    assert quantity("1Gi", "x") == 1 << 30
    assert quantity("512", "x") == 512
    with pytest.raises(InvalidArgumentError, match="'ten' is not a quantity"):
        quantity("ten", "annotation kubernetes.io/ingress-bandwidth")
    v1 = Hierarchy.parse("".join(  # a v1 host's mounts, whatever this host runs
        f"{i} 1 0:{i} / /sys/fs/cgroup/{c} rw - cgroup cgroup rw,{c}\n"
        for i, c in enumerate(("memory", "pids"))))
    assert cgroup_dir("memory", "/podkit/abc", v1) == Path("/sys/fs/cgroup/memory/podkit/abc")
    assert cgroup_dir("pids", "kubepods-burst.slice:cri-podkit:abc", v1) == Path(
        "/sys/fs/cgroup/pids/kubepods.slice/kubepods-burst.slice/cri-podkit-abc.scope")


def test_recover_removes_directories_without_records(parts: Any, tmp_path: Path) -> None:
    m, _, _ = parts
    sb = m.run_sandbox(host_pod())
    (m.root_dir / "containers" / "orphan" / "bundle").mkdir(parents=True)
    (m.root_dir / "sandboxes" / "orphan").mkdir()
    m.recover()
    assert sorted(p.name for p in (m.root_dir / "sandboxes").iterdir()) == [sb.id]
    assert list((m.root_dir / "containers").iterdir()) == []
    m.remove_sandbox(sb.id)


def test_host_network_pod_never_touches_cni(tmp_path: Path, rootfs: Path) -> None:
    from podkit import cni
    from podkit.cni.testing import FakeExec

    fake = FakeExec()
    conf = cni.NetworkConfigList.from_bytes(
        b'{"cniVersion":"1.0.0","name":"pk-pod-fake","plugins":[{"type":"bridge"}]}')
    nets = cni.Networks(cni.CNI(plugin_dirs=["/nonexistent"], cache_dir=str(tmp_path / "c"),
                                exec=fake), [conf], loopback=True)
    rt = FakeRuntime()
    m = SandboxManager(tmp_path / "root", tmp_path / "state", rt, nets,
                       pause=PauseConfig(rootfs=str(rootfs)), supervisor=FakeSupervisor(rt))
    try:
        sb = m.run_sandbox(host_pod())
        m.stop_sandbox(sb.id)
        m.remove_sandbox(sb.id)
    finally:
        m.close()
    assert fake.calls == []


def test_recover_on_a_live_manager_keeps_its_records(parts: Any, rootfs: Path) -> None:
    m, rt, _ = parts
    sb = m.run_sandbox(host_pod())
    cid = m.create_container(sb.id, ctr(rootfs))
    m.start_container(cid)
    report = m.recover()
    assert report.sandboxes == (sb.id,) and report.containers == (cid,)
    m.stop_container(cid, 0)
    assert m.container_status(cid).exit_code == 137
    assert m.list_containers()[0].state == ContainerState.CONTAINER_EXITED
    m.remove_sandbox(sb.id)
    assert rt.containers == {}


def test_bad_bandwidth_annotation_fails_before_anything_is_created(
    tmp_path: Path, rootfs: Path
) -> None:
    from podkit import cni
    from podkit.cni.testing import FakeExec

    fake = FakeExec()
    conf = cni.NetworkConfigList.from_bytes(
        b'{"cniVersion":"1.0.0","name":"pk-pod-fake","plugins":[{"type":"bridge"}]}')
    nets = cni.Networks(cni.CNI(plugin_dirs=["/x"], cache_dir=str(tmp_path / "c"), exec=fake),
                        [conf])
    rt = FakeRuntime()
    m = SandboxManager(tmp_path / "root", tmp_path / "state", rt, nets,
                       pause=PauseConfig(rootfs=str(rootfs)), supervisor=FakeSupervisor(rt))
    try:
        bad = SandboxConfig(metadata=PodSandboxMetadata(name="p"),
                            annotations={"kubernetes.io/egress-bandwidth": "fast"})
        with pytest.raises(InvalidArgumentError, match="egress-bandwidth: 'fast'"):
            m.run_sandbox(bad)
        assert on_disk(tmp_path) == [] and fake.calls == []
    finally:
        m.close()


class _RacyConmon:
    """A conmon that writes its exit file and quits between the manager's two looks."""

    def __init__(self) -> None:
        self.reads = 0

    def exit_status(self, id: str) -> ExitStatus | None:
        self.reads += 1
        return None if self.reads == 1 else ExitStatus(exit_code=3)

    def monitor_alive(self, id: str) -> bool:
        return False


def test_exit_file_written_as_conmon_quits_keeps_the_code(tmp_path: Path) -> None:
    from podkit.runtime.supervise import ConmonSupervisor

    racy = _RacyConmon()
    m = SandboxManager(tmp_path / "root", tmp_path / "state", FakeRuntime(), None,
                       supervisor=ConmonSupervisor(racy))  # type: ignore[arg-type]
    try:
        status = processes.exit_status(m.supervisor, m.runtime, "gone")
    finally:
        m.close()
    assert status is not None and status.exit_code == 3 and racy.reads == 2


# -- issue 11: records, undo that cannot complete, temp files --------------------------------


def test_records_are_private(parts: Any, tmp_path: Path, rootfs: Path) -> None:
    """Records hold env values: 0600 files in 0700 dirs (also ones an older version made)."""
    m, _, _ = parts
    sb = m.run_sandbox(host_pod())
    cid = m.create_container(sb.id, ctr(rootfs, envs=[]))
    state = tmp_path / "state"
    for path in (state, state / "sandboxes", state / "containers"):
        assert stat.S_IMODE(path.stat().st_mode) == 0o700, path
    for path in (state / "sandboxes" / f"{sb.id}.json", state / "containers" / f"{cid}.json"):
        assert stat.S_IMODE(path.stat().st_mode) == 0o600, path
    m.close()
    (state / "sandboxes").chmod(0o755)  # as an older version left them
    (state / "sandboxes" / f"{sb.id}.json").chmod(0o644)
    m2 = SandboxManager(tmp_path / "root", state, m.runtime, None, supervisor=m.supervisor,
                        pause=m.pause)
    try:
        m2.recover()
        assert stat.S_IMODE((state / "sandboxes").stat().st_mode) == 0o700
        assert stat.S_IMODE((state / "sandboxes" / f"{sb.id}.json").stat().st_mode) == 0o600
        m2.remove_all()
    finally:
        m2.close()


def test_recover_sweeps_temp_files_of_writes_cut_short(parts: Any, tmp_path: Path) -> None:
    """A process killed inside atomic_write leaves ``.<name>.XXXXXXXX.tmp``: recover removes
    those (and only those, and only ones older than the manager)."""
    m, rt, sup = parts
    sb = m.run_sandbox(host_pod())
    m.close()
    state, root = tmp_path / "state", tmp_path / "root"
    old = [state / "sandboxes" / f".{sb.id}.json.ab_cd123.tmp",
           state / "containers" / ".c.json.x1y2z3w4.tmp",
           root / "sandboxes" / sb.id / "bundle" / ".config.json.qwertyui.tmp"]
    kept = [state / "sandboxes" / "notes.tmp", root / "sandboxes" / sb.id / "hostname"]
    for p in (*old, kept[0]):
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text("{half")
        os.utime(p, (1, 1))
    m2 = SandboxManager(root, state, rt, None, pause=PauseConfig(rootfs=str(m.pause.rootfs)),
                        supervisor=sup)
    fresh = state / "sandboxes" / f".{sb.id}.json.zzzzzzzz.tmp"  # this manager's own write
    fresh.write_text("{")
    try:
        report = m2.recover()
        assert report.sandboxes == (sb.id,) and report.errors == ()
        assert [p for p in old if p.exists()] == []
        assert all(p.exists() for p in (*kept, fresh))
        fresh.unlink()
        kept[0].unlink()
        m2.remove_all()
    finally:
        m2.close()
    assert on_disk(tmp_path) == []


def test_recover_sweeps_temp_files_in_the_cni_cache(parts: Any, tmp_path: Path) -> None:
    """A kill inside the CNI result cache's atomic write leaves a temp file there (found by the
    kill matrix): recover removes it, and only it."""
    m, rt, sup = parts
    m.close()
    from podkit.sandbox import default_networks

    networks = default_networks(tmp_path / "net")
    results = Path(networks.client.cache_dir) / "results"
    results.mkdir(parents=True)
    old = results / ".pk-net-0123abcd-eth0.p2td7mki.tmp"
    kept = results / "pk-net-0123abcd-eth0"
    for p in (old, kept):
        p.write_text("{half")
        os.utime(p, (1, 1))
    m2 = SandboxManager(tmp_path / "root", tmp_path / "state", rt, networks,
                        pause=PauseConfig(rootfs=str(m.pause.rootfs)), supervisor=sup)
    try:
        assert m2.recover().errors == ()
        assert not old.exists() and kept.exists()
    finally:
        m2.close()


def test_undo_that_cannot_complete_leaves_a_listed_removable_pod(
    parts: Any, tmp_path: Path, rootfs: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """run_sandbox fails and so does its undo (a ValueError, as a NUL in a value gave): the
    pod is listed NOTREADY with its name kept; remove retries the undo; remove_all removes the
    others and names this one instead of stopping at it; once the cause is gone it goes."""
    m, rt, _ = parts
    other = m.run_sandbox(host_pod("pk-pod-other"))

    def fail_pause(sb: Any) -> None:
        raise PodkitError("pause failed")

    undo_files = m.steps["files"].undo

    def fail_undo(sb: Any) -> None:
        if sb.config.metadata.name != "pk-pod-a":
            return undo_files(sb)
        raise ValueError("embedded null byte")

    monkeypatch.setitem(m.steps, "pause", attrs.evolve(m.steps["pause"], do=fail_pause))
    monkeypatch.setitem(m.steps, "files", attrs.evolve(m.steps["files"], undo=fail_undo))
    with pytest.raises(PodkitError, match="pause failed"):
        m.run_sandbox(host_pod())
    [bad] = [s for s in m.list_sandboxes() if s.id != other.id]
    assert (bad.name, bad.state, bad.steps) == (
        "pk-pod-a_pk_u1_0", SandboxState.SANDBOX_NOTREADY, ("files",))
    assert m.list_sandboxes(SandboxFilter(state=SandboxState.SANDBOX_NOTREADY)) == [bad]
    with pytest.raises(AlreadyExistsError):
        m.run_sandbox(host_pod())  # the name stays reserved while the pod exists
    with pytest.raises(PodkitError, match="embedded null byte"):
        m.remove_sandbox(bad.id)
    with pytest.raises(PodkitError, match=f"1 of 2 pods could not be removed: {bad.id}"):
        m.remove_all()
    assert [s.id for s in m.list_sandboxes()] == [bad.id]  # the other one is gone
    monkeypatch.undo()
    m.remove_all()
    assert m.list_sandboxes() == [] and on_disk(tmp_path) == [] and rt.containers == {}
    m.remove_sandbox(m.run_sandbox(host_pod()).id)  # the name is free again


def test_cni_failures_no_retry_can_fix() -> None:
    from podkit import cni
    from podkit.pods.network import cni_cannot_run

    missing = cni.PluginNotFoundError(7, "failed to find plugin \"nope\"", plugin="nope")
    failed = cni.CNIError(11, "plugin said no", plugin="bridge")
    assert cni_cannot_run(missing) and cni_cannot_run(ValueError("embedded null byte"))
    assert cni_cannot_run(cni.NetworksError("removal", "c", {"a": missing}))
    assert not cni_cannot_run(failed)
    assert not cni_cannot_run(cni.NetworksError("removal", "c", {"a": missing, "b": failed}))
    assert not cni_cannot_run(OSError("ENOMEM"))


def test_start_failure_whose_cleanup_fails_is_retried_by_remove(
    parts: Any, rootfs: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A failed start whose runtime cleanup fails too keeps the ``runtime`` step, so removing
    the container deletes it from the runtime then (it was dropped, and leaked, before)."""
    m, rt, sup = parts
    sb = m.run_sandbox(host_pod())
    cid = m.create_container(sb.id, ctr(rootfs))
    original = sup.start

    def start_then_fail(id: str, bundle: Any, **kw: Any) -> int:
        original(id, bundle, **kw)
        raise OCIRuntimeError("fake: lost the sync pipe")

    def fail_delete(id: str, force: bool = False) -> None:
        raise OCIRuntimeError("fake: runtime busy")

    monkeypatch.setattr(sup, "start", start_then_fail)
    monkeypatch.setattr(sup, "delete", fail_delete)
    with pytest.raises(OCIRuntimeError, match="sync pipe") as info:
        m.start_container(cid)
    assert any("runtime busy" in n for n in info.value.__notes__)
    c = m.container_status(cid)
    assert c.reason == "StartError" and "runtime" in c.steps and cid in rt.containers
    monkeypatch.undo()
    m.remove_container(cid)
    assert cid not in rt.containers
    m.remove_sandbox(sb.id)


def test_network_loader_loads_late_networks_once(tmp_path: Path, rootfs: Path) -> None:
    from podkit import cni
    from podkit.cni.testing import FakeExec

    conf = cni.NetworkConfigList.from_bytes(
        b'{"cniVersion":"1.0.0","name":"pk-pod-fake","plugins":[{"type":"bridge"}]}')
    nets = cni.Networks(cni.CNI(plugin_dirs=["/x"], cache_dir=str(tmp_path / "c"),
                                exec=FakeExec()), [conf])
    calls: list[int] = []

    def loader() -> cni.Networks:
        calls.append(1)
        if len(calls) == 1:
            raise PodkitError("no config in /etc/cni/net.d")
        return nets

    rt = FakeRuntime()
    m = SandboxManager(tmp_path / "root", tmp_path / "state", rt, None,
                       pause=PauseConfig(rootfs=str(rootfs)), supervisor=FakeSupervisor(rt),
                       network_loader=loader)
    try:
        pod = SandboxConfig(metadata=PodSandboxMetadata(name="p"))
        with pytest.raises(InvalidArgumentError, match="cni config not loaded: no config"):
            m.run_sandbox(pod)  # run_sandbox tries the loader itself
        assert m.networks is None and on_disk(tmp_path) == []
        assert m.load_networks() == "" and m.networks is nets
        assert m.load_networks() == "" and len(calls) == 2  # loaded: the loader is not called
    finally:
        m.close()
    m2 = SandboxManager(tmp_path / "root", tmp_path / "state", rt, None,
                        pause=PauseConfig(rootfs=str(rootfs)), supervisor=FakeSupervisor(rt))
    assert m2.load_networks() == "" and m2.networks is None  # no loader: nothing to do
    m2.close()
