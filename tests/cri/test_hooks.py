"""The CRI service's extension points over the in-memory pod API: admission and mutation
hooks (order, what they see, refusals that leave nothing, hooks that misbehave), the status
codes of a server's own exceptions, the runtime name Version answers, and which method the
gRPC adapter calls for an overridden RPC. tests/cri/test_subclass.py does the same through
real gRPC against runc."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import attrs
import pytest

from cri.helpers import container_config, pod_config
from podkit.container import ContainerConfig, KeyValue
from podkit.cri import CRIService
from podkit.cri import api_pb2 as pb
from podkit.cri.service import HookError
from podkit.cri.service.adapter import adapt
from podkit.cri.service.wire import WIRE_METHODS, bytes_twin
from podkit.errors import InvalidArgumentError, NotFoundError, PermissionDeniedError
from podkit.image import ImageStore
from podkit.pods.testing import FakeNetworks, FakePodManager
from podkit.sandbox import NamespaceMode, Sandbox, SandboxConfig


def _service(tmp_path: Path, **kw: Any) -> CRIService:
    store = ImageStore(tmp_path / "images")
    manager = FakePodManager(tmp_path / "root", tmp_path / "state", images=store,
                             networks=FakeNetworks())
    return CRIService(manager, store, **kw)


class Aborted(Exception):
    pass


class FakeContext:
    """What ``adapt`` uses of a grpc ServicerContext."""

    def __init__(self) -> None:
        self.code: Any = None
        self.details = ""

    def abort(self, code: Any, details: str) -> None:
        self.code, self.details = code, details
        raise Aborted

    def is_active(self) -> bool:
        return True


def _grpc(service: object, name: str, request: Any, *, wire: bool = False) -> tuple[str, Any]:
    """(status code name, answer or message) of the gRPC handler for ``name``."""
    pytest.importorskip("grpc")
    ctx = FakeContext()
    try:
        return "OK", adapt(service, name, wire=wire)(request, ctx)
    except Aborted:
        return ctx.code.name, ctx.details


def _run(service: CRIService, name: str = "", **kw: Any) -> str:
    return service.RunPodSandbox(pb.RunPodSandboxRequest(
        config=pod_config(name, **kw))).pod_sandbox_id


def _create(service: CRIService, sid: str, name: str = "c", **kw: Any) -> str:
    return service.CreateContainer(pb.CreateContainerRequest(
        pod_sandbox_id=sid, config=container_config(name, **kw))).container_id


# -- pod hooks ----------------------------------------------------------------------------


def _no_host_network(pod: SandboxConfig) -> None:
    if pod.linux.security_context.namespace_options.network == NamespaceMode.NODE:
        raise PermissionDeniedError(f"pod {pod.metadata.name}: host network is not allowed")


def test_an_admission_hook_refuses_a_pod_with_its_reason_and_nothing_is_made(
        tmp_path: Path) -> None:
    svc = _service(tmp_path, admit_pod=[_no_host_network])
    cfg = pod_config("hostnet")
    cfg.linux.security_context.namespace_options.network = pb.NODE
    req = pb.RunPodSandboxRequest(config=cfg)
    code, message = _grpc(svc, "RunPodSandbox", req)
    assert (code, message) == ("PERMISSION_DENIED", "pod hostnet: host network is not allowed")
    assert svc.manager.list_sandboxes() == []
    # the name was never reserved: the same pod on the pod network runs
    cfg.linux.security_context.namespace_options.network = pb.POD
    assert _grpc(svc, "RunPodSandbox", pb.RunPodSandboxRequest(config=cfg))[0] == "OK"


def test_mutations_run_in_order_then_admissions_see_the_result(tmp_path: Path) -> None:
    seen: list[str] = []

    def label(key: str) -> Any:
        def hook(pod: SandboxConfig) -> SandboxConfig:
            seen.append(f"mutate {key}")
            return attrs.evolve(pod, labels={**pod.labels, key: str(len(pod.labels))})
        return hook

    def unchanged(pod: SandboxConfig) -> None:
        seen.append("mutate none")

    def check(pod: SandboxConfig) -> None:
        seen.append(f"admit {sorted(pod.labels.items())}")

    svc = _service(tmp_path, mutate_pod=[label("a"), unchanged, label("b")],
                   admit_pod=[check, check])
    sid = _run(svc, "labelled")
    assert seen == ["mutate a", "mutate none", "mutate b", "admit [('a', '0'), ('b', '1')]",
                    "admit [('a', '0'), ('b', '1')]"]
    assert svc.manager.sandbox_status(sid).config.labels == {"a": "0", "b": "1"}


def test_hooks_added_after_the_start_apply(tmp_path: Path) -> None:
    svc = _service(tmp_path)
    svc.admit_pod.append(_no_host_network)
    cfg = pod_config("late")
    cfg.linux.security_context.namespace_options.network = pb.NODE
    with pytest.raises(PermissionDeniedError, match="host network"):
        svc.RunPodSandbox(pb.RunPodSandboxRequest(config=cfg))


# -- container hooks ----------------------------------------------------------------------


def test_container_hooks_see_the_pod_record_and_change_the_config(tmp_path: Path) -> None:
    pods: list[Sandbox] = []

    def pod_ip(ctr: ContainerConfig, pod: Sandbox) -> ContainerConfig:
        pods.append(pod)
        return attrs.evolve(ctr, envs=(*ctr.envs, KeyValue(key="POD_IP", value=pod.ip)))

    def devices(ctr: ContainerConfig, pod: Sandbox) -> ContainerConfig:
        names = pod.config.annotations.get("example.com/devices", "").split(",")
        return attrs.evolve(ctr, cdi_devices=(*ctr.cdi_devices, *filter(None, names)))

    svc = _service(tmp_path, mutate_container=[pod_ip, devices])
    sid = _run(svc, "annotated", annotations={"example.com/devices": "vendor.com/gpu=0"})
    # what the request says about the pod is not what the hooks see: the record is
    forged = pod_config("annotated", annotations={"example.com/devices": "vendor.com/gpu=all"})
    cid = svc.CreateContainer(pb.CreateContainerRequest(
        pod_sandbox_id=sid, config=container_config("c"), sandbox_config=forged)).container_id
    c = svc.manager.container_status(cid)
    ip = svc.manager.sandbox_status(sid).ip
    assert ip and pods[0].id == sid and pods[0].ip == ip
    assert [(e.key, e.value) for e in c.config.envs][-1] == ("POD_IP", ip)
    assert tuple(c.config.cdi_devices) == ("vendor.com/gpu=0",)


def _no_privileged(ctr: ContainerConfig, pod: Sandbox) -> None:
    if ctr.linux.security_context.privileged:
        raise PermissionDeniedError(f"container {ctr.metadata.name}: privileged")


def test_a_refused_container_leaves_nothing(tmp_path: Path) -> None:
    svc = _service(tmp_path, admit_container=[_no_privileged])
    sid = _run(svc, "pod")
    cfg = container_config("root")
    cfg.linux.security_context.privileged = True
    events = svc.events.subscribe()
    code, message = _grpc(svc, "CreateContainer", pb.CreateContainerRequest(
        pod_sandbox_id=sid, config=cfg))
    assert (code, message) == ("PERMISSION_DENIED", "container root: privileged")
    assert svc.manager.list_containers() == [] and events.empty()
    cfg.linux.security_context.privileged = False  # the name is free
    assert _grpc(svc, "CreateContainer", pb.CreateContainerRequest(
        pod_sandbox_id=sid, config=cfg))[0] == "OK"
    svc.events.close()


def test_container_hooks_run_after_the_pod_lookup(tmp_path: Path) -> None:
    calls: list[str] = []
    svc = _service(tmp_path, admit_container=[lambda c, p: calls.append(c.metadata.name)])
    with pytest.raises(NotFoundError, match="no such pod sandbox"):
        _create(svc, "unknown")
    assert calls == []


def test_a_mutation_that_changes_the_image_drops_the_user_specified_name(
        tmp_path: Path) -> None:
    def other(ctr: ContainerConfig, pod: Sandbox) -> ContainerConfig:
        return attrs.evolve(ctr, image="localhost/other:1")

    svc = _service(tmp_path, mutate_container=[other])
    sid = _run(svc, "pod")
    cfg = container_config("c")
    cfg.image.user_specified_image = "busybox"
    cid = svc.CreateContainer(pb.CreateContainerRequest(pod_sandbox_id=sid, config=cfg)
                              ).container_id
    c = svc.manager.container_status(cid)
    assert c.config.image == "localhost/other:1" and "user_specified_image" not in c.meta


# -- hooks that misbehave fail closed ---------------------------------------------------


@pytest.mark.parametrize(("kw", "problem"), [
    ({"admit_pod": [lambda pod: False]}, "admit_pod hook .*<lambda> returned False"),
    ({"mutate_pod": [lambda pod: "yes"]}, "mutate_pod hook .* returned a str, not a "
                                          "SandboxConfig or None"),
])
def test_a_hook_returning_the_wrong_thing_refuses(tmp_path: Path, kw: dict[str, Any],
                                                  problem: str) -> None:
    svc = _service(tmp_path, **kw)
    with pytest.raises(HookError, match=problem):
        _run(svc, "pod")
    assert svc.manager.list_sandboxes() == []
    assert _grpc(svc, "RunPodSandbox", pb.RunPodSandboxRequest(config=pod_config()))[0] == \
        "UNKNOWN"


def test_a_mutated_config_is_checked_like_a_request(tmp_path: Path) -> None:
    def bad(ctr: ContainerConfig, pod: Sandbox) -> ContainerConfig:
        return attrs.evolve(ctr, image="")

    svc = _service(tmp_path, mutate_container=[bad])
    sid = _run(svc, "pod")
    with pytest.raises(InvalidArgumentError, match=r"config\.image\.image: required"):
        _create(svc, sid)
    assert svc.manager.list_containers() == []


def test_hooks_must_be_callable(tmp_path: Path) -> None:
    with pytest.raises(InvalidArgumentError, match=r"admit_container\[1\] 'no': not callable"):
        _service(tmp_path, admit_container=[_no_privileged, "no"])


# -- status codes of a server's own errors --------------------------------------------------


class QuotaError(Exception):
    pass


class TeamQuotaError(QuotaError):
    pass


def test_own_exceptions_get_the_codes_given(tmp_path: Path,
                                            caplog: pytest.LogCaptureFixture) -> None:
    def quota(pod: SandboxConfig) -> None:
        raise (TeamQuotaError if pod.metadata.namespace == "team" else QuotaError)("over quota")

    svc = _service(tmp_path, admit_pod=[quota],
                   status_codes={QuotaError: "RESOURCE_EXHAUSTED", TeamQuotaError: "ABORTED",
                                 NotFoundError: "FAILED_PRECONDITION"})
    with caplog.at_level(logging.ERROR, logger="podkit.cri"):
        assert _grpc(svc, "RunPodSandbox", pb.RunPodSandboxRequest(config=pod_config())) == \
            ("RESOURCE_EXHAUSTED", "over quota")
        team = pod_config()
        team.metadata.namespace = "team"
        assert _grpc(svc, "RunPodSandbox", pb.RunPodSandboxRequest(config=team)) == \
            ("ABORTED", "over quota")  # the nearest class wins
    assert caplog.records == []  # a mapped error is expected: no traceback logged
    # podkit's own errors can be given another code too
    code, _ = _grpc(svc, "PodSandboxStatus", pb.PodSandboxStatusRequest(pod_sandbox_id="x"))
    assert code == "FAILED_PRECONDITION"
    assert svc.status_code(PermissionDeniedError("no")) == "PERMISSION_DENIED"


def test_unmapped_own_exceptions_stay_unknown_and_logged(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    def broken(pod: SandboxConfig) -> None:
        raise KeyError("oops")

    svc = _service(tmp_path, admit_pod=[broken])
    with caplog.at_level(logging.ERROR, logger="podkit.cri"):
        code, message = _grpc(svc, "RunPodSandbox", pb.RunPodSandboxRequest(config=pod_config()))
    assert (code, message) == ("UNKNOWN", "RunPodSandbox: unexpected KeyError: 'oops'")
    assert [r.message for r in caplog.records] == ["RunPodSandbox failed unexpectedly"]


@pytest.mark.parametrize(("codes", "problem"), [
    ({QuotaError: "OK"}, r"status_codes\[QuotaError\] 'OK': not a gRPC status code name"),
    ({QuotaError: "permission_denied"}, "not a gRPC status code name"),
    ({"QuotaError": "ABORTED"}, "status_codes key 'QuotaError': not an exception class"),
])
def test_status_codes_are_checked(tmp_path: Path, codes: dict[Any, str], problem: str) -> None:
    with pytest.raises(InvalidArgumentError, match=problem):
        _service(tmp_path, status_codes=codes)


# -- Version --------------------------------------------------------------------------------


def test_version_names_the_runtime_given(tmp_path: Path) -> None:
    import podkit

    default = _service(tmp_path).Version(pb.VersionRequest())
    assert (default.runtime_name, default.runtime_version) == ("podkit", podkit.__version__)
    svc = _service(tmp_path, runtime_name="teamcri", runtime_version="2.1.0")
    v = svc.Version(pb.VersionRequest())
    assert (v.runtime_name, v.runtime_version, v.runtime_api_version, v.version) == (
        "teamcri", "2.1.0", "v1", "0.1.0")


# -- the kept-bytes fast path and overrides -------------------------------------------------


class Filtered(CRIService):
    """Lists and statuses only for containers not labelled ``hidden``."""

    def ListContainers(self, request: pb.ListContainersRequest) -> pb.ListContainersResponse:
        out = super().ListContainers(request)
        keep = [c for c in out.containers if "hidden" not in c.labels]
        del out.containers[:]
        out.containers.extend(keep)
        return out


class OwnTwin(CRIService):
    def ListContainers(self, request: pb.ListContainersRequest) -> pb.ListContainersResponse:
        return pb.ListContainersResponse()

    def list_containers_wire(self, request: pb.ListContainersRequest) -> bytes:
        return b"own twin"


def test_the_bytes_twin_answers_only_for_the_method_it_mirrors(tmp_path: Path) -> None:
    store = ImageStore(tmp_path / "images")
    manager = FakePodManager(tmp_path / "root", tmp_path / "state", images=store,
                             networks=FakeNetworks())
    stock = CRIService(manager, store)
    assert {name for name in WIRE_METHODS if bytes_twin(stock, name)} == set(WIRE_METHODS)
    assert bytes_twin(Filtered(manager, store), "ListContainers") is None
    assert bytes_twin(Filtered(manager, store), "ContainerStatus") is not None
    assert bytes_twin(OwnTwin(manager, store), "ListContainers")(None) == b"own twin"
    patched = CRIService(manager, store)
    patched.ListPodSandbox = lambda request: pb.ListPodSandboxResponse()  # type: ignore[method-assign]
    assert bytes_twin(patched, "ListPodSandbox") is None
    assert bytes_twin(stock, "Version") is None


def test_an_overridden_list_answers_through_the_adapter(tmp_path: Path) -> None:
    store = ImageStore(tmp_path / "images")
    manager = FakePodManager(tmp_path / "root", tmp_path / "state", images=store,
                             networks=FakeNetworks())
    svc = Filtered(manager, store)
    sid = _run(svc, "pod")
    shown = _create(svc, sid, "shown")
    _create(svc, sid, "secret", labels={"hidden": "yes"})
    code, answer = _grpc(svc, "ListContainers", pb.ListContainersRequest(), wire=True)
    assert code == "OK" and [c.id for c in answer.containers] == [shown]
