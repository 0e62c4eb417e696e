"""Resources as the kubelet computes them: quantities, CPU shares and quota, QoS, OOM score."""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from podkit.errors import InvalidArgumentError
from podkit.kube import qos_class
from podkit.kube.quantity import milli_value, parse_quantity, value
from podkit.kube.resources import (
    container_resources,
    effective_requests,
    milli_cpu_to_quota,
    milli_cpu_to_shares,
    oom_score_adj,
)

from .helpers import NODE_MEMORY, plans

GI = 1 << 30


@pytest.mark.parametrize(("text", "exact"), [
    ("100m", Fraction(1, 10)), ("0.5", Fraction(1, 2)), ("1", 1), (2, 2), (0.25, Fraction(1, 4)),
    ("128Mi", 128 << 20), ("1Gi", GI), ("1G", 10**9), ("1k", 1000), ("1Ki", 1024),
    ("1e3", 1000), ("1E3", 1000), ("5e-1", Fraction(1, 2)), ("1.5Gi", 3 << 29), (".5", 0.5),
    ("250u", Fraction(1, 4000)), ("3n", Fraction(3, 10**9)), ("1E", 10**18),
])
def test_quantities(text: object, exact: Fraction) -> None:
    assert parse_quantity(text) == exact


@pytest.mark.parametrize("text", ["", "1.2.3", "10 Mi", "Mi", "1mi", "abc", True, None, [1]])
def test_bad_quantities_name_the_value(text: object) -> None:
    with pytest.raises(InvalidArgumentError, match=r"^limits.cpu: .* is not a quantity"):
        parse_quantity(text, "limits.cpu")


def test_value_and_milli_value_round_up() -> None:
    assert milli_value("100m") == 100 and milli_value("0.1") == 100
    assert milli_value("1n") == 1  # MilliValue rounds up
    assert value("1500m") == 2 and value("64Mi") == 64 << 20


@pytest.mark.parametrize(("milli", "shares"), [
    (0, 2), (1, 2), (2, 2), (3, 3), (100, 102), (250, 256), (500, 512), (1000, 1024),
    (1500, 1536), (256000, 262144), (300000, 262144),
])
def test_cpu_shares_as_kubelet(milli: int, shares: int) -> None:
    assert milli_cpu_to_shares(milli) == shares


@pytest.mark.parametrize(("milli", "quota"), [
    (0, 0), (1, 1000), (5, 1000), (10, 1000), (11, 1100), (100, 10000), (500, 50000),
    (1000, 100000), (2500, 250000),
])
def test_cpu_quota_as_kubelet(milli: int, quota: int) -> None:
    assert milli_cpu_to_quota(milli) == quota


def _c(requests: dict[str, Any] | None = None, limits: dict[str, Any] | None = None,
       ) -> dict[str, Any]:
    res: dict[str, Any] = {}
    if requests is not None:
        res["requests"] = requests
    if limits is not None:
        res["limits"] = limits
    return {"name": "c", "resources": res}


@pytest.mark.parametrize(("containers", "qos"), [
    ([_c()], "BestEffort"),
    ([_c({"cpu": "0"}, {"memory": "0"})], "BestEffort"),
    ([_c(limits={"cpu": "1", "memory": "1Gi"})], "Guaranteed"),
    ([_c({"cpu": "1", "memory": "1Gi"}, {"cpu": "1", "memory": "1Gi"})], "Guaranteed"),
    ([_c({"cpu": "1000m"}, {"cpu": "1", "memory": "1Gi"})], "Guaranteed"),
    ([_c({"cpu": "500m"}, {"cpu": "1", "memory": "1Gi"})], "Burstable"),
    ([_c(limits={"cpu": "1"})], "Burstable"),
    ([_c({"memory": "1Gi"})], "Burstable"),
    ([_c(limits={"cpu": "1", "memory": "1Gi"}), _c()], "Burstable"),
    ([_c(limits={"cpu": "1", "memory": "1Gi"}), _c(limits={"cpu": "2", "memory": "1Gi"})],
     "Guaranteed"),
    # Only cpu and memory count.
    ([_c({"ephemeral-storage": "1Gi"})], "BestEffort"),
    ([_c(limits={"cpu": "1", "memory": "1Gi", "ephemeral-storage": "1Gi"})], "Guaranteed"),
])
def test_qos_class_as_kubelet(containers: list[dict[str, Any]], qos: str) -> None:
    assert qos_class(containers) == qos


@pytest.mark.parametrize(("qos", "mem_request", "memory", "adj"), [
    ("Guaranteed", 0, 8 * GI, -997),
    ("BestEffort", 0, 8 * GI, 1000),
    ("Burstable", 0, 8 * GI, 999),          # 1000 - 0 = 1000 -> 999
    ("Burstable", 1, 8 * GI, 999),
    ("Burstable", 4 * GI, 8 * GI, 500),
    ("Burstable", 2 * GI, 8 * GI, 750),
    ("Burstable", 16 << 20, 8 * GI, 999),   # 1000 - 1 (16000/8192 truncated)
    ("Burstable", 64 << 20, 8 * GI, 993),   # 1000 - 7
    ("Burstable", 8 * GI - 1, 8 * GI, 3),   # 1000 - 999 = 1 -> 3
    ("Burstable", 8 * GI, 8 * GI, 3),       # 0 -> 3
    ("Burstable", 16 * GI, 8 * GI, 3),      # negative -> 3
    ("Burstable", 7 * GI + GI // 1000 * 995, 8 * GI, 3),
])
def test_oom_score_adj_as_kubelet(qos: str, mem_request: int, memory: int, adj: int) -> None:
    assert oom_score_adj(qos, mem_request, memory) == adj


@given(st.integers(0, 1 << 40), st.integers(1, 1 << 40))
def test_burstable_oom_score_stays_within_3_and_999(request: int, memory: int) -> None:
    assert 3 <= oom_score_adj("Burstable", request, memory) <= 999


def test_requests_default_to_limits() -> None:
    assert effective_requests({"limits": {"cpu": "1", "memory": "1Gi"},
                               "requests": {"cpu": "200m"}}) == {"cpu": "200m", "memory": "1Gi"}
    assert effective_requests(None) == {}


@pytest.mark.parametrize(("resources", "qos", "expected"), [
    ({}, "BestEffort", (100000, 0, 2, 0, 1000)),
    ({"requests": {"cpu": "100m"}}, "Burstable", (100000, 0, 102, 0, 999)),
    ({"limits": {"cpu": "500m", "memory": "128Mi"}}, "Guaranteed",
     (100000, 50000, 512, 128 << 20, -997)),
    ({"requests": {"cpu": "1m", "memory": "4Gi"}, "limits": {"cpu": "2"}}, "Burstable",
     (100000, 200000, 2, 0, 500)),
])
def test_container_resources(resources: dict[str, Any], qos: str,
                             expected: tuple[int, ...]) -> None:
    r = container_resources(resources, qos, NODE_MEMORY)
    assert (r.cpu_period, r.cpu_quota, r.cpu_shares, r.memory_limit_in_bytes,
            r.oom_score_adj) == expected


def test_bad_quantity_in_resources_names_the_field() -> None:
    with pytest.raises(InvalidArgumentError, match=r"^res.limits.memory: 'lots' is not a"):
        container_resources({"limits": {"memory": "lots"}}, "Burstable", NODE_MEMORY, "res")


def test_qos_fixture_pods() -> None:
    got = {p.name: p.containers[0].config.linux.resources for p in plans("qos.yaml")}
    assert got["guaranteed"] is not None and got["guaranteed"].oom_score_adj == -997
    assert (got["guaranteed"].cpu_shares, got["guaranteed"].cpu_quota) == (256, 25000)
    assert got["guaranteed"].memory_limit_in_bytes == 32 << 20
    assert got["burstable"] is not None and got["burstable"].oom_score_adj == 999
    assert (got["burstable"].cpu_shares, got["burstable"].cpu_quota) == (102, 0)
    assert got["burstable"].memory_limit_in_bytes == 64 << 20
    assert got["besteffort"] is not None
    assert (got["besteffort"].oom_score_adj, got["besteffort"].cpu_shares) == (1000, 2)


def test_node_memory_changes_the_burstable_score() -> None:
    (pod,) = [p for p in plans("qos.yaml", node_memory=32 << 20) if p.name == "burstable"]
    assert pod.containers[0].config.linux.resources is not None
    assert pod.containers[0].config.linux.resources.oom_score_adj == 500
