"""Container env as the kubelet builds it: $(VAR) expansion, valueFrom, envFrom."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from podkit.errors import InvalidArgumentError
from podkit.kube import POD_IP_PLACEHOLDER
from podkit.kube.env import expand, mapping_for

from .helpers import config_map, ctr, plan_of, plans, pod, secret

VARS = {"VAR_A": "A", "VAR_B": "B", "VAR_C": "C", "VAR_REF": "$(VAR_A)", "VAR_EMPTY": "",
        "BLOCK": "$$(VAR_A)"}


@pytest.mark.parametrize(("text", "out"), [
    ("$(VAR_A)", "A"),
    ("___$(VAR_B)___", "___B___"),
    ("$(VAR_A)-$(VAR_B)-$(VAR_C)", "A-B-C"),
    ("$(VAR_A)$(VAR_B)", "AB"),
    ("$(VAR_EMPTY)", ""),
    ("$(VAR_REF)", "$(VAR_A)"),                # values are not expanded again
    ("$(UNDEFINED)", "$(UNDEFINED)"),          # unknown names stay as written
    ("$$(VAR_A)", "$(VAR_A)"),                 # $$ escapes
    ("$$$(VAR_A)", "$A"),
    ("$$$$(VAR_A)", "$$(VAR_A)"),
    ("$$", "$"),
    ("$$$", "$$"),
    ("$", "$"),
    ("$(", "$("),                              # incomplete references stay
    ("$(VAR_A", "$(VAR_A"),
    ("$VAR_A", "$VAR_A"),                      # a $ not followed by ( or $ stays
    ("$(VAR_A)$", "A$"),
    ("$()", "$()"),                            # the empty name is undefined
    ("$($(VAR_A))", "$($(VAR_A))"),           # nested: the name is '$(VAR_A' (undefined), ')' stays
    ("($(VAR_A))", "(A)"),
    ("$(BLOCK)", "$$(VAR_A)"),
    ("no references", "no references"),
    ("", ""),
])
def test_expansion_cases(text: str, out: str) -> None:
    assert expand(text, mapping_for(VARS)) == out


def test_mapping_takes_the_first_table() -> None:
    look = mapping_for({"A": "one"}, {"A": "two", "B": "b"})
    assert (look("A"), look("B"), look("C")) == ("one", "b", "$(C)")


def _env(plan_containers: object) -> dict[str, str]:
    return {kv.key: kv.value for kv in plan_containers}  # type: ignore[attr-defined]


def test_env_expands_against_earlier_vars_only() -> None:
    p = plan_of(pod({"containers": [ctr(
        env=[{"name": "A", "value": "a"}, {"name": "B", "value": "$(A)-$(C)"},
             {"name": "C", "value": "c"}, {"name": "A", "value": "again-$(A)"}],
        command=["echo", "$(A)", "$(B)", "$$(C)"], args=["$(C)", "$(NOPE)"])]}))
    config = p.containers[0].config
    assert _env(config.envs) == {"A": "again-a", "B": "a-$(C)", "C": "c"}
    assert [kv.key for kv in config.envs] == ["A", "B", "C"]
    # command and args see the final env
    assert list(config.command) == ["echo", "again-a", "a-$(C)", "$(C)"]
    assert list(config.args) == ["c", "$(NOPE)"]


def test_field_refs() -> None:
    refs = ["metadata.name", "metadata.namespace", "metadata.uid", "spec.nodeName",
            "spec.serviceAccountName", "status.podIP", "metadata.labels['app']",
            "metadata.annotations['note']", "metadata.labels['missing']"]
    env = [{"name": f"V{i}", "valueFrom": {"fieldRef": {"fieldPath": r}}}
           for i, r in enumerate(refs)]
    env.append({"name": "IP_URL", "value": "http://$(V5):80"})
    p = plan_of(pod({"containers": [ctr(env=env)]}, namespace="ns1", uid="u-1",
                    labels={"app": "web"}, annotations={"note": "hi"}))
    got = _env(p.containers[0].config.envs)
    assert [got[f"V{i}"] for i in range(len(refs))] == [
        "p", "ns1", "u-1", "node-1", "default", POD_IP_PLACEHOLDER, "web", "hi", ""]
    # The pod IP is known only after run_sandbox: kube play replaces the placeholder.
    assert got["IP_URL"] == f"http://{POD_IP_PLACEHOLDER}:80"


def test_config_map_and_secret_refs_and_env_from() -> None:
    (p,) = plans("config.yaml")
    got = _env(p.containers[0].config.envs)
    assert got == {"CFG_mode": "production", "CFG_app.conf": "listen 8080\n",
                   "MODE": "production", "PASSWORD": "s3cr3t",
                   "GREETING": "mode=production user=production"}
    assert "MISSING" not in got  # optional and missing: not set at all


def test_env_wins_over_env_from_and_later_env_from_wins() -> None:
    p = plan_of(pod({"containers": [ctr(
        envFrom=[{"configMapRef": {"name": "one"}}, {"secretRef": {"name": "two"}}],
        env=[{"name": "K", "value": "env"}])]}),
        config_map("one", K="cm", ONLY="cm", SHARED="cm"), secret("two", SHARED="secret"))
    assert _env(p.containers[0].config.envs) == {"K": "env", "ONLY": "cm", "SHARED": "secret"}


def test_env_from_skips_keys_that_are_not_env_names_with_a_warning() -> None:
    p = plan_of(pod({"containers": [ctr(envFrom=[{"configMapRef": {"name": "c"}}])]}),
                config_map("c", **{"ok": "1", "1bad": "2", "has space": "3"}))
    assert _env(p.containers[0].config.envs) == {"ok": "1"}
    assert ("spec.containers[0].envFrom[0]: keys skipped, not valid env names: 1bad, "
            "has space") in p.warnings


def test_optional_sources_that_are_missing_are_skipped() -> None:
    p = plan_of(pod({"containers": [ctr(
        envFrom=[{"configMapRef": {"name": "gone", "optional": True}}],
        env=[{"name": "S", "valueFrom": {"secretKeyRef": {"name": "gone", "key": "k",
                                                          "optional": True}}}])]}))
    assert p.containers[0].config.envs == ()


@pytest.mark.parametrize(("env", "message"), [
    ({"name": "X", "valueFrom": {"configMapKeyRef": {"name": "nope", "key": "k"}}},
     r"spec.containers\[0\].env\[0\].valueFrom.configMapKeyRef: ConfigMap default/'nope' "
     "not found"),
    ({"name": "X", "valueFrom": {"configMapKeyRef": {"name": "c", "key": "nokey"}}},
     r"configMapKeyRef: ConfigMap default/'c' has no key 'nokey'"),
    ({"name": "X", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}},
     r"secretKeyRef: Secret default/'s' not found"),
    ({"name": "X", "valueFrom": {"fieldRef": {"fieldPath": "status.hostIP"}}},
     r"fieldRef.fieldPath: 'status.hostIP' is not supported"),
])
def test_missing_sources_are_errors_naming_the_field(env: dict[str, object],
                                                     message: str) -> None:
    with pytest.raises(InvalidArgumentError, match=message) as err:
        plan_of(pod({"containers": [ctr(env=[env])]}), config_map("c", k="v"))
    assert str(err.value).startswith("test.yaml:")


def test_env_from_missing_config_map_is_an_error() -> None:
    with pytest.raises(InvalidArgumentError,
                       match=r"envFrom\[0\]: ConfigMap default/'gone' not found"):
        plan_of(pod({"containers": [ctr(envFrom=[{"configMapRef": {"name": "gone"}}])]}))


@given(st.text(alphabet=st.characters(blacklist_characters="$")))
def test_text_without_dollar_is_unchanged(text: str) -> None:
    assert expand(text, mapping_for(VARS)) == text


@given(st.from_regex(r"\A[A-Z_]{1,8}\Z"), st.text(alphabet=st.characters(
    blacklist_characters="$()")))
def test_escaped_references_are_never_expanded(name: str, value: str) -> None:
    assert expand(f"$$({name})", mapping_for({name: value})) == f"$({name})"
    assert expand(f"$({name})", mapping_for({name: value})) == value


RESOURCES = {"requests": {"cpu": "250m", "memory": "64Mi"}, "limits": {"cpu": "1500m"}}


@pytest.mark.parametrize(("ref", "out"), [
    ({"resource": "limits.cpu"}, "2"),                       # 1.5 cores rounded up
    ({"resource": "limits.cpu", "divisor": "1m"}, "1500"),
    ({"resource": "requests.cpu", "divisor": "1m"}, "250"),
    ({"resource": "requests.cpu"}, "1"),
    ({"resource": "requests.memory"}, str(64 << 20)),
    ({"resource": "requests.memory", "divisor": "1Mi"}, "64"),
    ({"resource": "requests.memory", "divisor": "1M"}, "68"),  # 67.1 rounded up
    # An unset limit is the node's allocatable amount.
    ({"resource": "limits.memory", "divisor": "1Gi"}, "8"),
    ({"resource": "limits.cpu", "containerName": "other"}, "4"),
    ({"resource": "requests.cpu", "containerName": "other"}, "0"),
])
def test_resource_field_refs(ref: dict[str, str], out: str) -> None:
    p = plan_of(pod({"containers": [
        ctr(resources=RESOURCES, env=[{"name": "V", "valueFrom": {"resourceFieldRef": ref}}]),
        {"name": "other", "image": "busybox"}]}), node_cpus=4)
    assert _env(p.containers[0].config.envs) == {"V": out}


def test_resource_field_refs_in_downward_volumes() -> None:
    p = plan_of(pod({"containers": [ctr(resources=RESOURCES)], "volumes": [{
        "name": "d", "downwardAPI": {"items": [{"path": "cpu", "resourceFieldRef": {
            "containerName": "c", "resource": "limits.cpu", "divisor": "1m"}}]}}]}))
    assert p.volumes[0].files == (("cpu", b"1500", 0o644),)


@pytest.mark.parametrize(("ref", "message"), [
    ({"resource": "limits.ephemeral-storage"},
     r"resourceFieldRef.resource: 'limits.ephemeral-storage' is not one of limits.cpu"),
    ({"resource": "limits.cpu", "containerName": "ghost"},
     r"resourceFieldRef.containerName: no container named 'ghost'"),
    ({"resource": "limits.cpu", "divisor": "lots"}, r"resourceFieldRef.divisor: 'lots' is not"),
])
def test_bad_resource_field_refs(ref: dict[str, str], message: str) -> None:
    with pytest.raises(InvalidArgumentError, match=message):
        plan_of(pod({"containers": [ctr(env=[{"name": "V", "valueFrom": {
            "resourceFieldRef": ref}}])]}))


def test_downward_volume_resource_refs_need_a_container_name() -> None:
    with pytest.raises(InvalidArgumentError,
                       match=r"items\[0\].resourceFieldRef.containerName: required in a "
                             "downwardAPI volume"):
        plan_of(pod({"volumes": [{"name": "d", "downwardAPI": {"items": [{
            "path": "x", "resourceFieldRef": {"resource": "limits.cpu"}}]}}]}))
