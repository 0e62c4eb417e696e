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
import functools
import logging
import os
import secrets
import signal as _signal
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path

import attrs

from podkit import _trash, cgroups, cni, idmap, image, netns
from podkit._files import file_lock, make_dirs
from podkit.errors import InvalidArgumentError, NotFoundError, PodkitError
from podkit.pods import network, processes, recovery, rules, userns
from podkit.pods.config import SandboxConfig
from podkit.pods.container_spec import DeviceInjector
from podkit.pods.containers import ContainerLifecycle
from podkit.pods.pause import PauseRootfs
from podkit.pods.records import (
    INFRALESS_STEPS,
    SANDBOX_STEPS,
    USERNS_STEPS,
    Container,
    ContainerStats,
    PauseConfig,
    RecoveryReport,
    Sandbox,
    SandboxFilter,
    SandboxState,
    SandboxStats,
)
from podkit.pods.registry import Registry
from podkit.pods.sandbox_spec import (
    SANDBOX_OOM_SCORE_ADJ,
    SandboxConfigError,
    pod_cgroups_path,
    validate_sandbox_config,
)
from podkit.pods.steps import (
    ROOT_DIR_MODE,
    SandboxSteps,
    Step,
    at_once,
    network_alongside,
    remove_cgroup_leftovers,
    undo_steps,
)
from podkit.pods.store import RecordStore
from podkit.runtime import Conmon, ConmonSupervisor, Runc, Runtime, Supervisor

__all__ = ["SandboxManager"]

_log = logging.getLogger("podkit.sandbox")
_ANY_UNPRIVILEGED = 2**31  # an ID no file belongs to: what "others" may do


def _copy(sb: Sandbox) -> Sandbox:
    """``attrs.evolve(sb)`` in a third of its time (every ListPodSandbox copies every pod);
    every field by name (tests/cri/test_reply_wire.py checks none is left out)."""
    return Sandbox(id=sb.id, name=sb.name, config=sb.config, state=sb.state,
                   created_at=sb.created_at, netns_path=sb.netns_path, ips=sb.ips, pid=sb.pid,
                   cgroups_path=sb.cgroups_path, phase=sb.phase, steps=sb.steps)


def _now() -> int:
    return time.time_ns()


def _driver_for(runtime: Runtime, name: str | None) -> cgroups.Driver:
    """The manager's cgroup driver: ``name``, which a runtime with a ``systemd_cgroup`` flag
    must match; without a name, the runtime's flag, else the host's default."""
    flag = getattr(runtime, "systemd_cgroup", None)
    if not name:
        if isinstance(flag, bool):
            return cgroups.Driver.SYSTEMD if flag else cgroups.Driver.CGROUPFS
        return cgroups.default_driver()
    driver = cgroups.parse_driver(name, "cgroup_driver")
    if isinstance(flag, bool) and flag != driver.systemd:
        raise InvalidArgumentError(
            f"cgroup_driver {driver.value!r}: the runtime {runtime!r} runs "
            f"{'with' if flag else 'without'} --systemd-cgroup, so its cgroups are "
            f"{'systemd' if flag else 'cgroupfs'} ones; make it with "
            f"systemd_cgroup={driver.systemd} (or give cgroup_driver="
            f"{'systemd' if flag else 'cgroupfs'!r})")
    return driver


class SandboxManager(ContainerLifecycle):
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
    The pause's shared rootfs there stays mounted after the last pod goes (the next pod
    starts without making it again) until :meth:`close`, :meth:`remove_all` or
    :meth:`recover` finds no pod using it.
    ``cgroup_driver`` (``cgroupfs`` or ``systemd``, see ``podkit.cgroups.driver``) says who
    makes the cgroups: a :class:`~podkit.runtime.Runc` must run with the matching
    ``systemd_cgroup`` (a mismatch is refused); ``None`` takes the runtime's (its
    ``systemd_cgroup``), or for a runtime without one the host's default. ``cgroup_parent``
    is the parent of pods whose config names none (in either form; "" leaves the driver's
    default); it is removed, when empty, as the manager closes with no pod left.
    ``netns_dir`` is where pod network namespaces are pinned; one inside ``state_dir`` is the
    manager's own: it is unmounted and removed as the manager closes with no pin left in it.
    ``steps`` is the table of :meth:`run_sandbox`'s steps by name and ``sandbox_steps`` the
    object doing their work (see ``podkit.pods.steps``); ``records`` the store of the records
    on disk; ``registry`` the pods and containers in memory. The container methods come from
    :class:`~podkit.pods.containers.ContainerLifecycle`.
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
        cgroup_driver: str | None = None,
        cgroup_parent: str = "",
    ) -> None:
        self.cgroup_driver = _driver_for(runtime, cgroup_driver)
        if cgroup_parent:  # refused here, not at the first pod
            cgroups.parent_for(self.cgroup_driver, cgroup_parent)
        self.cgroup_parent = cgroup_parent
        if rootfs_mode not in ("auto", "overlay", "copy"):
            raise InvalidArgumentError(
                f"rootfs_mode {rootfs_mode!r}: want auto, overlay or copy")
        self._pause = PauseRootfs(pause, images)  # an image made into its shared rootfs
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
            make_dirs(d, ROOT_DIR_MODE)
            os.chmod(d, ROOT_DIR_MODE)  # an earlier podkit's were 0755
        self.records = RecordStore(self.state_dir)
        if supervisor is None:
            if not isinstance(runtime, Runc):
                raise InvalidArgumentError(
                    f"runtime {runtime!r} is not a Runc: give a supervisor for it")
            supervisor = ConmonSupervisor(Conmon(runtime, state_dir=self.state_dir / "conmon"))
        self.supervisor: Supervisor = supervisor
        self.oom_score_floor = rules.current_oom_score_adj()
        if self.pause is not None and self.oom_score_floor > SANDBOX_OOM_SCORE_ADJ:
            # info, not a warning: normal for a root without CAP_SYS_RESOURCE (CI runners,
            # containers), and containerd's restrict_oom_score_adj clamps without a word
            _log.info(
                "pause containers get OOM score %d instead of %d: this process (score %d) "
                "cannot lower scores without CAP_SYS_RESOURCE", self.oom_score_floor,
                SANDBOX_OOM_SCORE_ADJ, self.oom_score_floor)
        self.sandbox_steps = SandboxSteps(
            root_dir=self.root_dir, supervisor=supervisor, runtime=runtime, pause=self._pause,
            networks=lambda: self.networks, oom_score_floor=self.oom_score_floor,
            cgroup_driver=self.cgroup_driver)
        self.steps: dict[str, Step] = self.sandbox_steps.table()
        self.registry = Registry()
        self._networks_lock = threading.Lock()
        self._lock_cm = file_lock(self.state_dir / "manager.lock", blocking=False)
        self._lock_cm.__enter__()  # ConflictError while another manager uses state_dir
        self._opened_at = time.time()  # temp files older than this are an earlier process's

    @property
    def pause(self) -> PauseConfig | None:
        """The pause program (``None``: infra-less pods)."""
        return self._pause.config

    @property
    def images(self) -> image.ImageStore | None:
        """The image store container images and the pause image are resolved in."""
        return self._pause.images

    # -- lifetime ---------------------------------------------------------------------------

    def load_networks(self) -> str:
        """Load the pod networks through ``network_loader`` if they are not loaded yet (a CNI
        config dropped in after start); "" when loaded or nothing to do, else the reason."""
        if self.network_loader is None:
            return ""
        with self._networks_lock:
            if self.networks is not None:
                return ""
            try:
                self.networks = self.network_loader()
            except PodkitError as exc:
                return f"cni config not loaded: {exc}"
        return ""

    def close(self) -> None:
        """Unmount a shared pause rootfs no pod uses; finish deleting removed pods' files
        (up to 10 s; what is left goes with the next recovery); with no pod left, remove the
        empty default cgroup parent and the manager's own netns dir; release the state dir
        lock.
        Pods and containers keep running."""
        self.registry.close()  # the pidfds watching containers (a later look reopens them)
        _trash.wait(10.0)
        if self._lock_cm is not None:
            try:
                self._unmount_unused_pause_rootfs()
                if not self.registry.sandboxes():
                    self._remove_unused_dirs()
            finally:
                self._lock_cm.__exit__(None, None, None)
            self._lock_cm = None  # type: ignore[assignment]

    def __enter__(self) -> SandboxManager:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def user_namespaces(self) -> str:
        """Why this manager cannot run pods with a user namespace of their own (CRI
        ``userns_options`` POD), "" when it can: it needs pause containers, the kernel's
        ID-mapped mounts on ``root_dir``'s file system, and rootfs directories (the pause's,
        the image store's, ``root_dir``) every user may reach."""
        return self._userns_problem(_ANY_UNPRIVILEGED, _ANY_UNPRIVILEGED)

    def _userns_problem(self, uid: int, gid: int) -> str:
        """:meth:`user_namespaces` for a pod whose root is host ``uid``/``gid``."""
        if self.pause is None:
            return "this manager has pause=None (the pod's user namespace lives in its pause)"
        why = idmap.supported(self.root_dir)
        if why:
            return why
        places = [Path(self.pause.rootfs), self.root_dir,
                  *([self.images.root / "containers"] if self.images else [])]
        for place in places:
            why = idmap.unreachable(place, uid, gid)
            if why:
                return f"the rootfs dirs under {place} must be reachable by the pod's root: {why}"
        return ""

    # -- run_sandbox ------------------------------------------------------------------------

    def run_sandbox(self, config: SandboxConfig) -> Sandbox:
        """Create and start a pod; on any failure every step already done is undone.

        Order (containerd): reserve the name, create the netns, CNI ADD, write the sandbox files
        (hostname, hosts, resolv.conf, a 64 MiB tmpfs for /dev/shm), create and start the pause
        (``SANDBOX_STEPS``; ``USERNS_STEPS`` for a pod with its own user namespace; without a
        pause, ``INFRALESS_STEPS``: IPC and UTS pinned instead).
        """
        sb = self._new_sandbox(config)
        self.registry.reserve(sb.name, sb.id, "pod")
        with self.registry.sandbox_lock(sb.id):
            try:
                self.registry.add_sandbox(sb)
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
        if self.cgroup_parent and not config.linux.cgroup_parent:
            config = attrs.evolve(config, linux=attrs.evolve(
                config.linux, cgroup_parent=self.cgroup_parent))
        sb = Sandbox(id=secrets.token_hex(32), name=rules.sandbox_name(config.metadata),
                     config=config, created_at=_now())
        pod_cgroups_path(config, sb.id, self.cgroup_driver)  # a parent the driver cannot take
        if sb.host_network and config.hostname:
            raise SandboxConfigError(
                f"hostname {config.hostname!r}: must be empty for a host-network pod (it uses "
                "the host's UTS namespace; runc refuses to set a hostname there)"
            )
        ids = userns.pod_id_map(config)
        if ids is not None and ids.root is not None:
            problem = self._userns_problem(*ids.root)
            if problem:
                raise SandboxConfigError(f"{userns.FIELD}: mode POD cannot run here: {problem}")
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
        """Each step in order; the netns and CNI ADD alongside the files and the pause (the
        files alone when the pod's network sysctls must wait for ADD: ``network_first``).

        The record on disk lists every step before the first is taken (one write: undoing a
        step not taken is harmless, so a kill anywhere leaves a record recover() can undo);
        the record in memory lists the steps taken or under way, so a failure here undoes
        those.
        """
        steps = (INFRALESS_STEPS if self.pause is None else
                 USERNS_STEPS if userns.pod_id_map(sb.config) is not None else SANDBOX_STEPS)
        planned = [step for step in steps
                   if not (sb.host_network and step in ("netns", "network"))]
        if "netns" in planned:
            sb.netns_path = os.path.join(self.netns_dir, f"{self.netns_prefix}{sb.id[:16]}")
        if "pause" in planned:  # what undoing the pause removes leftovers of
            sb.cgroups_path = pod_cgroups_path(sb.config, sb.id, self.cgroup_driver)
        sb.steps = tuple(planned)
        self.records.save(sb)  # the first save also reserves the name on disk
        sb.steps = ()
        net = [s for s in planned if s in ("netns", "network")]
        rest = [s for s in planned if s not in net]
        if net:  # the netns and CNI ADD on a helper thread, the files and the pause here
            along = rest[:1] if network.network_first(sb.config) else rest
            rest = rest[len(along):]
            sb.steps = (*net, *along)
            side = [(self.steps[s].do, 0 if s == "files" else 1) for s in along]  # 1: the netns
            if "pause" in rest:  # its bundle, at least, while CNI runs
                side.append((self.sandbox_steps.write_pause_bundle, 0))
            network_alongside(sb, [self.steps[s].do for s in net], side)
        for step in rest:
            sb.steps = (*sb.steps, step)
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
        self.registry.drop_sandbox(sb.id)
        self._pause.forget(sb.id)
        self.registry.release(sb.name, sb.id)

    def _remove_unused_dirs(self) -> None:
        """With no pod left: the default cgroup parent (when empty) and the netns dir inside
        the state dir (when it pins nothing) go; a failure is logged, nothing else is
        touched."""
        if self.cgroup_parent and self.cgroup_driver is cgroups.Driver.CGROUPFS:
            remove_cgroup_leftovers("cgroup parent", self.cgroup_parent)
        if Path(self.netns_dir).absolute().is_relative_to(self.state_dir):
            try:
                netns.release_dir(self.netns_dir)
            except PodkitError as exc:
                _log.warning("netns dir %s: left in place: %s", self.netns_dir, exc)

    def _unmount_unused_pause_rootfs(self) -> None:
        """Unmount each shared pause rootfs no pod of this manager uses."""
        pods = [(sb.id, self.sandbox_steps.sandbox_dir(sb.id) / "bundle")
                for sb in self.registry.sandboxes()]
        self._pause.unmount_unused(pods)

    # -- stop / remove / status / list --------------------------------------------------------

    def stop_sandbox(self, id: str) -> None:
        """Stop every container (SIGKILL), the pause, tear down the network; idempotent.

        The killed containers and the pause are deleted from the runtime while CNI DEL runs
        (containerd deletes its tasks in the stop too); the records (exit codes), logs, files
        and containers stay until :meth:`remove_sandbox`.
        """
        try:
            sb = self.registry.sandbox(id)
        except NotFoundError:
            return
        with self.registry.sandbox_lock(id):
            self._stop_sandbox_locked(
                sb, meanwhile=functools.partial(self._delete_pod_processes, sb, forget=False))

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
        there); the netns goes after CNI DEL. ``final``: see :meth:`_undo_network`, and no record
        write (the removal recorded itself first); without it a DEL that cannot run stays
        recorded (a warning, not an error) for the removal.
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
        if not final:  # a removal recorded itself first (see remove_sandbox)
            self.records.save(sb)
        if errors:
            raise PodkitError(f"stop of sandbox {sb.id} failed: "
                              + "; ".join(str(e) for e in errors))
        if later is not None:
            raise later

    def _kill_pod_processes(self, sb: Sandbox) -> builtins.list[BaseException]:
        """SIGKILL every container, then the pause; unmount /dev/shm. The errors."""
        errors: builtins.list[BaseException] = []
        for c in self.registry.containers_of(sb.id):
            try:
                self._stop_container_locked(c, 0)
            except PodkitError as exc:
                errors.append(exc)
        if "pause" in sb.steps:
            try:
                if not self._exit_recorded(sb.id):  # a stop already saw it go: no kill
                    processes.kill_and_wait(self.supervisor, self.runtime, sb.id, 0,
                                            _signal.SIGKILL)
            except PodkitError as exc:
                errors.append(exc)
        with contextlib.suppress(PodkitError):
            netns.unmount_all(self.sandbox_steps.files(sb).shm)
        return errors

    def _exit_recorded(self, id: str) -> bool:
        """Whether conmon recorded the exit of ``id`` (its init is gone: nothing to kill)."""
        if not isinstance(self.supervisor, ConmonSupervisor):
            return False
        try:
            return self.supervisor.conmon.exit_status(id) is not None
        except PodkitError:  # no record: the runtime's force delete has the last word
            return False

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
            sb = self.registry.sandbox(id)
        except NotFoundError:
            return
        with self.registry.sandbox_lock(id):
            if not self.registry.has_sandbox(id):
                return

            # recorded once, first: from here recover() undoes every step the record lists
            # (undoing one already undone is harmless) and rolls back the pod's containers,
            # so neither the stop nor a container removal below needs a write of its own
            if sb.phase != "removing":
                sb.phase = "removing"
                self.records.save(sb)
            self._stop_sandbox_locked(  # the deletes while CNI DEL runs
                sb, meanwhile=functools.partial(self._delete_pod_processes, sb, forget=True),
                final=True)
            errors = self._undo_sandbox(sb)
            if errors:
                raise PodkitError(f"remove of sandbox {id} failed: "
                                  + "; ".join(str(e) for e in errors))
            self._forget_sandbox(sb)

    def _delete_pod_processes(self, sb: Sandbox, *, forget: bool) -> None:
        """Delete every container (``forget``: and remove it) and the pause from the
        runtime, all at once (each is a ``runc delete`` of its own, and their records are
        separate); the first error is raised once all were tried, the others as notes."""
        jobs = [functools.partial(self._delete_container, c, forget=forget)
                for c in self.registry.containers_of(sb.id)]
        pause = "pause" in sb.steps
        if pause:
            jobs.append(functools.partial(self.steps["pause"].undo, sb))
        errors = at_once(jobs)
        if pause and errors[-1] is None:
            sb.steps = tuple(s for s in sb.steps if s != "pause")
        failed = [e for e in errors if e is not None]
        if failed:
            for e in failed[1:]:
                failed[0].add_note(f"also failed: {e}")
            raise failed[0]

    def _delete_container(self, c: Container, *, forget: bool) -> None:
        """Delete a stopped container of a stopped pod from the runtime; with ``forget``
        (the pod is being removed) its rootfs, dir and record too (no ``removing`` write:
        recover() rolls back the containers of such a pod). Its record keeps naming the
        ``runtime`` step (no write): deleting a container again is harmless."""
        if "runtime" in c.steps:
            processes.delete(self.supervisor, self.runtime, c.id)
            remove_cgroup_leftovers(c.id, c.cgroups_path)
            c.steps = tuple(s for s in c.steps if s != "runtime")
        if forget:
            self._forget_container(c)

    def sandbox_status(self, id: str) -> Sandbox:
        """The pod's record; NOTREADY once its pause has exited."""
        sb = self.registry.sandbox(id)
        with self.registry.sandbox_lock(id):
            if (sb.state == SandboxState.SANDBOX_READY and "pause" in sb.steps
                    and not processes.running(self.runtime, sb.id)):
                sb.state = SandboxState.SANDBOX_NOTREADY
                self.records.save(sb)
            return attrs.evolve(sb)

    def list_sandboxes(self, filter: SandboxFilter | None = None) -> builtins.list[Sandbox]:
        """Pods matching ``filter`` (all by default), oldest first."""
        f = filter or SandboxFilter()
        # a pod whose undo failed is listed (NOTREADY): remove retries it
        items = [_copy(s) for s in self.registry.sandboxes() if s.phase != "creating"]
        return sorted(
            (s for s in items
             if s.id.startswith(f.id) and (f.state is None or s.state == f.state)
             and all(s.config.labels.get(k) == v for k, v in f.label_selector.items())),
            key=lambda s: s.created_at,
        )

    def sandbox_stats(self, id: str) -> SandboxStats:
        """The pod's usage: pause plus every container whose cgroup exists, summed; those
        containers listed. ``NotFoundError`` when the pod's own cgroup is gone."""
        sb = self.registry.sandbox(id)
        containers: list[ContainerStats] = []
        for c in self.registry.containers_of(id):
            if c.cgroups_path:
                with contextlib.suppress(NotFoundError):  # exited and deleted: no cgroup
                    containers.append(ContainerStats.of(c.id, cgroups.stats(c.cgroups_path),
                                                        _now()))
        every = tuple(containers)
        if sb.cgroups_path:
            every = (ContainerStats.of(sb.id, cgroups.stats(sb.cgroups_path), _now()), *every)
        return SandboxStats.total(id, _now(), every, tuple(containers))

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
        live = recovery.PendingLiveIds(self.runtime)  # `list` runs while the records load
        for path in self._sweep_temps():
            _log.info("recover: removed %s (a write cut short)", path)
        # records this manager already holds stay the ones in use
        sandboxes, containers = self.registry.adopt(self.records.load("sandboxes", Sandbox),
                                                    self.records.load("containers", Container))
        adopted_c = self._recover_containers(containers, sandboxes, rolled, errors)
        recovery.remove_orphan_dirs(self.root_dir, set(sandboxes), {c.id for c in containers})
        adopted_s = self._recover_sandboxes(sandboxes.values(), live, rolled, errors)
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
                        remove_cgroup_leftovers(c.id, c.cgroups_path)
                    self._forget_container(c)
                    rolled.append(c.id)
                except PodkitError as exc:
                    errors.append(f"container {c.id}: {exc}")
            else:
                with self.registry.sandbox_lock(c.sandbox_id):
                    self._refresh(c)
                adopted.append(c.id)
        return adopted

    def _recover_sandboxes(self, sandboxes: Iterable[Sandbox], pending: recovery.PendingLiveIds,
                           rolled: builtins.list[str],
                           errors: builtins.list[str]) -> builtins.list[str]:
        """Undo the pods caught half-made or half-removed; adopt the rest (their IDs)."""
        adopted = []
        live = pending.result()  # one list instead of a state call per pod
        for sb in sandboxes:
            if sb.phase == "created":
                if live is None or sb.id not in live:
                    self.sandbox_status(sb.id)
                adopted.append(sb.id)
                continue
            with self.registry.sandbox_lock(sb.id):
                errs = self._undo_sandbox(sb)
                if errs:
                    errs += self._keep_for_removal(sb)
                    errors.extend(f"sandbox {sb.id}: {e}" for e in errs)
                else:
                    self._forget_sandbox(sb)
                    rolled.append(sb.id)
        return adopted

    def remove_all(self) -> None:
        """Stop and remove every pod (and so every container) this manager knows; then
        unmount a shared pause rootfs no pod uses.

        Every pod is tried; the ones that could not be removed (they stay listed, NOTREADY)
        are named together in one ``PodkitError`` at the end.
        """
        ids = [sb.id for sb in self.registry.sandboxes()]
        errors = []
        for id in ids:
            try:
                self.remove_sandbox(id)
            except Exception as exc:
                errors.append(f"{id}: {exc}")
        try:
            self._unmount_unused_pause_rootfs()
        except (PodkitError, OSError) as exc:  # the pods are gone; the mount waits for close()
            _log.warning("unmounting the unused pause rootfs: %s", exc)
        if errors:
            raise PodkitError(f"{len(errors)} of {len(ids)} pods could not be removed: "
                              + "; ".join(errors))
