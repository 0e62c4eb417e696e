"""``podkit run`` / ``podkit ps`` with real runc and crun."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

import _leaks
from podkit.cli import main
from podkit.oci.defaults import runc_spec
from podkit.runtime import Runc
from podkit.runtime.monitor import is_subreaper, set_subreaper
from support import require_binary, require_isolated


@pytest.fixture(scope="module", autouse=True)
def _restore_subreaper() -> Iterator[None]:
    """Creating containers makes this process a subreaper; give that back afterwards."""
    was = is_subreaper()
    yield
    set_subreaper(was)


def write_config(tmp_path: Path, cid: str, *args: str, terminal: bool = False) -> Path:
    spec = runc_spec()
    assert spec.process is not None and spec.linux is not None
    spec.process.args = list(args)
    spec.process.terminal = terminal
    spec.linux.cgroups_path = f"/{cid}"
    path = tmp_path / "config.json"
    spec.dump(path)
    return path


def test_run_bad_source(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", str(tmp_path / "missing"), "--root", str(tmp_path)]) == 2
    assert "no such bundle directory or config file" in capsys.readouterr().err
    assert main(["run", str(tmp_path), "--root", str(tmp_path)]) == 2
    assert "no config.json" in capsys.readouterr().err


def test_run_refuses_terminal(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cfg = write_config(tmp_path, "pk-rt-cli-tty", "sh", terminal=True)
    assert main(["run", str(cfg), "--rootfs", str(tmp_path), "--root", str(tmp_path)]) == 2
    assert "--no-tty" in capsys.readouterr().err


def test_ps_empty_root(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["ps", "--root", str(tmp_path / "none"), "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == []
    assert main(["ps", "--state", str(tmp_path / "none"), "-o", "yaml"]) == 0
    assert capsys.readouterr().out == "[]\n"
    assert not (tmp_path / "none").exists()


def test_run_bad_id_leaves_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cfg = write_config(tmp_path, "pk-rt-cli-id", "true")
    state = tmp_path / "state"
    assert main(["run", str(cfg), "--rootfs", str(tmp_path), "--state", str(state),
                 "--id", "../x"]) == 2
    assert "'../x'" in capsys.readouterr().err
    assert not state.exists()


@pytest.mark.integration
@pytest.mark.parametrize("rt", ["runc", "crun"])
def test_run_and_ps(
    rt: str, tmp_path: Path, busybox_rootfs: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    require_isolated()
    require_binary(rt)
    state = tmp_path / "state"
    root = state / "runc"
    _leaks.register_runtime_root(root)
    cid = f"pk-rt-cli-{uuid.uuid4().hex[:8]}"
    cfg = write_config(tmp_path, cid, "sh", "-c", "echo hello-from-cli; exit 3")
    rc = main(["run", str(cfg), "--rootfs", str(busybox_rootfs), "--runtime", rt,
               "--state", str(state), "--id", cid])
    assert rc == 3
    assert "hello-from-cli" in capfd.readouterr().out
    cfg = write_config(tmp_path, cid, "sleep", "1000")
    info: dict[str, str] = {}
    try:
        assert main(["run", str(cfg), "--rootfs", str(busybox_rootfs), "--runtime", rt,
                     "--state", str(state), "--id", cid, "-d"]) == 0
        info = json.loads(capfd.readouterr().out)
        assert info["id"] == cid and info["pid"] > 0
        assert info["bundle"] == str(state / "run" / cid)  # under the state dir, not /tmp
        assert main(["ps", "--runtime", rt, "--state", str(state)]) == 0
        out = capfd.readouterr().out
        assert out.splitlines()[0].split() == ["ID", "PID", "STATUS", "CREATED", "BUNDLE"]
        assert cid in out and "running" in out
        assert main(["ps", "--runtime", rt, "--state", str(state), "-q"]) == 0
        assert capfd.readouterr().out == f"{cid}\n"
        assert main(["rm", "--runtime", rt, "--state", str(state), cid]) == 5  # running
        assert "podkit: " in capfd.readouterr().err
        assert main(["rm", "-f", "--runtime", rt, "--state", str(state), cid]) == 0
        assert not (state / "run" / cid).exists()
        assert main(["rm", "--runtime", rt, "--state", str(state), cid]) == 3  # not found
    finally:
        Runc(rt, root=root).delete(cid, force=True)
    assert Runc(rt, root=root).list() == []
    assert list((state / "run").iterdir()) == []


@pytest.mark.integration
def test_run_bundle_dir_without_rootfs_flag(
    tmp_path: Path, busybox_rootfs: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    require_isolated()
    require_binary("runc")
    state = tmp_path / "state"
    root = state / "runc"
    _leaks.register_runtime_root(root)
    cid = f"pk-rt-cli-{uuid.uuid4().hex[:8]}"
    bundle = tmp_path / "bundle"
    bundle.mkdir()
    spec = runc_spec()
    assert spec.process is not None and spec.linux is not None and spec.root is not None
    spec.process.args = ["sh", "-c", "echo from-bundle"]
    spec.process.terminal = True  # overridden by --no-tty
    spec.linux.cgroups_path = f"/{cid}"
    spec.root.path = str(busybox_rootfs)
    spec.dump(bundle / "config.json")
    before = (bundle / "config.json").read_bytes()
    assert main(["run", str(bundle), "--no-tty", "--state", str(state), "--id", cid]) == 0
    assert "from-bundle" in capfd.readouterr().out
    assert (bundle / "config.json").read_bytes() == before  # the user's bundle is untouched
    assert Runc("runc", root=root).list() == []


@pytest.mark.integration
@pytest.mark.parametrize("detach", [False, True])
def test_failing_run_leaves_nothing(
    detach: bool, tmp_path: Path, busybox_rootfs: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """A process the runtime cannot start: a one-line runtime error, no bundle in the state
    dir, nothing in /tmp (podkit run made /tmp/podkit-run-* bundles and kept them)."""
    require_isolated()
    require_binary("runc")
    state = tmp_path / "state"
    _leaks.register_runtime_root(state / "runc")
    tmp_before = set(Path("/tmp").glob("podkit-run-*"))
    cid = f"pk-rt-cli-{uuid.uuid4().hex[:8]}"
    cfg = write_config(tmp_path, cid, "/no/such/program")
    argv = ["run", str(cfg), "--rootfs", str(busybox_rootfs), "--state", str(state),
            "--id", cid, *(["-d"] if detach else [])]
    try:
        assert main(argv) == 8  # the runtime failed
        # runc's own stderr comes first (it inherits ours), then podkit's one line
        line = capfd.readouterr().err.splitlines()[-1]
        assert line.startswith("podkit: ") and "(command:" not in line
    finally:
        Runc("runc", root=state / "runc").delete(cid, force=True)
    assert list((state / "run").iterdir()) == []
    assert set(Path("/tmp").glob("podkit-run-*")) == tmp_before
