"""plan_pods and pod_to_cri: workloads, unsupported fields, whole-file checks, round trips."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from podkit.container import PodContext, validate_container_config
from podkit.cri.convert import (
    container_config_from_cri,
    container_config_to_cri,
    sandbox_config_from_cri,
    sandbox_config_to_cri,
)
from podkit.errors import InvalidArgumentError
from podkit.kube import (
    POD_FIELDS,
    UNSUPPORTED,
    PodValidationError,
    plan_pods,
    pod_to_cri,
    unsupported_fields,
)
from podkit.kube.manifests import manifests_from, parse_manifests
from podkit.sandbox import SandboxFiles, validate_sandbox_config

from .helpers import MANIFESTS, NODE_MEMORY, config_map, ctr, plan_of, plan_text, plans, pod, secret


def test_deployment_template_becomes_one_pod_named_like_podman() -> None:
    (p,) = plans("deployment.yaml")
    assert (p.name, p.namespace, p.restart_policy) == ("api-pod", "staging", "Always")
    assert p.sandbox.labels["app"] == "api"
    assert p.warnings == ("spec.replicas: 3 asked, one pod is made (as podman does)",)
    assert p.source.endswith("deployment.yaml#0 (Deployment/api)")


@pytest.mark.parametrize("kind", ["StatefulSet", "DaemonSet", "Job"])
def test_other_workloads(kind: str) -> None:
    api = "batch/v1" if kind == "Job" else "apps/v1"
    template = {"metadata": {"labels": {"app": "w"}},
                "spec": {"containers": [ctr()],
                         **({"restartPolicy": "OnFailure"} if kind == "Job" else {})}}
    body = {"apiVersion": api, "kind": kind, "metadata": {"name": "w", "namespace": "n"},
            "spec": {"selector": {"matchLabels": {"app": "w"}}, "template": template}}
    (p,) = plan_text(yaml.safe_dump(body))
    assert (p.name, p.namespace, p.warnings) == ("w-pod", "n", ())


@pytest.mark.parametrize(("kind", "policy", "message"), [
    ("Job", None, "a Job's pods need OnFailure or Never, got None"),
    ("Job", "Always", "a Job's pods need OnFailure or Never, got 'Always'"),
    ("Deployment", "Never", "a Deployment's pods need Always, got 'Never'"),
])
def test_workload_restart_policies(kind: str, policy: str | None, message: str) -> None:
    spec: dict[str, Any] = {"containers": [ctr()]}
    if policy:
        spec["restartPolicy"] = policy
    body = {"apiVersion": "batch/v1" if kind == "Job" else "apps/v1", "kind": kind,
            "metadata": {"name": "w"}, "spec": {"template": {"spec": spec}}}
    with pytest.raises(PodValidationError, match=message):
        plan_text(yaml.safe_dump(body))


def test_selector_must_match_the_template() -> None:
    body = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "w"},
            "spec": {"selector": {"matchLabels": {"app": "x"}},
                     "template": {"metadata": {"labels": {"app": "y"}},
                                  "spec": {"containers": [ctr()]}}}}
    with pytest.raises(PodValidationError,
                       match=r"spec.template.metadata.labels: spec.selector.matchLabels does "
                             "not match"):
        plan_text(yaml.safe_dump(body))


SPEC_EXTRAS = {
    "nodeSelector": {"disk": "ssd"},
    "affinity": {"nodeAffinity": {}},
    "tolerations": [{"key": "k"}],
    "serviceAccountName": "robot",
    "topologySpreadConstraints": [{"maxSkew": 1}],
    "ephemeralContainers": [{"name": "dbg"}],
}


def test_unsupported_fields_are_warned_one_each() -> None:
    m = pod({**SPEC_EXTRAS,
             "containers": [ctr(resources={"limits": {"nvidia.com/gpu": 1}, "claims": [{}]},
                                resizePolicy=[{}])]},
            generateName="x-")
    p = plan_of(m)
    assert sorted(p.warnings) == sorted(f"{path}: not supported, ignored" for path in [
        "metadata.generateName", "spec.containers[0].resources.limits.nvidia.com/gpu",
        "spec.containers[0].resources.claims", "spec.containers[0].resizePolicy",
        *(f"spec.{k}" for k in SPEC_EXTRAS)])


def test_a_volume_of_an_unsupported_kind_is_an_error() -> None:
    m = pod({"volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "data"}}]})
    with pytest.raises(InvalidArgumentError,
                       match=r"spec.volumes\[0\]: volume 'data' needs exactly one supported "
                             r"source \(.*\); got persistentVolumeClaim"):
        plan_of(m)


def test_strict_makes_unsupported_fields_errors_with_locations() -> None:
    text = ("apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  nodeSelector: {a: b}\n"
            "  containers:\n  - {name: c, image: busybox, stdin: true}\n"
            "  priorityClassName: high\n")
    assert len(plan_text(text)[0].warnings) == 2
    with pytest.raises(PodValidationError) as err:
        plan_text(text, strict=True)
    assert str(err.value) == (
        "test.yaml#0 (Pod/p): invalid pod:\n"
        "  test.yaml:5:17: spec.nodeSelector: not supported by podkit\n"
        "  test.yaml:8:22: spec.priorityClassName: not supported by podkit")


def test_every_fixture_field_is_supported_except_the_jobs_backoff_limit() -> None:
    found = []
    for path in sorted(MANIFESTS.glob("*.yaml")):
        found += [w for p in plans(path.name) for w in p.warnings if "not supported" in w]
    assert found == ["spec.backoffLimit: not supported, ignored"]


def test_unsupported_fields_walk() -> None:
    body = {"kind": "Pod", "spec": {"containers": [{"name": "a", "x": 1}, {"y": {"z": 1}}],
                                    "volumes": "not a list"}, "zz": 1}
    assert list(unsupported_fields(body, POD_FIELDS)) == [
        "spec.containers[0].x", "spec.containers[1].y", "zz"]


def test_the_same_pod_twice_is_refused() -> None:
    text = yaml.safe_dump_all([pod(), pod()])
    with pytest.raises(InvalidArgumentError,
                       match=r"test.yaml:\d+:\d+: test.yaml#1 \(Pod/p\): pod default/p is "
                             r"already described by test.yaml#0 \(Pod/p\)"):
        plan_text(text)


def test_one_bad_pod_fails_the_whole_file() -> None:
    text = yaml.safe_dump_all([pod(name="good"), pod({"containers": [ctr(name="BAD")]},
                                                     name="bad")])
    with pytest.raises(PodValidationError, match="Pod/bad"):
        plan_text(text)


def test_mapping_errors_name_document_and_location() -> None:
    text = ("apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  containers:\n"
            "  - name: c\n    image: busybox\n    env:\n    - name: X\n      valueFrom:\n"
            "        configMapKeyRef: {name: gone, key: k}\n")
    with pytest.raises(InvalidArgumentError) as err:
        plan_text(text)
    assert str(err.value) == (
        "test.yaml:11:26: test.yaml#0 (Pod/p): spec.containers[0].env[0].valueFrom."
        "configMapKeyRef: ConfigMap default/'gone' not found")


def test_plan_pods_defaults_node_facts(tmp_path: Path) -> None:
    (p,) = plan_pods(manifests_from(parse_manifests(yaml.safe_dump(pod()))),
                     volumes_root=str(tmp_path))
    assert p.containers[0].config.linux.resources is not None
    assert p.volumes == ()


FULL = pod({
    "hostname": "full", "securityContext": {"runAsUser": 1000, "fsGroup": 3,
                                            "sysctls": [{"name": "kernel.shm_rmid_forced",
                                                         "value": "1"}]},
    "dnsPolicy": "None", "dnsConfig": {"nameservers": ["192.0.2.1"], "searches": ["a.test"]},
    "volumes": [{"name": "v", "emptyDir": {}}, {"name": "c", "configMap": {"name": "cm"}}],
    "initContainers": [ctr(name="init", command=["true"])],
    "containers": [ctr(
        command=["sh", "-c"], args=["echo $(A)"], env=[{"name": "A", "value": "1"}],
        workingDir="/", ports=[{"containerPort": 80, "hostPort": 8080}],
        resources={"requests": {"cpu": "100m", "memory": "32Mi"},
                   "limits": {"cpu": "500m", "memory": "64Mi"}},
        securityContext={"capabilities": {"add": ["NET_ADMIN"], "drop": ["MKNOD"]},
                         "readOnlyRootFilesystem": True, "allowPrivilegeEscalation": False,
                         "seccompProfile": {"type": "RuntimeDefault"}},
        volumeMounts=[{"name": "v", "mountPath": "/v"}, {"name": "c", "mountPath": "/c"}])],
}, labels={"app": "full"}, annotations={"a": "b"})


def test_pod_to_cri_returns_the_sandbox_and_containers_init_first() -> None:
    sandbox, containers = pod_to_cri(FULL, config_maps=[config_map("cm", k="v")],
                                     secrets=[secret("s", k="v")], node_memory=NODE_MEMORY,
                                     node_name="n")
    assert sandbox.metadata.name == "p" and sandbox.hostname == "full"
    assert [c.metadata.name for c in containers] == ["init", "c"]
    assert list(containers[1].args) == ["echo 1"]
    assert containers[1].mounts[1].host_path.startswith("/var/lib/podkit/kube/default_p_")


def test_pod_to_cri_refuses_what_is_not_a_pod() -> None:
    with pytest.raises(InvalidArgumentError, match="kind 'Service' is not supported"):
        pod_to_cri({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s"}})


def test_pod_to_cri_configs_round_trip_through_the_cri_messages() -> None:
    sandbox, containers = pod_to_cri(FULL, config_maps=[config_map("cm", k="v")],
                                     node_memory=NODE_MEMORY, node_name="n")
    assert sandbox_config_from_cri(sandbox_config_to_cri(sandbox)) == sandbox
    for c in containers:
        assert container_config_from_cri(container_config_to_cri(c)) == c


def test_pod_to_cri_configs_pass_the_pods_layer_checks() -> None:
    sandbox, containers = pod_to_cri(FULL, config_maps=[config_map("cm", k="v")],
                                     node_memory=NODE_MEMORY, node_name="n")
    validate_sandbox_config(sandbox)
    ctx = PodContext(id="x", config=sandbox, files=SandboxFiles(
        hostname="/h", hosts="/hosts", resolv_conf="/r", shm=""), namespace_paths={})
    for c in containers:
        validate_container_config(c, ctx)


def _with(path: str) -> dict[str, Any]:
    """A pod manifest that sets the field ``path`` (``[]`` meaning the first list item)."""
    m = pod({"volumes": [{"name": "v"}]})
    node: Any = m
    parts = path.replace("[]", ".[]").split(".")
    for i, part in enumerate(parts):
        last = i == len(parts) - 1
        if part == "[]":
            node = node[0]
        elif last:
            node[part] = {"x": 1}
        else:
            node = node.setdefault(part, {})
    return m


@pytest.mark.parametrize("path", UNSUPPORTED)
def test_each_listed_unsupported_field_is_reported(path: str) -> None:
    reported = [p.replace("[0]", "[]") for p in unsupported_fields(_with(path), POD_FIELDS)]
    assert reported == [path]
