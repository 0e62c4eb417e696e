"""ID mapping: user namespaces with ID maps, and ID-mapped mounts, for pods whose root is not
the host's root.

- :mod:`~podkit.idmap.maps`: ``IDMap`` and ``IDRange``, the ``uid_map``/``gid_map`` ranges.
- :mod:`~podkit.idmap.userns`: ``Holder``, a process in a new user namespace while its files
  are pinned; ``owner`` and ``open_user_namespace`` give namespace descriptors.
- :mod:`~podkit.idmap.subid`: ``/etc/subuid`` and ``/etc/subgid`` (``parse_subids``,
  ``read_subids``) and a rootless user's map (``rootless_map``, ``user_map``: a ``UserMap``).
- :mod:`~podkit.idmap.rootless`: ``user_holder``, a rootless user's own user namespace (maps
  by ``newuidmap``/``newgidmap``), and ``default_dirs``, where a user's podkit keeps its files.
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
from podkit.idmap.rootless import Dirs, default_dirs, user_holder, write_user_maps
from podkit.idmap.subid import (
    SubID,
    UserMap,
    owned_subids,
    parse_subids,
    read_subids,
    rootless_map,
    user_map,
)
from podkit.idmap.userns import Holder, IDMapError, UserNamespace, open_user_namespace, owner

__all__ = [
    "MAX_ID",
    "Dirs",
    "Holder",
    "IDMap",
    "IDMapError",
    "IDRange",
    "SubID",
    "UserMap",
    "UserNamespace",
    "coalesce",
    "default_dirs",
    "mount_idmapped",
    "mounts_under",
    "open_user_namespace",
    "owned_subids",
    "owner",
    "parse_subids",
    "read_subids",
    "rootless_map",
    "supported",
    "unmount",
    "unmount_under",
    "unreachable",
    "user_holder",
    "user_map",
    "write_user_maps",
]
