"""``podkit pod``: the YAML loader (unit) and run/ls/exec/logs/stop/rm end to end."""

from __future__ import annotations

import json
import subprocess
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

import _leaks
from podkit._cli.pod import load_pod_file
from podkit.cli import main
from podkit.errors import InvalidArgumentError
from podkit.image import ImageStore
from podkit.pods.config import NamespaceMode, ProfileType, Protocol, SupplementalGroupsPolicy
from podkit.sandbox import BUILTIN_PAUSE_IMAGE
from support import require_binary, require_isolated

from ._pods import copy_rootfs, leaked, snapshot

POD = """
sandbox:
  metadata: {{name: pk-pod-cli, namespace: demo}}
  hostname: pk-pod-cli
  log_directory: {logs}
  port_mappings: [{{container_port: 80, host_port: 18081, protocol: tcp}}]
  linux: {{security_context: {{namespace_options: {{pid: CONTAINER}}}}}}
containers:
  - metadata: {{name: web}}
    image: {rootfs}
    command: [sh, -c, "echo started; exec httpd -f -p 80 -h /etc"]
    log_path: web.log
pause: {{rootfs: {rootfs}}}
"""


def test_load_pod_file(tmp_path: Path) -> None:
    f = tmp_path / "pod.yaml"
    f.write_text(POD.format(logs="/l", rootfs="/r"))
    pod = load_pod_file(f)
    assert pod.sandbox.metadata.name == "pk-pod-cli"
    assert pod.sandbox.port_mappings[0].protocol == Protocol.TCP
    assert pod.sandbox.linux.security_context.namespace_options.pid == NamespaceMode.CONTAINER
    assert [c.metadata.name for c in pod.containers] == ["web"]
    assert pod.pause_rootfs == "/r"


def test_enums_by_podkit_or_cri_name(tmp_path: Path) -> None:
    f = tmp_path / "pod.yaml"
    f.write_text(textwrap.dedent("""\
        sandbox:
          metadata: {name: a}
          linux: {security_context: {seccomp: {profile_type: RUNTIME_DEFAULT}}}
        containers:
          - metadata: {name: c}
            image: /r
            linux:
              security_context:
                seccomp: {profile_type: RuntimeDefault}
                apparmor: {profile_type: localhost, localhost_ref: k8s-nginx}
                supplemental_groups_policy: Strict
    """))
    pod = load_pod_file(f)
    assert pod.sandbox.linux.security_context.seccomp is not None
    assert pod.sandbox.linux.security_context.seccomp.profile_type == ProfileType.RUNTIME_DEFAULT
    sc = pod.containers[0].linux.security_context
    assert sc.seccomp is not None and sc.seccomp.profile_type == ProfileType.RUNTIME_DEFAULT
    assert sc.apparmor is not None and sc.apparmor.profile_type == ProfileType.LOCALHOST
    assert sc.supplemental_groups_policy == SupplementalGroupsPolicy.STRICT
    f.write_text("sandbox: {metadata: {name: a}, linux: {security_context: "
                 "{seccomp: {profile_type: Default}}}}")
    with pytest.raises(InvalidArgumentError, match="profile_type"):
        load_pod_file(f)


@pytest.mark.parametrize(("text", "message"), [
    ("[1]", "expected a mapping with a 'sandbox' key"),
    ("sandbox: {metadata: {name: a}}\nextra: 1", "unknown top-level keys ['extra']"),
    ("sandbox: {metadata: {name: a}, hostnme: x}", "hostnme"),
    ("sandbox: {metadata: {name: a}, port_mappings: [{container_port: 80, protocol: icmp}]}",
     "$.sandbox.port_mappings[0].protocol"),
    ("sandbox: {metadata: {name: a}}\ncontainers: [{metadata: {name: c}}]",
     "$.containers[0].image"),
    ("sandbox: [", "not valid YAML"),
])
def test_load_pod_file_errors_name_the_field(tmp_path: Path, text: str, message: str) -> None:
    f = tmp_path / "pod.yaml"
    f.write_text(text)
    with pytest.raises(InvalidArgumentError, match=str(f)) as info:
        load_pod_file(f)
    assert message in str(info.value)


@pytest.fixture
def cli_env(busybox_rootfs: Path, tmp_path: Path) -> Iterator[list[str]]:
    require_isolated()
    for b in ("runc", "conmon"):
        require_binary(b)
    _leaks.register_runtime_root(tmp_path / "state" / "pods" / "runc")
    _leaks.register_ipam_dir(tmp_path / "state" / "pods" / "ipam")
    copy_rootfs(busybox_rootfs, tmp_path / "rootfs")
    yield ["--root", str(tmp_path / "root"), "--state", str(tmp_path / "state")]


@pytest.mark.integration
def test_pod_cli_end_to_end(
    cli_env: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    before = snapshot()
    try:
        f = tmp_path / "pod.yaml"
        f.write_text(textwrap.dedent(POD.format(logs=tmp_path / "logs",
                                                rootfs=tmp_path / "rootfs")))
        assert main(["pod", "run", str(f), *cli_env]) == 0
        out = capsys.readouterr().out
        assert out.splitlines()[0].split()[:3] == ["POD", "ID", "NAME"]
        assert "pk-pod-cli" in out and "web:RUNNING" in out
        assert main(["pod", "run", str(f), *cli_env]) == 4  # duplicate name: already exists
        assert "already reserved" in capsys.readouterr().err

        assert main(["pod", "ls", *cli_env]) == 0
        table = capsys.readouterr().out
        assert "pk-pod-cli" in table and "READY" in table and "RUNNING" in table

        assert main(["pod", "exec", *cli_env, "pk-pod-cli", "web", "--",
                     "sh", "-c", "hostname; exit 4"]) == 4
        assert capsys.readouterr().out == "pk-pod-cli\n"
        assert main(["pod", "logs", *cli_env, "pk-pod-cli", "web"]) == 0
        assert capsys.readouterr().out == "started\n"

        assert main(["pod", "stop", "pk-pod-cli", *cli_env]) == 0
        assert main(["pod", "ls", *cli_env]) == 0
        assert "NOTREADY" in capsys.readouterr().out
        assert main(["pod", "rm", "pk-pod-cli", *cli_env]) == 0
        assert main(["pod", "rm", "pk-pod-cli", *cli_env]) == 3
        assert "not found" in capsys.readouterr().err
    finally:
        main(["pod", "rm", "pk-pod-cli", *cli_env])
        # the CLI uses the built-in network; its bridge pk0 lives in this private namespace
        subprocess.run(["ip", "link", "del", "pk0"], check=False, capture_output=True)
    assert leaked(before) == []


@pytest.mark.integration
def test_pod_cli_builtin_pause_and_infraless(
    cli_env: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A pod file without a pause runs on the built-in one (catatonit, made in the image
    store under --root); with --no-pause it is infra-less."""
    require_binary("catatonit")
    before = snapshot()
    f = tmp_path / "pod.yaml"
    text = POD.format(logs=tmp_path / "logs", rootfs=tmp_path / "rootfs")
    f.write_text(text[: text.index("pause:")])
    try:
        assert main(["pod", "run", "-o", "json", str(f), *cli_env]) == 0
        pid = json.loads(capsys.readouterr().out)["pid"]
        assert Path(f"/proc/{pid}/comm").read_text() == "catatonit\n"
        assert [i.name for i in ImageStore(tmp_path / "root").list()] == [BUILTIN_PAUSE_IMAGE]
        assert main(["pod", "rm", "pk-pod-cli", *cli_env]) == 0
        assert main(["pod", "run", "--no-pause", str(f), *cli_env]) == 0
        assert main(["pod", "exec", *cli_env, "pk-pod-cli", "web", "--", "hostname"]) == 0
        assert capsys.readouterr().out.endswith("pk-pod-cli\n")
        assert main(["pod", "rm", "pk-pod-cli", *cli_env]) == 0
    finally:
        main(["pod", "rm", "pk-pod-cli", *cli_env])
        subprocess.run(["ip", "link", "del", "pk0"], check=False, capture_output=True)
    assert leaked(before) == []
