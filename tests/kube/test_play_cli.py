"""``podkit kube play|down`` end to end through the real CLI: real runc, conmon, CNI bridge and
netns, busybox images in a store. A web server with a readiness probe and a client Job, init
containers filling an emptyDir, configMap/secret volumes and env, a Deployment template, QoS in
the cgroup and oom_score_adj, restarts with back-off, existence, failures and undo."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import attrs
import pytest

import _leaks
from image.registries import push_image, registry  # noqa: F401 - registry: a fixture
from podkit.image import ImageStore, import_image
from podkit.sandbox import BUILTIN_PAUSE_IMAGE
from support import require_binary, require_isolated

from .play_support import (
    BUSYBOX_IMAGE,
    KubeEnv,
    busybox_image,
    busybox_layout,
    cgroup_limits,
)

pytestmark = pytest.mark.integration

WEB = f"""\
apiVersion: v1
kind: Pod
metadata: {{name: web, namespace: kp, labels: {{app: web}}}}
spec:
  terminationGracePeriodSeconds: 1
  volumes: [{{name: www, emptyDir: {{}}}}]
  initContainers:
  - name: fetch
    image: {BUSYBOX_IMAGE}
    command: [sh, -c, 'echo "hello from the init container" > /www/index.html']
    volumeMounts: [{{name: www, mountPath: /www}}]
  - name: stamp
    image: {BUSYBOX_IMAGE}
    command: [sh, -c, 'echo second >> /www/index.html']
    volumeMounts: [{{name: www, mountPath: /www}}]
  containers:
  - name: httpd
    image: {BUSYBOX_IMAGE}
    command: [httpd, -f, -p, "80", -h, /www]
    ports: [{{containerPort: 80, hostPort: 18480}}]
    volumeMounts: [{{name: www, mountPath: /www, readOnly: true}}]
    readinessProbe:
      httpGet: {{path: /index.html, port: 80}}
      periodSeconds: 1
  - name: sidecar
    image: {BUSYBOX_IMAGE}
    command: [sh, -c, 'trap "exit 0" TERM; while true; do sleep 1; done']
"""

CLIENT = f"""\
apiVersion: batch/v1
kind: Job
metadata: {{name: client, namespace: kp}}
spec:
  template:
    spec:
      restartPolicy: Never
      terminationGracePeriodSeconds: 1
      containers:
      - name: wget
        image: {BUSYBOX_IMAGE}
        command: [wget, -q, -O, -, "http://$(WEB_IP)/index.html"]
        env: [{{name: WEB_IP, value: "{{ip}}"}}]
"""


@pytest.fixture(scope="module")
def layout(busybox_rootfs: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The busybox image as an OCI layout, and the CLI's bridge ``pk0`` held for the module
    (the bridge plugin never deletes it; it lives in scripts/isolated's namespace)."""
    require_isolated()
    for b in ("runc", "conmon"):
        require_binary(b)
    path = busybox_layout(busybox_rootfs, tmp_path_factory.mktemp("kube-image"))
    subprocess.run(["ip", "link", "add", "pk0", "type", "bridge"], check=False,
                   capture_output=True)
    try:
        yield path
    finally:
        subprocess.run(["ip", "link", "del", "pk0"], check=False, capture_output=True)


@pytest.fixture
def env(layout: Path, busybox_rootfs: Path, tmp_path: Path) -> Iterator[KubeEnv]:
    """A test's dirs with the image in its store; no leaks after the test."""
    import_image(ImageStore(tmp_path / "root"), layout, BUSYBOX_IMAGE)
    for state in (tmp_path / "state", tmp_path / "state" / "pods"):
        _leaks.register_runtime_root(state / "runc")
        _leaks.register_ipam_dir(state / "ipam")
    e = KubeEnv(base=tmp_path, rootfs=busybox_rootfs)
    before = _leaks.snapshot()
    try:
        yield e
    finally:  # a failed test's pods go too (kube down is idempotent)
        for f in tmp_path.glob("*.yaml"):
            e.podkit("kube", "down", str(f), *[a for s in tmp_path.glob("secret*.yaml")
                                               for a in ("--secret", str(s))])
    assert e.leaked(before) == []


def _fs_types(path: Path) -> list[str]:
    """The filesystem types mounted at ``path`` in this mount namespace."""
    mounts = [line.split() for line in Path("/proc/self/mounts").read_text().splitlines()]
    return [m[2] for m in mounts if m[1] == str(path)]


def _mount_points() -> list[str]:
    """Every mount point in this mount namespace."""
    return [line.split()[1] for line in Path("/proc/self/mounts").read_text().splitlines()]


def _pod(out: dict[str, object], name: str) -> dict[str, object]:
    pods = [p for p in out["pods"] if p["name"] == name]  # type: ignore[attr-defined]
    assert len(pods) == 1, out
    return pods[0]  # type: ignore[no-any-return]


def _down(env: KubeEnv, *args: Path | str) -> list[str]:
    res = env.podkit("kube", "down", *map(str, args))
    assert res.returncode == 0, res.stderr
    return res.stdout.splitlines()


def test_web_server_and_client_job(env: KubeEnv) -> None:
    web = env.write("web.yaml", WEB)
    rc, out, err = env.play(str(web), "--wait", "--timeout", "2m")
    assert rc == 0, err
    pod = _pod(out, "web")
    assert pod["status"] == "Ready" and pod["ip"] and pod["namespace"] == "kp"
    assert pod["host_ports"] == [{"host_port": 18480, "container_port": 80, "protocol": "TCP"}]
    ctrs = {c["name"]: c for c in pod["containers"]}  # type: ignore[attr-defined]
    assert [(c["name"], c["init"], c["state"], c["exit_code"]) for c in ctrs.values()] == [
        ("fetch", True, "exited", 0), ("stamp", True, "exited", 0),
        ("httpd", False, "running", None), ("sidecar", False, "running", None)]

    client = env.write("client.yaml", CLIENT.replace("{ip}", str(pod["ip"])))
    rc, out, err = env.play(str(client), "--wait", "--timeout", "2m")
    assert rc == 0, err
    job = _pod(out, "client-pod")  # a workload's pod: <name>-pod, as podman names it
    assert job["status"] == "Succeeded"
    assert env.pod_log("kp", "client-pod", str(job["uid"]), "wget") == \
        "hello from the init container\nsecond\n"

    # a second play says it exists (exit code 4) and changes nothing; --replace recreates
    again = env.podkit("kube", "play", str(web))
    assert again.returncode == 4 and "pod kp/web" in again.stderr and "exists" in again.stderr
    rc, out2, err = env.play(str(web), "--replace", "--wait")
    assert rc == 0, err
    assert _pod(out2, "web")["sandbox_id"] != pod["sandbox_id"]

    assert env.volumes() != []
    notes = _down(env, web, client)
    assert notes[0].startswith("pod kp/web: removed sandbox ") and "1 volume" in notes[0]
    assert notes[1].startswith("pod kp/client-pod: removed sandbox ")
    assert env.volumes() == []  # no volume dir, no pod dir
    assert _down(env, web) == ["pod kp/web: not running (nothing to remove)"]


TWO = f"""\
apiVersion: v1
kind: Pod
metadata: {{name: two, namespace: kp}}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: web
    image: {BUSYBOX_IMAGE}
    command: [httpd, -f, -p, "8080", -h, /etc]
  - name: client
    image: {BUSYBOX_IMAGE}
    command: [sh, -c, 'trap "exit 0" TERM; while true; do sleep 1; done']
    readinessProbe: {{exec: {{command: [wget, -q, -O, /dev/null, "http://127.0.0.1:8080/hostname"]}},
                     periodSeconds: 1}}
"""


def test_no_pause_flag_runs_the_builtin_pause(env: KubeEnv) -> None:
    """Without --pause-image or --pause-rootfs, play makes podkit's own pause image in the
    store (catatonit) once and runs a two-container pod on it; a second play reuses it."""
    require_binary("catatonit")
    e = attrs.evolve(env, builtin_pause=True)
    two = e.write("two.yaml", TWO)
    rc, out, err = e.play(str(two), "--wait", "--timeout", "2m")
    assert rc == 0, err
    pod = _pod(out, "two")
    assert pod["status"] == "Ready"
    assert [(c["name"], c["state"]) for c in pod["containers"]] == [  # type: ignore[attr-defined]
        ("web", "running"), ("client", "running")]
    store = ImageStore(e.base / "root")
    assert BUILTIN_PAUSE_IMAGE in [i.name for i in store.list()]
    made = store.get(BUILTIN_PAUSE_IMAGE).created
    inspect = subprocess.run(
        [str(Path(sys.executable).parent / "podkit"), "pod", "inspect", "two", "-o", "json",
         "--root", str(e.base / "root"), "--state", str(e.base / "state")],
        capture_output=True, text=True, check=True)
    pid = json.loads(inspect.stdout)["pid"]
    assert Path(f"/proc/{pid}/comm").read_text().strip() == "catatonit"
    rc, out, err = e.play(str(two), "--replace", "--wait", "--timeout", "2m")
    assert rc == 0, err
    assert store.get(BUILTIN_PAUSE_IMAGE).created == made  # made once, then reused
    assert _down(e, two)[0].startswith("pod kp/two: removed sandbox ")


def test_failing_init_container_leaves_the_pod_unless_rm_on_failure(env: KubeEnv) -> None:
    f = env.write("fail.yaml", textwrap.dedent(f"""\
        apiVersion: v1
        kind: Pod
        metadata: {{name: failing, namespace: kp}}
        spec:
          restartPolicy: Never
          terminationGracePeriodSeconds: 1
          initContainers:
          - {{name: setup, image: {BUSYBOX_IMAGE}, command: [sh, -c, "echo no; exit 3"]}}
          containers:
          - {{name: app, image: {BUSYBOX_IMAGE}, command: [sleep, "1000"]}}
        """))
    rc, out, err = env.play(str(f), "--wait")
    assert rc == 1
    assert "pod kp/failing init container 'setup': exited with code 3" in err
    pod = _pod(out, "failing")  # what is left is printed
    assert pod["status"] == "Failed" and pod["sandbox_id"]
    assert _down(env, f)[0].startswith("pod kp/failing: removed sandbox")

    rc, out, err = env.play(str(f), "--wait", "--rm-on-failure")
    assert rc == 1 and "exited with code 3" in err and out == {}
    assert _down(env, f) == ["pod kp/failing: not running (nothing to remove)"]
    assert env.volumes() == []


def test_bad_host_path_or_image_leaves_nothing(env: KubeEnv) -> None:
    afile = env.base / "a-file"
    afile.write_text("x")
    f = env.write("bad.yaml", textwrap.dedent(f"""\
        apiVersion: v1
        kind: Pod
        metadata: {{name: bad, namespace: kp}}
        spec:
          volumes:
          - {{name: scratch, emptyDir: {{}}}}
          - {{name: host, hostPath: {{path: {afile}, type: Directory}}}}
          containers:
          - name: app
            image: {BUSYBOX_IMAGE}
            volumeMounts: [{{name: host, mountPath: /h}}, {{name: scratch, mountPath: /s}}]
        """))
    res = env.podkit("kube", "play", str(f))
    assert res.returncode == 2, res.stderr
    assert f"volume 'host': hostPath {afile} (type Directory): not a directory" in res.stderr
    assert env.volumes() == [] and afile.read_text() == "x"

    f.write_text(f.read_text().replace("type: Directory", "type: File").replace(
        f"image: {BUSYBOX_IMAGE}", "image: localhost/kube-play/missing:1\n"
        "    imagePullPolicy: Never"))
    res = env.podkit("kube", "play", str(f))
    assert res.returncode == 3, res.stderr
    assert "image 'localhost/kube-play/missing:1': not in the image store" in res.stderr
    assert "ErrImageNeverPull" in res.stderr
    assert _down(env, f) == ["pod kp/bad: not running (nothing to remove)"]
    assert env.volumes() == []


def test_configmap_secret_deployment_and_hooks(env: KubeEnv) -> None:
    hostdir = env.base / "host"
    hostdir.mkdir()
    (hostdir / "keep").write_text("mine")
    secret = env.write("secret.yaml", textwrap.dedent("""\
        apiVersion: v1
        kind: Secret
        metadata: {name: creds, namespace: kp}
        stringData: {token: s3cret}
        """))
    f = env.write("deploy.yaml", textwrap.dedent(f"""\
        apiVersion: v1
        kind: ConfigMap
        metadata: {{name: settings, namespace: kp}}
        data: {{greeting: "hi there", mode: fast}}
        ---
        apiVersion: apps/v1
        kind: Deployment
        metadata: {{name: app, namespace: kp}}
        spec:
          replicas: 1
          selector: {{matchLabels: {{app: app}}}}
          template:
            metadata: {{labels: {{app: app}}}}
            spec:
              terminationGracePeriodSeconds: 2
              volumes:
              - {{name: cfg, configMap: {{name: settings}}}}
              - {{name: sec, secret: {{secretName: creds, defaultMode: 0400}}}}
              - {{name: host, hostPath: {{path: {hostdir}, type: Directory}}}}
              containers:
              - name: app
                image: {BUSYBOX_IMAGE}
                command: [sh, -c]
                args: ['cat /etc/cfg/greeting; echo; cat /etc/sec/token; echo;
                        echo "$MODE $TOKEN";
                        awk "\\$2 == \\"/etc/sec\\" {{print \\$3}}" /proc/mounts;
                        trap "exit 0" TERM; while true; do sleep 1; done']
                env:
                - {{name: TOKEN, valueFrom: {{secretKeyRef: {{name: creds, key: token}}}}}}
                envFrom: [{{configMapRef: {{name: settings}}, prefix: ""}}]
                volumeMounts:
                - {{name: cfg, mountPath: /etc/cfg}}
                - {{name: sec, mountPath: /etc/sec}}
                - {{name: host, mountPath: /host}}
                readinessProbe:
                  exec: {{command: [test, -f, /tmp/started]}}
                  periodSeconds: 1
                lifecycle:
                  postStart: {{exec: {{command: [touch, /tmp/started]}}}}
                  preStop: {{exec: {{command: [sh, -c, "echo bye > /host/prestop"]}}}}
        """).replace("$MODE", "$mode"))
    rc, out, err = env.play(str(f), "--secret", str(secret), "--wait", "--timeout", "2m")
    assert rc == 0, err
    pod = _pod(out, "app-pod")
    assert pod["status"] == "Ready"
    log = env.pod_log("kp", str(pod["name"]), str(pod["uid"]), "app")
    # the secret volume is a tmpfs on the host, and so in the container, as the kubelet's
    assert log.splitlines()[:4] == ["hi there", "s3cret", "fast s3cret", "tmpfs"]
    vol = next(p for p in (env.base / "root" / "kube").rglob("volumes/sec"))
    assert _fs_types(vol) == ["tmpfs"]
    data = vol / "..data"
    assert data.is_symlink() and os.readlink(vol / "token") == "..data/token"
    assert stat.S_IMODE((vol / "token").stat().st_mode) == 0o400
    _down(env, f, "--secret", str(secret))
    assert (hostdir / "prestop").read_text() == "bye\n"  # the preStop hook ran
    assert sorted(p.name for p in hostdir.iterdir()) == ["keep", "prestop"]
    assert env.volumes() == [] and _fs_types(vol) == []


def test_qos_classes_in_the_cgroup_and_oom_score(env: KubeEnv) -> None:
    from podkit._cli.podctx import manager
    from podkit.cli import build_parser

    def pod(name: str, resources: dict[str, object]) -> str:
        return textwrap.dedent(f"""\
            apiVersion: v1
            kind: Pod
            metadata: {{name: {name}, namespace: qos}}
            spec:
              terminationGracePeriodSeconds: 1
              containers:
              - name: app
                image: {BUSYBOX_IMAGE}
                command: [sleep, "1000"]
                resources: {json.dumps(resources)}
            """)

    mi = 1024 * 1024
    f = env.write("qos.yaml", "---\n".join([
        pod("guaranteed", {"requests": {"cpu": "250m", "memory": "64Mi"},
                           "limits": {"cpu": "250m", "memory": "64Mi"}}),
        pod("burstable", {"requests": {"cpu": "100m", "memory": "32Mi"},
                          "limits": {"memory": "128Mi"}}),
        pod("besteffort", {})]))
    rc, out, err = env.play(str(f), "--wait")
    assert rc == 0, err
    args = build_parser().parse_args(["kube", "down", str(f), *env.flags])
    mem_total = next(int(line.split()[1]) * 1024 for line in
                     Path("/proc/meminfo").read_text().splitlines()
                     if line.startswith("MemTotal:"))
    burst = 1000 - (1000 * 32 * mi) // mem_total
    burst = 3 if burst < 3 else 999 if burst == 1000 else burst
    want = {"guaranteed": (256, 25000, 64 * mi, -997), "burstable": (102, -1, 128 * mi, burst),
            "besteffort": (2, -1, 0, 1000)}
    with manager(args) as mgr:
        floor = mgr.oom_score_floor  # the manager's own score: the host allows no lower
        for p in out["pods"]:  # type: ignore[attr-defined]
            [c] = p["containers"]
            pid = mgr.container_status(c["id"]).pid
            shares, quota, memory, score = want[p["name"]]
            got = cgroup_limits(pid)
            if "shares" in got:
                assert (got["shares"], got["quota"], got["period"]) == (shares, quota, 100000)
            else:  # runc's shares -> weight conversion
                assert got["weight"] == 1 + ((shares - 2) * 9999) // 262142
            assert got["memory"] == memory, p["name"]
            assert int(Path(f"/proc/{pid}/oom_score_adj").read_text()) == max(score, floor)
    _down(env, f)


def test_restart_with_back_off_until_ready(env: KubeEnv) -> None:
    f = env.write("crash.yaml", textwrap.dedent(f"""\
        apiVersion: v1
        kind: Pod
        metadata: {{name: crashy, namespace: kp}}
        spec:
          terminationGracePeriodSeconds: 1
          volumes: [{{name: data, emptyDir: {{medium: Memory, sizeLimit: 1Mi}}}}]
          containers:
          - name: app
            image: {BUSYBOX_IMAGE}
            command: [sh, -c, 'if [ ! -f /data/once ]; then touch /data/once; echo crash;
                      exit 1; fi; echo up; touch /tmp/up; trap "exit 0" TERM;
                      while true; do sleep 1; done']
            volumeMounts: [{{name: data, mountPath: /data}}]
            readinessProbe:  # only the second attempt gets ready (each has its own /tmp)
              exec: {{command: [test, -f, /tmp/up]}}
              periodSeconds: 1
        """))
    rc, out, err = env.play(str(f), "--wait", "--timeout", "2m")
    assert rc == 0, err
    pod = _pod(out, "crashy")
    [app] = pod["containers"]  # type: ignore[misc]
    assert (app["restart_count"], app["state"], pod["status"]) == (1, "running", "Ready")
    assert env.pod_log("kp", "crashy", str(pod["uid"]), "app", 0) == "crash\n"
    assert env.pod_log("kp", "crashy", str(pod["uid"]), "app", 1) == "up\n"
    _down(env, f)
    assert env.volumes() == []


def test_probe_that_never_passes_times_out(env: KubeEnv) -> None:
    f = env.write("never.yaml", textwrap.dedent(f"""\
        apiVersion: v1
        kind: Pod
        metadata: {{name: notready, namespace: kp}}
        spec:
          terminationGracePeriodSeconds: 1
          containers:
          - name: app
            image: {BUSYBOX_IMAGE}
            command: [sh, -c, 'trap "exit 0" TERM; while true; do sleep 1; done']
            readinessProbe:
              exec: {{command: [sh, -c, "echo not yet; exit 1"]}}
              periodSeconds: 1
        """))
    res = env.podkit("kube", "play", str(f), "--wait", "--timeout", "4s")
    assert res.returncode == 6, res.stderr
    assert ("timed out waiting for pod kp/notready to be Ready: container 'app': running, "
            "readiness probe Failure (exit code 1: not yet)") in res.stderr
    header, row = res.stdout.splitlines()  # the table of what is left
    assert header.split()[:3] == ["POD", "POD", "ID"] and row.split()[0] == "kp/notready"
    assert "app" in row.split() and "running" in row.split()
    env.ids.append(row.split()[1])
    res = env.podkit("kube", "play", str(f), "--wait", "--timeout", "3s", "--replace",
                     "--rm-on-failure")
    assert res.returncode == 6 and res.stdout == ""
    assert _down(env, f) == ["pod kp/notready: not running (nothing to remove)"]


def test_pull_policies_against_a_registry(env: KubeEnv, registry: str,  # noqa: F811
                                          busybox_rootfs: Path) -> None:
    from podkit.image import ImageStore

    push_image(env.base, busybox_image(busybox_rootfs, ("version", b"1\n")),
               f"{registry}/kube/busybox:1")
    push_image(env.base, busybox_image(busybox_rootfs, ("version", b"1\n")),
               f"{registry}/kube/busybox:latest")
    f = env.write("pull.yaml", textwrap.dedent(f"""\
        apiVersion: v1
        kind: Pod
        metadata: {{name: pulled, namespace: kp}}
        spec:
          restartPolicy: Never
          containers:
          - {{name: tagged, image: "{registry}/kube/busybox:1", command: [cat, /version]}}
          - {{name: latest, image: "{registry}/kube/busybox", command: [cat, /version]}}
        """))
    store = ImageStore(env.base / "root")
    rc, out, err = env.play(str(f), "--wait")  # IfNotPresent (a tag) and Always (:latest)
    assert rc == 0, err
    pod = _pod(out, "pulled")
    assert pod["status"] == "Succeeded"
    assert env.pod_log("kp", "pulled", str(pod["uid"]), "latest") == "1\n"
    tagged = store.get(f"{registry}/kube/busybox:1").target.digest

    push_image(env.base, busybox_image(busybox_rootfs, ("version", b"2\n")),
               f"{registry}/kube/busybox:latest")
    push_image(env.base, busybox_image(busybox_rootfs, ("version", b"2\n")),
               f"{registry}/kube/busybox:1")
    rc, out, err = env.play(str(f), "--wait", "--replace")
    assert rc == 0, err
    pod = _pod(out, "pulled")
    # the same pod's logs are kept across down and play: the new lines come last
    assert env.pod_log("kp", "pulled", str(pod["uid"]), "latest") == "1\n2\n"  # Always
    assert env.pod_log("kp", "pulled", str(pod["uid"]), "tagged") == "1\n1\n"  # present
    assert store.get(f"{registry}/kube/busybox:1").target.digest == tagged
    _down(env, f)


def test_refused_inputs_leave_nothing(env: KubeEnv) -> None:
    bad_yaml = env.write("broken.yaml", "apiVersion: v1\nkind: Pod\nmetadata: [name\n")
    res = env.podkit("kube", "play", str(bad_yaml))
    assert res.returncode == 2 and f"{bad_yaml}:4:1: invalid YAML" in res.stderr, res.stderr

    f = env.write("strict.yaml", textwrap.dedent(f"""\
        apiVersion: v1
        kind: Pod
        metadata: {{name: picky, namespace: kp}}
        spec:
          nodeSelector: {{disk: ssd}}
          serviceAccountName: robot
          securityContext: {{runAsNonRoot: true, fsGroup: 2000}}
          volumes: [{{name: data, emptyDir: {{}}}}]
          containers:
          - name: app
            image: {BUSYBOX_IMAGE}
            command: [sleep, "1000"]
            volumeMounts: [{{name: data, mountPath: /data}}]
        """))
    res = env.podkit("kube", "play", str(f), "--strict")
    assert res.returncode == 2 and "spec.nodeSelector" in res.stderr, res.stderr
    res = env.podkit("kube", "play", str(f))  # a warning; then kubelet's image-user check
    [warning] = [line for line in res.stderr.splitlines() if "(Pod/picky)" in line]
    assert warning.startswith(f"podkit: warning: {f}#0 (Pod/picky): ")
    assert "spec.nodeSelector" in warning and "spec.serviceAccountName" in warning
    assert res.returncode == 2 and ("container 'app': runAsNonRoot is set and the image will "
                                    "run as root (uid 0)") in res.stderr, res.stderr
    assert _down(env, f) == ["pod kp/picky: not running (nothing to remove)"]
    assert env.volumes() == []


@pytest.mark.parametrize("runtime", ["runc", "crun"])
def test_fs_group_downward_api_and_pod_ip(env: KubeEnv, runtime: str) -> None:
    require_binary(runtime)
    env = attrs.evolve(env, runtime=runtime)  # the same IDs list: the leak check sees them
    f = env.write("fsgroup.yaml", textwrap.dedent(f"""\
        apiVersion: v1
        kind: Pod
        metadata: {{name: grouped, namespace: kp, labels: {{tier: back}}}}
        spec:
          restartPolicy: Never
          securityContext: {{runAsUser: 1000, runAsGroup: 1000, fsGroup: 2000}}
          volumes:
          - {{name: data, emptyDir: {{}}}}
          - name: info
            downwardAPI:
              items: [{{path: labels, fieldRef: {{fieldPath: metadata.labels}}}}]
          containers:
          - name: app
            image: {BUSYBOX_IMAGE}
            command: [sh, -c, 'id -G; touch /data/mine && stat -c "%g %a" /data /data/mine;
                      cat /etc/info/labels; echo; echo "ip=$MY_IP"']
            env: [{{name: MY_IP, valueFrom: {{fieldRef: {{fieldPath: status.podIP}}}}}}]
            volumeMounts: [{{name: data, mountPath: /data}}, {{name: info, mountPath: /etc/info}}]
        """))
    rc, out, err = env.play(str(f), "--wait")
    assert rc == 0, err
    pod = _pod(out, "grouped")
    lines = env.pod_log("kp", "grouped", str(pod["uid"]), "app").splitlines()
    assert "2000" in lines[0].split()  # fsGroup is a supplementary group
    assert lines[1] == "2000 2777" and lines[2].startswith("2000 ")  # setgid dir, group kept
    assert lines[3] == 'tier="back"'
    assert lines[4] == f"ip={pod['ip']}" and pod["ip"]  # status.podIP, known after the sandbox
    _down(env, f)


def test_liveness_failure_kills_the_container(env: KubeEnv) -> None:
    f = env.write("live.yaml", textwrap.dedent(f"""\
        apiVersion: v1
        kind: Pod
        metadata: {{name: dead, namespace: kp}}
        spec:
          restartPolicy: Never
          terminationGracePeriodSeconds: 1
          containers:
          - name: app
            image: {BUSYBOX_IMAGE}
            command: [sh, -c, 'trap "exit 143" TERM; while true; do sleep 1; done']
            livenessProbe:
              tcpSocket: {{port: 8081}}
              periodSeconds: 1
              failureThreshold: 2
        """))
    rc, out, err = env.play(str(f), "--wait", "--timeout", "1m")
    assert rc == 1, err
    assert _pod(out, "dead")["status"] == "Failed"
    assert "pod kp/dead failed: container 'app': exited with code 143" in err
    assert "killed: liveness probe Failure (tcp " in err and ":8081: " in err
    _down(env, f)


def test_sigterm_removes_what_play_made(env: KubeEnv) -> None:
    """SIGTERM to ``kube play --wait`` (a cancelled CI job) cleans up as Ctrl-C does."""
    import signal
    import sys
    import time

    hostdir = env.base / "host"
    hostdir.mkdir()
    secret = env.write("secret-term.yaml", textwrap.dedent("""\
        apiVersion: v1
        kind: Secret
        metadata: {name: creds, namespace: kp}
        stringData: {token: s3cret}
        """))
    f = env.write("term.yaml", textwrap.dedent(f"""\
        apiVersion: v1
        kind: Pod
        metadata: {{name: term, namespace: kp}}
        spec:
          terminationGracePeriodSeconds: 1
          volumes:
          - {{name: host, hostPath: {{path: {hostdir}, type: Directory}}}}
          - {{name: sec, secret: {{secretName: creds}}}}
          - {{name: scratch, emptyDir: {{}}}}
          containers:
          - name: app
            image: {BUSYBOX_IMAGE}
            command: [sh, -c, 'touch /host/up; trap "exit 0" TERM; while true; do sleep 1; done']
            volumeMounts:
            - {{name: host, mountPath: /host}}
            - {{name: sec, mountPath: /sec}}
            - {{name: scratch, mountPath: /scratch}}
            readinessProbe: {{exec: {{command: ["false"]}}, periodSeconds: 1}}
        """))
    exe = Path(sys.executable).parent / "podkit"
    proc = subprocess.Popen(
        [str(exe), "kube", "play", str(f), "--secret", str(secret), "--wait", "--timeout", "10m",
         *env.flags], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        while not (hostdir / "up").exists() and proc.poll() is None:
            time.sleep(0.1)  # the pod is made, play waits for a readiness that never comes
        assert proc.poll() is None, proc.communicate()
        assert env.volumes() != []
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 130, err
    assert "interrupted" in err and out == ""
    assert env.volumes() == []  # the emptyDir and the secret's tmpfs are gone
    assert not any(m.startswith(str(env.base / "root")) for m in _mount_points())
    assert _down(env, f, "--secret", str(secret)) == [
        "pod kp/term: not running (nothing to remove)"]
    assert sorted(p.name for p in hostdir.iterdir()) == ["up"]  # a hostPath is never touched


def test_pod_ip_in_args_and_the_hosts_dns(env: KubeEnv) -> None:
    """``$(POD_IP)`` from ``status.podIP`` in command and args is the pod's IP; dnsPolicy
    Default with dnsConfig merges the host's resolv.conf (``--resolv-conf``), as the kubelet."""
    resolv = env.write("resolv.conf", "nameserver 192.0.2.1\nsearch host.test\n")
    f = env.write("ip.yaml", textwrap.dedent(f"""\
        apiVersion: v1
        kind: Pod
        metadata: {{name: ip, namespace: kp}}
        spec:
          restartPolicy: Never
          terminationGracePeriodSeconds: 1
          dnsPolicy: Default
          dnsConfig: {{nameservers: [192.0.2.53], searches: [pod.test]}}
          containers:
          - name: app
            image: {BUSYBOX_IMAGE}
            command: [sh, -c, 'echo "command $(POD_IP)"; echo "args $1"; cat /etc/resolv.conf',
                      sh]
            args: ["$(POD_IP)"]
            env: [{{name: POD_IP, valueFrom: {{fieldRef: {{fieldPath: status.podIP}}}}}}]
        """))
    rc, out, err = env.play(str(f), "--wait", "--resolv-conf", str(resolv))
    assert rc == 0, err
    pod = _pod(out, "ip")
    ip = str(pod["ip"])
    assert pod["status"] == "Succeeded" and ip
    log = env.pod_log("kp", "ip", str(pod["uid"]), "app").splitlines()
    assert log[:2] == [f"command {ip}", f"args {ip}"]
    lines = [line for line in log[2:] if line.split()[:1] in (["nameserver"], ["search"])]
    assert sorted(lines) == [
        "nameserver 192.0.2.1", "nameserver 192.0.2.53", "search host.test pod.test"]
    assert _down(env, f, "--resolv-conf", str(resolv))[0].startswith("pod kp/ip: removed")

    res = env.podkit("kube", "play", str(f), "--resolv-conf", str(env.base / "nope"))
    assert res.returncode == 2 and f"--resolv-conf {env.base / 'nope'}: no such file" in res.stderr
    assert env.volumes() == []


def test_pod_wait_for_ready_runs_the_readiness_probe(env: KubeEnv) -> None:
    """After ``kube play`` (no --wait) returned, ``pod wait --for ready`` in another process
    runs the pod's readiness probe: not ready until the probe passes."""
    import sys

    hostdir = env.base / "host"
    hostdir.mkdir()
    f = env.write("ready.yaml", textwrap.dedent(f"""\
        apiVersion: v1
        kind: Pod
        metadata: {{name: gate, namespace: kp}}
        spec:
          terminationGracePeriodSeconds: 1
          volumes: [{{name: host, hostPath: {{path: {hostdir}, type: Directory}}}}]
          initContainers:  # exited 0 once done: the pod is running and ready without it
          - {{name: setup, image: {BUSYBOX_IMAGE}, command: ["true"]}}
          containers:
          - name: app
            image: {BUSYBOX_IMAGE}
            command: [sh, -c, 'trap "exit 0" TERM; while true; do sleep 1; done']
            volumeMounts: [{{name: host, mountPath: /host}}]
            readinessProbe: {{exec: {{command: [test, -f, /host/ready]}}}}
        """))
    rc, out, err = env.play(str(f))
    assert rc == 0, err
    assert _pod(out, "gate")["status"] == "Running"

    def wait(*args: str) -> subprocess.CompletedProcess[str]:
        exe = Path(sys.executable).parent / "podkit"
        return subprocess.run(
            [str(exe), "pod", "wait", "gate", *args, "--root", str(env.base / "root"),
             "--state", str(env.base / "state"), "--runtime", env.runtime],
            capture_output=True, text=True, timeout=600, check=False)

    assert wait("--for", "running", "--timeout", "60s").returncode == 0
    res = wait("--for", "ready", "--timeout", "2s")
    assert res.returncode == 6, res.stderr  # the probe fails: not ready
    assert "pod 'gate': not ready after 2s; it is: pod READY, setup EXITED (exit 0), app " \
        "RUNNING (readiness probe: exit code 1)" in res.stderr  # why: the probe's result
    (hostdir / "ready").touch()
    res = wait("app", "--for", "ready", "--timeout", "60s")
    assert res.returncode == 0, res.stderr
    assert _down(env, f)[0].startswith("pod kp/gate: removed sandbox")
