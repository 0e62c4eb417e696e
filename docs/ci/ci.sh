#!/bin/sh
# A CI job that tests an app with podkit alone (run as root; docs/ci/README.md): build an
# image, `kube play --wait` its manifest, check it with `pod exec`, `-o json` and `logs`,
# `kube down`, and check the exit codes of the error paths. Everything the job makes lives in
# its own directory (PODKIT_ROOT), so jobs side by side on one runner do not meet.
set -eu
cd "$(dirname "$0")"
WORK=$(mktemp -d "${RUNNER_TEMP:-/tmp}/podkit-ci.XXXXXX")
export PODKIT_ROOT="$WORK/podkit"
POD=web-pod
failed() { echo "::error::$*"; exit 1; }
cleanup() { podkit kube down app.yaml >/dev/null || true; }
trap cleanup EXIT

echo "::group::image: busybox as localhost/ci/busybox:1"
mkdir -p "$WORK/rootfs/bin" "$WORK/rootfs/etc"
cp /bin/busybox "$WORK/rootfs/bin/"
chroot "$WORK/rootfs" /bin/busybox --install -s /bin
echo 'root:x:0:0:root:/root:/bin/sh' > "$WORK/rootfs/etc/passwd"
echo 'root:x:0:' > "$WORK/rootfs/etc/group"
podkit image build --from-dir "$WORK/rootfs" localhost/ci/busybox:1 --env PATH=/bin \
    --cmd 'sleep 2147483647'
echo "::endgroup::"

echo "::group::a typo is refused before anything runs (exit code 2)"
sed 's/readinessProbe/readinesProbe/' app.yaml > "$WORK/typo.yaml"
rc=0; podkit kube play "$WORK/typo.yaml" 2> "$WORK/typo.err" || rc=$?
cat "$WORK/typo.err"
[ "$rc" = 2 ] || failed "kube play of a typo: exit code $rc, want 2"
grep -q "did you mean 'readinessProbe'" "$WORK/typo.err" || failed "no did-you-mean"
echo "::endgroup::"

echo "::group::play, and wait until the readiness probe passes"
podkit kube play app.yaml --wait --timeout 2m -o json > "$WORK/play.json"
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
podkit kube down app.yaml
rc=0; podkit pod inspect $POD 2>/dev/null || rc=$?
[ "$rc" = 3 ] || failed "pod inspect after kube down: exit code $rc, want 3 (not found)"
trap - EXIT
rm -rf "$WORK"
echo "::endgroup::"
echo "ci: passed"
