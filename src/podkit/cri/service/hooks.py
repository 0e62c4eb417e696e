"""Admission and mutation hooks: a server's own policy on pods and containers, applied before
anything is made.

Hooks see podkit's config models (:class:`~podkit.sandbox.SandboxConfig`,
:class:`~podkit.container.ContainerConfig`: the CRI fields in snake_case, frozen attrs
classes), never protobuf. A mutation hook returns a changed config (``attrs.evolve``) or
``None`` (unchanged); an admission hook returns ``None`` to admit and raises
:class:`~podkit.errors.PermissionDeniedError` to refuse (``PERMISSION_DENIED`` with its
message). Mutations run first, in order, then admissions, in order, as in Kubernetes: no hook
can change a config after the checks saw it. Container hooks also get the pod's record
(:class:`~podkit.sandbox.Sandbox`: the config it was made with, after the pod hooks, and its
IPs), not the copy of the pod's config a CreateContainer request carries.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeVar

from podkit.container import ContainerConfig
from podkit.errors import PodkitError
from podkit.sandbox import Sandbox, SandboxConfig

__all__ = [
    "ContainerAdmission",
    "ContainerMutation",
    "HookError",
    "PodAdmission",
    "PodMutation",
    "container_policy",
    "pod_policy",
]

PodMutation = Callable[[SandboxConfig], SandboxConfig | None]
"""``hook(config) -> changed config | None``, run before RunPodSandbox makes anything."""
PodAdmission = Callable[[SandboxConfig], None]
"""``hook(config)``: returns to admit the pod, raises ``PermissionDeniedError`` to refuse."""
ContainerMutation = Callable[[ContainerConfig, Sandbox], ContainerConfig | None]
"""``hook(config, pod) -> changed config | None``, run before CreateContainer makes anything."""
ContainerAdmission = Callable[[ContainerConfig, Sandbox], None]
"""``hook(config, pod)``: returns to admit the container, raises ``PermissionDeniedError``."""

C = TypeVar("C", SandboxConfig, ContainerConfig)


class HookError(PodkitError):
    """A hook returned what a hook may not (the request is refused: ``UNKNOWN``)."""


def _name(hook: object) -> str:
    return str(getattr(hook, "__qualname__", None) or repr(hook))


def _apply(kind: str, config: C, mutations: Sequence[Callable[..., C | None]],
           admissions: Sequence[Callable[..., None]], *context: object) -> C:
    for hook in mutations:
        out = hook(config, *context)
        if out is None:
            continue
        if type(out) is not type(config):
            raise HookError(f"mutate_{kind} hook {_name(hook)} returned a "
                            f"{type(out).__name__}, not a {type(config).__name__} or None")
        config = out
    for check in admissions:
        verdict = check(config, *context)
        if verdict is not None:  # e.g. False: never taken for a yes
            raise HookError(f"admit_{kind} hook {_name(check)} returned {verdict!r}: an "
                            "admission hook returns None or raises PermissionDeniedError")
    return config


def pod_policy(config: SandboxConfig, mutations: Sequence[PodMutation],
               admissions: Sequence[PodAdmission]) -> SandboxConfig:
    """``config`` through the pod hooks: the config to run, or the refusal raised."""
    return _apply("pod", config, mutations, admissions)


def container_policy(config: ContainerConfig, pod: Sandbox,
                     mutations: Sequence[ContainerMutation],
                     admissions: Sequence[ContainerAdmission]) -> ContainerConfig:
    """``config`` (in ``pod``) through the container hooks: the config to create, or the
    refusal raised."""
    return _apply("container", config, mutations, admissions, pod)
