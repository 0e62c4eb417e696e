"""Pods the API server refuses are refused, every problem named by its field path."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from podkit.kube import PodValidationError, validate_pod
from podkit.kube.validate import (
    is_dns1123_label,
    is_dns1123_subdomain,
    is_port_name,
    pod_problems,
)

from .helpers import ctr, plan_text, pod

_LABEL_CHARS = "abcdefghijklmnopqrstuvwxyz0123456789-"
labels = st.from_regex(r"\A[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?\Z")


@given(labels)
def test_generated_labels_are_valid(name: str) -> None:
    assert is_dns1123_label(name) and is_dns1123_subdomain(name)


@given(st.lists(labels, min_size=1, max_size=4))
def test_dotted_labels_are_subdomains(parts: list[str]) -> None:
    name = ".".join(parts)
    assert is_dns1123_subdomain(name) == (len(name) <= 253)
    assert is_dns1123_label(name) == (len(parts) == 1)


@given(st.text(min_size=1, max_size=70))
def test_labels_match_the_rule(name: str) -> None:
    expected = (len(name) <= 63 and all(c in _LABEL_CHARS for c in name)
                and name[0] != "-" and name[-1] != "-")
    assert is_dns1123_label(name) == expected


@pytest.mark.parametrize(("name", "ok"), [
    ("a", True), ("web-1", True), ("1a", True), ("-a", False), ("a-", False), ("A", False),
    ("a_b", False), ("a.b", False), ("", False), ("a" * 63, True), ("a" * 64, False),
])
def test_label_examples(name: str, ok: bool) -> None:
    assert is_dns1123_label(name) is ok


@pytest.mark.parametrize(("name", "ok"), [
    ("http", True), ("web-2", True), ("a1", True), ("123", False), ("a--b", False),
    ("-a", False), ("abcdefghijklmnop", False), ("HTTP", False),
])
def test_port_names(name: str, ok: bool) -> None:
    assert is_port_name(name) is ok


def _paths(manifest: dict[str, Any]) -> list[tuple[str, str]]:
    return pod_problems(manifest)


@pytest.mark.parametrize(("spec", "meta", "path", "fragment"), [
    ({"containers": [ctr(), ctr()]}, {}, "spec.containers[1].name", "duplicate container name"),
    ({"initContainers": [ctr()]}, {}, "spec.containers[0].name", "duplicate container name 'c'"),
    ({"containers": [ctr(name="Web_1")]}, {}, "spec.containers[0].name", "not a DNS-1123 label"),
    ({}, {"name": "Bad_Name"}, "metadata.name", "not a DNS-1123 subdomain"),
    ({}, {"namespace": "a.b"}, "metadata.namespace", "not a DNS-1123 label"),
    ({"containers": []}, {}, "spec.containers", "at least one container"),
    ({"containers": [ctr(image="")]}, {}, "spec.containers[0].image", "required"),
    ({"containers": [ctr(ports=[{"containerPort": 0}])]}, {},
     "spec.containers[0].ports[0].containerPort", "0 is not in 1-65535"),
    ({"containers": [ctr(ports=[{"containerPort": 80, "hostPort": 70000}])]}, {},
     "spec.containers[0].ports[0].hostPort", "70000 is not in 1-65535"),
    ({"containers": [ctr(ports=[{"containerPort": 80, "protocol": "ICMP"}])]}, {},
     "spec.containers[0].ports[0].protocol", "'ICMP' is not TCP, UDP or SCTP"),
    ({"containers": [ctr(ports=[{"containerPort": 80, "name": "w"},
                                {"containerPort": 81, "name": "w"}])]}, {},
     "spec.containers[0].ports[1].name", "duplicate port name"),
    ({"containers": [ctr(ports=[{"containerPort": 80, "hostPort": 8080}]),
                     ctr(name="d", ports=[{"containerPort": 81, "hostPort": 8080}])]}, {},
     "spec.containers[1].ports[0].hostPort",
     "host port TCP/8080 is already used by spec.containers[0].ports[0].hostPort"),
    ({"hostNetwork": True, "containers": [ctr(ports=[{"containerPort": 80, "hostPort": 81}])]},
     {}, "spec.containers[0].ports[0].hostPort", "must equal containerPort with hostNetwork"),
    ({"containers": [ctr(volumeMounts=[{"name": "nope", "mountPath": "/x"}])]}, {},
     "spec.containers[0].volumeMounts[0].name", "no volume named 'nope'"),
    ({"volumes": [{"name": "v", "emptyDir": {}}],
      "containers": [ctr(volumeMounts=[{"name": "v", "mountPath": "/x"},
                                       {"name": "v", "mountPath": "/x"}])]}, {},
     "spec.containers[0].volumeMounts[1].mountPath", "mounted twice"),
    ({"volumes": [{"name": "v", "emptyDir": {}}],
      "containers": [ctr(volumeMounts=[{"name": "v", "mountPath": "/x", "subPath": "../up"}])]},
     {}, "spec.containers[0].volumeMounts[0].subPath", "relative path without '..'"),
    ({"volumes": [{"name": "v", "emptyDir": {}}],
      "containers": [ctr(volumeMounts=[{"name": "v", "mountPath": "/x",
                                        "mountPropagation": "Bidirectional"}])]}, {},
     "spec.containers[0].volumeMounts[0].mountPropagation", "needs a privileged container"),
    ({"volumes": [{"name": "v", "emptyDir": {}}, {"name": "v", "emptyDir": {}}]}, {},
     "spec.volumes[1].name", "duplicate volume name"),
    ({"volumes": [{"name": "v", "hostPath": {"path": "/x", "type": "Dir"}}]}, {},
     "spec.volumes[0].hostPath.type", "'Dir' is not a hostPath type"),
    ({"containers": [ctr(env=[{"name": "1BAD", "value": "x"}])]}, {},
     "spec.containers[0].env[0].name", "not a valid environment variable name"),
    ({"containers": [ctr(env=[{"name": "A", "value": "x", "valueFrom": {
        "fieldRef": {"fieldPath": "metadata.name"}}}])]}, {},
     "spec.containers[0].env[0].valueFrom", "may not be set with value"),
    ({"containers": [ctr(envFrom=[{"prefix": "X"}])]}, {},
     "spec.containers[0].envFrom[0]", "needs exactly one of configMapRef, secretRef"),
    ({"containers": [ctr(resources={"requests": {"cpu": "2"}, "limits": {"cpu": "1"}})]}, {},
     "spec.containers[0].resources.requests.cpu", "less than or equal to the cpu limit"),
    ({"containers": [ctr(resources={"limits": {"memory": "-1Mi"}})]}, {},
     "spec.containers[0].resources.limits.memory", "must not be negative"),
    ({"containers": [ctr(resources={"limits": {"memory": "lots"}})]}, {},
     "spec.containers[0].resources.limits.memory", "'lots' is not a quantity"),
    ({"containers": [ctr(securityContext={"privileged": True,
                                          "allowPrivilegeEscalation": False})]}, {},
     "spec.containers[0].securityContext.allowPrivilegeEscalation", "privileged: true"),
    ({"containers": [ctr(securityContext={"capabilities": {"add": ["CAP_SYS_ADMIN"]},
                                          "allowPrivilegeEscalation": False})]}, {},
     "spec.containers[0].securityContext.allowPrivilegeEscalation", "SYS_ADMIN"),
    ({"containers": [ctr(securityContext={"runAsUser": -1})]}, {},
     "spec.containers[0].securityContext.runAsUser", "not a non-negative integer"),
    ({"containers": [ctr(securityContext={"procMount": "Raw"})]}, {},
     "spec.containers[0].securityContext.procMount", "not Default or Unmasked"),
    ({"containers": [ctr(imagePullPolicy="Sometimes")]}, {},
     "spec.containers[0].imagePullPolicy", "'Sometimes' is not one of"),
    ({"initContainers": [ctr(name="i", readinessProbe={"exec": {"command": ["x"]}})]}, {},
     "spec.initContainers[0].readinessProbe", "may not be set for init containers"),
    ({"containers": [ctr(livenessProbe={"exec": {"command": ["x"]}, "successThreshold": 2})]},
     {}, "spec.containers[0].livenessProbe.successThreshold", "must be 1"),
    ({"restartPolicy": "Sometimes"}, {}, "spec.restartPolicy", "is not one of Always"),
    ({"terminationGracePeriodSeconds": -1}, {}, "spec.terminationGracePeriodSeconds", ">= 0"),
    ({"hostname": "Not_OK"}, {}, "spec.hostname", "not a DNS-1123 label"),
    ({"dnsPolicy": "None"}, {}, "spec.dnsConfig.nameservers", "at least one nameserver"),
    ({"dnsConfig": {"nameservers": ["1.1.1.1"] * 4}}, {}, "spec.dnsConfig.nameservers",
     "at most 3"),
    ({"securityContext": {"sysctls": [{"name": "Net/Bad Name", "value": "1"}]}}, {},
     "spec.securityContext.sysctls[0].name", "is not a sysctl name"),
    ({}, {"labels": {"bad key!": "v"}}, "metadata.labels.bad key!", "not a valid label key"),
    ({}, {"labels": {"k": "bad value!"}}, "metadata.labels.k", "not a valid label value"),
    ({}, {"labels": {"version": 1.0}}, "metadata.labels.version", "not a valid label value"),
    ({}, {"annotations": {"n": 3}}, "metadata.annotations.n", "3 must be a string"),
    ({"containers": [ctr(args=["--port", 8080])]}, {}, "spec.containers[0].args",
     "must be a list of strings, got ['--port', 8080]"),
    ({"containers": [ctr(command="sleep 10")]}, {}, "spec.containers[0].command",
     "must be a list of strings, got 'sleep 10'"),
    ({"containers": [ctr(securityContext={"capabilities": {"add": "NET_ADMIN"}})]}, {},
     "spec.containers[0].securityContext.capabilities.add", "must be a list of strings"),
    ({"securityContext": {"supplementalGroups": ["wheel"]}}, {},
     "spec.securityContext.supplementalGroups", "must be a list of integers"),
    ({}, {"labels": ["a"]}, "metadata.labels", "must be a mapping, got list"),
    ({"containers": [ctr(image={"name": "busybox"})]}, {}, "spec.containers[0].image",
     "must be a single value, got a dict"),
    ({"containers": [ctr(env=[{"name": "A", "value": True}])]}, {},
     "spec.containers[0].env[0].value", "True must be a string"),
    ({"containers": "oops"}, {}, "spec.containers", "must be a list, got str"),
    ({"containers": [ctr(env={"A": "1"})]}, {}, "spec.containers[0].env",
     "must be a list, got dict"),
])
def test_problems_are_named_by_field_path(spec: dict[str, Any], meta: dict[str, Any],
                                          path: str, fragment: str) -> None:
    m = pod(spec)
    m["metadata"].update({"namespace": "default", **meta})
    found = _paths(m)
    assert any(p == path and fragment in msg for p, msg in found), found


def test_a_good_pod_has_no_problems() -> None:
    validate_pod(pod())  # the namespace defaults to "default"
    m = pod({"volumes": [{"name": "v", "emptyDir": {}}], "containers": [ctr(
        ports=[{"name": "http", "containerPort": 80, "hostPort": 8080}],
        volumeMounts=[{"name": "v", "mountPath": "/v"}],
        env=[{"name": "A.b-c_d", "value": "1"}])]}, namespace="default")
    assert pod_problems(m) == []
    validate_pod(m)


def test_validate_pod_lists_every_problem() -> None:
    m = pod({"containers": [ctr(name="X"), ctr(name="X", image="")]}, namespace="default")
    with pytest.raises(PodValidationError) as err:
        validate_pod(m, source="file.yaml")
    text = str(err.value)
    assert text.splitlines()[0] == "file.yaml: invalid pod (4 problems):"
    assert "  spec.containers[1].image: required" in text
    assert "  spec.containers[1].name: duplicate container name 'X' (also spec.containers[0])" \
        in text
    assert len(err.value.problems) == 4


def test_plan_errors_point_at_file_line_column() -> None:
    text = ("apiVersion: v1\nkind: Pod\nmetadata:\n  name: web\nspec:\n  containers:\n"
            "  - name: a\n    image: busybox\n  - name: a\n    image: busybox\n"
            "    ports:\n    - containerPort: 99999\n")
    with pytest.raises(PodValidationError) as err:
        plan_text(text)
    assert str(err.value) == (
        "test.yaml#0 (Pod/web): invalid pod:\n"
        "  test.yaml:12:22: spec.containers[1].ports[0].containerPort: 99999 is not in 1-65535\n"
        "  test.yaml:9:11: spec.containers[1].name: duplicate container name 'a' "
        "(also spec.containers[0])")


def test_template_errors_point_into_the_template() -> None:
    text = ("apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d}\nspec:\n"
            "  selector: {matchLabels: {app: d}}\n  template:\n    metadata: {labels: {app: d}}\n"
            "    spec:\n      containers:\n      - name: Bad\n        image: busybox\n")
    with pytest.raises(PodValidationError) as err:
        plan_text(text)
    assert ("  test.yaml:10:15: spec.template.spec.containers[0].name: 'Bad' is not a DNS-1123 "
            "label") in str(err.value)
