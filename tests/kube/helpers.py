"""Shared by the mapping tests: the fixture manifests and small builders of pod manifests."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import yaml

from podkit.kube import Manifests, PodPlan, load_manifests, parse_manifests, plan_pods
from podkit.kube.manifests import manifests_from

MANIFESTS = Path(__file__).parent / "manifests"
NODE_MEMORY = 8 << 30  # 8 GiB, so the OOM numbers in the tests are fixed
VOLUMES = "/var/lib/podkit/kube"


def manifest(name: str) -> Path:
    return MANIFESTS / name


def plans(*names: str, **kw: Any) -> list[PodPlan]:
    """Plans of fixture files, with a fixed node."""
    return plan_pods(load_manifests([manifest(n) for n in names]), **_node(kw))


def _node(kw: dict[str, Any]) -> dict[str, Any]:
    return {"volumes_root": VOLUMES, "node_memory": NODE_MEMORY, "node_name": "node-1", **kw}


def from_text(text: str, path: str = "test.yaml") -> Manifests:
    return manifests_from(parse_manifests(text, path))


def plan_text(text: str, **kw: Any) -> list[PodPlan]:
    return plan_pods(from_text(text), **_node(kw))


def pod(spec: dict[str, Any] | None = None, **meta: Any) -> dict[str, Any]:
    """A Pod manifest: one busybox container ``c`` unless ``spec`` says otherwise."""
    body = {"containers": [{"name": "c", "image": "busybox:1.36"}]}
    body.update(copy.deepcopy(spec or {}))
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "p", **meta}, "spec": body}


def ctr(**fields: Any) -> dict[str, Any]:
    """A container manifest named ``c`` running busybox."""
    return {"name": "c", "image": "busybox:1.36", **fields}


def plan_of(manifest: dict[str, Any], *extra: dict[str, Any], **kw: Any) -> PodPlan:
    """The plan of one pod manifest (plus ConfigMap/Secret manifests)."""
    text = yaml.safe_dump_all([manifest, *extra])
    (plan,) = plan_text(text, **kw)
    return plan


def config_map(name: str, **data: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": data}


def secret(name: str, **string_data: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name},
            "stringData": string_data}
