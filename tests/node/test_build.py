"""``podkit.node.build`` without running a pod: the networks of each ``network.name``, the
runtime and the dirs a manager gets; a pod torn down with the networks of its ADD
(``pods.network.attached_networks``); the manager's default cgroup parent."""

from __future__ import annotations

import json
from pathlib import Path

import attrs
import pytest

from podkit import cni
from podkit.cni.testing import FakeExec
from podkit.errors import InvalidArgumentError, NotFoundError
from podkit.image import ImageStore
from podkit.node import (
    NetworkBuiltin,
    NetworkSettings,
    NodeConfig,
    PauseSettings,
    build_manager,
    build_networks,
    build_runtime,
    manager_dirs,
    pause_config,
)
from podkit.pods.network import attached_networks
from podkit.sandbox import BUILTIN_PAUSE_IMAGE, PauseConfig


def _conflist(d: Path, name: str, bridge: str) -> None:
    d.mkdir(exist_ok=True)
    (d / f"{name}.conflist").write_text(json.dumps({
        "cniVersion": "1.0.0", "name": name,
        "plugins": [{"type": "bridge", "bridge": bridge,
                     "ipam": {"type": "host-local", "ranges": [[{"subnet": "10.9.0.0/24"}]]}}]}))


def _names(nets: cni.Networks | None) -> list[tuple[str, str]]:
    assert nets is not None
    return [(a.config.name, a.ifname) for a in nets.attachments]


def _net(**kw: object) -> NodeConfig:
    return NodeConfig(network=NetworkSettings(**kw))  # type: ignore[arg-type]


def test_the_builtin_network_is_the_default_without_a_conf_dir(tmp_path: Path) -> None:
    config = NodeConfig(network=NetworkSettings(builtin=NetworkBuiltin(
        bridge="pkx0", subnet="10.77.0.0/24", masquerade=False, ipam_dir=str(tmp_path / "ipam"))))
    nets, loader = build_networks(config, tmp_path / "state")
    assert loader is None
    assert _names(nets) == [("cni-loopback", "lo"), ("podkit", "eth0")]
    written = json.loads((tmp_path / "state" / "net.d" / "podkit.conflist").read_text())
    bridge = written["plugins"][0]
    assert (bridge["bridge"], bridge["ipMasq"]) == ("pkx0", False)
    assert bridge["ipam"]["ranges"] == [[{"subnet": "10.77.0.0/24"}]]
    assert bridge["ipam"]["dataDir"] == str(tmp_path / "ipam")
    assert nets is not None and nets.client.cache_dir == str(tmp_path / "state" / "cni-cache")


@pytest.mark.parametrize("name", ["host", "none"])
def test_host_and_none_give_loopback_alone(tmp_path: Path, name: str) -> None:
    nets, loader = build_networks(_net(name=name), tmp_path)
    assert _names(nets) == [("cni-loopback", "lo")] and loader is None
    assert not (tmp_path / "net.d").exists()


def test_a_conf_dir_gives_its_networks_and_a_loader(tmp_path: Path) -> None:
    conf = tmp_path / "net.d"
    _conflist(conf, "b-net", "pkb")
    _conflist(conf, "a-net", "pka")
    nets, loader = build_networks(_net(conf_dir=str(conf)), tmp_path)
    assert _names(nets) == [("cni-loopback", "lo"), ("a-net", "eth0")]  # the first file
    assert loader is not None and _names(loader()) == _names(nets)
    nets, _ = build_networks(_net(conf_dir=str(conf), max_networks=2), tmp_path)
    assert _names(nets)[1:] == [("a-net", "eth0"), ("b-net", "eth1")]
    nets, _ = build_networks(_net(conf_dir=str(conf), name="b-net"), tmp_path)
    assert _names(nets) == [("cni-loopback", "lo"), ("b-net", "eth0")]


def test_an_empty_conf_dir_waits_for_a_config(tmp_path: Path) -> None:
    conf = tmp_path / "net.d"
    conf.mkdir()
    nets, loader = build_networks(_net(conf_dir=str(conf)), tmp_path)
    assert nets is None and loader is not None
    _conflist(conf, "late", "pkl")
    assert _names(loader()) == [("cni-loopback", "lo"), ("late", "eth0")]


def test_a_named_network_that_is_missing(tmp_path: Path) -> None:
    conf = tmp_path / "net.d"
    _conflist(conf, "there", "pkt")
    config = _net(conf_dir=str(conf), name="gone")
    with pytest.raises(NotFoundError, match="gone"):
        build_networks(config, tmp_path)
    nets, loader = build_networks(config, tmp_path, required=False)  # a manager that removes
    assert nets is None and loader is not None
    with pytest.raises(InvalidArgumentError, match=r"network.name 'x': .*--cni-conf-dir"):
        build_networks(_net(name="x"), tmp_path)
    with pytest.raises(InvalidArgumentError, match="not a directory"):
        build_networks(_net(name="x", conf_dir=str(tmp_path / "nope")), tmp_path)


def test_a_pod_is_torn_down_with_the_networks_of_its_add(tmp_path: Path) -> None:
    fake = FakeExec()
    client = cni.CNI(["/fake"], tmp_path / "cache", fake)
    conf = tmp_path / "net.d"
    _conflist(conf, "then", "pkt")
    _conflist(conf, "now", "pkn")
    then = cni.Networks(client, [cni.load_network(conf, "then")], loopback=True)
    now = cni.Networks(client, [cni.load_network(conf, "now")], loopback=True)
    then.setup("pod1", "/run/netns/x")
    assert [(a.config.name, a.ifname) for a in attached_networks(now, "pod1").attachments] == \
        [("cni-loopback", "lo"), ("then", "eth0")]
    assert attached_networks(now, "pod2") is now  # nothing cached: the current networks
    client.cache.remove("then", "pod1", "eth0")  # an ADD cut short before its result was kept
    assert [(a.config.name, a.ifname) for a in attached_networks(now, "pod1").attachments] == \
        [("cni-loopback", "lo"), ("now", "eth0")]


def test_the_runtime_and_the_manager_dirs(tmp_path: Path) -> None:
    config = NodeConfig(root=str(tmp_path / "r"))
    assert manager_dirs(config) == (tmp_path / "r" / "pods", tmp_path / "r" / "state" / "pods")
    assert manager_dirs(config, "cri")[1] == tmp_path / "r" / "state" / "cri"
    with pytest.raises(InvalidArgumentError, match="manager name"):
        manager_dirs(config, "../x")
    rt = build_runtime(config)
    assert rt.root == tmp_path / "r" / "state" / "runc"
    crun = build_runtime(attrs.evolve(config, runtime=attrs.evolve(config.runtime,
                                                                   name="/usr/bin/crun")))
    assert (crun.binary, crun.root) == ("/usr/bin/crun", tmp_path / "r" / "state" / "crun")


def test_the_pause(tmp_path: Path) -> None:
    assert pause_config(NodeConfig(pause=PauseSettings(rootfs="/r"))) == PauseConfig(rootfs="/r")
    assert pause_config(NodeConfig(pause=PauseSettings(image="p:1"))).image == "p:1"
    with pytest.raises(InvalidArgumentError, match="the built-in pause needs the image store"):
        pause_config(NodeConfig())
    store = ImageStore(tmp_path / "r")
    made = pause_config(NodeConfig(), store)  # podkit's own pause, made in the store
    assert made == PauseConfig(image=BUILTIN_PAUSE_IMAGE)
    assert store.get(BUILTIN_PAUSE_IMAGE).name == BUILTIN_PAUSE_IMAGE


def test_a_manager_of_the_config(tmp_path: Path) -> None:
    """Its dirs, netns dir and default cgroup parent; the dirs it leaves when it closes."""
    rootfs = tmp_path / "rootfs"
    rootfs.mkdir()
    config = NodeConfig(root=str(tmp_path / "r"), pause=PauseSettings(rootfs=str(rootfs)),
                        network=NetworkSettings(name="none"))
    root, state = manager_dirs(config)
    with build_manager(config) as mgr:
        assert (mgr.root_dir, mgr.state_dir) == (root, state)
        assert mgr.netns_dir == str(state / "netns")
        assert mgr.cgroup_parent == config.cgroup_parent(str(state), mgr.cgroup_driver)
        assert mgr.pause is not None and mgr.pause.rootfs == str(rootfs)
        assert mgr.images is not None  # a manager that runs pods opens the store
    with build_manager(config, pause=False, name="other") as mgr:
        assert mgr.pause is None
        assert mgr.images is not None  # the store exists now
    bare = NodeConfig(root=str(tmp_path / "bare"))
    with build_manager(bare, pause=False) as mgr:  # no pause: nothing about it is made
        assert mgr.images is None and not (tmp_path / "bare" / "image").exists()
