"""New user namespaces with ID maps, and the namespace files that name them.

A user namespace cannot be made by a thread of a threaded program (``unshare(CLONE_NEWUSER)``
refuses), so :class:`Holder` starts a small process in a new one (util-linux ``unshare``
running ``cat`` on a pipe), writes its maps from outside, and keeps it until closed: the
caller pins or opens the namespace files it needs meanwhile (``holder.path("user")``). Other
namespaces made with it (``also=("net",)``) are owned by it, as a pod's network namespace must
be for the pod's root to bind low ports and mount sysfs there.

    with idmap.Holder(idmap.IDMap.single(100000, 65536), also=("net",)) as h:
        netns.attach("pod", h.path("net"))            # the netns outlives the holder
    fd = idmap.owner("/run/netns/pod")                # its user namespace, as a descriptor
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import shutil
import time
from collections.abc import Callable, Sequence

import attrs

from podkit import _linux, _proc
from podkit.errors import PodkitError
from podkit.idmap.maps import IDMap

__all__ = ["Holder", "IDMapError", "UserNamespace", "open_user_namespace", "owner"]

_NS_GET_USERNS = 0xB701  # _IO(0xb7, 0x1), Linux >= 4.9
_NS_GET_NSTYPE = 0xB703  # _IO(0xb7, 0x3), Linux >= 4.11
_FLAGS = {"net": "--net", "ipc": "--ipc", "uts": "--uts", "mnt": "--mount",
          "cgroup": "--cgroup"}
_PATH = "/usr/bin:/bin:/usr/sbin:/sbin"


class IDMapError(PodkitError):
    """A user namespace or an ID-mapped mount could not be made; the message says what and
    where."""


@attrs.frozen
class UserNamespace:
    """A user namespace file (a pin or ``/proc/<pid>/ns/user``) and the maps it has."""

    path: str
    ids: IDMap


def _program(name: str) -> str:
    found = shutil.which(name, path=_PATH)
    if found is None:
        raise IDMapError(f"{name} not found in {_PATH} (util-linux and coreutils have it)")
    return found


MapWriter = Callable[[int, IDMap], None]
"""Writes the maps of the new user namespace of process ``pid`` (``writer(pid, ids)``)."""


def write_maps(pid: int, ids: IDMap) -> None:
    """Write ``/proc/<pid>/uid_map`` and ``gid_map`` from outside the namespace (as root, or
    with ``CAP_SETUID``/``CAP_SETGID`` over it)."""
    for name, text in (("uid_map", ids.uid_map()), ("gid_map", ids.gid_map())):
        write_proc(pid, name, text)


def write_proc(pid: int, name: str, text: str) -> None:
    """Write ``text`` to ``/proc/<pid>/<name>`` in one write (``uid_map``, ``setgroups``...)."""
    try:
        with open(f"/proc/{pid}/{name}", "w") as f:
            f.write(text)
    except OSError as exc:
        raise IDMapError(f"write {name} {text.strip()!r} of a new user namespace: "
                         f"{exc.strerror}") from None


class Holder:
    """A process in a new user namespace mapped by ``ids`` (and in new namespaces of the
    kinds in ``also``, owned by it) until :meth:`close`; ``timeout`` bounds its start.

    ``writer(pid, ids)`` writes the maps (default: ``/proc/<pid>/uid_map`` and ``gid_map``
    written directly, as root does; a rootless user's holder has ``newuidmap``/``newgidmap``
    write them: ``idmap.user_holder``). When starting fails, the process is ended before the
    error is raised."""

    def __init__(self, ids: IDMap, *, also: Sequence[str] = (), timeout: float = 10.0,
                 writer: MapWriter | None = None) -> None:
        unknown = [k for k in also if k not in _FLAGS]
        if unknown:
            raise ValueError(f"namespace kinds {unknown}: want some of {sorted(_FLAGS)}")
        self.ids = ids
        argv = [_program("unshare"), "--user", *(_FLAGS[k] for k in also), "--",
                _program("cat")]
        keep, self._pipe = os.pipe2(os.O_CLOEXEC)  # cat reads until this end closes
        err_r, err_w = os.pipe2(os.O_CLOEXEC)
        try:
            self._child = _proc.spawn(argv, env={"PATH": _PATH}, fds={0: keep, 2: err_w})
        except OSError as exc:
            for fd in (keep, self._pipe, err_r, err_w):
                os.close(fd)
            raise IDMapError(f"start {argv[0]}: {exc}") from None
        os.close(keep)
        os.close(err_w)
        try:
            self._wait_unshared(timeout, err_r)
            (writer or write_maps)(self.pid, ids)
        except BaseException:
            self.close()
            raise
        finally:
            os.close(err_r)

    @property
    def pid(self) -> int:
        """The holding process."""
        return self._child.pid

    def path(self, kind: str) -> str:
        """``/proc/<pid>/ns/<kind>``: a namespace file of the holder (``user``, ``net``...)."""
        return f"/proc/{self._child.pid}/ns/{kind}"

    def _wait_unshared(self, timeout: float, err: int) -> None:
        """Until the process is in a user namespace of its own (it unshared and exec'd)."""
        ours = os.stat("/proc/self/ns/user").st_ino
        deadline = time.monotonic() + timeout
        step = 0.0005
        while True:
            with contextlib.suppress(FileNotFoundError, ProcessLookupError):
                if os.stat(self.path("user")).st_ino != ours:
                    return
            if self._child.poll() is not None:
                os.set_blocking(err, False)
                with contextlib.suppress(BlockingIOError):
                    why = os.read(err, 4096).decode(errors="replace").strip()
                raise IDMapError(f"unshare --user exited ({self._child.returncode}) before "
                                 f"making a user namespace: {why or 'no message'}")
            if time.monotonic() > deadline:
                raise IDMapError(f"unshare --user made no user namespace in {timeout} s")
            time.sleep(step)
            step = min(step * 2, 0.01)

    def close(self) -> None:
        """End the holding process (the namespaces live on where they are pinned or used)."""
        if self._pipe >= 0:
            os.close(self._pipe)
            self._pipe = -1
        self._child.kill_group()

    def __enter__(self) -> Holder:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _ns_fd(path: str) -> int:
    try:
        return os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK)
    except OSError as exc:
        raise IDMapError(f"open namespace {path}: {exc.strerror}") from None


def open_user_namespace(path: str | os.PathLike[str]) -> int:
    """A descriptor of the user namespace file ``path``; ``IDMapError`` for any other file."""
    p = os.fspath(path)
    fd = _ns_fd(p)
    try:
        kind = fcntl.ioctl(fd, _NS_GET_NSTYPE)
    except OSError:
        kind = None
    if kind != _linux.CLONE_NEWUSER:
        os.close(fd)
        raise IDMapError(f"{p} is not a user namespace")
    return fd


def owner(path: str | os.PathLike[str]) -> int:
    """A descriptor of the user namespace that owns the namespace file ``path`` (a pinned
    network namespace, ``/proc/<pid>/ns/ipc``...)."""
    p = os.fspath(path)
    fd = _ns_fd(p)
    try:
        return int(fcntl.ioctl(fd, _NS_GET_USERNS))
    except OSError as exc:
        why = "it is owned by no user namespace this process can see" \
            if exc.errno == errno.EPERM else exc.strerror
        raise IDMapError(f"the user namespace owning {p}: {why}") from None
    finally:
        os.close(fd)
