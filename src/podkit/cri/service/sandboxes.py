"""The pod sandbox RPCs of the runtime service: run, stop, remove, status, list, and the
port-forward URL."""

from __future__ import annotations

import json

import attrs

from podkit.cri import api_pb2 as pb
from podkit.cri.convert import (
    linux_resources_from_cri,
    pod_sandbox_filter_from_cri,
    sandbox_config_from_cri,
)
from podkit.cri.service.exits import ContainerEvents
from podkit.cri.service.hooks import pod_policy
from podkit.cri.service.replies import sandbox_status_to_cri
from podkit.cri.service.requests import now, required, with_field_prefix
from podkit.errors import ConflictError, InvalidArgumentError, NotFoundError, quote
from podkit.sandbox import (
    ContainerFilter,
    ContainerState,
    Sandbox,
    SandboxFilter,
    SandboxState,
)

__all__ = ["SandboxRPCs"]


class SandboxRPCs(ContainerEvents):
    """RunPodSandbox, StopPodSandbox, RemovePodSandbox, UpdatePodSandboxResources,
    PodSandboxStatus, ListPodSandbox and PortForward."""

    def RunPodSandbox(self, request: pb.RunPodSandboxRequest) -> pb.RunPodSandboxResponse:
        """The pod hooks, then network namespace, CNI, sandbox files and the pause; undone on
        any failure."""
        if request.runtime_handler not in ("", self.runtime_handler):
            raise InvalidArgumentError(
                f"runtime_handler {quote(request.runtime_handler)}: not configured (this server "
                f"has {self.runtime_handler!r} and the default '')")
        config = pod_policy(sandbox_config_from_cri(request.config, path="config"),
                            self.mutate_pod, self.admit_pod)
        if self.manager.networks is None:
            self.manager.load_networks()
        sb = with_field_prefix("config", lambda: self.manager.run_sandbox(config))
        self._publish(sb.id, pb.CONTAINER_CREATED_EVENT, sb.id)
        self._publish(sb.id, pb.CONTAINER_STARTED_EVENT, sb.id)
        return pb.RunPodSandboxResponse(pod_sandbox_id=sb.id)

    def StopPodSandbox(self, request: pb.StopPodSandboxRequest) -> pb.StopPodSandboxResponse:
        """Kill the pod's containers and pause, tear the network down; unknown IDs succeed."""
        id = required(request.pod_sandbox_id, "pod_sandbox_id")
        running = [c.id for c in self.manager.list_containers(ContainerFilter(
            pod_sandbox_id=id, state=ContainerState.CONTAINER_RUNNING)) if c.sandbox_id == id]
        self.manager.stop_sandbox(id)
        for cid in running:
            self._publish_container(cid, pb.CONTAINER_STOPPED_EVENT)
        self._publish(id, pb.CONTAINER_STOPPED_EVENT, id)
        return pb.StopPodSandboxResponse()

    def RemovePodSandbox(self, request: pb.RemovePodSandboxRequest,
                         ) -> pb.RemovePodSandboxResponse:
        """Stop, remove every container (and its rootfs) and the pod; unknown IDs succeed."""
        id = required(request.pod_sandbox_id, "pod_sandbox_id")
        sb = self._fresh_sandbox(id)
        if sb is not None and sb.state == SandboxState.SANDBOX_READY:
            self.StopPodSandbox(pb.StopPodSandboxRequest(pod_sandbox_id=id))
        containers = [c for c in self.manager.list_containers(ContainerFilter(pod_sandbox_id=id))
                      if c.sandbox_id == id]
        self.manager.remove_sandbox(id)
        self._pauses.forget(id)
        self._listed_pods.forget(id)
        for c in containers:
            self._forget(c.id)
            self._publish(c.id, pb.CONTAINER_DELETED_EVENT, id)
        if sb is not None:
            self._publish(id, pb.CONTAINER_DELETED_EVENT, id)
        with self._lock:
            self._cpu_samples.pop(id, None)
        return pb.RemovePodSandboxResponse()

    def UpdatePodSandboxResources(self, request: pb.UpdatePodSandboxResourcesRequest,
                                  ) -> pb.UpdatePodSandboxResourcesResponse:
        """Accept the pod's new overhead and resources (containerd: only NRI sees them; the
        containers' own limits come through UpdateContainerResources)."""
        id = required(request.pod_sandbox_id, "pod_sandbox_id")
        if self._fresh_sandbox(id) is None:
            raise NotFoundError(f"pod_sandbox_id {quote(id)}: no such pod sandbox")
        for field in ("overhead", "resources"):
            if request.HasField(field):
                linux_resources_from_cri(getattr(request, field), path=field)
        return pb.UpdatePodSandboxResourcesResponse()

    def PodSandboxStatus(self, request: pb.PodSandboxStatusRequest,
                         ) -> pb.PodSandboxStatusResponse:
        """The pod's state, IPs and namespaces, and its containers' statuses."""
        id = required(request.pod_sandbox_id, "pod_sandbox_id")
        sb = self.manager.sandbox_status(id)
        out = pb.PodSandboxStatusResponse(timestamp=now())
        out.status.CopyFrom(sandbox_status_to_cri(sb))
        for c in self.manager.list_containers(ContainerFilter(pod_sandbox_id=id)):
            if c.sandbox_id == id:
                out.containers_statuses.append(self._status(c))
        if request.verbose:
            pause = self.manager.pause
            out.info["info"] = json.dumps({
                "pid": sb.pid, "netNamespacePath": sb.netns_path, "cgroupsPath": sb.cgroups_path,
                "image": pause.image if pause else "",
                "runtimeHandler": self.runtime_handler})
        return out

    def _matching_pods(self, request: pb.ListPodSandboxRequest) -> list[Sandbox]:
        f = (pod_sandbox_filter_from_cri(request.filter) if request.HasField("filter")
             else SandboxFilter())
        pods = self.manager.list_sandboxes(attrs.evolve(f, state=None))
        survey = self._pause_survey()  # one epoll_wait for every pause
        out = []
        for sb in pods:
            fresh = self._fresh(sb, survey)
            if fresh is not None and (f.state is None or fresh.state == f.state):
                out.append(fresh)
        if not request.HasField("filter"):
            self._listed_pods.retain({sb.id for sb in pods})
        return out

    def ListPodSandbox(self, request: pb.ListPodSandboxRequest) -> pb.ListPodSandboxResponse:
        """Pods matching the filter (id prefix, state, labels)."""
        out = pb.ListPodSandboxResponse()
        out.items.extend([self._sandbox_item(sb) for sb in self._matching_pods(request)])
        return out

    def list_pod_sandbox_wire(self, request: pb.ListPodSandboxRequest) -> bytes:
        """:meth:`ListPodSandbox` serialized (what the gRPC server sends): the kept items'
        bytes joined."""
        return b"".join([self._sandbox_wire(sb) for sb in self._matching_pods(request)])

    def PortForward(self, request: pb.PortForwardRequest) -> pb.PortForwardResponse:
        """The URL of a port-forward session into a ready pod."""
        streaming = self._streaming()
        sb = self.manager.sandbox_status(required(request.pod_sandbox_id, "pod_sandbox_id"))
        if sb.state != SandboxState.SANDBOX_READY:
            raise ConflictError(f"pod sandbox {sb.id} is not ready")
        return pb.PortForwardResponse(url=streaming.get_port_forward(request))
