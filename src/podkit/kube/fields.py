"""The fields of every document kind podkit reads, as trees: the ones podkit maps, the
Kubernetes fields it does not, and the walks that list unknown and unmapped fields.

A leaf is ``None`` (a scalar), ``STRINGS`` (a list of strings), ``INTS`` (a list of
integers), ``MAP`` (a mapping such as labels), ``ANY``, or ``IGNORED`` (a Kubernetes field
podkit does not map: warned, its contents not checked); a dict is an object whose keys are
checked (its key ``OTHER`` stands for every key it does not name); a one-item list is a list
of such objects. A key outside the tree is not a Kubernetes field at all (a typo such as
``initContianers``): :func:`unknown_fields` finds it and the nearest known name. Field names
are those of Kubernetes' API types (``k8s.io/api`` core/v1, apps/v1, batch/v1).
"""

from __future__ import annotations

import difflib
from collections.abc import Iterator
from typing import Any

__all__ = [
    "ANY",
    "DOCUMENT_FIELDS",
    "IGNORED",
    "INTS",
    "MAP",
    "OTHER",
    "POD_FIELDS",
    "STRINGS",
    "UNSUPPORTED",
    "WORKLOAD_FIELDS",
    "ignored_fields",
    "shape_problems",
    "unknown_fields",
    "unsupported_fields",
]

Tree = dict[str, Any]
STRINGS, INTS, MAP, ANY, IGNORED = "strings", "ints", "map", "any", "ignored"
OTHER = "*"


def _ignored(*names: str) -> Tree:
    return dict.fromkeys(names, IGNORED)


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
                "httpHeaders": [_PAIR], **_ignored("protocol")},
    "tcpSocket": {"host": None, "port": None},
    "initialDelaySeconds": None, "periodSeconds": None, "timeoutSeconds": None,
    "successThreshold": None, "failureThreshold": None,
    **_ignored("grpc", "terminationGracePeriodSeconds"),
}
_HANDLER: Tree = {"exec": _EXEC, **_ignored("httpGet", "tcpSocket", "sleep")}
# cpu and memory are mapped; any other resource name (ephemeral-storage, nvidia.com/gpu) is not
_QUANTITIES: Tree = {"cpu": None, "memory": None, OTHER: IGNORED}
CONTAINER: Tree = {
    "name": None, "image": None, "command": STRINGS, "args": STRINGS, "workingDir": None,
    "env": [{"name": None, "value": None, "valueFrom": {
        "fieldRef": _FIELD_REF, "resourceFieldRef": _RESOURCE_REF,
        "configMapKeyRef": _KEY_REF, "secretKeyRef": _KEY_REF, **_ignored("fileKeyRef")}}],
    "envFrom": [{"prefix": None, "configMapRef": _NAMED_REF, "secretRef": _NAMED_REF}],
    "ports": [{"name": None, "containerPort": None, "hostPort": None, "protocol": None,
               "hostIP": None}],
    "resources": {"requests": _QUANTITIES, "limits": _QUANTITIES, **_ignored("claims")},
    "volumeMounts": [{"name": None, "mountPath": None, "readOnly": None, "subPath": None,
                      "subPathExpr": None, "mountPropagation": None,
                      **_ignored("recursiveReadOnly", "bindMountOptions")}],
    "imagePullPolicy": None,
    "securityContext": {
        "runAsUser": None, "runAsGroup": None, "runAsNonRoot": None, "privileged": None,
        "capabilities": {"add": STRINGS, "drop": STRINGS}, "readOnlyRootFilesystem": None,
        "allowPrivilegeEscalation": None, "seccompProfile": _PROFILE,
        "appArmorProfile": _PROFILE, "procMount": None, "seLinuxOptions": _SELINUX,
        **_ignored("windowsOptions")},
    "stdin": None, "stdinOnce": None, "tty": None,
    "readinessProbe": _PROBE, "livenessProbe": _PROBE, "startupProbe": _PROBE,
    "lifecycle": {"postStart": _HANDLER, "preStop": _HANDLER, **_ignored("stopSignal")},
    "terminationMessagePath": None, "terminationMessagePolicy": None,
    **_ignored("resizePolicy", "restartPolicy", "restartPolicyRules", "volumeDevices"),
}
_ITEMS: Tree = {"key": None, "path": None, "mode": None, **_ignored("user")}
_VOLUME: Tree = {
    "name": None,
    "emptyDir": {"medium": None, "sizeLimit": None, **_ignored("mode")},
    "hostPath": {"path": None, "type": None},
    "configMap": {"name": None, "items": [_ITEMS], "defaultMode": None, "optional": None,
                  **_ignored("defaultUser")},
    "secret": {"secretName": None, "items": [_ITEMS], "defaultMode": None, "optional": None,
               **_ignored("defaultUser")},
    "downwardAPI": {"items": [{"path": None, "fieldRef": _FIELD_REF,
                               "resourceFieldRef": _RESOURCE_REF, "mode": None,
                               **_ignored("user")}],
                    "defaultMode": None, **_ignored("defaultUser")},
    **_ignored("gcePersistentDisk", "awsElasticBlockStore", "gitRepo", "nfs", "iscsi",
               "glusterfs", "persistentVolumeClaim", "rbd", "flexVolume", "cinder", "cephfs",
               "flocker", "fc", "azureFile", "vsphereVolume", "quobyte", "azureDisk",
               "photonPersistentDisk", "projected", "portworxVolume", "scaleIO", "storageos",
               "csi", "ephemeral", "image"),
}
_METADATA: Tree = {"name": None, "namespace": None, "uid": None, "labels": MAP,
                   "annotations": MAP, "creationTimestamp": None,
                   **_ignored("generateName", "selfLink", "resourceVersion", "generation",
                              "deletionTimestamp", "deletionGracePeriodSeconds",
                              "ownerReferences", "finalizers", "managedFields")}
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
        "seccompProfile": _PROFILE, "appArmorProfile": _PROFILE, "sysctls": [_PAIR],
        **_ignored("windowsOptions", "fsGroupChangePolicy", "seLinuxChangePolicy")},
    **_ignored("ephemeralContainers", "activeDeadlineSeconds", "nodeSelector",
               "serviceAccountName", "serviceAccount", "automountServiceAccountToken",
               "nodeName", "imagePullSecrets", "affinity", "schedulerName", "tolerations",
               "hostAliases", "priorityClassName", "priority", "readinessGates",
               "runtimeClassName", "preemptionPolicy", "overhead",
               "topologySpreadConstraints", "os", "hostUsers", "schedulingGates",
               "resourceClaims", "resources", "hostnameOverride", "schedulingGroup",
               "evictionResponders"),
}
# status is read-only in the API: the server ignores it on create, and so does podkit.
POD_FIELDS: Tree = {"apiVersion": None, "kind": None, "metadata": _METADATA,
                    "spec": POD_SPEC, "status": ANY}
"""The Pod fields podkit maps, as a tree (``None``: a leaf): a field outside it is reported."""
_TEMPLATE: Tree = {"metadata": _METADATA, "spec": POD_SPEC}
_SELECTOR: Tree = {"matchLabels": MAP, **_ignored("matchExpressions")}
WORKLOAD_FIELDS: dict[str, Tree] = {
    kind: {"apiVersion": None, "kind": None, "metadata": _METADATA, "status": ANY,
           "spec": {"template": _TEMPLATE, "selector": _SELECTOR, **extra}}
    for kind, extra in {
        "Deployment": {"replicas": None, **_ignored(
            "strategy", "minReadySeconds", "revisionHistoryLimit", "paused",
            "progressDeadlineSeconds")},
        "StatefulSet": {"replicas": None, "serviceName": None, **_ignored(
            "volumeClaimTemplates", "podManagementPolicy", "updateStrategy",
            "revisionHistoryLimit", "minReadySeconds", "persistentVolumeClaimRetentionPolicy",
            "ordinals")},
        "DaemonSet": _ignored("updateStrategy", "minReadySeconds", "revisionHistoryLimit"),
        "Job": _ignored(
            "parallelism", "completions", "activeDeadlineSeconds", "podFailurePolicy",
            "successPolicy", "backoffLimit", "backoffLimitPerIndex", "maxFailedIndexes",
            "manualSelector", "ttlSecondsAfterFinished", "completionMode", "suspend",
            "podReplacementPolicy", "managedBy"),
    }.items()
}
_DATA: Tree = {"apiVersion": None, "kind": None, "metadata": _METADATA, "immutable": None,
               "data": MAP}
DOCUMENT_FIELDS: dict[str, Tree] = {
    "Pod": POD_FIELDS, **WORKLOAD_FIELDS,
    "ConfigMap": {**_DATA, "binaryData": MAP},
    "Secret": {**_DATA, "stringData": MAP, "type": None},
}
"""The tree of each document kind podkit reads."""


UNSUPPORTED: tuple[str, ...] = (
    "spec.nodeSelector", "spec.affinity", "spec.tolerations", "spec.topologySpreadConstraints",
    "spec.serviceAccountName", "spec.automountServiceAccountToken", "spec.ephemeralContainers",
    "spec.priorityClassName", "spec.hostAliases", "spec.nodeName", "spec.readinessGates",
    "spec.resourceClaims", "spec.containers[].resources.claims", "spec.containers[].resizePolicy",
    "spec.volumes[].persistentVolumeClaim", "spec.volumes[].projected",
)
"""Pod fields people commonly write that podkit does not map (a sample for docs and help text;
the walk reports any field outside ``POD_FIELDS``, listed here or not)."""


def _fields(value: Any, tree: Any, path: str) -> Iterator[tuple[str, Any, Any, Tree]]:
    """(field path, key, subtree or ``...`` for a key the tree does not have, the tree of the
    object holding it) of every field of ``value`` that ``tree`` checks, in document order."""
    if isinstance(tree, list):
        if isinstance(value, list):
            for i, item in enumerate(value):
                yield from _fields(item, tree[0], f"{path}[{i}]")
        return
    if not isinstance(tree, dict) or not isinstance(value, dict):
        return
    for key, item in value.items():
        here = f"{path}.{key}" if path else str(key)
        sub = tree.get(key, tree.get(OTHER, ...)) if isinstance(key, str) else ...
        yield here, key, sub, tree
        if sub is not ...:
            yield from _fields(item, sub, here)


def unsupported_fields(value: Any, tree: Any, path: str = "") -> Iterator[str]:
    """Field paths in ``value`` that podkit does not map (Kubernetes fields it ignores, and
    names that are no field at all), in document order."""
    for here, _, sub, _ in _fields(value, tree, path):
        if sub is ... or sub == IGNORED:
            yield here


def ignored_fields(value: Any, tree: Any, path: str = "") -> Iterator[str]:
    """Field paths in ``value`` of Kubernetes fields that podkit does not map."""
    for here, _, sub, _ in _fields(value, tree, path):
        if sub == IGNORED:
            yield here


def unknown_fields(value: Any, tree: Any, path: str = "") -> Iterator[tuple[str, str]]:
    """(field path, the known name it is closest to or "") of every name in ``value`` that is
    no Kubernetes field where it stands (``initContianers``: ``initContainers``)."""
    for here, key, sub, parent in _fields(value, tree, path):
        if sub is ...:
            yield here, _nearest(str(key), [k for k in parent if k != OTHER])


def _nearest(name: str, names: list[str]) -> str:
    """The name in ``names`` that ``name`` is a typo of, or ""."""
    folded = {n.lower(): n for n in names}
    if name.lower() in folded:
        return folded[name.lower()]
    close = difflib.get_close_matches(name, names, n=1, cutoff=0.6)
    return close[0] if close else ""


def _leaf_problem(value: Any, leaf: str | None) -> str | None:
    kinds = {STRINGS: (str, "strings"), INTS: (int, "integers")}
    if leaf in (ANY, IGNORED):
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
