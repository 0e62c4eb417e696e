"""The image service RPCs: list, status, pull, remove and filesystem usage, over the image
store (one CRI image per image ID, its names as repo tags).

As containerd's CRI plugin: the pause image is pinned; RemoveImage drops every name of the
image even while containers use it (their root filesystems keep the layers they need);
ImageFsInfo counts the content and snapshot dirs; pulls go through :class:`Puller`.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Callable, Iterator

from podkit import image as _image
from podkit.cri import api_pb2 as pb
from podkit.cri.service.base import ServiceBase
from podkit.cri.service.pulls import CredentialLookup, Puller
from podkit.cri.service.replies import image_to_cri
from podkit.cri.service.requests import batches, required
from podkit.errors import InvalidArgumentError, NotFoundError, PodkitError, quote

__all__ = ["ImageRPCs"]


class ImageRPCs(ServiceBase):
    """ListImages, StreamImages, ImageStatus, PullImage, RemoveImage and ImageFsInfo."""

    puller: Puller

    def _init_images(self, hosts: _image.RegistryHosts | None,
                     auth: CredentialLookup | None) -> None:
        """Set up pulls: ``hosts`` (registry mirrors, TLS), ``auth`` (fallback credentials)."""
        self.puller = Puller(self.store, hosts, auth)

    def _pinned_id(self, records: list[_image.Image]) -> str:
        """The image ID of the pause image among ``records`` ("" if absent or a rootfs)."""
        try:
            found = _image.ImageQuery.parse(self.pause_image).match(records)
        except _image.ReferenceError:
            return ""
        return found[0].config.digest if found else ""

    def _image_message(self, group: list[_image.Image], pinned_id: str) -> pb.Image:
        return image_to_cri(group, self.store.config(group[0]),
                            pinned=group[0].config.digest == pinned_id)

    def _find_image(self, ref: str) -> tuple[list[_image.Image], list[_image.Image]]:
        """Every record of the image ``ref`` names in any form (``podkit.image.lookup``; ``[]``
        when none), and every record of the store."""
        records = self.store.list()
        try:
            named = _image.ImageQuery.parse(ref).match(records)
        except _image.ReferenceError as exc:
            raise InvalidArgumentError(f"image.image {quote(ref)}: {exc}") from None
        image_id = named[0].config.digest if named else None
        return [r for r in records if r.config.digest == image_id], records

    def ListImages(self, request: pb.ListImagesRequest) -> pb.ListImagesResponse:
        """Every image (one entry per image ID, its names as repo tags), or the one the
        filter names (in any form ``ImageStatus`` takes)."""
        out = pb.ListImagesResponse()
        ref = request.filter.image.image if request.HasField("filter") else ""
        if ref:
            group, records = self._find_image(ref)
            groups = {ref: group} if group else {}
        else:
            records = self.store.list()
            groups = {}
            for img in records:
                groups.setdefault(img.config.digest, []).append(img)
        pinned_id = self._pinned_id(records)
        out.images.extend(self._image_message(g, pinned_id) for g in groups.values())
        return out

    def StreamImages(self, request: pb.StreamImagesRequest,
                     is_active: Callable[[], bool] = lambda: True,
                     ) -> Iterator[pb.StreamImagesResponse]:
        """``ListImages`` in batches."""
        items = list(self.ListImages(pb.ListImagesRequest(filter=request.filter)).images)
        return batches(items, lambda b: pb.StreamImagesResponse(images=b), is_active)

    def ImageStatus(self, request: pb.ImageStatusRequest) -> pb.ImageStatusResponse:
        """The image, or an empty response when it is not present (as kubelet expects).

        ``image.image`` may be a name, ``REPO@DIGEST``, ``REPO:TAG@DIGEST``, the image ID or a
        unique prefix of it (containerd's forms); one that can name no image is
        ``INVALID_ARGUMENT``."""
        ref = required(request.image.image, "image.image")
        out = pb.ImageStatusResponse()
        group, records = self._find_image(ref)
        if group:
            out.image.CopyFrom(self._image_message(group, self._pinned_id(records)))
            if request.verbose:
                cfg = self.store.config(group[0])
                out.info["info"] = json.dumps({
                    "imageSpec": {"config": {
                        "Env": list(cfg.env), "Entrypoint": cfg.entrypoint, "Cmd": cfg.cmd,
                        "WorkingDir": cfg.working_dir, "User": cfg.user,
                        "StopSignal": cfg.stop_signal, "Labels": cfg.labels}},
                    "chainID": group[0].chain_ids[-1] if group[0].diff_ids else ""})
        return out

    def PullImage(self, request: pb.PullImageRequest) -> pb.PullImageResponse:
        """Pull through the registry hosts (with the request's credentials, else the auth
        file's); the image ID. This platform's image of an index, or an error naming those
        there are."""
        ref = required(request.image.image, "image.image")
        auth = request.auth if request.HasField("auth") else None
        try:
            img = self.puller.pull(ref, auth)
        except _image.ReferenceError as exc:
            raise InvalidArgumentError(f"image.image {quote(ref)}: {exc}") from None
        return pb.PullImageResponse(image_ref=img.config.digest)

    def RemoveImage(self, request: pb.RemoveImageRequest) -> pb.RemoveImageResponse:
        """Forget every name of the image ``image.image`` names (in any form ``ImageStatus``
        takes); an image already gone succeeds, as kubelet and containerd expect.

        Like containerd, an image containers use is removed too: their root filesystems keep
        the snapshots they were made from (gc spares those) until the containers go."""
        ref = required(request.image.image, "image.image")
        group, _ = self._find_image(ref)
        if not group:
            return pb.RemoveImageResponse()
        for img in group:
            with contextlib.suppress(NotFoundError):
                self.store.remove(img)
        # blobs and snapshots no image or rootfs uses (containerd collects them too)
        with contextlib.suppress(PodkitError, OSError):
            self.store.gc()
        return pb.RemoveImageResponse()

    def ImageFsInfo(self, request: pb.ImageFsInfoRequest) -> pb.ImageFsInfoResponse:
        """Bytes and inodes used by the image store's content and snapshots (as ``du``
        counts them), on the filesystem mounted at ``fs_id.mountpoint``."""
        usage = self.store.usage()
        out = pb.ImageFsInfoResponse()
        fs = out.image_filesystems.add(timestamp=time.time_ns())
        fs.fs_id.mountpoint = usage.mountpoint
        fs.used_bytes.value = usage.bytes
        fs.inodes_used.value = usage.inodes
        return out
