"""``SandboxManager``: pods end to end (netns + CNI + pause + containers), crash-safe on disk.

What containerd's CRI plugin does between a CRI call and runc, as a library. Every operation
that creates something first writes a record under ``state_dir`` saying which step it is about
to take (``pods.store``), so a failure undoes exactly the steps already done (``pods.steps``),
and a new manager in a new process (``recover()``) can finish or undo what a killed one left
half-done. Re-exported from ``podkit.sandbox``.
"""

from __future__ import annotations

import builtins
import contextlib
import logging
import os
import secrets
import shutil
import signal as _signal
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path

import attrs

from podkit import cgroups, cni, image, netns, oci
from podkit._files import file_lock, validate_id
from podkit.errors import (
    AlreadyExistsError,
    ConflictError,
    InvalidArgumentError,
    NotFoundError,
    PodkitError,
    quote,
)
from podkit.pods import images as pod_images
from podkit.pods import network, processes, recovery, rules
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
    build_container_spec,
    check_container_config,
    resolve_security,
    resources_opts,
)
from podkit.pods.pause import PauseRootfs
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
    validate_sandbox_config,
)
from podkit.pods.steps import SandboxSteps, Step, network_and_files, pinned_kinds, undo_steps
from podkit.pods.store import RecordStore
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
from podkit.runtime.errors import NotRunningError

__all__ = ["SandboxManager"]

_log = logging.getLogger("podkit.sandbox")


def _now() -> int:
    return time.time_ns()


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
    ``steps`` is the table of :meth:`run_sandbox`'s steps by name (see ``podkit.pods.steps``);
    ``records`` the store of the records on disk.
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
        images: image.ImageStore | None = None,
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
        self._pause = PauseRootfs(pause, images)
        self.rootfs_mode = rootfs_mode
        self.root_dir = Path(root_dir).absolute()
        self.state_dir = Path(state_dir).absolute()
        self.runtime = runtime
        self.networks = networks
        self.network_loader = network_loader
        self.cdi = cdi
        self.netns_dir = netns_dir
        self.netns_prefix = netns_prefix
        for d in (self.root_dir / "sandboxes", self.root_dir / "containers"):
            d.mkdir(parents=True, exist_ok=True)
        self.records = RecordStore(self.state_dir)
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
        self.sandbox_steps = SandboxSteps(
            root_dir=self.root_dir, supervisor=supervisor, runtime=runtime, pause=self._pause,
            networks=lambda: self.networks, oom_score_floor=self.oom_score_floor)
        self.steps: dict[str, Step] = self.sandbox_steps.table()
        self._lock = threading.Lock()  # names and the two dicts
        self._names: dict[str, str] = {}
        self._sandboxes: dict[str, Sandbox] = {}
        self._containers: dict[str, Container] = {}
        self._built: dict[str, Bundle] = {}  # bundles of CREATED containers, spec in memory
        self._sandbox_locks: dict[str, threading.RLock] = {}
        self._lock_cm = file_lock(self.state_dir / "manager.lock", blocking=False)
        self._lock_cm.__enter__()  # ConflictError while another manager uses state_dir
        self._opened_at = time.time()  # temp files older than this are an earlier process's

    @property
    def pause(self) -> PauseConfig | None:
        """The pause program (``None``: infra-less pods)."""
        return self._pause.config

    @pause.setter
    def pause(self, value: PauseConfig | None) -> None:
        self._pause.config = value

    @property
    def images(self) -> image.ImageStore | None:
        """The image store container images and the pause image are resolved in."""
        return self._pause.images

    @images.setter
    def images(self, value: image.ImageStore | None) -> None:
        self._pause.images = value

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

    # -- records, names, locks --------------------------------------------------------------

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

    def _container_dir(self, id: str) -> Path:
        return self.root_dir / "containers" / id

    # -- run_sandbox ------------------------------------------------------------------------

    def run_sandbox(self, config: SandboxConfig) -> Sandbox:
        """Create and start a pod; on any failure every step already done is undone.

        Order (containerd): reserve the name, create the netns, CNI ADD, write the sandbox files
        (hostname, hosts, resolv.conf, a 64 MiB tmpfs for /dev/shm), create and start the pause
        (``SANDBOX_STEPS``; without a pause, ``INFRALESS_STEPS``: IPC and UTS pinned instead).
        """
        sb = self._new_sandbox(config)
        self._reserve(sb.name, sb.id, "pod")
        with self._sandbox_lock(sb.id):
            try:
                with self._lock:
                    self._sandboxes[sb.id] = sb
                self._take_steps(sb)
                sb.phase = "created"
                sb.state = SandboxState.SANDBOX_READY
                self.records.save(sb)
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

    def _new_sandbox(self, config: SandboxConfig) -> Sandbox:
        """The record of a new pod, once its config passed every check (nothing made yet)."""
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
        if not sb.host_network:  # bad annotations or port mappings fail before anything exists
            network.cni_capability_args(config)
        return sb

    def _take_steps(self, sb: Sandbox) -> None:
        """Each step in order, recorded before it is taken; network and files at once."""
        for step in SANDBOX_STEPS if self.pause is not None else INFRALESS_STEPS:
            if sb.host_network and step in ("netns", "network"):
                continue
            if step == "netns":  # recorded first, so an undo knows what to remove
                sb.netns_path = os.path.join(self.netns_dir, f"{self.netns_prefix}{sb.id[:16]}")
            if step == "files" and "network" in sb.steps:
                continue  # done while CNI ran (below)
            sb.steps = (*sb.steps, step)
            if step == "network":  # both recorded before either starts
                sb.steps = (*sb.steps, "files")
            self.records.save(sb)  # the first save also reserves the name on disk
            if step == "network":
                also = self.sandbox_steps.write_pause_bundle if self.pause is not None else None
                network_and_files(sb, self.steps["network"], self.steps["files"], also)
            else:
                self.steps[step].do(sb)

    def _undo_sandbox(self, sb: Sandbox) -> builtins.list[BaseException]:
        """Undo every recorded step in reverse; the record keeps the steps that failed."""
        return undo_steps(sb, self.steps, self.records.save)

    def _keep_for_removal(self, sb: Sandbox) -> builtins.list[Exception]:
        """A pod whose undo failed: listed NOTREADY, its name kept, removable (retries the
        undo). The error of saving that, if any (the older record is undone by recover())."""
        sb.phase, sb.state = "removing", SandboxState.SANDBOX_NOTREADY
        try:
            self.records.save(sb)
        except Exception as e:
            return [e]
        return []

    def _forget_sandbox(self, sb: Sandbox) -> None:
        self.records.drop("sandboxes", sb.id)
        with self._lock:
            self._sandboxes.pop(sb.id, None)
            self._sandbox_locks.pop(sb.id, None)
        self._pause.forget(sb.id)
        self._release(sb.name, sb.id)
        try:
            self._unmount_unused_pause_rootfs()
        except (PodkitError, OSError) as exc:  # the pod is gone; the mount waits for close()
            _log.warning("sandbox %s: unmounting the unused pause rootfs: %s", sb.id, exc)

    def _unmount_unused_pause_rootfs(self) -> None:
        """Unmount each shared pause rootfs no pod of this manager uses."""
        with self._lock:
            pods = [(id, self.sandbox_steps.sandbox_dir(id) / "bundle") for id in self._sandboxes]
        self._pause.unmount_unused(pods)

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

    def _undo_network(self, sb: Sandbox, final: bool) -> None:
        """CNI DEL; when ``final`` (the pod is being removed) a DEL that can never run is
        given up: podkit's own cache entries go, and a warning says what stays."""
        try:
            self.steps["network"].undo(sb)
        except Exception as exc:
            if not final or not network.cni_cannot_run(exc):
                raise
            self.sandbox_steps.give_up_network(sb, exc)

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
            errors += self._kill_pod_processes(sb)
            if meanwhile is not None and not errors:
                try:
                    meanwhile()
                except BaseException as exc:  # raised once the stop is complete
                    later = exc
        finally:
            if net is not None:
                net.join()
        errors += self._undo_pod_namespaces(sb, net_failure)
        sb.state = SandboxState.SANDBOX_NOTREADY
        self.records.save(sb)
        if errors:
            raise PodkitError(f"stop of sandbox {sb.id} failed: "
                              + "; ".join(str(e) for e in errors))
        if later is not None:
            raise later

    def _kill_pod_processes(self, sb: Sandbox) -> builtins.list[BaseException]:
        """SIGKILL every container, then the pause; unmount /dev/shm. The errors."""
        errors: builtins.list[BaseException] = []
        for c in self._containers_of(sb.id):
            try:
                self._stop_container_locked(c, 0)
            except PodkitError as exc:
                errors.append(exc)
        if "pause" in sb.steps:
            try:
                processes.kill_and_wait(self.supervisor, self.runtime, sb.id, 0, _signal.SIGKILL)
            except PodkitError as exc:
                errors.append(exc)
        with contextlib.suppress(PodkitError):
            netns.unmount_all(self.sandbox_steps.files(sb).shm)
        return errors

    def _undo_pod_namespaces(self, sb: Sandbox, net_failure: Sequence[BaseException]
                             ) -> builtins.list[BaseException]:
        """Undo the namespaces, network (its DEL already ran: ``net_failure``) and netns
        steps; the errors (a DEL that cannot run is left to the removal, with a warning)."""
        errors: builtins.list[BaseException] = []
        for step in ("namespaces", "network", "netns"):
            if step not in sb.steps:
                continue
            try:
                if step != "network":
                    self.steps[step].undo(sb)
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
        return errors

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
                    self.steps["pause"].undo(sb)
                    sb.steps = tuple(s for s in sb.steps if s != "pause")

            self._stop_sandbox_locked(sb, meanwhile=delete_processes, final=True)
            sb.phase = "removing"
            self.records.save(sb)
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
                    and not processes.running(self.runtime, sb.id)):
                sb.state = SandboxState.SANDBOX_NOTREADY
                self.records.save(sb)
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
            ns_dir = self.sandbox_steps.sandbox_dir(sb.id) / "ns"
            paths = {k: str(ns_dir / k) for k in pinned_kinds(sb)}
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
        return PodContext(id=sb.id, config=sb.config, files=self.sandbox_steps.files(sb),
                          namespace_paths=paths, hostname=hostname)

    def _target_pid_namespace(self, sandbox_id: str, config: ContainerConfig) -> str | None:
        """The pid namespace of ``namespace_options.target_id`` (TARGET mode), if it runs."""
        ns = config.linux.security_context.namespace_options
        if ns.pid != NamespaceMode.TARGET:
            return None
        with self._lock:
            t = self._containers.get(ns.target_id)
        if t is None or t.sandbox_id != sandbox_id:
            raise ContainerConfigError(
                f"namespace_options.target_id {ns.target_id!r}: no such container in "
                f"sandbox {sandbox_id}")
        self._refresh(t)
        return f"/proc/{t.pid}/ns/pid" if t.state == ContainerState.CONTAINER_RUNNING else None

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
            found = pod_images.container_image(self.images, config)
            config = found.config
            target = self._target_pid_namespace(sandbox_id, config)
            c = Container(id=secrets.token_hex(32), sandbox_id=sandbox_id,
                          name=rules.container_name(config.metadata, sb.config.metadata),
                          config=config, created_at=_now(), meta=dict(meta or {}))
            pod = self._pod_context(sb)
            build_config, c.pid_namespace_owner = rules.infraless_pid_namespace(
                config, sb.config, has_pause="pause" in sb.steps,
                pod_pid_known="pid" in pod.namespace_paths)

            check_container_config(build_config, pod)
            sec = resolve_security(build_config)  # profiles looked up (and loaded) once

            def build(rootfs: str) -> oci.Spec:
                return build_container_spec(
                    build_config, pod, id=c.id, rootfs=rootfs, image=found.defaults,
                    target_pid_namespace=target, oom_score_floor=self.oom_score_floor,
                    cdi=self.cdi, security=sec,
                )

            if sb.config.log_directory and config.log_path:
                c.log_path = rules.container_log_path(
                    sb.config.log_directory, config.log_path, ContainerConfigError)
            # with an image, its rootfs is needed to build (user names are looked up in it)
            spec = build(config.image) if found.image is None else None
            self._reserve(c.name, c.id, "container")
            try:
                if found.image is not None:
                    spec = build(self._make_rootfs(c, found.image))
                assert spec is not None
                self._write_bundle(c, spec)
            except BaseException as exc:
                try:
                    self._forget_container(c)
                except Exception as e:  # the record stays: recover() retries
                    exc.add_note(f"cleanup after the failure also failed: {e}")
                    self._release(c.name, c.id)
                raise
            return c.id

    def _make_rootfs(self, c: Container, img: image.Image) -> str:
        """The container's own rootfs from the image, recorded before it exists (recover()
        removes it after a crash)."""
        assert self.images is not None
        c.image_ref, c.rootfs_key, c.steps = img.name, c.id, ("rootfs",)
        c.image_id, c.image_digest = img.config.digest, img.target.digest
        self.records.save(c)
        made = image.create_rootfs(self.images, img, c.rootfs_key, mode=self.rootfs_mode)
        return str(made.path)

    def _write_bundle(self, c: Container, spec: oci.Spec) -> None:
        """The bundle first, then the record (recover() removes bundles without a record)."""
        c.cgroups_path = (spec.linux.cgroups_path if spec.linux else None) or ""
        bundle = self._container_dir(c.id) / "bundle"
        bundle.mkdir(parents=True)
        spec.dump(bundle / "config.json")
        c.steps = (*c.steps, "bundle")
        c.phase = "created"
        self.records.save(c)
        with self._lock:
            self._containers[c.id] = c
            self._built[c.id] = Bundle(bundle, spec)

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
            self.records.save(c)

    def _forget_container(self, c: Container) -> None:
        if c.rootfs_key:  # before the record goes: a failure keeps it for a later retry
            if self.images is None:
                raise PodkitError(
                    f"container {c.id}: its rootfs {c.rootfs_key!r} (image {c.image_ref}) is "
                    "in an image store this manager was not given (images=)")
            try:
                image.remove_rootfs(self.images, c.rootfs_key)
            except OSError as exc:
                raise PodkitError(f"container {c.id}: remove rootfs {c.rootfs_key}: {exc}") \
                    from exc
        shutil.rmtree(self._container_dir(c.id), ignore_errors=True)
        self.records.drop("containers", c.id)
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
            self.records.save(c)
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
                    processes.delete(self.supervisor, self.runtime, id)
                    c.steps = tuple(s for s in c.steps if s != "runtime")
                except Exception as e:  # the step stays: removing the container retries it
                    exc.add_note(f"cleanup after the failure also failed: {e}")
                c.state = ContainerState.CONTAINER_EXITED
                c.exit_code, c.reason, c.message = 128, "StartError", str(exc)
                c.finished_at = _now()
                self.records.save(c)
                raise
            c.state = ContainerState.CONTAINER_RUNNING
            c.started_at = started
            self.records.save(c)

    def _record_exit(self, c: Container, status: ExitStatus) -> None:
        c.state = ContainerState.CONTAINER_EXITED
        c.exit_code = status.exit_code
        c.finished_at = (int(status.exited_at.timestamp() * 1e9) if status.exited_at
                         else _now())
        c.finished_at = max(c.finished_at, c.started_at)
        oom = processes.oom_killed(self.supervisor, c.id)
        c.reason = "OOMKilled" if oom else ("Completed" if status.exit_code == 0 else "Error")
        self.records.save(c)

    def _refresh(self, c: Container) -> None:
        if c.state == ContainerState.CONTAINER_RUNNING:
            status = processes.exit_status(self.supervisor, self.runtime, c.id)
            if status is not None:
                self._record_exit(c, status)

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
        status = processes.kill_and_wait(self.supervisor, self.runtime, c.id, timeout,
                                         c.config.stop_signal or _signal.SIGTERM)
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
        self.records.save(c)
        if "runtime" in c.steps:
            processes.delete(self.supervisor, self.runtime, c.id)
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

    def _running_container(self, id: str) -> Container:
        c = self.container_status(id)
        if c.state != ContainerState.CONTAINER_RUNNING:
            raise NotRunningError(f"container {id} is not running ({c.state.name})")
        return c

    def exec_sync(self, id: str, cmd: Sequence[str], timeout: float | None = None) -> ExecResult:
        """Run ``cmd`` in a running container; exit code, stdout, stderr."""
        self._running_container(id)
        return self.supervisor.exec_sync(id, list(cmd), timeout)

    def attach(self, id: str) -> AttachStream:
        """Connect to a running container's stdio (output from now on; stdin if configured)."""
        self._running_container(id)
        return self.supervisor.attach(id)

    def resize_tty(self, id: str, rows: int, cols: int) -> None:
        """Resize the tty of a running container created with ``tty=True``."""
        c = self.container_status(id)
        if not c.config.tty:
            raise InvalidArgumentError(f"container {id} has no tty")
        self._running_container(id)
        self.supervisor.resize(id, rows, cols)

    def update_container_resources(self, id: str, resources: LinuxContainerResources) -> None:
        """Change a running container's cgroup limits (and remember them in its record)."""
        c = self._get_container(id)
        with self._sandbox_lock(c.sandbox_id):
            spec = oci.generate(oci.default_spec(), *resources_opts(resources))
            res = spec.linux.resources if spec.linux else None
            if res is None:
                raise InvalidArgumentError(f"no resources to update in {resources!r}")
            self.runtime.update(id, res)
            c.config = attrs.evolve(
                c.config, linux=attrs.evolve(c.config.linux, resources=resources))
            self.records.save(c)

    def reopen_container_log(self, id: str) -> None:
        """Continue the container's log in a new file (after the old one was moved away)."""
        self._running_container(id)
        self.supervisor.reopen_log(id)

    def container_stats(self, id: str) -> ContainerStats:
        """CPU, memory and pid usage from the container's cgroup v1 directories."""
        c = self._get_container(id)
        return ContainerStats.of(c.id, cgroups.usage(c.cgroups_path), _now())

    def sandbox_stats(self, id: str) -> SandboxStats:
        """The pod's usage: pause plus every container, summed; containers listed."""
        sb = self._get_sandbox(id)
        containers = tuple(ContainerStats.of(c.id, cgroups.usage(c.cgroups_path), _now())
                           for c in self._containers_of(id) if c.cgroups_path)
        every = containers
        if sb.cgroups_path:
            every = (ContainerStats.of(sb.id, cgroups.usage(sb.cgroups_path), _now()),
                     *containers)
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
        sandboxes = {s.id: s for s in self.records.load("sandboxes", Sandbox)}
        containers = self.records.load("containers", Container)
        with self._lock:  # records this manager already holds stay the ones in use
            for s in sandboxes.values():
                sandboxes[s.id] = self._sandboxes.setdefault(s.id, s)
                self._names.setdefault(s.name, s.id)
            containers = [self._containers.setdefault(c.id, c) for c in containers]
            for c in containers:
                self._names.setdefault(c.name, c.id)
        adopted_c = self._recover_containers(containers, sandboxes, rolled, errors)
        recovery.remove_orphan_dirs(self.root_dir, set(sandboxes), {c.id for c in containers})
        adopted_s = self._recover_sandboxes(sandboxes.values(), rolled, errors)
        try:
            self._unmount_unused_pause_rootfs()
        except (PodkitError, OSError) as exc:
            errors.append(f"unmount unused pause rootfs: {exc}")
        return RecoveryReport(sandboxes=tuple(adopted_s), containers=tuple(adopted_c),
                              rolled_back=tuple(rolled), errors=tuple(errors))

    def _sweep_temps(self) -> builtins.list[Path]:
        extra = []
        if self.networks is not None:
            extra.append(Path(self.networks.client.cache_dir) / "results")
        if isinstance(self.supervisor, ConmonSupervisor):
            base = self.supervisor.conmon.state_dir / "containers"
            extra += sorted(base.iterdir()) if base.is_dir() else []
        return recovery.sweep_temps(self.state_dir, self.root_dir, extra=extra,
                                    older_than=self._opened_at)

    def _recover_containers(self, containers: builtins.list[Container],
                            sandboxes: Mapping[str, Sandbox], rolled: builtins.list[str],
                            errors: builtins.list[str]) -> builtins.list[str]:
        """Remove the containers caught half-made or half-removed; adopt the rest (their IDs)."""
        adopted = []
        for c in containers:
            sb = sandboxes.get(c.sandbox_id)
            if c.phase != "created" or sb is None or sb.phase != "created":
                try:
                    if "runtime" in c.steps:
                        processes.delete(self.supervisor, self.runtime, c.id)
                    self._forget_container(c)
                    rolled.append(c.id)
                except PodkitError as exc:
                    errors.append(f"container {c.id}: {exc}")
            else:
                with self._sandbox_lock(c.sandbox_id):
                    self._refresh(c)
                adopted.append(c.id)
        return adopted

    def _recover_sandboxes(self, sandboxes: Iterable[Sandbox], rolled: builtins.list[str],
                           errors: builtins.list[str]) -> builtins.list[str]:
        """Undo the pods caught half-made or half-removed; adopt the rest (their IDs)."""
        adopted = []
        for sb in sandboxes:
            if sb.phase == "created":
                self.sandbox_status(sb.id)
                adopted.append(sb.id)
                continue
            with self._sandbox_lock(sb.id):
                errs = self._undo_sandbox(sb)
                if errs:
                    errs += self._keep_for_removal(sb)
                    errors.extend(f"sandbox {sb.id}: {e}" for e in errs)
                else:
                    self._forget_sandbox(sb)
                    rolled.append(sb.id)
        return adopted

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
