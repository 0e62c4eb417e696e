"""Benchmark podkit.image: layer unpack and registry pull, each against the raw operation.

Both measured in the same run, alternating, on a ~50 MB (uncompressed) four-layer image built
here (large and small files, a deletion and an opaque dir per layer, gzip layers):

* unpack: ``podkit.image.unpack`` (digest checks of the compressed and uncompressed stream,
  whiteout conversion, ownership/mode/mtime, a fresh snapshot per layer) vs. ``tar -xzf`` of
  the same layer blobs into fresh dirs (target <= 1.5x);
* pull: ``podkit.image.pull`` from a local ``docker-registry`` (manifest negotiation, digest and
  size checks, fsync + rename, concurrent layers) vs. a plain sequential urllib download of the
  same blobs to files (target <= 1.2x);
* mirror pull: ``gcr.io/bench/pull:v1`` pulled through a ``hosts.toml`` that maps ``gcr.io`` to
  the local registry vs. the floor "download the same blobs with one HTTP client and sha256
  them" (target <= 1.15x). The floor is measured with each HTTP client on hand: urllib (a new
  connection per request, as podkit's transport), and urllib3 and httpx with a kept-alive
  connection pool when they are importable (``PYTHONPATH=<dir with them>``), to weigh them.
* CRI pull: the same name through ``PullImage`` over gRPC to a CRI server (``serve()`` with the
  same hosts directory, the in-memory pod API) vs. the same floor (target <= 1.15x); the image
  is removed (``RemoveImage``, blobs collected) after each round.

Usage: ``scripts/isolated .venv/bin/python benchmarks/bench_image.py [--rounds N] [--json out]``
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import importlib
import io
import json
import random
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from podkit.image import ImageStore, Registry, RegistryHosts, import_image, pull, push, unpack

sys.path.insert(0, str(Path(__file__).resolve().parent))
from containerd.images import registry, write_layout

MTIME = 1_700_000_000


def _layer(seed: int, big: int, small: int) -> bytes:
    rng = random.Random(seed)
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tf:

        def add(name: str, data: bytes | None, kind: bytes = tarfile.REGTYPE) -> None:
            info = tarfile.TarInfo(name)
            info.type, info.mtime, info.mode = kind, MTIME, 0o755 if data is None else 0o644
            info.size = len(data) if data is not None else 0
            tf.addfile(info, io.BytesIO(data) if data is not None else None)

        add(f"l{seed}", None, tarfile.DIRTYPE)
        add(f"l{seed}/big", None, tarfile.DIRTYPE)
        add(f"l{seed}/small", None, tarfile.DIRTYPE)
        for i in range(big):  # half random, half text: compresses about 2:1
            data = rng.randbytes(128 << 10) + (b"podkit benchmark line %d\n" % i) * 5000
            add(f"l{seed}/big/f{i}", data)
        for i in range(small):
            add(f"l{seed}/small/s{i}", b"x" * rng.randrange(100, 4000))
        if seed:
            add(f"l{seed - 1}/small/.wh.s0", b"")
            add(f"l{seed - 1}/big/.wh..wh..opq", b"")
    return buf.getvalue()


def build_layout(dest: Path) -> tuple[list[bytes], int]:
    """The benchmark's image (4 gzip layers of many files with whiteouts) as an OCI layout;
    its layer blobs and their total uncompressed size."""
    raws = [_layer(i, big=50, small=500) for i in range(4)]
    write_layout(dest, raws, {"Cmd": ["sh"]}, "v1", gzip_layers=True)
    blob = lambda digest: (dest / "blobs" / "sha256" / digest[7:]).read_bytes()  # noqa: E731
    index = json.loads((dest / "index.json").read_text())
    manifest = json.loads(blob(index["manifests"][0]["digest"]))
    return [blob(d["digest"]) for d in manifest["layers"]], sum(len(r) for r in raws)


def timed(fn: Callable[[], Any]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def bench_unpack(tmp: Path, layout: Path, layer_blobs: list[bytes], rounds: int) -> dict[str, Any]:
    files = []
    for i, blob in enumerate(layer_blobs):
        path = tmp / f"layer{i}.tar.gz"
        path.write_bytes(blob)
        files.append(path)
    podkit_t, tar_t = [], []
    for r in range(rounds):
        store = ImageStore(tmp / f"unpack{r}")
        import_image(store, layout, "localhost/bench/unpack:v1")
        podkit_t.append(timed(lambda store=store: unpack(store, "localhost/bench/unpack:v1")))
        shutil.rmtree(tmp / f"unpack{r}")

        def tar_x(r: int = r) -> None:
            for i, f in enumerate(files):
                dest = tmp / f"tar{r}-{i}"
                dest.mkdir()
                subprocess.run(["tar", "-xzf", str(f), "-C", str(dest)], check=True)

        tar_t.append(timed(tar_x))
        for i in range(len(files)):
            shutil.rmtree(tmp / f"tar{r}-{i}")
    return {"podkit": statistics.median(podkit_t), "raw": statistics.median(tar_t)}


@contextlib.contextmanager
def _registry(tmp: Path, name: str) -> Iterator[int]:
    """A docker-registry on 127.0.0.1 storing under ``tmp/name``; its port while it runs."""
    (tmp / name).mkdir()
    with registry(tmp / name) as host:
        yield int(host.rsplit(":", 1)[1])


def bench_pull(tmp: Path, layout: Path, rounds: int) -> dict[str, Any]:
    with _registry(tmp, "registry") as port:
        ref = f"127.0.0.1:{port}/bench/pull:v1"
        src = ImageStore(tmp / "src")
        [image] = import_image(src, layout, ref)
        push(src, ref)
        base = f"http://127.0.0.1:{port}/v2/bench/pull"
        blobs = [image.config.digest, *(layer.digest for layer in image.layers)]

        def plain(dest: Path) -> None:
            dest.mkdir()
            req = urllib.request.Request(f"{base}/manifests/v1", headers={
                "Accept": "application/vnd.oci.image.manifest.v1+json"})
            with urllib.request.urlopen(req) as resp:
                (dest / "manifest").write_bytes(resp.read())
            for digest in blobs:
                with urllib.request.urlopen(f"{base}/blobs/{digest}") as resp, \
                        open(dest / digest[7:], "wb") as out:
                    while chunk := resp.read(1 << 20):
                        out.write(chunk)

        pull(ImageStore(tmp / "warm"), ref)  # warm up both sides (registry caches, imports)
        plain(tmp / "warm-plain")
        podkit_t, raw_t = [], []
        for r in range(rounds):
            store = ImageStore(tmp / f"pull{r}")  # an existing (empty) store, as in real use
            podkit_t.append(timed(lambda store=store: pull(store, ref)))
            raw_t.append(timed(lambda r=r: plain(tmp / f"plain{r}")))
            shutil.rmtree(tmp / f"pull{r}")
            shutil.rmtree(tmp / f"plain{r}")
        return {"podkit": statistics.median(podkit_t), "raw": statistics.median(raw_t)}


def _sha_to(dest: Path, digest: str, chunks: Any) -> None:
    h = hashlib.sha256()
    with open(dest / digest[7:], "wb") as out:
        for chunk in chunks:
            h.update(chunk)
            out.write(chunk)
    if "sha256:" + h.hexdigest() != digest:
        raise RuntimeError(f"{digest}: digest mismatch")


def _floors(base: str, digests: list[str]) -> dict[str, Callable[[Path], None]]:
    """Download + sha256 of the blobs, one function per HTTP client available."""

    def with_urllib(dest: Path) -> None:
        dest.mkdir()
        for digest in digests:
            with urllib.request.urlopen(f"{base}/blobs/{digest}") as resp:
                _sha_to(dest, digest, iter(lambda resp=resp: resp.read(1 << 20), b""))

    floors = {"urllib": with_urllib}
    try:
        urllib3: Any = importlib.import_module("urllib3")
        pool = urllib3.PoolManager()

        def with_urllib3(dest: Path) -> None:
            dest.mkdir()
            for digest in digests:
                resp = pool.request("GET", f"{base}/blobs/{digest}", preload_content=False)
                _sha_to(dest, digest, resp.stream(1 << 20))
                resp.release_conn()

        floors["urllib3"] = with_urllib3
    except ImportError:
        pass
    try:
        httpx: Any = importlib.import_module("httpx")
        client = httpx.Client()

        def with_httpx(dest: Path) -> None:
            dest.mkdir()
            for digest in digests:
                with client.stream("GET", f"{base}/blobs/{digest}") as resp:
                    _sha_to(dest, digest, resp.iter_bytes(1 << 20))

        floors["httpx"] = with_httpx
    except ImportError:
        pass
    return floors


class _CRIPuller:
    """PullImage/RemoveImage of one reference over gRPC to a CRI server using ``hosts`` (the
    in-memory pod API; the image service is the real one)."""

    def __init__(self, tmp: Path, hosts: RegistryHosts, ref: str) -> None:
        import grpc

        from podkit.cri import api_pb2 as pb
        from podkit.cri import api_pb2_grpc
        from podkit.cri.service import CRIService, serve
        from podkit.pods.testing import FakeNetworks, FakePodManager

        store = ImageStore(tmp / "cri-root")
        manager = FakePodManager(tmp / "cri-pods", tmp / "cri-state", images=store,
                                 networks=FakeNetworks())
        self.server = serve(tmp / "cri.sock", CRIService(manager, store, registry_hosts=hosts))
        self.channel = grpc.insecure_channel(self.server.address)
        self.stub = api_pb2_grpc.ImageServiceStub(self.channel)
        self.pull_request = pb.PullImageRequest(image=pb.ImageSpec(image=ref))
        self.remove_request = pb.RemoveImageRequest(image=pb.ImageSpec(image=ref))

    def pull(self) -> None:
        self.stub.PullImage(self.pull_request, timeout=300)

    def remove(self) -> None:
        """Forget the image; its blobs are collected, so the next pull downloads them."""
        self.stub.RemoveImage(self.remove_request)

    def close(self) -> None:
        self.channel.close()
        self.server.stop()


def bench_mirror_pull(tmp: Path, layout: Path, rounds: int) -> dict[str, Any]:
    """gcr.io/bench/pull:v1 through hosts.toml to the local registry vs. the floors."""
    with _registry(tmp, "mirror") as port:
        local = f"127.0.0.1:{port}/bench/pull:v1"
        src = ImageStore(tmp / "mirror-src")
        [image] = import_image(src, layout, local)
        push(src, local)
        hosts_dir = tmp / "certs.d" / "gcr.io"
        hosts_dir.mkdir(parents=True)
        (hosts_dir / "hosts.toml").write_text(
            'server = "https://192.0.2.1"\ncapabilities = ["push"]\n'
            f'[host."http://127.0.0.1:{port}"]\n  capabilities = ["pull", "resolve"]\n')
        registry = Registry(hosts=RegistryHosts.load(tmp / "certs.d"))
        ref = "gcr.io/bench/pull:v1"
        cri = _CRIPuller(tmp, RegistryHosts.load(tmp / "certs.d"), ref)
        base = f"http://127.0.0.1:{port}/v2/bench/pull"
        floors = _floors(base, [image.config.digest, *(layer.digest for layer in image.layers)])
        registry.pull(ImageStore(tmp / "mirror-warm"), ref)
        for name, floor in floors.items():
            floor(tmp / f"warm-{name}")
        cri.pull()
        cri.remove()
        times: dict[str, list[float]] = {"podkit": [], "cri": [],
                                         **{name: [] for name in floors}}
        for r in range(rounds):
            store = ImageStore(tmp / f"mpull{r}")
            times["podkit"].append(timed(lambda store=store: registry.pull(store, ref)))
            shutil.rmtree(tmp / f"mpull{r}")
            times["cri"].append(timed(cri.pull))
            cri.remove()
            for name, floor in floors.items():
                times[name].append(timed(lambda r=r, name=name, floor=floor:
                                         floor(tmp / f"f{name}{r}")))
                shutil.rmtree(tmp / f"f{name}{r}")
        medians = {name: statistics.median(t) for name, t in times.items()}
        cri.close()
        return {"podkit": medians["podkit"], "raw": min(medians[n] for n in floors),
                "floors": {n: medians[n] for n in floors}, "cri": medians["cri"]}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--json", help="write the results here")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="pk-img-bench-") as tmp_name:
        tmp = Path(tmp_name)
        layout = tmp / "layout"
        layer_blobs, raw_size = build_layout(layout)
        gz_size = sum(len(b) for b in layer_blobs)
        results = {
            "unpack": {**bench_unpack(tmp, layout, layer_blobs, args.rounds), "target": 1.5,
                       "raw_name": "tar -xzf"},
            "pull": {**bench_pull(tmp, layout, args.rounds * 3), "target": 1.2,
                     "raw_name": "plain download"},
            "mirror": {**bench_mirror_pull(tmp, layout, args.rounds * 3), "target": 1.15,
                       "raw_name": "fetch + sha256"},
        }
        mirror = results["mirror"]
        results["cri pull"] = {"podkit": mirror.pop("cri"), "raw": mirror["raw"],
                               "target": 1.15, "raw_name": "fetch + sha256"}
    print(f"image: 4 layers, {raw_size / 1e6:.1f} MB uncompressed, {gz_size / 1e6:.1f} MB gzip; "
          f"medians of {args.rounds} (unpack) and {args.rounds * 3} (pull) alternating rounds")
    print(f"{'operation':<10} {'podkit':>9} {'raw':>9} {'raw op':<16} {'ratio':>6} {'target':>7}")
    for name, r in results.items():
        r["ratio"] = r["podkit"] / r["raw"]
        missed = "" if r["ratio"] <= r["target"] else "  missed"
        print(f"{name:<10} {r['podkit'] * 1000:7.0f}ms {r['raw'] * 1000:7.0f}ms "
              f"{r['raw_name']:<16} {r['ratio']:6.2f} {'<= ' + str(r['target']):>7}{missed}")
    floors = results["mirror"]["floors"]
    print("fetch + sha256 floor by HTTP client: " + ", ".join(
        f"{name} {t * 1000:.0f}ms" for name, t in floors.items()))
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
