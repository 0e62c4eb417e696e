"""Volumes and mounts as the kubelet sets them up."""

from __future__ import annotations

from typing import Any

import pytest

from podkit.container import MountPropagation
from podkit.errors import InvalidArgumentError
from podkit.kube import VolumePlan
from podkit.kube.volumes import format_map, go_quote

from .helpers import VOLUMES, config_map, ctr, plan_of, plans, pod, secret


def _pod_dir(p: Any) -> str:
    return f"{VOLUMES}/{p.namespace}_{p.name}_{p.uid}"


def test_empty_dirs_live_under_the_pod_dir() -> None:
    (p,) = plans("init.yaml")
    base = _pod_dir(p)
    assert p.volumes == (
        VolumePlan(name="work", kind="emptyDir", host_path=f"{base}/volumes/work"),
        VolumePlan(name="scratch", kind="emptyDir", host_path=f"{base}/volumes/scratch",
                   medium="Memory", size_limit=16 << 20),
    )
    assert base == f"{VOLUMES}/ci_init-demo_{p.uid}"
    first = p.init_containers[0].config.mounts[0]
    assert (first.container_path, first.host_path, first.readonly) == (
        "/work", f"{base}/volumes/work", False)
    app = p.containers[0].config.mounts
    assert [(m.container_path, m.readonly) for m in app] == [("/data", True),
                                                             ("/scratch", False)]


def test_config_map_secret_and_downward_files() -> None:
    (p,) = plans("config.yaml")
    vols = {v.name: v for v in p.volumes}
    assert vols["conf"].files == (("conf/app.conf", b"listen 8080\n", 0o644),)
    assert vols["secret"].files == (("password", b"s3cr3t", 0o400), ("user", b"admin", 0o400))
    assert vols["info"].files == (
        ("labels", b'app="configured"\ntier="backend"', 0o644),
        ("name", b"configured", 0o600),
    )
    # fsGroup goes on the volumes whose ownership the kubelet manages.
    assert {v.fs_group for v in p.volumes} == {2000}
    # configMap, secret and downwardAPI volumes are always mounted read-only.
    assert all(m.readonly for m in p.containers[0].config.mounts)


def test_host_path_volumes_keep_their_path_and_type_and_no_fs_group() -> None:
    p = plan_of(pod({"securityContext": {"fsGroup": 7},
                     "volumes": [{"name": "sock", "hostPath": {"path": "/run/x.sock",
                                                               "type": "Socket"}}],
                     "containers": [ctr(volumeMounts=[{"name": "sock",
                                                       "mountPath": "/x.sock"}])]}))
    assert p.volumes == (VolumePlan(name="sock", kind="hostPath", host_path="/run/x.sock",
                                    host_path_type="Socket"),)
    assert p.containers[0].config.mounts[0].host_path == "/run/x.sock"


def _one_mount(vm: dict[str, Any], **ctr_fields: Any) -> Any:
    p = plan_of(pod({"volumes": [{"name": "v", "emptyDir": {}}],
                     "containers": [ctr(volumeMounts=[{"name": "v", "mountPath": "/m", **vm}],
                                        **ctr_fields)]}))
    return p, p.containers[0].config.mounts[0]


@pytest.mark.parametrize(("prop", "mode"), [
    (None, MountPropagation.PROPAGATION_PRIVATE),
    ("None", MountPropagation.PROPAGATION_PRIVATE),
    ("HostToContainer", MountPropagation.PROPAGATION_HOST_TO_CONTAINER),
    ("Bidirectional", MountPropagation.PROPAGATION_BIDIRECTIONAL),
])
def test_mount_propagation(prop: str | None, mode: MountPropagation) -> None:
    vm = {"mountPropagation": prop} if prop else {}
    _, m = _one_mount(vm, securityContext={"privileged": True})
    assert m.propagation == mode


def test_sub_path_and_sub_path_expr() -> None:
    p, m = _one_mount({"subPath": "a/b"})
    assert m.host_path == f"{_pod_dir(p)}/volumes/v/a/b"
    p, m = _one_mount({"subPathExpr": "logs/$(POD)"},
                      env=[{"name": "POD", "valueFrom": {"fieldRef": {
                          "fieldPath": "metadata.name"}}}])
    assert m.host_path == f"{_pod_dir(p)}/volumes/v/logs/p"


def test_items_select_keys_and_modes() -> None:
    p = plan_of(pod({"volumes": [{"name": "c", "configMap": {
        "name": "cm", "defaultMode": 0o440,
        "items": [{"key": "b", "path": "dir/b.txt", "mode": 0o600}, {"key": "a", "path": "a"}]}}]}),
        config_map("cm", a="1", b="2", c="3"))
    assert p.volumes[0].files == (("dir/b.txt", b"2", 0o600), ("a", b"1", 0o440))


def test_optional_missing_sources_make_empty_volumes() -> None:
    p = plan_of(pod({"volumes": [
        {"name": "c", "configMap": {"name": "gone", "optional": True}},
        {"name": "s", "secret": {"secretName": "s", "optional": True,
                                 "items": [{"key": "missing", "path": "x"}]}}]}),
        secret("s", present="1"))
    assert [v.files for v in p.volumes] == [(), ()]


@pytest.mark.parametrize(("volume", "message"), [
    ({"name": "c", "configMap": {"name": "gone"}},
     r"test.yaml:\d+:\d+: .*spec.volumes\[0\].configMap.name: ConfigMap default/'gone' not found"),
    ({"name": "s", "secret": {"secretName": "s", "items": [{"key": "nope", "path": "x"}]}},
     r"spec.volumes\[0\].secret.items\[0\].key: 'nope' is not in Secret default/s"),
    ({"name": "s", "secret": {"secretName": "s", "items": [{"key": "k", "path": "../x"}]}},
     r"spec.volumes\[0\].secret.items\[0\].path: '../x' must be a relative path"),
    ({"name": "s", "secret": {"secretName": "s", "defaultMode": 0o1777}},
     r"spec.volumes\[0\].secret.defaultMode: 1023 is not a file mode"),
    ({"name": "e", "emptyDir": {"medium": "HugePages"}},
     r"spec.volumes\[0\].emptyDir.medium: 'HugePages' is not '' or 'Memory'"),
    ({"name": "e", "emptyDir": {"sizeLimit": "big"}},
     r"spec.volumes\[0\].emptyDir.sizeLimit: 'big' is not a quantity"),
    ({"name": "h", "hostPath": {"path": "relative"}},
     r"spec.volumes\[0\].hostPath.path: 'relative' must be an absolute path"),
    ({"name": "d", "downwardAPI": {"items": [{"path": "x", "fieldRef": {
        "fieldPath": "status.podIP"}}]}},
     r"downwardAPI.items\[0\].fieldRef.fieldPath: 'status.podIP' is not supported"),
    ({"name": "two", "emptyDir": {}, "hostPath": {"path": "/x"}},
     r"spec.volumes\[0\]: volume 'two' needs exactly one supported source"),
])
def test_bad_volumes_name_the_field(volume: dict[str, Any], message: str) -> None:
    with pytest.raises(InvalidArgumentError, match=message):
        plan_of(pod({"volumes": [volume]}), secret("s", k="v"))


def test_go_quote_and_format_map() -> None:
    assert go_quote('a"b\\c\n\t\x01é\u2028') == '"a\\"b\\\\c\\n\\t\\x01é\\u2028"'
    assert format_map({"b": "2", "a": 'say "hi"'}) == 'a="say \\"hi\\""\nb="2"'
    assert format_map({}) == ""
