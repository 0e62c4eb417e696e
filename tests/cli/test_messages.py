"""What ``podkit`` prints on stderr: one-line errors, ``--debug`` details, the not-root line,
warnings once, and a quiet end when stdout's reader goes away."""

from __future__ import annotations

import argparse
import io
import logging

import pytest

from podkit import errors, runtime
from podkit._cli import messages
from podkit._cli.exits import ExitCode
from podkit.cli import main

CONMON = ["/usr/bin/conmon", *(f"--opt-{i}=value-{i}" for i in range(100))]  # ~2 KB


def test_a_runtime_error_without_its_command_line() -> None:
    exc = runtime.OCIRuntimeError("runc create failed: no such file", CONMON, "stderr text")
    assert len(str(exc)) > 1500
    assert messages.error_line(exc) == "podkit: runc create failed: no such file"


def test_an_embedded_command_line_is_cut() -> None:
    inner = runtime.OCIRuntimeError("conmon failed", CONMON)
    exc = errors.PodkitError(f"sandbox abc: pause: {inner}; undone")
    assert messages.error_line(exc) == "podkit: sandbox abc: pause: conmon failed; undone"


def test_one_line_and_bounded() -> None:
    line = messages.error_line(errors.PodkitError("first\nsecond\n\tthird"))
    assert line == "podkit: first second third"
    line = messages.error_line(errors.InvalidArgumentError("x" * 5000))
    assert len(line) < 500 and line.endswith("... (--debug prints all)")
    assert "\n" not in line


def test_bad_input_with_problems_prints_one_line_per_problem() -> None:
    exc = errors.InvalidArgumentError(
        "web.yaml: 2 unknown fields:\n"
        "  web.yaml:9:7: spec.initContianers: unknown field, did you mean 'initContainers'?\n"
        f"  web.yaml:14:9: spec.x: {'y' * 5000}")
    first, one, two = messages.error_line(exc).split("\n")
    assert first == "podkit: web.yaml: 2 unknown fields:"
    assert one == ("  web.yaml:9:7: spec.initContianers: unknown field, did you mean "
                   "'initContainers'?")
    assert two.startswith("  web.yaml:14:9: spec.x: yyy") and len(two) < 500
    # only bad input lists problems; any other error stays on one line
    assert "\n" not in messages.error_line(errors.PodkitError("a:\n  b\n  c"))


def test_os_errors_and_bugs() -> None:
    exc = PermissionError(13, "Permission denied", "/var/lib/podkit/image")
    assert messages.error_line(exc) == "podkit: permission denied: /var/lib/podkit/image"
    line = messages.error_line(KeyError("boom"))
    assert line == "podkit: internal error: KeyError: 'boom' (--debug prints the stack)"
    assert messages.error_line(KeyboardInterrupt()) == "podkit: interrupted"
    assert messages.error_line(TimeoutError()) == "podkit: TimeoutError"


def test_debug_shows_everything() -> None:
    try:
        raise runtime.OCIRuntimeError("runc create failed", CONMON, "the runtime said so\n")
    except runtime.OCIRuntimeError as e:
        text = messages.error_line(e, debug=True)
    assert text.startswith("Traceback (most recent call last):")
    assert "--opt-99=value-99" in text
    assert text.endswith("podkit: runtime stderr: the runtime said so")


def test_needs_root_line() -> None:
    assert messages.needs_root_line("run pods") == "podkit: podkit needs root to run pods"


def test_warnings_once_per_process() -> None:
    log = logging.getLogger("podkit.test_messages")
    out = io.StringIO()
    with messages.log_to(out):
        log.warning("pause containers get OOM score %d", 0)
        log.warning("pause containers get OOM score %d", 0)
        log.info("not shown")
    with messages.log_to(out):  # a second command in the same process
        log.warning("pause containers get OOM score %d", 0)
        log.warning("another one")
    assert out.getvalue() == ("podkit: warning: pause containers get OOM score 0\n"
                              "podkit: warning: another one\n")
    log.warning("after: not ours")  # the handler is gone
    assert out.getvalue().count("\n") == 2


def test_debug_logs_everything_every_time() -> None:
    log = logging.getLogger("podkit.test_messages")
    out = io.StringIO()
    with messages.log_to(out, debug=True):
        log.debug("step %s", "network")
        log.warning("again")
        log.warning("again")
    assert out.getvalue() == ("podkit: debug podkit.test_messages: step network\n"
                              "podkit: warning podkit.test_messages: again\n" * 1 +
                              "podkit: warning podkit.test_messages: again\n")


def _fail_with(monkeypatch: pytest.MonkeyPatch, exc: BaseException,
               command: str = "podkit._cli.cdi._dirs") -> None:
    """Make the command whose function is ``command`` raise ``exc``."""
    def func(args: argparse.Namespace) -> int:
        raise exc
    monkeypatch.setattr(command, func)


def test_main_prints_one_line_and_the_code(monkeypatch: pytest.MonkeyPatch,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    _fail_with(monkeypatch, runtime.NotFoundError("container x does not exist", CONMON))
    assert main(["cdi", "dirs"]) == ExitCode.NOT_FOUND
    assert capsys.readouterr() == ("", "podkit: container x does not exist\n")
    assert main(["cdi", "dirs", "--debug"]) == ExitCode.NOT_FOUND
    err = capsys.readouterr().err
    assert "Traceback" in err and "--opt-99=value-99" in err


def test_not_root(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr("os.geteuid", lambda: 65534)
    _fail_with(monkeypatch, AssertionError("must not run"), "podkit._cli.pod.cmd_ls")
    assert main(["pod", "ls"]) == ExitCode.PERMISSION
    assert capsys.readouterr() == ("", "podkit: podkit needs root to run pods\n")


def test_a_permission_error_of_a_user(monkeypatch: pytest.MonkeyPatch,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr("os.geteuid", lambda: 65534)
    _fail_with(monkeypatch, PermissionError(13, "Permission denied", "/var/lib/podkit"))
    assert main(["cdi", "dirs"]) == ExitCode.PERMISSION
    assert capsys.readouterr().err == "podkit: permission denied: /var/lib/podkit\n"
    # a root-only command that fails on a permission anyway (root given up by a sandbox)
    monkeypatch.setattr("os.geteuid", lambda: 0)
    _fail_with(monkeypatch, PermissionError(13, "Permission denied", "/run/podkit/pods"),
               "podkit._cli.pod.cmd_ls")
    assert main(["pod", "ls"]) == ExitCode.PERMISSION
    assert capsys.readouterr().err == "podkit: permission denied: /run/podkit/pods\n"


def test_a_closed_stdout_ends_quietly(monkeypatch: pytest.MonkeyPatch,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    _fail_with(monkeypatch, BrokenPipeError(32, "Broken pipe"))
    assert main(["cdi", "dirs"]) == ExitCode.OK
    assert capsys.readouterr() == ("", "")


def test_interrupt(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    _fail_with(monkeypatch, KeyboardInterrupt())
    assert main(["cdi", "dirs"]) == ExitCode.INTERRUPTED
    assert capsys.readouterr().err == "podkit: interrupted\n"
