"""The manifest fields podkit maps, as a tree, and the walk that lists every other field.

A leaf (``None``) takes any value (a map such as labels, a list of strings); a dict is an
object whose keys are checked; a one-item list is a list of such objects. Anything the tree
does not name is reported, never silently dropped.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

__all__ = [
    "POD_FIELDS",
    "UNSUPPORTED",
    "WORKLOAD_FIELDS",
    "shape_problems",
    "unsupported_fields",
]

Tree = dict[str, Any]

_PROFILE: Tree = {"type": None, "localhostProfile": None}
_SELINUX: Tree = {"user": None, "role": None, "type": None, "level": None}
_PAIR: Tree = {"name": None, "value": None}
_KEY_REF: Tree = {"name": None, "key": None, "optional": None}
_FIELD_REF: Tree = {"fieldPath": None, "apiVersion": None}
_NAMED_REF: Tree = {"name": None, "optional": None}
_RESOURCE_REF: Tree = {"containerName": None, "resource": None, "divisor": None}
_EXEC: Tree = {"command": None}
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
    "name": None, "image": None, "command": None, "args": None, "workingDir": None,
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
        "capabilities": {"add": None, "drop": None}, "readOnlyRootFilesystem": None,
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
_METADATA: Tree = {"name": None, "namespace": None, "uid": None, "labels": None,
                   "annotations": None, "creationTimestamp": None}
POD_SPEC: Tree = {
    "containers": [CONTAINER], "initContainers": [CONTAINER], "volumes": [_VOLUME],
    "restartPolicy": None, "terminationGracePeriodSeconds": None,
    "dnsPolicy": None, "dnsConfig": {"nameservers": None, "searches": None, "options": [_PAIR]},
    "hostNetwork": None, "hostPID": None, "hostIPC": None, "shareProcessNamespace": None,
    "hostname": None, "subdomain": None, "setHostnameAsFQDN": None, "enableServiceLinks": None,
    "securityContext": {
        "runAsUser": None, "runAsGroup": None, "runAsNonRoot": None,
        "supplementalGroups": None, "fsGroup": None, "seLinuxOptions": _SELINUX,
        "seccompProfile": _PROFILE, "appArmorProfile": _PROFILE, "sysctls": [_PAIR]},
}
# status is read-only in the API: the server ignores it on create, and so does podkit.
POD_FIELDS: Tree = {"apiVersion": None, "kind": None, "metadata": _METADATA,
                    "spec": POD_SPEC, "status": None}
_TEMPLATE: Tree = {"metadata": _METADATA, "spec": POD_SPEC}
_SELECTOR: Tree = {"matchLabels": None}
WORKLOAD_FIELDS: dict[str, Tree] = {
    kind: {"apiVersion": None, "kind": None, "metadata": _METADATA, "status": None,
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
    if tree is None:
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


def shape_problems(value: Any, tree: Any, path: str = "") -> Iterator[tuple[str, str]]:
    """(field path, problem) for objects that are not mappings and lists that are not lists."""
    if tree is None or value is None:
        return
    if isinstance(tree, list):
        if not isinstance(value, list):
            yield path, f"must be a list, got {type(value).__name__}"
            return
        for i, item in enumerate(value):
            yield from shape_problems(item, tree[0], f"{path}[{i}]")
        return
    if not isinstance(value, dict):
        yield path, f"must be a mapping, got {type(value).__name__}"
        return
    for key, item in value.items():
        if key in tree:
            yield from shape_problems(item, tree[key], f"{path}.{key}" if path else str(key))
