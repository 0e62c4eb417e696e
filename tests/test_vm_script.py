"""The pure parts of scripts/vm (the cgroup-v2 guest lane, docs/hosts.md): the newc cpio writer,
the module load order from modules.dep, the generated guest scripts, the QEMU command line,
argument parsing and the console filter that takes the exit code. Booting is not tested here
(``make test-cgroupv2`` does that)."""

from __future__ import annotations

import io
import shlex
import stat
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

SCRIPTS = Path(__file__).resolve().parents[1] / "scripts"
sys.path.insert(0, str(SCRIPTS))

import vm_cpio  # noqa: E402
import vm_initramfs  # noqa: E402
import vm_kernel  # noqa: E402
import vm_run  # noqa: E402

# ---- newc writer


def _archive(build: Callable[[vm_cpio.NewcWriter], None]) -> bytes:
    buf = io.BytesIO()
    w = vm_cpio.NewcWriter(buf)
    build(w)
    w.close()
    return buf.getvalue()


def test_newc_round_trip_and_alignment() -> None:
    def build(w: vm_cpio.NewcWriter) -> None:
        w.add_dir("bin")
        w.add_file("bin/hello", b"12345", 0o755)
        w.add_symlink("bin/sh", "hello")
        w.add_char_device("console", 5, 1)

    data = _archive(build)
    assert len(data) % 4 == 0
    entries = vm_cpio.read_newc(data)
    assert [(n, stat.S_IFMT(m), d) for n, m, d in entries] == [
        ("bin", stat.S_IFDIR, b""), ("bin/hello", stat.S_IFREG, b"12345"),
        ("bin/sh", stat.S_IFLNK, b"hello"), ("console", stat.S_IFCHR, b"")]
    assert stat.S_IMODE(entries[1][1]) == 0o755
    assert b"TRAILER!!!\0" in data[-16:]


def test_newc_header_fields() -> None:
    head = vm_cpio.header(ino=1, mode=0o100644, nlink=1, size=5, namesize=6, rdev=(5, 1))
    assert head.startswith(b"070701") and len(head) == 110
    fields = [int(head[6 + 8 * i:14 + 8 * i], 16) for i in range(13)]
    assert fields == [1, 0o100644, 0, 0, 1, 0, 5, 0, 0, 5, 1, 6, 0]
    with pytest.raises(ValueError):
        vm_cpio.header(ino=1, mode=0, nlink=1, size=1 << 33, namesize=2)


@pytest.mark.parametrize("bad", ["", "a/../b", "dup"])
def test_newc_refuses_bad_and_duplicate_names(bad: str) -> None:
    w = vm_cpio.NewcWriter(io.BytesIO())
    w.add_file("dup", b"")
    with pytest.raises(ValueError):
        w.add_file(bad, b"")


def test_newc_refuses_entries_after_close() -> None:
    w = vm_cpio.NewcWriter(io.BytesIO())
    w.close()
    with pytest.raises(ValueError):
        w.add_dir("late")


def test_newc_is_what_busybox_cpio_reads(tmp_path: Path) -> None:
    """An independent reader: busybox's cpio applet lists and extracts our archive."""
    if not vm_kernel.BUSYBOX.exists():
        pytest.skip("busybox-static not installed")

    def build(w: vm_cpio.NewcWriter) -> None:
        w.add_dir("d")
        w.add_file("d/f", b"x" * 7)
        w.add_symlink("d/l", "f")

    archive = _archive(build)
    out = subprocess.run([str(vm_kernel.BUSYBOX), "cpio", "-i", "-d"], input=archive,
                         cwd=tmp_path, capture_output=True, check=True)
    assert out.returncode == 0
    assert (tmp_path / "d" / "f").read_bytes() == b"x" * 7
    assert (tmp_path / "d" / "l").readlink() == Path("f")


def test_concatenated_archives_read_in_turn() -> None:
    """The per-run archive is appended to the base one; each parses on its own boundary."""
    first = _archive(lambda w: w.add_file("a", b"1"))
    second = _archive(lambda w: w.add_file("b", b"22"))
    assert len(first) % 4 == 0
    assert [e[0] for e in vm_cpio.read_newc(first + second)] == ["a"]
    assert [e[0] for e in vm_cpio.read_newc(second)] == ["b"]


# ---- kernel modules

DEP = """kernel/drivers/virtio/virtio_pci.ko: kernel/drivers/virtio/virtio_pci_modern_dev.ko \
kernel/drivers/virtio/virtio.ko kernel/drivers/virtio/virtio_ring.ko
kernel/drivers/virtio/virtio_pci_modern_dev.ko: kernel/drivers/virtio/virtio.ko \
kernel/drivers/virtio/virtio_ring.ko
kernel/drivers/virtio/virtio.ko: kernel/drivers/virtio/virtio_ring.ko
kernel/drivers/virtio/virtio_ring.ko:
kernel/fs/9p/9p.ko: kernel/net/9p/9pnet.ko kernel/fs/fscache/fscache.ko kernel/fs/netfs/netfs.ko
kernel/net/9p/9pnet.ko:
kernel/fs/fscache/fscache.ko: kernel/fs/netfs/netfs.ko
kernel/fs/netfs/netfs.ko:
kernel/net/bridge/br-netfilter.ko.xz: kernel/net/bridge/bridge.ko.xz
kernel/net/bridge/bridge.ko.xz:
"""


def test_modules_dep_parsing_and_names() -> None:
    deps = vm_kernel.parse_modules_dep(DEP)
    assert deps["9p"] == ("kernel/fs/9p/9p.ko",
                          ["kernel/net/9p/9pnet.ko", "kernel/fs/fscache/fscache.ko",
                           "kernel/fs/netfs/netfs.ko"])
    assert "br_netfilter" in deps
    assert vm_kernel.module_name("kernel/net/bridge/br-netfilter.ko.xz") == "br_netfilter"


def test_load_order_puts_dependencies_first_once() -> None:
    deps = vm_kernel.parse_modules_dep(DEP)
    order = vm_kernel.load_order(deps, ("virtio_pci", "9p", "br_netfilter"))
    names = [vm_kernel.module_name(p) for p in order]
    assert names == ["virtio_ring", "virtio", "virtio_pci_modern_dev", "virtio_pci", "9pnet",
                     "netfs", "fscache", "9p", "bridge", "br_netfilter"]
    for i, path in enumerate(order):
        for dep in deps[vm_kernel.module_name(path)][1]:
            assert order.index(dep) < i


def test_load_order_skips_builtins_and_names_what_is_missing() -> None:
    deps = vm_kernel.parse_modules_dep(DEP)
    order = vm_kernel.load_order(deps, ("9p",), builtin=frozenset({"fscache", "netfs"}))
    assert [vm_kernel.module_name(p) for p in order] == ["9pnet", "9p"]
    with pytest.raises(KeyError, match="overlay"):
        vm_kernel.load_order(deps, ("overlay",))


def test_load_order_refuses_a_cycle() -> None:
    deps = {"a": ("a.ko", ["b.ko"]), "b": ("b.ko", ["a.ko"])}
    with pytest.raises(ValueError, match="cycle"):
        vm_kernel.load_order(deps, ("a",))


def test_kernel_package_from_apt_cache_depends() -> None:
    out = "linux-image-amd64\n  Depends: linux-image-6.1.0-57-amd64\n"
    assert vm_kernel.parse_depends(out) == "linux-image-6.1.0-57-amd64"
    with pytest.raises(RuntimeError):
        vm_kernel.parse_depends("linux-image-amd64\n  Depends: linux-image-6.1.0-57-cloud\n")


# ---- generated scripts


def _sh_syntax_ok(script: str) -> None:
    subprocess.run(["sh", "-n"], input=script.encode(), check=True)


def test_init_script_mounts_cgroup2_alone_with_the_controllers() -> None:
    _sh_syntax_ok(vm_initramfs.INIT)
    init = vm_initramfs.INIT
    assert "mount -t cgroup2" in init and "-t cgroup " not in init
    assert "cgroup.subtree_control" in init
    assert vm_initramfs.CONTROLLERS == ("cpu", "memory", "pids", "io")
    # proc, sys and dev move into the new root before switch_root (mounting after failed)
    assert init.index("mount --move") < init.index("exec switch_root")
    for path in ("$R/tmp", "$R/var/tmp", "$R/run"):
        assert f"tmpfs {path}" in init
    assert "lowerdir=/host,upperdir=" in init


def test_stage2_reports_the_exit_code_then_powers_off() -> None:
    _sh_syntax_ok(vm_initramfs.STAGE2)
    s = vm_initramfs.STAGE2
    command = s.index("/run/podkit-vm/command")
    assert s.index('"$MARKER-booted"') < command < s.index('"$MARKER=$rc"')
    assert s.rstrip().endswith("poweroff -f")


def test_command_script_quotes_arguments_and_environment(tmp_path: Path) -> None:
    argv = ["printf", "%s|", "a b", "it's", "$HOME"]
    script = vm_initramfs.command_script(argv, str(tmp_path), {"X": "1 2", "Y": "$(no)"})
    out = subprocess.run(["sh", "-c", script + "\n"], capture_output=True, text=True,
                         check=True).stdout
    assert out == "a b|it's|$HOME|"
    probe = vm_initramfs.command_script(["sh", "-c", 'echo "$X/$Y/$PWD"'], str(tmp_path),
                                        {"X": "1 2", "Y": "$(no)"})
    out = subprocess.run(["sh", "-c", probe], capture_output=True, text=True).stdout
    assert out == f"1 2/$(no)/{tmp_path}\n"
    with pytest.raises(ValueError):
        vm_initramfs.command_script([], "/", {})


def test_run_archive_holds_marker_mode_and_command() -> None:
    data = vm_initramfs.run_archive(["true"], workdir="/w", env={}, marker="@@m", mode="sh")
    files = {n: d.decode() for n, _, d in vm_cpio.read_newc(data)}
    assert shlex.split(files["podkit-vm/run.env"]) == [
        "MARKER=@@m", "MODE=sh", "KEEP=", "SYSTEMD_ARGS=--show-status=no --log-level=warning"]
    assert "exec true" in files["podkit-vm/command"]
    with pytest.raises(ValueError):
        vm_initramfs.run_archive(["true"], workdir="/", env={}, marker="m", mode="openrc")


def test_systemd_units_run_stage2() -> None:
    assert "ExecStart=/run/podkit-vm/busybox sh /run/podkit-vm/stage2" in vm_initramfs.SERVICE
    assert "Requires=podkit-vm.service" in vm_initramfs.TARGET
    assert "--unit=podkit-vm.target" in vm_initramfs.INIT


# ---- command line, QEMU, console


def test_run_arguments() -> None:
    args = vm_run.parse_args(["run", "--systemd", "-e", "A=1", "-e", "B=x=y", "--cpus", "1",
                              "--", "pytest", "-q", "--tb=line"])
    assert args.action == "run" and args.systemd and args.cpus == 1
    assert args.env == [("A", "1"), ("B", "x=y")]
    assert args.command == ["pytest", "-q", "--tb=line"]
    assert args.memory == "2G" and args.workdir == str(vm_run.REPO)


def test_run_argument_errors(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        vm_run.parse_args(["run", "--"])
    with pytest.raises(SystemExit):
        vm_run.parse_args(["run", "-e", "1BAD=x", "--", "true"])
    with pytest.raises(SystemExit):
        vm_run.parse_args([])
    capsys.readouterr()


def test_env_without_value_comes_from_the_host(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PODKIT_VM_PROBE", "here")
    args = vm_run.parse_args(["run", "-e", "PODKIT_VM_PROBE", "--", "true"])
    assert args.env == [("PODKIT_VM_PROBE", "here")]


def test_qemu_command_uses_tcg_and_a_read_only_remapped_root() -> None:
    cmd = vm_run.qemu_command(kernel=Path("/k"), initrd=Path("/i"), append="console=ttyS0",
                              memory="2G", cpus=2)
    assert cmd[0] == "qemu-system-x86_64"
    assert cmd[cmd.index("-accel") + 1].startswith("tcg")
    assert "kvm" not in " ".join(cmd)
    virtfs = cmd[cmd.index("-virtfs") + 1]
    for opt in ("path=/", "mount_tag=host", "readonly=on", "multidevs=remap"):
        assert opt in virtfs.split(",")
    assert cmd[cmd.index("-smp") + 1] == "2" and cmd[cmd.index("-m") + 1] == "2G"


def test_kernel_cmdline() -> None:
    quiet = vm_run.kernel_cmdline(verbose=False).split()
    assert "console=ttyS0" in quiet and "quiet" in quiet and "cgroup_no_v1=all" in quiet
    assert "quiet" not in vm_run.kernel_cmdline(verbose=True).split()


def test_console_filter_takes_the_marker_and_passes_the_rest() -> None:
    f = vm_run.ConsoleFilter("@@mk")
    out = f.feed(b"@@mk-booted\r\nhello\r\n..")
    out += f.feed(b"F. [100%]\r\n@@m")
    assert f.exit_code is None and f.booted
    out += f.feed(b"k=3\r\n[ 4.1] reboot: Power down")
    assert out == b"hello\n..F. [100%]\n[ 4.1] reboot: Power down"
    assert f.exit_code == 3


def test_console_filter_shows_lines_that_only_look_like_a_marker() -> None:
    f = vm_run.ConsoleFilter("@@mk")
    assert f.feed(b"@@mk=x\n@@m\n@@mk=7 trailing\n") == b"@@mk=x\n@@m\n@@mk=7 trailing\n"
    assert f.exit_code is None
    assert f.feed(b"@@\n") == b"@@\n"


def test_a_workdir_under_a_guest_tmpfs_is_kept_and_the_tmpfs_itself_refused() -> None:
    for hidden in ("/tmp", "/run", "/var/tmp"):
        with pytest.raises(SystemExit, match="tmpfs in the guest"):
            vm_run.kept_dir(hidden)
    assert vm_run.kept_dir("/tmp/ci/main") == "/tmp/ci/main"
    assert vm_run.kept_dir("/var/tmp/a/b") == "/var/tmp/a/b"
    assert vm_run.kept_dir("/srv/checkout") == ""
    assert vm_run.kept_dir("/tmpfoo") == ""


def test_stage_one_binds_a_kept_workdir_back_over_the_tmpfs() -> None:
    archive = vm_initramfs.run_archive(["true"], workdir="/tmp/ci/main", env={}, marker="@@m",
                                       mode="sh", keep="/tmp/ci/main")
    assert b"KEEP=/tmp/ci/main\n" in archive
    init = vm_initramfs.INIT
    assert init.index('mount --bind "$R$KEEP" /keep') < init.index("tmpfs $R/tmp") \
        < init.index('mount --move /keep "$R$KEEP"')
