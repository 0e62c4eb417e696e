"""``podkit pod wait``, ``stats`` and ``top`` end to end: the CLI as a child process against a
real pod under runc and conmon."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from .pod_io_helpers import PodCLI, pod_cli

pytestmark = pytest.mark.integration

CONTAINERS = """\
- metadata: {name: busy}
  image: ROOTFS
  command: [sh, -c, "while :; do :; done"]
  log_path: busy.log
- metadata: {name: gate}
  image: ROOTFS
  command: [sh, -c, "while [ ! -e /tmp/go ]; do sleep 0.05; done; exit 7"]
  log_path: gate.log
"""


@pytest.fixture(scope="module")
def cli(busybox_rootfs: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[PodCLI]:
    for c in pod_cli(tmp_path_factory.mktemp("podwatch"), busybox_rootfs, "pk-cli-watch"):
        c.start(CONTAINERS.replace("ROOTFS", str(c.rootfs)))
        yield c


def test_wait_running_ready_and_the_timeout_code(cli: PodCLI) -> None:
    for cond in ("running", "ready"):
        res = cli.run("pod", "wait", cli.pod, "--for", cond, "--timeout", "30s")
        assert res.returncode == 0, res.stderr
    res = cli.run("pod", "wait", cli.pod, "gate", "--for", "exited", "--timeout", "300ms")
    assert res.returncode == 6
    assert res.stderr.decode().strip() == (
        "podkit: pod 'pk-cli-watch' container 'gate': not exited after 0.3s; it is: "
        "pod READY, gate RUNNING")
    res = cli.run("pod", "wait", cli.pod, "--for", "later")
    assert res.returncode == 2 and b"later" in res.stderr
    res = cli.run("pod", "wait", cli.pod, "--timeout", "1 minute")
    assert res.returncode == 2 and b"--timeout '1 minute'" in res.stderr
    res = cli.run("pod", "wait", "pk-no-such-pod", "--for", "running")
    assert res.returncode == 3 and b"pk-no-such-pod" in res.stderr


def test_stats_json_of_a_busy_container(cli: PodCLI) -> None:
    records = json.loads(cli.ok("pod", "stats", cli.pod, "-o", "json"))
    by_name = {r["container"]: r for r in records}
    assert set(by_name) == {"busy", "gate"}
    busy = by_name["busy"]
    assert busy["pod"] == cli.pod and len(busy["container_id"]) == 64
    for field in ("cpu_usage_core_nano_seconds", "cpu_percent", "memory_working_set_bytes",
                  "process_count", "timestamp"):
        assert busy[field] > 0, field
    assert busy["cpu_percent"] > by_name["gate"]["cpu_percent"]
    table = cli.ok("pod", "stats")
    assert table.splitlines()[0].split()[:3] == ["POD", "CONTAINER", "CONTAINER"]
    assert "busy" in table and "gate" in table
    # --watch prints a table per interval until interrupted
    proc = cli.popen("pod", "stats", "--watch", "200ms", "-o", "json",
                     stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        assert proc.stdout is not None
        arrays = 0
        while arrays < 2:
            line = proc.stdout.readline()
            assert line, proc.stderr.read() if proc.stderr else b""
            arrays += line == b"]\n"
    finally:
        proc.terminate()
        proc.communicate(timeout=60)
    res = cli.run("pod", "stats", "--watch", "0s")
    assert res.returncode == 2 and b"--watch '0s'" in res.stderr


def test_top_columns(cli: PodCLI) -> None:
    lines = cli.ok("pod", "top", cli.pod, "gate").splitlines()
    assert lines[0].split() == ["UID", "PID", "PPID", "C", "STIME", "TTY", "TIME", "CMD"]
    assert any("while [ ! -e /tmp/go ]" in line for line in lines[1:])
    rows = json.loads(cli.ok("pod", "top", cli.pod, "busy", "-o", "json"))
    assert rows and {"uid", "pid", "ppid", "cmd"} <= set(rows[0])
    assert any(r["cmd"].startswith("sh -c while :") for r in rows)
    res = cli.run("pod", "top", cli.pod, "nope")
    assert res.returncode == 3


def test_wait_exited_then_deleted(cli: PodCLI) -> None:
    waiter = cli.popen("pod", "wait", cli.pod, "gate", "--for", "exited", "--timeout", "2m",
                       stderr=subprocess.PIPE)
    try:
        assert cli.run("pod", "exec", cli.pod, "gate", "--", "touch", "/tmp/go").returncode == 0
        _, err = waiter.communicate(timeout=180)
        assert waiter.returncode == 0, err
    finally:
        if waiter.poll() is None:
            waiter.kill()
            waiter.communicate()
    gate = cli.inspect("gate")
    assert (gate["state"], gate["exit_code"]) == ("EXITED", 7)
    for words in (("exec", "-i", cli.pod, "gate", "--", "true"), ("attach", cli.pod, "gate"),
                  ("exec", cli.pod, "gate", "--", "true")):
        res = cli.run("pod", *words)
        assert res.returncode == 5, words  # the wrong state for it
        assert b"'gate' of pod 'pk-cli-watch' is not running (EXITED)" in res.stderr
    # a pod is exited once every container is
    res = cli.run("pod", "wait", cli.pod, "--for", "exited", "--timeout", "300ms")
    assert res.returncode == 6 and b"busy RUNNING" in res.stderr
    remover = cli.popen("pod", "wait", cli.pod, "--for", "deleted", "--timeout", "2m",
                        stderr=subprocess.PIPE)
    try:
        cli.ok("pod", "rm", cli.pod)
        _, err = remover.communicate(timeout=180)
        assert remover.returncode == 0, err
    finally:
        if remover.poll() is None:
            remover.kill()
            remover.communicate()
    res = cli.run("pod", "wait", cli.pod, "--for", "ready", "--timeout", "5s")
    assert res.returncode == 3 and b"not found" in res.stderr
