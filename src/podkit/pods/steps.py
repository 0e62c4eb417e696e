"""run_sandbox's steps as objects: each :class:`Step` names what it creates and how to undo it.

A pod's record lists the names of the steps whose effects exist (``Sandbox.steps``), written
before each step is taken, so a failure, ``remove_sandbox`` or a later ``recover()`` undoes
exactly those, in reverse, by looking each name up in the manager's table
(``SandboxManager.steps``). The names and their order are ``SANDBOX_STEPS`` (with a pause),
``USERNS_STEPS`` (a pod with its own user namespace) and ``INFRALESS_STEPS`` (without a
pause); records written by earlier versions use the same names.

:class:`SandboxSteps` does the work of each step for one manager; a test replaces one entry of
a manager's table to make a step fail.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import threading
from collections.abc import Callable, Sequence
from pathlib import Path

import attrs

from podkit import _trash, cgroups, cni, idmap, netns, oci
from podkit.errors import PodkitError
from podkit.pods import network, processes, rules, userns
from podkit.pods.config import NamespaceMode
from podkit.pods.pause import PauseExitedError, PauseRootfs, last_output, make_mountpoints
from podkit.pods.records import Sandbox
from podkit.pods.sandbox_spec import SandboxConfigError, SandboxFiles, build_sandbox_spec
from podkit.runtime import Bundle, Runtime, Supervisor

__all__ = [
    "PAUSE_SETTLE_TIMEOUT",
    "PRIVATE_DIR_MODE",
    "ROOT_DIR_MODE",
    "SHM_SIZE",
    "SandboxSteps",
    "Step",
    "at_once",
    "network_alongside",
    "remove_cgroup_leftovers",
    "undo_steps",
]

SHM_SIZE = 64 << 20
"""Size of a pod's /dev/shm tmpfs (containerd's default)."""
PAUSE_SETTLE_TIMEOUT = 2.0
"""Seconds a new pause may stay busy before it counts as running without having settled."""

ROOT_DIR_MODE = 0o711
"""The root's ``sandboxes`` and ``containers`` dirs (and the root, when made): others may
pass, never list (containerd's 0711 roots)."""
PRIVATE_DIR_MODE = 0o700
"""A pod's or container's own dir: its bundle's ``config.json`` holds the environment."""

_log = logging.getLogger("podkit.sandbox")


@attrs.frozen
class Step:
    """One step of ``run_sandbox``: ``do`` creates something for the pod, ``undo`` removes it
    (also when only the record says it may exist: undoing what never happened is harmless)."""

    name: str
    do: Callable[[Sandbox], None]
    undo: Callable[[Sandbox], None]


class SandboxSteps:
    """The work of each ``run_sandbox`` step (netns, network, files, userns, pause, namespaces).

    ``root_dir/sandboxes/<id>`` holds a pod's files and its pause bundle; ``networks`` gives
    the pod networks of the moment (they may be loaded late); ``pause`` is the manager's
    pause and its shared rootfs; ``cgroup_driver`` the manager's (the pause's cgroups path).
    """

    def __init__(self, *, root_dir: Path, supervisor: Supervisor, runtime: Runtime,
                 pause: PauseRootfs, networks: Callable[[], cni.Networks | None],
                 oom_score_floor: int,
                 cgroup_driver: cgroups.Driver = cgroups.Driver.CGROUPFS) -> None:
        self.cgroup_driver = cgroup_driver
        self.root_dir = root_dir
        self.supervisor = supervisor
        self.runtime = runtime
        self.pause = pause
        self.networks = networks
        self.oom_score_floor = oom_score_floor

    def table(self) -> dict[str, Step]:
        """Every step by name (the names the records use)."""
        return {s.name: s for s in (
            Step("netns", self.do_netns, self.undo_netns),
            Step("network", self.do_network, self.undo_network),
            Step("files", self.do_files, self.undo_files),
            Step("userns", self.do_userns, self.undo_userns),
            Step("pause", self.do_pause, self.undo_pause),
            Step("namespaces", self.do_namespaces, self.undo_namespaces),
        )}

    def sandbox_dir(self, id: str) -> Path:
        """The directory of a pod's files and pause bundle."""
        return self.root_dir / "sandboxes" / id

    def files(self, sb: Sandbox) -> SandboxFiles:
        """The pod's hostname, hosts, resolv.conf and shm paths."""
        return SandboxFiles.under(self.sandbox_dir(sb.id))

    def userns_path(self, id: str) -> Path:
        """Where a pod with its own user namespace has it pinned."""
        return self.sandbox_dir(id) / "ns" / "user"

    # -- netns ------------------------------------------------------------------------------

    def do_netns(self, sb: Sandbox) -> None:
        """Create and pin the pod's network namespace at ``sb.netns_path`` (loopback up); for
        a pod with its own user namespace, made in it (so it owns the netns), by a holder."""
        name, where = os.path.basename(sb.netns_path), os.path.dirname(sb.netns_path)
        ids = userns.pod_id_map(sb.config)
        if ids is None:
            netns.create(name, dir=where, loopback_up=True)
            return
        with idmap.Holder(ids, also=("net",)) as holder:
            netns.attach(name, holder.path("net"), dir=where, loopback_up=True)

    def undo_netns(self, sb: Sandbox) -> None:
        """Unpin and remove the pod's network namespace."""
        if sb.netns_path:
            netns.remove(sb.netns_path)

    # -- network ----------------------------------------------------------------------------

    def do_network(self, sb: Sandbox) -> None:
        """CNI ADD on every network; the pod's IPs, eth0's first (none on loopback alone)."""
        nets = self.networks()
        assert nets is not None
        result = nets.setup(sb.id, sb.netns_path, args=network.cni_args(sb.config, sb.id),
                            capability_args=network.cni_capability_args(sb.config))
        first = [ip for ip in (result.primary_ip("eth0", 4), result.primary_ip("eth0", 6)) if ip]
        if not first and any(a.ifname != "lo" for a in nets.attachments):  # loopback alone:
            raise PodkitError(f"sandbox {sb.id}: CNI gave eth0 no IP address")  # no address
        others = [ip.ip for name, iface in result.interfaces.items() if name != "lo"
                  for ip in iface.ips if ip.ip not in first]
        sb.ips = tuple(dict.fromkeys([*first, *others]))

    def undo_network(self, sb: Sandbox) -> None:
        """CNI DEL (without a netns path once the netns is gone) on the networks the pod was
        added to (``network.attached_networks``)."""
        current = self.networks()
        if current is None:
            return
        nets = network.attached_networks(current, sb.id)
        path = sb.netns_path if sb.netns_path and netns.exists(sb.netns_path) else ""
        nets.remove(sb.id, path, args=network.cni_args(sb.config, sb.id),
                    capability_args=network.cni_capability_args(sb.config))

    def give_up_network(self, sb: Sandbox, exc: BaseException) -> None:
        """Drop the pod's CNI cache entries after a DEL that cannot run; log what is left."""
        nets = self.networks()
        assert nets is not None
        client = nets.client
        for att in client.cached_attachments(sb.id):
            client.cache.remove(att.network, att.container_id, att.ifname)
        _log.warning(
            "sandbox %s (%s): CNI DEL cannot run (%s); removed without it: whatever the "
            "plugins set up for it (addresses, links, rules) was not undone", sb.id, sb.name,
            exc)

    # -- files ------------------------------------------------------------------------------

    def do_files(self, sb: Sandbox) -> None:
        """hostname, hosts, resolv.conf and (with a pod IPC namespace) a tmpfs for /dev/shm."""
        d = self.sandbox_dir(sb.id)
        d.mkdir(mode=PRIVATE_DIR_MODE, exist_ok=True)
        files = self.files(sb)
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
        ids = userns.pod_id_map(sb.config)
        if ids is not None and ids.root is not None:  # the pod's root owns them, as root would
            for path in (files.hostname, files.hosts, files.resolv_conf):
                os.chown(path, *ids.root)
        ns = sb.config.linux.security_context.namespace_options
        if ns.ipc != NamespaceMode.NODE:
            Path(files.shm).mkdir(exist_ok=True)
            netns.mount_shm(files.shm, SHM_SIZE)

    def undo_files(self, sb: Sandbox) -> None:
        """Unmount /dev/shm, remove the pod's directory (files and pause bundle): gone at
        once, its files deleted on a background thread (``root_dir/.trash``)."""
        d = self.sandbox_dir(sb.id)
        netns.unmount_all(self.files(sb).shm)
        try:
            _trash.remove_later(d, self.root_dir / _trash.TRASH)
        except OSError as exc:
            raise PodkitError(f"could not remove {d}: {exc}") from exc

    # -- userns (a pod with its own user namespace) ---------------------------------------

    def do_userns(self, sb: Sandbox) -> None:
        """Pin the pod's user namespace (the one owning its netns) for its pause, containers
        and ID-mapped mounts."""
        fd = idmap.owner(sb.netns_path)
        try:
            path = self.userns_path(sb.id)
            path.parent.mkdir(parents=True, exist_ok=True)
            netns.pin(f"/proc/self/fd/{fd}", path)
        finally:
            os.close(fd)

    def undo_userns(self, sb: Sandbox) -> None:
        """Unpin it (it lives on while a process or mount of the pod uses it)."""
        netns.unpin(self.userns_path(sb.id))

    # -- pause ------------------------------------------------------------------------------

    def write_pause_bundle(self, sb: Sandbox) -> None:
        """The pause's bundle (inside the sandbox dir, removed with the files)."""
        pause = self.pause.config
        assert pause is not None
        own = userns.pod_id_map(sb.config) is not None
        spec = build_sandbox_spec(
            sb.config, id=sb.id, files=self.files(sb), args=pause.args, env=pause.env,
            rootfs=pause.rootfs, netns_path=sb.netns_path or None, pause_image=pause.image,
            oom_score_floor=self.oom_score_floor, cgroup_driver=self.cgroup_driver,
            userns_path=str(self.userns_path(sb.id)) if own else None,
        )
        sb.cgroups_path = (spec.linux.cgroups_path if spec.linux else None) or ""
        # not durable: a power loss ends the pause, and undoing the pod needs no bundle
        Bundle.write(self.sandbox_dir(sb.id) / "bundle", spec, durable=False)

    def do_pause(self, sb: Sandbox) -> None:
        """Create and start the pause under the supervisor (its rootfs mounted meanwhile)."""
        d = self.sandbox_dir(sb.id)
        bundle = d / "bundle"
        if not (bundle / "config.json").exists():  # not written yet (see network_alongside)
            self.write_pause_bundle(sb)
        with self.pause.ready():
            if userns.pod_id_map(sb.config) is not None:  # its root cannot make them there
                make_mountpoints(self.pause.config.rootfs if self.pause.config else "",
                                 oci.Spec.load(bundle / "config.json"))
            sb.pid = self.supervisor.start(sb.id, bundle, log_path=d / "pause.log")
        self.check_pause(sb)

    def check_pause(self, sb: Sandbox) -> None:
        """A pause that exits before it settles (``processes.settled``) fails the step with a
        :class:`PauseExitedError` naming it, its exit code and its last output."""
        if not processes.pids_are_host_pids(self.supervisor, self.runtime) or \
                processes.settled(sb.pid, PAUSE_SETTLE_TIMEOUT):
            return
        status = self.supervisor.wait(sb.id, 10.0)  # its exit code; its log complete
        pause = self.pause.config
        assert pause is not None
        raise PauseExitedError.of(pause, f"sandbox {sb.name} ({sb.id[:12]})", status.exit_code,
                                  last_output(self.sandbox_dir(sb.id) / "pause.log"))

    def undo_pause(self, sb: Sandbox) -> None:
        """Kill and delete the pause; then whatever the runtime left of its cgroup."""
        processes.delete(self.supervisor, self.runtime, sb.id)
        remove_cgroup_leftovers(sb.id, sb.cgroups_path)

    # -- namespaces (infra-less pods) -------------------------------------------------------

    def do_namespaces(self, sb: Sandbox) -> None:
        """Pin new IPC/UTS namespaces under the pod's ``ns`` dir (no pause keeps them)."""
        try:
            netns.pin_namespaces(self.sandbox_dir(sb.id) / "ns", pinned_kinds(sb),
                                 hostname=sb.config.hostname, netns_path=sb.netns_path,
                                 sysctls=sb.config.linux.sysctls)
        except netns.InvalidArgumentError as exc:  # a sysctl the pod asked for
            raise SandboxConfigError(str(exc)) from None

    def undo_namespaces(self, sb: Sandbox) -> None:
        """Unpin them."""
        ns_dir = self.sandbox_dir(sb.id) / "ns"
        for kind in ("ipc", "uts"):
            netns.unmount_all(ns_dir / kind)
            (ns_dir / kind).unlink(missing_ok=True)


def remove_cgroup_leftovers(id: str, cgroups_path: str) -> None:
    """After a delete: stop a systemd scope still there, remove empty cgroupfs dirs
    (``cgroups.remove_leftovers``); a failure is logged, not raised (the container is gone)."""
    try:
        for what in cgroups.remove_leftovers(cgroups_path):
            _log.info("container %s: removed its leftover cgroup %s", id, what)
    except (PodkitError, OSError) as exc:
        _log.warning("container %s: its cgroup %s may be left: %s", id, cgroups_path, exc)


def pinned_kinds(sb: Sandbox) -> list[str]:
    """The namespaces an infra-less pod pins: IPC unless the host's, UTS unless host network."""
    ns = sb.config.linux.security_context.namespace_options
    kinds = [] if ns.ipc == NamespaceMode.NODE else ["ipc"]
    return kinds if sb.host_network else [*kinds, "uts"]


def network_alongside(sb: Sandbox, network: Sequence[Callable[[Sandbox], None]],
                      steps: Sequence[tuple[Callable[[Sandbox], None], int]]) -> None:
    """``network`` in order on a helper thread (the netns, then CNI ADD) while this one does
    ``steps`` in order (the pod files, the pause bundle, the pause): none needs the CNI result;
    each waits until as many ``network`` steps as its number are done (the pause: the netns).

    Every step was recorded before either side starts, and undoing one not taken is harmless,
    so a failure of either side rolls back the same way: neither side takes a further step
    once the other failed, and one in flight is waited for. The first failure is raised (an
    interrupt before any), the other's is a note on it.
    """
    failures: list[tuple[str, BaseException]] = []
    done = [0]
    change = threading.Condition()

    def failed(side: str, exc: BaseException) -> None:
        with change:
            failures.append((side, exc))
            change.notify_all()

    def ready(needs: int) -> bool:
        return bool(failures) or done[0] >= needs

    def run_network() -> None:
        try:
            for do in network:
                if failures:
                    return
                do(sb)
                with change:
                    done[0] += 1
                    change.notify_all()
        except BaseException as exc:  # handed to the caller
            failed("network setup", exc)

    thread = threading.Thread(target=run_network, name=f"cni-add-{sb.id[:12]}")
    thread.start()
    try:
        for do, needs in steps:
            with change:
                change.wait_for(functools.partial(ready, needs))
            if failures:
                break
            do(sb)
    except BaseException as exc:  # raised below, once the network side is done
        failed("pod files and pause", exc)
    finally:
        thread.join()
    if failures:
        failures.sort(key=lambda f: isinstance(f[1], Exception))  # an interrupt goes first
        first = failures[0][1]
        for side, other in failures[1:]:
            first.add_note(f"the {side} meanwhile failed too: {other}")
        raise first


def at_once(jobs: Sequence[Callable[[], None]]) -> list[BaseException | None]:
    """Run ``jobs`` each on a thread of its own (the last on this one); their errors, in
    order (``None``: done). For teardown work that needs nothing of the others (the
    ``runc delete`` of each of a pod's containers and its pause)."""
    errors: list[BaseException | None] = [None] * len(jobs)

    def run(i: int) -> None:
        try:
            jobs[i]()
        except BaseException as exc:  # handed to the caller
            errors[i] = exc

    threads = [threading.Thread(target=run, args=(i,), name=f"at-once-{i}")
               for i in range(len(jobs) - 1)]
    for t in threads:
        t.start()
    try:
        if jobs:
            run(len(jobs) - 1)
    finally:
        for t in threads:
            t.join()
    return errors


def undo_steps(sb: Sandbox, table: dict[str, Step],
               save: Callable[[Sandbox], None]) -> list[BaseException]:
    """Undo every step the record lists, in reverse, looking each up in ``table``; the record
    keeps the steps whose undo failed (their errors are returned). ``save`` shrinks the record
    as steps go (best effort)."""
    errors: list[BaseException] = []
    for name in reversed(sb.steps):
        try:
            table[name].undo(sb)
        except Exception as exc:
            errors.append(exc)
            continue
        sb.steps = tuple(s for s in sb.steps if s != name)
        if not sb.steps:
            break  # all undone: every caller drops the record next, no write needed
        with contextlib.suppress(Exception):  # best effort: the record only shrinks
            save(sb)
    return errors
