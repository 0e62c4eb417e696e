"""Auto-refresh: inotify via watchdog, freshness of the next query, degradation, recovery."""

from __future__ import annotations

import errno
import json
import os
import shutil
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from podkit import cdi, oci
from podkit.cdi import watch


def spec_text(kind: str, name: str, *env: str) -> str:
    return json.dumps({"cdiVersion": "0.3.0", "kind": kind,
                       "devices": [{"name": name, "containerEdits": {"env": list(env)}}]})


@pytest.fixture
def dirs(tmp_path: Path) -> tuple[Path, Path]:
    etc, run = tmp_path / "etc", tmp_path / "run"
    etc.mkdir()
    run.mkdir()
    return etc, run


@pytest.fixture
def cache(dirs: tuple[Path, Path]) -> Iterator[cdi.Cache]:
    c = cdi.Cache(dirs, auto_refresh=True)
    assert c.dir_errors == {}
    yield c
    c.close()


def env_of(c: cdi.Cache, name: str) -> tuple[str, ...] | None:
    d = c.get_device(name)
    return None if d is None else d.edits.env


def test_write_is_visible_to_the_very_next_query(cache: cdi.Cache, dirs: tuple[Path, Path]) -> None:
    etc, _ = dirs
    p = etc / "a.json"
    for i in range(60):
        p.write_text(spec_text("v.com/c", "d", f"V={i}"))  # in place, same size most times
        assert env_of(cache, "v.com/c=d") == (f"V={i}",)


def test_new_file_removed_file_and_renames(cache: cdi.Cache, dirs: tuple[Path, Path]) -> None:
    etc, run = dirs
    assert cache.list_devices() == []
    (etc / "a.yaml").write_text(spec_text("v.com/c", "a", "A=1"))
    assert cache.list_devices() == ["v.com/c=a"]
    tmp = run / "b.json.tmp"
    tmp.write_text(spec_text("v.com/c", "b", "B=1"))
    assert cache.list_devices() == ["v.com/c=a"]  # .tmp is not a spec file
    os.rename(tmp, run / "b.json")
    assert cache.list_devices() == ["v.com/c=a", "v.com/c=b"]
    os.rename(run / "b.json", run / "b.disabled")
    assert cache.list_devices() == ["v.com/c=a"]
    os.unlink(etc / "a.yaml")
    assert cache.list_devices() == []
    (etc / "broken.json").write_text("{")
    assert cache.list_devices() == []
    assert str(etc / "broken.json") in cache.errors


def test_shadowing_follows_changes(cache: cdi.Cache, dirs: tuple[Path, Path]) -> None:
    etc, run = dirs
    (etc / "a.json").write_text(spec_text("v.com/c", "d", "FROM=etc"))
    assert env_of(cache, "v.com/c=d") == ("FROM=etc",)
    (run / "a.json").write_text(spec_text("v.com/c", "d", "FROM=run"))
    assert env_of(cache, "v.com/c=d") == ("FROM=run",)
    (run / "a.json").unlink()
    assert env_of(cache, "v.com/c=d") == ("FROM=etc",)


def test_dirs_created_later_and_removed(tmp_path: Path) -> None:
    etc = tmp_path / "etc" / "cdi"
    run = tmp_path / "var" / "run" / "cdi"
    with cdi.Cache([etc, run], auto_refresh=True) as c:
        assert c.list_devices() == [] and c.errors == {}
        run.mkdir(parents=True)
        (run / "a.json").write_text(spec_text("v.com/c", "a", "A=1"))
        assert c.list_devices() == ["v.com/c=a"]
        etc.mkdir(parents=True)
        (etc / "b.json").write_text(spec_text("v.com/c", "b", "B=1"))
        assert c.list_devices() == ["v.com/c=a", "v.com/c=b"]
        shutil.rmtree(run)
        assert c.list_devices() == ["v.com/c=b"]
        run.mkdir(parents=True)
        (run / "c.json").write_text(spec_text("v.com/c", "c", "C=1"))
        assert c.list_devices() == ["v.com/c=b", "v.com/c=c"]
        # a dir renamed away and back
        os.rename(etc, tmp_path / "moved")
        assert c.list_devices() == ["v.com/c=c"]
        os.rename(tmp_path / "moved", etc)
        assert c.list_devices() == ["v.com/c=b", "v.com/c=c"]
        assert c.errors == {}


def test_write_spec_is_visible_without_refresh(cache: cdi.Cache) -> None:
    spec = cdi.Spec(kind="v.com/c", devices=[cdi.Device(
        name="w", container_edits=cdi.ContainerEdits(env=["W=1"]))])
    cache.write_spec(spec, "w")
    assert cache.list_devices() == ["v.com/c=w"]
    cache.remove_spec("w")
    assert cache.list_devices() == []


def test_observer_pushes_change_notifications(cache: cdi.Cache, dirs: tuple[Path, Path]) -> None:
    seen = threading.Event()
    cache.add_listener(seen.set)
    (dirs[0] / "a.json").write_text(spec_text("v.com/c", "a", "A=1"))
    assert seen.wait(30)


def test_wait_for_change(cache: cdi.Cache, dirs: tuple[Path, Path]) -> None:
    result: list[bool] = []
    t = threading.Thread(target=lambda: result.append(cache.wait_for_change(30)))
    t.start()
    # write until the waiter has been woken (the waiter may start after the first write)
    for i in range(300):
        (dirs[0] / f"a{i % 3}.json").write_text(spec_text("v.com/c", "a", "A=1"))
        t.join(0.1)
        if not t.is_alive():
            break
    t.join(30)
    assert result == [True]


# --- degradation -----------------------------------------------------------------------------

def _emfile(*_: Any, **__: Any) -> None:
    raise OSError(errno.EMFILE, "Too many open files")


def test_observer_start_failure_degrades_to_rescan_on_query(
    monkeypatch: pytest.MonkeyPatch, dirs: tuple[Path, Path]
) -> None:
    from watchdog.observers.inotify import InotifyObserver

    monkeypatch.setattr(InotifyObserver, "start", _emfile)
    etc, _ = dirs
    with cdi.Cache(dirs, auto_refresh=True) as c:
        assert set(c.dir_errors) == {str(d) for d in dirs}
        assert all("failed to create watcher" in m and "Too many open files" in m
                   for m in c.dir_errors.values())
        assert str(etc) in c.errors
        for i in range(5):
            (etc / "a.json").write_text(spec_text("v.com/c", "d", f"V={i}"))
            assert env_of(c, "v.com/c=d") == (f"V={i}",)
        spec = oci.Spec()
        c.inject_devices(spec, ["v.com/c=d"])
        assert spec.process is not None and spec.process.env == ["V=4"]


def test_inotify_init_failure_and_recovery(
    monkeypatch: pytest.MonkeyPatch, dirs: tuple[Path, Path]
) -> None:
    from watchdog.observers import inotify_c

    real = inotify_c.inotify_init
    monkeypatch.setattr(inotify_c, "inotify_init", lambda: _emfile())
    monkeypatch.setattr(watch, "_RETRY_SECONDS", 0.0)
    etc, _ = dirs
    with cdi.Cache(dirs, auto_refresh=True) as c:
        assert c.dir_errors
        (etc / "a.json").write_text(spec_text("v.com/c", "d", "V=1"))
        assert env_of(c, "v.com/c=d") == ("V=1",)
        monkeypatch.setattr(inotify_c, "inotify_init", real)
        c.list_devices()  # retries and recovers
        assert c.dir_errors == {}
        (etc / "a.json").write_text(spec_text("v.com/c", "d", "V=2"))
        assert env_of(c, "v.com/c=d") == ("V=2",)


FD_SCRIPT = r"""
import os, resource, json, sys
from podkit import cdi
d = sys.argv[1]
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (256, hard))
hog = []
try:
    while True:
        hog.append(os.open("/dev/null", os.O_RDONLY))
except OSError:
    pass
c = cdi.Cache([d], auto_refresh=True)        # must not crash
out = {"devices": c.list_devices(), "dir_errors": c.dir_errors, "errors": c.errors}
for fd in hog:
    os.close(fd)
c.refresh()
out["after"] = c.list_devices()
open(os.path.join(d, "b.json"), "w").write(
    '{"cdiVersion":"0.3.0","kind":"v.com/c","devices":[{"name":"b","containerEdits":{"env":["B=1"]}}]}')
out["after_write"] = c.list_devices()
c.close()
print(json.dumps(out))
"""


def test_fd_exhaustion_does_not_crash_the_cache(tmp_path: Path) -> None:
    d = tmp_path / "cdi"
    d.mkdir()
    (d / "a.json").write_text(spec_text("v.com/c", "a", "A=1"))
    proc = subprocess.run([sys.executable, "-c", FD_SCRIPT, str(d)], capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["devices"] == []  # nothing readable while out of fds ...
    assert any("Too many open files" in m for m in out["dir_errors"].values())
    assert any("Too many open files" in m for ms in out["errors"].values() for m in ms)
    assert out["after"] == ["v.com/c=a"]  # ... and everything back once fds are free
    assert out["after_write"] == ["v.com/c=a", "v.com/c=b"]


# --- concurrency -----------------------------------------------------------------------------

def test_inject_while_specs_are_rewritten(dirs: tuple[Path, Path]) -> None:
    """Every injection sees one consistent version of the spec (env and mount agree)."""
    etc, run = dirs
    stop = threading.Event()
    errors: list[BaseException] = []

    def make(version: int, kind: str = "v.com/c") -> cdi.Spec:
        return cdi.Spec(kind=kind, devices=[cdi.Device(name="d", container_edits=cdi.ContainerEdits(
            env=[f"V={version}"],
            mounts=[cdi.Mount(host_path=f"/h/{version}", container_path=f"/c/{version}")]))])

    with cdi.Cache(dirs, auto_refresh=True) as c, \
            cdi.Cache([etc, run], auto_refresh=False) as writer:
        writer.write_spec(make(0), "v")

        written = [0]

        def rewrite() -> None:
            try:
                v = 1
                while not stop.is_set():
                    writer.write_spec(make(v), "v")
                    written[0] = v
                    if v % 7 == 0:  # shadow from the low-priority dir too
                        (etc / "v.json").write_text(make(-v).to_json())
                    v += 1
            except BaseException as e:  # pragma: no cover - reported below
                errors.append(e)

        t = threading.Thread(target=rewrite)
        t.start()
        try:
            versions = set()
            injections = 0
            while injections < 400 or (written[0] < 50 and t.is_alive()):
                injections += 1
                spec = oci.Spec()
                c.inject_devices(spec, ["v.com/c=d"])
                assert spec.process is not None and spec.mounts is not None
                (env,) = spec.process.env or []
                version = env.split("=")[1]
                assert [m.destination for m in spec.mounts] == [f"/c/{version}"]
                assert int(version) >= 0  # the run dir always shadows etc
                versions.add(version)
        finally:
            stop.set()
            t.join(30)
        assert not errors
        assert len(versions) > 1


def test_concurrent_queries_from_many_threads(cache: cdi.Cache, dirs: tuple[Path, Path]) -> None:
    (dirs[0] / "a.json").write_text(spec_text("v.com/c", "a", "A=1"))
    failures: list[BaseException] = []

    def worker() -> None:
        try:
            for _ in range(200):
                spec = oci.Spec()
                cache.inject_devices(spec, ["v.com/c=a"])
                assert spec.process is not None and spec.process.env == ["A=1"]
        except BaseException as e:  # pragma: no cover
            failures.append(e)

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not failures


def test_watch_target_nearest_parent(tmp_path: Path) -> None:
    assert watch._watch_target(str(tmp_path)) == (str(tmp_path), None)
    assert watch._watch_target(str(tmp_path / "a" / "b")) == (str(tmp_path), "a")
