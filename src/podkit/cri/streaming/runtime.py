"""A :class:`~podkit.cri.streaming.types.StreamingRuntime` on runc, conmon and netns.

- ``exec``: ``runc exec`` of the container's own process settings with ``args`` replaced; without
  a tty over pipes, with one through the console socket (the pty master: output, input, resize).
- ``attach``: the container's supervisor (conmon's attach socket and ctl FIFO).
- ``port_forward``: a TCP connection to ``127.0.0.1:port`` opened inside the pod's network
  namespace (:func:`podkit.netns.run_in`) and then used from ordinary threads.

The CRI server tells the adapter what an id means through two callables, typically backed by the
``SandboxManager``: ``resolve_container(container_id) -> ContainerTarget`` and
``resolve_sandbox_netns(pod_sandbox_id) -> netns path`` (``""`` for a host-network pod: the
connection is made in the server's own namespace).
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import threading
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import attrs

from podkit import netns, oci
from podkit.cri.streaming.types import (
    DuplexStream,
    InputStream,
    OutputStream,
    ResizeQueue,
)
from podkit.oci import codec
from podkit.runtime import (
    Bundle,
    ConsoleSocket,
    ExecProcess,
    ExitStatus,
    PipeIO,
    Runtime,
    RuntimeTimeoutError,
    Supervisor,
)
from podkit.runtime.logs import STDERR

if TYPE_CHECKING:
    from podkit.sandbox import SandboxManager

__all__ = ["ContainerTarget", "RuncStreamingRuntime"]

_OUTPUT_DRAIN = 5.0  # seconds to wait for output after the process exited (background holders)
_HALF_CLOSE_GRACE = 1.0  # port-forward: after one direction ends, wait this long for the other
_CLIENT_POLL = 0.5  # seconds between checks that the client is still there


@attrs.frozen
class ContainerTarget:
    """What the adapter needs for one container: its runtime id, runtime and supervisor."""

    runtime_id: str
    runtime: Runtime  # a Runc (runc or crun): detached exec returns an ExecProcess
    supervisor: Supervisor | None = None


def _pump_out(read: Callable[[], bytes], sink: OutputStream | None) -> threading.Thread:
    """Copy ``read()`` chunks to ``sink`` (discarding when None or gone) until ``b""``."""

    def run() -> None:
        while True:
            try:
                chunk = read()
            except OSError:
                return
            if not chunk:
                return
            if sink is not None and not sink.closed:
                with contextlib.suppress(OSError, BrokenPipeError):
                    sink.write(chunk)

    t = threading.Thread(target=run, name="stream-out", daemon=True)
    t.start()
    return t


def _pump_in(source: InputStream, write: Callable[[bytes], Any],
             close: Callable[[], Any]) -> threading.Thread:
    """Copy ``source`` to ``write`` until EOF, then ``close()``; stops on a broken pipe."""

    def run() -> None:
        try:
            while chunk := source.read(65536):
                write(chunk)
        except (OSError, BrokenPipeError, ValueError):
            pass
        finally:
            with contextlib.suppress(OSError, ValueError):
                close()

    t = threading.Thread(target=run, name="stream-in", daemon=True)
    t.start()
    return t


def _wait_or_kill(process: ExecProcess, outputs: Sequence[OutputStream | None]) -> ExitStatus:
    """Wait for the exec'd process; SIGKILL it when the client is gone (as containerd does)."""
    watched = [s for s in outputs if s is not None]
    while True:
        try:
            return process.wait(_CLIENT_POLL)
        except RuntimeTimeoutError:
            pass
        if watched and any(s.closed for s in watched):
            with contextlib.suppress(ProcessLookupError):
                os.kill(process.pid, signal.SIGKILL)
            return process.wait()


def _apply_resizes(resize: ResizeQueue, apply: Callable[[int, int], Any]) -> threading.Thread:
    def run() -> None:
        for size in resize:
            if size.width > 0 and size.height > 0:
                with contextlib.suppress(Exception):
                    apply(size.height, size.width)

    t = threading.Thread(target=run, name="stream-resize-apply", daemon=True)
    t.start()
    return t


class RuncStreamingRuntime:
    """Exec, attach and port-forward for the streaming server on podkit's real parts."""

    def __init__(
        self,
        resolve_container: Callable[[str], ContainerTarget],
        resolve_sandbox_netns: Callable[[str], str] | None = None,
        *,
        initial_size_wait: float = 0.2,
    ) -> None:
        self.resolve_container = resolve_container
        self.resolve_sandbox_netns = resolve_sandbox_netns
        self.initial_size_wait = initial_size_wait

    @classmethod
    def for_manager(cls, manager: SandboxManager, **kwargs: Any) -> RuncStreamingRuntime:
        """The adapter for a :class:`~podkit.sandbox.SandboxManager`'s pods and containers.

        Unknown container or pod IDs raise the manager's ``NotFoundError``; a host-network pod
        has no netns path, so its port-forward connects in the server's own namespace.
        """

        def resolve_container(container_id: str) -> ContainerTarget:
            manager.container_status(container_id)
            return ContainerTarget(container_id, manager.runtime, manager.supervisor)

        def resolve_netns(pod_sandbox_id: str) -> str:
            return manager.sandbox_status(pod_sandbox_id).netns_path or ""

        return cls(resolve_container, resolve_netns, **kwargs)

    # exec
    def _process(self, target: ContainerTarget, cmd: Sequence[str], tty: bool) -> oci.Process:
        state = target.runtime.state(target.runtime_id)
        spec = Bundle.load(state.bundle).spec
        proc = codec.deep_copy(spec.process) if spec.process is not None else oci.Process(cwd="/")
        proc.args = list(cmd)
        proc.terminal = tty
        proc.console_size = None
        if tty:  # as containerd: a terminal exec gets TERM=xterm
            proc.env = [e for e in proc.env or [] if not e.startswith("TERM=")] + ["TERM=xterm"]
        return proc

    def exec(
        self,
        container_id: str,
        cmd: Sequence[str],
        stdin: InputStream | None,
        stdout: OutputStream | None,
        stderr: OutputStream | None,
        tty: bool,
        resize: ResizeQueue | None,
    ) -> int:
        """Run ``cmd`` in the container with the container's user, env, cwd and limits."""
        target = self.resolve_container(container_id)
        proc = self._process(target, cmd, tty)
        if tty:
            return self._exec_tty(target, proc, stdin, stdout, resize)
        io = PipeIO(stdin=stdin is not None)
        try:
            assert io.stdout is not None and io.stderr is not None
            out_r, err_r = io.stdout, io.stderr
            pumps = [_pump_out(lambda: out_r.read(65536) or b"", stdout),
                     _pump_out(lambda: err_r.read(65536) or b"", stderr)]
            if stdin is not None and io.stdin is not None:
                in_w = io.stdin
                _pump_in(stdin, in_w.write, in_w.close)
            process = target.runtime.exec(target.runtime_id, proc, detach=True, io=io)
            assert isinstance(process, ExecProcess)
            status = _wait_or_kill(process, [stdout, stderr])
            for t in pumps:
                t.join(_OUTPUT_DRAIN)
            return status.exit_code
        finally:
            io.close()

    def _exec_tty(
        self,
        target: ContainerTarget,
        proc: oci.Process,
        stdin: InputStream | None,
        stdout: OutputStream | None,
        resize: ResizeQueue | None,
    ) -> int:
        if resize is not None:
            first = resize.get(self.initial_size_wait)
            if first is not None and first.width > 0 and first.height > 0:
                proc.console_size = oci.Box(height=first.height, width=first.width)
        with ConsoleSocket() as cs:
            process = target.runtime.exec(target.runtime_id, proc, detach=True, tty=True,
                                          console_socket=cs)
            assert isinstance(process, ExecProcess)
            console = cs.receive(timeout=30)
        try:
            out = _pump_out(console.read, stdout)
            if stdin is not None:
                _pump_in(stdin, console.write, lambda: None)
            if resize is not None:
                _apply_resizes(resize, console.resize)
            status = _wait_or_kill(process, [stdout])
            out.join(_OUTPUT_DRAIN)
            return status.exit_code
        finally:
            console.close()

    # attach
    def attach(
        self,
        container_id: str,
        stdin: InputStream | None,
        stdout: OutputStream | None,
        stderr: OutputStream | None,
        tty: bool,
        resize: ResizeQueue | None,
    ) -> None:
        """Stream the container's output (and input) until it exits or the client leaves."""
        target = self.resolve_container(container_id)
        if target.supervisor is None:
            raise NotImplementedError(f"container {container_id} has no supervisor to attach to")
        supervisor = target.supervisor
        rid = target.runtime_id
        att = supervisor.attach(rid)
        try:
            if stdin is not None:
                _pump_in(stdin, att.send, att.close_stdin)
            if tty and resize is not None:
                _apply_resizes(resize, lambda rows, cols: supervisor.resize(rid, rows, cols))
            sinks = [s for s in (stdout, stderr) if s is not None]
            while True:
                try:
                    item = att.recv(timeout=0.5)
                except (TimeoutError, RuntimeTimeoutError):
                    item = ("", b"")
                if item is None:
                    return
                if sinks and all(s.closed for s in sinks):
                    return  # the client left: detach
                stream, data = item
                if not data:
                    continue
                sink = stderr if stream == STDERR and not tty else stdout
                if sink is not None and not sink.closed:
                    with contextlib.suppress(OSError, BrokenPipeError):
                        sink.write(data)
        finally:
            att.close()

    # port forward
    def port_forward(self, pod_sandbox_id: str, port: int, stream: DuplexStream) -> None:
        """Connect ``stream`` to ``127.0.0.1:port`` in the pod's network namespace."""
        if self.resolve_sandbox_netns is None:
            raise NotImplementedError("port forwarding needs resolve_sandbox_netns")
        path = self.resolve_sandbox_netns(pod_sandbox_id)
        sock = netns.run_in(path, _connect_local, port) if path else _connect_local(port)
        try:
            done = threading.Event()

            def pod_to_client() -> None:
                try:
                    while chunk := sock.recv(65536):
                        stream.write(chunk)
                except (OSError, BrokenPipeError):
                    pass
                finally:
                    stream.close()
                    done.set()

            def client_to_pod() -> None:
                try:
                    while chunk := stream.read(65536):
                        sock.sendall(chunk)
                except (OSError, BrokenPipeError):
                    pass
                finally:
                    with contextlib.suppress(OSError):
                        sock.shutdown(socket.SHUT_WR)
                    done.set()

            a = threading.Thread(target=pod_to_client, name="pf-out", daemon=True)
            b = threading.Thread(target=client_to_pod, name="pf-in", daemon=True)
            a.start()
            b.start()
            done.wait()
            a.join(_HALF_CLOSE_GRACE)
            b.join(_HALF_CLOSE_GRACE if not a.is_alive() else 0)
        finally:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()


def _connect_local(port: int) -> socket.socket:
    """Connect to ``localhost:port`` (IPv4, then IPv6) in the current network namespace."""
    errors = []
    for family, addr in ((socket.AF_INET, ("127.0.0.1", port)), (socket.AF_INET6, ("::1", port))):
        s = socket.socket(family, socket.SOCK_STREAM | socket.SOCK_CLOEXEC)
        try:
            s.settimeout(10)
            s.connect(addr)
            s.settimeout(None)
            return s
        except OSError as e:
            s.close()
            errors.append(f"{addr[0]}: {e.strerror or e}")
    raise ConnectionRefusedError(f"cannot connect to port {port} in the pod: " + "; ".join(errors))

