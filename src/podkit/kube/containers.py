"""One container of a pod manifest as kubelet's ContainerConfig and the plan around it (pull
policy, probes, hooks); ``generateContainerConfig`` and the API defaults it relies on."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import attrs

from podkit.cdi import ANNOTATION_PREFIX as CDI_PREFIX
from podkit.container import (
    ContainerConfig,
    ContainerMetadata,
    KeyValue,
    LinuxContainerConfig,
)
from podkit.kube.env import EnvContext, container_env, expand, mapping_for
from podkit.kube.plan import ContainerPlan, VolumePlan
from podkit.kube.probe_specs import exec_hook, probe_spec
from podkit.kube.resources import container_resources
from podkit.kube.security import SECCOMP_ROOT, container_security, run_as_non_root
from podkit.kube.volumes import container_mounts

__all__ = [
    "CONTAINER_NAME_LABEL",
    "POD_NAMESPACE_LABEL",
    "POD_NAME_LABEL",
    "POD_UID_LABEL",
    "ContainerContext",
    "container_plan",
    "default_pull_policy",
    "image_tag",
]

POD_NAME_LABEL = "io.kubernetes.pod.name"
POD_NAMESPACE_LABEL = "io.kubernetes.pod.namespace"
POD_UID_LABEL = "io.kubernetes.pod.uid"
CONTAINER_NAME_LABEL = "io.kubernetes.container.name"
TERMINATION_MESSAGE_PATH = "/dev/termination-log"


def image_tag(image: str) -> str:
    """The tag of an image reference: ``latest`` when it has neither tag nor digest, ``""``
    when it has only a digest (kubelet's ParseImageName)."""
    name, _, digest = image.partition("@")
    last = name.rsplit("/", 1)[-1]
    if ":" in last:
        return last.rsplit(":", 1)[1]
    return "" if digest else "latest"


def default_pull_policy(image: str) -> str:
    """The API default: Always for ``:latest`` (or no tag), else IfNotPresent."""
    return "Always" if image_tag(image) == "latest" else "IfNotPresent"


@attrs.frozen
class ContainerContext:
    """What every container of one pod shares."""

    pod: Mapping[str, Any]  # the pod manifest (metadata filled: name, namespace, uid)
    env: EnvContext
    volumes: Sequence[VolumePlan]
    qos: str
    node_memory: int
    seccomp_root: str = SECCOMP_ROOT


def _labels(ctx: ContainerContext, name: str) -> dict[str, str]:
    return {POD_NAME_LABEL: ctx.env.name, POD_NAMESPACE_LABEL: ctx.env.namespace,
            POD_UID_LABEL: ctx.env.uid, CONTAINER_NAME_LABEL: name}


def _ports_json(container: Mapping[str, Any]) -> str:
    ports = []
    for p in container.get("ports") or ():
        entry: dict[str, Any] = {}
        if p.get("name"):
            entry["name"] = p["name"]
        if p.get("hostPort"):
            entry["hostPort"] = p["hostPort"]
        entry["containerPort"] = p.get("containerPort")
        entry["protocol"] = p.get("protocol") or "TCP"
        if p.get("hostIP"):
            entry["hostIP"] = p["hostIP"]
        ports.append(entry)
    return json.dumps(ports, separators=(",", ":"))


def _annotations(ctx: ContainerContext, container: Mapping[str, Any]) -> dict[str, str]:
    """The kubelet's own container annotations (the cheap ones), and the pod's CDI ones
    (``cdi.k8s.io/...``: its devices go to every container, as a device plugin's would)."""
    spec = ctx.pod.get("spec") or {}
    pod_annotations = (ctx.pod.get("metadata") or {}).get("annotations") or {}
    out = {str(k): str(v) for k, v in pod_annotations.items() if str(k).startswith(CDI_PREFIX)}
    out |= {
        "io.kubernetes.container.restartCount": "0",
        "io.kubernetes.container.terminationMessagePath":
            str(container.get("terminationMessagePath") or TERMINATION_MESSAGE_PATH),
        "io.kubernetes.container.terminationMessagePolicy":
            str(container.get("terminationMessagePolicy") or "File"),
        "io.kubernetes.pod.terminationGracePeriod":
            str(spec.get("terminationGracePeriodSeconds", 30)),
    }
    if container.get("ports"):
        out["io.kubernetes.container.ports"] = _ports_json(container)
    return out


def container_plan(container: Mapping[str, Any], ctx: ContainerContext, where: str,
                   warnings: list[str]) -> ContainerPlan:
    """The plan of one container at field path ``where`` (``spec.containers[0]``)."""
    name = str(container.get("name", ""))
    image = str(container.get("image", ""))
    env = container_env(container, ctx.env, where, warnings)
    lookup = mapping_for(env)
    config = ContainerConfig(
        metadata=ContainerMetadata(name=name),
        image=image,
        command=tuple(expand(str(c), lookup) for c in container.get("command") or ()),
        args=tuple(expand(str(a), lookup) for a in container.get("args") or ()),
        working_dir=str(container.get("workingDir") or ""),
        envs=tuple(KeyValue(key=k, value=v) for k, v in env.items()),
        mounts=container_mounts(container, ctx.volumes, env, where),
        labels=_labels(ctx, name),
        annotations=_annotations(ctx, container),
        log_path=f"{name}/0.log",
        stdin=bool(container.get("stdin", False)),
        stdin_once=bool(container.get("stdinOnce", False)),
        tty=bool(container.get("tty", False)),
        linux=LinuxContainerConfig(
            resources=container_resources(container.get("resources"), ctx.qos,
                                          ctx.node_memory, f"{where}.resources"),
            security_context=container_security(ctx.pod, container, where, ctx.seccomp_root),
        ),
    )
    lifecycle = container.get("lifecycle") or {}
    spec = ctx.pod.get("spec") or {}
    return ContainerPlan(
        name=name,
        config=config,
        image_pull_policy=str(container.get("imagePullPolicy") or default_pull_policy(image)),
        readiness=probe_spec(container.get("readinessProbe"), container,
                             f"{where}.readinessProbe"),
        liveness=probe_spec(container.get("livenessProbe"), container, f"{where}.livenessProbe"),
        startup=probe_spec(container.get("startupProbe"), container, f"{where}.startupProbe"),
        post_start=exec_hook(lifecycle.get("postStart"), f"{where}.lifecycle.postStart"),
        pre_stop=exec_hook(lifecycle.get("preStop"), f"{where}.lifecycle.preStop"),
        run_as_non_root=run_as_non_root(spec, container),
    )
