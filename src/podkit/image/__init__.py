"""OCI images on the runtime side: store, import, pull, unpack, rootfs and image config.

```python
from podkit import image

store = image.ImageStore("/var/lib/podkit")
image.import_image(store, "busybox.tar")                 # OCI layout/archive or docker save
image.build_from_rootfs(store, "rootfs", "localhost/app:1")   # a one-layer image of a directory
image.pull(store, "localhost:5000/app:1")                 # OCI distribution registry
rootfs = image.create_rootfs(store, "localhost:5000/app:1", "ctr1")   # overlay or copy
opts = image.spec_opts(store.config("localhost:5000/app:1"), rootfs=rootfs.path)
```
"""

from typing import TYPE_CHECKING

from podkit._lazy import lazy_names

# Eager: the function ``unpack`` must win over the submodule of the same name, which a later
# ``import podkit.image.unpack`` would otherwise leave as this package's ``unpack``.
from podkit.image.unpack import (
    Rootfs,
    create_rootfs,
    get_rootfs,
    list_rootfs,
    overlay_supported,
    remove_rootfs,
    unmount_rootfs,
    unpack,
)

if TYPE_CHECKING:
    from podkit.image.auth import AuthFile, CredentialHelperError, Credentials, auth_file_path
    from podkit.image.build import build_from_rootfs
    from podkit.image.config import ImageConfig, parse_config, process_args, spec_opts
    from podkit.image.descriptor import Descriptor, Platform, host_platform
    from podkit.image.errors import (
        BlobNotFoundError,
        DigestMismatchError,
        HostsConfigError,
        ImageError,
        ImageInUseError,
        ImageNotFoundError,
        PlatformNotFoundError,
        RegistryError,
        UnsafeLayerError,
        UnsupportedMediaTypeError,
    )
    from podkit.image.export import export_image
    from podkit.image.hosts import RegistryHost, RegistryHosts
    from podkit.image.layout import import_image
    from podkit.image.lookup import AmbiguousImageError, ImageQuery
    from podkit.image.progress import Progress, ProgressCallback
    from podkit.image.reference import Reference, ReferenceError, parse_reference
    from podkit.image.registry import Registry, pull, push
    from podkit.image.store import GCResult, Image, ImageStore, chain_ids
    from podkit.image.usage import DiskUsage

# Each public name and the module defining it, imported on first use (PEP 562): a CRI server
# needs the store before its first reply, not the registry client (http.client, ssl, email).
_LAZY: dict[str, str] = {
    "AuthFile": "auth",
    "CredentialHelperError": "auth",
    "Credentials": "auth",
    "auth_file_path": "auth",
    "build_from_rootfs": "build",
    "ImageConfig": "config",
    "parse_config": "config",
    "process_args": "config",
    "spec_opts": "config",
    "Descriptor": "descriptor",
    "Platform": "descriptor",
    "host_platform": "descriptor",
    "BlobNotFoundError": "errors",
    "DigestMismatchError": "errors",
    "HostsConfigError": "errors",
    "ImageError": "errors",
    "ImageInUseError": "errors",
    "ImageNotFoundError": "errors",
    "PlatformNotFoundError": "errors",
    "RegistryError": "errors",
    "UnsafeLayerError": "errors",
    "UnsupportedMediaTypeError": "errors",
    "export_image": "export",
    "RegistryHost": "hosts",
    "RegistryHosts": "hosts",
    "import_image": "layout",
    "AmbiguousImageError": "lookup",
    "ImageQuery": "lookup",
    "Progress": "progress",
    "ProgressCallback": "progress",
    "Reference": "reference",
    "ReferenceError": "reference",
    "parse_reference": "reference",
    "Registry": "registry",
    "pull": "registry",
    "push": "registry",
    "GCResult": "store",
    "Image": "store",
    "ImageStore": "store",
    "chain_ids": "store",
    "DiskUsage": "usage",
}


__getattr__, __dir__ = lazy_names(__name__, _LAZY, globals())


__all__ = [
    "AmbiguousImageError",
    "AuthFile",
    "BlobNotFoundError",
    "CredentialHelperError",
    "Credentials",
    "Descriptor",
    "DigestMismatchError",
    "DiskUsage",
    "GCResult",
    "HostsConfigError",
    "Image",
    "ImageConfig",
    "ImageError",
    "ImageInUseError",
    "ImageNotFoundError",
    "ImageQuery",
    "ImageStore",
    "Platform",
    "PlatformNotFoundError",
    "Progress",
    "ProgressCallback",
    "Reference",
    "ReferenceError",
    "Registry",
    "RegistryError",
    "RegistryHost",
    "RegistryHosts",
    "Rootfs",
    "UnsafeLayerError",
    "UnsupportedMediaTypeError",
    "auth_file_path",
    "build_from_rootfs",
    "chain_ids",
    "create_rootfs",
    "export_image",
    "get_rootfs",
    "host_platform",
    "import_image",
    "list_rootfs",
    "overlay_supported",
    "parse_config",
    "parse_reference",
    "process_args",
    "pull",
    "push",
    "remove_rootfs",
    "spec_opts",
    "unmount_rootfs",
    "unpack",
]
