"""Two CI jobs on one host (issue 24): each ``--root`` keeps what its commands make (records,
netns pins, the runtime's state and scratch files, logs, its cgroup parent) and never sees,
locks or cleans up the other's, also when one job's ``kube play`` is SIGKILLed mid-play; the
killed job's next ``kube down`` leaves nothing behind. Real runc, conmon, CNI, netns."""

from __future__ import annotations

import json
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

import _leaks
from podkit import cgroups
from support import require_binary, require_isolated

from .node_helpers import Job, cgroup_dirs, copy_rootfs, del_link, mounts_under

pytestmark = pytest.mark.integration

BRIDGE = "pkroots0"
SHARED = {"PODKIT_NETWORK_BUILTIN_BRIDGE": BRIDGE,  # one bridge, one address book: two jobs
          "PODKIT_NETWORK_BUILTIN_SUBNET": "10.123.10.0/24",  # on one runner's defaults
          "PODKIT_NETWORK_BUILTIN_MASQUERADE": "false"}

POD = """\
apiVersion: v1
kind: Pod
metadata: {{name: {name}, namespace: {ns}}}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: app
    image: {rootfs}
    command: [sh, -c, 'echo up; exec sleep 3600']
    readinessProbe:
      exec: {{command: ["{ready}"]}}
      periodSeconds: 1
      timeoutSeconds: 30
"""


@pytest.fixture
def jobs(busybox_rootfs: Path, tmp_path: Path) -> Iterator[tuple[Job, Job]]:
    require_isolated()
    for b in ("runc", "conmon"):
        require_binary(b)
    rootfs = copy_rootfs(busybox_rootfs, tmp_path / "rootfs")
    env = {**SHARED, "PODKIT_NETWORK_BUILTIN_IPAM_DIR": str(tmp_path / "ipam")}
    a, b = Job(tmp_path / "a", rootfs, env), Job(tmp_path / "b", rootfs, env)
    _leaks.register_ipam_dir(tmp_path / "ipam")
    before = _leaks.snapshot(("netns", "link", "mount", "ipam"))
    try:
        yield a, b
    finally:
        for job in (a, b):
            for f in job.base.glob("*.yaml"):
                job.run("kube", "down", str(f), "--pause-rootfs", str(rootfs))
        del_link(BRIDGE)
    assert _leaks.leaked_since(before, kinds=("netns", "link", "mount", "ipam")) == []


def _outside_the_roots() -> set[str]:
    """What a podkit command would leave outside its root if it fell back to the host-wide
    places: pins in /run/netns, pod logs in /var/log/pods, runc scratch dirs in /dev/shm,
    podkit's default state."""
    found = {f"netns {p}" for p in Path("/run/netns").glob("podkit-*")}
    found |= {f"log {p}" for p in Path("/var/log/pods").glob("pk-roots-*")}
    found |= {f"scratch {p}" for p in Path("/dev/shm").glob("podkit-runc-*")}
    found |= {f"state {p}" for p in Path("/run/podkit").glob("*")}
    return found


def _wait_for(what: str, check: object, limit: float = 120) -> None:
    end = time.monotonic() + limit
    while not check():  # type: ignore[operator]
        assert time.monotonic() < end, f"gave up waiting for {what}"
        time.sleep(0.1)


def _log_files(job: Job) -> list[Path]:
    return sorted((job.root / "logs").glob("*/app/0.log"))


def test_two_roots_side_by_side_and_one_killed_mid_play(jobs: tuple[Job, Job]) -> None:
    a, b = jobs
    outside = _outside_the_roots()
    fa = a.write("a.yaml", POD.format(name="slow", ns="pk-roots-a", rootfs=a.rootfs,
                                      ready="false"))  # never Ready: play --wait waits on
    fb = b.write("b.yaml", POD.format(name="web", ns="pk-roots-b", rootfs=b.rootfs,
                                      ready="true"))
    flags = ("--pause-rootfs", str(a.rootfs))
    play_a = a.popen("kube", "play", str(fa), "--wait", "--timeout", "10m", *flags)
    play_b = b.popen("kube", "play", str(fb), "--wait", "--timeout", "2m", "-o", "json", *flags)
    try:
        out_b, err_b = play_b.communicate(timeout=300)
        assert play_b.returncode == 0, err_b
        _wait_for("A's container to start", lambda: _log_files(a))
        assert play_a.poll() is None  # still waiting for its probe
        os.kill(play_a.pid, signal.SIGKILL)
        play_a.wait(timeout=30)
    finally:
        for p in (play_a, play_b):
            if p.poll() is None:
                p.kill()
                p.wait()
    (pod_b,) = json.loads(out_b)["pods"]

    # each job's pods, pins, cgroups and logs are under its own root and state
    systemd = cgroups.default_driver() is cgroups.Driver.SYSTEMD
    assert a.cgroup_parent != b.cgroup_parent or systemd  # systemd: scopes per container
    for job in (a, b):
        assert len(list(job.netns_dir.iterdir())) == 1
        assert systemd or cgroup_dirs(job.cgroup_parent), job.cgroup_parent
        assert len(_log_files(job)) == 1
        assert (job.state / "pods" / "runc").is_dir()
    assert _outside_the_roots() == outside

    # B sees only its own pod, and it runs; A's next command finds A's pod (killed mid-play)
    (listed,) = json.loads(b.ok("pod", "ls", "-o", "json"))
    assert (listed["name"], listed["state"], listed["ip"]) == ("web", "READY",
                                                               pod_b["ip"])
    (killed,) = json.loads(a.ok("pod", "ls", "-o", "json"))
    assert killed["name"] == "slow" and killed["ip"] != pod_b["ip"]  # one address book
    a_path, b_path = killed["cgroups_path"], listed["cgroups_path"]
    assert cgroups.locate(a_path).exists() and cgroups.locate(b_path).exists()

    # A's kube down removes all of A's and nothing of B's
    a.ok("kube", "down", str(fa))
    assert json.loads(a.ok("pod", "ls", "-o", "json")) == []
    assert not a.netns_dir.exists() and mounts_under(a.base) == []
    assert cgroup_dirs(a.cgroup_parent) == [] and not cgroups.locate(a_path).exists()
    assert not any((a.state / "pods" / "runc").iterdir())
    assert b.exec("web", "echo", "still here") == "still here\n"
    assert len(list(b.netns_dir.iterdir())) == 1 and cgroups.locate(b_path).exists()

    b.ok("kube", "down", str(fb))
    assert not b.netns_dir.exists() and mounts_under(b.base) == []
    assert cgroup_dirs(b.cgroup_parent) == [] and not cgroups.locate(b_path).exists()
    assert _outside_the_roots() == outside


def test_a_second_command_on_one_root_waits_for_the_first(jobs: tuple[Job, Job]) -> None:
    """One root is one job: a command there waits for the one holding its state dir, while
    another root's command never waits on it."""
    a, b = jobs
    f = a.write("a.yaml", POD.format(name="held", ns="pk-roots-a", rootfs=a.rootfs,
                                     ready="false"))
    play = a.popen("kube", "play", str(f), "--wait", "--timeout", "10m", "--pause-rootfs",
                   str(a.rootfs))
    try:
        _wait_for("A's container to start", lambda: _log_files(a))
        # B's command goes through (had it waited for A's lock, held all along, it would
        # have given up as A's own does)
        assert json.loads(b.ok("pod", "ls", "-o", "json")) == []
        res = a.run("pod", "ls")  # A's own state dir stays held by the play
        assert res.returncode == 5 and "manager.lock" in res.stderr, res.stderr
    finally:
        play.send_signal(signal.SIGTERM)  # as Ctrl-C: play removes what it made
        play.wait(timeout=120)
    assert json.loads(a.ok("pod", "ls", "-o", "json")) == []
