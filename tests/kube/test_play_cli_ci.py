"""The CLI as a CI job meets it, end to end against real runc, conmon and the CNI bridge:
manifests read strictly (a typo fails before anything runs, ``--lenient`` warns), a missing
file is "not found", ``-o json`` says null for what does not apply, ``pod exec --timeout``
talks about the user's command, and the OOM-score clamp of pause containers is a note for
``--debug`` only."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from podkit.pods.sandbox_spec import SANDBOX_OOM_SCORE_ADJ

from . import test_play_cli
from .play_support import BUSYBOX_IMAGE, KubeEnv

pytestmark = pytest.mark.integration
env, layout = test_play_cli.env, test_play_cli.layout  # the fixtures, shared

APP = f"""\
apiVersion: v1
kind: ConfigMap
metadata: {{name: cfg, namespace: ci}}
data: {{GREETING: hello}}
---
apiVersion: apps/v1
kind: Deployment
metadata: {{name: web, namespace: ci}}
spec:
  selector: {{matchLabels: {{app: web}}}}
  template:
    metadata: {{labels: {{app: web}}}}
    spec:
      terminationGracePeriodSeconds: 1
      initContainers:
      - {{name: prepare, image: {BUSYBOX_IMAGE}, command: ["true"]}}
      containers:
      - name: web
        image: {BUSYBOX_IMAGE}
        command: [sh, -c, 'trap "exit 0" TERM; while true; do sleep 1; done']
        envFrom: [{{configMapRef: {{name: cfg}}}}]
        readinessProbe: {{exec: {{command: [test, -n, $(GREETING)]}}, periodSeconds: 1}}
"""


def _pod_cmd(env: KubeEnv, *args: str) -> subprocess.CompletedProcess[str]:
    """``podkit pod COMMAND ARGS`` on the test's dirs (given before ARGS: they may hold a
    ``--``)."""
    exe = Path(sys.executable).parent / "podkit"
    command, *rest = args
    return subprocess.run([str(exe), "--root", str(env.base / "root"), "--state",
                           str(env.base / "state"), "pod", command, "--runtime", env.runtime,
                           *rest], capture_output=True, text=True, timeout=600, check=False)


def _nothing_made(env: KubeEnv) -> None:
    assert env.volumes() == []
    res = _pod_cmd(env, "ls", "-q")
    assert res.returncode == 0 and res.stdout == "", res.stdout


def test_typos_fail_with_every_problem_before_anything_runs(env: KubeEnv) -> None:
    typo = APP.replace("initContainers", "initContianers").replace(
        "readinessProbe", "readinesProbe").replace("\ndata:", "\ndta:")
    f = env.write("typo.yaml", typo)
    res = env.podkit("kube", "play", str(f), "--wait", "--timeout", "1m")
    assert res.returncode == 2, res.stderr
    assert res.stderr.splitlines() == [
        f"podkit: {f}: 3 unknown fields:",
        f"  {f}:4:1: dta: unknown field, did you mean 'data'?",
        f"  {f}:15:7: spec.template.spec.initContianers: unknown field, did you mean "
        "'initContainers'?",
        f"  {f}:22:9: spec.template.spec.containers[0].readinesProbe: unknown field, did you "
        "mean 'readinessProbe'?"]
    _nothing_made(env)
    sepc = env.write("sepc.yaml", "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nsepc:\n"
                                  f"  containers: [{{name: c, image: {BUSYBOX_IMAGE}}}]\n")
    res = env.podkit("kube", "play", str(sepc))
    assert res.returncode == 2 and res.stderr.splitlines() == [
        f"podkit: {sepc}: 1 unknown field:",
        f"  {sepc}:4:1: sepc: unknown field, did you mean 'spec'?"], res.stderr
    _nothing_made(env)


def test_lenient_warns_and_plays_without_the_misspelt_fields(env: KubeEnv) -> None:
    f = env.write("lenient.yaml", APP.replace("initContainers", "initContianers"))
    rc, out, err = env.play(str(f), "--lenient", "--wait", "--timeout", "2m")
    assert rc == 0, err
    assert (f"podkit: warning: {f}:15:7: spec.template.spec.initContianers: unknown field, did "
            "you mean 'initContainers'?") in err.splitlines()
    [pod] = out["pods"]
    assert [c["name"] for c in pod["containers"]] == ["web"]  # no init container: ignored
    assert pod["status"] == "Ready"
    res = env.podkit("kube", "down", str(f))  # down reads the same file without a fuss
    assert res.returncode == 0 and res.stdout.startswith("pod ci/web-pod: removed"), res.stderr


def test_a_missing_file_is_not_found(env: KubeEnv) -> None:
    missing = env.base / "missing.yaml"
    app = env.write("app.yaml", APP)
    for args in (["play", str(missing)], ["play", str(app), "--configmap", str(missing)],
                 ["down", str(missing)]):
        res = env.podkit("kube", *args)
        assert res.returncode == 3, (args, res.stderr)
        assert res.stderr == (f"podkit: cannot read manifest '{missing}': No such file or "
                              "directory\n")
    _nothing_made(env)


def test_json_has_null_for_what_does_not_apply(env: KubeEnv) -> None:
    f = env.write("host.yaml", textwrap.dedent(f"""\
        apiVersion: v1
        kind: Pod
        metadata: {{name: host, namespace: ci}}
        spec:
          hostNetwork: true
          terminationGracePeriodSeconds: 1
          containers:
          - {{name: app, image: {BUSYBOX_IMAGE}, command: [sleep, "3600"]}}
        """))
    rc, out, err = env.play(str(f))
    assert rc == 0, err
    [pod] = out["pods"]
    assert (pod["ip"], pod["reason"], pod["status"]) == (None, None, "Running")
    inspect = json.loads(_pod_cmd(env, "inspect", "host", "-o", "json").stdout)
    assert inspect["ip"] is None  # the same as pod inspect says
    res = env.podkit("kube", "down", str(f))
    assert res.returncode == 0, res.stderr


def test_exec_timeout_names_the_command(env: KubeEnv) -> None:
    f = env.write("app.yaml", APP)
    rc, _, err = env.play(str(f))
    assert rc == 0, err
    res = _pod_cmd(env, "exec", "web-pod", "web", "--timeout", "1s", "--",
                   "sh", "-c", "sleep 30")
    assert res.returncode == 6, res.stderr
    assert res.stderr == ("podkit: exec in pod 'web-pod' container 'web': the command did not "
                          "finish within --timeout 1s and was killed: sh -c 'sleep 30'\n")
    res = _pod_cmd(env, "exec", "web-pod", "web", "--timeout", "30s", "--", "sh", "-c", "exit 4")
    assert res.returncode == 4, res.stderr  # in time: the command's own exit code
    assert env.podkit("kube", "down", str(f)).returncode == 0


def test_the_oom_score_clamp_is_a_note_for_debug_only(env: KubeEnv) -> None:
    f = env.write("app.yaml", APP)
    rc, _, err = env.play(str(f))
    assert rc == 0, err
    assert "OOM score" not in err
    res = env.podkit("--debug", "kube", "play", str(f), "--replace")
    assert res.returncode == 0, res.stderr
    floor = int(Path("/proc/self/oom_score_adj").read_text())  # the CLI inherits this score
    note = (f"pause containers get OOM score {floor} instead of {SANDBOX_OOM_SCORE_ADJ}: this "
            f"process (score {floor}) cannot lower scores without CAP_SYS_RESOURCE")
    assert (note in res.stderr) == (floor > SANDBOX_OOM_SCORE_ADJ), res.stderr
    assert env.podkit("kube", "down", str(f)).returncode == 0
