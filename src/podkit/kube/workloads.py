"""The pod a document describes: a Pod itself, or the pod template of a Deployment,
StatefulSet, DaemonSet or Job (one replica, named ``<name>-pod`` as podman's kube play does)."""

from __future__ import annotations

import copy
import uuid
from collections.abc import Callable
from typing import Any

import attrs

from podkit.kube.fields import POD_FIELDS, WORKLOAD_FIELDS, ignored_fields, shape_problems
from podkit.kube.manifests import Document

__all__ = ["UID_NAMESPACE", "PodSource", "default_uid", "pod_from_document"]

# uuid5 namespace of podkit's pod uids: the same namespace/name gives the same uid on every run.
UID_NAMESPACE = uuid.UUID("6f1d3c0e-5a57-4b8e-9d0a-7c3f0b2d9e41")


def default_uid(namespace: str, name: str) -> str:
    """A stable pod uid, so ``kube down`` of a file finds what ``kube play`` of it made."""
    return str(uuid.uuid5(UID_NAMESPACE, f"{namespace}/{name}"))


@attrs.frozen
class PodSource:
    """A pod manifest taken from a document, and how its field paths map back into it."""

    doc: Document
    pod: dict[str, Any]  # apiVersion v1, kind Pod, metadata filled (name, namespace, uid)
    prefix: str  # "" for a Pod, "spec.template." for a workload's template
    unsupported: tuple[str, ...]  # paths of the Kubernetes fields podkit does not map
    shape: tuple[tuple[str, str], ...]  # (document field path, problem)
    notes: tuple[str, ...]  # what the conversion decided (replicas ignored, ...)

    def doc_path(self, pod_path: str) -> str:
        """A pod field path as a path of the document."""
        return f"{self.prefix}{pod_path}" if pod_path else self.prefix.rstrip(".")


def _mapping(parent: dict[str, Any], key: str) -> dict[str, Any]:
    got = parent.get(key)
    return got if isinstance(got, dict) else {}


def _template_pod(doc: Document) -> tuple[dict[str, Any], list[str]]:
    body = doc.body
    spec = _mapping(body, "spec")
    template = _mapping(spec, "template")
    tmeta = _mapping(template, "metadata")
    meta = dict(tmeta)
    meta["name"] = f"{doc.name}-pod"
    namespace = body["metadata"].get("namespace") or tmeta.get("namespace")
    if namespace:
        meta["namespace"] = namespace
    notes = []
    replicas = spec.get("replicas")
    if isinstance(replicas, int) and replicas != 1:
        notes.append(f"spec.replicas: {replicas} asked, one pod is made (as podman does)")
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": meta,
           "spec": copy.deepcopy(_mapping(template, "spec"))}
    return pod, notes


def _without_nulls(value: Any) -> Any:
    """The value with null mapping entries left out: null means unset in the API."""
    if isinstance(value, dict):
        return {k: _without_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_without_nulls(v) for v in value]
    return value


def pod_from_document(doc: Document, uid_for: Callable[[str, str], str] | None = None,
                      ) -> PodSource:
    """The pod of one document, namespace defaulted to ``default`` and uid filled."""
    if doc.kind == "Pod":
        pod = copy.deepcopy(doc.body)
        notes: list[str] = []
        prefix, tree = "", POD_FIELDS
    else:
        pod, notes = _template_pod(doc)
        prefix, tree = "spec.template.", WORKLOAD_FIELDS[doc.kind]
    shape = tuple(shape_problems(doc.body, tree))
    pod = _without_nulls(pod)
    pod["spec"] = _mapping(pod, "spec")
    meta = pod["metadata"]
    meta["namespace"] = str(meta.get("namespace") or "default")
    if not meta.get("uid"):
        make = uid_for or default_uid
        meta["uid"] = make(meta["namespace"], str(meta["name"]))
    return PodSource(doc=doc, pod=pod, prefix=prefix,
                     unsupported=tuple(ignored_fields(doc.body, tree)),
                     shape=shape, notes=tuple(notes))
