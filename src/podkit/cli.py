"""The ``podkit`` command: one sub-command group per layer.

Exit codes: docs/cli.md and ``podkit._cli.exits.ExitCode``.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Iterator, Sequence
from typing import Any

from podkit._cli.dirs import add_dir_options
from podkit._cli.exits import ExitCode, exit_code_for
from podkit._cli.messages import error_line, log_to, needs_root_line

__all__ = ["build_parser", "main", "split_dashdash"]

# Modules under podkit._cli that define ``register(subparsers)``; each adds its own group.
_GROUPS: tuple[str, ...] = ("image", "cdi", "runtime", "cni", "pod", "cri", "kube", "config")
# The command words each module registers: ``podkit WORD ...`` imports that module alone
# (``podkit cri serve`` needs none of the others' imports). tests/test_cli_startup.py checks it.
_WORDS: dict[str, str] = {"image": "image", "cdi": "cdi", "run": "runtime", "ps": "runtime",
                          "rm": "runtime", "cni": "cni", "pod": "pod", "cri": "cri",
                          "kube": "kube", "config": "config"}
_VALUED = ("--config", "--root", "--state")  # global options whose value is the next word


class _Parser(argparse.ArgumentParser):
    """Options and positionals may be intermixed (``pod rm a --force b``) in every command
    without sub-commands or a REMAINDER positional (argparse refuses intermixing there)."""

    _intermixing = False

    def parse_known_args(self, args: Any = None, namespace: Any = None) -> Any:
        plain = self._intermixing or any(
            a.nargs in (argparse.PARSER, argparse.REMAINDER)
            for a in self._get_positional_actions())
        if plain:
            return super().parse_known_args(args, namespace)
        self._intermixing = True
        try:
            return super().parse_known_intermixed_args(args, namespace)
        finally:
            self._intermixing = False


def split_dashdash(argv: Sequence[str]) -> tuple[list[str], list[str] | None]:
    """``argv`` before the first ``--`` and the words after it (``None``: no ``--``)."""
    words = list(argv)
    if "--" not in words:
        return words, None
    i = words.index("--")
    return words[:i], words[i + 1:]


def _leaves(parser: argparse.ArgumentParser) -> Iterator[argparse.ArgumentParser]:
    """Every parser under ``parser`` that has no sub-commands of its own."""
    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not subs:
        yield parser
    for action in subs:
        for child in dict.fromkeys(action.choices.values()):  # aliases share a parser
            yield from _leaves(child)


def _add_global_options(p: argparse.ArgumentParser, *, top: bool) -> None:
    """``--debug``, ``--config``, ``--root`` and ``--state``, given before or after the command
    words."""
    have = p._option_string_actions
    if "--debug" not in have:
        p.add_argument("--debug", action="store_true",
                       default=False if top else argparse.SUPPRESS,
                       help="full error messages, command lines and stacks; debug logs")
    if "--root" not in have and "--state" not in have:
        add_dir_options(p)


def build_parser() -> argparse.ArgumentParser:
    """The argument parser with every layer's sub-commands registered."""
    return _parser(_GROUPS)


def _command_word(argv: Sequence[str]) -> str | None:
    """The first word of ``argv`` that is neither an option nor a global option's value
    (``None`` after ``-h``: the help of ``podkit`` itself lists every command)."""
    i = 0
    while i < len(argv):
        word = argv[i]
        if word in ("-h", "--help"):
            return None
        if not word.startswith("-"):
            return word
        i += 2 if _takes_value(word) else 1
    return None


def _takes_value(option: str) -> bool:
    """``--config``/``--root``/``--state`` or a prefix argparse expands to one (``--ro``); not
    ``--root=X``."""
    return option.startswith("--") and len(option) > 2 and "=" not in option and any(
        v.startswith(option) for v in _VALUED)


def _modules_for(argv: Sequence[str]) -> tuple[str, ...]:
    """The group module the command in ``argv`` needs; every one when there is no known
    command word (``podkit --help``, a typo: the full parser lists or rejects it); none for
    ``podkit --version`` (it prints before any group would be looked at)."""
    word = _command_word(argv)
    module = _WORDS.get(word or "")
    if module is not None:
        return (module,)
    return () if word is None and "--version" in argv else _GROUPS


def _version() -> str:
    """podkit's version: the installed distribution's (``importlib.metadata``), else
    ``podkit.__version__`` (a source tree on ``sys.path`` that was never installed)."""
    import importlib.metadata  # only for --version: it loads email.*, which no command needs
    try:
        return importlib.metadata.version("podkit")
    except importlib.metadata.PackageNotFoundError:
        import podkit
        return podkit.__version__


class _VersionAction(argparse.Action):
    """``--version``: the version is looked up only when asked for."""

    def __init__(self, option_strings: Sequence[str], dest: str, **kwargs: Any) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, **kwargs)

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: object, option_string: str | None = None) -> None:
        print(f"podkit {_version()}")
        parser.exit()


def _parser(modules: Sequence[str]) -> argparse.ArgumentParser:
    """The argument parser with the groups of ``modules`` registered."""
    parser = _Parser(prog="podkit", description=__doc__,
                     formatter_class=argparse.RawDescriptionHelpFormatter)
    _add_global_options(parser, top=True)
    parser.add_argument("--version", action=_VersionAction,
                        help="print podkit's version and exit")
    sub = parser.add_subparsers(dest="group", metavar="COMMAND")
    sub.required = True
    for name in modules:
        importlib.import_module(f"podkit._cli.{name}").register(sub)
    for leaf in _leaves(parser):
        _add_global_options(leaf, top=False)
    return parser


def _run(args: argparse.Namespace) -> int:
    """Check root for commands that need it, then run the command."""
    what = getattr(args, "needs_root", "")
    if what and os.geteuid() != 0:
        print(needs_root_line(what), file=sys.stderr)
        return ExitCode.PERMISSION
    rc: int = args.func(args)
    sys.stdout.flush()  # a closed pipe shows here, not at exit
    return rc


def _quiet_stdout() -> None:
    """After the reader of stdout went away: later writes (and the flush at exit) go nowhere."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):  # not a real file (tests): nothing flushes to a pipe then
        pass
    finally:
        os.close(devnull)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; returns the process exit code.

    Words after the first ``--`` are never parsed as options: a command reads them from
    ``args.command_after_dashdash`` (a list; ``None`` when there was no ``--``), e.g.
    ``podkit pod exec POD CTR --timeout 5 -- sh -c 'exit 3'``.
    """
    before, after = split_dashdash(sys.argv[1:] if argv is None else argv)
    try:
        args = _parser(_modules_for(before)).parse_args(before)
    except SystemExit as e:  # argparse: --help (0) or a usage error (2)
        return int(e.code or 0) if isinstance(e.code, int) else ExitCode.USAGE
    args.command_after_dashdash = after
    debug = bool(getattr(args, "debug", False))
    with log_to(sys.stderr, debug=debug):
        try:
            return _run(args)
        except BrokenPipeError:
            _quiet_stdout()
            return ExitCode.OK
        except (Exception, KeyboardInterrupt) as e:  # every failure is one line
            print(_error(e, args, debug), file=sys.stderr)
            return exit_code_for(e)


def _error(exc: BaseException, args: argparse.Namespace, debug: bool) -> str:
    what = getattr(args, "needs_root", "")
    if isinstance(exc, PermissionError) and what and os.geteuid() != 0 and not debug:
        return needs_root_line(what)
    return error_line(exc, debug=debug)


if __name__ == "__main__":
    sys.exit(main())
