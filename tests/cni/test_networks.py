"""podkit.cni.networks with the FakeExec: order, ifnames, rollback of earlier networks, merge."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import pytest

from podkit import cni
from podkit.cni.testing import FakeExec
from podkit.errors import InvalidArgumentError


def _net(name: str, plugin: str, version: str = "1.0.0") -> cni.NetworkConfigList:
    return cni.NetworkConfigList.from_bytes(json.dumps(
        {"cniVersion": version, "name": name, "plugins": [{"type": plugin}]}).encode())


def _result(ifname: str, addr: str, host: bool = True) -> dict[str, Any]:
    ifaces = [{"name": "veth0"}] if host else []
    ifaces.append({"name": ifname, "mac": "0e:00:00:00:00:01", "sandbox": "/run/netns/p"})
    return {"cniVersion": "1.0.0", "interfaces": ifaces,
            "ips": [{"address": addr, "gateway": "10.0.0.1", "interface": len(ifaces) - 1}],
            "routes": [{"dst": "0.0.0.0/0"}], "dns": {"nameservers": ["10.0.0.1"]}}


@pytest.fixture
def fake() -> FakeExec:
    f = FakeExec()
    f.on("loopback", "ADD", result={"cniVersion": "0.3.1", "interfaces": [
        {"name": "lo", "sandbox": "/run/netns/p"}], "ips": [
        {"version": "4", "address": "127.0.0.1/8", "interface": 0}]})
    f.on("pa", "ADD", handler=lambda c: _result(c.env["CNI_IFNAME"], "10.0.0.5/24"))
    f.on("pb", "ADD", handler=lambda c: _result(c.env["CNI_IFNAME"], "10.1.0.5/24"))
    f.on("pc", "ADD", result={"cniVersion": "1.0.0", "ips": [{"address": "10.2.0.5/24"}]})
    return f


@pytest.fixture
def client(fake: FakeExec, tmp_path: Path) -> cni.CNI:
    return cni.CNI(["/opt/cni/bin"], cache_dir=tmp_path, exec=fake)


def test_setup_merges_results(client: cni.CNI, fake: FakeExec) -> None:
    pod = cni.Networks(client, [_net("a", "pa"), _net("b", "pb"), _net("c", "pc")],
                       loopback=True)
    res = pod.setup("ctr", "/run/netns/p", args=[("IgnoreUnknown", "1")])
    assert sorted((c.config["name"], c.env["CNI_IFNAME"]) for c in fake.calls_for("ADD")) == [
        ("a", "eth0"), ("b", "eth1"), ("c", "eth2"), ("cni-loopback", "lo")]
    assert set(res.interfaces) == {"lo", "eth0", "eth1", "eth2"}
    assert res.primary_ip() == "10.0.0.5" and res.primary_ip("eth1") == "10.1.0.5"
    assert res.interfaces["eth2"].ips[0].address == "10.2.0.5/24"  # no index: own ifname
    assert res.interfaces["eth0"].mac == "0e:00:00:00:00:01"
    assert "veth0" not in res.interfaces
    assert len(res.routes) == 2 and len(res.dns) == 4
    assert res.results["a"].cni_version == "1.1.0"
    pod.check("ctr", "/run/netns/p")
    assert [c.config["name"] for c in fake.calls_for("CHECK")] == ["a", "b", "c"]
    pod.remove("ctr", "/run/netns/p")
    assert [c.config["name"] for c in fake.calls_for("DEL")] == ["c", "b", "a", "cni-loopback"]
    assert client.cached_attachments() == []


def test_failure_removes_earlier_networks(client: cni.CNI, fake: FakeExec) -> None:
    fake.on("pc", "ADD", error=cni.CNIError(999, "no more addresses"))
    pod = cni.Networks(client, [_net("a", "pa"), _net("b", "pb"), _net("c", "pc")])
    with pytest.raises(cni.CNIError, match="no more addresses") as info:
        pod.setup("ctr", "/run/netns/p")
    assert info.value.network == "c"
    assert [c.config["name"] for c in fake.calls_for("DEL")] == ["c", "b", "a"]
    assert client.cached_attachments() == []


def test_networks_are_attached_concurrently(client: cni.CNI, fake: FakeExec) -> None:
    # each ADD waits for the other: attached one after the other, the barrier would break
    both = threading.Barrier(2, timeout=10)

    def meet(call: Any) -> dict[str, Any]:
        both.wait()
        return _result(call.env["CNI_IFNAME"], "10.0.0.5/24")

    fake.on("pa", "ADD", handler=meet)
    fake.on("pb", "ADD", handler=meet)
    pod = cni.Networks(client, [_net("a", "pa"), _net("b", "pb")])
    assert set(pod.setup("ctr", "/run/netns/p").interfaces) == {"eth0", "eth1"}


def test_failure_removes_every_attached_network(client: cni.CNI, fake: FakeExec) -> None:
    fake.on("pa", "ADD", error=cni.CNIError(999, "a broke"))
    fake.on("pb", "ADD", error=cni.CNIError(999, "b broke"))
    pod = cni.Networks(client, [_net("a", "pa"), _net("b", "pb"), _net("c", "pc")],
                       loopback=True)
    with pytest.raises(cni.CNIError, match="a broke"):  # the first in attachment order
        pod.setup("ctr", "/run/netns/p")
    # the later network c and the loopback were attached meanwhile: both are removed again
    assert {"c", "cni-loopback"} <= {c.config["name"] for c in fake.calls_for("DEL")}
    assert client.cached_attachments() == []


def test_undo_errors_are_attached(client: cni.CNI, fake: FakeExec) -> None:
    fake.on("pb", "ADD", error=cni.CNIError(999, "b broke"))
    fake.on("pa", "DEL", error=cni.CNIError(999, "a stuck"))
    pod = cni.Networks(client, [_net("a", "pa"), _net("b", "pb")])
    with pytest.raises(cni.CNIError) as info:
        pod.setup("ctr", "/run/netns/p")
    assert [e.msg for e in info.value.rollback_errors] == ["a stuck"]


def test_remove_tries_every_network(client: cni.CNI, fake: FakeExec) -> None:
    pod = cni.Networks(client, [_net("a", "pa"), _net("b", "pb")])
    pod.setup("ctr", "/run/netns/p")
    fake.on("pb", "DEL", error=cni.CNIError(999, "b stuck"), times=1)
    with pytest.raises(cni.NetworksError) as info:
        pod.remove("ctr", "/run/netns/p")
    assert list(info.value.errors) == ["b"]
    assert [c.config["name"] for c in fake.calls_for("DEL")] == ["b", "a"]
    assert [a.network for a in client.cached_attachments()] == ["b"]
    pod.remove("ctr", "/run/netns/p")
    assert client.cached_attachments() == []


def test_status_and_bad_construction(client: cni.CNI, fake: FakeExec) -> None:
    pod = cni.Networks(client, [_net("a", "pa", "1.1.0"), _net("b", "pb")])
    pod.status()
    assert [c.plugin for c in fake.calls_for("STATUS")] == ["pa"]
    with pytest.raises(InvalidArgumentError, match="given twice"):
        cni.Networks(client, [_net("a", "pa"), _net("a", "pb")])
    with pytest.raises(InvalidArgumentError, match="at least one"):
        cni.Networks(client, [])


def test_from_dir(client: cni.CNI, tmp_path: Path) -> None:
    conf_dir = tmp_path / "net.d"
    conf_dir.mkdir()
    with pytest.raises(cni.NoConfigsFoundError):
        cni.Networks.from_dir(client, conf_dir)
    for i, name in enumerate(("b", "a")):
        (conf_dir / f"{i}-{name}.conflist").write_text(json.dumps(
            {"cniVersion": "1.0.0", "name": name, "plugins": [{"type": "pa"}]}))
    pod = cni.Networks.from_dir(client, conf_dir)
    assert [(a.config.name, a.ifname) for a in pod.attachments] == [("b", "eth0"), ("a", "eth1")]
    first = cni.Networks.from_dir(client, conf_dir, max_networks=1, loopback=True)
    assert [a.ifname for a in first.attachments] == ["lo", "eth0"]


def test_remove_without_args_uses_what_setup_cached(client: cni.CNI, fake: FakeExec) -> None:
    pm = cni.NetworkConfigList.from_bytes(json.dumps({
        "cniVersion": "1.0.0", "name": "a", "plugins": [
            {"type": "pa"}, {"type": "pm", "capabilities": {"portMappings": True}}]}).encode())
    pod = cni.Networks(client, [pm], loopback=True)
    caps = cni.capability_args(port_mappings=[cni.PortMapping(8080, 80)])
    pod.setup("ctr", "/run/netns/p", args=(("IgnoreUnknown", "1"),), capability_args=caps)
    fake.calls.clear()
    pod.remove("ctr", "/run/netns/p")
    dels = {c.plugin: c for c in fake.calls_for("DEL")}
    assert dels["pm"].config["runtimeConfig"] == {"portMappings": [
        {"hostPort": 8080, "containerPort": 80, "protocol": "tcp"}]}
    assert dels["pa"].env["CNI_ARGS"] == dels["loopback"].env["CNI_ARGS"] == "IgnoreUnknown=1"
