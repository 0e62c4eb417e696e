"""Tests for the pure CRI rules (names, cgroup paths, resolv.conf, annotations, OOM, caps)."""

from __future__ import annotations

import pytest

from podkit.errors import InvalidArgumentError
from podkit.pods import rules as rules
from podkit.pods.config import (
    ContainerMetadata,
    DNSConfig,
    PodSandboxMetadata,
    SandboxConfig,
)

KNOWN = ["CAP_CHOWN", "CAP_KILL", "CAP_NET_ADMIN", "CAP_SYS_ADMIN", "CAP_NET_RAW"]


def test_names_follow_containerd() -> None:
    pod = PodSandboxMetadata(name="web", uid="u1", namespace="ns", attempt=2)
    assert rules.sandbox_name(pod) == "web_ns_u1_2"
    assert rules.container_name(ContainerMetadata(name="app", attempt=1), pod) == "app_web_ns_u1_1"


@pytest.mark.parametrize(
    ("parent", "expected"),
    [
        ("/kubepods/burstable", "/kubepods/burstable/abc"),
        ("/", "/abc"),
        ("kubepods-besteffort.slice", "kubepods-besteffort.slice:cri-podkit:abc"),
        ("/kubepods.slice/kubepods-pod1.slice", "kubepods-pod1.slice:cri-podkit:abc"),
        ("/kubepods.slice/", "kubepods.slice:cri-podkit:abc"),
    ],
)
def test_cgroups_path(parent: str, expected: str) -> None:
    assert rules.cgroups_path(parent, "abc") == expected


def test_resolv_conf_order_and_empty() -> None:
    dns = DNSConfig(servers=["10.0.0.10", "8.8.8.8"], searches=["a.svc", "b"], options=["ndots:5"])
    assert rules.resolv_conf(dns) == (
        "search a.svc b\nnameserver 10.0.0.10\nnameserver 8.8.8.8\noptions ndots:5\n"
    )
    assert rules.resolv_conf(DNSConfig()) == ""


def test_annotations() -> None:
    cfg = SandboxConfig(
        metadata=PodSandboxMetadata(name="p", uid="u", namespace="n"), log_directory="/logs"
    )
    sb = rules.sandbox_annotations("sid", cfg, "pause:1")
    assert sb["io.kubernetes.cri.container-type"] == "sandbox"
    assert sb["io.kubernetes.cri.sandbox-log-directory"] == "/logs"
    assert sb["io.kubernetes.cri.podsandbox.image-name"] == "pause:1"
    ctr = rules.container_annotations("sid", "c", "img", cfg)
    assert ctr["io.kubernetes.cri.container-type"] == "container"
    assert ctr["io.kubernetes.cri.container-name"] == "c"
    assert ctr["io.kubernetes.cri.sandbox-uid"] == "u"


@pytest.mark.parametrize(
    ("value", "floor", "expected"),
    [(-998, 0, 0), (-998, None, -998), (500, 0, 500), (-5000, None, -1000), (5000, 0, 1000)],
)
def test_clamp_oom_score_adj(value: int, floor: int | None, expected: int) -> None:
    assert rules.clamp_oom_score_adj(value, floor) == expected


def test_current_oom_score_adj_reads_proc() -> None:
    assert -1000 <= rules.current_oom_score_adj() <= 1000


def test_resolve_capabilities_add_drop_all() -> None:
    base = ["CAP_CHOWN", "CAP_KILL"]
    assert rules.resolve_capabilities(base, ["net_admin"], ["kill"], KNOWN) == [
        "CAP_CHOWN",
        "CAP_NET_ADMIN",
    ]
    assert rules.resolve_capabilities(base, ["ALL"], [], KNOWN) == KNOWN
    assert rules.resolve_capabilities(base, ["NET_RAW"], ["ALL"], KNOWN) == ["CAP_NET_RAW"]
    assert rules.resolve_capabilities(base, ["ALL"], ["CAP_SYS_ADMIN"], KNOWN) == [
        "CAP_CHOWN", "CAP_KILL", "CAP_NET_ADMIN", "CAP_NET_RAW"
    ]


def test_resolve_capabilities_rejects_unknown_names() -> None:
    with pytest.raises(InvalidArgumentError, match=r"CAP_FLY.*add_capabilities"):
        rules.resolve_capabilities([], ["fly"], [], KNOWN)
    with pytest.raises(InvalidArgumentError, match="empty capability"):
        rules.resolve_capabilities([], [], [" "], KNOWN)


def test_merge_env_replaces_in_place() -> None:
    assert rules.merge_env(["A=1", "B=2"], {"A": "3"}, ["C", "B=x=y"]) == ["A=3", "B=x=y", "C="]
