"""The pod sandbox config: identity, labels, hostname, DNS, ports, sysctls, log directory."""

from __future__ import annotations

from typing import Any

import pytest

from podkit.kube import default_uid, parse_resolv_conf
from podkit.kube.dns import pod_dns
from podkit.sandbox import DNSConfig, PortMapping, Protocol

from .helpers import ctr, plan_of, plans, pod

HOST = DNSConfig(servers=("192.0.2.53",), searches=("corp.example",), options=("ndots:2",))


def test_identity_labels_and_log_directory() -> None:
    (p,) = plans("config.yaml")
    uid = default_uid("default", "configured")
    meta = p.sandbox.metadata
    assert (meta.name, meta.namespace, meta.uid, meta.attempt) == ("configured", "default",
                                                                   uid, 0)
    assert p.sandbox.labels == {"app": "configured", "tier": "backend",
                                "io.kubernetes.pod.name": "configured",
                                "io.kubernetes.pod.namespace": "default",
                                "io.kubernetes.pod.uid": uid}
    assert p.sandbox.annotations == {"team": "platform"}
    assert p.sandbox.log_directory == f"/var/log/pods/default_configured_{uid}"


def test_uid_is_stable_unless_given() -> None:
    assert plan_of(pod()).uid == plan_of(pod()).uid == default_uid("default", "p")
    assert plan_of(pod(namespace="other")).uid != default_uid("default", "p")
    assert plan_of(pod(uid="given-uid")).uid == "given-uid"
    assert plan_of(pod(), uid_for=lambda ns, name: f"{ns}-{name}").uid == "default-p"


def test_log_root_is_configurable() -> None:
    p = plan_of(pod(uid="u"), log_root="/tmp/logs/")
    assert p.sandbox.log_directory == "/tmp/logs/default_p_u"


@pytest.mark.parametrize(("name", "spec", "hostname"), [
    ("web", {}, "web"),
    ("web", {"hostname": "front"}, "front"),
    ("web", {"hostname": "front", "subdomain": "svc1"}, "front"),
    ("web", {"hostname": "front", "subdomain": "svc1", "setHostnameAsFQDN": True},
     "front.svc1.default.svc.cluster.local"),
    ("a" * 70, {}, "a" * 63),
    ("a" * 62 + ".b", {}, "a" * 62),      # cut at 63, a trailing "." or "-" trimmed
    ("web", {"hostNetwork": True}, ""),   # the node's own hostname
])
def test_hostname(name: str, spec: dict[str, Any], hostname: str) -> None:
    assert plan_of(pod(spec, name=name)).sandbox.hostname == hostname


def test_port_mappings_from_app_containers() -> None:
    p = plan_of(pod({"containers": [
        ctr(ports=[{"containerPort": 80, "hostPort": 8080},
                   {"name": "dns", "containerPort": 53, "hostPort": 5353, "protocol": "UDP",
                    "hostIP": "127.0.0.1"},
                   {"containerPort": 9000}]),
        {"name": "d", "image": "busybox", "ports": [{"containerPort": 81, "protocol": "SCTP"}]}],
        "initContainers": [{"name": "i", "image": "busybox",
                            "ports": [{"containerPort": 99, "hostPort": 9999}]}]}))
    assert p.sandbox.port_mappings == (
        PortMapping(container_port=80, host_port=8080),
        PortMapping(container_port=53, host_port=5353, protocol=Protocol.UDP,
                    host_ip="127.0.0.1"),
        PortMapping(container_port=9000),
        PortMapping(container_port=81, protocol=Protocol.SCTP),
    )


def test_host_network_host_port_defaults_to_the_container_port() -> None:
    p = plan_of(pod({"hostNetwork": True, "containers": [ctr(ports=[{"containerPort": 80}])]}))
    assert p.sandbox.port_mappings == (PortMapping(container_port=80, host_port=80),)


def test_sysctls() -> None:
    p = plan_of(pod({"securityContext": {"sysctls": [
        {"name": "net.ipv4.ip_unprivileged_port_start", "value": "0"},
        {"name": "kernel.shm_rmid_forced", "value": "1"}]}}))
    assert p.sandbox.linux.sysctls == {"net.ipv4.ip_unprivileged_port_start": "0",
                                       "kernel.shm_rmid_forced": "1"}


def test_parse_resolv_conf() -> None:
    got = parse_resolv_conf("# comment\nnameserver 10.0.0.1\nnameserver 10.0.0.2 ; x\n"
                            "domain a.example\nsearch b.example c.example\n"
                            "options ndots:2 edns0\nbogus line\n")
    assert got == DNSConfig(servers=("10.0.0.1", "10.0.0.2"),
                            searches=("b.example", "c.example"), options=("ndots:2", "edns0"))


@pytest.mark.parametrize(("spec", "kw", "expected"), [
    # ClusterFirst without a cluster DNS falls back to Default (the host's).
    ({}, {}, HOST),
    ({"dnsPolicy": "Default"}, {}, HOST),
    ({"dnsPolicy": "ClusterFirst"}, {"cluster_dns": ["10.96.0.10"]},
     DNSConfig(servers=("10.96.0.10",), searches=(
         "ns.svc.cluster.local", "svc.cluster.local", "cluster.local", "corp.example"),
         options=("ndots:5",))),
    # On the host network ClusterFirst is Default; ClusterFirstWithHostNet keeps the cluster.
    ({"hostNetwork": True}, {"cluster_dns": ["10.96.0.10"]}, HOST),
    ({"hostNetwork": True, "dnsPolicy": "ClusterFirstWithHostNet"},
     {"cluster_dns": ["10.96.0.10"], "cluster_domain": "k.test"},
     DNSConfig(servers=("10.96.0.10",), searches=("ns.svc.k.test", "svc.k.test", "k.test",
                                                  "corp.example"), options=("ndots:5",))),
    ({"dnsPolicy": "None", "dnsConfig": {"nameservers": ["1.1.1.1"], "searches": ["x.test"],
                                         "options": [{"name": "ndots", "value": "1"}]}}, {},
     DNSConfig(servers=("1.1.1.1",), searches=("x.test",), options=("ndots:1",))),
    # dnsConfig merges: servers and searches appended without duplicates, options by name.
    ({"dnsConfig": {"nameservers": ["192.0.2.53", "1.1.1.1"], "searches": ["corp.example", "y"],
                    "options": [{"name": "ndots", "value": "5"}, {"name": "edns0"}]}}, {},
     DNSConfig(servers=("192.0.2.53", "1.1.1.1"), searches=("corp.example", "y"),
               options=("edns0", "ndots:5"))),
])
def test_dns_policies(spec: dict[str, Any], kw: dict[str, Any], expected: DNSConfig) -> None:
    assert pod_dns(spec, "ns", host_dns=HOST, **kw) == expected


def test_dns_without_host_config_is_left_to_the_runtime() -> None:
    assert pod_dns({}, "ns", host_dns=None) is None
    assert plan_of(pod()).sandbox.dns_config is None
    assert plan_of(pod(), host_dns=HOST).sandbox.dns_config == HOST
