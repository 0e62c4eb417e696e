"""The container RPCs of the runtime service: create, start, stop, remove, status, list,
resources, logs, and exec/attach."""

from __future__ import annotations

import json
import os

from podkit.cdi import UnresolvableDevicesError
from podkit.cri import api_pb2 as pb
from podkit.cri.convert import (
    container_config_from_cri,
    container_filter_from_cri,
    linux_resources_from_cri,
)
from podkit.cri.service.exits import ContainerEvents
from podkit.cri.service.hooks import container_policy
from podkit.cri.service.requests import command, required, with_field_prefix
from podkit.errors import ConflictError, InvalidArgumentError, NotFoundError, quote
from podkit.sandbox import Container, ContainerFilter, ContainerState

__all__ = ["ContainerRPCs"]


class ContainerRPCs(ContainerEvents):
    """CreateContainer, StartContainer, StopContainer, RemoveContainer, ListContainers,
    ContainerStatus, UpdateContainerResources, ReopenContainerLog, ExecSync, Exec, Attach."""

    def CreateContainer(self, request: pb.CreateContainerRequest,
                        ) -> pb.CreateContainerResponse:
        """The container hooks, then build the container (CREATED) from the image the config
        names (the manager makes its rootfs and applies the image's defaults); nothing left on
        error."""
        sandbox_id = required(request.pod_sandbox_id, "pod_sandbox_id")
        asked = container_config_from_cri(request.config, path="config")
        pod = self._fresh_sandbox(sandbox_id)
        if pod is None:  # NotFound before any work
            raise NotFoundError(f"pod_sandbox_id {quote(sandbox_id)}: no such pod sandbox")
        config = container_policy(asked, pod, self.mutate_container, self.admit_container)
        ref = config.image
        if not ref:
            raise InvalidArgumentError("config.image.image: required (an image reference)")
        if os.path.isabs(ref) and not os.path.isdir(ref):
            raise NotFoundError(f"config.image.image {quote(ref)}: no such rootfs directory")
        wanted = request.config.image.user_specified_image if ref == asked.image else ""
        meta = {"user_specified_image": wanted} if wanted else {}

        def create() -> str:
            try:
                return self.manager.create_container(sandbox_id, config, meta=meta)
            except (NotFoundError, InvalidArgumentError) as exc:
                if not str(exc).startswith(f"image {ref!r}"):
                    raise
                try:  # the manager's "image 'x': ..." is the request's config.image.image
                    new = type(exc)(f"config.image.{exc}")
                except TypeError:
                    new = InvalidArgumentError(f"config.image.{exc}")
                raise new from exc

        try:
            cid: str = with_field_prefix("config", create)
        except UnresolvableDevicesError as exc:
            raise InvalidArgumentError(
                f"config.CDI_devices / cdi.k8s.io annotations: {exc}") from exc
        self._publish_container(cid, pb.CONTAINER_CREATED_EVENT)
        return pb.CreateContainerResponse(container_id=cid)

    def StartContainer(self, request: pb.StartContainerRequest) -> pb.StartContainerResponse:
        """Start a CREATED container under the supervisor."""
        id = required(request.container_id, "container_id")
        self.manager.start_container(id)
        self._publish_container(id, pb.CONTAINER_STARTED_EVENT)
        return pb.StartContainerResponse()

    def StopContainer(self, request: pb.StopContainerRequest) -> pb.StopContainerResponse:
        """Stop signal, ``timeout`` seconds, SIGKILL; unknown IDs succeed."""
        id = required(request.container_id, "container_id")
        if request.timeout < 0:
            raise InvalidArgumentError(f"timeout {request.timeout}: must not be negative")
        try:
            before = self.manager.container_status(id).state
        except NotFoundError:
            return pb.StopContainerResponse()
        self.manager.stop_container(id, float(request.timeout))
        if before == ContainerState.CONTAINER_RUNNING:
            self._publish_container(id, pb.CONTAINER_STOPPED_EVENT)
        return pb.StopContainerResponse()

    def RemoveContainer(self, request: pb.RemoveContainerRequest) -> pb.RemoveContainerResponse:
        """Force-stop and remove the container and its rootfs; unknown IDs succeed."""
        id = required(request.container_id, "container_id")
        try:
            sandbox_id = self.manager.container_status(id).sandbox_id
        except NotFoundError:
            return pb.RemoveContainerResponse()
        self.manager.remove_container(id)
        self._forget(id)
        self._publish(id, pb.CONTAINER_DELETED_EVENT, sandbox_id)
        return pb.RemoveContainerResponse()

    def _matching_containers(self, request: pb.ListContainersRequest) -> list[Container]:
        f = (container_filter_from_cri(request.filter) if request.HasField("filter")
             else ContainerFilter())
        items = self.manager.list_containers(f)
        if not request.HasField("filter"):
            ids = {c.id for c in items}
            self._listed_containers.retain(ids)
            self._statuses.retain(ids)
        return items

    def ListContainers(self, request: pb.ListContainersRequest) -> pb.ListContainersResponse:
        """Containers matching the filter (id prefix, state, pod, labels)."""
        out = pb.ListContainersResponse()
        out.containers.extend([self._container_item(c)
                               for c in self._matching_containers(request)])
        return out

    def list_containers_wire(self, request: pb.ListContainersRequest) -> bytes:
        """:meth:`ListContainers` serialized (what the gRPC server sends): the kept items'
        bytes joined."""
        return b"".join([self._container_wire(c) for c in self._matching_containers(request)])

    def ContainerStatus(self, request: pb.ContainerStatusRequest) -> pb.ContainerStatusResponse:
        """State, exit code and reason, times, image, mounts, log path, user."""
        id = required(request.container_id, "container_id")
        c = self.manager.container_status(id)
        out = pb.ContainerStatusResponse()
        out.status.CopyFrom(self._status(c))
        if request.verbose:
            img = self._image_info(c)
            out.info["info"] = json.dumps({
                "sandboxID": c.sandbox_id, "pid": c.pid, "cgroupsPath": c.cgroups_path,
                "rootfs": img.rootfs, "imageRef": img.image_ref})
        return out

    def container_status_wire(self, request: pb.ContainerStatusRequest) -> bytes:
        """:meth:`ContainerStatus` serialized (the kept status's bytes unless verbose)."""
        if request.verbose:
            return self.ContainerStatus(request).SerializeToString()
        return self._status_wire(self.manager.container_status(
            required(request.container_id, "container_id")))

    def UpdateContainerResources(self, request: pb.UpdateContainerResourcesRequest,
                                 ) -> pb.UpdateContainerResourcesResponse:
        """New cgroup limits for a container (Linux part; nothing to do without one)."""
        id = required(request.container_id, "container_id")
        self.manager.container_status(id)
        if request.HasField("linux"):
            res = linux_resources_from_cri(request.linux, path="linux")
            self.manager.update_container_resources(id, res)
        return pb.UpdateContainerResourcesResponse()

    def ReopenContainerLog(self, request: pb.ReopenContainerLogRequest,
                           ) -> pb.ReopenContainerLogResponse:
        """Continue a running container's log in a fresh file (after kubelet rotated it)."""
        self.manager.reopen_container_log(required(request.container_id, "container_id"))
        return pb.ReopenContainerLogResponse()

    def ExecSync(self, request: pb.ExecSyncRequest) -> pb.ExecSyncResponse:
        """Run a command in a running container; its exit code and output."""
        id = required(request.container_id, "container_id")
        command(request.cmd)
        if request.timeout < 0:
            raise InvalidArgumentError(f"timeout {request.timeout}: must not be negative")
        res = self.manager.exec_sync(id, list(request.cmd), request.timeout or None)
        return pb.ExecSyncResponse(stdout=res.stdout, stderr=res.stderr, exit_code=res.exit_code)

    def _running(self, id: str) -> None:
        c = self.manager.container_status(id)
        if c.state != ContainerState.CONTAINER_RUNNING:
            raise ConflictError(f"container {quote(id)} is in {c.state.name} state, not running")

    def Exec(self, request: pb.ExecRequest) -> pb.ExecResponse:
        """The URL of a streaming exec session in a running container."""
        streaming = self._streaming()
        self._running(required(request.container_id, "container_id"))
        command(request.cmd)
        if not (request.stdin or request.stdout or request.stderr):
            raise InvalidArgumentError("one of stdin, stdout or stderr must be set")
        return pb.ExecResponse(url=streaming.get_exec(request))

    def Attach(self, request: pb.AttachRequest) -> pb.AttachResponse:
        """The URL of a streaming attach session to a running container."""
        streaming = self._streaming()
        self._running(required(request.container_id, "container_id"))
        return pb.AttachResponse(url=streaming.get_attach(request))
