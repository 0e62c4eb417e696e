"""run_sandbox's overlap against the real parts (bridge, host-local and loopback plugins, runc
under conmon, a netns): the pause starts while CNI ADD runs; a CNI plugin failing while the
pause starts, or the pause failing while CNI ADD runs, leaves nothing; pods with network
sysctls start their pause (or pin their namespaces) after ADD."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import attrs
import pytest

import _leaks
from podkit import cni, netns
from podkit.pods.config import LinuxPodSandboxConfig
from podkit.runtime import Runc
from podkit.sandbox import PauseConfig, Sandbox, SandboxManager, SandboxState

from ._pods import BRIDGE, leaked, leftovers, make_manager, pod_config, snapshot

pytestmark = pytest.mark.integration

PLUGINS = Path("/usr/lib/cni")

# A chained plugin: on ADD it waits for the file ``waitFor`` (10 s at most, then fails),
# creates ``touch``, then fails if told to or passes the previous result on.
GATE = """\
import json, os, sys, time
conf = json.load(sys.stdin)
cmd = os.environ.get("CNI_COMMAND")
if cmd == "VERSION":
    print(json.dumps({"cniVersion": "1.0.0", "supportedVersions": ["0.4.0", "1.0.0"]}))
    sys.exit(0)
if cmd != "ADD":
    sys.exit(0)
def fail(msg):
    print(json.dumps({"cniVersion": conf["cniVersion"], "code": 100, "msg": msg}))
    sys.exit(1)
wait = conf.get("waitFor")
end = time.monotonic() + 10
while wait and not os.path.exists(wait) and time.monotonic() < end:
    time.sleep(0.005)
if wait and not os.path.exists(wait):
    fail("pk-gate: " + wait + " never came")
if conf.get("touch"):
    open(conf["touch"], "w").close()
if conf.get("fail"):
    fail("pk-gate: told to fail")
print(json.dumps(conf["prevResult"]))
"""


def wait_for(path: Path) -> None:
    """Until ``path`` exists (10 s at most: a guard, then the test fails)."""
    end = time.monotonic() + 10
    while not path.exists():
        assert time.monotonic() < end, f"{path} never came"
        time.sleep(0.005)


def gated_manager(base: Path, rootfs: Path, gate: dict[str, Any], *, infraless: bool = False,
                  pause: PauseConfig | None = None) -> SandboxManager:
    """A manager whose network is bridge (host-local IPAM under ``base``) then the gate
    (``infraless``: without a pause; ``pause``: another pause program on ``rootfs``)."""
    plugins = base / "plugins"
    plugins.mkdir(parents=True)
    for name in ("loopback", "bridge", "host-local"):
        (plugins / name).symlink_to(PLUGINS / name)
    (plugins / "pk-gate").write_text(f"#!{sys.executable}\n{GATE}")
    (plugins / "pk-gate").chmod(0o755)
    conf = {
        "cniVersion": "1.0.0", "name": "pk-pod-gated", "disableCheck": True,
        "plugins": [
            {"type": "bridge", "bridge": BRIDGE, "isGateway": True,
             "ipam": {"type": "host-local", "dataDir": str(base / "state" / "ipam"),
                      "ranges": [[{"subnet": "10.88.0.0/16"}]]}},
            {"type": "pk-gate", **gate},
        ],
    }
    _leaks.register_runtime_root(base / "runc")
    _leaks.register_ipam_dir(base / "state" / "ipam")
    client = cni.CNI(plugin_dirs=[str(plugins)], cache_dir=str(base / "state" / "cni-cache"))
    nets = cni.Networks(client, [cni.NetworkConfigList.from_bytes(json.dumps(conf).encode())],
                        loopback=True)
    return SandboxManager(base / "root", base / "state", Runc("runc", root=base / "runc"), nets,
                          pause=None if infraless else pause or PauseConfig(rootfs=str(rootfs)),
                          netns_prefix="pk-pod-")


def around(m: SandboxManager, name: str, before: Callable[[Sandbox], None] = lambda sb: None,
           after: Callable[[Sandbox], None] = lambda sb: None,
           failed: Callable[[Sandbox], None] = lambda sb: None) -> None:
    """Run ``before`` and ``after`` (or ``failed``) around the manager's step ``name``."""
    real = m.steps[name].do

    def do(sb: Sandbox) -> None:
        before(sb)
        try:
            real(sb)
        except BaseException:
            failed(sb)
            raise
        after(sb)

    m.steps[name] = attrs.evolve(m.steps[name], do=do)


def reservations(base: Path) -> list[str]:
    d = base / "state" / "ipam"
    return sorted(p.name for p in d.rglob("*") if p.is_file() and p.name[0].isdigit()
                  and not p.name.startswith("last_reserved_ip"))


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


@pytest.mark.parametrize("infraless", [False, True])
def test_the_pause_starts_while_cni_add_runs(
    bridge: None, rootfs: Path, tmp_path: Path, infraless: bool
) -> None:
    """The gate lets ADD finish only once the pause runs (or the namespaces are pinned):
    one after the other, it would fail."""
    before = snapshot()
    base = tmp_path / "m"
    started = tmp_path / "pause-started"
    m = gated_manager(base, rootfs, {"waitFor": str(started)}, infraless=infraless)
    step = "namespaces" if infraless else "pause"
    around(m, step, after=lambda sb: started.touch())
    cgroups: list[str] = []
    try:
        sb = m.run_sandbox(pod_config())
        cgroups.append(sb.cgroups_path)
        assert sb.state == SandboxState.SANDBOX_READY and sb.ip.startswith("10.88.")
        assert sb.steps == ("netns", "network", "files", step)
        if not infraless:
            assert alive(sb.pid)
        m.remove_sandbox(sb.id)
    finally:
        m.remove_all()
        m.close()
    assert leftovers(base, m, [c for c in cgroups if c]) == []
    assert leaked(before) == []


def test_a_cni_plugin_failing_while_the_pause_starts_leaves_nothing(
    bridge: None, rootfs: Path, tmp_path: Path
) -> None:
    """The gate fails ADD once the pause step began; the pause starts meanwhile, is waited
    for, then undone with everything else: netns, veth, IP reservation, cgroup, conmon,
    runc state, mounts, files, record."""
    before = snapshot()
    base = tmp_path / "m"
    starting, failing = tmp_path / "pause-starting", tmp_path / "cni-failing"
    m = gated_manager(base, rootfs, {"waitFor": str(starting), "touch": str(failing),
                                     "fail": True})
    seen: dict[str, Any] = {}

    def started(sb: Sandbox) -> None:
        seen.update(pid=sb.pid, alive=alive(sb.pid), netns=sb.netns_path,
                    cgroups=sb.cgroups_path, reserved=reservations(base))

    around(m, "pause", before=lambda sb: (starting.touch(), wait_for(failing)), after=started)
    try:
        with pytest.raises(cni.CNIError, match="told to fail") as info:
            m.run_sandbox(pod_config())
        assert not getattr(info.value, "__notes__", [])  # the pause itself started fine
        assert seen["alive"] and seen["cgroups"]  # it ran while ADD failed
        assert not alive(seen["pid"]) and not netns.exists(seen["netns"])
        assert m.list_sandboxes() == [] and m.runtime.list() == []
        assert reservations(base) == []
        assert leftovers(base, m, [seen["cgroups"]]) == []
        assert leaked(before) == []
    finally:
        m.remove_all()
        m.close()
    assert leaked(before) == []


def test_the_pause_failing_while_cni_add_runs_leaves_nothing(
    bridge: None, rootfs: Path, tmp_path: Path
) -> None:
    """A pause that cannot start (no such program) fails while the gate holds ADD; ADD is
    waited for (it completes: an IP is reserved), then undone with the rest."""
    before = snapshot()
    base = tmp_path / "m"
    pause_failed = tmp_path / "pause-failed"
    m = gated_manager(base, rootfs, {"waitFor": str(pause_failed)},
                      pause=PauseConfig(rootfs=str(rootfs), args=("/no/such/pause",)))
    seen: dict[str, Any] = {}
    around(m, "pause", failed=lambda sb: (pause_failed.touch(), seen.update(
        netns=sb.netns_path, cgroups=sb.cgroups_path)))
    around(m, "network", after=lambda sb: seen.update(ips=sb.ips, reserved=reservations(base)))
    try:
        with pytest.raises(Exception, match="no/such/pause") as info:
            m.run_sandbox(pod_config())
        assert not getattr(info.value, "__notes__", [])  # ADD itself succeeded
        assert seen["ips"] and seen["reserved"] == list(seen["ips"][:1])  # ADD completed
        assert not netns.exists(seen["netns"])
        assert m.list_sandboxes() == [] and m.runtime.list() == []
        assert reservations(base) == []
        assert leftovers(base, m, [seen["cgroups"]]) == []
        assert leaked(before) == []
    finally:
        m.remove_all()
        m.close()
    assert leaked(before) == []


@pytest.mark.parametrize("infraless", [False, True])
def test_network_sysctls_are_set_after_cni_add(
    bridge: None, rootfs: Path, tmp_path: Path, infraless: bool
) -> None:
    """A sysctl of eth0 needs eth0: the pause starts (or the namespaces are pinned) once ADD
    is done, and the pod's netns has the value asked for."""
    before = snapshot()
    base = tmp_path / "m"
    m = make_manager(base, rootfs, infraless=infraless)
    step = "namespaces" if infraless else "pause"
    order: list[str] = []
    around(m, "network", after=lambda sb: order.append("network done"))
    around(m, step, before=lambda sb: order.append(f"{step} begins"))
    key = "net.ipv4.conf.eth0.arp_ignore"
    cgroups: list[str] = []
    try:
        sb = m.run_sandbox(pod_config(linux=LinuxPodSandboxConfig(sysctls={key: "2"})))
        cgroups.append(sb.cgroups_path)
        assert order == ["network done", f"{step} begins"]
        value = subprocess.run(
            ["nsenter", f"--net={sb.netns_path}", "cat", "/proc/sys/net/ipv4/conf/eth0/arp_ignore"],
            check=True, capture_output=True, text=True).stdout.strip()
        assert value == "2"
        m.remove_sandbox(sb.id)
    finally:
        m.remove_all()
        m.close()
    assert leftovers(base, m, [c for c in cgroups if c]) == []
    assert leaked(before) == []
