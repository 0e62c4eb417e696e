"""SandboxManager with a CNI plugin that is missing (real bridge and host-local plugins): the
pod is listed NOTREADY and removable, and removal says what it could not undo (issue 11)."""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path

import pytest

import _leaks
from podkit import cni, netns
from podkit.runtime import Runc
from podkit.sandbox import PauseConfig, SandboxManager, SandboxState

from ._pods import BRIDGE, leaked, leftovers, pod_config, snapshot

pytestmark = pytest.mark.integration

PLUGINS = Path("/usr/lib/cni")


def _conflist(base: Path, name: str, *types: str) -> cni.NetworkConfigList:
    """bridge (host-local IPAM under ``base``) followed by plugins of ``types``."""
    conf = {
        "cniVersion": "1.0.0", "name": name, "disableCheck": True,
        "plugins": [
            {"type": types[0], "bridge": BRIDGE, "isGateway": True,
             "ipam": {"type": "host-local", "dataDir": str(base / "state" / "ipam"),
                      "ranges": [[{"subnet": "10.88.0.0/16"}]]}},
            *({"type": t} for t in types[1:]),
        ],
    }
    return cni.NetworkConfigList.from_bytes(json.dumps(conf).encode())


def _manager(base: Path, rootfs: Path, conf: cni.NetworkConfigList,
             plugin_dir: Path = PLUGINS) -> SandboxManager:
    _leaks.register_runtime_root(base / "runc")
    _leaks.register_ipam_dir(base / "state" / "ipam")
    client = cni.CNI(plugin_dirs=[str(plugin_dir)], cache_dir=str(base / "state" / "cni-cache"))
    return SandboxManager(base / "root", base / "state", Runc("runc", root=base / "runc"),
                          cni.Networks(client, [conf], loopback=True),
                          pause=PauseConfig(rootfs=str(rootfs)), netns_prefix="pk-pod-")


def _cache_entries(base: Path) -> list[str]:
    d = base / "state" / "cni-cache" / "results"
    return sorted(p.name for p in d.iterdir()) if d.is_dir() else []


def _reservations(base: Path) -> list[str]:
    d = base / "state" / "ipam"
    return sorted(p.name for p in d.rglob("*") if p.is_file() and p.name[0].isdigit()
                  and not p.name.startswith("last_reserved_ip"))


def test_missing_plugin_pod_is_listed_and_removable(
    bridge: None, rootfs: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """ADD fails (a plugin of the list is missing) and so does the undo's DEL: the pod is
    listed NOTREADY with its name kept; removing it retries DEL, then releases the netns,
    files, name and record and logs what it could not undo."""
    before = snapshot()
    base = tmp_path / "m"
    m = _manager(base, rootfs,
                 _conflist(base, "pk-pod-missing", "bridge", "pk-no-such-plugin"))
    cfg = pod_config()
    try:
        with pytest.raises(cni.PluginNotFoundError, match="pk-no-such-plugin"):
            m.run_sandbox(cfg)
        [sb] = m.list_sandboxes()
        # the undo did all it could: only DEL is left (and the record and name for it)
        assert (sb.state, sb.steps) == (SandboxState.SANDBOX_NOTREADY, ("network",))
        assert not netns.exists(sb.netns_path)
        with pytest.raises(Exception, match="already reserved"):
            m.run_sandbox(cfg)
        with caplog.at_level(logging.WARNING, logger="podkit.sandbox"):
            m.stop_sandbox(sb.id)  # kubelet stops before it removes: this must not fail
            assert m.sandbox_status(sb.id).steps == ("network",)  # DEL left to the removal
            m.remove_sandbox(sb.id)
        warnings = [r.getMessage() for r in caplog.records if "CNI DEL cannot run" in
                    r.getMessage()]
        assert len(warnings) == 2 and "left to remove_sandbox" in warnings[0]
        assert all(sb.id in w and "pk-no-such-plugin" in w for w in warnings)
        assert "was not undone" in warnings[1]
        assert m.list_sandboxes() == [] and not netns.exists(sb.netns_path)
        assert _cache_entries(base) == [] and leftovers(base, m) == []
        with pytest.raises(cni.PluginNotFoundError):  # the name is free again
            m.run_sandbox(cfg)
        m.remove_all()  # and removing the second one works the same way
        assert m.list_sandboxes() == []
    finally:
        m.close()
    assert leftovers(base, m) == []
    assert leaked(before) == []


def test_plugin_gone_after_add_is_given_up_on_removal(
    bridge: None, rootfs: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The plugin that made the pod's network vanishes before removal: removal releases
    podkit's own state (cache entry, netns, files, record, name) and leaves the plugin's
    (its IP reservation), which a DEL run once the plugin is back removes."""
    before = snapshot()
    base = tmp_path / "m"
    plugins = tmp_path / "plugins"
    plugins.mkdir()
    for name in ("loopback", "host-local"):
        (plugins / name).symlink_to(PLUGINS / name)
    (plugins / "pk-bridge").symlink_to(PLUGINS / "bridge")
    conf = _conflist(base, "pk-pod-vanish", "pk-bridge")
    m = _manager(base, rootfs, conf, plugins)
    try:
        sb = m.run_sandbox(pod_config())
        assert sb.ip.startswith("10.88.")
        assert len(_cache_entries(base)) == 2 and _reservations(base) == [sb.ip]
        (plugins / "pk-bridge").unlink()
        with caplog.at_level(logging.WARNING, logger="podkit.sandbox"):
            m.remove_sandbox(sb.id)
        assert any(sb.id in r.getMessage() and "CNI DEL cannot run" in r.getMessage()
                   for r in caplog.records)
        assert m.list_sandboxes() == [] and not netns.exists(sb.netns_path)
        assert _cache_entries(base) == []
        assert _reservations(base) == [sb.ip]  # what the plugin holds was not undone
    finally:
        (plugins / "pk-bridge").unlink(missing_ok=True)
        (plugins / "pk-bridge").symlink_to(PLUGINS / "bridge")
        client = cni.CNI(plugin_dirs=[str(plugins)], cache_dir=str(tmp_path / "cache2"))
        if "sb" in locals():
            client.delete(conf, cni.RuntimeConf(sb.id, "", "eth0"))
        m.close()
    assert _reservations(base) == []
    assert leftovers(base, m) == []
    assert leaked(before) == []
    assert not os.path.exists(base / "root" / "sandboxes" / sb.id)
