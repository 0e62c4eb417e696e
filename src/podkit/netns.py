"""Pinned network namespaces: create, open, list, run code inside, remove.

A pinned namespace is an empty file with the namespace's ``nsfs`` inode bind-mounted onto it, as
``ip netns add`` and containerd's ``pkg/netns`` make them; the namespace lives as long as the mount,
with no process inside. The file's path is what CNI plugins get as ``CNI_NETNS`` and what an OCI
spec names in ``linux.namespaces[].path``.

    ns = netns.create("pk-demo", loopback_up=True)      # /var/run/netns/pk-demo
    links = netns.run_in(ns.path, list_links)            # fn runs inside, in its own thread
    ns.remove()                                          # unmount + unlink; idempotent

The caller's own namespace is never touched: creation and :func:`run_in` happen in a dedicated OS
thread that ends afterwards. Netlink work (loopback up) goes through pyroute2.

A pod without a pause container pins its IPC and UTS namespaces the same way
(:func:`pin_namespaces`) and mounts its own /dev/shm (:func:`mount_shm`); a pod with a user
namespace of its own gets a network namespace that namespace owns (:func:`attach`, from a
process in it) and pins the user namespace too (:func:`pin`).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import socket
import stat
import struct
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, ParamSpec, TypeVar

import attrs

from podkit import _linux, errors
from podkit._files import StrPath, validate_id

__all__ = [
    "DEFAULT_DIR",
    "AlreadyExistsError",
    "InvalidArgumentError",
    "NetNS",
    "NetNSError",
    "NotFoundError",
    "attach",
    "create",
    "enter",
    "exists",
    "list_netns",
    "mount_shm",
    "open_netns",
    "pin",
    "pin_namespaces",
    "release_dir",
    "remove",
    "run_in",
    "unmount_all",
    "unpin",
]

DEFAULT_DIR = "/var/run/netns"
"""Where ``ip netns`` and containerd pin namespaces (``/var/run`` is ``/run`` on most hosts)."""

_CLONE_NEWNET = _linux.CLONE_NEWNET
_MS_BIND, _MS_REC, _MS_SHARED = _linux.MS_BIND, _linux.MS_REC, _linux.MS_SHARED
_MNT_DETACH, _UMOUNT_NOFOLLOW = _linux.MNT_DETACH, _linux.UMOUNT_NOFOLLOW
_NS_GET_NSTYPE = 0xB703  # _IO(0xb7, 0x3), Linux >= 4.11
_MAX_STACKED_MOUNTS = 16

P = ParamSpec("P")
T = TypeVar("T")


class NetNSError(errors.PodkitError):
    """A network namespace operation failed; ``path`` names the namespace file."""

    def __init__(self, message: str, path: str = "") -> None:
        super().__init__(message)
        self.path = path


class NotFoundError(NetNSError, errors.NotFoundError):
    """The namespace file does not exist."""


class AlreadyExistsError(NetNSError, errors.AlreadyExistsError):
    """Creating a namespace whose file already exists."""


class InvalidArgumentError(NetNSError, errors.InvalidArgumentError):
    """A bad name or directory, or a path that is not a pinned network namespace."""


# --- syscalls -------------------------------------------------------------------------------


def _mount(source: str | None, target: str, flags: int) -> None:
    _linux.mount(source, target, None, flags)


def _umount(target: str) -> None:
    _linux.umount(target, _MNT_DETACH | _UMOUNT_NOFOLLOW)


def _unshare_net() -> None:
    _linux.unshare(_CLONE_NEWNET)


def _setns(fd: int, path: str) -> None:
    _linux.setns(fd, _CLONE_NEWNET, path)


# --- inspection -----------------------------------------------------------------------------

_MISSING, _NETNS, _STALE, _OTHER = "missing", "netns", "stale", "other"


def _kind(path: str, *, follow: bool = True) -> str:
    """Classify ``path``: a live net namespace pin, a stale (unmounted) empty pin file, ...

    ``follow=False`` classifies a symlink itself (as "other"), for ``remove``.
    """
    try:
        st = os.stat(path, follow_symlinks=follow)
    except (FileNotFoundError, NotADirectoryError):
        return _MISSING
    if not stat.S_ISREG(st.st_mode):
        return _OTHER
    flags = os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK | (0 if follow else os.O_NOFOLLOW)
    try:
        fd = os.open(path, flags)
    except (FileNotFoundError, NotADirectoryError):
        return _MISSING
    except OSError:
        return _OTHER
    try:
        nstype = fcntl.ioctl(fd, _NS_GET_NSTYPE)
    except OSError:
        nstype = None
    finally:
        os.close(fd)
    if nstype == _CLONE_NEWNET:
        return _NETNS
    if nstype is None and st.st_size == 0:
        return _STALE
    return _OTHER


def _open_ns_fd(path: StrPath) -> tuple[str, int]:
    """Open a pinned net namespace for ``setns``; clear errors for missing or foreign files."""
    p = os.path.abspath(os.fspath(path))
    try:
        fd = os.open(p, os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK)
    except (FileNotFoundError, NotADirectoryError) as e:
        raise NotFoundError(f"network namespace {p} does not exist", p) from e
    except OSError as e:
        raise NetNSError(f"cannot open network namespace {p}: {e.strerror}", p) from e
    try:
        nstype = fcntl.ioctl(fd, _NS_GET_NSTYPE)
    except OSError:
        nstype = None
    if nstype != _CLONE_NEWNET:
        os.close(fd)
        what = "an unmounted (stale) pin file" if _kind(p) == _STALE else "not a network namespace"
        raise InvalidArgumentError(f"{p} is {what}", p)
    return p, fd


def exists(path: StrPath) -> bool:
    """True if ``path`` is a live pinned network namespace (an ``nsfs`` net mount)."""
    return _kind(os.path.abspath(os.fspath(path))) == _NETNS


def list_netns(dir: StrPath = DEFAULT_DIR) -> list[str]:
    """Names of the live pinned network namespaces in ``dir``, sorted (``ip netns list``).

    Stale pin files (unmounted by someone else) and foreign files are left out; a missing
    directory lists as empty.
    """
    d = os.path.abspath(os.fspath(dir))
    try:
        names = os.listdir(d)
    except (FileNotFoundError, NotADirectoryError):
        return []
    return sorted(n for n in names if _kind(os.path.join(d, n)) == _NETNS)


# --- the handle -----------------------------------------------------------------------------


def _abspath(path: StrPath) -> str:
    return os.path.abspath(os.fspath(path))


@attrs.frozen(slots=True)
class NetNS:
    """A pinned network namespace, known by the path of its pin file."""

    path: str = attrs.field(converter=_abspath)

    @property
    def name(self) -> str:
        """The pin file's name (``ip netns`` name when it lives in ``/var/run/netns``)."""
        return os.path.basename(self.path)

    def remove(self) -> None:
        """Unmount and unlink the pin; idempotent (see :func:`remove`)."""
        remove(self.path)

    def exists(self) -> bool:
        """True while the pin is a live network namespace mount."""
        return exists(self.path)

    def closed(self) -> bool:
        """True once the namespace is gone or unpinned (containerd's ``NetNS.Closed``)."""
        return not exists(self.path)

    def run(self, fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        """Call ``fn`` inside this namespace and return its result (see :func:`run_in`)."""
        return run_in(self.path, fn, *args, **kwargs)

    def __fspath__(self) -> str:
        return self.path


def open_netns(path: StrPath) -> NetNS:
    """Wrap an existing pinned network namespace (made by podkit, ``ip netns`` or containerd).

    Raises ``NotFoundError`` if the path is missing and ``InvalidArgumentError`` if it is not a
    mounted network namespace.
    """
    p, fd = _open_ns_fd(path)
    os.close(fd)
    return NetNS(p)


# --- create / remove ------------------------------------------------------------------------

_dir_lock = threading.Lock()


def _prepare_dir(d: str) -> None:
    """Create ``d`` and make it a shared mount point, as ``ip netns add`` does.

    Shared propagation lets a later unmount of a pin reach copies of it in mount namespaces
    cloned since (containers), so the namespace really goes away. A directory that is not yet
    a mount point is bind-mounted onto itself first. Serialised within the process by a lock
    and across processes by ``flock`` on the directory.
    """
    try:
        os.makedirs(d, mode=0o755, exist_ok=True)
        dfd = os.open(d, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except (NotADirectoryError, FileExistsError) as e:
        raise InvalidArgumentError(f"netns directory {d} is not a directory", d) from e
    except OSError as e:
        raise NetNSError(f"cannot create netns directory {d}: {e.strerror}", d) from e
    try:
        with _dir_lock:
            fcntl.flock(dfd, fcntl.LOCK_EX)
            try:
                _mount(None, d, _MS_SHARED | _MS_REC)
            except OSError as e:
                if e.errno != errno.EINVAL:  # EINVAL: not a mount point yet
                    raise
                _mount(d, d, _MS_BIND | _MS_REC)
                try:
                    _mount(None, d, _MS_SHARED | _MS_REC)
                except OSError:
                    with contextlib.suppress(OSError):
                        _umount(d)
                    raise
    except OSError as e:
        raise NetNSError(f"cannot make netns directory {d} a shared mount: {e}", d) from e
    finally:
        os.close(dfd)  # also releases the flock


_SIOCGIFFLAGS, _SIOCSIFFLAGS, _IFF_UP = 0x8913, 0x8914, 0x1
_IFREQ = struct.Struct("16sh22x")  # struct ifreq: name, ifr_flags (40 bytes)


def _set_loopback_up() -> None:
    """Bring ``lo`` up in the calling thread's network namespace.

    ``SIOCGIFFLAGS``/``SIOCSIFFLAGS`` on a socket made here (sockets belong to the namespace
    of the thread that creates them): two ioctls, no netlink library to load and no link dump.
    """
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC) as sock:
        _, flags = _IFREQ.unpack(fcntl.ioctl(sock, _SIOCGIFFLAGS, _IFREQ.pack(b"lo", 0)))
        if not flags & _IFF_UP:
            fcntl.ioctl(sock, _SIOCSIFFLAGS, _IFREQ.pack(b"lo", flags | _IFF_UP))


def _pin_new_namespace(path: str, loopback_up: bool) -> None:
    """Runs in a throw-away thread: unshare a new net namespace and bind-mount it onto ``path``."""
    _unshare_net()
    if loopback_up:
        _set_loopback_up()
    _mount(f"/proc/self/task/{threading.get_native_id()}/ns/net", path, _MS_BIND)


def _in_thread(fn: Callable[[], T], name: str) -> T:
    """Run ``fn`` in a new OS thread (which ends afterwards) and return or raise its outcome."""
    outcome: list[Any] = []

    def target() -> None:
        try:
            outcome.append((True, fn()))
        except BaseException as e:  # handed to the caller
            outcome.append((False, e))

    thread = threading.Thread(target=target, name=name, daemon=True)
    thread.start()
    thread.join()
    ok, value = outcome.pop()
    if ok:
        return value  # type: ignore[no-any-return]
    try:
        raise value
    finally:
        del value


def create(name: str, *, dir: StrPath = DEFAULT_DIR, loopback_up: bool = False) -> NetNS:
    """Create a new network namespace pinned at ``<dir>/<name>`` and return its handle.

    ``name`` must be a valid podkit ID. ``dir`` is created if missing and made a shared mount
    point. With ``loopback_up`` the namespace's ``lo`` is brought up before it is pinned. The
    namespace is made in a helper thread, so the caller's own namespace never changes. On
    failure no pin file and no mount are left behind; the directory setup is kept.
    """
    def make(path: str) -> None:
        _in_thread(lambda: _pin_new_namespace(path, loopback_up), f"podkit-netns-create-{name}")

    return _pinned(name, dir, make, "create")


def attach(name: str, source: StrPath, *, dir: StrPath = DEFAULT_DIR,
           loopback_up: bool = False) -> NetNS:
    """Pin the existing network namespace ``source`` (``/proc/<pid>/ns/net``, another pin)
    at ``<dir>/<name>`` (``ip netns attach``), ``lo`` brought up with ``loopback_up``; its
    handle. For a namespace another process made: one owned by a pod's user namespace
    (``idmap.Holder(..., also=("net",))``). Failures leave nothing, as in :func:`create`.
    """
    src, fd = _open_ns_fd(source)
    os.close(fd)

    def make(path: str) -> None:
        _mount(src, path, _MS_BIND)
        if loopback_up:
            run_in(path, _set_loopback_up)

    return _pinned(name, dir, make, "attach")


def _pinned(name: str, dir: StrPath, make: Callable[[str], None], what: str) -> NetNS:
    """A pin file ``<dir>/<name>`` made, then ``make(path)`` pins on it; undone on failure."""
    try:
        validate_id(name, "netns name")
    except errors.InvalidArgumentError as e:
        raise InvalidArgumentError(f"{e} (in directory {os.fspath(dir)})") from None
    d = os.path.abspath(os.fspath(dir))
    path = os.path.join(d, name)
    _prepare_dir(d)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o444)
    except FileExistsError as e:
        hint = " (stale pin file: remove it first)" if _kind(path) == _STALE else ""
        raise AlreadyExistsError(f"network namespace {path} already exists{hint}", path) from e
    except OSError as e:
        raise NetNSError(f"cannot create network namespace file {path}: {e.strerror}", path) from e
    os.close(fd)
    try:
        make(path)
    except BaseException as e:
        _discard(path)
        if isinstance(e, OSError):
            raise NetNSError(f"cannot {what} network namespace {path}: {e}", path) from e
        raise
    return NetNS(path)


def _discard(path: str) -> None:
    """Best-effort undo of a half-made pin (used while another error is propagating)."""
    for _ in range(_MAX_STACKED_MOUNTS):
        try:
            _umount(path)
        except OSError:
            break
    with contextlib.suppress(OSError):
        os.unlink(path)


def remove(path: StrPath) -> None:
    """Unmount the namespace pinned at ``path`` and delete the pin file.

    Idempotent: a missing path is fine, and so is a pin someone else already unmounted (the
    empty file is deleted). Refuses, with ``InvalidArgumentError``, a path that is neither a
    network namespace pin nor an empty pin file (a symlink is not followed), so a wrong path
    never deletes real data.
    """
    p = os.path.abspath(os.fspath(path))
    kind = _kind(p, follow=False)
    if kind == _MISSING:
        return
    if kind == _OTHER:
        raise InvalidArgumentError(f"{p} is not a network namespace pin; refusing to remove it", p)
    for _ in range(_MAX_STACKED_MOUNTS if kind == _NETNS else 0):
        try:
            _umount(p)
        except OSError as e:
            if e.errno == errno.EINVAL:  # no longer a mount point
                break
            if e.errno == errno.ENOENT:
                return
            raise NetNSError(f"cannot unmount network namespace {p}: {e.strerror}", p) from e
    if _kind(p, follow=False) not in (_STALE, _MISSING):
        raise InvalidArgumentError(
            f"{p} is not an empty pin file after unmounting; refusing to remove it", p
        )
    try:
        os.unlink(p)
    except FileNotFoundError:
        return
    except OSError as e:
        raise NetNSError(f"cannot remove network namespace file {p}: {e.strerror}", p) from e


def release_dir(dir: StrPath) -> bool:
    """Undo what :func:`create` did to ``dir`` once it pins nothing: unmount its shared bind
    mount and remove it; whether it is gone (``False``: something is still in it).

    For a directory of one owner (a manager's own, inside its state dir): a :func:`create`
    racing with this in another process could find its directory gone.
    """
    d = os.path.abspath(os.fspath(dir))
    try:
        dfd = os.open(d, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except FileNotFoundError:
        return True
    except OSError as e:
        raise NetNSError(f"cannot open netns directory {d}: {e.strerror}", d) from e
    try:
        with _dir_lock:
            fcntl.flock(dfd, fcntl.LOCK_EX)
            if os.listdir(d):
                return False
            try:
                _umount(d)
            except OSError as e:
                if e.errno != errno.EINVAL:  # EINVAL: not a mount point
                    raise NetNSError(f"cannot unmount netns directory {d}: {e}", d) from e
            try:
                os.rmdir(d)
            except OSError as e:
                raise NetNSError(f"cannot remove netns directory {d}: {e.strerror}", d) from e
    finally:
        os.close(dfd)
    return True


# --- running code inside --------------------------------------------------------------------


def run_in(path: StrPath, fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
    """Call ``fn(*args, **kwargs)`` inside the network namespace at ``path``; return its result.

    ``fn`` runs in a dedicated OS thread that joins the namespace with ``setns`` and ends
    afterwards, so no thread is ever left in the wrong namespace. Its exception is re-raised
    here. Sockets (and pyroute2 ``IPRoute()`` objects) made in ``fn`` belong to the namespace,
    as do threads ``fn`` starts; pools started earlier do not, and ``/proc/self/net`` shows
    the main thread's namespace (use ``/proc/thread-self/net``).
    """
    p, fd = _open_ns_fd(path)

    def inside() -> T:
        try:
            _setns(fd, p)
        except OSError as e:
            raise NetNSError(f"cannot enter network namespace {p}: {e}", p) from e
        finally:
            os.close(fd)
        return fn(*args, **kwargs)

    return _in_thread(inside, f"podkit-netns-run-{os.path.basename(p)}")


@contextlib.contextmanager
def enter(path: StrPath) -> Iterator[NetNS]:
    """Switch the *calling thread* into the namespace at ``path`` for a ``with`` block.

    The thread's previous namespace is restored on exit, also when the block raises. Only the
    current OS thread moves (threads started inside the block inherit the namespace); do not
    use this around ``await`` (other coroutines on the same thread would run inside) and prefer
    :func:`run_in` when in doubt. If the original namespace
    cannot be restored, ``NetNSError`` is raised: the thread must then not be used further.
    """
    p, target = _open_ns_fd(path)
    try:
        original = os.open("/proc/thread-self/ns/net", os.O_RDONLY | os.O_CLOEXEC)
    except OSError as e:
        os.close(target)
        raise NetNSError(f"cannot open the thread's own network namespace: {e}", p) from e
    try:
        _setns(target, p)
    except OSError as e:
        os.close(original)
        raise NetNSError(f"cannot enter network namespace {p}: {e}", p) from e
    finally:
        os.close(target)
    thread = threading.get_ident()
    try:
        yield NetNS(p)
    finally:
        try:
            if threading.get_ident() != thread:
                raise NetNSError(f"netns.enter({p!r}) exited on another thread than it entered", p)
            _setns(original, "/proc/thread-self/ns/net")
        except OSError as e:
            raise NetNSError(
                f"cannot restore the thread's network namespace after {p}: {e}", p
            ) from e
        finally:
            os.close(original)


# --- the other namespaces of a pod without a pause container ----------------------------------


def mount_shm(path: StrPath, size: int) -> None:
    """Mount a pod's /dev/shm: a ``nosuid,nodev,noexec`` tmpfs of ``size`` bytes, mode 1777.

    A failure is a :class:`NetNSError` naming the path."""
    p = os.fspath(path)
    try:
        _linux.mount("shm", p, "tmpfs", _linux.MS_NOSUID | _linux.MS_NODEV | _linux.MS_NOEXEC,
                     f"mode=1777,size={size}")
    except OSError as exc:
        raise NetNSError(f"mount tmpfs on {p}: {os.strerror(exc.errno or 0)}", p) from None


def unmount_all(path: StrPath) -> None:
    """Detach every mount stacked on ``path``; a path that is no mount point is fine.

    A failure is a :class:`NetNSError` naming the path."""
    p = os.fspath(path)
    for _ in range(16):
        try:
            _linux.umount(p, _MNT_DETACH)
        except OSError as exc:
            if exc.errno in (errno.EINVAL, errno.ENOENT):
                return
            raise NetNSError(f"umount {p}: {os.strerror(exc.errno or 0)}", p) from None


def pin(source: StrPath, path: StrPath) -> None:
    """Pin the namespace file ``source`` (any kind: a pod's user namespace) on ``path``, a new
    empty file bind-mounted from it; a :class:`NetNSError` naming both, nothing left."""
    p = os.fspath(path)
    try:
        os.close(os.open(p, os.O_RDONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o444))
    except OSError as exc:
        raise NetNSError(f"create the pin file {p}: {exc.strerror}", p) from None
    try:
        _linux.mount(os.fspath(source), p, None, _MS_BIND)
    except OSError as exc:
        _discard(p)
        raise NetNSError(f"pin {os.fspath(source)} on {p}: {exc.strerror}", p) from None


def unpin(path: StrPath) -> None:
    """Undo :func:`pin`: unmount ``path`` and remove the file; a missing one is fine."""
    unmount_all(path)
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)


def pin_namespaces(ns_dir: StrPath, kinds: Sequence[str], *, hostname: str = "",
                   netns_path: str = "", sysctls: Mapping[str, str] | None = None) -> None:
    """Make new IPC/UTS namespaces and pin them at ``ns_dir/<kind>`` (no process keeps them).

    A thread of its own unshares them (namespaces are per thread), sets the hostname, joins
    ``netns_path`` to write the sysctls there, and bind-mounts its namespace files; it then
    ends. A sysctl that cannot be written is an ``InvalidArgumentError`` naming it; any other
    failure a :class:`NetNSError`.
    """
    pins = os.fspath(ns_dir)

    def work() -> None:
        flags = (_linux.CLONE_NEWIPC if "ipc" in kinds else 0) | (
            _linux.CLONE_NEWUTS if "uts" in kinds else 0)
        if flags:
            _linux.unshare(flags)
        if "uts" in kinds and hostname:
            _linux.sethostname(hostname)
        if netns_path:
            fd = os.open(netns_path, os.O_RDONLY | os.O_CLOEXEC)
            try:
                _linux.setns(fd, _CLONE_NEWNET, netns_path)
            finally:
                os.close(fd)
        for key, value in (sysctls or {}).items():
            try:
                with open(os.path.join("/proc/sys", key.replace(".", "/")), "w") as f:
                    f.write(value)
            except OSError as exc:
                raise InvalidArgumentError(
                    f"linux.sysctls[{key!r}] = {value!r}: {exc.strerror}") from None
        tid = threading.get_native_id()
        for kind in kinds:
            pin = os.path.join(pins, kind)
            open(pin, "a").close()
            _linux.mount(f"/proc/self/task/{tid}/ns/{kind}", pin, None, _MS_BIND)

    try:
        os.makedirs(pins, exist_ok=True)
        _in_thread(work, "pin-namespaces")
    except OSError as exc:
        raise NetNSError(f"pin the {'/'.join(kinds)} namespaces under {pins}: {exc}", pins) \
            from None
