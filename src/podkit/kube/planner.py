"""Manifests in, plans out: ``plan_pods`` for ``kube play`` and ``pod_to_cri`` for a custom
CRI frontend. Every pod is checked whole before any plan is returned."""

from __future__ import annotations

import os
import re
import socket
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import attrs

from podkit.container import ContainerConfig
from podkit.errors import InvalidArgumentError
from podkit.kube.containers import ContainerContext, container_plan
from podkit.kube.env import EnvContext
from podkit.kube.manifests import Document, Manifests, check_document, manifests_from
from podkit.kube.plan import PodPlan
from podkit.kube.pod import LOG_ROOT, SandboxOptions, sandbox_config
from podkit.kube.resources import node_memory_bytes, qos_class
from podkit.kube.security import SECCOMP_ROOT
from podkit.kube.validate import PodValidationError, pod_problems
from podkit.kube.volumes import pod_dir, volume_plans
from podkit.kube.workloads import PodSource, pod_from_document
from podkit.sandbox import DNSConfig, SandboxConfig

__all__ = ["DEFAULT_VOLUMES_ROOT", "PlanOptions", "plan_pod", "plan_pods", "pod_to_cri"]

DEFAULT_VOLUMES_ROOT = "/var/lib/podkit/kube"
"""Where planned pods' volumes (emptyDir, configMap, secret) go when no ``volumes_root`` is
given (``kube play`` passes ``ROOT/kube``)."""
_PATH_AT_START = re.compile(r"^((?:spec|metadata)[^:\s]*): ")


@attrs.frozen(kw_only=True)
class PlanOptions:
    """The node facts and choices a plan depends on."""

    volumes_root: str
    node_name: str
    node_memory: int
    node_cpu_milli: int = 0
    strict: bool = False
    uid_for: Callable[[str, str], str] | None = None
    sandbox: SandboxOptions = attrs.field(factory=SandboxOptions)


def _located(src: PodSource, err: InvalidArgumentError) -> InvalidArgumentError:
    """A mapping error with the document's name and the field's file:line:column."""
    text = str(err)
    m = _PATH_AT_START.match(text)
    where = src.doc.where(src.doc_path(m.group(1))) if m else src.doc.path
    doc_text = f"{src.doc_path(m.group(1))}: {text[m.end():]}" if m else text
    return InvalidArgumentError(f"{where}: {src.doc.source}: {doc_text}")


def _workload_problems(src: PodSource) -> list[tuple[str, str]]:
    kind = src.doc.kind
    if kind == "Pod":
        return []
    policy = (src.pod["spec"] or {}).get("restartPolicy")
    problems = []
    if kind == "Job" and policy not in ("OnFailure", "Never"):
        problems.append(("spec.restartPolicy", f"a Job's pods need OnFailure or Never, "
                                               f"got {policy!r}"))
    if kind != "Job" and policy not in (None, "Always"):
        problems.append(("spec.restartPolicy", f"a {kind}'s pods need Always, got {policy!r}"))
    match = ((src.doc.body.get("spec") or {}).get("selector") or {}).get("matchLabels") or {}
    labels = src.pod["metadata"].get("labels") or {}
    if any(labels.get(k) != v for k, v in match.items()):
        problems.append(("metadata.labels", "spec.selector.matchLabels does not match the "
                                            "template's labels"))
    return problems


def _check(src: PodSource, strict: bool) -> list[str]:
    """Refuse a bad pod with every problem located; the warnings of a good one."""
    doc = src.doc
    lines = [f"  {doc.where(path)}: {path}: {msg}" for path, msg in src.shape]
    if not lines:
        problems = pod_problems(src.pod) + _workload_problems(src)
        lines = [f"  {doc.where(src.doc_path(p))}: {src.doc_path(p)}: {m}" for p, m in problems]
    if strict:
        lines += [f"  {doc.where(p)}: {p}: not supported by podkit" for p in src.unsupported]
    if lines:
        raise PodValidationError(f"{doc.source}: invalid pod:\n" + "\n".join(lines), [])
    return [f"{p}: not supported, ignored" for p in src.unsupported] + list(src.notes)


def plan_pod(src: PodSource, manifests: Manifests, options: PlanOptions) -> PodPlan:
    """The plan of one pod taken from a document."""
    warnings = _check(src, options.strict)
    pod = src.pod
    meta, spec = pod["metadata"], pod["spec"]
    name, namespace, uid = str(meta["name"]), str(meta["namespace"]), str(meta["uid"])
    init = list(spec.get("initContainers") or ())
    apps = list(spec.get("containers") or ())
    env = EnvContext(
        name=name, namespace=namespace, uid=uid, node_name=options.node_name,
        labels={str(k): str(v) for k, v in (meta.get("labels") or {}).items()},
        annotations={str(k): str(v) for k, v in (meta.get("annotations") or {}).items()},
        service_account=str(spec.get("serviceAccountName") or "default"),
        config_maps=manifests.config_maps, secrets=manifests.secrets,
        containers={str(c.get("name")): c for c in init + apps},
        node_cpu_milli=options.node_cpu_milli, node_memory=options.node_memory)
    try:
        volumes = volume_plans(spec, pod_dir(options.volumes_root, namespace, name, uid), env)
        ctx = ContainerContext(pod=pod, env=env, volumes=volumes, qos=qos_class(init + apps),
                               node_memory=options.node_memory,
                               seccomp_root=options.sandbox.seccomp_root)
        sandbox = sandbox_config(pod, options.sandbox)
        init_plans = tuple(container_plan(c, ctx, f"spec.initContainers[{i}]", warnings)
                           for i, c in enumerate(init))
        app_plans = tuple(container_plan(c, ctx, f"spec.containers[{i}]", warnings)
                          for i, c in enumerate(apps))
    except PodValidationError:
        raise
    except InvalidArgumentError as err:
        raise _located(src, err) from None
    return PodPlan(
        name=name, namespace=namespace, uid=uid, sandbox=sandbox,
        init_containers=init_plans, containers=app_plans, volumes=volumes,
        restart_policy=str(spec.get("restartPolicy") or "Always"),
        termination_grace_period_seconds=int(spec.get("terminationGracePeriodSeconds", 30)),
        source=src.doc.source, warnings=tuple(warnings))


def plan_pods(
    manifests: Manifests,
    *,
    volumes_root: str,
    node_name: str | None = None,
    node_memory: int | None = None,
    node_cpus: float | None = None,
    strict: bool = False,
    uid_for: Callable[[str, str], str] | None = None,
    host_dns: DNSConfig | None = None,
    cluster_dns: Sequence[str] = (),
    cluster_domain: str = "cluster.local",
    log_root: str = LOG_ROOT,
    seccomp_root: str = SECCOMP_ROOT,
) -> list[PodPlan]:
    """One plan per pod-bearing document, in file order. Nothing is planned unless every pod
    is valid; two documents naming the same pod are refused. ``node_memory`` (bytes) and
    ``node_cpus`` default to this machine's."""
    options = PlanOptions(
        volumes_root=volumes_root, node_name=node_name or socket.gethostname(),
        node_memory=node_memory or node_memory_bytes(),
        node_cpu_milli=round((node_cpus or os.cpu_count() or 1) * 1000),
        strict=strict, uid_for=uid_for,
        sandbox=SandboxOptions(host_dns=host_dns, cluster_dns=tuple(cluster_dns),
                               cluster_domain=cluster_domain, log_root=log_root,
                               seccomp_root=seccomp_root))
    plans: list[PodPlan] = []
    seen: dict[tuple[str, str], str] = {}
    for doc in manifests.documents:
        src = pod_from_document(doc, uid_for)
        key = (str(src.pod["metadata"]["namespace"]), str(src.pod["metadata"]["name"]))
        if key in seen:
            raise InvalidArgumentError(
                f"{doc.where('metadata.name')}: {doc.source}: pod {key[0]}/{key[1]} is "
                f"already described by {seen[key]}")
        seen[key] = doc.source
        plans.append(plan_pod(src, manifests, options))
    return plans


def pod_to_cri(
    manifest: Mapping[str, Any],
    *,
    config_maps: Iterable[Mapping[str, Any]] = (),
    secrets: Iterable[Mapping[str, Any]] = (),
    volumes_root: str = DEFAULT_VOLUMES_ROOT,
    lenient: bool = False,
    **options: Any,
) -> tuple[SandboxConfig, list[ContainerConfig]]:
    """The kubelet's CRI configs of one Pod (or workload) manifest: the sandbox and every
    container, init containers first. ``config_maps``/``secrets`` are ConfigMap and Secret
    manifests; an unknown field is an error unless ``lenient`` (then ignored); other keywords
    are :func:`plan_pods`'."""
    docs = [Document(path="<manifest>", index=0, body=dict(manifest))]
    docs += [Document(path="<configMaps>", index=i, body=dict(c))
             for i, c in enumerate(config_maps)]
    docs += [Document(path="<secrets>", index=i, body=dict(s)) for i, s in enumerate(secrets)]
    for doc in docs:
        check_document(doc)
    (plan,) = plan_pods(manifests_from(docs, lenient=lenient), volumes_root=volumes_root,
                        **options)
    containers = [c.config for c in (*plan.init_containers, *plan.containers)]
    return plan.sandbox, containers
