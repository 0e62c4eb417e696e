"""parse_runtime_error on recorded runc 1.1.5 / crun 1.8.1 texts (tests/runtime/data)."""

from __future__ import annotations

from pathlib import Path

import pytest

from podkit import errors as base
from podkit import runtime
from podkit.runtime import errors

DATA = Path(__file__).parent / "data"
CMD = ["runc", "state", "x"]

CASES = [
    ("state-missing", errors.NotFoundError),
    ("delete-missing", errors.NotFoundError),
    ("dup", errors.AlreadyExistsError),
    ("exec-paused", errors.NotRunningError),
    ("exec-stopped", errors.NotRunningError),
    ("kill-stopped", errors.NotRunningError),
    ("pause-stopped", errors.NotRunningError),
    ("delete-running", errors.NotRunningError),
    ("unknown-command", errors.UnsupportedOperationError),
    ("start-running", errors.NotRunningError),
]


@pytest.mark.parametrize(
    "name", ["runc-resume-created", "runc-resume-running", "runc-start-running"]
)
def test_recorded_logfmt_stderr(name: str) -> None:
    # recorded without --log: runc prints logfmt on stderr
    text = (DATA / f"{name}-stderr.txt").read_text()
    err = errors.parse_runtime_error(text, CMD, "runc")
    assert type(err) is errors.NotRunningError
    assert "level=error" not in err.message and "time=" not in err.message


@pytest.mark.parametrize("rt", ["runc", "crun"])
@pytest.mark.parametrize(("case", "cls"), CASES)
def test_recorded_stderr_is_typed(rt: str, case: str, cls: type) -> None:
    text = (DATA / f"{rt}-{case}-stderr.txt").read_text()
    err = errors.parse_runtime_error(text, CMD, rt)
    assert type(err) is cls
    assert err.command == CMD
    assert err.stderr == text
    assert errors.last_error_message(text) in err.message


@pytest.mark.parametrize("rt", ["runc", "crun"])
def test_json_log_last_error_record_wins(rt: str) -> None:
    log = (DATA / f"{rt}-log.json").read_bytes()
    last = log.decode().strip().splitlines()[-1]
    err = errors.parse_runtime_error(log, CMD, rt)
    import json

    assert json.loads(last)["msg"].strip() in err.message


def test_crun_only_commands_are_unsupported() -> None:
    for name in ("events", "features", "checkpoint"):
        text = (DATA / f"crun-{name}-stderr.txt").read_text()
        assert isinstance(
            errors.parse_runtime_error(text, CMD, "crun"), errors.UnsupportedOperationError
        )


def test_kinds_are_podkit_kinds() -> None:
    assert issubclass(errors.NotFoundError, base.NotFoundError)
    assert issubclass(errors.AlreadyExistsError, base.AlreadyExistsError)
    assert issubclass(errors.NotRunningError, base.ConflictError)
    assert issubclass(errors.OCIRuntimeError, base.PodkitError)
    assert runtime.RuntimeError is errors.OCIRuntimeError


def test_logfmt_stderr_without_log_file() -> None:
    text = 'time="2026-12-02T09:05:47Z" level=error msg="runc run failed: container with given ID already exists"\n'  # noqa: E501
    err = errors.parse_runtime_error(text, CMD, "runc")
    assert isinstance(err, errors.AlreadyExistsError)
    assert err.message == "runc run failed: container with given ID already exists"


def test_quoted_ids_do_not_change_the_kind() -> None:
    # an ID containing "paused" in a crun not-found text is still NotFound
    text = "error opening file `/run/x/pk-paused/status`: No such file or directory"
    assert isinstance(errors.parse_runtime_error(text, CMD, "crun"), errors.NotFoundError)
    text = "container `already-exists-not` is not running"
    assert isinstance(errors.parse_runtime_error(text, CMD, "crun"), errors.NotRunningError)


def test_unknown_text_is_base_error_with_runtime_name_and_command() -> None:
    err = errors.parse_runtime_error(b"something odd happened\n", CMD, "crun")
    assert type(err) is errors.OCIRuntimeError
    assert err.message == "crun: something odd happened"
    assert "runc state x" in str(err)


def test_empty_text() -> None:
    err = errors.parse_runtime_error("", CMD, "runc")
    assert type(err) is errors.OCIRuntimeError
    assert "without an error message" in err.message


def test_non_error_records_are_skipped() -> None:
    log = '{"level":"warning","msg":"not this"}\n{"level":"error","msg":"container does not exist"}\n{"level":"info","msg":"nor this"}\n'  # noqa: E501
    err = errors.parse_runtime_error(log, CMD, "runc")
    assert isinstance(err, errors.NotFoundError)
    assert err.message == "runc: container does not exist"
