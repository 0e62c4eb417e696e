"""podkit.netns: pinned network namespaces.

Unit tests cover names, paths and the refusals that need no privileges; integration tests
(``scripts/isolated``) create real namespaces, look inside them with pyroute2, ``ip`` and
``nsenter``, and check that the caller's namespace and the mount table are left as they were.
"""

from __future__ import annotations

import os
import subprocess
import threading
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from pyroute2 import IPRoute

import _leaks
from podkit import errors, netns
from support import require_binary, require_isolated

MY_NS = "/proc/thread-self/ns/net"


def ns_inode(path: str | os.PathLike[str] = MY_NS) -> int:
    return os.stat(path).st_ino


def unique(tag: str = "") -> str:
    return f"pk-netns-{tag}{uuid.uuid4().hex[:8]}"


def mount_entries(point: Path | str) -> list[tuple[str, str]]:
    """(fstype, optional fields) of every mount exactly at ``point``, bottom first."""
    out = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        f = line.split()
        if f[4] == str(point):
            sep = f.index("-", 6)
            out.append((f[sep + 1], " ".join(f[6:sep])))
    return out


def private_snapshot() -> frozenset[str]:
    """What tests/_leaks.py sees that is private to scripts/isolated (no host-wide state)."""
    return _leaks.snapshot(["netns", "link", "mount"])


def links_inside() -> list[tuple[str, bool]]:
    """Run inside a namespace: (name, is up) of every link, via pyroute2 netlink."""
    with IPRoute() as ipr:
        return sorted((link.get("ifname"), bool(link["flags"] & 1)) for link in ipr.get_links())


def umount_all(point: Path) -> None:
    while mount_entries(point):
        subprocess.run(["umount", "-l", str(point)], check=True)


# --- unit ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name", ["", "../etc", "a/b", ".hidden", "-x", "x" * 129, "sp ace", "n\0ul", "..", "."]
)
def test_create_refuses_bad_names_before_touching_anything(tmp_path: Path, name: str) -> None:
    d = tmp_path / "ns"
    with pytest.raises(netns.InvalidArgumentError, match="invalid netns name") as info:
        netns.create(name, dir=d)
    assert isinstance(info.value, errors.InvalidArgumentError)
    assert str(d) in str(info.value)
    assert not d.exists()


def test_error_kinds_are_podkit_kinds() -> None:
    assert issubclass(netns.NotFoundError, errors.NotFoundError)
    assert issubclass(netns.AlreadyExistsError, errors.AlreadyExistsError)
    assert issubclass(netns.InvalidArgumentError, errors.InvalidArgumentError)
    for cls in (netns.NotFoundError, netns.AlreadyExistsError, netns.InvalidArgumentError):
        assert issubclass(cls, netns.NetNSError)
        assert issubclass(cls, errors.PodkitError)


def test_handle_paths(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    ns = netns.NetNS("pins/pk-a")
    assert ns.path == str(tmp_path / "pins" / "pk-a")
    assert ns.name == "pk-a"
    assert os.fspath(ns) == ns.path
    assert netns.NetNS(tmp_path / "pins" / "pk-a") == ns
    assert netns.DEFAULT_DIR == "/var/run/netns"


def test_missing_paths(tmp_path: Path) -> None:
    missing = tmp_path / "nope"
    assert not netns.exists(missing)
    assert netns.NetNS(missing).closed()
    assert netns.list_netns(missing) == []
    with pytest.raises(netns.NotFoundError, match=str(missing)):
        netns.open_netns(missing)
    with pytest.raises(netns.NotFoundError, match=str(missing)):
        netns.run_in(missing, lambda: None)
    with pytest.raises(netns.NotFoundError, match=str(missing)), netns.enter(missing):
        pass
    netns.remove(missing)  # idempotent: nothing to do
    netns.remove(tmp_path / "not-a-dir" / "x")


def test_foreign_files_are_refused_and_kept(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.write_text("precious")
    folder = tmp_path / "folder"
    folder.mkdir()
    for path in (data, folder):
        assert not netns.exists(path)
        with pytest.raises(netns.InvalidArgumentError, match="not a network namespace") as info:
            netns.open_netns(path)
        assert info.value.path == str(path)
        with pytest.raises(netns.InvalidArgumentError, match=str(path)):
            netns.remove(path)
        with pytest.raises(netns.InvalidArgumentError, match=str(path)):
            netns.run_in(path, lambda: None)
    assert data.read_text() == "precious"
    assert folder.is_dir()
    assert netns.list_netns(tmp_path) == []


def test_stale_pin_file_is_not_a_namespace_but_is_removable(tmp_path: Path) -> None:
    stale = tmp_path / "pk-stale"
    stale.touch()
    assert not netns.exists(stale)
    assert netns.list_netns(tmp_path) == []
    with pytest.raises(netns.InvalidArgumentError, match="stale"):
        netns.open_netns(stale)
    netns.remove(stale)
    assert not stale.exists()


# --- integration -----------------------------------------------------------------------------


@pytest.fixture
def ns_dir(tmp_path: Path) -> Iterator[Path]:
    """A netns directory owned by the test; pins and its shared self-bind are undone after."""
    require_isolated()
    d = tmp_path / "netns"
    yield d
    if d.is_dir():
        for name in os.listdir(d):
            netns.remove(d / name)
    umount_all(d)


@pytest.mark.integration
def test_create_pins_a_fresh_namespace(ns_dir: Path) -> None:
    mine = ns_inode()
    name = unique()
    ns = netns.create(name, dir=ns_dir)
    assert ns_inode() == mine
    assert ns.path == str(ns_dir / name) and ns.name == name
    assert ns.exists() and not ns.closed() and netns.exists(ns.path)
    assert ns_inode(ns.path) != mine
    assert [fstype for fstype, _ in mount_entries(ns.path)] == ["nsfs"]
    assert netns.list_netns(ns_dir) == [name]
    assert netns.open_netns(ns.path) == ns
    assert ns.run(links_inside) == [("lo", False)]  # a new namespace: only lo, down
    ns.remove()
    assert not os.path.exists(ns.path) and not mount_entries(ns.path)
    assert ns.closed()


@pytest.mark.integration
def test_directory_becomes_a_shared_mount_point(ns_dir: Path) -> None:
    ns = netns.create(unique(), dir=ns_dir)
    ((_, optional),) = mount_entries(ns_dir)  # one self-bind, not one per namespace
    assert "shared:" in optional
    netns.create(unique(), dir=ns_dir).remove()
    assert len(mount_entries(ns_dir)) == 1
    ns.remove()


@pytest.mark.integration
def test_release_dir_undoes_the_directory_once_it_pins_nothing(ns_dir: Path) -> None:
    ns = netns.create(unique(), dir=ns_dir)
    assert netns.release_dir(ns_dir) is False  # a pin: nothing is touched
    assert len(mount_entries(ns_dir)) == 1 and ns.exists()
    ns.remove()
    assert netns.release_dir(ns_dir) is True
    assert not ns_dir.exists() and mount_entries(ns_dir) == []
    assert netns.release_dir(ns_dir) is True  # gone already
    ns_dir.mkdir()  # never made a mount point: removed all the same
    assert netns.release_dir(ns_dir) is True and not ns_dir.exists()
    netns.create(unique(), dir=ns_dir).remove()  # made again on the next create
    assert len(mount_entries(ns_dir)) == 1


@pytest.mark.integration
def test_loopback_up_seen_by_pyroute2_and_iproute2(ns_dir: Path) -> None:
    nsenter = require_binary("nsenter")
    ns = netns.create(unique(), dir=ns_dir, loopback_up=True)
    try:
        assert netns.run_in(ns.path, links_inside) == [("lo", True)]
        out = subprocess.run(
            [nsenter, f"--net={ns.path}", "ip", "-o", "link"],
            check=True,
            capture_output=True,
            text=True,
        ).stdout
        assert out.count("\n") == 1 and ": lo: <LOOPBACK,UP,LOWER_UP>" in out
    finally:
        ns.remove()


@pytest.mark.integration
def test_default_dir_works_with_ip_netns() -> None:
    require_isolated()  # /run/netns is a private tmpfs inside scripts/isolated
    name = unique()
    ns = netns.create(name, loopback_up=True)
    try:
        assert ns.path == f"/var/run/netns/{name}"
        assert name in netns.list_netns()
        listed = subprocess.run(["ip", "netns", "list"], check=True, capture_output=True, text=True)
        assert name in listed.stdout.split()
        out = subprocess.run(
            ["ip", "-n", name, "-o", "addr", "show", "lo"],
            check=True,
            capture_output=True,
            text=True,
        ).stdout
        assert "inet 127.0.0.1/8" in out
    finally:
        ns.remove()
    assert name not in netns.list_netns()
    assert not os.path.exists(f"/run/netns/{name}")


@pytest.mark.integration
def test_create_twice_is_already_exists_and_keeps_the_first(ns_dir: Path) -> None:
    name = unique()
    ns = netns.create(name, dir=ns_dir)
    inode = ns_inode(ns.path)
    with pytest.raises(netns.AlreadyExistsError, match=str(ns_dir / name)) as info:
        netns.create(name, dir=ns_dir)
    assert isinstance(info.value, errors.AlreadyExistsError)
    assert ns.exists() and ns_inode(ns.path) == inode
    assert len(mount_entries(ns.path)) == 1
    ns.remove()


@pytest.mark.integration
def test_remove_is_idempotent(ns_dir: Path) -> None:
    ns = netns.create(unique(), dir=ns_dir)
    ns.remove()
    ns.remove()
    netns.remove(ns.path)
    assert not os.path.exists(ns.path) and not mount_entries(ns.path)


@pytest.mark.integration
def test_remove_after_someone_else_unmounted(ns_dir: Path) -> None:
    name = unique()
    ns = netns.create(name, dir=ns_dir)
    subprocess.run(["umount", ns.path], check=True)
    assert os.path.exists(ns.path)
    assert ns.closed() and not ns.exists()
    assert netns.list_netns(ns_dir) == []
    with pytest.raises(netns.AlreadyExistsError, match="stale"):
        netns.create(name, dir=ns_dir)
    with pytest.raises(netns.InvalidArgumentError, match="stale"):
        netns.open_netns(ns.path)
    ns.remove()
    assert not os.path.exists(ns.path)
    netns.create(name, dir=ns_dir).remove()  # the name is free again


@pytest.mark.integration
def test_remove_unmounts_stacked_pins(ns_dir: Path) -> None:
    ns = netns.create(unique(), dir=ns_dir)
    subprocess.run(["mount", "--bind", ns.path, ns.path], check=True)
    assert len(mount_entries(ns.path)) == 2
    ns.remove()
    assert not os.path.exists(ns.path) and not mount_entries(ns.path)


@pytest.mark.integration
def test_symlinks_are_followed_for_use_but_not_removed_through(ns_dir: Path) -> None:
    ns = netns.create(unique(), dir=ns_dir)
    link = ns_dir.parent / "link"
    link.symlink_to(ns.path)
    assert netns.exists(link)
    assert netns.open_netns(link).path == str(link)
    assert netns.run_in(link, ns_inode) == ns_inode(ns.path)
    with pytest.raises(netns.InvalidArgumentError, match="refusing to remove"):
        netns.remove(link)
    assert ns.exists() and link.is_symlink()
    ns.remove()
    link.unlink()


@pytest.mark.integration
def test_remove_refuses_other_namespace_types(ns_dir: Path) -> None:
    ns_dir.mkdir()
    uts = ns_dir / "uts"
    uts.touch()
    subprocess.run(["mount", "--bind", "/proc/self/ns/uts", str(uts)], check=True)
    try:
        assert not netns.exists(uts)
        with pytest.raises(netns.InvalidArgumentError, match="not a network namespace"):
            netns.remove(uts)
        assert mount_entries(uts)
    finally:
        subprocess.run(["umount", str(uts)], check=True)
        uts.unlink()


@pytest.mark.integration
def test_open_existing_namespace_made_by_ip_netns() -> None:
    require_isolated()
    name = unique("ip-")
    subprocess.run(["ip", "netns", "add", name], check=True)
    try:
        ns = netns.open_netns(f"/run/netns/{name}")
        assert ns.name == name and ns.exists()
        assert ns.run(links_inside) == [("lo", False)]
    finally:
        subprocess.run(["ip", "netns", "delete", name], check=True)
    assert ns.closed()


class Boom(Exception):
    pass


@pytest.mark.integration
def test_run_in_returns_results_and_raises_exceptions(ns_dir: Path) -> None:
    ns = netns.create(unique(), dir=ns_dir)
    mine = ns_inode()
    seen: list[int] = []

    def inside(a: int, *, b: int) -> int:
        seen.append(ns_inode())
        return a + b

    assert netns.run_in(ns.path, inside, 1, b=2) == 3
    assert seen == [ns_inode(ns.path)]
    error = Boom("from inside")

    def fail() -> None:
        seen.append(ns_inode())
        raise error

    with pytest.raises(Boom) as info:
        netns.run_in(ns.path, fail)
    assert info.value is error
    assert seen[-1] == ns_inode(ns.path)
    assert ns_inode() == mine
    ns.remove()


@pytest.mark.integration
def test_namespaces_are_separate(ns_dir: Path) -> None:
    a = netns.create(unique("a-"), dir=ns_dir)
    b = netns.create(unique("b-"), dir=ns_dir)

    def add_veth() -> None:
        with IPRoute() as ipr:
            ipr.link("add", ifname="pk-v0", kind="veth", peer="pk-v1")

    a.run(add_veth)
    assert [n for n, _ in a.run(links_inside)] == ["lo", "pk-v0", "pk-v1"]
    assert [n for n, _ in b.run(links_inside)] == ["lo"]
    assert "link pk-v0 (veth)" not in _leaks.links()
    a.remove()
    b.remove()


@pytest.mark.integration
def test_enter_switches_only_the_calling_thread_and_restores(ns_dir: Path) -> None:
    a = netns.create(unique("a-"), dir=ns_dir)
    b = netns.create(unique("b-"), dir=ns_dir)
    mine = ns_inode()
    other_thread: list[int] = []
    look, looked = threading.Event(), threading.Event()

    def bystander() -> None:  # started before enter(): must stay where it is
        look.wait()
        other_thread.append(ns_inode())
        looked.set()

    t = threading.Thread(target=bystander)
    t.start()
    with netns.enter(a.path) as entered:
        assert entered == a
        assert ns_inode() == ns_inode(a.path)
        look.set()
        looked.wait()
        with netns.enter(b):
            assert ns_inode() == ns_inode(b.path)
        assert ns_inode() == ns_inode(a.path)
    t.join()
    assert other_thread == [mine]
    assert ns_inode() == mine
    with pytest.raises(Boom), netns.enter(a.path):
        raise Boom
    assert ns_inode() == mine
    a.remove()
    b.remove()


@pytest.mark.integration
def test_twenty_concurrent_creates_and_removes(ns_dir: Path) -> None:
    mine = ns_inode()
    names = [unique(f"c{i}-") for i in range(20)]
    with ThreadPoolExecutor(max_workers=20) as pool:
        created = list(pool.map(lambda n: netns.create(n, dir=ns_dir, loopback_up=True), names))
    assert netns.list_netns(ns_dir) == sorted(names)
    assert len({ns_inode(ns.path) for ns in created}) == 20
    assert all(ns.run(links_inside) == [("lo", True)] for ns in created)
    assert len(mount_entries(ns_dir)) == 1
    with ThreadPoolExecutor(max_workers=20) as pool:
        list(pool.map(lambda ns: ns.remove(), created))
    assert os.listdir(ns_dir) == []
    assert not any(mount_entries(ns.path) for ns in created)
    assert ns_inode() == mine


# --- failure injection: a failed create leaves no file and no mount --------------------------


@pytest.mark.integration
def test_read_only_dir_leaves_nothing(ns_dir: Path) -> None:
    ns_dir.mkdir()
    subprocess.run(["mount", "--bind", str(ns_dir), str(ns_dir)], check=True)
    subprocess.run(["mount", "-o", "remount,bind,ro", str(ns_dir)], check=True)
    before = private_snapshot()
    with pytest.raises(netns.NetNSError, match=str(ns_dir / "pk-ro")) as info:
        netns.create("pk-ro", dir=ns_dir)
    assert "Read-only file system" in str(info.value)
    assert _leaks.diff(before, private_snapshot()) == []
    assert os.listdir(ns_dir) == []


@pytest.mark.integration
def test_dir_that_is_a_file_is_refused(tmp_path: Path) -> None:
    require_isolated()
    plain = tmp_path / "plain"
    plain.write_text("x")
    with pytest.raises(netns.InvalidArgumentError, match=str(plain)):
        netns.create("pk-x", dir=plain)
    assert plain.read_text() == "x"
    assert not mount_entries(plain)


@pytest.mark.integration
def test_failure_before_the_mount_leaves_nothing(
    ns_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    netns.create(unique(), dir=ns_dir).remove()  # directory set up
    before = private_snapshot()

    def no_loopback() -> None:
        raise Boom("netlink down")

    monkeypatch.setattr(netns, "_set_loopback_up", no_loopback)
    mine = ns_inode()
    with pytest.raises(Boom):
        netns.create("pk-fail", dir=ns_dir, loopback_up=True)
    assert os.listdir(ns_dir) == []
    assert _leaks.diff(before, private_snapshot()) == []
    assert ns_inode() == mine


@pytest.mark.integration
def test_failure_after_the_mount_leaves_nothing(
    ns_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    netns.create(unique(), dir=ns_dir).remove()
    before = private_snapshot()
    real_mount = netns._mount

    def mount_then_fail(source: str | None, target: str, flags: int) -> None:
        real_mount(source, target, flags)
        if target.endswith("pk-late"):
            assert mount_entries(target)  # the pin really was mounted
            raise OSError(5, "injected failure", target)

    monkeypatch.setattr(netns, "_mount", mount_then_fail)
    with pytest.raises(netns.NetNSError, match="injected failure"):
        netns.create("pk-late", dir=ns_dir)
    assert os.listdir(ns_dir) == []
    assert not mount_entries(ns_dir / "pk-late")
    assert _leaks.diff(before, private_snapshot()) == []


@pytest.mark.integration
def test_shm_mount_and_unmount_failures_are_netns_errors(tmp_path: Path) -> None:
    require_isolated()
    shm = tmp_path / "shm"
    with pytest.raises(netns.NetNSError, match=f"mount tmpfs on {shm}: ") as info:
        netns.mount_shm(shm, 1 << 20)  # no such directory
    assert info.value.path == str(shm)
    netns.unmount_all(shm)  # no mount point: fine
    shm.mkdir()
    netns.mount_shm(shm, 1 << 20)
    netns.mount_shm(shm, 1 << 20)  # stacked
    assert [t for t, _ in mount_entries(shm)] == ["tmpfs", "tmpfs"]
    netns.unmount_all(shm)
    assert mount_entries(shm) == []


@pytest.mark.integration
def test_attach_pins_a_namespace_a_user_namespace_owns(ns_dir: Path) -> None:
    from podkit import idmap

    with idmap.Holder(idmap.IDMap.single(700000, 10), also=("net",)) as holder:
        made = ns_inode(holder.path("net"))
        user = os.readlink(holder.path("user"))
        ns = netns.attach(unique("att-"), holder.path("net"), dir=ns_dir, loopback_up=True)
    try:
        assert ns.exists() and ns_inode(ns.path) == made  # outlives the holder
        assert ns.run(links_inside) == [("lo", True)]
        owner = idmap.owner(ns.path)
        try:
            assert os.readlink(f"/proc/self/fd/{owner}") == user
        finally:
            os.close(owner)
    finally:
        ns.remove()
    assert os.listdir(ns_dir) == []


@pytest.mark.integration
def test_attach_refuses_what_is_no_network_namespace(ns_dir: Path) -> None:
    with pytest.raises(netns.InvalidArgumentError, match="not a network namespace"):
        netns.attach(unique(), "/proc/self/ns/ipc", dir=ns_dir)
    with pytest.raises(netns.NotFoundError):
        netns.attach(unique(), ns_dir / "missing", dir=ns_dir)
    assert not ns_dir.exists() or os.listdir(ns_dir) == []


@pytest.mark.integration
def test_pin_and_unpin_any_namespace(tmp_path: Path) -> None:
    require_isolated()
    pin = tmp_path / "user"
    netns.pin("/proc/self/ns/user", pin)
    try:
        assert ns_inode(pin) == ns_inode("/proc/self/ns/user")
        with pytest.raises(netns.NetNSError, match=f"create the pin file {pin}"):
            netns.pin("/proc/self/ns/user", pin)  # taken
    finally:
        netns.unpin(pin)
    assert not pin.exists() and mount_entries(pin) == []
    netns.unpin(pin)  # idempotent
    with pytest.raises(netns.NetNSError, match=f"pin /nonexistent on {pin}"):
        netns.pin("/nonexistent", pin)
    assert not pin.exists()
