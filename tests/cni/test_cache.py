"""podkit.cni.cache: document format, legacy entries, listing, the attachment lock."""

from __future__ import annotations

import base64
import json
import multiprocessing
import os
import threading
import time
from pathlib import Path

import pytest

from podkit import cni
from podkit.cni.cache import encode_entry
from podkit.errors import InvalidArgumentError


def test_encode_matches_recorded_libcni_file(shared: Path) -> None:
    recorded = (shared / "fixtures/cni/recorded/libcni/cache-file-pk-full-ctr-rec1-eth0.json"
                ).read_bytes().rstrip(b"\n")
    doc = json.loads(recorded)
    config = (shared / "fixtures/cni/examples/with-tuning-bandwidth-firewall.conflist"
              ).read_bytes()
    assert base64.b64decode(doc["config"]) == config
    data = encode_entry(container_id="ctr-rec1", network="pk-full", ifname="eth0",
                        config=config, netns=doc["netns"],
                        cni_args=[tuple(p) for p in doc["cniArgs"]],
                        capability_args=doc["capabilityArgs"],
                        result=cni.parse_result(doc["result"]))
    assert data == recorded


def test_read_entries_and_listing(tmp_path: Path) -> None:
    cache = cni.ResultCache(tmp_path)
    assert cache.read("n", "c", "eth0") is None and cache.attachments() == []
    cache.write("n", "c1", "eth0", config=b"{}", netns="/x", cni_args=[("A", "1")],
                capability_args={"mac": "m"},
                result=cni.parse_result({"cniVersion": "0.4.0", "ips": [
                    {"version": "4", "address": "10.0.0.2/24"}]}))
    cache.write("n", "c2", "eth1", config=b"{}")
    (tmp_path / "results" / "junk").write_text("not json")
    (tmp_path / "results" / "n-c3-eth0").write_text('{"kind":"cniCacheV1","containerId":"c3"}')
    entry = cache.read("n", "c1", "eth0")
    assert entry is not None and entry.cni_args == (("A", "1"),) and entry.netns == "/x"
    assert entry.parsed_result() == cni.parse_result(
        {"cniVersion": "0.4.0", "ips": [{"version": "4", "address": "10.0.0.2/24"}]})
    assert cache.read_result("n", "c1", "eth0", "1.0.0") == cni.parse_result(
        {"cniVersion": "1.0.0", "ips": [{"address": "10.0.0.2/24"}]})
    assert [(a.container_id, a.ifname) for a in cache.attachments()] == [("c1", "eth0"),
                                                                        ("c2", "eth1")]
    assert [a.container_id for a in cache.attachments("c2")] == ["c2"]
    (tmp_path / "results" / "n-c4-eth0").write_bytes(b"")
    with pytest.raises(cni.CacheError, match="decoding version from network config"):
        cache.read("n", "c4", "eth0")
    assert cache.remove("n", "c4", "eth0") and not cache.remove("n", "c4", "eth0")
    cache.write("n", "c5", "eth0", config=b"{}", result=cni.parse_result(
        {"cniVersion": "1.0.0", "interfaces": [{"name": "lo"}]}))
    with pytest.raises(cni.CacheError, match=r'config version "0\.2\.0": cannot convert'):
        cache.read_result("n", "c5", "eth0", "0.2.0")
    with pytest.raises(InvalidArgumentError, match="unsafe path component"):
        cache.path("n", "../x", "eth0")


def _hold(path: str, ready: multiprocessing.synchronize.Event, seconds: float) -> None:
    cache = cni.ResultCache(path)
    with cache.lock("n", "c", "eth0"):
        ready.set()
        time.sleep(seconds)
        Path(path, "holder-done").write_text(str(time.monotonic_ns()))


def test_lock_serialises_processes_and_threads(tmp_path: Path) -> None:
    ctx = multiprocessing.get_context("fork")
    ready = ctx.Event()
    proc = ctx.Process(target=_hold, args=(str(tmp_path), ready, 0.5))
    proc.start()
    assert ready.wait(30)
    cache = cni.ResultCache(tmp_path)
    with cache.lock("n", "c", "eth0"):
        assert (tmp_path / "holder-done").exists()  # we only got in after the holder left
    proc.join(30)
    with cache.lock("n", "other", "eth0"):  # another attachment is not blocked by this one
        pass
    order: list[str] = []

    def worker(tag: str) -> None:
        with cache.lock("n", "c", "eth0"):
            order.append(f"{tag}-in")
            time.sleep(0.2)
            order.append(f"{tag}-out")

    threads = [threading.Thread(target=worker, args=(t,)) for t in "ab"]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert order in (["a-in", "a-out", "b-in", "b-out"], ["b-in", "b-out", "a-in", "a-out"])
    assert os.listdir(tmp_path / "locks") == ["attachments.lock"]


def test_network_lock_excludes_attachment_locks(tmp_path: Path) -> None:
    cache = cni.ResultCache(tmp_path)
    order: list[str] = []
    entered = threading.Event()

    def holder() -> None:
        with cache.lock("n", "c", "eth0"):
            order.append("del-in")
            entered.set()
            time.sleep(0.3)
            order.append("del-out")

    t = threading.Thread(target=holder)
    t.start()
    assert entered.wait(30)
    with cache.lock("other", "c", "eth0"):  # another network is not affected
        order.append("other")
    with cache.network_lock("n"):
        order.append("gc")
    t.join()
    assert order == ["del-in", "other", "del-out", "gc"]
