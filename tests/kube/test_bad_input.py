"""Any value in any field of a good manifest either plans or is refused with InvalidArgumentError
naming a field: never a crash (TypeError, AttributeError, ...)."""

from __future__ import annotations

import copy
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from podkit.errors import InvalidArgumentError
from podkit.kube import ManifestError, PodValidationError, parse_manifests, validate_pod

from .helpers import config_map, ctr, plan_of, pod, secret

GOOD = pod({
    "hostname": "h", "dnsConfig": {"nameservers": ["192.0.2.1"], "options": [{"name": "a"}]},
    "securityContext": {"runAsUser": 1, "fsGroup": 2, "supplementalGroups": [3],
                        "sysctls": [{"name": "kernel.shm_rmid_forced", "value": "1"}],
                        "seccompProfile": {"type": "RuntimeDefault"}},
    "volumes": [{"name": "e", "emptyDir": {"medium": "Memory", "sizeLimit": "1Mi"}},
                {"name": "c", "configMap": {"name": "cm", "items": [{"key": "k", "path": "p"}]}},
                {"name": "s", "secret": {"secretName": "s", "defaultMode": 0o600}},
                {"name": "h", "hostPath": {"path": "/tmp", "type": "Directory"}},
                {"name": "d", "downwardAPI": {"items": [
                    {"path": "l", "fieldRef": {"fieldPath": "metadata.labels"}}]}}],
    "initContainers": [ctr(name="i", command=["true"])],
    "containers": [ctr(
        command=["sh"], args=["-c", "$(A)"], workingDir="/",
        env=[{"name": "A", "value": "x"},
             {"name": "B", "valueFrom": {"configMapKeyRef": {"name": "cm", "key": "k"}}},
             {"name": "C", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
             {"name": "D", "valueFrom": {"resourceFieldRef": {"resource": "limits.cpu"}}}],
        envFrom=[{"prefix": "P_", "secretRef": {"name": "s"}}],
        ports=[{"name": "web", "containerPort": 80, "hostPort": 8080, "protocol": "TCP"}],
        resources={"requests": {"cpu": "100m", "memory": "1Mi"},
                   "limits": {"cpu": "1", "memory": "2Mi"}},
        volumeMounts=[{"name": "e", "mountPath": "/e", "subPath": "x",
                       "mountPropagation": "HostToContainer"},
                      {"name": "c", "mountPath": "/c", "readOnly": True}],
        securityContext={"capabilities": {"add": ["NET_ADMIN"], "drop": ["ALL"]},
                         "allowPrivilegeEscalation": False, "procMount": "Default",
                         "appArmorProfile": {"type": "RuntimeDefault"}},
        readinessProbe={"httpGet": {"port": "web", "path": "/"}, "periodSeconds": 1},
        livenessProbe={"tcpSocket": {"port": 80}},
        startupProbe={"exec": {"command": ["true"]}},
        lifecycle={"postStart": {"exec": {"command": ["true"]}}})],
}, labels={"app": "a"}, annotations={"n": "v"})
EXTRA = (config_map("cm", k="v"), secret("s", k="v"))


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    found = [prefix] if prefix else []
    if isinstance(value, dict):
        for k, v in value.items():
            found += _paths(v, (*prefix, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            found += _paths(v, (*prefix, i))
    return found


PATHS = [p for p in _paths(GOOD) if p[0] in ("metadata", "spec")]
scalars = st.one_of(st.none(), st.booleans(), st.integers(-(2**40), 2**40),
                    st.floats(allow_nan=False), st.text(max_size=12),
                    st.sampled_from(["", "-1", "0", "1m", "Always", "../x", "/abs", "$(A)",
                                     "a" * 300, "Localhost", "Memory", "UDP"]))
values = st.recursive(scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=6), inner, max_size=3)),
    max_leaves=6)


def test_the_good_manifest_plans() -> None:
    assert plan_of(GOOD, *EXTRA).containers[0].name == "c"


@settings(max_examples=150, deadline=None)
@given(st.sampled_from(PATHS), values)
def test_any_value_anywhere_plans_or_is_refused_cleanly(path: tuple[Any, ...],
                                                        value: Any) -> None:
    manifest = copy.deepcopy(GOOD)
    node: Any = manifest
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    try:
        plan_of(manifest, *EXTRA)
    except InvalidArgumentError as err:
        assert str(err).strip()


@settings(max_examples=150, deadline=None)
@given(st.sampled_from(PATHS), values)
def test_validate_pod_never_crashes(path: tuple[Any, ...], value: Any) -> None:
    manifest = copy.deepcopy(GOOD)
    node: Any = manifest
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    try:
        validate_pod(manifest)
    except PodValidationError as err:
        assert err.problems


@settings(max_examples=150, deadline=None)
@given(st.text(alphabet=st.sampled_from(list("ab:-[]{}&*!|>'\"#%@` \n\t0")), max_size=60))
def test_any_text_loads_or_is_refused_with_a_location(text: str) -> None:
    try:
        parse_manifests(text, "f.yaml")
    except ManifestError as err:
        assert str(err).startswith("f.yaml")
