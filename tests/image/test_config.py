"""Image config parsing and Docker/CRI semantics of ``spec_opts``."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from podkit import oci
from podkit.image import ImageConfig, ImageError, parse_config, process_args, spec_opts


def _config(**cfg: object) -> bytes:
    return json.dumps({"os": "linux", "architecture": "amd64", "config": cfg}).encode()


def test_parse_full_config() -> None:
    cfg = parse_config(_config(
        Env=["A=1"], Entrypoint=["/bin/sh", "-c"], Cmd=["echo hi"], WorkingDir="/w",
        User="1000:1000", ExposedPorts={"80/tcp": {}, "53/udp": {}}, Volumes={"/data": {}},
        Labels={"k": "v"}, StopSignal="SIGQUIT"), "test")
    assert cfg == ImageConfig(
        env=("A=1",), entrypoint=("/bin/sh", "-c"), cmd=("echo hi",), working_dir="/w",
        user="1000:1000", exposed_ports=("53/udp", "80/tcp"), volumes=("/data",),
        labels={"k": "v"}, stop_signal="SIGQUIT", os="linux", architecture="amd64")


def test_parse_empty_config_and_errors() -> None:
    assert parse_config(b'{"architecture":"arm64","os":"linux"}', "x").entrypoint is None
    with pytest.raises(ImageError, match=r"cfgblob: config.Env must be a list"):
        parse_config(_config(Env="A=1"), "cfgblob")
    with pytest.raises(ImageError, match=r"cfgblob: image config is not valid JSON"):
        parse_config(b"{", "cfgblob")
    with pytest.raises(ImageError, match=r"config.User must be a string"):
        parse_config(_config(User=5), "cfgblob")


IMG = ImageConfig(entrypoint=("/ep",), cmd=("c1", "c2"))


@pytest.mark.parametrize(
    ("config", "command", "args", "argv"),
    [
        (IMG, None, None, ["/ep", "c1", "c2"]),
        (IMG, None, ["a"], ["/ep", "a"]),
        (IMG, ["/bin/x"], None, ["/bin/x"]),
        (IMG, ["/bin/x"], ["y"], ["/bin/x", "y"]),
        (IMG, [], None, ["/ep", "c1", "c2"]),
        (ImageConfig(cmd=("sh",)), None, None, ["sh"]),
        (ImageConfig(entrypoint=("",), cmd=("sh",)), None, None, ["sh"]),
        (ImageConfig(entrypoint=("/ep",)), None, None, ["/ep"]),
    ],
)
def test_process_args_cri_semantics(config: ImageConfig, command: list[str] | None,
                                    args: list[str] | None, argv: list[str]) -> None:
    assert process_args(config, command, args) == argv


def test_no_command_specified() -> None:
    with pytest.raises(ImageError, match=r"no command specified"):
        process_args(ImageConfig())
    with pytest.raises(ImageError, match=r"no command specified"):
        spec_opts(ImageConfig(env=("A=1",)))


def test_spec_opts_env_args_cwd_user(busybox_rootfs: Path, tmp_path: Path) -> None:
    root = tmp_path / "rootfs"
    shutil.copytree(busybox_rootfs, root, symlinks=True)
    cfg = ImageConfig(env=("PATH=/custom", "A=1", "A=2"), cmd=("sh",), working_dir="/srv",
                      user="app")
    spec = oci.generate(oci.default_spec(), *spec_opts(cfg, args=["-c", "true"], rootfs=root))
    assert spec.process is not None and spec.process.user is not None
    assert spec.process.args == ["-c", "true"]
    assert spec.process.cwd == "/srv"
    env = spec.process.env or []
    assert "PATH=/custom" in env and "A=2" in env and "A=1" not in env
    assert len([e for e in env if e.startswith("PATH=")]) == 1
    assert (spec.process.user.uid, spec.process.user.gid) == (1000, 1000)
    assert sorted(spec.process.user.additional_gids or []) == [10, 1000, 2000]


def test_spec_opts_numeric_user_without_rootfs() -> None:
    cfg = ImageConfig(cmd=("true",), user="123:456")
    spec = oci.generate(oci.default_spec(), *spec_opts(cfg))
    assert spec.process is not None and spec.process.user is not None
    assert (spec.process.user.uid, spec.process.user.gid) == (123, 456)
    assert spec.process.env is not None
    assert any(e.startswith("PATH=") for e in spec.process.env)


def test_spec_opts_unknown_user_names_it(busybox_rootfs: Path) -> None:
    cfg = ImageConfig(cmd=("true",), user="ghost")
    with pytest.raises(oci.SpecOptError, match=r"ghost"):
        oci.generate(oci.default_spec(), *spec_opts(cfg, rootfs=busybox_rootfs))
