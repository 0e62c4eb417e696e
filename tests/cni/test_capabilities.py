"""podkit.cni.capabilities: CONVENTIONS names and shapes, kubernetes_args."""

from __future__ import annotations

import pytest

from podkit import cni
from podkit.errors import InvalidArgumentError


def test_capability_args_shapes() -> None:
    args = cni.capability_args(
        port_mappings=[cni.PortMapping(8080, 80), cni.PortMapping(53, 53, "UDP", "10.0.0.1")],
        bandwidth=cni.Bandwidth(ingress_rate=1000, egress_rate=2000),
        ip_ranges=[[cni.IPRange("10.88.0.0/16", gateway="10.88.0.1")],
                   cni.IPRange("fd00::/64", "fd00::10", "fd00::20")],
        dns=cni.DNSConfig(("10.0.0.10",), ("svc.local",), ("ndots:5",)),
        ips=["10.88.0.5/16"], mac="0e:00:00:00:00:01", cgroup_path="/kubepods/pod1",
        pod_annotations={"a": "b"}, deviceID="0000:04:00.5")
    assert args == {
        "portMappings": [{"hostPort": 8080, "containerPort": 80, "protocol": "tcp"},
                         {"hostPort": 53, "containerPort": 53, "protocol": "udp",
                          "hostIP": "10.0.0.1"}],
        "bandwidth": {"ingressRate": 1000, "egressRate": 2000},
        "ipRanges": [[{"subnet": "10.88.0.0/16", "gateway": "10.88.0.1"}],
                     [{"subnet": "fd00::/64", "rangeStart": "fd00::10", "rangeEnd": "fd00::20"}]],
        "dns": {"servers": ["10.0.0.10"], "searches": ["svc.local"], "options": ["ndots:5"]},
        "ips": ["10.88.0.5/16"],
        "mac": "0e:00:00:00:00:01",
        "cgroupPath": "/kubepods/pod1",
        "io.kubernetes.cri.pod-annotations": {"a": "b"},
        "deviceID": "0000:04:00.5",
    }
    assert cni.capability_args() == {}


def test_bad_capability_values() -> None:
    with pytest.raises(InvalidArgumentError, match="host_port 0"):
        cni.PortMapping(0, 80)
    with pytest.raises(InvalidArgumentError, match="protocol 'icmp'"):
        cni.PortMapping(1, 80, "icmp")
    with pytest.raises(InvalidArgumentError, match="ingressRate -1"):
        cni.Bandwidth(ingress_rate=-1).to_json()


def test_kubernetes_args() -> None:
    assert cni.kubernetes_args("default", "web", "uid-1", "sb1") == (
        ("IgnoreUnknown", "1"), ("K8S_POD_NAMESPACE", "default"), ("K8S_POD_NAME", "web"),
        ("K8S_POD_INFRA_CONTAINER_ID", "sb1"), ("K8S_POD_UID", "uid-1"))
    with pytest.raises(InvalidArgumentError, match="must not contain"):
        cni.kubernetes_args("a;b", "web", "u", "s")


def test_runtime_conf_accepts_typed_values_and_refuses_non_json() -> None:
    rt = cni.RuntimeConf("c", "/x", "eth0", {"A": "1"},
                         {"portMappings": [cni.PortMapping(8080, 80)],
                          "bandwidth": cni.Bandwidth(ingress_rate=5)})
    assert rt.args == (("A", "1"),)
    assert rt.capability_args == {
        "portMappings": [{"hostPort": 8080, "containerPort": 80, "protocol": "tcp"}],
        "bandwidth": {"ingressRate": 5}}
    with pytest.raises(InvalidArgumentError, match=r"capability args \$\.x: set value"):
        cni.RuntimeConf("c", "/x", "eth0", (), {"x": {1}})
