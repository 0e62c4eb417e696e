"""The images both servers get (pause, busybox, a ~30 MB pull image) as OCI layouts and
archives, the local docker-registry the pulls use, and the pull floor (fetch + sha256)."""

from __future__ import annotations

import contextlib
import gzip
import hashlib
import io
import json
import os
import shutil
import signal
import socket
import subprocess
import tarfile
import time
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

BUSYBOX = "localhost/pk-vs/busybox:1"
PAUSE = "localhost/pk-vs/pause:1"
BIG = "bench/big:v1"  # pushed to the local registry


# ---- layouts -------------------------------------------------------------------------------

def _sha(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def busybox_layer() -> bytes:
    """A layer with static busybox, its applet links and /etc/passwd."""
    buf = io.BytesIO()
    applets = subprocess.run(["/bin/busybox", "--list"], check=True, capture_output=True,
                             text=True).stdout.split()
    with tarfile.open(fileobj=buf, mode="w") as tf:
        for d in ("bin", "etc", "proc", "sys", "dev", "tmp", "run", "root"):
            info = tarfile.TarInfo(d)
            info.type, info.mode = tarfile.DIRTYPE, 0o755
            tf.addfile(info)
        tf.add("/bin/busybox", "bin/busybox")
        for applet in applets:
            if applet != "busybox":
                info = tarfile.TarInfo(f"bin/{applet}")
                info.type, info.linkname = tarfile.SYMTYPE, "busybox"
                tf.addfile(info)
        for name, text in (("etc/passwd", "root:x:0:0:root:/root:/bin/sh\n"),
                           ("etc/group", "root:x:0:\n")):
            info = tarfile.TarInfo(name)
            info.size = len(text)
            tf.addfile(info, io.BytesIO(text.encode()))
    return buf.getvalue()


def filler_layer(seed: int, size: int) -> bytes:
    """A layer of one incompressible file of ``size`` bytes."""
    data = hashlib.shake_256(b"pk-vs-%d" % seed).digest(size)
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tf:
        info = tarfile.TarInfo(f"data/f{seed}")
        info.size = len(data)
        tf.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def write_layout(dest: Path, layers: Sequence[bytes], config: dict[str, Any], name: str,
                 gzip_layers: bool = False) -> Path:
    """An OCI layout of one image named ``name`` (containerd's and OCI's name annotations)."""
    blobs: dict[str, bytes] = {}
    descs = []
    for raw in layers:
        blob = gzip.compress(raw, compresslevel=1, mtime=0) if gzip_layers else raw
        blobs[_sha(blob)] = blob
        descs.append({"mediaType": "application/vnd.oci.image.layer.v1.tar"
                      + ("+gzip" if gzip_layers else ""), "digest": _sha(blob),
                      "size": len(blob)})
    cfg = json.dumps({"architecture": "amd64", "os": "linux", "config": config,
                      "rootfs": {"type": "layers",
                                 "diff_ids": [_sha(raw) for raw in layers]}}).encode()
    blobs[_sha(cfg)] = cfg
    man = json.dumps({"schemaVersion": 2,
                      "mediaType": "application/vnd.oci.image.manifest.v1+json",
                      "config": {"mediaType": "application/vnd.oci.image.config.v1+json",
                                 "digest": _sha(cfg), "size": len(cfg)},
                      "layers": descs}).encode()
    blobs[_sha(man)] = man
    (dest / "blobs" / "sha256").mkdir(parents=True)
    for digest, data in blobs.items():
        (dest / "blobs" / "sha256" / digest[7:]).write_bytes(data)
    (dest / "oci-layout").write_text('{"imageLayoutVersion": "1.0.0"}')
    (dest / "index.json").write_text(json.dumps({"schemaVersion": 2, "manifests": [
        {"mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": _sha(man),
         "size": len(man), "annotations": {"io.containerd.image.name": name,
                                           "org.opencontainers.image.ref.name": name}}]}))
    return dest


def archive(layout: Path, dest: Path) -> Path:
    """``layout`` as a tar archive (what ``ctr images import`` reads)."""
    with tarfile.open(dest, "w") as tf:
        for path in sorted(layout.rglob("*")):
            tf.add(path, str(path.relative_to(layout)), recursive=False)
    return dest


def build_images(base: Path) -> dict[str, Path]:
    """The pause and busybox layouts the pods use, and the ~30 MB image the pulls fetch."""
    bb = busybox_layer()
    return {
        PAUSE: write_layout(base / "pause", [bb], {"Env": ["PATH=/bin"],
                            "Entrypoint": ["sleep"], "Cmd": ["2147483647"]}, PAUSE),
        BUSYBOX: write_layout(base / "busybox", [bb], {"Env": ["PATH=/bin"],
                              "Cmd": ["sleep", "3600"]}, BUSYBOX),
        BIG: write_layout(base / "big", [bb, *(filler_layer(i, 9 << 20) for i in range(3))],
                          {"Env": ["PATH=/bin"], "Cmd": ["sh"]}, BIG, gzip_layers=True),
    }


# ---- the registry -------------------------------------------------------------------------

def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@contextlib.contextmanager
def registry(base: Path) -> Iterator[str]:
    """A docker-registry on 127.0.0.1 storing under ``base``; ``host:port`` while it runs."""
    port = _free_port()
    cfg = base / "registry.yml"
    cfg.write_text("version: 0.1\nlog:\n  level: error\n  accesslog:\n    disabled: true\n"
                   f"storage:\n  filesystem:\n    rootdirectory: {base / 'registry'}\n"
                   f"http:\n  addr: 127.0.0.1:{port}\n")
    proc = subprocess.Popen(["docker-registry", "serve", str(cfg)], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        for _ in range(400):
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/v2/", timeout=1).close()
                break
            except OSError:
                if proc.poll() is not None:
                    raise RuntimeError("docker-registry exited at start") from None
                time.sleep(0.05)
        yield f"127.0.0.1:{port}"
    finally:
        os.kill(proc.pid, signal.SIGTERM)
        proc.wait(10)


def hosts_dir(base: Path, host: str) -> Path:
    """A ``hosts.toml`` dir (containerd's layout, read by both servers): ``host`` over HTTP."""
    d = base / "certs.d"
    (d / host).mkdir(parents=True)
    (d / host / "hosts.toml").write_text(
        f'server = "http://{host}"\n[host."http://{host}"]\n  capabilities = ["pull", "resolve"]\n')
    return d


def pull_floor(host: str, layout: Path, dest: Path) -> Callable[[], None]:
    """Download + sha256 of the image's manifest and blobs into ``dest`` (one urllib request
    each, as a plain client would)."""
    index = json.loads((layout / "index.json").read_text())
    man = index["manifests"][0]
    body = json.loads((layout / "blobs" / "sha256" / man["digest"][7:]).read_bytes())
    digests = [body["config"]["digest"], *(lay["digest"] for lay in body["layers"])]
    repo, _, tag = BIG.partition(":")
    base = f"http://{host}/v2/{repo}"

    def fetch(url: str, digest: str, headers: dict[str, str]) -> None:
        h = hashlib.sha256()
        with urllib.request.urlopen(urllib.request.Request(url, headers=headers)) as resp, \
                open(dest / digest[7:], "wb") as out:
            while chunk := resp.read(1 << 20):
                h.update(chunk)
                out.write(chunk)
        if "sha256:" + h.hexdigest() != digest:
            raise RuntimeError(f"floor: {url}: digest mismatch")

    def run() -> None:
        dest.mkdir()
        fetch(f"{base}/manifests/{tag}", man["digest"],
              {"Accept": "application/vnd.oci.image.manifest.v1+json"})
        for digest in digests:
            fetch(f"{base}/blobs/{digest}", digest, {})
        shutil.rmtree(dest)

    return run
