"""The container half of ``SandboxManager``: create, start, stop, remove and inspect the
application containers of its pods.

``ContainerLifecycle`` is a base class of ``SandboxManager`` (its public container methods are
the manager's); it works on the state the manager sets up (the records, the registry, the
supervisor and runtime) and asks the pod half only for a pod's namespaces and files. A
container's record names each step before it can exist (``rootfs`` before the rootfs is made;
``runtime`` with the bundle, so a start writes the record only once, after the runtime made
the container), so a failure or a later ``recover()`` removes exactly what exists.
"""

from __future__ import annotations

import builtins
import functools
import secrets
import signal
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import attrs

from podkit import _trash, cgroups, idmap, image, oci
from podkit._files import validate_id
from podkit.errors import ConflictError, InvalidArgumentError, NotFoundError, PodkitError
from podkit.image.unpack import rootfs_path
from podkit.pods import idmapped, processes, rules, userns
from podkit.pods import images as pod_images
from podkit.pods.config import ContainerConfig, LinuxContainerResources, NamespaceMode
from podkit.pods.container_spec import (
    ContainerConfigError,
    DeviceInjector,
    PodContext,
    build_container_spec,
    check_container_config,
    reads_rootfs,
    resolve_security,
    resources_opts,
)
from podkit.pods.records import (
    Container,
    ContainerFilter,
    ContainerState,
    ContainerStats,
    Sandbox,
    SandboxState,
)
from podkit.pods.registry import Registry
from podkit.pods.steps import (
    PRIVATE_DIR_MODE,
    SandboxSteps,
    pinned_kinds,
    remove_cgroup_leftovers,
)
from podkit.pods.store import RecordStore
from podkit.runtime import AttachStream, Bundle, ExecResult, ExitStatus, Runtime, Supervisor
from podkit.runtime.alongside import Alongside
from podkit.runtime.errors import NotRunningError
from podkit.runtime.resource_check import check_bundle_resources

__all__ = ["ContainerLifecycle"]


def _now() -> int:
    return time.time_ns()


def _copy(c: Container) -> Container:
    """``attrs.evolve(c)`` in 40 % of its time (every List copies every record); every field
    by name (tests/cri/test_reply_wire.py checks none is left out)."""
    return Container(
        id=c.id, sandbox_id=c.sandbox_id, name=c.name, config=c.config, state=c.state,
        created_at=c.created_at, started_at=c.started_at, finished_at=c.finished_at,
        exit_code=c.exit_code, reason=c.reason, message=c.message, log_path=c.log_path,
        pid=c.pid, cgroups_path=c.cgroups_path, phase=c.phase, steps=c.steps,
        pid_namespace_owner=c.pid_namespace_owner, image_ref=c.image_ref,
        rootfs_key=c.rootfs_key, image_id=c.image_id, image_digest=c.image_digest,
        meta=c.meta)


class ContainerLifecycle:
    """The container methods of ``SandboxManager`` (see there); the attributes below are the
    manager's."""

    root_dir: Path
    records: RecordStore
    registry: Registry
    runtime: Runtime
    supervisor: Supervisor
    sandbox_steps: SandboxSteps
    cdi: DeviceInjector | None
    rootfs_mode: str
    oom_score_floor: int
    cgroup_driver: cgroups.Driver

    @property
    def images(self) -> image.ImageStore | None:
        """The image store container images are resolved in (the manager's)."""
        raise NotImplementedError

    def _container_dir(self, id: str) -> Path:
        return self.root_dir / "containers" / id

    def _pod_context(self, sb: Sandbox) -> PodContext:
        """The pod as the container builder sees it: its namespace files, files, hostname."""
        pid = sb.pid
        if "pause" in sb.steps:
            paths = {t: f"/proc/{pid}/ns/{n}" for t, n in
                     (("network", "net"), ("ipc", "ipc"), ("uts", "uts"), ("pid", "pid"))}
        else:  # infra-less: the pins; the pod pid namespace is the first running container's
            ns_dir = self.sandbox_steps.sandbox_dir(sb.id) / "ns"
            paths = {k: str(ns_dir / k) for k in pinned_kinds(sb)}
            if sb.netns_path:
                paths["network"] = sb.netns_path
            for c in sorted(self.registry.containers_of(sb.id), key=lambda c: c.started_at):
                self._refresh(c)
                if c.state == ContainerState.CONTAINER_RUNNING and c.pid_namespace_owner:
                    paths["pid"] = f"/proc/{c.pid}/ns/pid"
                    break
        if userns.pod_id_map(sb.config) is not None:
            paths["user"] = str(self.sandbox_steps.userns_path(sb.id))
        hostname = rules.host_hostname() if sb.host_network else ""
        return PodContext(id=sb.id, config=sb.config, files=self.sandbox_steps.files(sb),
                          namespace_paths=paths, hostname=hostname)

    def _pod_userns(self, sb: Sandbox) -> idmap.UserNamespace | None:
        """The pod's own user namespace (its pin and maps); ``None``: the host's users."""
        ids = userns.pod_id_map(sb.config)
        if ids is None:
            return None
        return idmap.UserNamespace(str(self.sandbox_steps.userns_path(sb.id)), ids)

    def _mounts_dir(self, id: str) -> Path:
        """Where the ID-mapped views of a container's mounts are (``pods.idmapped``)."""
        return self.root_dir / "mounts" / id

    def _target_pid_namespace(self, sandbox_id: str, config: ContainerConfig) -> str | None:
        """The pid namespace of ``namespace_options.target_id`` (TARGET mode), if it runs."""
        ns = config.linux.security_context.namespace_options
        if ns.pid != NamespaceMode.TARGET:
            return None
        t = self.registry.find_container(ns.target_id)
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
        sb = self.registry.sandbox(sandbox_id)
        with self.registry.sandbox_lock(sandbox_id):
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
            ns = self._pod_userns(sb)
            if ns is not None:  # the runtime mounts podkit's ID-mapped views of the sources
                build_config = idmapped.staged(build_config, self._mounts_dir(c.id))

            def build(rootfs: str) -> oci.Spec:
                return build_container_spec(
                    build_config, pod, id=c.id, rootfs=rootfs, image=found.defaults,
                    target_pid_namespace=target, oom_score_floor=self.oom_score_floor,
                    cdi=self.cdi, security=sec, cgroup_driver=self.cgroup_driver,
                    checked=True,
                )

            if sb.config.log_directory and config.log_path:
                c.log_path = rules.container_log_path(
                    sb.config.log_directory, config.log_path, ContainerConfigError)
            # with an image, its rootfs is needed to build (user names are looked up in it)
            spec = build(config.image) if found.image is None else None
            self.registry.reserve(c.name, c.id, "container")
            making: Alongside | None = None
            try:
                if found.image is not None:
                    spec, making = self._image_spec(
                        c, found.image, reads_rootfs(build_config, found.defaults), build, ns)
                assert spec is not None
                if ns is not None:
                    self._stage_mounts(c, spec, ns, rootfs="" if found.image else config.image)
                check_bundle_resources(spec)  # a controller the host lacks: refused now
                self._write_bundle(c, spec, making)
            except BaseException as exc:
                if making is not None:
                    making.wait()  # the rootfs made (or not) before it is removed
                try:
                    self._forget_container(c)
                except Exception as e:  # the record stays: recover() retries
                    exc.add_note(f"cleanup after the failure also failed: {e}")
                    self.registry.release(c.name, c.id)
                raise
            return c.id

    def _image_spec(self, c: Container, img: image.Image, reads: bool,
                    build: Callable[[str], oci.Spec], ns: idmap.UserNamespace | None,
                    ) -> tuple[oci.Spec, Alongside | None]:
        """The spec of a container of ``img``, its own rootfs recorded first, then made
        (ID-mapped by the pod's user namespace ``ns``, if any): before the build when the
        build ``reads`` it (a user to look up), else on a helper thread meanwhile (returned:
        the record may say "created" only once it is done)."""
        path = self._record_rootfs(c, img)
        if reads:
            self._create_rootfs(c, img, ns)
            return build(path), None
        making = Alongside(functools.partial(self._create_rootfs, c, img, ns))
        making.begin()
        try:
            return build(path), making
        except BaseException:
            making.wait()
            raise

    def _record_rootfs(self, c: Container, img: image.Image) -> str:
        """Record the container's own rootfs before it exists (recover() removes it after a
        crash); where it will be."""
        assert self.images is not None
        c.image_ref, c.rootfs_key, c.steps = img.name, c.id, ("rootfs",)
        c.image_id, c.image_digest = img.config.digest, img.target.digest
        self.records.save(c)
        return str(rootfs_path(self.images, c.rootfs_key))

    def _create_rootfs(self, c: Container, img: image.Image,
                       ns: idmap.UserNamespace | None = None) -> None:
        """Make the rootfs :meth:`_record_rootfs` recorded (at ``rootfs_path``)."""
        assert self.images is not None
        image.create_rootfs(self.images, img, c.rootfs_key, mode=self.rootfs_mode, userns=ns)

    def _stage_mounts(self, c: Container, spec: oci.Spec, ns: idmap.UserNamespace, *,
                      rootfs: str) -> None:
        """Record, then make, the ID-mapped views of the container's mounts and of its
        ``rootfs`` directory (if given: the spec then names its view)."""
        if not c.config.mounts and not rootfs:
            return
        c.steps = (*c.steps, "mounts")
        self.records.save(c)
        directory = self._mounts_dir(c.id)
        idmapped.stage(c.config, directory, ns, rootfs=rootfs)
        if rootfs and spec.root is not None:
            spec.root.path = str(directory / idmapped.ROOTFS)

    def _write_bundle(self, c: Container, spec: oci.Spec, making: Alongside | None) -> None:
        """The bundle first (and the rootfs ``making``, if any, done), then the record
        (recover() removes bundles without a record).

        The record names the ``runtime`` step already: the start that follows then writes
        the record once (after the runtime made the container) instead of also before it.
        """
        c.cgroups_path = (spec.linux.cgroups_path if spec.linux else None) or ""
        cdir = self._container_dir(c.id)
        cdir.mkdir(mode=PRIVATE_DIR_MODE)
        bundle = Bundle.write(cdir / "bundle", spec)
        if making is not None:
            making.result()
        c.steps = (*c.steps, "bundle", "runtime")
        c.phase = "created"
        self.records.save(c)
        self.registry.add_container(c, bundle)

    def adopt_rootfs(self, id: str, rootfs_key: str, *, image_ref: str = "",
                     image_id: str = "", image_digest: str = "",
                     meta: Mapping[str, str] | None = None) -> None:
        """Record that the store rootfs ``rootfs_key`` (and that image) belongs to container
        ``id``, so it is removed with it: for containers whose rootfs a caller made itself
        (the CRI server did before the manager resolved images). ``meta`` is merged in."""
        if self.images is None:
            raise InvalidArgumentError(
                f"container {id}: rootfs {rootfs_key!r} needs the image store (images=)")
        c = self.registry.container(id)
        with self.registry.sandbox_lock(c.sandbox_id):
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
                image.remove_rootfs(self.images, c.rootfs_key, background=True)
            except OSError as exc:
                raise PodkitError(f"container {c.id}: remove rootfs {c.rootfs_key}: {exc}") \
                    from exc
        if "mounts" in c.steps:  # before the record goes, as the rootfs
            idmapped.unstage(self._mounts_dir(c.id))
        _trash.remove_later(self._container_dir(c.id), self.root_dir / _trash.TRASH)
        self.records.drop("containers", c.id)
        self.registry.drop_container(c.id)
        self.registry.release(c.name, c.id)

    def _log_path(self, c: Container) -> str:
        return c.log_path or str(self._container_dir(c.id) / "container.log")

    def container_log_file(self, id: str) -> str:
        """Where the container's output goes: its CRI log path, or a file in its own dir
        when the pod has no log directory (removed with the container)."""
        return self._log_path(self.registry.container(id))

    def start_container(self, id: str) -> None:
        """Create and start the container under the supervisor (CREATED -> RUNNING)."""
        c = self.registry.container(id)
        with self.registry.sandbox_lock(c.sandbox_id):
            if c.state != ContainerState.CONTAINER_CREATED:
                raise ConflictError(f"container {id} is {c.state.name}, not CREATED")
            if "runtime" not in c.steps:  # a record of an older podkit
                c.steps = (*c.steps, "runtime")
                self.records.save(c)
            cfg = c.config
            started = _now()
            built = self.registry.take_bundle(id)
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
            if processes.pids_are_host_pids(self.supervisor, self.runtime):
                self.registry.exits.watch(c.id, c.pid)  # gone already: the next look asks
            self.records.save(c)

    def _record_exit(self, c: Container, status: ExitStatus) -> None:
        self.registry.exits.forget(c.id)
        c.state = ContainerState.CONTAINER_EXITED
        c.exit_code = status.exit_code
        c.finished_at = (int(status.exited_at.timestamp() * 1e9) if status.exited_at
                         else _now())
        c.finished_at = max(c.finished_at, c.started_at)
        oom = processes.oom_killed(self.supervisor, c.id, c.cgroups_path)
        c.reason = "OOMKilled" if oom else ("Completed" if status.exit_code == 0 else "Error")
        self.records.save(c)

    def _refresh(self, c: Container) -> None:
        """Bring a RUNNING record up to date: while its process's pidfd says it runs, that is
        the answer (one poll); otherwise (exited, or not watched yet: after a restart, past
        the fd limit) ask the supervisor, and watch the process if it still runs."""
        if c.state != ContainerState.CONTAINER_RUNNING:
            return
        exits = self.registry.exits
        seen = exits.exited(c.id, c.pid)
        if seen is False:
            return
        if seen is None and processes.pids_are_host_pids(self.supervisor, self.runtime):
            exits.watch(c.id, c.pid)  # before the look: an exit after it shows on the pidfd
        status = processes.exit_status(self.supervisor, self.runtime, c.id)
        if status is not None:
            self._record_exit(c, status)

    def stop_container(self, id: str, timeout: float = 0) -> None:
        """Stop signal (SIGTERM unless the config names one), ``timeout`` s, SIGKILL; idempotent."""
        try:
            c = self.registry.container(id)
        except NotFoundError:
            return
        with self.registry.sandbox_lock(c.sandbox_id):
            self._stop_container_locked(c, timeout)

    def _stop_container_locked(self, c: Container, timeout: float) -> None:
        self._refresh(c)
        if c.state != ContainerState.CONTAINER_RUNNING:
            return
        status = processes.kill_and_wait(self.supervisor, self.runtime, c.id, timeout,
                                         c.config.stop_signal or signal.SIGTERM)
        self._record_exit(c, status)

    def remove_container(self, id: str) -> None:
        """Force-stop, delete from the runtime, remove bundle and record; idempotent.

        The log file is kept (it belongs to the log directory's owner).
        """
        try:
            c = self.registry.container(id)
        except NotFoundError:
            return
        with self.registry.sandbox_lock(c.sandbox_id):
            if self.registry.has_container(id):
                self._remove_container_locked(c)

    def _remove_container_locked(self, c: Container) -> None:
        self._stop_container_locked(c, 0)
        c.phase = "removing"
        self.records.save(c)
        if "runtime" in c.steps:
            processes.delete(self.supervisor, self.runtime, c.id)
            remove_cgroup_leftovers(c.id, c.cgroups_path)
        self._forget_container(c)

    def container_status(self, id: str) -> Container:
        """State, exit code, reason, timestamps, mounts and log path of a container."""
        c = self.registry.container(id)
        with self.registry.sandbox_lock(c.sandbox_id):
            self._refresh(c)
            return _copy(c)

    def container_user(self, id: str) -> oci.User | None:
        """The user the container's process runs as, resolved at create (uid, gid, additional
        gids, from its bundle); ``None`` when its bundle is gone or names none."""
        self.registry.container(id)  # NotFoundError for an unknown ID
        known, user = self.registry.user(id)
        if known:  # kept from create (or the first ask after a restart)
            return user
        try:
            spec = oci.Spec.load(self._container_dir(id) / "bundle" / "config.json")
        except (OSError, oci.SpecError, ValueError):
            return None
        user = spec.process.user if spec.process is not None else None
        self.registry.set_user(id, user)
        return user

    def list_containers(self, filter: ContainerFilter | None = None) -> builtins.list[Container]:
        """Containers matching ``filter`` (all by default), oldest first."""
        f = filter or ContainerFilter()
        items = self.registry.containers()
        exits = self.registry.exits
        watched = exits.watched()
        exited = exits.exited_keys()  # one epoll_wait for every running container
        out = []
        for c in items:
            if c.phase != "created":
                continue
            with self.registry.sandbox_lock(c.sandbox_id):
                if c.state == ContainerState.CONTAINER_RUNNING and (
                        c.id in exited or watched.get(c.id) != c.pid):
                    self._refresh(c)
                c = _copy(c)
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
        c = self.registry.container(id)
        with self.registry.sandbox_lock(c.sandbox_id):
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
        """CPU, memory, pid and pressure numbers from the container's cgroup (v1 or v2);
        ``NotFoundError`` once its cgroup is gone."""
        c = self.registry.container(id)
        if not c.cgroups_path:
            raise NotFoundError(f"container {id} has no cgroup")
        return ContainerStats.of(c.id, cgroups.stats(c.cgroups_path), _now())
