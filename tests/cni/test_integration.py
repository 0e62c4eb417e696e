"""podkit.cni against the real Debian plugins (/usr/lib/cni), inside scripts/isolated.

The isolated network namespace of the test process plays the host: bridges, veth host ends,
iptables rules and tc state live there and vanish with it. Pods get netns from podkit.netns.
host-local keeps its reservations in a per-test ``dataDir`` so leaks are visible.
"""

from __future__ import annotations

import itertools
import json
import os
import shutil
import subprocess
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

import _leaks
from podkit import cli, cni, netns
from support import require, require_isolated

pytestmark = pytest.mark.integration

CNI_BIN = "/usr/lib/cni"
TEST_PLUGINS = Path(__file__).resolve().parent / "plugins"
_subnets = itertools.count(10)


@pytest.fixture(autouse=True)
def _isolated() -> Iterator[None]:
    require_isolated()
    require(os.path.exists(f"{CNI_BIN}/bridge"), "containernetworking-plugins not installed")
    yield
    # the bridge plugin never deletes bridges (by design): the tests remove their own
    for line in ip("-o", "link", "show", "type", "bridge").splitlines():
        name = line.split(":")[1].strip().split("@")[0]
        if name.startswith("pk-cni-br"):
            ip("link", "del", name)


@pytest.fixture
def pod_netns() -> Iterator[Callable[[], str]]:
    made: list[str] = []

    def make() -> str:
        ns = netns.create(f"pk-cni-{uuid.uuid4().hex[:8]}")
        made.append(ns.path)
        return ns.path

    yield make
    for path in made:
        netns.remove(path)


@pytest.fixture
def client(tmp_path: Path) -> cni.CNI:
    return cni.CNI([CNI_BIN], cache_dir=tmp_path / "cache", timeout=30)


def ip(*args: str) -> str:
    return subprocess.run(["ip", *args], check=True, capture_output=True, text=True).stdout


def link_exists(name: str, ns: str | None = None) -> bool:
    cmd = ["ip", *(["-n", os.path.basename(ns)] if ns else []), "link", "show", name]
    return subprocess.run(cmd, capture_output=True).returncode == 0


def reservations(data_dir: Path, network: str) -> list[str]:
    d = data_dir / network
    if not d.is_dir():
        return []
    return sorted(p.name for p in d.iterdir()
                  if p.name != "lock" and not p.name.startswith("last_reserved_ip"))


def bridge_list(name: str, data_dir: Path, *extra: dict[str, Any], version: str = "1.0.0",
                masq: bool = True, ranges: list[Any] | None = None,
                **flags: Any) -> cni.NetworkConfigList:
    n = next(_subnets)
    _leaks.register_ipam_dir(data_dir)  # the session leak check lists its reservations too
    bridge = {"type": "bridge", "bridge": f"pk-cni-br{n}", "isGateway": True, "ipMasq": masq,
              "ipam": {"type": "host-local", "dataDir": str(data_dir),
                       "ranges": ranges or [[{"subnet": f"10.88.{n}.0/24"}]],
                       "routes": [{"dst": "0.0.0.0/0"}]}}
    doc = {"cniVersion": version, "name": name, "plugins": [bridge, *extra], **flags}
    return cni.NetworkConfigList.from_bytes(json.dumps(doc).encode())


PORTMAP = {"type": "portmap", "capabilities": {"portMappings": True}}
FIREWALL = {"type": "firewall", "backend": "iptables"}
TUNING = {"type": "tuning", "capabilities": {"mac": True}, "sysctl": {"net.core.somaxconn": "512"}}
BANDWIDTH = {"type": "bandwidth", "capabilities": {"bandwidth": True}}


def full_caps(mac: str) -> dict[str, Any]:
    return cni.capability_args(
        port_mappings=[cni.PortMapping(18080, 80)], mac=mac,
        bandwidth=cni.Bandwidth(1_000_000, 100_000, 1_000_000, 100_000))


def test_full_chain_add_del(client: cni.CNI, pod_netns: Callable[[], str],
                            tmp_path: Path) -> None:
    data = tmp_path / "ipam"
    conf = bridge_list("pk-cni-full", data, PORTMAP, FIREWALL, TUNING, BANDWIDTH)
    ns = pod_netns()
    rt = cni.RuntimeConf("pk-cni-c1", ns, "eth0",
                         cni.kubernetes_args("default", "pod1", "uid1", "pk-cni-c1"),
                         full_caps("0e:00:00:00:88:01"))
    res = client.add(conf, rt)
    assert isinstance(res, cni.Result)
    eth0 = next(i for i in res.interfaces if i.name == "eth0")
    assert eth0.mac == "0e:00:00:00:88:01" and eth0.sandbox == ns  # tuning applied the cap
    assert any(i.name.startswith("bwp") for i in res.interfaces)  # bandwidth's ifb device
    addr = res.ips[0].address
    assert addr in ip("-n", os.path.basename(ns), "-o", "addr", "show", "eth0")
    assert reservations(data, "pk-cni-full") == [addr.split("/")[0]]
    assert "CNI-HOSTPORT-DNAT" in subprocess.run(["iptables-save", "-t", "nat"],
                                                 capture_output=True, text=True).stdout
    entry = client.cached_attachments("pk-cni-c1")[0]
    assert entry.capability_args["mac"] == "0e:00:00:00:88:01"
    assert client.cached_result(conf, rt) == res.to_version("1.0.0")

    client.delete(conf, rt)
    assert reservations(data, "pk-cni-full") == []
    assert not link_exists("eth0", ns)
    assert client.cached_attachments() == []
    client.delete(conf, rt)  # DEL twice


def test_second_add_leaves_the_live_attachment_alone(client: cni.CNI,
                                                     pod_netns: Callable[[], str],
                                                     tmp_path: Path) -> None:
    data = tmp_path / "ipam"
    conf = bridge_list("pk-cni-twice", data, masq=False)
    ns = pod_netns()
    rt = cni.RuntimeConf("pk-cni-tw1", ns, "eth0")
    res = client.add(conf, rt)
    with pytest.raises(cni.AttachmentExistsError):
        client.add(conf, rt)
    assert link_exists("eth0", ns)
    assert reservations(data, "pk-cni-twice") == [res.ips[0].address.split("/")[0]]
    client.check(conf, rt)
    client.delete(conf, rt)
    assert reservations(data, "pk-cni-twice") == []


def test_check_passes_and_detects_mac_change(client: cni.CNI, pod_netns: Callable[[], str],
                                             tmp_path: Path) -> None:
    conf = bridge_list("pk-cni-check", tmp_path / "ipam", FIREWALL, TUNING, BANDWIDTH)
    ns = pod_netns()
    rt = cni.RuntimeConf("pk-cni-c2", ns, "eth0", capability_args=full_caps("0e:00:00:00:88:02"))
    client.add(conf, rt)
    try:
        client.check(conf, rt)
        ip("-n", os.path.basename(ns), "link", "set", "eth0", "address", "0e:00:00:00:99:99")
        with pytest.raises(cni.CNIError) as info:
            client.check(conf, rt)
        assert info.value.command == "CHECK" and "Mac" in str(info.value)
    finally:
        client.delete(conf, rt)


def test_portmap_check_bug_is_avoided_with_disable_check(
        client: cni.CNI, pod_netns: Callable[[], str], tmp_path: Path) -> None:
    data = tmp_path / "ipam"
    conf = bridge_list("pk-cni-nocheck", data, PORTMAP, disableCheck=True)
    ns = pod_netns()
    rt = cni.RuntimeConf("pk-cni-c3", ns, "eth0", capability_args=full_caps("0e:00:00:00:88:03"))
    client.add(conf, rt)
    client.check(conf, rt)
    client.delete(conf, rt)
    assert reservations(data, "pk-cni-nocheck") == []


def test_ptp_add_check_del(client: cni.CNI, pod_netns: Callable[[], str],
                           tmp_path: Path) -> None:
    data = tmp_path / "ipam"
    conf = cni.NetworkConfigList.from_bytes(json.dumps({
        "cniVersion": "1.0.0", "name": "pk-cni-ptp",
        "plugins": [{"type": "ptp", "ipMasq": False,
                     "ipam": {"type": "host-local", "dataDir": str(data),
                              "ranges": [[{"subnet": "10.88.200.0/24"}]]}}]}).encode())
    ns = pod_netns()
    rt = cni.RuntimeConf("pk-cni-ptp1", ns, "eth0")
    res = client.add(conf, rt)
    assert res.ips[0].address.startswith("10.88.200.")
    client.check(conf, rt)
    client.delete(conf, rt)
    assert reservations(data, "pk-cni-ptp") == []


def test_static_ipam_and_dual_stack(client: cni.CNI, pod_netns: Callable[[], str],
                                    tmp_path: Path) -> None:
    conf = cni.NetworkConfigList.from_bytes(json.dumps({
        "cniVersion": "1.0.0", "name": "pk-cni-static",
        "plugins": [{"type": "bridge", "bridge": "pk-cni-brs", "isGateway": True,
                     "ipam": {"type": "static",
                              "addresses": [{"address": "10.88.205.10/24",
                                             "gateway": "10.88.205.1"}]}}]}).encode())
    ns = pod_netns()
    rt = cni.RuntimeConf("pk-cni-st1", ns, "eth0")
    res = client.add(conf, rt)
    assert [i.address for i in res.ips] == ["10.88.205.10/24"]
    client.check(conf, rt)
    client.delete(conf, rt)

    dual = bridge_list("pk-cni-dual", tmp_path / "ipam", masq=False,
                       ranges=[[{"subnet": "10.88.206.0/24"}], [{"subnet": "fd00:88:206::/64"}]])
    ns2 = pod_netns()
    rt2 = cni.RuntimeConf("pk-cni-ds1", ns2, "eth0")
    res = client.add(dual, rt2)
    assert sorted(i.family for i in res.ips if i.family) == [4, 6]
    client.delete(dual, rt2)
    assert reservations(tmp_path / "ipam", "pk-cni-dual") == []


def test_legacy_versions(client: cni.CNI, pod_netns: Callable[[], str], tmp_path: Path) -> None:
    conf = bridge_list("pk-cni-v031", tmp_path / "ipam", TUNING, version="0.3.1", masq=False)
    ns = pod_netns()
    rt = cni.RuntimeConf("pk-cni-v1", ns, "eth0")
    res = client.add(conf, rt)
    assert res.cni_version == "0.3.1" and res.to_dict()["ips"][0]["version"] == "4"
    with pytest.raises(cni.CNIError, match="does not support the CHECK command"):
        client.check(conf, rt)
    client.delete(conf, rt)
    old = bridge_list("pk-cni-v020", tmp_path / "ipam", version="0.2.0", masq=False)
    res = client.add(old, cni.RuntimeConf("pk-cni-v2", pod_netns(), "eth0"))
    assert isinstance(res, cni.LegacyResult) and res.ip4 is not None
    client.delete(old, cni.RuntimeConf("pk-cni-v2", "", "eth0"))
    assert reservations(tmp_path / "ipam", "pk-cni-v020") == []


def test_loopback(client: cni.CNI, pod_netns: Callable[[], str], shared: Path) -> None:
    conf = cni.load_conflist(shared / "fixtures/cni/examples/loopback.conflist")
    ns = pod_netns()
    rt = cni.RuntimeConf("pk-cni-lo1", ns, "lo")
    res = client.add(conf, rt)
    assert [i.address for i in res.ips] == ["127.0.0.1/8", "::1/128"]
    assert "UP" in ip("-n", os.path.basename(ns), "link", "show", "lo")
    client.check(conf, rt)
    client.delete(conf, rt)


def test_two_networks_and_loopback_on_one_pod(client: cni.CNI, pod_netns: Callable[[], str],
                                              tmp_path: Path) -> None:
    data = tmp_path / "ipam"
    a = bridge_list("pk-cni-neta", data, masq=False)
    b = bridge_list("pk-cni-netb", data, masq=False)
    pod = cni.Networks(client, [a, b], loopback=True)
    assert [x.ifname for x in pod.attachments] == ["lo", "eth0", "eth1"]
    ns = pod_netns()
    res = pod.setup("pk-cni-pod1", ns)
    assert set(res.interfaces) == {"lo", "eth0", "eth1"}
    assert res.primary_ip("eth0") != res.primary_ip("eth1")
    assert res.primary_ip("lo") == "127.0.0.1"
    links = ip("-n", os.path.basename(ns), "-o", "link")
    assert "eth0" in links and "eth1" in links
    pod.check("pk-cni-pod1", ns)
    pod.remove("pk-cni-pod1", ns)
    assert reservations(data, "pk-cni-neta") == [] == reservations(data, "pk-cni-netb")
    assert client.cached_attachments() == []
    pod.remove("pk-cni-pod1", ns)  # idempotent


def test_setup_failure_removes_earlier_networks(client: cni.CNI, pod_netns: Callable[[], str],
                                                tmp_path: Path) -> None:
    data = tmp_path / "ipam"
    a = bridge_list("pk-cni-ok", data, masq=False)
    broken = cni.NetworkConfigList.from_bytes(json.dumps({
        "cniVersion": "1.0.0", "name": "pk-cni-broken",
        "plugins": [{"type": "bridge", "bridge": "pk-cni-brx",
                     "ipam": {"type": "no-such-ipam"}}]}).encode())
    pod = cni.Networks(client, [a, broken])
    ns = pod_netns()
    with pytest.raises(cni.CNIError, match="no-such-ipam"):
        pod.setup("pk-cni-pod2", ns)
    assert reservations(data, "pk-cni-ok") == []
    assert not link_exists("eth0", ns) and not link_exists("eth1", ns)
    assert client.cached_attachments() == []


def test_del_after_netns_is_gone(client: cni.CNI, tmp_path: Path) -> None:
    data = tmp_path / "ipam"
    conf = bridge_list("pk-cni-gone", data, masq=False)
    ns = netns.create(f"pk-cni-{uuid.uuid4().hex[:8]}")
    rt = cni.RuntimeConf("pk-cni-g1", ns.path, "eth0")
    client.add(conf, rt)
    netns.remove(ns.path)
    client.delete(conf, rt)
    assert reservations(data, "pk-cni-gone") == []
    assert client.cached_attachments() == []


def test_missing_netns_is_a_clear_error_and_leaks_nothing(client: cni.CNI,
                                                         tmp_path: Path) -> None:
    data = tmp_path / "ipam"
    conf = bridge_list("pk-cni-nons", data, PORTMAP, masq=False)
    missing = "/run/netns/pk-cni-does-not-exist"
    with pytest.raises(cni.CNIError) as info:
        client.add(conf, cni.RuntimeConf("pk-cni-nn1", missing, "eth0"))
    err = info.value
    assert (err.plugin, err.network, err.container_id) == ("bridge", "pk-cni-nons", "pk-cni-nn1")
    assert missing in str(err)
    assert reservations(data, "pk-cni-nons") == []
    assert client.cached_attachments() == []


def test_parallel_adds_get_distinct_ips(client: cni.CNI, tmp_path: Path) -> None:
    data = tmp_path / "ipam"
    conf = bridge_list("pk-cni-par", data, masq=False)
    spaces = [netns.create(f"pk-cni-p{i}-{uuid.uuid4().hex[:6]}") for i in range(20)]
    try:
        rts = [cni.RuntimeConf(f"pk-cni-par{i}", s.path, "eth0") for i, s in enumerate(spaces)]
        with ThreadPoolExecutor(8) as pool:
            results = list(pool.map(lambda rt: client.add(conf, rt), rts))
        addrs = [r.ips[0].address for r in results]
        assert len(set(addrs)) == 20
        assert reservations(data, "pk-cni-par") == sorted(a.split("/")[0] for a in addrs)
        with ThreadPoolExecutor(8) as pool:
            list(pool.map(lambda rt: client.delete(conf, rt), rts))
        assert reservations(data, "pk-cni-par") == []
        assert client.cached_attachments() == []
    finally:
        for s in spaces:
            netns.remove(s.path)


def test_preflight_rejects_before_any_change(client: cni.CNI, pod_netns: Callable[[], str],
                                             tmp_path: Path, shared: Path) -> None:
    data = tmp_path / "ipam"
    conf = bridge_list("pk-cni-fw031", data, FIREWALL, version="0.3.1", masq=False)
    bridge = conf.plugins[0].to_dict()["bridge"]
    ns = pod_netns()
    with pytest.raises(cni.CNIError) as info:
        client.add(conf, cni.RuntimeConf("pk-cni-pf1", ns, "eth0"))
    assert info.value.code == cni.ERR_INCOMPATIBLE_VERSION and info.value.plugin == "firewall"
    assert not link_exists(bridge) and reservations(data, "pk-cni-fw031") == []
    with pytest.raises(cni.CNIError, match="plugin firewall does not support"):
        client.validate(conf)
    assert client.validate(bridge_list("pk-cni-val", data, PORTMAP, TUNING)) == [
        "portMappings", "mac"]
    v110 = cni.load_conflist(shared / "fixtures/cni/examples/bad/"
                             "bad-unsupported-version-1.1.0.conflist")
    with pytest.raises(cni.CNIError, match=r'config is "1\.1\.0"'):
        client.add(v110, cni.RuntimeConf("pk-cni-pf2", ns, "lo"))


def test_failed_add_is_rolled_back(client: cni.CNI, pod_netns: Callable[[], str],
                                   tmp_path: Path) -> None:
    """bridge succeeds, a later plugin fails: bridge's veth and IP are released again."""
    data = tmp_path / "ipam"
    plugins = tmp_path / "bin"
    plugins.mkdir()
    shutil.copy(TEST_PLUGINS / "pk-test", plugins / "pk-test")
    fail = {"type": "pk-test", "fail": {"ADD": {"code": 11, "msg": "try again later"}}}
    conf = bridge_list("pk-cni-rb", data, fail, masq=False)
    c = cni.CNI([str(plugins), CNI_BIN], cache_dir=tmp_path / "cache")
    ns = pod_netns()
    with pytest.raises(cni.CNIError) as info:
        c.add(conf, cni.RuntimeConf("pk-cni-rb1", ns, "eth0"))
    assert (info.value.code, info.value.plugin, info.value.rollback_errors) == (
        11, "pk-test", ())
    assert reservations(data, "pk-cni-rb") == []
    assert not link_exists("eth0", ns)
    assert c.cached_attachments() == []


@pytest.mark.timeout(120)
def test_hanging_plugin_is_killed_and_rolled_back(pod_netns: Callable[[], str],
                                                  tmp_path: Path) -> None:
    data = tmp_path / "ipam"
    plugins = tmp_path / "bin"
    plugins.mkdir()
    shutil.copy(TEST_PLUGINS / "pk-test", plugins / "pk-test")
    pidfile = tmp_path / "pid"
    hang = {"type": "pk-test", "hang": ["ADD"], "grandchild": ["ADD"], "pidfile": str(pidfile)}
    conf = bridge_list("pk-cni-hang", data, hang, masq=False)
    c = cni.CNI([str(plugins), CNI_BIN], cache_dir=tmp_path / "cache", timeout=3)
    ns = pod_netns()
    with pytest.raises(cni.PluginTimeoutError) as info:
        c.add(conf, cni.RuntimeConf("pk-cni-h1", ns, "eth0"))
    assert info.value.plugin == "pk-test" and "timed out after 3s" in str(info.value)
    assert reservations(data, "pk-cni-hang") == []
    grandchild = int(pidfile.read_text())
    stat = Path(f"/proc/{grandchild}/stat")
    assert not stat.exists() or stat.read_text().split(") ")[1][0] in "ZX"


def test_corrupt_cache_does_not_block_teardown(client: cni.CNI, pod_netns: Callable[[], str],
                                               tmp_path: Path) -> None:
    data = tmp_path / "ipam"
    conf = bridge_list("pk-cni-corrupt", data, masq=False)
    rt = cni.RuntimeConf("pk-cni-cc1", pod_netns(), "eth0")
    client.add(conf, rt)
    (tmp_path / "cache" / "results" / "pk-cni-corrupt-pk-cni-cc1-eth0").write_bytes(b"")
    with pytest.raises(cni.CNIError, match="cached result"):
        client.check(conf, rt)
    client.delete(conf, rt)
    assert reservations(data, "pk-cni-corrupt") == []


def test_status_and_gc_with_test_plugin(tmp_path: Path) -> None:
    plugins = tmp_path / "bin"
    plugins.mkdir()
    shutil.copy(TEST_PLUGINS / "pk-test", plugins / "pk-test")
    log = tmp_path / "log"
    conf = cni.NetworkConfigList.from_bytes(json.dumps({
        "cniVersion": "1.1.0", "name": "pk-cni-gc",
        "plugins": [{"type": "pk-test", "log": str(log), "ip": "10.88.250.2/24"}]}).encode())
    c = cni.CNI([str(plugins)], cache_dir=tmp_path / "cache")
    c.status(conf)
    c.add(conf, cni.RuntimeConf("pk-cni-k1", "/x", "eth0"))
    c.add(conf, cni.RuntimeConf("pk-cni-k2", "/y", "eth0"))
    c.gc(conf, [("pk-cni-k1", "eth0")])
    calls = [json.loads(line) for line in log.read_text().splitlines()]
    assert [x["command"] for x in calls] == ["STATUS", "ADD", "ADD", "DEL", "GC"]
    assert calls[3]["env"]["CNI_CONTAINERID"] == "pk-cni-k2"
    gc = json.loads(calls[4]["stdin"])
    assert gc["cni.dev/valid-attachments"] == [{"containerID": "pk-cni-k1", "ifname": "eth0"}]
    assert [a.container_id for a in c.cached_attachments()] == ["pk-cni-k1"]
    bad = cni.NetworkConfigList.from_bytes(json.dumps({
        "cniVersion": "1.1.0", "name": "pk-cni-st",
        "plugins": [{"type": "pk-test", "fail": {"STATUS": {
            "code": 50, "msg": "plugin not available"}}}]}).encode())
    with pytest.raises(cni.CNIError) as info:
        c.status(bad)
    assert info.value.code == cni.ERR_PLUGIN_NOT_AVAILABLE


def test_debian_plugins_answer_status_as_unsupported(client: cni.CNI) -> None:
    conf = cni.NetworkConfigList.from_bytes(
        b'{"cniVersion":"1.0.0","name":"pk-cni-s","plugins":[{"type":"loopback"}]}')
    with pytest.raises(cni.UnsupportedCommandError, match="does not support the STATUS"):
        client.status(conf)  # 1.0.0 list: the verb does not exist
    with pytest.raises(cni.UnsupportedCommandError, match="does not support the GC"):
        client.gc(conf, [])
    info = client.plugin_versions("bridge")
    assert "1.0.0" in info.supported_versions and "1.1.0" not in info.supported_versions


def test_status_and_gc_on_a_1_1_0_list_of_debian_plugins_are_refused(
        client: cni.CNI, tmp_path: Path) -> None:
    """The Debian 1.1.1 plugins predate STATUS/GC (they answer "missing containerID"):
    the pre-flight refuses the list with the plugin's supported versions; nothing runs."""
    data = tmp_path / "ipam"
    conf = bridge_list("pk-cni-s110", data, PORTMAP, version="1.1.0", masq=False)
    for verb in (client.status, lambda c: client.gc(c, [])):
        with pytest.raises(cni.IncompatibleVersionError) as info:
            verb(conf)
        assert info.value.plugin == "bridge" and info.value.code == cni.ERR_INCOMPATIBLE_VERSION
        assert 'config is "1.1.0"' in str(info.value) and "missing containerID" not in str(
            info.value)
    assert not link_exists(conf.plugins[0].to_dict()["bridge"])


def nat_rules() -> list[str]:
    out = subprocess.run(["iptables-save", "-t", "nat"], capture_output=True, text=True,
                         check=True).stdout
    return [line for line in out.splitlines() if not line.startswith(("#", "*", "COMMIT"))]


def portmap_state(container_id: str) -> list[str]:
    """The per-container portmap state: its CNI-DN-* chains and every rule naming it."""
    rules = nat_rules()
    chains = {line.split()[0][1:] for line in rules if line.startswith(":CNI-DN-")}
    return [line for line in rules
            if container_id in line or any(c in line for c in chains)]


def test_del_without_cap_args_removes_portmap_rules(client: cni.CNI, pod_netns: Callable[[], str],
                                                    tmp_path: Path) -> None:
    data = tmp_path / "ipam"
    conf = bridge_list("pk-cni-pmdel", data, PORTMAP, masq=False)
    ns = pod_netns()
    caps = cni.capability_args(port_mappings=[cni.PortMapping(18090, 80)])
    client.add(conf, cni.RuntimeConf("pk-cni-pm1", ns, "eth0", capability_args=caps))
    state = portmap_state("pk-cni-pm1")
    assert any(line.startswith(":CNI-DN-") for line in state)
    assert any("CNI-HOSTPORT-DNAT" in line and "18090" in line for line in state)
    client.delete(conf, cni.RuntimeConf("pk-cni-pm1", ns, "eth0"))  # no capability args
    assert portmap_state("pk-cni-pm1") == []
    assert reservations(data, "pk-cni-pmdel") == [] and client.cached_attachments() == []


def test_networks_remove_without_cap_args_removes_portmap_rules(
        client: cni.CNI, pod_netns: Callable[[], str], tmp_path: Path) -> None:
    data = tmp_path / "ipam"
    pod = cni.Networks(client, [bridge_list("pk-cni-pmnet", data, PORTMAP, masq=False)],
                       loopback=True)
    ns = pod_netns()
    caps = cni.capability_args(port_mappings=[cni.PortMapping(18091, 80)])
    pod.setup("pk-cni-pm2", ns, args=cni.kubernetes_args("default", "p", "u", "pk-cni-pm2"),
              capability_args=caps)
    assert any("18091" in line for line in portmap_state("pk-cni-pm2"))
    pod.remove("pk-cni-pm2", ns)  # as in docs/cni.md: no args, no capability args
    assert portmap_state("pk-cni-pm2") == []
    assert reservations(data, "pk-cni-pmnet") == [] and client.cached_attachments() == []


def test_cli_del_without_cap_args_removes_portmap_rules(
        pod_netns: Callable[[], str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    data = tmp_path / "ipam"
    conf_dir = tmp_path / "net.d"
    conf_dir.mkdir()
    conf = bridge_list("pk-cni-pmcli", data, PORTMAP, masq=False)
    (conf_dir / "10-pm.conflist").write_bytes(conf.raw)
    monkeypatch.setenv("NETCONFPATH", str(conf_dir))
    monkeypatch.setenv("CNI_PATH", CNI_BIN)
    monkeypatch.delenv("CAP_ARGS", raising=False)
    monkeypatch.delenv("CNI_ARGS", raising=False)
    ns = pod_netns()
    common = ["pk-cni-pmcli", "--netns", ns, "--id", "pk-cni-pm3",
              "--cache-dir", str(tmp_path / "cache")]
    caps = '{"portMappings":[{"hostPort":18092,"containerPort":80,"protocol":"tcp"}]}'
    assert cli.main(["cni", "add", *common, "--cap-args", caps]) == 0
    assert any("18092" in line for line in portmap_state("pk-cni-pm3"))
    assert cli.main(["cni", "del", *common]) == 0
    assert portmap_state("pk-cni-pm3") == []
    assert reservations(data, "pk-cni-pmcli") == []
    capsys.readouterr()


def test_cli_status_and_gc_exit_codes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    conf_dir = tmp_path / "net.d"
    conf_dir.mkdir()
    for version in ("1.0.0", "1.1.0"):
        (conf_dir / f"{version}.conflist").write_text(json.dumps({
            "cniVersion": version, "name": f"pk-cni-v{version.replace('.', '')}",
            "plugins": [{"type": "loopback"}]}))
    monkeypatch.setenv("NETCONFPATH", str(conf_dir))
    monkeypatch.setenv("CNI_PATH", CNI_BIN)
    cache = ["--cache-dir", str(tmp_path / "cache")]
    for verb in ("status", "gc"):
        assert cli.main(["cni", verb, "pk-cni-v100", *cache]) == 1
        err = capsys.readouterr().err
        assert f'version "1.0.0" does not support the {verb.upper()} command' in err
        assert cli.main(["cni", verb, "pk-cni-v110", *cache]) == 1
        err = capsys.readouterr().err
        assert "incompatible CNI versions" in err and 'config is "1.1.0"' in err
