"""The runtime's own RPCs and the stats RPCs: Version, Status, RuntimeConfig,
UpdateRuntimeConfig, and the container and pod stats (with the CPU rate kubelet shows)."""

from __future__ import annotations

import contextlib
import json

from podkit.cri import api_pb2 as pb
from podkit.cri.service.base import RUNTIME_NAME, ServiceBase
from podkit.cri.service.replies import (
    container_stats_to_cri,
    filesystem_usage,
    sandbox_stats_to_cri,
)
from podkit.cri.service.requests import required
from podkit.errors import NotFoundError, quote
from podkit.sandbox import (
    Container,
    ContainerFilter,
    ContainerState,
    SandboxFilter,
    SandboxState,
)

__all__ = ["KUBE_API_VERSION", "RUNTIME_API_VERSION", "RUNTIME_NAME", "StatusRPCs"]

RUNTIME_API_VERSION = "v1"
"""``VersionResponse.runtime_api_version`` (the CRI package version)."""
KUBE_API_VERSION = "0.1.0"
"""``VersionResponse.version``: the kubelet-facing API version every CRI runtime reports."""


class StatusRPCs(ServiceBase):
    """Version, Status, RuntimeConfig, UpdateRuntimeConfig and the stats RPCs."""


    def Version(self, request: pb.VersionRequest) -> pb.VersionResponse:
        """The service's ``runtime_name`` and ``runtime_version``; the CRI API version."""
        return pb.VersionResponse(version=KUBE_API_VERSION, runtime_name=self.runtime_name,
                                  runtime_version=self.runtime_version,
                                  runtime_api_version=RUNTIME_API_VERSION)

    def Status(self, request: pb.StatusRequest) -> pb.StatusResponse:
        """RuntimeReady (the runtime answers) and NetworkReady (CNI STATUS of every network);
        the handlers' features: ``user_namespaces`` where this host can run pods with their
        own (``SandboxManager.user_namespaces``; the reason why not in the verbose info)."""
        out = pb.StatusResponse()
        rt = out.status.conditions.add(type="RuntimeReady", status=True)
        try:
            self.manager.runtime.list()
        except Exception as exc:
            rt.status, rt.reason, rt.message = False, "RuntimeNotReady", str(exc)
        self._network_condition(out.status.conditions.add(type="NetworkReady", status=True))
        userns = self.manager.user_namespaces()  # the host's file systems, dirs and kernel
        for name in ("", self.runtime_handler):
            h = out.runtime_handlers.add(name=name)
            h.features.recursive_read_only_mounts = True
            h.features.user_namespaces = not userns
        out.features.supplemental_groups_policy = True
        if request.verbose:
            out.info["config"] = json.dumps({
                "runtimeHandler": self.runtime_handler, "podCIDR": self.pod_cidr,
                "pauseImage": self.pause_image, "root": str(self.manager.root_dir),
                "cgroupDriver": str(self.manager.cgroup_driver),
                "state": str(self.manager.state_dir),
                "userNamespaces": userns or "supported"})
        return out

    def _network_condition(self, net: pb.RuntimeCondition) -> None:
        """NetworkReady: the networks are loaded (late ones now) and answer CNI STATUS."""
        problem = self.manager.load_networks() if self.manager.networks is None else ""
        nets = self.manager.networks
        if nets is None:
            net.status, net.reason = False, "NetworkPluginNotReady"
            net.message = problem or "no CNI network configured (host-network pods only)"
            return
        try:
            nets.status()
        except Exception as exc:
            net.status, net.reason = False, "NetworkPluginNotReady"
            net.message = f"cni plugin not initialized: {exc}"

    def RuntimeConfig(self, request: pb.RuntimeConfigRequest) -> pb.RuntimeConfigResponse:
        """The manager's cgroup driver (kubelet configures its own to match)."""
        out = pb.RuntimeConfigResponse()
        out.linux.cgroup_driver = (pb.SYSTEMD if self.manager.cgroup_driver == "systemd"
                                   else pb.CGROUPFS)
        return out

    def UpdateRuntimeConfig(self, request: pb.UpdateRuntimeConfigRequest,
                            ) -> pb.UpdateRuntimeConfigResponse:
        """Remember the pod CIDR kubelet sends (the CNI config is the operator's)."""
        self.pod_cidr = request.runtime_config.network_config.pod_cidr
        return pb.UpdateRuntimeConfigResponse()

    # -- stats ------------------------------------------------------------------------------

    def _container_stats(self, c: Container) -> pb.ContainerStats:
        stats = self.manager.container_stats(c.id)
        img = self._image_info(c)
        layer = None
        if img.rootfs_id:
            upper = self.store.root / "containers" / img.rootfs_id / "upper"
            layer = filesystem_usage(upper if upper.is_dir() else img.rootfs)
        out = container_stats_to_cri(stats, c, layer)
        self._cpu_rate(c.id, out.cpu)
        return out

    def _cpu_rate(self, key: str, cpu: pb.CpuUsage) -> None:
        """``usage_nano_cores`` from this sample and the previous one of ``key`` (kubelet's
        ``kubectl top`` numbers); unset on the first sample."""
        now, used = cpu.timestamp, cpu.usage_core_nano_seconds.value
        with self._lock:
            prev = self._cpu_samples.get(key)
            self._cpu_samples[key] = (now, used)
        if prev is not None and now > prev[0] and used >= prev[1]:
            cpu.usage_nano_cores.value = (used - prev[1]) * 10**9 // (now - prev[0])

    def ContainerStats(self, request: pb.ContainerStatsRequest) -> pb.ContainerStatsResponse:
        """CPU, memory and writable layer usage of one container."""
        c = self.manager.container_status(required(request.container_id, "container_id"))
        out = pb.ContainerStatsResponse()
        out.stats.CopyFrom(self._container_stats(c))
        return out

    def ListContainerStats(self, request: pb.ListContainerStatsRequest,
                           ) -> pb.ListContainerStatsResponse:
        """Stats of the running containers matching the filter."""
        f = request.filter
        cf = ContainerFilter(id=f.id, pod_sandbox_id=f.pod_sandbox_id,
                             state=ContainerState.CONTAINER_RUNNING,
                             label_selector=dict(f.label_selector))
        out = pb.ListContainerStatsResponse()
        for c in self.manager.list_containers(cf):
            with contextlib.suppress(NotFoundError):
                out.stats.append(self._container_stats(c))
        return out

    def _sandbox_stats(self, id: str) -> pb.PodSandboxStats:
        sb = self._fresh_sandbox(id)
        if sb is None:
            raise NotFoundError(f"pod_sandbox_id {quote(id)}: no such pod sandbox")
        stats = self.manager.sandbox_stats(id)
        running = {c.id: c for c in self.manager.list_containers(ContainerFilter(
            pod_sandbox_id=id, state=ContainerState.CONTAINER_RUNNING)) if c.sandbox_id == id}
        out = sandbox_stats_to_cri(stats, sb, running)
        self._cpu_rate(id, out.linux.cpu)
        for cs in out.linux.containers:
            self._cpu_rate(cs.attributes.id, cs.cpu)
        return out

    def PodSandboxStats(self, request: pb.PodSandboxStatsRequest) -> pb.PodSandboxStatsResponse:
        """The pod's CPU, memory and process usage, with its running containers' stats."""
        out = pb.PodSandboxStatsResponse()
        out.stats.CopyFrom(self._sandbox_stats(
            required(request.pod_sandbox_id, "pod_sandbox_id")))
        return out

    def ListPodSandboxStats(self, request: pb.ListPodSandboxStatsRequest,
                            ) -> pb.ListPodSandboxStatsResponse:
        """Stats of the ready pods matching the filter (id prefix, labels)."""
        f = request.filter
        sf = SandboxFilter(id=f.id, state=SandboxState.SANDBOX_READY,
                           label_selector=dict(f.label_selector))
        out = pb.ListPodSandboxStatsResponse()
        for sb in self.manager.list_sandboxes(sf):
            with contextlib.suppress(NotFoundError):
                out.stats.append(self._sandbox_stats(sb.id))
        return out
