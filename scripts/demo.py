#!/usr/bin/env python3
"""podkit demo: build an OCI spec with podkit and run it with runc on a busybox rootfs.

Run by ``make demo`` (as root, inside ``scripts/isolated``). Everything it creates lives in one
temp dir and is removed at the end, even on failure: the bundle, runc's state and the container.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from podkit import oci

BUSYBOX = Path("/bin/busybox")
ENV = {"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}
SCRIPT = """
echo "hostname : $(hostname)"
echo "user     : $(id)"
echo "greeting : $GREETING"
echo "kernel   : $(uname -sr)"
echo "caps     : $(grep CapEff /proc/self/status | cut -f2)"
touch /tmp/probe 2>/dev/null && echo "rootfs   : writable" || echo "rootfs   : read-only"
echo "scratch  : $(echo hi > /scratch/f && cat /scratch/f) (tmpfs)"
"""


def make_rootfs(dest: Path) -> Path:
    """A tiny rootfs: static busybox, a symlink per applet, and two users."""
    for d in ("bin", "etc", "proc", "sys", "dev", "tmp", "scratch"):
        (dest / d).mkdir(parents=True)
    shutil.copy2(BUSYBOX, dest / "bin" / "busybox")
    applets = subprocess.run([str(BUSYBOX), "--list"], capture_output=True, text=True,
                             check=True, timeout=30).stdout.split()
    for applet in applets:
        if applet != "busybox":
            (dest / "bin" / applet).symlink_to("busybox")
    (dest / "etc" / "passwd").write_text("root:x:0:0::/:/bin/sh\ndemo:x:1000:1000::/:/bin/sh\n")
    (dest / "etc" / "group").write_text("root:x:0:\ndemo:x:1000:\nvideo:x:44:demo\n")
    (dest / "scratch").chmod(0o1777)  # runc gives a tmpfs the mode of its mountpoint
    return dest


def build_spec(rootfs: Path, cgroup: str) -> oci.Spec:
    """containerd's default Unix spec, then one option per concept, read top to bottom."""
    return oci.generate(
        oci.default_spec(),
        oci.with_rootfs_path(str(rootfs)),
        oci.with_rootfs_readonly(),
        oci.with_process_args("sh", "-c", SCRIPT),
        oci.with_default_path_env(),
        oci.with_env({"GREETING": "hello from a podkit spec"}),
        oci.with_hostname("podkit-demo"),
        oci.with_user("demo"),  # looked up in the rootfs' /etc/passwd
        oci.with_additional_gids("demo"),  # groups listing demo in /etc/group
        oci.with_capabilities(["CAP_NET_BIND_SERVICE"]),
        oci.with_ambient_capabilities(["CAP_NET_BIND_SERVICE"]),
        oci.with_mounts([oci.Mount(destination="/scratch", type="tmpfs", source="tmpfs",
                                   options=["nosuid", "nodev", "size=1m"])]),
        oci.with_memory_limit(64 << 20),
        oci.with_pids_limit(32),
        oci.with_cgroup(cgroup),
        oci.without_run_mount(),
        oci.with_minimum_oci_version(),
    )


def main() -> int:
    runc = shutil.which("runc", path=ENV["PATH"])
    if os.geteuid() != 0 or runc is None or not BUSYBOX.exists():
        print("demo needs root, runc and /bin/busybox (run `make demo`)", file=sys.stderr)
        return 1
    cid = f"pk-demo-{os.getpid()}"
    work = Path(tempfile.mkdtemp(prefix="podkit-demo-"))
    state = work / "runc-state"
    try:
        rootfs = make_rootfs(work / "rootfs")
        spec = build_spec(rootfs, f"/{cid}")
        problems = oci.validate(spec)
        if problems:
            print("podkit found problems in the spec:", *problems, sep="\n  ", file=sys.stderr)
            return 1
        spec.dump(work / "config.json")
        user = spec.process.user if spec.process else None
        assert user is not None
        print(f"podkit: default_spec() + options -> {work / 'config.json'}")
        print(f"  ociVersion {spec.oci_version} (oldest release with every field used)")
        print(f"  user 'demo' -> uid {user.uid} gid {user.gid} groups {user.additional_gids}"
              " (from the rootfs' /etc/passwd and /etc/group)")
        print(f"  mounts {' '.join(m.destination for m in spec.mounts or [])}; rootfs read-only")
        print(f"  cgroup /{cid}: memory 64 MiB, 32 pids; oci.validate(): no problems")
        print(f"running: runc run --bundle {work} {cid}\n")
        result = subprocess.run([runc, "--root", str(state), "run", "--bundle", str(work), cid],
                                stdin=subprocess.DEVNULL, capture_output=True, text=True,
                                timeout=60, env=ENV)
        print(result.stdout.strip())
        if result.returncode != 0:
            print(f"\nrunc exited {result.returncode}: {result.stderr.strip()}", file=sys.stderr)
        return result.returncode
    finally:
        subprocess.run([runc, "--root", str(state), "delete", "-f", cid],
                       capture_output=True, timeout=30, env=ENV)
        shutil.rmtree(work, ignore_errors=True)
        print(f"\ncleaned up: container {cid}, {work}")


if __name__ == "__main__":
    sys.exit(main())
