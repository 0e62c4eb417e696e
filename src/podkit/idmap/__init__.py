"""ID mapping: user namespaces with ID maps, and ID-mapped mounts, for pods whose root is not
the host's root.

- :mod:`~podkit.idmap.maps`: ``IDMap`` and ``IDRange``, the ``uid_map``/``gid_map`` ranges.
- :mod:`~podkit.idmap.userns`: ``Holder``, a process in a new user namespace while its files
  are pinned; ``owner`` and ``open_user_namespace`` give namespace descriptors.
- :mod:`~podkit.idmap.mounts`: ``mount_idmapped`` (the kernel's ``MOUNT_ATTR_IDMAP``), the host
  check ``supported``, ``unreachable`` paths, and unmounting.

A mechanism under the pods layer and the image store: pods get their user namespace from here,
image rootfs their ID-mapped layers (or, where a file system cannot map, a copy chowned by
``IDMap.host_uid``/``host_gid``).
"""

from podkit.idmap.maps import MAX_ID, IDMap, IDRange, coalesce
from podkit.idmap.mounts import (
    mount_idmapped,
    mounts_under,
    supported,
    unmount,
    unmount_under,
    unreachable,
)
from podkit.idmap.userns import Holder, IDMapError, UserNamespace, open_user_namespace, owner

__all__ = [
    "MAX_ID",
    "Holder",
    "IDMap",
    "IDMapError",
    "IDRange",
    "UserNamespace",
    "coalesce",
    "mount_idmapped",
    "mounts_under",
    "open_user_namespace",
    "owner",
    "supported",
    "unmount",
    "unmount_under",
    "unreachable",
]
