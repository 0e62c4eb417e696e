"""The manifest fields podkit maps, as a tree, and the walk that lists every other field.

A leaf is ``None`` (a scalar), ``STRINGS`` (a list of strings), ``INTS`` (a list of
integers), ``MAP`` (a mapping such as labels) or ``ANY``; a dict is an object whose keys are
checked; a one-item list is a list of such objects. Anything the tree does not name is reported,
never silently dropped.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

__all__ = [
    "ANY",
    "INTS",
    "MAP",
    "POD_FIELDS",
    "STRINGS",
    "UNSUPPORTED",
    "WORKLOAD_FIELDS",
    "shape_problems",
    "unsupported_fields",
]

Tree = dict[str, Any]
STRINGS, INTS, MAP, ANY = "strings", "ints", "map", "any"

_PROFILE: Tree = {"type": None, "localhostProfile": None}
_SELINUX: Tree = {"user": None, "role": None, "type": None, "level": None}
_PAIR: Tree = {"name": None, "value": None}
_KEY_REF: Tree = {"name": None, "key": None, "optional": None}
_FIELD_REF: Tree = {"fieldPath": None, "apiVersion": None}
_NAMED_REF: Tree = {"name": None, "optional": None}
_RESOURCE_REF: Tree = {"containerName": None, "resource": None, "divisor": None}
_EXEC: Tree = {"command": STRINGS}
_PROBE: Tree = {
    "exec": _EXEC,
    "httpGet": {"host": None, "port": None, "path": None, "scheme": None,
                "httpHeaders": [_PAIR]},
    "tcpSocket": {"host": None, "port": None},
    "initialDelaySeconds": None, "periodSeconds": None, "timeoutSeconds": None,
    "successThreshold": None, "failureThreshold": None,
}
_QUANTITIES: Tree = {"cpu": None, "memory": None}
CONTAINER: Tree = {
    "name": None, "image": None, "command": STRINGS, "args": STRINGS, "workingDir": None,
    "env": [{"name": None, "value": None, "valueFrom": {
        "fieldRef": _FIELD_REF, "resourceFieldRef": _RESOURCE_REF,
        "configMapKeyRef": _KEY_REF, "secretKeyRef": _KEY_REF}}],
    "envFrom": [{"prefix": None, "configMapRef": _NAMED_REF, "secretRef": _NAMED_REF}],
    "ports": [{"name": None, "containerPort": None, "hostPort": None, "protocol": None,
               "hostIP": None}],
    "resources": {"requests": _QUANTITIES, "limits": _QUANTITIES},
    "volumeMounts": [{"name": None, "mountPath": None, "readOnly": None, "subPath": None,
                      "subPathExpr": None, "mountPropagation": None}],
    "imagePullPolicy": None,
    "securityContext": {
        "runAsUser": None, "runAsGroup": None, "runAsNonRoot": None, "privileged": None,
        "capabilities": {"add": STRINGS, "drop": STRINGS}, "readOnlyRootFilesystem": None,
        "allowPrivilegeEscalation": None, "seccompProfile": _PROFILE,
        "appArmorProfile": _PROFILE, "procMount": None, "seLinuxOptions": _SELINUX},
    "stdin": None, "stdinOnce": None, "tty": None,
    "readinessProbe": _PROBE, "livenessProbe": _PROBE, "startupProbe": _PROBE,
    "lifecycle": {"postStart": {"exec": _EXEC}, "preStop": {"exec": _EXEC}},
    "terminationMessagePath": None, "terminationMessagePolicy": None,
}
_VOLUME: Tree = {
    "name": None,
    "emptyDir": {"medium": None, "sizeLimit": None},
    "hostPath": {"path": None, "type": None},
    "configMap": {"name": None, "items": [{"key": None, "path": None, "mode": None}],
                  "defaultMode": None, "optional": None},
    "secret": {"secretName": None, "items": [{"key": None, "path": None, "mode": None}],
               "defaultMode": None, "optional": None},
    "downwardAPI": {"items": [{"path": None, "fieldRef": _FIELD_REF,
                               "resourceFieldRef": _RESOURCE_REF, "mode": None}],
                    "defaultMode": None},
}
_METADATA: Tree = {"name": None, "namespace": None, "uid": None, "labels": MAP,
                   "annotations": MAP, "creationTimestamp": None}
POD_SPEC: Tree = {
    "containers": [CONTAINER], "initContainers": [CONTAINER], "volumes": [_VOLUME],
    "restartPolicy": None, "terminationGracePeriodSeconds": None,
    "dnsPolicy": None,
    "dnsConfig": {"nameservers": STRINGS, "searches": STRINGS, "options": [_PAIR]},
    "hostNetwork": None, "hostPID": None, "hostIPC": None, "shareProcessNamespace": None,
    "hostname": None, "subdomain": None, "setHostnameAsFQDN": None, "enableServiceLinks": None,
    "securityContext": {
        "runAsUser": None, "runAsGroup": None, "runAsNonRoot": None,
        "supplementalGroups": INTS, "supplementalGroupsPolicy": None, "fsGroup": None,
        "seLinuxOptions": _SELINUX,
        "seccompProfile": _PROFILE, "appArmorProfile": _PROFILE, "sysctls": [_PAIR]},
}
# status is read-only in the API: the server ignores it on create, and so does podkit.
POD_FIELDS: Tree = {"apiVersion": None, "kind": None, "metadata": _METADATA,
                    "spec": POD_SPEC, "status": ANY}
_TEMPLATE: Tree = {"metadata": _METADATA, "spec": POD_SPEC}
_SELECTOR: Tree = {"matchLabels": MAP}
WORKLOAD_FIELDS: dict[str, Tree] = {
    kind: {"apiVersion": None, "kind": None, "metadata": _METADATA, "status": ANY,
           "spec": {"template": _TEMPLATE, "selector": _SELECTOR, **extra}}
    for kind, extra in {
        "Deployment": {"replicas": None},
        "StatefulSet": {"replicas": None, "serviceName": None},
        "DaemonSet": {},
        "Job": {},
    }.items()
}


# Pod fields people commonly write that podkit does not map (a sample for docs and help text;
# the walk below reports any field outside the tree, listed here or not).
UNSUPPORTED: tuple[str, ...] = (
    "spec.nodeSelector", "spec.affinity", "spec.tolerations", "spec.topologySpreadConstraints",
    "spec.serviceAccountName", "spec.automountServiceAccountToken", "spec.ephemeralContainers",
    "spec.priorityClassName", "spec.hostAliases", "spec.nodeName", "spec.readinessGates",
    "spec.resourceClaims", "spec.containers[].resources.claims", "spec.containers[].resizePolicy",
    "spec.volumes[].persistentVolumeClaim", "spec.volumes[].projected",
)


def unsupported_fields(value: Any, tree: Any, path: str = "") -> Iterator[str]:
    """Field paths in ``value`` that ``tree`` does not name, in document order."""
    if not isinstance(tree, (dict, list)):
        return
    if isinstance(tree, list):
        if isinstance(value, list):
            for i, item in enumerate(value):
                yield from unsupported_fields(item, tree[0], f"{path}[{i}]")
        return
    if not isinstance(value, dict):
        return
    for key, item in value.items():
        here = f"{path}.{key}" if path else str(key)
        if key not in tree:
            yield here
        else:
            yield from unsupported_fields(item, tree[key], here)


def _leaf_problem(value: Any, leaf: str | None) -> str | None:
    kinds = {STRINGS: (str, "strings"), INTS: (int, "integers")}
    if leaf == ANY:
        return None
    if leaf == MAP:
        return None if isinstance(value, dict) else f"must be a mapping, got {type(value).__name__}"
    if leaf in kinds:
        cls, what = kinds[leaf]
        if not isinstance(value, list) or any(
                not isinstance(v, cls) or isinstance(v, bool) for v in value):
            return f"must be a list of {what}, got {value!r}"
        return None
    if isinstance(value, (dict, list)):
        return f"must be a single value, got a {type(value).__name__}"
    return None


def shape_problems(value: Any, tree: Any, path: str = "") -> Iterator[tuple[str, str]]:
    """(field path, problem) for values of the wrong shape: a mapping that is not one, a list
    that is not one, a scalar given as a list or mapping."""
    if value is None:
        return
    if not isinstance(tree, (dict, list)):
        problem = _leaf_problem(value, tree)
        if problem:
            yield path, problem
        return
    if isinstance(tree, list):
        if not isinstance(value, list):
            yield path, f"must be a list, got {type(value).__name__}"
            return
        for i, item in enumerate(value):
            if item is None:
                yield f"{path}[{i}]", "must not be null"
            yield from shape_problems(item, tree[0], f"{path}[{i}]")
        return
    if not isinstance(value, dict):
        yield path, f"must be a mapping, got {type(value).__name__}"
        return
    for key, item in value.items():
        if key in tree:
            yield from shape_problems(item, tree[key], f"{path}.{key}" if path else str(key))
