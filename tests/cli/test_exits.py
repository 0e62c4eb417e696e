"""``podkit._cli.exits``: every error kind exits with its own documented code."""

from __future__ import annotations

import pytest

from podkit import cdi, cni, errors, image, runtime
from podkit._cli.exits import ExitCode, exit_code_for


def test_codes_are_distinct_and_fixed() -> None:
    # scripts branch on these numbers: changing one is a breaking change (docs/cli.md)
    assert {c.name: c.value for c in ExitCode} == {
        "OK": 0, "FAILURE": 1, "USAGE": 2, "NOT_FOUND": 3, "ALREADY_EXISTS": 4,
        "CONFLICT": 5, "TIMEOUT": 6, "PERMISSION": 7, "RUNTIME": 8, "INTERRUPTED": 130}


@pytest.mark.parametrize(("exc", "code"), [
    (errors.NotFoundError("x"), ExitCode.NOT_FOUND),
    (image.ImageNotFoundError("x"), ExitCode.NOT_FOUND),
    (cni.NetworkNotFoundError("/etc/cni/net.d", "x"), ExitCode.NOT_FOUND),
    (cdi.UnresolvableDevicesError(["a.com/b=c"]), ExitCode.NOT_FOUND),
    (FileNotFoundError(2, "No such file or directory", "/x"), ExitCode.NOT_FOUND),
    (errors.AlreadyExistsError("x"), ExitCode.ALREADY_EXISTS),
    (FileExistsError(17, "File exists", "/x"), ExitCode.ALREADY_EXISTS),
    (errors.ConflictError("x"), ExitCode.CONFLICT),
    (image.ImageInUseError("x"), ExitCode.CONFLICT),
    (errors.InvalidArgumentError("x"), ExitCode.USAGE),
    (cni.ConfigError("x"), ExitCode.USAGE),
    (TimeoutError("x"), ExitCode.TIMEOUT),
    (runtime.RuntimeTimeoutError("x"), ExitCode.TIMEOUT),
    (cni.PluginTimeoutError(999, "x"), ExitCode.TIMEOUT),
    (PermissionError(13, "Permission denied", "/var/lib/podkit"), ExitCode.PERMISSION),
    (runtime.OCIRuntimeError("runc create failed"), ExitCode.RUNTIME),
    (runtime.UnsupportedOperationError("x"), ExitCode.RUNTIME),
    (KeyboardInterrupt(), ExitCode.INTERRUPTED),
    (errors.PodkitError("x"), ExitCode.FAILURE),
    (cni.CNIError(999, "x"), ExitCode.FAILURE),
    (OSError(5, "Input/output error"), ExitCode.FAILURE),
    (RuntimeError("a bug"), ExitCode.FAILURE),
])
def test_error_kinds(exc: BaseException, code: ExitCode) -> None:
    assert exit_code_for(exc) is code


def test_the_specific_kind_wins_over_the_runtime_one() -> None:
    # runtime.NotFoundError is an OCIRuntimeError too: "not found" says more than "runtime"
    assert exit_code_for(runtime.NotFoundError("gone")) is ExitCode.NOT_FOUND
    assert exit_code_for(runtime.AlreadyExistsError("taken")) is ExitCode.ALREADY_EXISTS
    assert exit_code_for(runtime.NotRunningError("stopped")) is ExitCode.CONFLICT
