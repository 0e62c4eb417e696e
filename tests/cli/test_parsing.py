"""``podkit.cli``: ``--`` ends options, options and positionals intermix, global options go
before or after the command words, and ``--root``/``--state`` resolve the same everywhere."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from podkit._cli import dirs, podctx
from podkit.cli import build_parser, main, split_dashdash


def parse(*argv: str) -> argparse.Namespace:
    before, after = split_dashdash(argv)
    args = build_parser().parse_args(before)
    args.command_after_dashdash = after
    return args


@pytest.mark.parametrize(("argv", "before", "after"), [
    ([], [], None),
    (["pod", "ls"], ["pod", "ls"], None),
    (["pod", "exec", "p", "c", "--"], ["pod", "exec", "p", "c"], []),
    (["pod", "exec", "p", "c", "--timeout", "5", "--", "sh", "-c", "x --", "--"],
     ["pod", "exec", "p", "c", "--timeout", "5"], ["sh", "-c", "x --", "--"]),
])
def test_split_dashdash(argv: list[str], before: list[str], after: list[str] | None) -> None:
    assert split_dashdash(argv) == (before, after)


def test_exec_options_after_the_positionals_are_options() -> None:
    args = parse("pod", "exec", "web", "app", "--timeout", "5", "--", "sh", "-c", "exit 3")
    assert (args.pod, args.container) == ("web", "app") and args.timeout in ("5", 5, 5.0)
    assert args.command_after_dashdash == ["sh", "-c", "exit 3"]
    # everything after -- is the command, even what looks like an option
    args = parse("pod", "exec", "web", "app", "--", "ls", "--timeout", "5")
    assert args.timeout is None and args.command_after_dashdash == ["ls", "--timeout", "5"]


def test_options_between_positionals() -> None:
    args = parse("pod", "rm", "a", "--runtime", "crun", "b")
    assert args.pod == ["a", "b"] and args.runtime == "crun"
    args = parse("pod", "inspect", "--output", "yaml", "web", "-q", "app")
    assert (args.pod, args.container, args.output, args.quiet) == ("web", "app", "yaml", True)
    args = parse("image", "rm", "a", "--prune", "b")
    assert args.references == ["a", "b"] and args.prune


@pytest.mark.parametrize("argv", [
    ["--root", "/r", "--state", "/s", "--debug", "pod", "ls"],
    ["pod", "ls", "--root", "/r", "--state", "/s", "--debug"],
    ["--root", "/r", "pod", "ls", "--debug", "--state", "/s"],
])
def test_global_options_before_or_after(argv: list[str]) -> None:
    args = parse(*argv)
    assert (args.root, args.state, args.debug) == ("/r", "/s", True)
    assert podctx.pod_root(args) == Path("/r/pods")
    assert podctx.pod_state(args) == Path("/s/pods")
    assert dirs.node_config(args).images_dir == "/r"


def test_the_same_dirs_for_every_group() -> None:
    for argv in (["image", "ls"], ["ps"], ["cdi", "list"], ["cni", "ls"], ["pod", "ls"]):
        args = parse("--root", "/r", *argv)
        assert dirs.podkit_root(args) == Path("/r")
        assert dirs.podkit_state(args) == Path("/r/state")


def test_dirs_from_env_and_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PODKIT_ROOT", raising=False)
    monkeypatch.delenv("PODKIT_STATE", raising=False)
    args = parse("pod", "ls")
    assert dirs.podkit_root(args) == Path("/var/lib/podkit")
    assert dirs.podkit_state(args) == Path("/run/podkit")
    assert podctx.pod_root(args) == Path(podctx.DEFAULT_ROOT)
    assert podctx.pod_state(args) == Path(podctx.DEFAULT_STATE)
    monkeypatch.setenv("PODKIT_ROOT", "/ci/root")
    assert dirs.podkit_root(args) == Path("/ci/root")
    assert dirs.podkit_state(args) == Path("/ci/root/state")  # never the shared /run/podkit
    monkeypatch.setenv("PODKIT_STATE", "/ci/state")
    assert dirs.podkit_state(args) == Path("/ci/state")
    # the command line wins over the environment
    args = parse("pod", "ls", "--root", "/r", "--state", "/s", "--image-root", "/i")
    assert (dirs.podkit_root(args), dirs.podkit_state(args)) == (Path("/r"), Path("/s"))
    assert dirs.node_config(args).images_dir == "/i"


def test_relative_dirs_are_made_absolute(monkeypatch: pytest.MonkeyPatch,
                                         tmp_path: Path) -> None:
    monkeypatch.chdir(tmp_path)
    args = parse("--root", "r", "pod", "ls")
    assert dirs.podkit_root(args) == tmp_path / "r"


def test_usage_errors_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["pod", "nope"]) == 2
    assert "invalid choice: 'nope'" in capsys.readouterr().err
    assert main(["pod", "ls", "--no-such-option"]) == 2
    assert "unrecognized arguments: --no-such-option" in capsys.readouterr().err
    assert main(["pod", "ls", "-o", "xml"]) == 2
    assert main([]) == 2
    assert main(["--help"]) == 0
    assert "--root DIR" in capsys.readouterr().out


def test_cri_serve_takes_the_global_root(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PODKIT_ROOT", raising=False)
    monkeypatch.delenv("PODKIT_CONFIG", raising=False)
    serve = ("cri", "serve", "--pause-image", "p")
    assert dirs.podkit_root(parse(*serve)) == Path("/var/lib/podkit")
    assert dirs.podkit_root(parse("--root", "/g", *serve)) == Path("/g")
    assert dirs.podkit_root(parse(*serve, "--root", "/own")) == Path("/own")
    monkeypatch.setenv("PODKIT_ROOT", "/env")
    assert dirs.podkit_root(parse(*serve)) == Path("/env")
    assert dirs.podkit_root(parse(*serve, "--root", "/own")) == Path("/own")
