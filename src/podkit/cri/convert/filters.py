"""List filters both ways: ``PodSandboxFilter`` and ``ContainerFilter``."""

from __future__ import annotations

from typing import Any

from podkit.cri import api_pb2 as pb
from podkit.cri.convert.fields import E, enum_number, enum_value, fill_fields, set_field
from podkit.sandbox import (
    ContainerFilter,
    ContainerState,
    SandboxFilter,
    SandboxState,
)

__all__ = [
    "container_filter_from_cri",
    "container_filter_to_cri",
    "pod_sandbox_filter_from_cri",
    "pod_sandbox_filter_to_cri",
]


def _filter_state_from(msg: Any, cls: type[E], path: str) -> E | None:
    """A CRI filter's ``state`` (a ``*StateValue`` wrapper) as ``cls``; None when unset."""
    if not msg.HasField("state"):
        return None
    return enum_value(cls, msg.state.state, f"{path}.state.state")


def _filter_state_to(out: Any, cls: type[E], state: E | None, path: str) -> None:
    """Set a CRI filter's ``state`` wrapper from ``state`` (left unset when None)."""
    if state is None:
        return
    set_field(out.state, "state", enum_number(cls, state, f"{path}.state.state"), f"{path}.state")
    out.state.SetInParent()


def pod_sandbox_filter_from_cri(
    msg: pb.PodSandboxFilter | None, *, path: str = "filter"
) -> SandboxFilter:
    """CRI ``PodSandboxFilter`` (possibly unset) to the manager's ``SandboxFilter``."""
    if msg is None:
        return SandboxFilter()
    return SandboxFilter(
        id=msg.id,
        state=_filter_state_from(msg, SandboxState, path),
        label_selector=dict(msg.label_selector),
    )


def pod_sandbox_filter_to_cri(f: SandboxFilter, *, path: str = "filter") -> pb.PodSandboxFilter:
    """A ``SandboxFilter`` to CRI ``PodSandboxFilter``."""
    out = pb.PodSandboxFilter()
    fill_fields(out, path, {"id": f.id, "label_selector": dict(f.label_selector)})
    _filter_state_to(out, SandboxState, f.state, path)
    return out


def container_filter_from_cri(
    msg: pb.ContainerFilter | None, *, path: str = "filter"
) -> ContainerFilter:
    """CRI ``ContainerFilter`` (possibly unset) to the manager's ``ContainerFilter``."""
    if msg is None:
        return ContainerFilter()
    return ContainerFilter(
        id=msg.id,
        state=_filter_state_from(msg, ContainerState, path),
        pod_sandbox_id=msg.pod_sandbox_id,
        label_selector=dict(msg.label_selector),
    )


def container_filter_to_cri(f: ContainerFilter, *, path: str = "filter") -> pb.ContainerFilter:
    """A ``ContainerFilter`` to CRI ``ContainerFilter``."""
    out = pb.ContainerFilter()
    fill_fields(out, path, {"id": f.id, "pod_sandbox_id": f.pod_sandbox_id,
                      "label_selector": dict(f.label_selector)})
    _filter_state_to(out, ContainerState, f.state, path)
    return out
