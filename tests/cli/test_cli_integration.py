"""The ``podkit`` command as a script uses it: a child process over real runc, conmon and CNI
plugins (``scripts/isolated``): JSON and IDs to parse, distinct exit codes, one-line errors,
no warning on every command, a quiet end on a closed pipe, ``$PODKIT_ROOT``/``$PODKIT_STATE``,
and the not-root line."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from support import REPO, require, require_isolated

from .pod_io_helpers import PodCLI, pod_cli

CLI = [sys.executable, "-m", "podkit.cli"]

RFC3339 = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{9}Z$")
POD_FIELDS = {
    "id", "name", "namespace", "uid", "attempt", "state", "created_at", "ip", "ips",
    "host_network", "hostname", "port_mappings", "labels", "annotations", "log_directory",
    "netns_path", "pid", "cgroups_path", "runtime", "containers"}
CONTAINER_FIELDS = {
    "id", "pod_id", "name", "attempt", "image", "image_ref", "image_id", "state", "created_at",
    "started_at", "finished_at", "exit_code", "reason", "message", "pid", "command", "args",
    "mounts", "log_path", "labels", "annotations"}


@pytest.fixture
def cli(busybox_rootfs: Path, tmp_path: Path) -> Iterator[PodCLI]:
    """Require the real parts; yield the CLI; remove the pod and the bridge afterwards."""
    yield from pod_cli(tmp_path, busybox_rootfs, "pk-cli-json")


def _env(cli: PodCLI) -> dict[str, str]:
    """The test's dirs through the environment instead of options."""
    return {**os.environ, "PODKIT_ROOT": str(cli.base / "root"),
            "PODKIT_STATE": str(cli.base / "state")}


def _run(*words: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, *words], capture_output=True, text=True, env=env,
                          timeout=120, check=False)


@pytest.mark.integration
def test_a_script_drives_a_pod(cli: PodCLI) -> None:
    cli.start(f"""\
        - metadata: {{name: web}}
          image: {cli.rootfs}
          command: [sleep, "1000"]
          labels: {{tier: front}}
          log_path: web.log
        """)
    env = _env(cli)
    listed = _run("pod", "ls", "-o", "json", env=env)
    assert (listed.returncode, listed.stderr) == (0, "")  # no warning on a listing
    [pod] = json.loads(listed.stdout)
    assert set(pod) == POD_FIELDS
    assert (pod["name"], pod["namespace"], pod["state"]) == ("pk-cli-json", "pk-cli", "READY")
    assert pod["ip"] and pod["ips"][0] == pod["ip"] and RFC3339.match(pod["created_at"])
    assert [c["name"] for c in pod["containers"]] == ["web"]

    # -q: the full IDs; --root/--state before the group match the environment
    assert _run("pod", "ls", "-q", env=env).stdout == f"{pod['id']}\n"
    assert cli.ok("pod", "ls", "-q") == f"{pod['id']}\n"
    after = _run("pod", "ls", "-q", *cli.dirs)
    assert after.stdout == f"{pod['id']}\n"

    full = cli.inspect()
    assert set(full) == POD_FIELDS and full["id"] == pod["id"] and full["runtime"] == "runc"
    assert full["netns_path"] and full["pid"] > 0
    [ctr] = full["containers"]
    assert set(ctr) == CONTAINER_FIELDS
    web = cli.inspect("web")
    assert web == ctr
    assert (web["state"], web["exit_code"], web["finished_at"]) == ("RUNNING", None, None)
    assert RFC3339.match(web["started_at"]) and web["pid"] > 0
    assert web["labels"] == {"tier": "front"} and web["command"] == ["sleep", "1000"]
    assert web["log_path"] == str(cli.base / "logs" / "web.log")
    assert yaml_name(cli.ok("pod", "inspect", "pk-cli-json", "web", "-o", "yaml")) == "web"
    assert cli.ok("pod", "inspect", "pk-cli-json", "-q") == f"{pod['id']}\n"

    # options after the positionals are options; the command keeps its own exit code
    res = cli.run("pod", "exec", "pk-cli-json", "web", "--timeout", "30", "--",
                  "sh", "-c", "echo out; exit 3")
    assert (res.returncode, res.stdout) == (3, b"out\n")
    res = cli.run("pod", "exec", "--timeout", "30", "pk-cli-json", "web", "--", "true")
    assert res.returncode == 0

    # not found: its own code, one line naming what was asked for
    for words in (("pod", "inspect", "nope"), ("pod", "inspect", "pk-cli-json", "nope"),
                  ("pod", "exec", "nope", "web", "--", "true"), ("pod", "rm", "nope")):
        res = cli.run(*words)
        assert res.returncode == 3, words
        assert res.stderr.decode().count("\n") == 1 and b"'nope'" in res.stderr
    res = cli.run("--debug", "pod", "inspect", "nope")
    assert res.returncode == 3 and b"Traceback" in res.stderr

    assert cli.ok("pod", "stop", "pk-cli-json") == ""
    stopped = cli.inspect("web")
    assert stopped["state"] == "EXITED" and stopped["exit_code"] == 137
    assert RFC3339.match(stopped["finished_at"])
    assert cli.ok("pod", "rm", "pk-cli-json") == ""
    assert json.loads(cli.ok("pod", "ls", "-o", "json")) == []


def yaml_name(text: str) -> str:
    import yaml

    return str(yaml.safe_load(text)["name"])


@pytest.mark.integration
def test_a_closed_pipe_ends_quietly(cli: PodCLI) -> None:
    """``podkit pod ls | head -0``: the reader is gone before podkit writes."""
    cli.start("[]")
    read, write = os.pipe()
    os.close(read)
    try:
        res = subprocess.run(cli.argv("pod", "ls"), stdout=write, stderr=subprocess.PIPE,
                             timeout=120, check=False)
    finally:
        os.close(write)
    assert (res.returncode, res.stderr) == (0, b"")
    shell = subprocess.run(["sh", "-c", f"{' '.join(cli.argv('pod', 'ls'))} | head -1"],
                           capture_output=True, text=True, timeout=120, check=False)
    assert shell.stdout.startswith("POD ID") and shell.stderr == ""


@pytest.fixture
def as_nobody() -> Iterator[Callable[..., subprocess.CompletedProcess[str]]]:
    """Run the CLI as uid 65534 wherever the checkout lives: the checkout (and the venv, when
    it is elsewhere) bind-mounted under a dir anyone may enter (``scripts/isolated``'s private
    mount namespace), so a 0700 parent dir of the clone does not decide the test."""
    require_isolated()
    require(subprocess.run(["setpriv", "--version"], capture_output=True).returncode == 0,
            "setpriv (util-linux) not installed")
    view = Path(tempfile.mkdtemp(prefix="pk-nobody-", dir="/tmp"))
    os.chmod(view, 0o755)
    sources = {"repo": REPO}
    if REPO not in Path(sys.prefix).parents:
        sources["venv"] = Path(sys.prefix)
    mounted: list[Path] = []
    try:
        for name, src in sources.items():
            (view / name).mkdir()
            subprocess.run(["mount", "--bind", str(src), str(view / name)], check=True)
            mounted.append(view / name)
        prefix = (view / "repo" / Path(sys.prefix).relative_to(REPO) if "venv" not in sources
                  else view / "venv")
        python = prefix / Path(sys.executable).relative_to(sys.prefix)
        env = {"PATH": os.environ.get("PATH", ""), "PYTHONPATH": str(view / "repo" / "src")}

        def run(*words: str) -> subprocess.CompletedProcess[str]:
            return subprocess.run(
                ["setpriv", "--reuid", "65534", "--regid", "65534", "--clear-groups",
                 str(python), "-m", "podkit.cli", *words], capture_output=True, text=True,
                timeout=120, check=False, cwd="/", env=env)

        yield run
    finally:
        for m in reversed(mounted):
            subprocess.run(["umount", str(m)], check=False)
        shutil.rmtree(view, ignore_errors=True)


@pytest.mark.integration
def test_not_root_gets_one_line(
        as_nobody: Callable[..., subprocess.CompletedProcess[str]]) -> None:
    for words, what in ((("pod", "ls"), "run pods"),
                        (("pod", "run", "x.yaml"), "run pods"),
                        (("run", "config.json"), "run containers"),
                        (("cni", "add", "net", "--netns", "/x"), "run CNI plugins")):
        res = as_nobody(*words)
        assert (res.returncode, res.stdout) == (7, ""), words
        assert res.stderr == f"podkit: podkit needs root to {what}\n"
    # a command that does not need root, on a directory the user may not write
    store = Path(tempfile.mkdtemp(prefix="pk-store-", dir="/tmp"))  # 0700, reachable above
    try:
        res = as_nobody("image", "ls", "--root", str(store))
    finally:
        store.rmdir()
    assert res.returncode == 7 and res.stderr.count("\n") == 1
    assert res.stderr.startswith("podkit: permission denied: ")
    assert "Traceback" not in res.stderr
