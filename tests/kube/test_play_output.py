"""``kube play`` output without a pod: the table rows and the JSON of a result, and the exit
codes its errors map to."""

from __future__ import annotations

import argparse
import io
import json
from contextlib import redirect_stdout

import attrs

from podkit._cli.exits import ExitCode, exit_code_for
from podkit._cli.kube import print_result
from podkit.errors import AlreadyExistsError
from podkit.kube.runner import (
    ContainerResult,
    PlayResult,
    PlayTimeoutError,
    PodFailedError,
    PodResult,
)

RESULT = PlayResult((PodResult(
    name="web", namespace="kp", uid="u1", source="web.yaml#0 (Pod/web)", sandbox_id="a" * 64,
    ip="10.88.0.7", host_ports=((18080, 80, "TCP"),), status="Ready",
    containers=(ContainerResult(name="init", id="b" * 64, init=True, state="exited",
                                exit_code=0),
                ContainerResult(name="httpd", id="c" * 64, state="running", restarts=2))),))


def _out(fmt: str) -> str:
    buf = io.StringIO()
    with redirect_stdout(buf):
        print_result(argparse.Namespace(output=fmt), RESULT)
    return buf.getvalue()


def test_table_has_a_row_per_container() -> None:
    header, *rows = [line.split() for line in _out("table").splitlines()]
    assert header == ["POD", "POD", "ID", "IP", "HOST", "PORTS", "CONTAINER", "CONTAINER", "ID",
                      "STATE", "RESTARTS", "POD", "STATUS"]
    assert rows == [
        ["kp/web", "a" * 12, "10.88.0.7", "18080->80/tcp", "init", "(init)", "b" * 12,
         "exited", "0", "Ready"],
        ["kp/web", "a" * 12, "10.88.0.7", "18080->80/tcp", "httpd", "c" * 12, "running", "2",
         "Ready"]]


def test_json_fields() -> None:
    data = json.loads(_out("json"))
    [pod] = data["pods"]
    assert pod["host_ports"] == [{"host_port": 18080, "container_port": 80, "protocol": "TCP"}]
    assert pod["containers"][1] == {"name": "httpd", "id": "c" * 64, "init": False,
                                    "state": "running", "exit_code": None, "restart_count": 2}
    assert (pod["sandbox_id"], pod["ip"], pod["status"], pod["reason"], pod["warnings"]) == (
        "a" * 64, "10.88.0.7", "Ready", None, [])


def test_json_says_null_for_what_does_not_apply() -> None:
    """docs/cli.md: a field that does not apply is null, never "" (as pod inspect prints)."""
    host = PlayResult((PodResult(name="h", namespace="kp", uid="u2", source="h.yaml#0 (Pod/h)",
                                 containers=(ContainerResult(name="app", id=""),)),))
    buf = io.StringIO()
    with redirect_stdout(buf):
        print_result(argparse.Namespace(output="json"), host)
    [pod] = json.loads(buf.getvalue())["pods"]
    assert (pod["sandbox_id"], pod["ip"], pod["reason"], pod["containers"][0]["id"]) == (
        None, None, None, None)
    failed = attrs.evolve(host.pods[0], reason="container 'app': exited with code 1")
    assert failed.to_json()["reason"] == "container 'app': exited with code 1"


def test_exit_codes() -> None:
    assert exit_code_for(PlayTimeoutError("t", RESULT)) == ExitCode.TIMEOUT == 6
    assert exit_code_for(PodFailedError("f", RESULT)) == ExitCode.FAILURE == 1
    assert exit_code_for(AlreadyExistsError("x")) == ExitCode.ALREADY_EXISTS == 4
