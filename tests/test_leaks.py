"""tests/_leaks.py: the leak snapshot the whole suite is checked against.

Unit tests feed each collector a fake tree or text; integration tests (``scripts/isolated``)
create the real thing (veth pair, pinned netns, bind mount, cgroup) and expect the snapshot to
see it appear and disappear. The session fixture proposed for conftest.py is run end to end in
a child pytest.
"""

from __future__ import annotations

import os
import socket
import struct
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

import _leaks
from podkit import netns
from support import REPO, require_isolated, require_root

# --- unit: each collector --------------------------------------------------------------------

MOUNTINFO = """\
22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw
60 22 0:40 / /run/netns rw,relatime shared:9 - tmpfs podkit-netns rw,mode=755
66 60 0:4 net:[4026532248] /run/netns/pk-a rw shared:2 - nsfs nsfs rw
67 60 0:4 net:[4026532249] /run/netns/pk-a rw shared:3 - nsfs nsfs rw
70 22 0:41 / /tmp/pytest-of-root/pytest-3/x\\040y rw - tmpfs tmpfs rw
71 22 0:42 / /var/lib/podkit/shm master:4 - tmpfs shm rw
72 22 0:43 / /run/user/0 rw - tmpfs tmpfs rw
73 22 0:44 / /run/netnsx rw - tmpfs tmpfs rw
"""


def test_mounts_filters_counts_stacked_and_unescapes() -> None:
    got = _leaks.mounts(MOUNTINFO, _leaks.MOUNT_PREFIXES)
    assert got == {
        "mount /run/netns/pk-a (nsfs)",
        "mount /run/netns/pk-a (nsfs) #2",
        "mount /tmp/pytest-of-root/pytest-3/x y (tmpfs)",
        "mount /var/lib/podkit/shm (tmpfs)",
    }
    assert _leaks.mounts("garbage line\n\n", ("/",)) == set()


def test_unescape() -> None:
    assert _leaks._unescape(r"a\040b\011c\134d\012") == "a b\tc\\d\n"
    assert _leaks._unescape("plain") == "plain"
    assert _leaks._unescape("trailing\\") == "trailing\\"


def test_runtime_containers_are_state_dirs(tmp_path: Path) -> None:
    root = tmp_path / "runc"
    (root / "ctr-1").mkdir(parents=True)
    (root / "ctr-1" / "state.json").write_text("{}")
    (root / "ctr-2").mkdir()
    (root / "some.lock").write_text("")
    (tmp_path / "alias").symlink_to(root)
    got = _leaks.runtime_containers([str(root), str(tmp_path / "alias"), str(tmp_path / "none")])
    assert got == {f"container {root}/ctr-1", f"container {root}/ctr-2"}


def test_pinned_netns_lists_every_file_once(tmp_path: Path) -> None:
    d = tmp_path / "netns"
    d.mkdir()
    (d / "pk-a").touch()
    (tmp_path / "var-run-netns").symlink_to(d)
    got = _leaks.pinned_netns([str(d), str(tmp_path / "var-run-netns"), str(tmp_path / "x")])
    assert got == {f"netns {d}/pk-a"}


def test_ipam_reservations_skip_host_local_bookkeeping(tmp_path: Path) -> None:
    net = tmp_path / "networks" / "pk-net"
    net.mkdir(parents=True)
    for name in ("10.88.0.2", "fd00::2", "lock", "last_reserved_ip.0", "last_reserved_ip.1"):
        (net / name).write_text("ctr\neth0")
    got = _leaks.ipam_reservations([str(tmp_path / "networks"), str(tmp_path / "missing")])
    assert got == {f"ipam {net}/10.88.0.2", f"ipam {net}/fd00::2"}


def test_cgroups_v1_v2_prefixes_and_subtrees(tmp_path: Path) -> None:
    root = tmp_path / "cgroup"
    (root / "pids" / "pk-rt-1" / "sub" / "deeper").mkdir(parents=True)
    (root / "pids" / "system.slice" / "pk-hidden").mkdir(parents=True)
    (root / "pids" / "pids.max").write_text("max")
    (root / "memory" / "podkit.slice").mkdir(parents=True)
    (root / "memory" / "other").mkdir()
    (root / "pk-v2").mkdir()  # cgroup v2 mounted at the root
    (root / "cpu,cpuacct" / "pk-c").mkdir(parents=True)
    (root / "cpu").symlink_to(root / "cpu,cpuacct")
    for hierarchy in ("pids", "memory", "cpu,cpuacct"):
        (root / hierarchy / "cgroup.procs").write_text("")
    (root / "unified" / "pk-not-a-hierarchy").mkdir(parents=True)  # tmpfs, no cgroup.procs
    (root / "memory" / "podkit" / "ctr1").mkdir(parents=True)  # namespace parent: only the child
    (root / "pids" / "podkit").mkdir()  # an empty namespace parent is not a leak
    got = _leaks.cgroups(str(root), _leaks.CGROUP_PREFIXES)
    assert got == {
        f"cgroup {root}/pids/pk-rt-1",
        f"cgroup {root}/pids/pk-rt-1/sub",
        f"cgroup {root}/pids/pk-rt-1/sub/deeper",
        f"cgroup {root}/memory/podkit.slice",
        f"cgroup {root}/memory/podkit/ctr1",
        f"cgroup {root}/pk-v2",
        f"cgroup {root}/cpu,cpuacct/pk-c",
    }
    assert _leaks.cgroups(str(tmp_path / "none"), ("pk-",)) == set()


def _rtattr(kind: int, value: bytes) -> bytes:
    raw = struct.pack("=HH", 4 + len(value), kind) + value
    return raw + b"\0" * (-len(raw) % 4)


def test_parse_link_reads_name_and_kind() -> None:
    info = _rtattr(18, _rtattr(1, b"veth\0"))
    payload = struct.pack("=BxHiII", 0, 1, 7, 0, 0) + _rtattr(3, b"pk-v0\0") + info
    assert _leaks.parse_link(payload) == ("pk-v0", "veth")
    bare = struct.pack("=BxHiII", 0, 1, 1, 0, 0) + _rtattr(3, b"lo\0")
    assert _leaks.parse_link(bare) == ("lo", "")


def test_snapshot_kinds_select_collectors(tmp_path: Path, registered: None) -> None:
    (tmp_path / "root" / "pk-ctr").mkdir(parents=True)
    _leaks.register_runtime_root(tmp_path / "root")
    item = f"container {tmp_path}/root/pk-ctr"
    assert item in _leaks.snapshot()
    assert item in _leaks.snapshot(["container"])
    assert item not in _leaks.snapshot(["netns", "mount"])
    assert all(x.startswith(("netns ", "mount ")) for x in _leaks.snapshot(["netns", "mount"]))
    with pytest.raises(ValueError, match="unknown leak kinds"):
        _leaks.snapshot(["veth"])


def test_diff_lists_only_new_items() -> None:
    assert _leaks.diff({"a", "b"}, {"b", "c", "a0"}) == ["a0", "c"]
    assert _leaks.diff({"a"}, set()) == []


@pytest.fixture
def registered(monkeypatch: pytest.MonkeyPatch) -> None:
    """Registrations made by a test vanish with it."""
    monkeypatch.setattr(_leaks, "_runtime_roots", set())
    monkeypatch.setattr(_leaks, "_ipam_dirs", set())


def test_registered_roots_and_ipam_dirs_are_snapshotted(tmp_path: Path, registered: None) -> None:
    def new_here() -> list[str]:  # other sessions on the host may add their own meanwhile
        return [x for x in _leaks.diff(before, _leaks.snapshot()) if str(tmp_path) in x]

    before = _leaks.snapshot()
    root, data = tmp_path / "runc-root", tmp_path / "ipam"
    (root / "pk-ctr").mkdir(parents=True)
    (data / "pk-net").mkdir(parents=True)
    (data / "pk-net" / "10.99.0.5").write_text("pk-ctr\neth0")
    assert new_here() == []  # not registered yet
    _leaks.register_runtime_root(root)
    _leaks.register_ipam_dir(data)
    assert new_here() == [f"container {root}/pk-ctr", f"ipam {data}/pk-net/10.99.0.5"]
    (root / "pk-ctr").rmdir()
    (data / "pk-net" / "10.99.0.5").unlink()
    assert new_here() == []


def test_snapshot_links_match_a_plain_netlink_listing() -> None:
    names = {name for name, _ in _leaks.list_links()}
    assert "lo" in names
    assert {name for _, name in socket.if_nameindex()} == names


# --- the session fixture for tests/conftest.py, run end to end in a child pytest -------------

SESSION_FIXTURE = '''
@pytest.fixture(scope="session", autouse=True)
def _no_leaks() -> Iterator[None]:
    """Fail the session if tests left a container, netns, link, IPAM entry, cgroup or mount."""
    if os.environ.get("PODKIT_LEAK_CHECK") == "0":
        yield
        return
    before = _leaks.snapshot()
    yield
    leaked = _leaks.leaked_since(before)
    if leaked:
        pytest.fail(
            "resources leaked by the test session:\\n  " + "\\n  ".join(leaked), pytrace=False
        )
'''


def _child_session(tmp_path: Path, test_body: str) -> subprocess.CompletedProcess[str]:
    root = tmp_path / "runc-root"
    root.mkdir()
    (tmp_path / "conftest.py").write_text(
        "from __future__ import annotations\n"
        "import os\nfrom collections.abc import Iterator\n\nimport pytest\n\nimport _leaks\n"
        "# hermetic: only the test's own runtime root is looked at\n"
        "_leaks.DEFAULT_RUNTIME_ROOTS = ()\n_leaks.NETNS_DIRS = ()\n"
        "_leaks.DEFAULT_IPAM_DIRS = ()\n_leaks.CGROUP_ROOT = '/nonexistent'\n"
        "_leaks.MOUNT_PREFIXES = ('/nonexistent/',)\n"
        f"_leaks.register_runtime_root({str(root)!r})\n" + SESSION_FIXTURE
    )
    (tmp_path / "test_child.py").write_text(
        f"from pathlib import Path\n\ndef test_it():\n    {test_body}\n"
    )
    env = {**os.environ, "PYTHONPATH": str(REPO / "tests"), "PODKIT_LEAK_CHECK": "1"}
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(tmp_path)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_session_fixture_passes_a_clean_session(tmp_path: Path) -> None:
    proc = _child_session(tmp_path, f"(Path({str(tmp_path)!r}) / 'runc-root' / 'c').mkdir()")
    assert proc.returncode == 1, proc.stdout  # first prove the leak is seen...
    assert f"container {tmp_path}/runc-root/c" in proc.stdout
    assert "resources leaked by the test session" in proc.stdout
    (tmp_path / "runc-root" / "c").rmdir()
    (tmp_path / "runc-root").rmdir()
    clean = _child_session(tmp_path, "assert True")
    assert clean.returncode == 0, clean.stdout + clean.stderr
    assert "leaked" not in clean.stdout


# --- integration: real resources appear in the snapshot and go away -------------------------


PRIVATE = ("netns", "link", "mount")  # what scripts/isolated makes private to this process


def private_snapshot() -> frozenset[str]:
    return _leaks.snapshot(PRIVATE)


@pytest.fixture
def baseline() -> Iterator[frozenset[str]]:
    require_isolated()
    before = private_snapshot()
    yield before
    assert _leaks.leaked_since(before, settle=0, kinds=PRIVATE) == []


@pytest.mark.integration
def test_sees_a_veth_pair(baseline: frozenset[str]) -> None:
    a, b = "pk-lk-a", "pk-lk-b"
    subprocess.run(["ip", "link", "add", a, "type", "veth", "peer", "name", b], check=True)
    try:
        assert _leaks.diff(baseline, private_snapshot()) == [f"link {a} (veth)", f"link {b} (veth)"]
    finally:
        subprocess.run(["ip", "link", "del", a], check=True)
    assert _leaks.diff(baseline, private_snapshot()) == []


@pytest.mark.integration
def test_sees_a_bridge(baseline: frozenset[str]) -> None:
    subprocess.run(["ip", "link", "add", "pk-lk-br", "type", "bridge"], check=True)
    try:
        assert _leaks.diff(baseline, private_snapshot()) == ["link pk-lk-br (bridge)"]
    finally:
        subprocess.run(["ip", "link", "del", "pk-lk-br"], check=True)


@pytest.mark.integration
def test_sees_a_pinned_netns_and_its_mount(baseline: frozenset[str]) -> None:
    name = f"pk-lk-{uuid.uuid4().hex[:8]}"
    ns = netns.create(name)
    try:
        assert _leaks.diff(baseline, private_snapshot()) == [
            f"mount /run/netns/{name} (nsfs)",
            f"netns /run/netns/{name}",
        ]
        subprocess.run(["umount", ns.path], check=True)  # a stale pin file still counts
        assert _leaks.diff(baseline, private_snapshot()) == [f"netns /run/netns/{name}"]
    finally:
        ns.remove()


@pytest.mark.integration
def test_sees_mounts_under_pytest_tmp(baseline: frozenset[str], tmp_path: Path) -> None:
    target = tmp_path / "m nt"
    target.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "pk-lk", str(target)], check=True)
    try:
        assert _leaks.diff(baseline, private_snapshot()) == [f"mount {target} (tmpfs)"]
        subprocess.run(["mount", "--bind", str(target), str(target)], check=True)
        assert _leaks.diff(baseline, private_snapshot()) == [
            f"mount {target} (tmpfs)",
            f"mount {target} (tmpfs) #2",
        ]
        subprocess.run(["umount", str(target)], check=True)
    finally:
        subprocess.run(["umount", str(target)], check=True)


@pytest.mark.integration
def test_sees_a_podkit_cgroup() -> None:
    require_root()
    hierarchy = Path(_leaks.CGROUP_ROOT) / "pids"
    if not hierarchy.is_dir():  # cgroup v2 only host
        hierarchy = Path(_leaks.CGROUP_ROOT)
    before = _leaks.snapshot(["cgroup"])
    group = hierarchy / f"pk-lk-{os.getpid()}-{uuid.uuid4().hex[:6]}"
    group.mkdir()
    try:
        (group / "child").mkdir()
        try:
            new = _leaks.diff(before, _leaks.snapshot(["cgroup"]))
            # other sessions on this host may make pk-* cgroups meanwhile: look at ours only
            assert [item for item in new if str(group) in item] == [
                f"cgroup {group}",
                f"cgroup {group}/child",
            ]
        finally:
            (group / "child").rmdir()
    finally:
        group.rmdir()
    assert f"cgroup {group}" not in _leaks.snapshot()


@pytest.mark.integration
def test_links_are_those_of_the_calling_threads_namespace() -> None:
    require_isolated()
    ns = netns.create(f"pk-lk-{uuid.uuid4().hex[:8]}", loopback_up=True)
    try:

        def inside() -> tuple[list[tuple[str, str]], set[str]]:
            subprocess.run(
                ["ip", "link", "add", "pk-lk-in", "type", "veth", "peer", "name", "pk-lk-in2"],
                check=True,
            )
            return _leaks.list_links(), _leaks.links()

        # the subprocess started by the thread inherits its namespace
        listed, items = ns.run(inside)
        assert sorted(listed) == [("lo", ""), ("pk-lk-in", "veth"), ("pk-lk-in2", "veth")]
        assert items == {"link pk-lk-in (veth)", "link pk-lk-in2 (veth)"}
        assert "link pk-lk-in (veth)" not in _leaks.snapshot()
    finally:
        ns.remove()


def test_state_entries_lists_default_dirs_two_levels_deep(tmp_path: Path) -> None:
    (tmp_path / "run" / "pods" / "containers" / "deep").mkdir(parents=True)
    (tmp_path / "run" / "pods" / "manager.lock").write_text("")
    got = _leaks.state_entries([str(tmp_path / "run"), str(tmp_path / "missing")])
    assert got == {
        f"state {tmp_path}/run",
        f"state {tmp_path}/run/pods",
        f"state {tmp_path}/run/pods/containers",
        f"state {tmp_path}/run/pods/manager.lock",
    }
