"""Hostile CRI requests over real gRPC: IDs, names, paths and enum values a kubelet would never
send. Each gets the right status code (INVALID_ARGUMENT / NOT_FOUND, or OK for idempotent
removals of unknown IDs), a bounded message, and leaves nothing: no pod, container, rootfs,
record, netns, link or mount, and no file outside the server's dirs.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
import pytest

import _leaks
from cri.helpers import Harness, container_config, pod_config
from podkit import image
from podkit.cri import api_pb2 as pb

pytestmark = pytest.mark.integration

OK = grpc.StatusCode.OK
INVALID = grpc.StatusCode.INVALID_ARGUMENT
NOT_FOUND = grpc.StatusCode.NOT_FOUND
BOUND = 2048
"""The longest status message a hostile request may produce (characters)."""

LONG = "a" * 10_000
ESCAPE = "pk-hostile-escaped"
"""A file name hostile paths aim at, next to the pod's log directory (must never appear)."""


def _escaped(top: Path) -> list[str]:
    """Files named ``ESCAPE*`` anywhere under ``top`` (a walk that passes over the dirs the
    servers' trash threads remove while it runs)."""
    return [os.path.join(d, n) for d, dirs, files in os.walk(top)
            for n in dirs + files if n.startswith(ESCAPE)]


HOSTILE_NAMES = {"nul": "a\0b", "slash": "a/b", "dotdot": "..", "dot": ".", "10k": LONG,
                 "empty": "", "newline": "a\nb"}
HOSTILE_IDS = {"nul": "a\0b", "slash": "a/b", "traversal": "../../etc", "10k": LONG,
               "absolute": "/etc/passwd"}


@dataclass
class Ctx:
    """What a probe may aim at: the shared pod, its log directory, a running container."""

    harness: Harness
    pod: str
    logs: Path
    ctr: str


@dataclass(frozen=True)
class CriProbe:
    """One request: ``rpc`` on the runtime (or image) service; the codes it may get."""

    rpc: str
    request: Callable[[Ctx], Any]
    codes: tuple[grpc.StatusCode, ...] = (INVALID,)
    image_service: bool = False


def _pod(**kw: Any) -> Callable[[Ctx], Any]:
    """RunPodSandbox with a pod config changed by ``kw`` (``metadata_*`` set metadata)."""
    def build(ctx: Ctx) -> Any:
        cfg = pod_config(log_directory=str(ctx.logs / "new"))
        for key, value in kw.items():
            if key.startswith("metadata_"):
                setattr(cfg.metadata, key[len("metadata_"):], value)
            elif key == "edit":
                value(cfg)
            elif key != "handler":
                setattr(cfg, key, value)
        return pb.RunPodSandboxRequest(config=cfg, runtime_handler=kw.get("handler", ""))
    return build


def _ctr(name: str = "c", **kw: Any) -> Callable[[Ctx], Any]:
    """CreateContainer in the shared pod; ``edit(cfg, ctx)`` changes the container config."""
    def build(ctx: Ctx) -> Any:
        cfg = container_config(name)
        edit = kw.get("edit")
        if edit is not None:
            edit(cfg, ctx)
        return pb.CreateContainerRequest(pod_sandbox_id=kw.get("pod", ctx.pod), config=cfg)
    return build


def _set(path: str, value: Any) -> Callable[..., None]:
    """An edit setting the dotted field ``path`` of a config to ``value``."""
    def edit(cfg: Any, *_: Any) -> None:
        *parents, last = path.split(".")
        msg = cfg
        for part in parents:
            msg = getattr(msg, part)
        setattr(msg, last, value)
    return edit


def _log_path(value: str) -> Callable[..., None]:
    def edit(cfg: Any, ctx: Ctx) -> None:
        cfg.log_path = value
    return edit


def _mount(**kw: Any) -> Callable[..., None]:
    def edit(cfg: Any, ctx: Ctx) -> None:
        fields = {"container_path": "/mnt", "host_path": str(ctx.logs)}
        fields.update(kw)
        cfg.mounts.add(**fields)
    return edit


def _extend(field: str, *values: str) -> Callable[..., None]:
    def edit(cfg: Any, ctx: Ctx) -> None:
        getattr(cfg, field).extend(values)
    return edit


def _env(key: str, value: bytes) -> Callable[..., None]:
    def edit(cfg: Any, ctx: Ctx) -> None:
        cfg.envs.add(key=key, value=value)
    return edit


def _by_id(rpc: str, field: str, **extra: Any) -> Callable[[str], CriProbe]:
    """A probe factory calling ``rpc`` with ``field`` set to a hostile ID."""
    request_type = getattr(pb, f"{rpc}Request")
    codes = (OK, NOT_FOUND, INVALID) if rpc.startswith(("Stop", "Remove")) else \
        (NOT_FOUND, INVALID)

    def probe(value: str) -> CriProbe:
        return CriProbe(rpc, lambda ctx: request_type(**{field: value}, **extra), codes)
    return probe


_ID_RPCS = [
    _by_id("StopPodSandbox", "pod_sandbox_id"), _by_id("RemovePodSandbox", "pod_sandbox_id"),
    _by_id("PodSandboxStatus", "pod_sandbox_id"), _by_id("PodSandboxStats", "pod_sandbox_id"),
    _by_id("StartContainer", "container_id"), _by_id("StopContainer", "container_id"),
    _by_id("RemoveContainer", "container_id"), _by_id("ContainerStatus", "container_id"),
    _by_id("ContainerStats", "container_id"), _by_id("ReopenContainerLog", "container_id"),
    _by_id("UpdateContainerResources", "container_id"),
    _by_id("ExecSync", "container_id", cmd=["true"]),
]


def _probes() -> dict[str, CriProbe]:
    probes: dict[str, CriProbe] = {}
    for kind, name in HOSTILE_NAMES.items():
        probes[f"pod-name-{kind}"] = CriProbe("RunPodSandbox", _pod(metadata_name=name))
        probes[f"container-name-{kind}"] = CriProbe("CreateContainer", _ctr(name))
    for kind, id_ in HOSTILE_IDS.items():
        for factory in _ID_RPCS:
            probe = factory(id_)
            probes[f"{probe.rpc}-id-{kind}"] = probe
        probes[f"CreateContainer-pod-id-{kind}"] = CriProbe(
            "CreateContainer", _ctr(pod=id_), (NOT_FOUND, INVALID))
    probes.update({
        # other strings that reach paths, argv, env or CNI args
        "pod-namespace-nul": CriProbe("RunPodSandbox", _pod(metadata_namespace="a\0b")),
        "pod-uid-nul": CriProbe("RunPodSandbox", _pod(metadata_uid="a\0b")),
        "pod-namespace-cni-args": CriProbe("RunPodSandbox",
                                           _pod(metadata_namespace="ns;IgnoreUnknown=1")),
        "pod-hostname-nul": CriProbe("RunPodSandbox", _pod(hostname="a\0b")),
        "pod-log-directory-relative": CriProbe("RunPodSandbox", _pod(log_directory="../../x")),
        "pod-log-directory-nul": CriProbe("RunPodSandbox", _pod(log_directory="/tmp/a\0b")),
        "pod-runtime-handler-nul": CriProbe("RunPodSandbox", _pod(handler="runc\0")),
        "pod-runtime-handler-10k": CriProbe("RunPodSandbox", _pod(handler=LONG)),
        "pod-sysctl-traversal": CriProbe("RunPodSandbox", _pod(
            edit=lambda cfg: cfg.linux.sysctls.update({"../../../../etc/passwd": "x"}))),
        "container-log-path-dotdot": CriProbe("CreateContainer", _ctr(
            edit=_log_path(f"../{ESCAPE}.log"))),
        "container-log-path-deep-dotdot": CriProbe("CreateContainer", _ctr(
            edit=_log_path(f"c/../../../{ESCAPE}.log"))),
        # containerd joins an absolute log_path under log_directory: OK if it stays inside
        "container-log-path-absolute": CriProbe("CreateContainer", _ctr(
            edit=lambda cfg, ctx: setattr(cfg, "log_path", str(ctx.logs.parent / ESCAPE))),
            (INVALID, OK)),
        "container-log-path-nul": CriProbe("CreateContainer", _ctr(edit=_log_path("c\0.log"))),
        "container-image-nul": CriProbe("CreateContainer", _ctr(
            edit=_set("image.image", "busybox\0:1"))),
        "container-image-traversal": CriProbe("CreateContainer", _ctr(
            edit=_set("image.image", "../../etc")), (INVALID, NOT_FOUND)),
        "container-command-nul": CriProbe("CreateContainer", _ctr(
            edit=_extend("command", "sh\0-c"))),
        "container-args-nul": CriProbe("CreateContainer", _ctr(edit=_extend("args", "a\0b"))),
        "container-working-dir-nul": CriProbe("CreateContainer", _ctr(
            edit=_set("working_dir", "/tmp\0x"))),
        "container-working-dir-relative": CriProbe("CreateContainer", _ctr(
            edit=_set("working_dir", "../.."))),
        "container-env-key-equals": CriProbe("CreateContainer", _ctr(edit=_env("A=B", b"c"))),
        "container-env-key-nul": CriProbe("CreateContainer", _ctr(edit=_env("A\0", b"c"))),
        "container-env-value-nul": CriProbe("CreateContainer", _ctr(edit=_env("A", b"c\0d"))),
        "container-env-key-empty": CriProbe("CreateContainer", _ctr(edit=_env("", b"c"))),
        "mount-host-path-nul": CriProbe("CreateContainer", _ctr(
            edit=_mount(host_path="/tmp\0/x"))),
        "mount-host-path-relative": CriProbe("CreateContainer", _ctr(
            edit=_mount(host_path="../../etc"))),
        "mount-container-path-nul": CriProbe("CreateContainer", _ctr(
            edit=_mount(container_path="/mnt\0x"))),
        "mount-container-path-relative": CriProbe("CreateContainer", _ctr(
            edit=_mount(container_path="../../etc"))),
        "device-host-path-nul": CriProbe("CreateContainer", _ctr(
            edit=lambda cfg, ctx: cfg.devices.add(host_path="/dev/null\0", container_path="/d",
                                                  permissions="rwm"))),
        # a running container's exec and update
        "exec-cmd-nul": CriProbe("ExecSync", lambda ctx: pb.ExecSyncRequest(
            container_id=ctx.ctr, cmd=["sh", "-c", "true\0; touch /escaped"], timeout=5)),
        # no such executable: the runtime's refusal, as containerd answers it (UNKNOWN)
        "exec-cmd-empty-argv0": CriProbe("ExecSync", lambda ctx: pb.ExecSyncRequest(
            container_id=ctx.ctr, cmd=[""], timeout=5), (INVALID, grpc.StatusCode.UNKNOWN)),
        "exec-timeout-negative": CriProbe("ExecSync", lambda ctx: pb.ExecSyncRequest(
            container_id=ctx.ctr, cmd=["true"], timeout=-5), (INVALID, OK)),
        "update-resources-negative-shares": CriProbe(
            "UpdateContainerResources", lambda ctx: pb.UpdateContainerResourcesRequest(
                container_id=ctx.ctr, linux=pb.LinuxContainerResources(cpu_shares=-1))),
        "update-resources-negative-memory": CriProbe(
            "UpdateContainerResources", lambda ctx: pb.UpdateContainerResourcesRequest(
                container_id=ctx.ctr, linux=pb.LinuxContainerResources(
                    memory_limit_in_bytes=-7))),
        "update-resources-unified-traversal": CriProbe(
            "UpdateContainerResources", lambda ctx: pb.UpdateContainerResourcesRequest(
                container_id=ctx.ctr, linux=pb.LinuxContainerResources(
                    unified={"../../../etc/passwd": "x"}))),
        # enum values out of range
        "pod-network-namespace-mode-42": CriProbe("RunPodSandbox", _pod(
            edit=_set("linux.security_context.namespace_options.network", 42))),
        "pod-pid-namespace-mode-negative": CriProbe("RunPodSandbox", _pod(
            edit=_set("linux.security_context.namespace_options.pid", -1))),
        "pod-port-protocol-9": CriProbe("RunPodSandbox", _pod(
            edit=lambda cfg: cfg.port_mappings.add(protocol=9, container_port=80,
                                                   host_port=8080))),
        "pod-seccomp-profile-type-7": CriProbe("RunPodSandbox", _pod(
            edit=_set("linux.security_context.seccomp.profile_type", 7))),
        "container-pid-namespace-mode-99": CriProbe("CreateContainer", _ctr(
            edit=_set("linux.security_context.namespace_options.pid", 99))),
        "container-mount-propagation-77": CriProbe("CreateContainer", _ctr(
            edit=_mount(propagation=77))),
        "container-apparmor-profile-type-9": CriProbe("CreateContainer", _ctr(
            edit=_set("linux.security_context.apparmor.profile_type", 9))),
        "container-seccomp-profile-type-9": CriProbe("CreateContainer", _ctr(
            edit=_set("linux.security_context.seccomp.profile_type", 9))),
        "list-containers-state-99": CriProbe("ListContainers", lambda ctx: pb.ListContainersRequest(
            filter=pb.ContainerFilter(state=pb.ContainerStateValue(state=99)))
            , (OK, INVALID)),
        # image service
        "pull-image-nul": CriProbe("PullImage", lambda ctx: pb.PullImageRequest(
            image=pb.ImageSpec(image="busybox\0")), image_service=True),
        "pull-image-traversal": CriProbe("PullImage", lambda ctx: pb.PullImageRequest(
            image=pb.ImageSpec(image="../../etc/passwd")), image_service=True),
        "remove-image-traversal": CriProbe("RemoveImage", lambda ctx: pb.RemoveImageRequest(
            image=pb.ImageSpec(image="../../etc/passwd")), (INVALID, NOT_FOUND, OK),
            image_service=True),
        "image-status-nul": CriProbe("ImageStatus", lambda ctx: pb.ImageStatusRequest(
            image=pb.ImageSpec(image="a\0b")), (INVALID, OK), image_service=True),
    })
    return probes


PROBES = _probes()


class _State:
    """What the server holds: pods, containers, rootfs, records, netns/links/mounts."""

    def __init__(self, h: Harness) -> None:
        self.pods = sorted(p.id for p in h.manager.list_sandboxes())
        self.ctrs = sorted(c.id for c in h.manager.list_containers())
        self.rootfs = sorted(r.container_id for r in image.list_rootfs(h.store))
        self.records = sorted(p.name for kind in ("sandboxes", "containers")
                              for p in (h.manager.state_dir / kind).glob("*"))
        self.sys = _leaks.snapshot(("netns", "link", "mount"))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _State) and vars(self) == vars(other)

    def __repr__(self) -> str:
        return repr(vars(self))


@pytest.fixture(scope="module")
def ctx(harness: Harness, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Ctx]:
    logs = tmp_path_factory.mktemp("hostile-logs") / "pod"
    logs.mkdir()
    cfg = pod_config(log_directory=str(logs))
    sid = harness.rt.RunPodSandbox(pb.RunPodSandboxRequest(config=cfg)).pod_sandbox_id
    try:
        cid = harness.rt.CreateContainer(pb.CreateContainerRequest(
            pod_sandbox_id=sid, config=container_config("running", log_path="running.log"),
            sandbox_config=cfg)).container_id
        harness.rt.StartContainer(pb.StartContainerRequest(container_id=cid))
        yield Ctx(harness, sid, logs, cid)
    finally:
        harness.rt.RemovePodSandbox(pb.RemovePodSandboxRequest(pod_sandbox_id=sid))


def _undo(h: Harness, before: _State) -> None:
    """Remove what a probe that should have been refused created."""
    for cid in {c.id for c in h.manager.list_containers()} - set(before.ctrs):
        h.rt.RemoveContainer(pb.RemoveContainerRequest(container_id=cid))
    for sid in {p.id for p in h.manager.list_sandboxes()} - set(before.pods):
        h.rt.RemovePodSandbox(pb.RemovePodSandboxRequest(pod_sandbox_id=sid))


@pytest.mark.parametrize("probe", list(PROBES))
def test_cri_probe(probe: str, ctx: Ctx) -> None:
    p = PROBES[probe]
    h = ctx.harness
    service = h.img if p.image_service else h.rt
    request = p.request(ctx)
    outside = sorted(ctx.logs.parent.iterdir())
    before = _State(h)
    try:
        result = getattr(service, p.rpc)(request)
        code, details = OK, ""
        del result
    except grpc.RpcError as exc:
        code, details = exc.code(), exc.details() or ""
    after = _State(h)
    if after != before:
        _undo(h, before)
    assert sorted(ctx.logs.parent.iterdir()) == outside
    assert _escaped(ctx.logs.parent.parent) == []
    assert code in p.codes, f"{p.rpc}: {code.name}: {details[:300]}"
    assert len(details) <= BOUND, len(details)
    assert after == before or code == OK
