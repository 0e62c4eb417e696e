"""Strict manifests (``podkit.kube.fields`` and loading): every kind podkit reads refuses a
name that is no field of its object, at its file:line:column and with the field meant; fields
given twice are refused; Kubernetes fields podkit does not map stay warnings; ``lenient``
turns the refusals into warnings."""

from __future__ import annotations

import textwrap
from typing import Any

import pytest
import yaml

from podkit._cli.exits import ExitCode, exit_code_for
from podkit.errors import InvalidArgumentError
from podkit.kube import ManifestError, load_manifests, parse_manifests, plan_pods, pod_to_cri
from podkit.kube.fields import (
    DOCUMENT_FIELDS,
    IGNORED,
    POD_FIELDS,
    UNSUPPORTED,
    ignored_fields,
    unknown_fields,
    unsupported_fields,
)
from podkit.kube.manifests import ManifestNotFoundError, field_problems, manifests_from

from .helpers import MANIFESTS, ctr, plan_text, pod

TEMPLATE = {"metadata": {"labels": {"app": "a"}},
            "spec": {"containers": [{"name": "c", "image": "busybox"}]}}
WORKLOAD_SPEC: dict[str, dict[str, Any]] = {
    "Deployment": {"replicas": 1},
    "StatefulSet": {"serviceName": "a"},
    "DaemonSet": {},
    "Job": {},
}

# A valid document of every kind podkit reads; each has a mapping ``spec`` or ``data`` to put a
# typo in, and ``metadata`` too.
KINDS: dict[str, dict[str, Any]] = {
    "Pod": pod(),
    **{kind: {"apiVersion": "batch/v1" if kind == "Job" else "apps/v1", "kind": kind,
              "metadata": {"name": "a"},
              "spec": {"selector": {"matchLabels": {"app": "a"}}, "template": TEMPLATE,
                       **extra}}
       for kind, extra in WORKLOAD_SPEC.items()},
    "ConfigMap": {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"},
                  "data": {"k": "v"}},
    "Secret": {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "a"},
               "stringData": {"k": "v"}},
}

# (where the typo goes, the typo, the field meant) for each kind's own fields
TYPOS: dict[str, list[tuple[tuple[str, ...], str, str]]] = {
    "Pod": [((), "sepc", "spec"), (("metadata",), "lables", "labels"),
            (("spec",), "initContianers", "initContainers"),
            (("spec", "containers", 0), "readinesProbe", "readinessProbe"),
            (("spec", "containers", 0), "Env", "env")],
    "Deployment": [(("spec",), "replica", "replicas"), (("spec",), "templte", "template"),
                   (("spec", "template", "spec"), "hostNetwrk", "hostNetwork")],
    "StatefulSet": [(("spec",), "serviceNme", "serviceName")],
    "DaemonSet": [(("spec", "selector"), "matchLabel", "matchLabels")],
    "Job": [(("spec",), "backofLimit", "backoffLimit")],
    "ConfigMap": [((), "dat", "data"), ((), "binarydata", "binaryData")],
    "Secret": [((), "stringdata", "stringData"), ((), "tpye", "type")],
}
CASES = [(kind, *t) for kind, typos in TYPOS.items() for t in typos]


def _with(doc: dict[str, Any], where: tuple[str | int, ...], key: str) -> dict[str, Any]:
    body = yaml.safe_load(yaml.safe_dump(doc))
    node = body
    for part in where:
        node = node[part]
    node[key] = {"x": 1} if key[0].islower() else []
    return dict(body)


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_every_kind_has_a_tree_and_its_valid_document_has_no_unknown_field(kind: str) -> None:
    assert set(DOCUMENT_FIELDS) == set(KINDS)
    assert list(unknown_fields(KINDS[kind], DOCUMENT_FIELDS[kind])) == []
    m = manifests_from(parse_manifests(yaml.safe_dump(KINDS[kind]), "k.yaml"))
    assert m.warnings == ()


@pytest.mark.parametrize(("kind", "where", "typo", "meant"), CASES,
                         ids=[f"{c[0]}-{c[2]}" for c in CASES])
def test_a_typo_in_any_kind_is_found_with_the_field_meant(
        kind: str, where: tuple[str, ...], typo: str, meant: str) -> None:
    doc = _with(KINDS[kind], where, typo)
    path = ".".join(f"[{p}]" if isinstance(p, int) else p for p in (*where, typo))
    path = path.replace(".[", "[")
    assert list(unknown_fields(doc, DOCUMENT_FIELDS[kind])) == [(path, meant)]
    text = yaml.safe_dump(doc)
    with pytest.raises(ManifestError) as err:
        manifests_from(parse_manifests(text, "k.yaml"))
    first, line = str(err.value).splitlines()
    assert first == "k.yaml: 1 unknown field:"
    assert line.startswith("  k.yaml:") and line.endswith(
        f": {path}: unknown field, did you mean {meant!r}?")
    # the line and column are the typo's own key
    (doc_,) = parse_manifests(text, "k.yaml")
    row, col = (int(n) for n in line.split(":")[1:3])
    assert text.splitlines()[row - 1][col - 1:].startswith(typo)
    assert doc_.where_key(path) == f"k.yaml:{row}:{col}"


def test_the_issues_deployment_lists_every_problem_on_its_own_line() -> None:
    text = textwrap.dedent("""\
        apiVersion: apps/v1
        kind: Deployment
        metadata: {name: web}
        spec:
          selector: {matchLabels: {app: web}}
          template:
            metadata: {labels: {app: web}}
            spec:
              initContianers:
              - {name: prep, image: busybox}
              containers:
              - name: web
                image: busybox
                readinesProbe:
                  exec: {command: ["true"]}
        """)
    with pytest.raises(ManifestError) as err:
        manifests_from(parse_manifests(text, "web.yaml"))
    assert str(err.value) == (
        "web.yaml: 2 unknown fields:\n"
        "  web.yaml:9:7: spec.template.spec.initContianers: unknown field, did you mean "
        "'initContainers'?\n"
        "  web.yaml:14:9: spec.template.spec.containers[0].readinesProbe: unknown field, "
        "did you mean 'readinessProbe'?")
    assert exit_code_for(err.value) == ExitCode.USAGE == 2


def test_sepc_says_sepc_is_unknown_not_that_the_pod_has_no_container() -> None:
    text = "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nsepc:\n  containers: []\n"
    with pytest.raises(ManifestError) as err:
        plan_text(text)
    assert str(err.value) == ("test.yaml: 1 unknown field:\n"
                              "  test.yaml:4:1: sepc: unknown field, did you mean 'spec'?")
    assert "container" not in str(err.value)


def _plans(text: str, *, lenient: bool = False, strict: bool = False) -> Any:
    return plan_pods(manifests_from(parse_manifests(text, "t.yaml"), lenient=lenient),
                     volumes_root="/v", node_memory=1 << 30, node_name="n", strict=strict)


def test_lenient_makes_them_warnings_apart_from_the_unmapped_fields() -> None:
    text = ("apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  nodeSelector: {a: b}\n"
            "  containers: [{name: c, image: busybox, imagePullPolcy: Never}]\n")
    m = manifests_from(parse_manifests(text, "t.yaml"), lenient=True)
    assert m.warnings == ("t.yaml:6:42: spec.containers[0].imagePullPolcy: unknown field, "
                          "did you mean 'imagePullPolicy'?",)
    (plan,) = _plans(text, lenient=True)
    assert plan.warnings == ("spec.nodeSelector: not supported, ignored",)  # said once
    assert plan.containers[0].image_pull_policy == "Always"  # the typo was ignored
    with pytest.raises(InvalidArgumentError, match="a pod needs at least one container"):
        _plans("apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nsepc: {}\n", lenient=True)


def test_strict_refuses_the_unmapped_fields_and_unknown_ones_still_come_first() -> None:
    text = ("apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  nodeSelector: {a: b}\n"
            "  containers: [{name: c, image: busybox}]\n")
    with pytest.raises(InvalidArgumentError, match=r"spec\.nodeSelector: not supported by podkit"):
        _plans(text, strict=True)
    with pytest.raises(ManifestError, match="nodeSelectr: unknown field, did you mean "
                                            "'nodeSelector'"):
        _plans(text.replace("nodeSelector", "nodeSelectr"), strict=True)


@pytest.mark.parametrize("path", UNSUPPORTED)
def test_kubernetes_fields_podkit_does_not_map_are_not_unknown(path: str) -> None:
    body = pod()
    node: Any = body
    parts = path.replace("[]", ".[]").split(".")
    for i, part in enumerate(parts):
        if part == "[]":
            node = node[0]
        elif i == len(parts) - 1:
            node[part] = {"anything": {"inside": 1}}
        else:
            node = node.setdefault(part, [{}] if parts[i + 1] == "[]" else {})
    assert list(unknown_fields(body, POD_FIELDS)) == []
    assert [p.replace("[0]", "[]") for p in ignored_fields(body, POD_FIELDS)] == [path]
    assert [p.replace("[0]", "[]") for p in unsupported_fields(body, POD_FIELDS)] == [path]


def test_other_resource_names_are_kubernetes_fields() -> None:
    body = pod({"containers": [ctr(resources={"limits": {"nvidia.com/gpu": 1, "cpu": "1"},
                                              "requests": {"ephemeral-storage": "1Gi"}})]})
    assert list(unknown_fields(body, POD_FIELDS)) == []
    assert list(ignored_fields(body, POD_FIELDS)) == [
        "spec.containers[0].resources.limits.nvidia.com/gpu",
        "spec.containers[0].resources.requests.ephemeral-storage"]


def test_every_fixture_manifest_is_strictly_valid() -> None:
    paths = sorted(MANIFESTS.glob("*.yaml"))
    assert load_manifests(paths).warnings == ()
    for path in paths:
        for doc in parse_manifests(path.read_text(), str(path)):
            assert field_problems(doc) == [], path


def test_the_tree_names_only_fields_kubernetes_has_with_known_leaves() -> None:
    seen: list[Any] = []

    def walk(tree: Any) -> None:
        if isinstance(tree, list):
            walk(tree[0])
        elif isinstance(tree, dict):
            for key, sub in tree.items():
                assert key == "*" or (key[0].islower() and key.isalnum()), key
                walk(sub)
        else:
            seen.append(tree)

    for tree in DOCUMENT_FIELDS.values():
        walk(tree)
    assert set(seen) <= {None, "strings", "ints", "map", "any", IGNORED}


@pytest.mark.parametrize(("name", "names", "meant"), [
    ("initContianers", ["containers", "initContainers"], "initContainers"),
    ("INITCONTAINERS", ["containers", "initContainers"], "initContainers"),  # case only
    ("sepc", ["apiVersion", "kind", "metadata", "spec", "status"], "spec"),
    ("frobnicate", ["apiVersion", "kind", "metadata", "spec", "status"], ""),
])
def test_the_field_meant(name: str, names: list[str], meant: str) -> None:
    tree = dict.fromkeys(names)
    assert list(unknown_fields({name: 1}, tree)) == [(name, meant)]


def test_no_suggestion_and_keys_that_are_not_strings() -> None:
    text = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\nfrobnicate: 1\n1: x\n"
    (doc,) = parse_manifests(text, "c.yaml")
    assert field_problems(doc) == ["c.yaml:4:1: frobnicate: unknown field",
                                   "c.yaml:5:1: 1: unknown field"]


def test_duplicate_fields_are_refused_or_warned() -> None:
    text = textwrap.dedent("""        apiVersion: v1
        kind: Pod
        metadata: {name: p, name: q}
        spec:
          containers:
          - {name: c, image: busybox}
          containers:
          - {name: d, image: busybox}
        """)
    with pytest.raises(ManifestError) as err:
        manifests_from(parse_manifests(text, "d.yaml"))
    assert str(err.value) == ("d.yaml: 2 duplicate fields:\n"
                              "  d.yaml:3:21: metadata.name: duplicate field\n"
                              "  d.yaml:7:3: spec.containers: duplicate field")
    m = manifests_from(parse_manifests(text, "d.yaml"), lenient=True)
    assert len(m.warnings) == 2 and m.documents[0].name == "q"  # the later value counts


def test_yaml_merge_keys_are_not_duplicates_or_fields() -> None:
    text = textwrap.dedent("""        apiVersion: v1
        kind: Pod
        metadata: {name: p}
        spec:
          containers:
          - &base {name: c, image: busybox}
          - <<: *base
            name: d
        """)
    m = manifests_from(parse_manifests(text, "m.yaml"))
    assert m.warnings == () and m.documents[0].body["spec"]["containers"][1]["name"] == "d"


def test_one_error_lists_every_document_and_file(tmp_path: Any) -> None:
    a = tmp_path / "a.yaml"
    a.write_text(yaml.safe_dump_all([_with(KINDS["Pod"], ("spec",), "hostPid"),
                                     _with(KINDS["ConfigMap"], (), "dat")]))
    cm = tmp_path / "cm.yaml"
    cm.write_text(yaml.safe_dump(_with(KINDS["ConfigMap"], ("metadata",), "nme")
                                 | {"metadata": {"name": "b", "nme": 1}}))
    with pytest.raises(ManifestError) as err:
        load_manifests([a], configmap_files=[cm])
    lines = str(err.value).splitlines()
    assert lines[0] == f"{a}, {cm}: 3 unknown fields:"
    assert [line.split(": ", 1)[1] for line in lines[1:]] == [
        "spec.hostPid: unknown field, did you mean 'hostPID'?",
        "dat: unknown field, did you mean 'data'?",
        "metadata.nme: unknown field, did you mean 'name'?"]
    m = load_manifests([a], configmap_files=[cm], lenient=True)
    assert len(m.warnings) == 3 and set(m.config_maps) == {("default", "a"), ("default", "b")}


def test_pod_to_cri_is_strict_unless_lenient() -> None:
    manifest = _with(KINDS["Pod"], ("spec", "containers", 0), "comand")
    with pytest.raises(ManifestError, match=r"<manifest>:1:1: spec.containers\[0\].comand: "
                                            r"unknown field, did you mean 'command'\?"):
        pod_to_cri(manifest, node_memory=1 << 30)
    _, [c] = pod_to_cri(manifest, node_memory=1 << 30, lenient=True)
    assert list(c.command) == []


def test_a_missing_manifest_is_not_found(tmp_path: Any) -> None:
    with pytest.raises(ManifestNotFoundError, match=r"cannot read manifest '.*nope.yaml'") as e:
        load_manifests([tmp_path / "nope.yaml"])
    assert isinstance(e.value, ManifestError)
    assert exit_code_for(e.value) == ExitCode.NOT_FOUND == 3
    with pytest.raises(ManifestNotFoundError):
        load_manifests([], secret_files=[tmp_path / "nope.yaml"])
    (tmp_path / "dir.yaml").mkdir()
    with pytest.raises(ManifestError) as e2:
        load_manifests([tmp_path / "dir.yaml"])
    assert exit_code_for(e2.value) == ExitCode.USAGE


def test_an_alias_that_contains_itself_or_expands_too_far_is_refused() -> None:
    with pytest.raises(ManifestError, match=r"^r.yaml:3:11: metadata.l\[0\] contains itself"):
        parse_manifests("apiVersion: v1\nkind: Pod\nmetadata: &x {name: a, l: [*x]}\n",
                        "r.yaml")
    bomb = "apiVersion: v1\nkind: Pod\nmetadata: {name: a}\na: &a [x, x, x, x, x, x, x, x]\n"
    for prev, name in zip("abcdefg", "bcdefgh", strict=True):
        bomb += f"{name}: &{name} [{', '.join([f'*{prev}'] * 8)}]\n"
    with pytest.raises(ManifestError, match=r"more than 100000 fields \(aliases expanded\)"):
        parse_manifests(bomb, "b.yaml")
