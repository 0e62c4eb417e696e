#!/bin/sh
# A CI job that tests an app with podkit alone (run as root; docs/ci/README.md): build an
# image, `kube play --wait` its manifest, check it with `pod exec`, `-o json` and `logs`,
# `kube down`, and check the exit codes of the error paths. Everything the job makes lives in
# its own directory (PODKIT_ROOT), so jobs side by side on one runner do not meet.
set -eu
cd "$(dirname "$0")"
WORK=$(mktemp -d "${RUNNER_TEMP:-/tmp}/podkit-ci.XXXXXX")
export PODKIT_ROOT="$WORK/podkit"
LOGS="--log-root $WORK/logs"
PAUSE="--pause-image localhost/ci/busybox:1"
POD=web-pod
ARCH=$(uname -m | sed "s/x86_64/amd64/; s/aarch64/arm64/")
failed() { echo "::error::$*"; exit 1; }
cleanup() { podkit kube down app.yaml $LOGS >/dev/null || true; }
trap cleanup EXIT

echo "::group::image: busybox as localhost/ci/busybox:1"
mkdir -p "$WORK/rootfs/bin" "$WORK/rootfs/etc" "$WORK/image"
cp /bin/busybox "$WORK/rootfs/bin/"
for applet in $(/bin/busybox --list); do
    [ -e "$WORK/rootfs/bin/$applet" ] || ln -s busybox "$WORK/rootfs/bin/$applet"
done
echo 'root:x:0:0:root:/root:/bin/sh' > "$WORK/rootfs/etc/passwd"
echo 'root:x:0:' > "$WORK/rootfs/etc/group"
tar -C "$WORK/rootfs" -cf "$WORK/image/layer.tar" .
LAYER=$(sha256sum "$WORK/image/layer.tar" | cut -d' ' -f1)
cat > "$WORK/image/config.json" <<JSON
{"architecture": "$ARCH", "os": "linux",
 "config": {"Env": ["PATH=/bin"], "Cmd": ["sleep", "2147483647"]},
 "rootfs": {"type": "layers", "diff_ids": ["sha256:$LAYER"]}}
JSON
echo '[{"Config": "config.json", "RepoTags": ["localhost/ci/busybox:1"],
        "Layers": ["layer.tar"]}]' > "$WORK/image/manifest.json"
tar -C "$WORK/image" -cf "$WORK/image.tar" manifest.json config.json layer.tar
podkit image import -q "$WORK/image.tar"
echo "::endgroup::"

echo "::group::a typo is refused before anything runs (exit code 2)"
sed 's/readinessProbe/readinesProbe/' app.yaml > "$WORK/typo.yaml"
rc=0; podkit kube play "$WORK/typo.yaml" $LOGS $PAUSE 2> "$WORK/typo.err" || rc=$?
cat "$WORK/typo.err"
[ "$rc" = 2 ] || failed "kube play of a typo: exit code $rc, want 2"
grep -q "did you mean 'readinessProbe'" "$WORK/typo.err" || failed "no did-you-mean"
echo "::endgroup::"

echo "::group::play, and wait until the readiness probe passes"
podkit kube play app.yaml --wait --timeout 2m $LOGS $PAUSE -o json > "$WORK/play.json"
python3 - "$WORK/play.json" <<'PY'
import json, sys
[pod] = json.load(open(sys.argv[1]))["pods"]
states = {c["name"]: c["state"] for c in pod["containers"]}
assert pod["status"] == "Ready" and pod["reason"] is None, pod
assert states == {"render": "exited", "web": "running"}, states
print(f"{pod['namespace']}/{pod['name']} is {pod['status']} at {pod['ip']}")
PY
podkit pod wait $POD --for ready --timeout 30s
echo "::endgroup::"

echo "::group::test it"
PAGE=$(podkit pod exec $POD web --timeout 30s -- wget -q -O - http://127.0.0.1:8080/)
[ "$PAGE" = "<h1>hello from the ConfigMap</h1>" ] || failed "the page is: $PAGE"
IP=$(podkit pod inspect $POD -o json | python3 -c 'import json, sys; print(json.load(sys.stdin)["ip"])')
podkit pod exec $POD web -- wget -q -O /dev/null "http://$IP:8080/index.html"
rc=0; podkit pod exec $POD web -- test -e /www/missing || rc=$?
[ "$rc" = 1 ] || failed "pod exec of a failing command: exit code $rc, want 1"
podkit pod logs $POD web --stream stdout | grep -q "serving: hello from the ConfigMap" || failed "no log line"
echo "::endgroup::"

echo "::group::down: nothing is left"
podkit kube down app.yaml $LOGS
rc=0; podkit pod inspect $POD 2>/dev/null || rc=$?
[ "$rc" = 3 ] || failed "pod inspect after kube down: exit code $rc, want 3 (not found)"
trap - EXIT
rm -rf "$WORK"
echo "::endgroup::"
echo "ci: passed"
