"""Choosing the pods' network from the command line and the node config (issue 24): a conflist
of the test's own by name, the built-in network's bridge, subnet and masquerade, ``host`` and
``none``, ``kube play --network`` and ``podkit run --network``; real runc, conmon, CNI plugins
and network namespaces (``scripts/isolated``)."""

from __future__ import annotations

import ipaddress
import json
import os
import subprocess
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

import _leaks
from podkit import oci
from support import require_binary, require_isolated

from .node_helpers import Job, copy_rootfs, del_link, mounts_under

pytestmark = pytest.mark.integration

NET = "pk-ci-net"
BRIDGE = "pkci0"
SUBNET = "10.123.7.0/24"


@pytest.fixture
def job(busybox_rootfs: Path, tmp_path: Path) -> Iterator[Job]:
    require_isolated()
    for b in ("runc", "conmon"):
        require_binary(b)
    job = Job(tmp_path, copy_rootfs(busybox_rootfs, tmp_path / "rootfs"))
    before = _leaks.snapshot(("netns", "link", "mount"))
    try:
        yield job
    finally:
        for f in tmp_path.glob("*.yaml"):
            job.run("kube", "down", str(f), "--pause-rootfs", str(job.rootfs))
        for pod in json.loads(job.run("pod", "ls", "-o", "json").stdout or "[]"):
            job.run("pod", "rm", pod["id"])
        for link in (BRIDGE, "pkci1", "pk0"):
            del_link(link)
    assert _leaks.leaked_since(before, kinds=("netns", "link", "mount")) == []


def _conf_dir(job: Job) -> Path:
    """A conf dir with the test's own network: its bridge, subnet and address book."""
    d = job.base / "net.d"
    d.mkdir()
    (d / "10-ci.conflist").write_text(json.dumps({
        "cniVersion": "1.0.0", "name": NET, "plugins": [
            {"type": "bridge", "bridge": BRIDGE, "isGateway": True,
             "ipam": {"type": "host-local", "ranges": [[{"subnet": SUBNET}]],
                      "dataDir": str(job.base / "ipam")}}]}))
    (d / "20-other.conflist").write_text(json.dumps({
        "cniVersion": "1.0.0", "name": "pk-ci-other", "plugins": [
            {"type": "bridge", "bridge": "pkci9",
             "ipam": {"type": "host-local", "ranges": [[{"subnet": "10.123.9.0/24"}]]}}]}))
    return d


def _addresses(link: str) -> list[str]:
    out = subprocess.run(["ip", "-4", "-o", "addr", "show", "dev", link], capture_output=True,
                         text=True, check=True).stdout
    return [line.split()[3] for line in out.splitlines()]


def test_a_network_of_the_conf_dir_by_name(job: Job) -> None:
    conf = _conf_dir(job)
    job.ok("pod", "run", str(job.pod_file("named")), "--cni-conf-dir", str(conf),
           "--network", NET)
    ip = job.inspect("named")["ip"]
    assert ipaddress.ip_address(ip) in ipaddress.ip_network(SUBNET)
    assert _addresses(BRIDGE) == ["10.123.7.1/24"]  # the test's bridge, not pk0
    assert not Path("/sys/class/net/pkci9").exists()  # only the named network
    assert (job.base / "ipam" / NET / ip).exists()
    assert f"{ip}/24" in job.exec("named", "ip", "-4", "-o", "addr", "show", "eth0")
    # removed with the network it was added to, though this command names none
    job.ok("pod", "rm", "named")
    assert not (job.base / "ipam" / NET / ip).exists()
    assert not job.netns_dir.exists() and mounts_under(job.state) == []


def test_the_conf_dir_alone_gives_its_first_network(job: Job) -> None:
    conf = _conf_dir(job)
    job.ok("pod", "run", str(job.pod_file("first")), "--cni-conf-dir", str(conf))
    assert ipaddress.ip_address(job.inspect("first")["ip"]) in ipaddress.ip_network(SUBNET)
    job.ok("pod", "rm", "first")


def test_the_builtin_network_from_the_config_file(job: Job) -> None:
    config = job.write("podkit.toml", textwrap.dedent(f"""\
        [network]
        name = "builtin"

        [network.builtin]
        bridge = "pkci1"
        subnet = "10.123.8.0/24"
        masquerade = false
        ipam_dir = "{job.base / 'ipam'}"
        """))
    job.ok("pod", "run", str(job.pod_file("quiet")), "--config", str(config))
    ip = job.inspect("quiet")["ip"]
    assert ipaddress.ip_address(ip) in ipaddress.ip_network("10.123.8.0/24")
    assert _addresses("pkci1") == ["10.123.8.1/24"]
    assert (job.base / "ipam" / "podkit" / ip).exists()  # the configured address book
    nat = subprocess.run(["iptables", "-t", "nat", "-S"], capture_output=True, text=True,
                         check=True).stdout
    assert ip not in nat  # no masquerading
    # masquerading on (the environment this time): the pod's address is NATed
    job.env["PODKIT_CONFIG"] = str(config)
    job.env["PODKIT_NETWORK_BUILTIN_MASQUERADE"] = "true"
    job.ok("pod", "run", str(job.pod_file("loud")))
    ip2 = job.inspect("loud")["ip"]
    nat = subprocess.run(["iptables", "-t", "nat", "-S"], capture_output=True, text=True,
                         check=True).stdout
    assert ip2 != ip and ip2 in nat
    job.ok("pod", "rm", "quiet", "loud")
    assert ip2 not in subprocess.run(["iptables", "-t", "nat", "-S"], capture_output=True,
                                     text=True, check=True).stdout


def test_host_and_none(job: Job) -> None:
    job.ok("pod", "run", str(job.pod_file("hosted", hostname="ignored")), "--network", "host")
    assert job.exec("hosted", "readlink", "/proc/self/ns/net").strip() == \
        os.readlink("/proc/self/ns/net")
    assert job.inspect("hosted")["host_network"] is True
    job.ok("pod", "run", str(job.pod_file("alone")), "--network", "none")
    assert job.exec("alone", "ls", "/sys/class/net").split() == ["lo"]
    assert job.inspect("alone")["ip"] is None
    assert not Path("/sys/class/net/pk0").exists()  # no bridge was made for either
    job.ok("pod", "rm", "hosted", "alone")


def test_a_network_that_is_not_there(job: Job) -> None:
    conf = _conf_dir(job)
    res = job.run("pod", "run", str(job.pod_file("lost")), "--cni-conf-dir", str(conf),
                  "--network", "nope")
    assert res.returncode == 3, res.stderr
    assert "nope" in res.stderr and str(conf) in res.stderr
    res = job.run("pod", "run", str(job.pod_file("lost")), "--network", "nope")
    assert res.returncode == 2
    assert "network.name 'nope'" in res.stderr and "--cni-conf-dir" in res.stderr
    res = job.run("pod", "run", str(job.pod_file("lost")), "--cni-conf-dir",
                  str(job.base / "missing"))
    assert res.returncode == 2 and "not a directory" in res.stderr
    assert json.loads(job.ok("pod", "ls", "-o", "json")) == []
    assert mounts_under(job.state) == []


def test_kube_play_on_a_network_of_its_own(job: Job) -> None:
    conf = _conf_dir(job)
    f = job.write("web.yaml", textwrap.dedent(f"""\
        apiVersion: v1
        kind: Pod
        metadata: {{name: web, namespace: pk-node}}
        spec:
          terminationGracePeriodSeconds: 1
          containers:
          - name: app
            image: {job.rootfs}
            command: [sleep, "3600"]
        """))
    out = json.loads(job.ok("kube", "play", str(f), "-o", "json", "--pause-rootfs",
                            str(job.rootfs), "--cni-conf-dir", str(conf), "--network", NET))
    (pod,) = out["pods"]
    assert ipaddress.ip_address(pod["ip"]) in ipaddress.ip_network(SUBNET)
    job.ok("kube", "down", str(f))
    assert not (job.base / "ipam" / NET / pod["ip"]).exists()


def test_podkit_run_network_host_and_none(job: Job) -> None:
    bundle = job.base / "bundle"
    bundle.mkdir()
    (bundle / "config.json").write_text(json.dumps(_spec(job.rootfs)))
    mine = os.readlink("/proc/self/ns/net")
    res = job.run("run", str(bundle), "--network", "host")
    assert res.returncode == 0, res.stderr
    assert res.stdout.splitlines()[0] == mine
    res = job.run("run", str(bundle), "--network", "none")
    assert res.returncode == 0, res.stderr
    first, links = res.stdout.splitlines()[0], res.stdout.split()[1:]
    assert first != mine and links == ["lo"]
    assert not (job.state / "run").exists() or not any((job.state / "run").iterdir())


def _spec(rootfs: Path) -> dict[str, object]:
    """A runc spec printing its netns and listing its links."""
    s = oci.runc_spec()
    assert s.process is not None and s.root is not None
    s.process.terminal = False
    s.process.args = ["sh", "-c", "readlink /proc/self/ns/net; ls /sys/class/net"]
    s.root.path = str(rootfs)
    return s.to_dict()
