"""What a test run must not leave behind, as a comparable snapshot.

``snapshot()`` returns a set of short strings, one per resource that tests create and must remove:
runc/crun containers (state directories in the default roots and in roots tests register with
``register_runtime_root``), pinned network namespaces, network links in the current network
namespace, host-local IPAM reservations, podkit cgroups (cgroupfs dirs, and the systemd
driver's ``cri-podkit-*.scope`` cgroups in any slice) and mounts under the test and podkit
directories, and, when systemd is PID 1, its ``cri-podkit-*`` units (a failed scope has no
cgroup but stays listed). ``diff(before, after)`` lists what is new. Everything is read from
/proc, /sys and the file system (plus one netlink dump, and one ``systemctl`` call under
systemd), so a snapshot takes a few milliseconds.
"""

from __future__ import annotations

import os
import shutil
import socket
import struct
import subprocess
import time
from collections import Counter
from collections.abc import Iterable, Iterator

DEFAULT_RUNTIME_ROOTS = ("/run/runc", "/run/crun", "/run/podkit/runc", "/run/podkit/crun")
NETNS_DIRS = ("/run/netns", "/var/run/netns")
DEFAULT_IPAM_DIRS = ("/var/lib/cni/networks",)
CGROUP_ROOT = "/sys/fs/cgroup"
CGROUP_PREFIXES = ("pk-", "pk_", "podkit")  # pk_: test slices (pk_x.slice, no '-' in it)
# Parents every podkit container's cgroup sits under (``/podkit/<id>``, like containerd's
# ``/k8s.io``): runtimes create them and leave them. Not a leak themselves; what is below them is.
NAMESPACE_CGROUPS = ("podkit",)
SCOPE_PREFIX = "cri-podkit-"  # the systemd driver's scopes: cri-podkit-<id>.scope
SYSTEMD_RUN_DIR = "/run/systemd/system"
MOUNT_PREFIXES = ("/run/netns/", "/tmp/pytest-", "/var/lib/podkit", "/run/podkit",
                  "/var/tmp/podkit-")  # the last: support.idmap_dir
IPAM_BOOKKEEPING = ("lock",)  # host-local's own files; last_reserved_ip.N is matched by prefix

_runtime_roots: set[str] = set()
_ipam_dirs: set[str] = set()


def register_runtime_root(path: str | os.PathLike[str]) -> None:
    """Have every later snapshot list the containers under this runc/crun ``--root`` too."""
    _runtime_roots.add(os.path.abspath(os.fspath(path)))


def register_ipam_dir(path: str | os.PathLike[str]) -> None:
    """Have every later snapshot list host-local reservations under this ``dataDir`` too."""
    _ipam_dirs.add(os.path.abspath(os.fspath(path)))


KINDS = ("container", "netns", "link", "ipam", "cgroup", "unit", "mount", "state")
# podkit's default state and data dirs: tests must use temp dirs, so anything new here leaked.
STATE_DIRS = ("/run/podkit", "/var/lib/podkit")


def snapshot(kinds: Iterable[str] = KINDS) -> frozenset[str]:
    """Everything that must not leak, as strings like ``"netns /run/netns/pk-x"``.

    ``kinds`` narrows it to some of ``KINDS`` (each item starts with its kind): a test in
    ``scripts/isolated`` can look at its private netns, links and mounts only, without seeing
    the host-wide containers, cgroups and IPAM files of whatever else runs on the machine.
    """
    wanted = set(kinds)
    if unknown := wanted - set(KINDS):
        raise ValueError(f"unknown leak kinds {sorted(unknown)}; known: {', '.join(KINDS)}")
    items: set[str] = set()
    if "container" in wanted:
        items.update(runtime_containers((*DEFAULT_RUNTIME_ROOTS, *sorted(_runtime_roots))))
    if "netns" in wanted:
        items.update(pinned_netns(NETNS_DIRS))
    if "link" in wanted:
        items.update(links())
    if "ipam" in wanted:
        items.update(ipam_reservations((*DEFAULT_IPAM_DIRS, *sorted(_ipam_dirs))))
    if "cgroup" in wanted:
        items.update(cgroups(CGROUP_ROOT, CGROUP_PREFIXES))
        items.update(scopes(CGROUP_ROOT))
    if "unit" in wanted:
        items.update(units())
    if "mount" in wanted:
        items.update(mounts(_read("/proc/self/mountinfo"), MOUNT_PREFIXES))
    if "state" in wanted:
        items.update(state_entries(STATE_DIRS))
    return frozenset(items)


def state_entries(dirs: Iterable[str], depth: int = 2) -> set[str]:
    """The dirs themselves and their entries down to ``depth`` levels, as ``"state <path>"``."""
    out: set[str] = set()

    def walk(path: str, level: int) -> None:
        out.add(f"state {path}")
        if level < depth and os.path.isdir(path) and not os.path.islink(path):
            for entry in os.scandir(path):
                walk(entry.path, level + 1)

    for d in dirs:
        if os.path.lexists(d):
            walk(d, 0)
    return out


def diff(before: Iterable[str], after: Iterable[str]) -> list[str]:
    """The items of ``after`` that were not in ``before``, sorted: what leaked in between."""
    return sorted(set(after) - set(before))


def leaked_since(
    before: Iterable[str], settle: float = 1.0, kinds: Iterable[str] = KINDS
) -> list[str]:
    """New items now compared with ``before``; looks twice, ``settle`` seconds apart, so
    teardown still finishing in the background (a container's exit, a lazy unmount) is not
    reported."""
    kinds = tuple(kinds)
    leaked = diff(before, snapshot(kinds))
    if leaked and settle > 0:
        time.sleep(settle)
        leaked = diff(before, snapshot(kinds))
    return leaked


# --- one function per kind of resource ------------------------------------------------------


def _read(path: str) -> str:
    with open(path, encoding="utf-8", errors="surrogateescape") as f:
        return f.read()


def _subdirs(path: str) -> Iterator[os.DirEntry[str]]:
    try:
        with os.scandir(path) as it:
            entries = list(it)
    except (FileNotFoundError, NotADirectoryError, PermissionError):
        return
    for e in entries:
        try:
            if e.is_dir(follow_symlinks=False):
                yield e
        except OSError:
            continue


def runtime_containers(roots: Iterable[str]) -> set[str]:
    """Containers known to runc/crun: one state directory per container under each root."""
    out: set[str] = set()
    for root in dict.fromkeys(os.path.realpath(r) for r in roots):
        out.update(f"container {root}/{e.name}" for e in _subdirs(root))
    return out


def pinned_netns(dirs: Iterable[str]) -> set[str]:
    """Every file in the netns pin directories (live pins and stale pin files alike)."""
    out: set[str] = set()
    for d in dict.fromkeys(os.path.realpath(x) for x in dirs):
        try:
            names = os.listdir(d)
        except (FileNotFoundError, NotADirectoryError, PermissionError):
            continue
        out.update(f"netns {d}/{n}" for n in names)
    return out


def ipam_reservations(dirs: Iterable[str]) -> set[str]:
    """host-local reservations: ``<dataDir>/<network>/<ip>`` files (not its lock/last files)."""
    out: set[str] = set()
    for d in dict.fromkeys(os.path.realpath(x) for x in dirs):
        for net in _subdirs(d):
            try:
                names = os.listdir(net.path)
            except OSError:
                continue
            out.update(
                f"ipam {net.path}/{n}"
                for n in names
                if n not in IPAM_BOOKKEEPING and not n.startswith("last_reserved_ip")
            )
    return out


def cgroups(root: str, prefixes: tuple[str, ...], depth: int = 4) -> set[str]:
    """Cgroup directories named ``pk-*``/``podkit*`` at the top of each hierarchy, with subtrees.

    A ``NAMESPACE_CGROUPS`` parent itself is not listed, only what is below it.

    Handles v1 (``/sys/fs/cgroup/<controller>/pk-x``) and a v2 root (``/sys/fs/cgroup/pk-x``);
    controller symlinks such as ``cpu -> cpu,cpuacct`` are skipped.
    """
    out: set[str] = set()

    def walk(path: str, level: int) -> None:
        if level > 1 or os.path.basename(path) not in NAMESPACE_CGROUPS:
            out.add(f"cgroup {path}")
        if level < depth:
            for sub in _subdirs(path):
                walk(sub.path, level + 1)

    for top in _subdirs(root):
        if top.name.startswith(prefixes):  # cgroup v2 mounted at the root
            walk(top.path, 1)
            continue
        if not os.path.exists(os.path.join(top.path, "cgroup.procs")):
            continue  # not a hierarchy (e.g. the tmpfs scripts/isolated puts over `unified`)
        for child in _subdirs(top.path):
            if child.name.startswith(prefixes):
                walk(child.path, 1)
    return out


def _hierarchies(root: str) -> list[str]:
    """The cgroup hierarchies under ``root``: itself (v2 mounted there) or each v1 one."""
    if os.path.exists(os.path.join(root, "cgroup.procs")):
        return [root]
    return [t.path for t in _subdirs(root) if os.path.exists(os.path.join(t.path, "cgroup.procs"))]


def scopes(root: str, depth: int = 6) -> set[str]:
    """The systemd driver's scopes (``cri-podkit-*.scope``) in any slice of each hierarchy,
    as ``"cgroup <path>"``; only ``*.slice`` dirs are walked, ``depth`` levels at most."""
    out: set[str] = set()

    def walk(path: str, level: int) -> None:
        for sub in _subdirs(path):
            if sub.name.startswith(SCOPE_PREFIX) and sub.name.endswith(".scope"):
                out.add(f"cgroup {sub.path}")
            elif sub.name.endswith(".slice") and level < depth:
                walk(sub.path, level + 1)

    for top in _hierarchies(root):
        walk(top, 1)
    return out


def units(run_dir: str = SYSTEMD_RUN_DIR) -> set[str]:
    """systemd's ``cri-podkit-*`` units, loaded in any state, as ``"unit <name>"``; none
    without systemd as PID 1 (``run_dir`` missing) or without ``systemctl``."""
    systemctl = shutil.which("systemctl")
    if not os.path.isdir(run_dir) or systemctl is None:
        return set()
    out = subprocess.run(
        [systemctl, "list-units", "--all", "--plain", "--no-legend", "--full",
         f"{SCOPE_PREFIX}*"], capture_output=True, text=True, timeout=30, check=False,
        env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "SYSTEMD_PAGER": ""})
    return {f"unit {line.split()[0]}" for line in out.stdout.splitlines() if line.strip()}


def _unescape(field: str) -> str:
    r"""mountinfo escapes space, tab, newline and backslash as ``\ooo`` octal."""
    if "\\" not in field:
        return field
    out, i = [], 0
    while i < len(field):
        if field[i] == "\\" and field[i + 1 : i + 4].isdigit():
            out.append(chr(int(field[i + 1 : i + 4], 8)))
            i += 4
        else:
            out.append(field[i])
            i += 1
    return "".join(out)


def mounts(mountinfo: str, prefixes: tuple[str, ...]) -> set[str]:
    """Mounts (from /proc/self/mountinfo text) whose mount point starts with one of ``prefixes``.

    Stacked mounts on one path count separately (``#2``, ``#3``...), so a second mount over a
    path that was already mounted at the start still shows up.
    """
    seen: Counter[tuple[str, str]] = Counter()
    out: set[str] = set()
    for line in mountinfo.splitlines():
        fields = line.split()
        if len(fields) < 10 or "-" not in fields[6:]:
            continue
        point = _unescape(fields[4])
        if not point.startswith(prefixes):
            continue
        fstype = fields[fields.index("-", 6) + 1]
        key = (point, fstype)
        seen[key] += 1
        suffix = f" #{seen[key]}" if seen[key] > 1 else ""
        out.add(f"mount {point} ({fstype}){suffix}")
    return out


# --- network links via one rtnetlink dump (no pyroute2 import: keeps a snapshot fast) -------

_RTM_NEWLINK, _RTM_GETLINK = 16, 18
_NLMSG_ERROR, _NLMSG_DONE = 2, 3
_NLM_F_REQUEST, _NLM_F_DUMP = 0x1, 0x300
_IFLA_IFNAME, _IFLA_LINKINFO, _IFLA_INFO_KIND = 3, 18, 1
_NLMSG_HDR = struct.Struct("=IHHII")
_IFINFOMSG = struct.Struct("=BxHiII")
_RTATTR = struct.Struct("=HH")


def _attrs(data: bytes) -> Iterator[tuple[int, bytes]]:
    off = 0
    while off + _RTATTR.size <= len(data):
        length, kind = _RTATTR.unpack_from(data, off)
        if length < _RTATTR.size:
            return
        yield kind & 0x3FFF, data[off + _RTATTR.size : off + length]
        off += (length + 3) & ~3


def parse_link(payload: bytes) -> tuple[str, str]:
    """(name, kind) of one RTM_NEWLINK payload; kind is ``""`` for devices without linkinfo."""
    name, kind = "", ""
    for t, value in _attrs(payload[_IFINFOMSG.size :]):
        if t == _IFLA_IFNAME:
            name = value.split(b"\0", 1)[0].decode()
        elif t == _IFLA_LINKINFO:
            for t2, v2 in _attrs(value):
                if t2 == _IFLA_INFO_KIND:
                    kind = v2.split(b"\0", 1)[0].decode()
    return name, kind


def list_links() -> list[tuple[str, str]]:
    """(name, kind) of every link in the calling thread's network namespace."""
    with socket.socket(socket.AF_NETLINK, socket.SOCK_RAW | socket.SOCK_CLOEXEC, 0) as s:
        s.bind((0, 0))
        body = _IFINFOMSG.pack(socket.AF_UNSPEC, 0, 0, 0, 0)
        header = _NLMSG_HDR.pack(
            _NLMSG_HDR.size + len(body), _RTM_GETLINK, _NLM_F_REQUEST | _NLM_F_DUMP, 1, 0
        )
        s.sendall(header + body)
        found: list[tuple[str, str]] = []
        while True:
            data = s.recv(1 << 16)
            off = 0
            while off + _NLMSG_HDR.size <= len(data):
                length, mtype, _flags, _seq, _pid = _NLMSG_HDR.unpack_from(data, off)
                if length < _NLMSG_HDR.size:
                    raise OSError("malformed netlink message in link dump")
                if mtype == _NLMSG_DONE:
                    return found
                if mtype == _NLMSG_ERROR:
                    (code,) = struct.unpack_from("=i", data, off + _NLMSG_HDR.size)
                    raise OSError(-code, f"RTM_GETLINK dump failed: {os.strerror(-code)}")
                if mtype == _RTM_NEWLINK:
                    found.append(parse_link(data[off + _NLMSG_HDR.size : off + length]))
                off += (length + 3) & ~3


def links() -> set[str]:
    """Every link but loopback in the current network namespace (veths, bridges, dummies...)."""
    return {f"link {name} ({kind or 'device'})" for name, kind in list_links() if name != "lo"}
