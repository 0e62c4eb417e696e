"""Moved to :mod:`podkit.cri.service.replies`; kept so the old import path works.

``container_status_to_cri`` here is ``replies.container_status_reply`` (the name
``podkit.cri.container_status_to_cri`` is the conversion of a bare record).
"""

from __future__ import annotations

from podkit.cri.service.replies import (
    ContainerImage,
    container_stats_to_cri,
    container_status_reply,
    container_to_cri,
    filesystem_usage,
    image_to_cri,
    network_usage,
    sandbox_stats_to_cri,
    sandbox_status_to_cri,
    sandbox_to_cri,
    user_from_spec,
)

container_status_to_cri = container_status_reply

__all__ = [
    "ContainerImage",
    "container_stats_to_cri",
    "container_status_to_cri",
    "container_to_cri",
    "filesystem_usage",
    "image_to_cri",
    "network_usage",
    "sandbox_stats_to_cri",
    "sandbox_status_to_cri",
    "sandbox_to_cri",
    "user_from_spec",
]
