"""Container configs and plans: command/args, pull policy, labels, annotations, probes, hooks."""

from __future__ import annotations

from typing import Any

import pytest

from podkit.errors import InvalidArgumentError
from podkit.kube import ProbeSpec
from podkit.kube.containers import default_pull_policy, image_tag

from .helpers import ctr, plan_of, plans, pod


@pytest.mark.parametrize(("image", "tag", "policy"), [
    ("busybox", "latest", "Always"),
    ("busybox:latest", "latest", "Always"),
    ("busybox:1.36", "1.36", "IfNotPresent"),
    ("registry:5000/team/app", "latest", "Always"),
    ("registry:5000/team/app:v2", "v2", "IfNotPresent"),
    ("app@sha256:" + "a" * 64, "", "IfNotPresent"),
    ("app:latest@sha256:" + "a" * 64, "latest", "Always"),
])
def test_pull_policy_default_rule(image: str, tag: str, policy: str) -> None:
    assert image_tag(image) == tag
    assert default_pull_policy(image) == policy


def test_explicit_pull_policy_wins() -> None:
    p = plan_of(pod({"containers": [ctr(image="busybox", imagePullPolicy="Never")]}))
    assert p.containers[0].image_pull_policy == "Never"


def test_command_and_args_pass_through_as_cri_fields() -> None:
    p = plan_of(pod({"containers": [
        ctr(command=["/bin/sh", "-c"], args=["echo hi"]),
        {"name": "args-only", "image": "busybox", "args": ["-x"]},
        {"name": "neither", "image": "busybox"}]}))
    got = [(list(c.config.command), list(c.config.args)) for c in p.containers]
    # args alone keep the image entrypoint: the CRI runtime merges them as kubelet expects.
    assert got == [(["/bin/sh", "-c"], ["echo hi"]), ([], ["-x"]), ([], [])]


def test_container_fields() -> None:
    p = plan_of(pod({"containers": [ctr(workingDir="/srv", tty=True, stdin=True,
                                        stdinOnce=True)]}, uid="u1"))
    c = p.containers[0].config
    assert (c.working_dir, c.tty, c.stdin, c.stdin_once) == ("/srv", True, True, True)
    assert (c.metadata.name, c.metadata.attempt, c.image, c.log_path) == (
        "c", 0, "busybox:1.36", "c/0.log")
    assert c.labels == {"io.kubernetes.pod.name": "p", "io.kubernetes.pod.namespace": "default",
                        "io.kubernetes.pod.uid": "u1", "io.kubernetes.container.name": "c"}


def test_kubelet_annotations() -> None:
    (web, _) = plans("web.yaml")
    a = web.containers[0].config.annotations
    assert a == {"io.kubernetes.container.restartCount": "0",
                 "io.kubernetes.container.terminationMessagePath": "/dev/termination-log",
                 "io.kubernetes.container.terminationMessagePolicy": "File",
                 "io.kubernetes.pod.terminationGracePeriod": "30",
                 "io.kubernetes.container.ports":
                     '[{"name":"http","hostPort":18080,"containerPort":8080,"protocol":"TCP"}]'}


def test_web_fixture_probe_and_init_container() -> None:
    (web, job) = plans("web.yaml")
    httpd = web.containers[0]
    assert list(httpd.config.command) == ["httpd", "-f", "-p", "8080", "-h", "/www"]
    assert httpd.readiness == ProbeSpec(kind="httpGet", port=8080, path="/index.html",
                                        initial_delay_seconds=1, period_seconds=2)
    assert httpd.liveness is None and httpd.startup is None
    (page,) = web.init_containers
    assert list(page.config.command) == ["sh", "-c", "echo hello from web > /www/index.html"]
    assert (job.name, job.restart_policy) == ("client-pod", "Never")
    assert list(job.containers[0].config.args) == [
        "wget", "-q", "-O-", "http://192.0.2.10:8080/index.html"]


def _probe(probe: dict[str, Any], kind: str = "readinessProbe", **extra: Any) -> Any:
    c = ctr(ports=[{"name": "web", "containerPort": 8080}], **{kind: probe}, **extra)
    plan = plan_of(pod({"containers": [c]})).containers[0]
    return {"readinessProbe": plan.readiness, "livenessProbe": plan.liveness,
            "startupProbe": plan.startup}[kind]


@pytest.mark.parametrize(("probe", "expected"), [
    ({"exec": {"command": ["cat", "/ready"]}}, ProbeSpec(kind="exec", command=("cat", "/ready"))),
    ({"tcpSocket": {"port": "web"}, "periodSeconds": 5, "failureThreshold": 1},
     ProbeSpec(kind="tcpSocket", port=8080, period_seconds=5, failure_threshold=1)),
    ({"tcpSocket": {"port": 9000, "host": "127.0.0.1"}},
     ProbeSpec(kind="tcpSocket", port=9000, host="127.0.0.1")),
    ({"httpGet": {"port": "8080", "scheme": "HTTPS", "httpHeaders": [
        {"name": "X-A", "value": "1"}]}, "timeoutSeconds": 3, "successThreshold": 2,
      "initialDelaySeconds": 4},
     ProbeSpec(kind="httpGet", port=8080, scheme="HTTPS", http_headers=(("X-A", "1"),),
               timeout_seconds=3, success_threshold=2, initial_delay_seconds=4)),
])
def test_probes(probe: dict[str, Any], expected: ProbeSpec) -> None:
    assert _probe(probe) == expected


def test_liveness_and_startup_probes() -> None:
    assert _probe({"exec": {"command": ["true"]}}, "livenessProbe") == ProbeSpec(
        kind="exec", command=("true",))
    assert _probe({"tcpSocket": {"port": 1}}, "startupProbe") == ProbeSpec(
        kind="tcpSocket", port=1)


@pytest.mark.parametrize(("probe", "message"), [
    ({"tcpSocket": {"port": "nope"}},
     r"readinessProbe.tcpSocket.port: port 'nope' is neither a number nor a named"),
    ({"tcpSocket": {"port": 70000}}, r"tcpSocket.port: port 70000 is not in 1-65535"),
    ({"grpc": {"port": 1}}, r"readinessProbe: needs exactly one of exec, httpGet, tcpSocket"),
    ({}, None),
    ({"exec": {"command": []}}, r"readinessProbe.exec.command: must not be empty"),
    ({"exec": {"command": ["x"]}, "periodSeconds": 0},
     r"readinessProbe.periodSeconds: 0 must be an integer >= 1"),
    ({"httpGet": {"port": 1, "scheme": "FTP"}}, r"httpGet.scheme: 'FTP' is not HTTP or HTTPS"),
])
def test_bad_probes(probe: dict[str, Any], message: str | None) -> None:
    if message is None:
        assert _probe(probe) is None
        return
    with pytest.raises(InvalidArgumentError, match=message):
        _probe(probe)


def test_lifecycle_hooks() -> None:
    plan = plan_of(pod({"containers": [ctr(lifecycle={
        "postStart": {"exec": {"command": ["touch", "/started"]}},
        "preStop": {"exec": {"command": ["sh", "-c", "kill 1"]}}})]})).containers[0]
    assert plan.post_start == ("touch", "/started")
    assert plan.pre_stop == ("sh", "-c", "kill 1")


def test_http_hooks_are_refused() -> None:
    with pytest.raises(InvalidArgumentError,
                       match=r"lifecycle.preStop: only exec handlers are supported "
                             r"\(got httpGet\)"):
        plan_of(pod({"containers": [ctr(lifecycle={"preStop": {"httpGet": {"port": 80}}})]}))


def test_grace_period_and_restart_policy() -> None:
    p = plan_of(pod({"terminationGracePeriodSeconds": 5, "restartPolicy": "OnFailure"}))
    assert (p.termination_grace_period_seconds, p.restart_policy) == (5, "OnFailure")
    assert p.containers[0].config.annotations["io.kubernetes.pod.terminationGracePeriod"] == "5"
    p = plan_of(pod())
    assert (p.termination_grace_period_seconds, p.restart_policy) == (30, "Always")


def test_cdi_annotations_of_the_pod_go_to_every_container() -> None:
    p = plan_of(pod({"initContainers": [ctr(name="i")], "containers": [ctr()]},
                    annotations={"cdi.k8s.io/gpu": "vendor.com/gpu=0,vendor.com/gpu=1",
                                 "team": "x"}))
    for c in (*p.init_containers, *p.containers):
        assert c.config.annotations["cdi.k8s.io/gpu"] == "vendor.com/gpu=0,vendor.com/gpu=1"
        assert "team" not in c.config.annotations
    assert p.sandbox.annotations["team"] == "x"


def test_a_cdi_annotation_naming_no_device_is_refused() -> None:
    with pytest.raises(InvalidArgumentError,
                       match=r"metadata.annotations.cdi.k8s.io/gpu.*invalid CDI device name "
                             r'"vendor.com/gpu"'):
        plan_of(pod(annotations={"cdi.k8s.io/gpu": "vendor.com/gpu"}))
