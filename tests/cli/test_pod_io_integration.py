"""``podkit pod exec -i/-t``, ``attach`` and ``logs -f`` end to end: the CLI as a child process
(under a pty where a terminal matters) against a real pod under runc and conmon."""

from __future__ import annotations

import hashlib
import os
import pty
import re
import signal
import subprocess
import termios
from collections.abc import Iterator
from pathlib import Path

import pytest

from podkit.runtime.console import get_winsize, set_winsize

from .pod_io_helpers import PodCLI, lines_of, pod_cli

pytestmark = pytest.mark.integration

CONTAINERS = """\
- metadata: {name: talker}
  image: ROOTFS
  command: [sh, -c, "i=0; while [ ! -e /tmp/stop ]; do i=$((i+1)); echo line $i;
    sleep 0.05; done; echo bye"]
  log_path: talker.log
- metadata: {name: idle}
  image: ROOTFS
  command: [sleep, "100000"]
  log_path: idle.log
- metadata: {name: shell}
  image: ROOTFS
  command: [sh]
  stdin: true
  tty: true
  log_path: shell.log
"""


@pytest.fixture(scope="module")
def cli(busybox_rootfs: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[PodCLI]:
    for c in pod_cli(tmp_path_factory.mktemp("podio"), busybox_rootfs, "pk-cli-io"):
        c.start(CONTAINERS.replace("ROOTFS", str(c.rootfs)))
        yield c


def read_pty(fd: int, needle: bytes, got: bytearray) -> bytes:
    """Read the pty master into ``got`` until ``needle`` is in it (or the child is gone)."""
    while needle not in got:
        try:
            chunk = os.read(fd, 4096)
        except OSError:  # EIO: the child closed the terminal
            chunk = b""
        assert chunk, f"terminal closed before {needle!r}; got {bytes(got[-400:])!r}"
        got += chunk
    return bytes(got)


def test_exec_i_forwards_piped_stdin_and_keeps_streams_apart(cli: PodCLI) -> None:
    res = cli.run("pod", "exec", "-i", cli.pod, "idle", "--",
                  "sh", "-c", "cat; echo err >&2; exit 3", input=b"hello\nworld\n")
    assert (res.returncode, res.stdout, res.stderr) == (3, b"hello\nworld\n", b"err\n")
    # options after the names, and a big input through a command that reads slowly
    blob = os.urandom(3 << 20)
    res = cli.run("pod", "exec", cli.pod, "idle", "-i", "--", "sh", "-c", "sleep 0.2; md5sum",
                  input=blob)
    assert res.returncode == 0, res.stderr
    assert res.stdout.split()[0].decode() == hashlib.md5(blob).hexdigest()
    # without -i nothing is forwarded: exec_sync as before
    res = cli.run("pod", "exec", cli.pod, "idle", "--", "sh", "-c", "cat; exit 0",
                  input=b"ignored\n")
    assert (res.returncode, res.stdout) == (0, b"")


def test_exec_t_on_a_pty_with_resize_and_exit_code(cli: PodCLI) -> None:
    master, slave = pty.openpty()
    set_winsize(slave, 30, 100)
    before = termios.tcgetattr(slave)
    proc = cli.popen("pod", "exec", "-i", "-t", cli.pod, "idle", "--", "sh", "-c",
                     "tty; stty size; echo $TERM; read x; stty size; echo got $x; exit 5",
                     stdin=slave, stdout=slave, stderr=slave, start_new_session=True)
    got = bytearray()
    try:
        out = read_pty(master, b"xterm", got)
        pts = re.search(rb"/dev/pts/\d+", out)
        assert pts is not None and b"30 100" in out
        # raw mode on our side while it runs: no local echo, no local line editing
        assert not termios.tcgetattr(slave)[3] & termios.ECHO
        set_winsize(slave, 40, 120)
        proc.send_signal(signal.SIGWINCH)
        size_of = ["pod", "exec", cli.pod, "idle", "--", "stty", "-F", pts.group().decode(), "size"]
        cli.wait_until("the new size in the container's terminal",
                       lambda: cli.run(*size_of).stdout == b"40 120\n")
        os.write(master, b"abc\r")
        assert proc.wait(timeout=60) == 5
        out = read_pty(master, b"got abc", got)
        assert b"40 120" in out
        assert termios.tcgetattr(slave) == before  # the terminal is given back as it was
        assert get_winsize(slave) == (40, 120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        os.close(master)
        os.close(slave)


def test_exec_bad_input_and_timeout(cli: PodCLI) -> None:
    res = cli.run("pod", "exec", "-i", cli.pod, "idle")
    assert res.returncode == 2 and b"no command given" in res.stderr
    res = cli.run("pod", "exec", "-i", cli.pod, "nope", "--", "true")
    assert res.returncode == 3 and b"no container 'nope'" in res.stderr
    res = cli.run("pod", "exec", "-t", "--timeout", "soon", cli.pod, "idle", "--", "true")
    assert res.returncode == 2 and b"--timeout 'soon'" in res.stderr
    res = cli.run("pod", "exec", "-i", "--timeout", "500ms", cli.pod, "idle", "--",
                  "sleep", "30", input=b"")
    assert res.returncode == 6 and b"killed" in res.stderr
    # nothing of the killed exec remains in the container
    ps = cli.run("pod", "exec", cli.pod, "idle", "--", "ps", "-o", "args").stdout
    assert b"sleep 30" not in ps


def test_logs_follow_across_rotation_until_exit(cli: PodCLI) -> None:
    log = cli.base / "logs" / "talker.log"
    proc = cli.popen("pod", "logs", "-f", cli.pod, "talker", stdout=subprocess.PIPE,
                     stderr=subprocess.PIPE)
    try:
        assert proc.stdout is not None
        seen = b""
        while b"line 5\n" not in seen:
            chunk = proc.stdout.read1(4096)
            assert chunk, proc.stderr.read() if proc.stderr else b""
            seen += chunk
        log.rename(log.with_name("talker.log.1"))
        with cli.manager() as mgr:
            cid = next(c.id for c in mgr.list_containers() if c.config.metadata.name == "talker")
            mgr.reopen_container_log(cid)
        cli.wait_until("lines in the reopened log", lambda: log.read_bytes().count(b"line") > 3)
        res = cli.run("pod", "exec", cli.pod, "talker", "--", "touch", "/tmp/stop")
        assert res.returncode == 0
        rest, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, err
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    printed = lines_of(seen + rest)
    assert printed[-1] == "bye"
    numbers = [int(x.split()[1]) for x in printed[:-1]]
    assert numbers == list(range(1, len(numbers) + 1))  # nothing lost or repeated
    old = log.with_name("talker.log.1").read_bytes().count(b" line ")
    assert 0 < old < len(numbers)  # some lines came from each file
    # the recorded log: --tail, --timestamps, --stream
    out = cli.ok("pod", "logs", cli.pod, "talker", "--tail", "2", "--timestamps")
    tail = lines_of(out.encode())
    assert len(tail) == 2 and tail[1].endswith(" bye")
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{9}Z line \d+", tail[0])
    assert cli.ok("pod", "logs", cli.pod, "talker", "--stream", "stderr") == ""
    res = cli.run("pod", "logs", cli.pod, "talker", "--since", "last tuesday")
    assert res.returncode == 2 and b"--since 'last tuesday'" in res.stderr
    res = cli.run("pod", "logs", cli.pod, "talker", "--tail", "-3")
    assert res.returncode == 2 and b"--tail" in res.stderr
    # -f of an exited container prints what there is and ends
    assert cli.ok("pod", "logs", "-f", cli.pod, "talker", "--tail", "1") == "bye\n"


def test_attach_detach_keys_leave_it_running_then_exit_code(cli: PodCLI) -> None:
    res = cli.run("pod", "attach", "--detach-keys", "ctrl-pp", cli.pod, "shell")
    assert res.returncode == 2 and b"'ctrl-pp'" in res.stderr
    for round in (1, 2):
        master, slave = pty.openpty()
        set_winsize(slave, 25, 90)
        proc = cli.popen("pod", "attach", cli.pod, "shell", stdin=slave, stdout=slave,
                         stderr=slave, start_new_session=True)
        got = bytearray()
        try:
            cli.wait_until("raw mode (attached)",
                           lambda fd=slave: not termios.tcgetattr(fd)[3] & termios.ECHO)
            os.write(master, b"\r")  # a prompt once the shell has taken the new size
            read_pty(master, b"# ", got)
            os.write(master, b"echo ping-$((40+2)); stty size\r")
            out = read_pty(master, b"25 90", got)
            assert b"ping-42" in out
            if round == 1:
                os.write(master, b"\x10\x11")  # ctrl-p ctrl-q
                assert proc.wait(timeout=60) == 0
                read_pty(master, b"detached", got)
                assert cli.inspect("shell")["state"] == "RUNNING"
            else:
                os.write(master, b"exit 4\r")
                assert proc.wait(timeout=60) == 4
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            os.close(master)
            os.close(slave)
    assert cli.inspect("shell")["state"] == "EXITED"


def test_exec_i_and_t_under_crun(busybox_rootfs: Path,
                                 tmp_path_factory: pytest.TempPathFactory) -> None:
    for c in pod_cli(tmp_path_factory.mktemp("podcrun"), busybox_rootfs, "pk-cli-crun", "crun"):
        c.start(CONTAINERS.replace("ROOTFS", str(c.rootfs)).split("- metadata: {name: shell}")[0])
        res = c.run("pod", "exec", "-i", c.pod, "idle", "--", "sh", "-c", "cat; exit 3",
                    input=b"via crun\n")
        assert (res.returncode, res.stdout) == (3, b"via crun\n")
        master, slave = pty.openpty()
        try:
            proc = c.popen("pod", "exec", "-t", c.pod, "idle", "--", "sh", "-c", "tty; exit 5",
                           stdin=subprocess.DEVNULL, stdout=slave, stderr=slave)
            assert proc.wait(timeout=60) == 5
            assert re.search(rb"/dev/pts/\d+", read_pty(master, b"\n", bytearray()))
        finally:
            os.close(master)
            os.close(slave)
        lines = c.ok("pod", "top", c.pod, "idle").splitlines()
        assert lines[0].split()[:3] == ["UID", "PID", "PPID"] and "sleep 100000" in lines[1]
