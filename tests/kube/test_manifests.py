"""Loading manifests: documents, kinds, ConfigMaps and Secrets, and errors at file:line:column."""

from __future__ import annotations

from pathlib import Path

import pytest

from podkit.kube import ManifestError, load_manifests, parse_manifests

from .helpers import from_text, manifest


def test_documents_keep_file_order_and_sources() -> None:
    m = load_manifests([manifest("web.yaml"), manifest("config.yaml")])
    assert [(d.kind, d.name, d.index) for d in m.documents] == [
        ("Pod", "web", 0), ("Job", "client", 1), ("Pod", "configured", 2)]
    assert m.documents[2].source.endswith("config.yaml#2 (Pod/configured)")


def test_marks_point_at_fields() -> None:
    (doc,) = parse_manifests("apiVersion: v1\nkind: Pod\nmetadata:\n  name: a\nspec:\n"
                             "  containers:\n  - name: x\n    image: busybox\n", "f.yaml")
    assert doc.where("spec.containers[0].image") == "f.yaml:8:12"
    assert doc.where("spec.containers[0].name") == "f.yaml:7:11"
    # A field the document does not have: its nearest parent.
    assert doc.where("spec.containers[0].ports[3]") == "f.yaml:7:5"


@pytest.mark.parametrize(("text", "where", "what"), [
    ("apiVersion: v1\nkind: Pod\nmetadata: [a\n", "t.yaml:4:1", "expected ',' or ']'"),
    ("a: 1\n b: 2\n", "t.yaml:2:3", "mapping values are not allowed"),
    ("kind: Pod\n\tname: x\n", "t.yaml:2:1", "found character '\\t'"),
    ("x: &a 1\ny: *b\n", "t.yaml:2:4", "found undefined alias"),
])
def test_yaml_errors_name_file_line_and_column(text: str, where: str, what: str) -> None:
    with pytest.raises(ManifestError) as err:
        parse_manifests(text, "t.yaml")
    assert str(err.value).startswith(f"{where}: invalid YAML")
    assert what in str(err.value)


@pytest.mark.parametrize(("text", "message"), [
    ("- a\n- b\n", "t.yaml:1:1: document 0 is a list, not a mapping with apiVersion and kind"),
    ("apiVersion: v1\nkind: Service\nmetadata: {name: s}\n",
     "t.yaml:2:7: kind 'Service' is not supported (supported: ConfigMap, DaemonSet, "
     "Deployment, Job, Pod, Secret, StatefulSet)"),
    ("apiVersion: apps/v1\nkind: Pod\nmetadata: {name: s}\n",
     "t.yaml:1:13: apiVersion 'apps/v1' for kind Pod: expected 'v1'"),
    ("apiVersion: v1\nkind: Pod\nmetadata: {}\n", "t.yaml:3:11: Pod has no metadata.name"),
    ("apiVersion: v1\nkind: Pod\n", "t.yaml:1:1: Pod has no metadata.name"),
])
def test_bad_documents_are_refused(text: str, message: str) -> None:
    with pytest.raises(ManifestError) as err:
        parse_manifests(text, "t.yaml")
    assert str(err.value) == message


def test_empty_documents_are_skipped_but_counted() -> None:
    docs = parse_manifests("---\n---\napiVersion: v1\nkind: Pod\nmetadata: {name: a}\n", "t")
    assert [(d.index, d.name) for d in docs] == [(1, "a")]


def test_config_maps_and_secrets_by_namespace_and_name() -> None:
    m = load_manifests([manifest("config.yaml")])
    assert m.config_maps[("default", "settings")].data == {
        "mode": b"production", "app.conf": b"listen 8080\n"}
    # Secret data is base64, stringData plain; both end as bytes.
    assert m.secrets[("default", "creds")].data == {"password": b"s3cr3t", "user": b"admin"}
    assert [d.name for d in m.documents] == ["configured"]


def test_configmap_binary_data_is_base64() -> None:
    m = from_text("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: b, namespace: x}\n"
                  "binaryData: {blob: AAEC}\n")
    assert m.config_maps[("x", "b")].data == {"blob": b"\x00\x01\x02"}


@pytest.mark.parametrize(("text", "message"), [
    ("apiVersion: v1\nkind: Secret\nmetadata: {name: s}\ndata: {k: 'not base64!'}\n",
     "t.yaml:4:11: data.k is not valid base64"),
    ("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: s}\ndata: {k: 3}\n",
     "t.yaml:4:11: data.k must be a string, got 3"),
    ("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: s}\ndata: [a]\n",
     "t.yaml:4:7: data must be a mapping"),
    ("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: s}\n---\n"
     "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: s}\n",
     "t.yaml:7:18: ConfigMap default/s is defined twice (also in t.yaml#0 (ConfigMap/s))"),
])
def test_bad_config_data_is_refused(text: str, message: str) -> None:
    with pytest.raises(ManifestError) as err:
        from_text(text, "t.yaml")
    assert str(err.value) == message


def test_configmap_and_secret_files(tmp_path: Path) -> None:
    cm = tmp_path / "cm.yaml"
    cm.write_text("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: extra}\ndata: {k: v}\n")
    sec = tmp_path / "sec.yaml"
    sec.write_text("apiVersion: v1\nkind: Secret\nmetadata: {name: s}\nstringData: {k: v}\n")
    m = load_manifests([manifest("qos.yaml")], configmap_files=[cm], secret_files=[sec])
    assert m.config_maps[("default", "extra")].data == {"k": b"v"}
    assert m.secrets[("default", "s")].data == {"k": b"v"}
    with pytest.raises(ManifestError, match=r"cm.yaml:2:7: expected a Secret in .*cm.yaml"):
        load_manifests([], secret_files=[cm])


def test_unreadable_files_are_named(tmp_path: Path) -> None:
    with pytest.raises(ManifestError, match=r"cannot read manifest '.*nope.yaml': No such file"):
        load_manifests([tmp_path / "nope.yaml"])
    binary = tmp_path / "bin.yaml"
    binary.write_bytes(b"\xff\xfe\x00")
    with pytest.raises(ManifestError, match="is not UTF-8 text"):
        load_manifests([binary])
