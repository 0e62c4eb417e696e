"""``SandboxManager``: pods end to end (netns + CNI + pause + containers), crash-safe on disk.

What containerd's CRI plugin does between a CRI call and runc, as a library. Every operation
that creates something first writes a record under ``state_dir`` saying which step it is about
to take, so a failure undoes exactly the steps already done, and a new manager in a new process
(``recover()``) can finish or undo what a killed one left half-done. Re-exported from
``podkit.sandbox``.
"""

from __future__ import annotations

import builtins
import contextlib
import json
import logging
import os
import secrets
import shutil
import signal as _signal
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs
import cattrs

from podkit import cgroups, cni, netns, oci
from podkit import image as _image
from podkit._files import atomic_write, file_lock, sweep_atomic_temps, validate_id
from podkit.errors import (
    AlreadyExistsError,
    ConflictError,
    InvalidArgumentError,
    NotFoundError,
    PodkitError,
    quote,
)
from podkit.pods import images as pod_images
from podkit.pods import network, rules
from podkit.pods.config import (
    ContainerConfig,
    LinuxContainerResources,
    NamespaceMode,
    SandboxConfig,
)
from podkit.pods.container_spec import (
    ContainerConfigError,
    DeviceInjector,
    PodContext,
    _with_resources,
    build_container_spec,
    validate_container_config,
)
from podkit.pods.records import (
    INFRALESS_STEPS,
    SANDBOX_STEPS,
    Container,
    ContainerFilter,
    ContainerState,
    ContainerStats,
    PauseConfig,
    RecoveryReport,
    Sandbox,
    SandboxFilter,
    SandboxState,
    SandboxStats,
)
from podkit.pods.sandbox_spec import (
    SANDBOX_OOM_SCORE_ADJ,
    SandboxConfigError,
    SandboxFiles,
    build_sandbox_spec,
    validate_sandbox_config,
)
from podkit.runtime import (
    AttachStream,
    Bundle,
    Conmon,
    ConmonSupervisor,
    ExecResult,
    ExitStatus,
    Runc,
    Runtime,
    Supervisor,
)
from podkit.runtime.errors import NotRunningError, OCIRuntimeError, RuntimeTimeoutError

__all__ = ["SandboxManager"]

SHM_SIZE = 64 << 20
"""Size of a pod's /dev/shm tmpfs (containerd's default)."""

RECORD_MODE, RECORD_DIR_MODE = 0o600, 0o700
"""Modes of the records in ``state_dir`` (they hold env values) and of their directories."""


_converter = cattrs.Converter()
_log = logging.getLogger("podkit.sandbox")


def _now() -> int:
    return time.time_ns()


def _mount_shm(path: str) -> None:
    try:
        netns.mount_shm(path, SHM_SIZE)
    except OSError as exc:
        raise PodkitError(f"mount tmpfs on {path}: {os.strerror(exc.errno or 0)}") from None


def _umount(path: str) -> None:
    """Detach every mount stacked on ``path``; a path that is no mount point is fine."""
    try:
        netns.unmount_all(path)
    except OSError as exc:
        raise PodkitError(f"umount {path}: {os.strerror(exc.errno or 0)}") from None


def _pin_namespaces(ns_dir: Path, kinds: Sequence[str], hostname: str, netns_path: str,
                    sysctls: Mapping[str, str]) -> None:
    """The IPC/UTS namespaces of a pod without a pause, pinned under ``ns_dir``."""
    try:
        netns.pin_namespaces(ns_dir, kinds, hostname=hostname, netns_path=netns_path,
                             sysctls=sysctls)
    except netns.InvalidArgumentError as exc:
        raise SandboxConfigError(str(exc)) from None
    except OSError as exc:
        raise PodkitError(f"pin the {'/'.join(kinds)} namespaces under {ns_dir}: {exc}") \
            from None


def _cgroup_stats(id: str, cgroups_path: str) -> ContainerStats:
    u = cgroups.usage(cgroups_path)
    return ContainerStats(
        id=id, timestamp=_now(), cpu_usage_core_nano_seconds=u.cpu_usage_core_nano_seconds,
        memory_usage_bytes=u.memory_usage_bytes,
        memory_working_set_bytes=u.memory_working_set_bytes,
        memory_rss_bytes=u.memory_rss_bytes, process_count=u.process_count)


class SandboxManager:
    """Run pods: netns, CNI, sandbox files, a pause container, then application containers.

    ``root_dir`` holds per-pod files and bundles, ``state_dir`` the JSON records (and conmon's
    state); ``runtime`` a :class:`~podkit.runtime.Runc` (any ``Runtime`` with a ``supervisor``);
    ``networks`` the pod networks
    (``None``: host-network pods only, until ``network_loader``, if given, loads them:
    :meth:`load_networks`); ``cdi`` resolves CDI devices; ``pause`` the pause program
    (``None``: infra-less pods, their IPC and UTS namespaces pinned by bind mounts);
    ``supervisor`` defaults to conmon, so containers, logs and exit codes outlive this process.
    ``images`` is the image store that ``ContainerConfig.image`` references (and a pause given
    as ``PauseConfig(image=...)``) are resolved in; each such container gets its own rootfs
    there (``rootfs_mode``: ``auto``, ``overlay`` or ``copy``), removed with the container.
    The pause's shared rootfs there is unmounted once no pod uses it (last pod removed,
    :meth:`close`, :meth:`recover`) and mounted again for the next pod.
    One manager per ``state_dir`` at a time (an exclusive lock); thread-safe.
    """

    def __init__(
        self,
        root_dir: str | os.PathLike[str],
        state_dir: str | os.PathLike[str],
        runtime: Runtime,
        networks: cni.Networks | None,
        cdi: DeviceInjector | None = None,
        pause: PauseConfig | None = None,
        supervisor: Supervisor | None = None,
        *,
        netns_dir: str = netns.DEFAULT_DIR,
        netns_prefix: str = "podkit-",
        images: _image.ImageStore | None = None,
        rootfs_mode: str = "auto",
        network_loader: Callable[[], cni.Networks] | None = None,
    ) -> None:
        if rootfs_mode not in ("auto", "overlay", "copy"):
            raise InvalidArgumentError(
                f"rootfs_mode {rootfs_mode!r}: want auto, overlay or copy")
        if pause is not None and not pause.rootfs and pause.image:
            if images is None:
                raise InvalidArgumentError(
                    f"pause image {pause.image!r}: needs an image store (images=) or a rootfs")
            pause = pod_images.pause_config(images, pause.image)
        if pause is not None and (not pause.rootfs or not Path(pause.rootfs).is_dir()):
            raise InvalidArgumentError(
                f"pause rootfs {pause.rootfs!r} is not a directory" if pause.rootfs else
                "pause: give a rootfs directory or an image (PauseConfig(rootfs=) or image=)")
        self.images = images
        self.rootfs_mode = rootfs_mode
        self.root_dir = Path(root_dir).absolute()
        self.state_dir = Path(state_dir).absolute()
        self.runtime = runtime
        self.networks = networks
        self.network_loader = network_loader
        self.cdi = cdi
        self.pause = pause
        self.netns_dir = netns_dir
        self.netns_prefix = netns_prefix
        for d in (self.root_dir / "sandboxes", self.root_dir / "containers"):
            d.mkdir(parents=True, exist_ok=True)
        self.state_dir.mkdir(mode=RECORD_DIR_MODE, parents=True, exist_ok=True)
        for d in (self.state_dir / "sandboxes", self.state_dir / "containers"):
            d.mkdir(mode=RECORD_DIR_MODE, exist_ok=True)
            d.chmod(RECORD_DIR_MODE)  # records of an earlier version were in 0755 dirs
        if supervisor is None:
            if not isinstance(runtime, Runc):
                raise InvalidArgumentError(
                    f"runtime {runtime!r} is not a Runc: give a supervisor for it")
            supervisor = ConmonSupervisor(Conmon(runtime, state_dir=self.state_dir / "conmon"))
        self.supervisor: Supervisor = supervisor
        self.oom_score_floor = rules.current_oom_score_adj()
        if pause is not None and self.oom_score_floor > SANDBOX_OOM_SCORE_ADJ:
            _log.warning(
                "pause containers get OOM score %d instead of %d: this process (score %d) "
                "cannot lower scores without CAP_SYS_RESOURCE", self.oom_score_floor,
                SANDBOX_OOM_SCORE_ADJ, self.oom_score_floor)
        self._lock = threading.Lock()  # names and the two dicts
        self._names: dict[str, str] = {}
        self._sandboxes: dict[str, Sandbox] = {}
        self._containers: dict[str, Container] = {}
        self._built: dict[str, Bundle] = {}  # bundles of CREATED containers, spec in memory
        self._sandbox_locks: dict[str, threading.RLock] = {}
        self._pause_roots: dict[str, str] = {}  # pod ID -> its pause rootfs (from its bundle)
        self._lock_cm = file_lock(self.state_dir / "manager.lock", blocking=False)
        self._lock_cm.__enter__()  # ConflictError while another manager uses state_dir
        self._opened_at = time.time()  # temp files older than this are an earlier process's

    # -- lifetime ---------------------------------------------------------------------------

    def load_networks(self) -> str:
        """Load the pod networks through ``network_loader`` if they are not loaded yet (a CNI
        config dropped in after start); "" when loaded or nothing to do, else the reason."""
        if self.network_loader is None:
            return ""
        with self._lock:
            if self.networks is not None:
                return ""
            try:
                self.networks = self.network_loader()
            except PodkitError as exc:
                return f"cni config not loaded: {exc}"
        return ""

    def close(self) -> None:
        """Unmount a shared pause rootfs no pod uses; release the state dir lock. Pods and
        containers keep running."""
        if self._lock_cm is not None:
            try:
                self._unmount_unused_pause_rootfs()
            finally:
                self._lock_cm.__exit__(None, None, None)
            self._lock_cm = None  # type: ignore[assignment]

    def __enter__(self) -> SandboxManager:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- records ----------------------------------------------------------------------------

    def _record_path(self, kind: str, id: str) -> Path:
        return self.state_dir / kind / f"{validate_id(id, kind[:-1] + ' ID')}.json"

    def _save(self, obj: Sandbox | Container) -> None:
        kind = "sandboxes" if isinstance(obj, Sandbox) else "containers"
        data = _converter.unstructure(obj)
        atomic_write(self._record_path(kind, obj.id), json.dumps(data, indent=1),
                     mode=RECORD_MODE)

    def _drop_record(self, kind: str, id: str) -> None:
        self._record_path(kind, id).unlink(missing_ok=True)

    def _load_records(self, kind: str, cls: type[Any]) -> builtins.list[Any]:
        out = []
        for path in sorted((self.state_dir / kind).glob("*.json")):
            try:
                out.append(_converter.structure(json.loads(path.read_text()), cls))
                path.chmod(RECORD_MODE)  # an earlier version wrote them readable by all
            except (OSError, ValueError, cattrs.BaseValidationError) as exc:
                raise InvalidArgumentError(f"corrupt record {path}: {exc}") from None
        return out

    def _sandbox_lock(self, id: str) -> threading.RLock:
        with self._lock:
            return self._sandbox_locks.setdefault(id, threading.RLock())

    def _reserve(self, name: str, id: str, what: str) -> None:
        with self._lock:
            owner = self._names.get(name)
            if owner is not None:
                raise AlreadyExistsError(f"{what} name {name!r} is already reserved by {owner}")
            self._names[name] = id

    def _release(self, name: str, id: str) -> None:
        with self._lock:
            if self._names.get(name) == id:
                del self._names[name]

    def _get_sandbox(self, id: str) -> Sandbox:
        with self._lock:
            sb = self._sandboxes.get(id)
        if sb is None:
            raise NotFoundError(f"no sandbox {quote(id)}")
        return sb

    def _get_container(self, id: str) -> Container:
        with self._lock:
            c = self._containers.get(id)
        if c is None:
            raise NotFoundError(f"no container {quote(id)}")
        return c

    def _sandbox_dir(self, id: str) -> Path:
        return self.root_dir / "sandboxes" / id

    def _container_dir(self, id: str) -> Path:
        return self.root_dir / "containers" / id

    # -- run_sandbox ------------------------------------------------------------------------

    def run_sandbox(self, config: SandboxConfig) -> Sandbox:
        """Create and start a pod; on any failure every step already done is undone.

        Order (containerd): reserve the name, create the netns, CNI ADD, write the sandbox files
        (hostname, hosts, resolv.conf, a 64 MiB tmpfs for /dev/shm), create and start the pause.
        """
        validate_sandbox_config(config)
        sb = Sandbox(id=secrets.token_hex(32), name=rules.sandbox_name(config.metadata),
                     config=config, created_at=_now())
        if sb.host_network and config.hostname:
            raise SandboxConfigError(
                f"hostname {config.hostname!r}: must be empty for a host-network pod (it uses "
                "the host's UTS namespace; runc refuses to set a hostname there)"
            )
        userns = config.linux.security_context.namespace_options.userns_options
        if self.pause is None and userns is not None and userns.mode == NamespaceMode.POD:
            raise SandboxConfigError(
                "linux.security_context.namespace_options.userns_options: POD user namespaces "
                "need a pause container (this manager has pause=None)")
        problem = self.load_networks() if not sb.host_network and self.networks is None else ""
        if not sb.host_network and self.networks is None:
            raise SandboxConfigError(
                "linux.security_context.namespace_options.network: POD needs networks; "
                "this manager has none (host-network pods only)"
                + (f"; {problem}" if problem else ""))
        if not sb.host_network:
            self._cni_caps(sb)  # bad annotations or port mappings fail before anything exists
        self._reserve(sb.name, sb.id, "pod")
        lock = self._sandbox_lock(sb.id)
        with lock:
            try:
                with self._lock:
                    self._sandboxes[sb.id] = sb
                for step in SANDBOX_STEPS if self.pause is not None else INFRALESS_STEPS:
                    if sb.host_network and step in ("netns", "network"):
                        continue
                    if step == "netns":  # recorded first, so an undo knows what to remove
                        sb.netns_path = os.path.join(
                            self.netns_dir, f"{self.netns_prefix}{sb.id[:16]}")
                    if step == "files" and "network" in sb.steps:
                        continue  # done while CNI ran (below)
                    sb.steps = (*sb.steps, step)
                    if step == "network":  # both recorded before either starts
                        sb.steps = (*sb.steps, "files")
                    self._save(sb)  # the first save also reserves the name on disk
                    if step == "network":
                        self._do_network_and_files(sb)
                    else:
                        getattr(self, f"_do_{step}")(sb)
                sb.phase = "created"
                sb.state = SandboxState.SANDBOX_READY
                self._save(sb)
            except BaseException as exc:
                errors = self._undo_sandbox(sb)
                for e in errors:
                    exc.add_note(f"cleanup after the failure also failed: {e}")
                if errors:
                    for e in self._keep_for_removal(sb):
                        exc.add_note(f"recording the pod as NOTREADY failed too: {e}")
                else:
                    self._forget_sandbox(sb)
                raise
        return attrs.evolve(sb)

    def _keep_for_removal(self, sb: Sandbox) -> builtins.list[Exception]:
        """A pod whose undo failed: listed NOTREADY, its name kept, removable (retries the
        undo). The error of saving that, if any (the older record is undone by recover())."""
        sb.phase, sb.state = "removing", SandboxState.SANDBOX_NOTREADY
        try:
            self._save(sb)
        except Exception as e:
            return [e]
        return []

    def _forget_sandbox(self, sb: Sandbox) -> None:
        self._drop_record("sandboxes", sb.id)
        with self._lock:
            self._sandboxes.pop(sb.id, None)
            self._sandbox_locks.pop(sb.id, None)
            self._pause_roots.pop(sb.id, None)
        self._release(sb.name, sb.id)
        try:
            self._unmount_unused_pause_rootfs()
        except (PodkitError, OSError) as exc:  # the pod is gone; the mount waits for close()
            _log.warning("sandbox %s: unmounting the unused pause rootfs: %s", sb.id, exc)

    def _cni_args(self, sb: Sandbox) -> tuple[tuple[str, str], ...]:
        md = sb.config.metadata
        return cni.kubernetes_args(md.namespace, md.name, md.uid, sb.id)

    def _cni_caps(self, sb: Sandbox) -> dict[str, Any]:
        cfg = sb.config
        kw: dict[str, Any] = {}
        ports = [
            cni.PortMapping(pm.host_port, pm.container_port, pm.protocol.name.lower(),
                            pm.host_ip or None)
            for pm in cfg.port_mappings if pm.host_port > 0
        ]
        if ports:
            kw["port_mappings"] = ports
        bw = network.bandwidth(cfg.annotations)
        if bw is not None:
            kw["bandwidth"] = bw
        if cfg.dns_config is not None:
            kw["dns"] = cni.DNSConfig(servers=tuple(cfg.dns_config.servers),
                                      searches=tuple(cfg.dns_config.searches),
                                      options=tuple(cfg.dns_config.options))
        if cfg.linux.cgroup_parent:
            kw["cgroup_path"] = cfg.linux.cgroup_parent
        if cfg.annotations:
            kw["pod_annotations"] = dict(cfg.annotations)
        return cni.capability_args(**kw)

    def _do_netns(self, sb: Sandbox) -> None:
        netns.create(os.path.basename(sb.netns_path), dir=os.path.dirname(sb.netns_path),
                     loopback_up=True)

    def _undo_netns(self, sb: Sandbox) -> None:
        if sb.netns_path:
            netns.remove(sb.netns_path)

    def _do_network(self, sb: Sandbox) -> None:
        assert self.networks is not None
        result = self.networks.setup(sb.id, sb.netns_path, args=self._cni_args(sb),
                                     capability_args=self._cni_caps(sb))
        first = [ip for ip in (result.primary_ip("eth0", 4), result.primary_ip("eth0", 6)) if ip]
        if not first:
            raise PodkitError(f"sandbox {sb.id}: CNI gave eth0 no IP address")
        others = [ip.ip for name, iface in result.interfaces.items() if name != "lo"
                  for ip in iface.ips if ip.ip not in first]
        sb.ips = tuple(dict.fromkeys([*first, *others]))

    def _undo_network(self, sb: Sandbox, final: bool = False) -> None:
        """CNI DEL; when ``final`` (the pod is being removed) a DEL that can never run is
        given up: podkit's own cache entries go, and a warning says what stays."""
        if self.networks is None:
            return
        path = sb.netns_path if sb.netns_path and netns.exists(sb.netns_path) else ""
        try:
            self.networks.remove(sb.id, path, args=self._cni_args(sb),
                                 capability_args=self._cni_caps(sb))
        except Exception as exc:
            if not final or not network.cni_cannot_run(exc):
                raise
            self._give_up_network(sb, exc)

    def _give_up_network(self, sb: Sandbox, exc: BaseException) -> None:
        """Drop the pod's CNI cache entries after a DEL that cannot run; log what is left."""
        assert self.networks is not None
        client = self.networks.client
        for att in client.cached_attachments(sb.id):
            client.cache.remove(att.network, att.container_id, att.ifname)
        _log.warning(
            "sandbox %s (%s): CNI DEL cannot run (%s); removed without it: whatever the "
            "plugins set up for it (addresses, links, rules) was not undone", sb.id, sb.name,
            exc)

    def _files(self, sb: Sandbox) -> SandboxFiles:
        return SandboxFiles.under(self._sandbox_dir(sb.id))

    def _do_files(self, sb: Sandbox) -> None:
        d = self._sandbox_dir(sb.id)
        d.mkdir(parents=True, exist_ok=True)
        files = self._files(sb)
        hostname = rules.host_hostname() if sb.host_network else (
            sb.config.hostname or rules.host_hostname())
        Path(files.hostname).write_text(hostname + "\n")
        hosts = Path("/etc/hosts")
        Path(files.hosts).write_bytes(hosts.read_bytes() if hosts.exists() else b"")
        dns = sb.config.dns_config
        if dns is not None:
            Path(files.resolv_conf).write_text(rules.resolv_conf(dns))
        else:
            host = Path("/etc/resolv.conf")
            Path(files.resolv_conf).write_bytes(host.read_bytes() if host.exists() else b"")
        ns = sb.config.linux.security_context.namespace_options
        if ns.ipc != NamespaceMode.NODE:
            Path(files.shm).mkdir(exist_ok=True)
            _mount_shm(files.shm)

    def _undo_files(self, sb: Sandbox) -> None:
        d = self._sandbox_dir(sb.id)
        _umount(self._files(sb).shm)
        shutil.rmtree(d, ignore_errors=True)
        if d.exists():
            raise PodkitError(f"could not remove {d}")

    def _do_network_and_files(self, sb: Sandbox) -> None:
        """CNI ADD on a helper thread while this one writes the pod files and the pause bundle.

        Neither needs the other (the files and the bundle do not depend on the CNI result);
        both steps are recorded before either starts, and undoing one that did not happen is
        harmless, so a failure of either rolls back the same way as before.
        """
        failure: list[BaseException] = []

        def network() -> None:
            try:
                self._do_network(sb)
            except BaseException as exc:  # handed to the caller
                failure.append(exc)

        thread = threading.Thread(target=network, name=f"cni-add-{sb.id[:12]}")
        thread.start()
        try:
            self._do_files(sb)
            if self.pause is not None:
                self._write_pause_bundle(sb)
        except BaseException as exc:
            thread.join()
            for e in failure:
                exc.add_note(f"the network setup meanwhile failed too: {e}")
            raise
        thread.join()
        if failure:
            raise failure[0]

    def _write_pause_bundle(self, sb: Sandbox) -> None:
        """The pause's bundle (inside the sandbox dir, removed with the files)."""
        assert self.pause is not None
        bundle = self._sandbox_dir(sb.id) / "bundle"
        bundle.mkdir(exist_ok=True)
        spec = build_sandbox_spec(
            sb.config, id=sb.id, files=self._files(sb), args=self.pause.args,
            env=self.pause.env, rootfs=self.pause.rootfs,
            netns_path=sb.netns_path or None, pause_image=self.pause.image,
            oom_score_floor=self.oom_score_floor,
        )
        sb.cgroups_path = (spec.linux.cgroups_path if spec.linux else None) or ""
        spec.dump(bundle / "config.json")

    def _do_pause(self, sb: Sandbox) -> None:
        assert self.pause is not None
        d = self._sandbox_dir(sb.id)
        bundle = d / "bundle"
        if not (bundle / "config.json").exists():  # not written while CNI ran (host network)
            self._write_pause_bundle(sb)
        with self._pause_rootfs_ready():
            sb.pid = self.supervisor.start(sb.id, bundle, log_path=d / "pause.log")

    # -- the shared pause rootfs in the image store ------------------------------------------

    def _pause_key(self, rootfs: str) -> str:
        """The store key of a shared pause rootfs at ``rootfs`` (``""`` if it is not one)."""
        if self.images is None:
            return ""
        path = Path(os.path.abspath(rootfs))
        key = path.parent.name
        ours = path.parent.parent == Path(os.path.abspath(self.images.root)) / "containers"
        pause = key.startswith(pod_images.PAUSE_ROOTFS_PREFIX)
        return key if ours and path.name == "rootfs" and pause else ""

    def _pause_lock(self, key: str, *, shared: bool,
                    blocking: bool = True) -> contextlib.AbstractContextManager[int]:
        """Shared while a process starts a pause on the rootfs ``key``; exclusive to unmount
        or make it again (so no process unmounts it under a starting pause)."""
        assert self.images is not None
        locks = self.images.root / "locks"
        locks.mkdir(parents=True, exist_ok=True)
        return file_lock(locks / f"{key}.lock", shared=shared, blocking=blocking)

    @contextlib.contextmanager
    def _pause_rootfs_ready(self) -> Iterator[None]:
        """The pause rootfs is mounted (made again if it was unmounted) for the ``with`` body."""
        assert self.pause is not None
        key = self._pause_key(self.pause.rootfs) if self.pause.image else ""
        if not key:
            yield
            return
        while True:
            with self._pause_lock(key, shared=True):
                if pod_images.populated(Path(self.pause.rootfs)):
                    yield
                    return
            with self._pause_lock(key, shared=False):
                if not pod_images.populated(Path(self.pause.rootfs)):
                    assert self.images is not None
                    self.pause = pod_images.pause_config(self.images, self.pause.image)

    def _pause_rootfs_of(self, sb: Sandbox) -> str:
        """The rootfs of the pod's pause, from its bundle (the current pause's if none yet)."""
        with self._lock:
            known = self._pause_roots.get(sb.id)
        if known is not None:
            return known
        bundle = self._sandbox_dir(sb.id) / "bundle"
        try:
            root = json.loads((bundle / "config.json").read_text())["root"]["path"]
        except (OSError, ValueError, KeyError, TypeError):
            return self.pause.rootfs if self.pause is not None else ""
        path = os.path.abspath(os.path.join(bundle, str(root)))
        with self._lock:
            self._pause_roots[sb.id] = path
        return path

    def _unmount_unused_pause_rootfs(self) -> None:
        """Unmount each shared pause rootfs of the image store that no pod of this manager
        uses and no process is starting a pause on (a running pause needs no host mount)."""
        if self.images is None:
            return
        mounted = [d for d in sorted((self.images.root / "containers").glob(
            pod_images.PAUSE_ROOTFS_PREFIX + "*")) if os.path.ismount(d / "rootfs")]
        if not mounted:
            return
        with self._lock:
            pods = list(self._sandboxes.values())
        used = {self._pause_rootfs_of(sb) for sb in pods}
        if self.pause is not None and not self.pause.image:  # could not be made again
            used.add(os.path.abspath(self.pause.rootfs))
        for d in mounted:
            if os.path.abspath(d / "rootfs") in used:
                continue
            with contextlib.suppress(ConflictError), \
                    self._pause_lock(d.name, shared=False, blocking=False):
                _image.unmount_rootfs(self.images, d.name)

    def _undo_pause(self, sb: Sandbox) -> None:
        self._delete_from_runtime(sb.id)

    def _pinned_kinds(self, sb: Sandbox) -> list[str]:
        ns = sb.config.linux.security_context.namespace_options
        kinds = [] if ns.ipc == NamespaceMode.NODE else ["ipc"]
        return kinds if sb.host_network else [*kinds, "uts"]

    def _do_namespaces(self, sb: Sandbox) -> None:
        _pin_namespaces(self._sandbox_dir(sb.id) / "ns", self._pinned_kinds(sb),
                        sb.config.hostname, sb.netns_path, sb.config.linux.sysctls)

    def _undo_namespaces(self, sb: Sandbox) -> None:
        ns_dir = self._sandbox_dir(sb.id) / "ns"
        for kind in ("ipc", "uts"):
            _umount(str(ns_dir / kind))
            (ns_dir / kind).unlink(missing_ok=True)

    def _delete_from_runtime(self, id: str) -> None:
        """Kill and delete a container from the supervisor (or runtime when it has no record)."""
        try:
            self.supervisor.delete(id, force=True)
        except NotFoundError:
            with contextlib.suppress(NotFoundError):
                self.runtime.delete(id, force=True)

    def _undo_sandbox(self, sb: Sandbox) -> builtins.list[BaseException]:
        """Undo every recorded step in reverse; the record keeps the steps that failed."""
        errors: builtins.list[BaseException] = []
        for step in reversed(sb.steps):
            try:
                getattr(self, f"_undo_{step}")(sb)
            except Exception as exc:
                errors.append(exc)
                continue
            sb.steps = tuple(s for s in sb.steps if s != step)
            if not sb.steps:
                break  # all undone: every caller drops the record next, no write needed
            with contextlib.suppress(Exception):  # best effort: the record only shrinks
                self._save(sb)
        return errors

    # -- stop / remove / status / list --------------------------------------------------------

    def stop_sandbox(self, id: str) -> None:
        """Stop every container (SIGKILL), the pause, tear down the network; idempotent.

        The record, files and containers stay until :meth:`remove_sandbox`.
        """
        try:
            sb = self._get_sandbox(id)
        except NotFoundError:
            return
        with self._sandbox_lock(id):
            self._stop_sandbox_locked(sb)

    def _stop_sandbox_locked(
        self, sb: Sandbox, meanwhile: Callable[[], None] | None = None, *, final: bool = False
    ) -> None:
        """Kill the containers and the pause, tear down the network, remove the netns.

        CNI DEL runs on a helper thread while the processes are killed (every one gets
        SIGKILL: nothing in the pod needs its network any more) and, if nothing failed,
        while ``meanwhile`` runs (``remove_sandbox`` deletes the containers and the pause
        there); the netns goes after CNI DEL. ``final``: see :meth:`_undo_network`; without
        it a DEL that cannot run stays recorded (a warning, not an error) for the removal.
        """
        errors: builtins.list[BaseException] = []
        net_failure: builtins.list[BaseException] = []

        def teardown() -> None:
            try:
                self._undo_network(sb, final)
            except BaseException as exc:  # handed to the caller
                net_failure.append(exc)

        net = None
        if "network" in sb.steps:
            net = threading.Thread(target=teardown, name=f"cni-del-{sb.id[:12]}")
            net.start()
        later: BaseException | None = None
        try:
            for c in self._containers_of(sb.id):
                try:
                    self._stop_container_locked(c, 0)
                except PodkitError as exc:
                    errors.append(exc)
            if "pause" in sb.steps:
                try:
                    self._kill_and_wait(sb.id, 0, _signal.SIGKILL)
                except PodkitError as exc:
                    errors.append(exc)
            with contextlib.suppress(PodkitError):
                _umount(self._files(sb).shm)
            if meanwhile is not None and not errors:
                try:
                    meanwhile()
                except BaseException as exc:  # raised once the stop is complete
                    later = exc
        finally:
            if net is not None:
                net.join()
        for step in ("namespaces", "network", "netns"):
            if step in sb.steps:
                try:
                    if step != "network":
                        getattr(self, f"_undo_{step}")(sb)
                    elif net_failure:
                        raise net_failure[0]
                except Exception as exc:  # e.g. a ValueError from a value CNI cannot take
                    if step == "network" and network.cni_cannot_run(exc):  # kept for the removal,
                        _log.warning(  # which gives it up; a stop that fails blocks kubelet
                            "sandbox %s: CNI DEL cannot run (%s); left to remove_sandbox",
                            sb.id, exc)
                    else:
                        errors.append(exc)
                    continue
                sb.steps = tuple(s for s in sb.steps if s != step)
        sb.state = SandboxState.SANDBOX_NOTREADY
        self._save(sb)
        if errors:
            raise PodkitError(f"stop of sandbox {sb.id} failed: "
                              + "; ".join(str(e) for e in errors))
        if later is not None:
            raise later

    def remove_sandbox(self, id: str) -> None:
        """Stop the pod if needed, remove its containers, files and record; idempotent."""
        try:
            sb = self._get_sandbox(id)
        except NotFoundError:
            return
        with self._sandbox_lock(id):
            if id not in self._sandboxes:
                return

            def delete_processes() -> None:  # while CNI DEL runs
                for c in self._containers_of(id):
                    self._remove_container_locked(c)
                if "pause" in sb.steps:
                    self._undo_pause(sb)
                    sb.steps = tuple(s for s in sb.steps if s != "pause")

            self._stop_sandbox_locked(sb, meanwhile=delete_processes, final=True)
            sb.phase = "removing"
            self._save(sb)
            errors = self._undo_sandbox(sb)
            if errors:
                raise PodkitError(f"remove of sandbox {id} failed: "
                                  + "; ".join(str(e) for e in errors))
            self._forget_sandbox(sb)

    def sandbox_status(self, id: str) -> Sandbox:
        """The pod's record; NOTREADY once its pause has exited."""
        sb = self._get_sandbox(id)
        with self._sandbox_lock(id):
            if (sb.state == SandboxState.SANDBOX_READY and "pause" in sb.steps
                    and not self._running(sb.id)):
                sb.state = SandboxState.SANDBOX_NOTREADY
                self._save(sb)
            return attrs.evolve(sb)

    def list_sandboxes(self, filter: SandboxFilter | None = None) -> builtins.list[Sandbox]:
        """Pods matching ``filter`` (all by default), oldest first."""
        f = filter or SandboxFilter()
        with self._lock:  # a pod whose undo failed is listed (NOTREADY): remove retries it
            items = [attrs.evolve(s) for s in self._sandboxes.values() if s.phase != "creating"]
        return sorted(
            (s for s in items
             if s.id.startswith(f.id) and (f.state is None or s.state == f.state)
             and all(s.config.labels.get(k) == v for k, v in f.label_selector.items())),
            key=lambda s: s.created_at,
        )

    def _running(self, id: str) -> bool:
        try:
            return self.runtime.state(id).status in ("running", "created", "paused")
        except NotFoundError:
            return False

    # -- containers -------------------------------------------------------------------------

    def _containers_of(self, sandbox_id: str) -> builtins.list[Container]:
        with self._lock:
            return [c for c in self._containers.values() if c.sandbox_id == sandbox_id]

    def _pod_context(self, sb: Sandbox) -> PodContext:
        pid = sb.pid
        if "pause" in sb.steps:
            paths = {t: f"/proc/{pid}/ns/{n}" for t, n in
                     (("network", "net"), ("ipc", "ipc"), ("uts", "uts"), ("pid", "pid"))}
        else:  # infra-less: the pins; the pod pid namespace is the first running container's
            paths = {k: str(self._sandbox_dir(sb.id) / "ns" / k) for k in self._pinned_kinds(sb)}
            if sb.netns_path:
                paths["network"] = sb.netns_path
            for c in sorted(self._containers_of(sb.id), key=lambda c: c.started_at):
                self._refresh(c)
                if c.state == ContainerState.CONTAINER_RUNNING and c.pid_namespace_owner:
                    paths["pid"] = f"/proc/{c.pid}/ns/pid"
                    break
        userns = sb.config.linux.security_context.namespace_options.userns_options
        if userns is not None and userns.mode == NamespaceMode.POD:
            paths["user"] = f"/proc/{pid}/ns/user"
        hostname = rules.host_hostname() if sb.host_network else ""
        return PodContext(id=sb.id, config=sb.config, files=self._files(sb),
                          namespace_paths=paths, hostname=hostname)

    def create_container(self, sandbox_id: str, config: ContainerConfig, *,
                         meta: Mapping[str, str] | None = None) -> str:
        """Validate and build the container's spec and bundle (CREATED); its ID.

        The runtime sees the container at :meth:`start_container` (supervisors create and start
        in one step). Bad configs fail here, before anything is written. ``config.image`` is an
        absolute rootfs directory, or (with ``images``) an image reference, image ID or digest:
        the container then gets its own rootfs from the store and the image's defaults
        (entrypoint, cmd, env, working dir, user, stop signal); an error after the rootfs was
        made removes it again. ``config.stop_signal`` is 0 (the image's, else SIGTERM) or a
        signal the CRI can name (1-31, 34-64). ``meta`` is kept in the record as is.
        """
        if config.stop_signal and not pod_images.valid_stop_signal(config.stop_signal):
            raise ContainerConfigError(
                f"stop_signal {config.stop_signal}: not a Linux signal the CRI can name (want "
                "0 for the default, 1-31 or 34-64)")
        sb = self._get_sandbox(sandbox_id)
        with self._sandbox_lock(sandbox_id):
            if sb.state != SandboxState.SANDBOX_READY or sb.phase != "created":
                raise ConflictError(f"sandbox {sandbox_id} is not ready")
            rootfs = config.image
            img: _image.Image | None = None
            defaults = None
            if self.images is not None and not os.path.isabs(rootfs):
                if not rootfs:
                    raise ContainerConfigError("image: required (a rootfs directory or an image)")
                img = pod_images.find_image(self.images, rootfs)
                icfg = self.images.config(img)
                defaults = pod_images.image_defaults(img, icfg)
                if not config.stop_signal and icfg.stop_signal:
                    config = attrs.evolve(config, stop_signal=pod_images.signal_number(
                        icfg.stop_signal, f"StopSignal of image {img.name}"))
            elif not os.path.isabs(rootfs) or not os.path.isdir(rootfs):
                raise ContainerConfigError(
                    f"image {rootfs!r}: must be an existing rootfs directory (absolute path)"
                    + ("" if os.path.isabs(rootfs) else
                       " or an image reference (this manager has no image store)"))
            target = None
            ns = config.linux.security_context.namespace_options
            if ns.pid == NamespaceMode.TARGET:
                t = self._containers.get(ns.target_id)
                if t is None or t.sandbox_id != sandbox_id:
                    raise ContainerConfigError(
                        f"namespace_options.target_id {ns.target_id!r}: no such container in "
                        f"sandbox {sandbox_id}")
                self._refresh(t)
                if t.state == ContainerState.CONTAINER_RUNNING:
                    target = f"/proc/{t.pid}/ns/pid"
            c = Container(id=secrets.token_hex(32), sandbox_id=sandbox_id,
                          name=rules.container_name(config.metadata, sb.config.metadata),
                          config=config, created_at=_now(), meta=dict(meta or {}))
            pod = self._pod_context(sb)
            build_config = config
            if ns.pid == NamespaceMode.POD and "pid" not in pod.namespace_paths and \
                    sb.config.linux.security_context.namespace_options.pid != NamespaceMode.NODE:
                # infra-less pod without a running container yet: this one's new pid
                # namespace becomes the pod's
                build_config = attrs.evolve(config, linux=attrs.evolve(
                    config.linux, security_context=attrs.evolve(
                        config.linux.security_context, namespace_options=attrs.evolve(
                            ns, pid=NamespaceMode.CONTAINER))))
                c.pid_namespace_owner = True
            elif "pause" not in sb.steps and ns.pid == NamespaceMode.POD:
                c.pid_namespace_owner = True  # joins the owner's namespace, can stand in for it

            def build(rootfs: str) -> oci.Spec:
                return build_container_spec(
                    build_config, pod, id=c.id, rootfs=rootfs, image=defaults,
                    target_pid_namespace=target, oom_score_floor=self.oom_score_floor,
                    cdi=self.cdi,
                )

            if sb.config.log_directory and config.log_path:
                c.log_path = rules.container_log_path(
                    sb.config.log_directory, config.log_path, ContainerConfigError)
            if img is None:
                spec = build(rootfs)
            else:  # the image's rootfs is needed to build (user names are looked up in it)
                validate_container_config(build_config, pod)
            self._reserve(c.name, c.id, "container")
            try:
                if img is not None:
                    assert self.images is not None
                    # recorded before it exists: recover() removes it after a crash
                    c.image_ref, c.rootfs_key, c.steps = img.name, c.id, ("rootfs",)
                    c.image_id, c.image_digest = img.config.digest, img.target.digest
                    self._save(c)
                    made = _image.create_rootfs(self.images, img, c.rootfs_key,
                                                mode=self.rootfs_mode)
                    spec = build(str(made.path))
                c.cgroups_path = (spec.linux.cgroups_path if spec.linux else None) or ""
                # bundle first, then the record: recover() removes bundles without a record
                bundle = self._container_dir(c.id) / "bundle"
                bundle.mkdir(parents=True)
                spec.dump(bundle / "config.json")
                c.steps = (*c.steps, "bundle")
                c.phase = "created"
                self._save(c)
                with self._lock:
                    self._containers[c.id] = c
                    self._built[c.id] = Bundle(bundle, spec)
            except BaseException as exc:
                try:
                    self._forget_container(c)
                except Exception as e:  # the record stays: recover() retries
                    exc.add_note(f"cleanup after the failure also failed: {e}")
                    self._release(c.name, c.id)
                raise
            return c.id

    def adopt_rootfs(self, id: str, rootfs_key: str, *, image_ref: str = "",
                     image_id: str = "", image_digest: str = "",
                     meta: Mapping[str, str] | None = None) -> None:
        """Record that the store rootfs ``rootfs_key`` (and that image) belongs to container
        ``id``, so it is removed with it: for containers whose rootfs a caller made itself
        (the CRI server did before the manager resolved images). ``meta`` is merged in."""
        if self.images is None:
            raise InvalidArgumentError(
                f"container {id}: rootfs {rootfs_key!r} needs the image store (images=)")
        c = self._get_container(id)
        with self._sandbox_lock(c.sandbox_id):
            if c.rootfs_key and c.rootfs_key != rootfs_key:
                raise ConflictError(f"container {id} already has the rootfs {c.rootfs_key!r}")
            c.rootfs_key = validate_id(rootfs_key, "rootfs key")
            c.image_ref = image_ref or c.image_ref
            c.image_id = image_id or c.image_id
            c.image_digest = image_digest or c.image_digest
            c.meta = {**c.meta, **(meta or {})}
            self._save(c)

    def _forget_container(self, c: Container) -> None:
        if c.rootfs_key:  # before the record goes: a failure keeps it for a later retry
            if self.images is None:
                raise PodkitError(
                    f"container {c.id}: its rootfs {c.rootfs_key!r} (image {c.image_ref}) is "
                    "in an image store this manager was not given (images=)")
            try:
                _image.remove_rootfs(self.images, c.rootfs_key)
            except OSError as exc:
                raise PodkitError(f"container {c.id}: remove rootfs {c.rootfs_key}: {exc}") \
                    from exc
        shutil.rmtree(self._container_dir(c.id), ignore_errors=True)
        self._drop_record("containers", c.id)
        with self._lock:
            self._containers.pop(c.id, None)
            self._built.pop(c.id, None)
        self._release(c.name, c.id)

    def _log_path(self, c: Container) -> str:
        return c.log_path or str(self._container_dir(c.id) / "container.log")

    def container_log_file(self, id: str) -> str:
        """Where the container's output goes: its CRI log path, or a file in its own dir
        when the pod has no log directory (removed with the container)."""
        return self._log_path(self._get_container(id))

    def start_container(self, id: str) -> None:
        """Create and start the container under the supervisor (CREATED -> RUNNING)."""
        c = self._get_container(id)
        with self._sandbox_lock(c.sandbox_id):
            if c.state != ContainerState.CONTAINER_CREATED:
                raise ConflictError(f"container {id} is {c.state.name}, not CREATED")
            c.steps = (*c.steps, "runtime")
            self._save(c)
            cfg = c.config
            started = _now()
            with self._lock:
                built = self._built.pop(id, None)
            try:
                c.pid = self.supervisor.start(
                    id, built or self._container_dir(id) / "bundle", log_path=self._log_path(c),
                    tty=cfg.tty, stdin=cfg.stdin, stdin_once=cfg.stdin_once)
            except BaseException as exc:
                try:
                    self._delete_from_runtime(id)
                    c.steps = tuple(s for s in c.steps if s != "runtime")
                except Exception as e:  # the step stays: removing the container retries it
                    exc.add_note(f"cleanup after the failure also failed: {e}")
                c.state = ContainerState.CONTAINER_EXITED
                c.exit_code, c.reason, c.message = 128, "StartError", str(exc)
                c.finished_at = _now()
                self._save(c)
                raise
            c.state = ContainerState.CONTAINER_RUNNING
            c.started_at = started
            self._save(c)

    def _exit_status(self, id: str) -> ExitStatus | None:
        """The exit status if the container has exited, without blocking."""
        sup = self.supervisor
        if isinstance(sup, ConmonSupervisor):
            try:
                status = sup.conmon.exit_status(id)
                if status is not None or sup.conmon.monitor_alive(id):
                    return status
                # conmon may have written the exit file and quit between the two looks
                status = sup.conmon.exit_status(id)
                if status is not None:
                    return status
            except NotFoundError:
                return ExitStatus(exit_code=255)
            # conmon is gone without an exit file (killed): the runtime has the last word
            return None if self._running(id) else ExitStatus(exit_code=255)
        if self._running(id):
            return None
        try:
            return sup.wait(id, 5.0)
        except (NotFoundError, RuntimeTimeoutError):
            return ExitStatus(exit_code=255)

    def _record_exit(self, c: Container, status: ExitStatus) -> None:
        c.state = ContainerState.CONTAINER_EXITED
        c.exit_code = status.exit_code
        c.finished_at = (int(status.exited_at.timestamp() * 1e9) if status.exited_at
                         else _now())
        c.finished_at = max(c.finished_at, c.started_at)
        oom = False
        if isinstance(self.supervisor, ConmonSupervisor):
            with contextlib.suppress(PodkitError, OSError):
                oom = self.supervisor.conmon.oom_killed(c.id)
        c.reason = "OOMKilled" if oom else ("Completed" if status.exit_code == 0 else "Error")
        self._save(c)

    def _refresh(self, c: Container) -> None:
        if c.state == ContainerState.CONTAINER_RUNNING:
            status = self._exit_status(c.id)
            if status is not None:
                self._record_exit(c, status)

    def _kill_and_wait(self, id: str, timeout: float, sig: int) -> ExitStatus:
        """Send ``sig``, wait ``timeout`` seconds, then SIGKILL everything; the exit status."""
        if timeout > 0:
            with contextlib.suppress(NotRunningError, NotFoundError):
                self.runtime.kill(id, sig)
            with contextlib.suppress(RuntimeTimeoutError):
                return self.supervisor.wait(id, timeout)
        with contextlib.suppress(NotRunningError, NotFoundError):
            self.runtime.kill(id, _signal.SIGKILL, all=True)
        try:
            return self.supervisor.wait(id, 60.0)
        except RuntimeTimeoutError:
            raise
        except OCIRuntimeError:
            # nobody supervises it any more (conmon killed, or an in-process supervisor of an
            # earlier process): the runtime says when it is gone; the exit code is lost
            deadline = time.monotonic() + 10.0
            while self._running(id):
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.02)
            return ExitStatus(exit_code=255)

    def stop_container(self, id: str, timeout: float = 0) -> None:
        """Stop signal (SIGTERM unless the config names one), ``timeout`` s, SIGKILL; idempotent."""
        try:
            c = self._get_container(id)
        except NotFoundError:
            return
        with self._sandbox_lock(c.sandbox_id):
            self._stop_container_locked(c, timeout)

    def _stop_container_locked(self, c: Container, timeout: float) -> None:
        self._refresh(c)
        if c.state != ContainerState.CONTAINER_RUNNING:
            return
        status = self._kill_and_wait(c.id, timeout, c.config.stop_signal or _signal.SIGTERM)
        self._record_exit(c, status)

    def remove_container(self, id: str) -> None:
        """Force-stop, delete from the runtime, remove bundle and record; idempotent.

        The log file is kept (it belongs to the log directory's owner).
        """
        try:
            c = self._get_container(id)
        except NotFoundError:
            return
        with self._sandbox_lock(c.sandbox_id):
            if id in self._containers:
                self._remove_container_locked(c)

    def _remove_container_locked(self, c: Container) -> None:
        self._stop_container_locked(c, 0)
        c.phase = "removing"
        self._save(c)
        if "runtime" in c.steps:
            self._delete_from_runtime(c.id)
        self._forget_container(c)

    def container_status(self, id: str) -> Container:
        """State, exit code, reason, timestamps, mounts and log path of a container."""
        c = self._get_container(id)
        with self._sandbox_lock(c.sandbox_id):
            self._refresh(c)
            return attrs.evolve(c)

    def list_containers(self, filter: ContainerFilter | None = None) -> builtins.list[Container]:
        """Containers matching ``filter`` (all by default), oldest first."""
        f = filter or ContainerFilter()
        with self._lock:
            items = list(self._containers.values())
        out = []
        for c in items:
            if c.phase != "created":
                continue
            with self._sandbox_lock(c.sandbox_id):
                self._refresh(c)
                c = attrs.evolve(c)
            if (c.id.startswith(f.id) and (f.state is None or c.state == f.state)
                    and c.sandbox_id.startswith(f.pod_sandbox_id)
                    and all(c.config.labels.get(k) == v for k, v in f.label_selector.items())):
                out.append(c)
        return sorted(out, key=lambda c: c.created_at)

    def exec_sync(self, id: str, cmd: Sequence[str], timeout: float | None = None) -> ExecResult:
        """Run ``cmd`` in a running container; exit code, stdout, stderr."""
        c = self.container_status(id)
        if c.state != ContainerState.CONTAINER_RUNNING:
            raise NotRunningError(f"container {id} is not running ({c.state.name})")
        return self.supervisor.exec_sync(id, list(cmd), timeout)

    def attach(self, id: str) -> AttachStream:
        """Connect to a running container's stdio (output from now on; stdin if configured)."""
        c = self.container_status(id)
        if c.state != ContainerState.CONTAINER_RUNNING:
            raise NotRunningError(f"container {id} is not running ({c.state.name})")
        return self.supervisor.attach(id)

    def resize_tty(self, id: str, rows: int, cols: int) -> None:
        """Resize the tty of a running container created with ``tty=True``."""
        c = self.container_status(id)
        if not c.config.tty:
            raise InvalidArgumentError(f"container {id} has no tty")
        if c.state != ContainerState.CONTAINER_RUNNING:
            raise NotRunningError(f"container {id} is not running ({c.state.name})")
        self.supervisor.resize(id, rows, cols)

    def update_container_resources(self, id: str, resources: LinuxContainerResources) -> None:
        """Change a running container's cgroup limits (and remember them in its record)."""
        c = self._get_container(id)
        with self._sandbox_lock(c.sandbox_id):
            spec = oci.generate(oci.default_spec(), *_with_resources(resources))
            res = spec.linux.resources if spec.linux else None
            if res is None:
                raise InvalidArgumentError(f"no resources to update in {resources!r}")
            self.runtime.update(id, res)
            c.config = attrs.evolve(
                c.config, linux=attrs.evolve(c.config.linux, resources=resources))
            self._save(c)

    def reopen_container_log(self, id: str) -> None:
        """Continue the container's log in a new file (after the old one was moved away)."""
        c = self.container_status(id)
        if c.state != ContainerState.CONTAINER_RUNNING:
            raise NotRunningError(f"container {id} is not running ({c.state.name})")
        self.supervisor.reopen_log(id)

    def container_stats(self, id: str) -> ContainerStats:
        """CPU, memory and pid usage from the container's cgroup v1 directories."""
        c = self._get_container(id)
        return _cgroup_stats(c.id, c.cgroups_path)

    def sandbox_stats(self, id: str) -> SandboxStats:
        """The pod's usage: pause plus every container, summed; containers listed."""
        sb = self._get_sandbox(id)
        containers = tuple(_cgroup_stats(c.id, c.cgroups_path)
                           for c in self._containers_of(id) if c.cgroups_path)
        every = containers
        if sb.cgroups_path:
            every = (_cgroup_stats(sb.id, sb.cgroups_path), *containers)
        return SandboxStats(
            id=id, timestamp=_now(),
            cpu_usage_core_nano_seconds=sum(s.cpu_usage_core_nano_seconds for s in every),
            memory_working_set_bytes=sum(s.memory_working_set_bytes for s in every),
            process_count=sum(s.process_count for s in every),
            containers=containers,
        )

    # -- recovery ---------------------------------------------------------------------------

    def recover(self) -> RecoveryReport:
        """Load the records an earlier manager left; undo or finish its half-done operations.

        Pods caught in ``run_sandbox`` or ``remove_sandbox`` are undone (every recorded step in
        reverse; one whose undo fails stays listed, NOTREADY, for :meth:`remove_sandbox`);
        containers caught in create or remove are removed; the rest is adopted (a pod whose
        pause is gone is NOTREADY). Temp files of writes cut short are removed, and a shared
        pause rootfs no pod uses is unmounted. Then :meth:`remove_all` removes everything if
        wanted.
        """
        rolled: builtins.list[str] = []
        errors: builtins.list[str] = []
        for path in self._sweep_temps():
            _log.info("recover: removed %s (a write cut short)", path)
        sandboxes = {s.id: s for s in self._load_records("sandboxes", Sandbox)}
        containers: builtins.list[Container] = self._load_records("containers", Container)
        with self._lock:  # records this manager already holds stay the ones in use
            for s in sandboxes.values():
                sandboxes[s.id] = self._sandboxes.setdefault(s.id, s)
                self._names.setdefault(s.name, s.id)
            containers = [self._containers.setdefault(c.id, c) for c in containers]
            for c in containers:
                self._names.setdefault(c.name, c.id)
        adopted_c = []
        for c in containers:
            sb = sandboxes.get(c.sandbox_id)
            if c.phase != "created" or sb is None or sb.phase != "created":
                try:
                    if "runtime" in c.steps:
                        self._delete_from_runtime(c.id)
                    self._forget_container(c)
                    rolled.append(c.id)
                except PodkitError as exc:
                    errors.append(f"container {c.id}: {exc}")
            else:
                with self._sandbox_lock(c.sandbox_id):
                    self._refresh(c)
                adopted_c.append(c.id)
        self._remove_orphan_dirs(set(sandboxes), {c.id for c in containers})
        adopted_s = []
        for sb in sandboxes.values():
            if sb.phase == "created":
                self.sandbox_status(sb.id)
                adopted_s.append(sb.id)
                continue
            with self._sandbox_lock(sb.id):
                errs = self._undo_sandbox(sb)
                if errs:
                    errs += self._keep_for_removal(sb)
                    errors.extend(f"sandbox {sb.id}: {e}" for e in errs)
                else:
                    self._forget_sandbox(sb)
                    rolled.append(sb.id)
        try:
            self._unmount_unused_pause_rootfs()
        except (PodkitError, OSError) as exc:
            errors.append(f"unmount unused pause rootfs: {exc}")
        return RecoveryReport(sandboxes=tuple(adopted_s), containers=tuple(adopted_c),
                              rolled_back=tuple(rolled), errors=tuple(errors))

    def _sweep_temps(self) -> builtins.list[Path]:
        """``atomic_write`` temp files an earlier process left in the record, bundle, conmon
        and CNI result cache dirs (only files older than this manager: its own writes are
        never touched)."""
        dirs = [self.state_dir / "sandboxes", self.state_dir / "containers"]
        if self.networks is not None:
            dirs.append(Path(self.networks.client.cache_dir) / "results")
        for kind in ("sandboxes", "containers"):
            dirs += [d / "bundle" for d in (self.root_dir / kind).iterdir()]
        if isinstance(self.supervisor, ConmonSupervisor):
            base = self.supervisor.conmon.state_dir / "containers"
            dirs += sorted(base.iterdir()) if base.is_dir() else []
        return [p for d in dirs for p in sweep_atomic_temps(d, older_than=self._opened_at)]

    def _remove_orphan_dirs(self, sandboxes: set[str], containers: set[str]) -> None:
        """Directories under root_dir without a record (a crash between writing and recording)."""
        for kind, known in (("sandboxes", sandboxes), ("containers", containers)):
            for d in (self.root_dir / kind).iterdir():
                if d.name not in known:
                    with contextlib.suppress(PodkitError):
                        _umount(str(d / "shm"))
                    shutil.rmtree(d, ignore_errors=True)

    def remove_all(self) -> None:
        """Stop and remove every pod (and so every container) this manager knows.

        Every pod is tried; the ones that could not be removed (they stay listed, NOTREADY)
        are named together in one ``PodkitError`` at the end.
        """
        with self._lock:
            ids = list(self._sandboxes)
        errors = []
        for id in ids:
            try:
                self.remove_sandbox(id)
            except Exception as exc:
                errors.append(f"{id}: {exc}")
        if errors:
            raise PodkitError(f"{len(errors)} of {len(ids)} pods could not be removed: "
                              + "; ".join(errors))
