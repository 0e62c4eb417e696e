"""``podkit`` imports only the command group it runs (``podkit cri serve`` starts without the
other groups' imports), and ``podkit cri serve`` caps glibc's malloc arenas (issue 16)."""

from __future__ import annotations

import argparse
import ctypes
import ctypes.util
import importlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

from podkit import _linux, cli
from podkit._cli import cri as cri_cli
from podkit._cli.exits import ExitCode
from support import require_isolated

# -- which group a command line needs -----------------------------------------------------------


def _words_registered_by(module: str) -> set[str]:
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers()
    importlib.import_module(f"podkit._cli.{module}").register(sub)
    return set(sub.choices)


def test_every_command_word_names_the_module_that_registers_it() -> None:
    assert set(cli._WORDS.values()) == set(cli._GROUPS)
    for module in cli._GROUPS:
        assert _words_registered_by(module) == {w for w, m in cli._WORDS.items()
                                                if m == module}, module


@pytest.mark.parametrize(("argv", "word"), [
    (["cri", "serve"], "cri"),
    (["--root", "cri", "pod", "ls"], "pod"),  # cri is the value of --root here
    (["--root=/r", "--debug", "--state", "/s", "kube", "play", "x.yaml"], "kube"),
    (["--ro", "pod", "cri", "serve"], "cri"),  # argparse expands --ro to --root
    (["--st", "cri", "--de", "pod", "ls"], "pod"),
    (["--", "cri"], "cri"),
    (["--debug", "run", "bundle"], "run"),
    (["-h", "cri"], None),
    (["--help"], None),
    (["--root"], None),
    ([], None),
])
def test_command_word(argv: list[str], word: str | None) -> None:
    assert cli._command_word(argv) == word


@pytest.mark.parametrize(("argv", "modules"), [
    (["cri", "serve", "--pause-image", "p"], ("cri",)),
    (["--state", "/s", "ps"], ("runtime",)),
    (["bogus"], cli._GROUPS),
    (["--help"], cli._GROUPS),
    ([], cli._GROUPS),
])
def test_modules_for(argv: list[str], modules: tuple[str, ...]) -> None:
    assert cli._modules_for(argv) == modules


@pytest.mark.parametrize("argv", [
    ["cri", "serve", "--pause-image", "p", "--root", "/r"],
    ["--root", "/r", "pod", "ls", "--state", "/s"],
    ["image", "ls"],
    ["--debug", "ps", "--runtime", "crun"],
    ["rm", "a", "-f"],
    ["--r", "pod", "cri", "serve", "--pause-image", "p"],
    ["cdi", "list"],
    ["kube", "play", "x.yaml"],
])
def test_one_group_parses_as_the_full_parser(argv: list[str]) -> None:
    assert cli._parser(cli._modules_for(argv)).parse_args(argv) == \
        cli.build_parser().parse_args(argv)


def test_an_unknown_command_lists_every_command(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["bogus", "x"]) == ExitCode.USAGE
    err = capsys.readouterr().err
    assert "invalid choice: 'bogus'" in err
    for word in cli._WORDS:
        assert word in err


def test_help_lists_every_command(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["--help"]) == 0
    out = capsys.readouterr().out
    for word in cli._WORDS:
        assert f"\n    {word} " in out, word


_MODULES = """
import sys
from podkit import cli
rc = cli.main(sys.argv[1:])
print(rc, " ".join(sorted(m for m in sys.modules if m.startswith(("podkit._cli.", "podkit.kube")))))
"""


def _modules_after(*argv: str) -> tuple[int, set[str]]:
    out = subprocess.run([sys.executable, "-c", _MODULES, *argv], capture_output=True,
                         text=True, check=True).stdout
    rc, _, names = out.strip().splitlines()[-1].partition(" ")
    return int(rc), set(names.split())


def test_cri_serve_imports_the_cri_group_alone() -> None:
    rc, mods = _modules_after("--root", "/nowhere", "cri", "serve", "--help")
    assert rc == 0
    assert mods == {"podkit._cli.cri", "podkit._cli.dirs", "podkit._cli.exits",
                    "podkit._cli.messages"}


def test_the_full_help_imports_every_group() -> None:
    rc, mods = _modules_after("--help")
    assert rc == 0
    assert {f"podkit._cli.{m}" for m in cli._GROUPS} <= mods


# -- the malloc arena cap and mmap threshold ------------------------------------------------

@pytest.mark.parametrize("bad", [0, -2, True, 2.0, "2"])
def test_arena_cap_refuses_bad_counts(bad: object) -> None:
    with pytest.raises(ValueError, match=f"malloc arena cap {bad!r}: want a whole number"):
        _linux.set_malloc_arena_max(bad)  # type: ignore[arg-type]


def test_serve_caps_arenas_unless_the_environment_says(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[int] = []
    monkeypatch.setattr(_linux, "set_malloc_arena_max", lambda n: calls.append(n) or True)
    monkeypatch.setattr(_linux, "set_malloc_mmap_threshold", lambda n: True)
    monkeypatch.delenv("MALLOC_ARENA_MAX", raising=False)
    cri_cli._tune_malloc()
    assert calls == [cri_cli.MALLOC_ARENAS] == [2]
    monkeypatch.setenv("MALLOC_ARENA_MAX", "4")
    cri_cli._tune_malloc()
    assert calls == [2]


def test_serve_keeps_the_mmap_threshold_unless_the_environment_says(
        monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[int] = []
    monkeypatch.setattr(_linux, "set_malloc_arena_max", lambda n: True)
    monkeypatch.setattr(_linux, "set_malloc_mmap_threshold", lambda n: calls.append(n) or True)
    monkeypatch.delenv("MALLOC_MMAP_THRESHOLD_", raising=False)
    cri_cli._tune_malloc()
    assert calls == [cri_cli.MALLOC_MMAP_THRESHOLD] == [128 * 1024]
    monkeypatch.setenv("MALLOC_MMAP_THRESHOLD_", "65536")
    cri_cli._tune_malloc()
    assert calls == [128 * 1024]


@pytest.mark.parametrize("bad", [0, -1, True, 1.5, "4096"])
def test_mmap_threshold_refuses_bad_sizes(bad: object) -> None:
    with pytest.raises(ValueError, match=f"malloc mmap threshold {bad!r}: want a whole number"):
        _linux.set_malloc_mmap_threshold(bad)  # type: ignore[arg-type]


_THRESHOLD = """
import ctypes, sys
from podkit import _linux
if int(sys.argv[1]):
    assert _linux.set_malloc_mmap_threshold(128 * 1024)
def mapped():  # anonymous mappings of this process
    return sum(1 for line in open("/proc/self/maps") if len(line.split()) == 5)
libc = ctypes.CDLL(None)
libc.malloc.restype = ctypes.c_void_p
libc.free.argtypes = [ctypes.c_void_p]
libc.free(libc.malloc(1 << 20))  # glibc's default raises its threshold past 1 MiB here
before = mapped()
block = libc.malloc(512 * 1024)
print(mapped() - before)
libc.free(block)
_linux.malloc_trim()
"""


def test_the_kept_threshold_maps_big_blocks_of_their_own() -> None:
    """Without the setting, a 512 KiB block after a 1 MiB one was freed comes from the heap;
    with it, from a mapping of its own (returned when freed)."""
    def new_maps(keep: int) -> int:
        env = {k: v for k, v in os.environ.items() if not k.startswith("MALLOC_")}
        return int(subprocess.run([sys.executable, "-c", _THRESHOLD, str(keep)],
                                  capture_output=True, text=True, check=True, env=env).stdout)

    assert new_maps(1) == 1
    assert new_maps(0) == 0


_ARENAS = """
import ctypes, sys, threading
from podkit import _linux
if int(sys.argv[1]):
    assert _linux.set_malloc_arena_max(int(sys.argv[1]))
barrier, keep = threading.Barrier(8), []
def work():
    barrier.wait()  # eight threads alive at once, each allocating from glibc (not pymalloc)
    keep.append(bytearray(4096))
    barrier.wait()
threads = [threading.Thread(target=work) for _ in range(8)]
for t in threads: t.start()
for t in threads: t.join()
libc = ctypes.CDLL(None)
libc.open_memstream.restype = ctypes.c_void_p
libc.open_memstream.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
libc.malloc_info.argtypes = [ctypes.c_int, ctypes.c_void_p]
libc.fclose.argtypes = [ctypes.c_void_p]
buf, size = ctypes.c_void_p(), ctypes.c_size_t()
f = libc.open_memstream(ctypes.byref(buf), ctypes.byref(size))
libc.malloc_info(0, f)
libc.fclose(f)
print(ctypes.string_at(buf, size.value).count(b"<heap nr="))
"""


def _arenas(cap: int) -> int:
    env = {k: v for k, v in os.environ.items() if k != "MALLOC_ARENA_MAX"}
    return int(subprocess.run([sys.executable, "-c", _ARENAS, str(cap)], capture_output=True,
                              text=True, check=True, env=env).stdout)


@pytest.mark.integration
def test_glibc_keeps_to_the_arena_cap() -> None:
    if not hasattr(ctypes.CDLL(None), "malloc_info"):
        pytest.skip("not glibc")
    assert _arenas(0) > 2  # without the cap each of the eight threads gets its own arena
    assert _arenas(2) == 2
    assert _arenas(1) == 1


@pytest.mark.integration
@pytest.mark.parametrize("env", [{}, {"MALLOC_ARENA_MAX": "4"}])
def test_the_real_server_caps_arenas(busybox_rootfs: Path, tmp_path: Path,
                                     env: dict[str, str]) -> None:
    require_isolated()
    (tmp_path / "net.d").mkdir()
    argv = [sys.executable, "-m", "podkit.cli", "--debug", "cri", "serve",
            "--socket", str(tmp_path / "cri.sock"), "--root", str(tmp_path / "root"),
            "--cni-conf-dir", str(tmp_path / "net.d"), "--cdi-spec-dir", str(tmp_path / "cdi"),
            "--pause-image", str(busybox_rootfs), "--streaming-address", ""]
    full_env = {k: v for k, v in os.environ.items() if k != "MALLOC_ARENA_MAX"} | env
    proc = subprocess.Popen(argv, stderr=subprocess.PIPE, text=True, env=full_env)
    try:
        assert proc.stderr is not None
        seen = []
        for line in proc.stderr:
            seen.append(line)
            if "serving on" in line:
                break
        assert any("serving on" in line for line in seen), "".join(seen)
    finally:
        proc.terminate()
        rest = proc.communicate(timeout=60)[1]
    assert proc.returncode == 0, rest
    text = "".join(seen)
    if env:
        assert "malloc arenas: MALLOC_ARENA_MAX=4 from the environment" in text
        assert "at most" not in text
    else:
        assert "malloc arenas: at most 2" in text


# -- what the CRI server imports ----------------------------------------------------------------

_STREAMING = """
import sys
import podkit.cri.service
print("podkit.cri.streaming" in sys.modules)
from podkit.cri import StreamingServer, TokenCache
from podkit.cri.streaming import server
print(StreamingServer is server.StreamingServer, "podkit.cri.streaming" in sys.modules)
"""


def test_the_streaming_server_is_imported_on_first_use() -> None:
    out = subprocess.run([sys.executable, "-c", _STREAMING], capture_output=True, text=True,
                         check=True).stdout
    assert out.split() == ["False", "True", "True"]


def test_an_unknown_cri_name_is_an_attribute_error() -> None:
    import podkit.cri

    with pytest.raises(AttributeError, match=r"module 'podkit\.cri' has no attribute 'Nope'"):
        podkit.cri.Nope  # noqa: B018


# -- loading libc ------------------------------------------------------------------------------

def test_libc_loads_by_its_soname_without_asking_ldconfig(monkeypatch: pytest.MonkeyPatch
                                                          ) -> None:
    def no_ldconfig(name: str) -> str:
        raise AssertionError("find_library runs ldconfig")

    monkeypatch.setattr(ctypes.util, "find_library", no_ldconfig)
    assert _linux._load_libc().getpid() == os.getpid()


def test_libc_falls_back_to_find_library(monkeypatch: pytest.MonkeyPatch) -> None:
    real_cdll, asked = ctypes.CDLL, []

    def cdll(name: str, **kw: object) -> ctypes.CDLL:
        if name == "libc.so.6":
            raise OSError("libc.so.6: cannot open shared object file")
        return real_cdll(name, **kw)  # type: ignore[arg-type]

    def find_library(name: str) -> str:
        asked.append(name)
        return "libc.so.6.real"

    monkeypatch.setattr(ctypes, "CDLL", cdll)
    monkeypatch.setattr(ctypes.util, "find_library", find_library)
    with pytest.raises(OSError, match=r"libc\.so\.6\.real"):
        _linux._load_libc()  # the name find_library gave is the one tried
    assert asked == ["c"]
