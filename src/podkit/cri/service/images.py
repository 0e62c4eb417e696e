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

__all__ = ["ImageRPCs", "same_ref"]


def same_ref(a: str, b: str) -> bool:
    """Whether two image references name the same thing once normalised."""
    try:
        return str(_image.parse_reference(a)) == str(_image.parse_reference(b))
    except _image.ReferenceError:
        return False


class ImageRPCs(ServiceBase):
    """ListImages, StreamImages, ImageStatus, PullImage, RemoveImage and ImageFsInfo."""

    puller: Puller

    def _init_images(self, hosts: _image.RegistryHosts | None,
                     auth: CredentialLookup | None) -> None:
        """Set up pulls: ``hosts`` (registry mirrors, TLS), ``auth`` (fallback credentials)."""
        self.puller = Puller(self.store, hosts, auth)

    def _grouped_images(self) -> dict[str, list[_image.Image]]:
        groups: dict[str, list[_image.Image]] = {}
        for img in self.store.list():
            groups.setdefault(img.config.digest, []).append(img)
        return groups

    def _image_message(self, records: list[_image.Image]) -> pb.Image:
        pinned = bool(self.pause_image) and any(
            self.pause_image in (r.name, r.config.digest) or same_ref(self.pause_image, r.name)
            for r in records)
        return image_to_cri(records, self.store.config(records[0]), pinned=pinned)

    def _find_image(self, ref: str) -> list[_image.Image] | None:
        groups = self._grouped_images()
        if ref in groups:
            return groups[ref]
        try:
            img = self.store.get(ref)
        except _image.ReferenceError as exc:
            raise InvalidArgumentError(f"image.image {quote(ref)}: {exc}") from None
        except NotFoundError:
            return None
        return groups.get(img.config.digest, [img])

    def ListImages(self, request: pb.ListImagesRequest) -> pb.ListImagesResponse:
        """Every image (one entry per image ID, its names as repo tags), or the filter's."""
        out = pb.ListImagesResponse()
        ref = request.filter.image.image if request.HasField("filter") else ""
        if ref:
            found = self._find_image(ref)
            if found:
                out.images.append(self._image_message(found))
            return out
        out.images.extend(self._image_message(g) for g in self._grouped_images().values())
        return out

    def StreamImages(self, request: pb.StreamImagesRequest,
                     is_active: Callable[[], bool] = lambda: True,
                     ) -> Iterator[pb.StreamImagesResponse]:
        """``ListImages`` in batches."""
        items = list(self.ListImages(pb.ListImagesRequest(filter=request.filter)).images)
        return batches(items, lambda b: pb.StreamImagesResponse(images=b), is_active)

    def ImageStatus(self, request: pb.ImageStatusRequest) -> pb.ImageStatusResponse:
        """The image, or an empty response when it is not present (as kubelet expects)."""
        ref = required(request.image.image, "image.image")
        out = pb.ImageStatusResponse()
        found = self._find_image(ref)
        if found:
            out.image.CopyFrom(self._image_message(found))
            if request.verbose:
                cfg = self.store.config(found[0])
                out.info["info"] = json.dumps({
                    "imageSpec": {"config": {
                        "Env": list(cfg.env), "Entrypoint": cfg.entrypoint, "Cmd": cfg.cmd,
                        "WorkingDir": cfg.working_dir, "User": cfg.user,
                        "StopSignal": cfg.stop_signal, "Labels": cfg.labels}},
                    "chainID": found[0].chain_ids[-1] if found[0].diff_ids else ""})
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
        """Forget every name of the image (by reference or ID); absent images succeed.

        Like containerd, an image containers use is removed too: their root filesystems keep
        the snapshots they were made from (gc spares those) until the containers go."""
        ref = required(request.image.image, "image.image")
        found = self._find_image(ref)
        for img in found or ():
            with contextlib.suppress(NotFoundError):
                self.store.remove(img.name)
        if found:
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
