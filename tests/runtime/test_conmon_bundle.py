"""Conmon.create handed a Bundle: its spec is the one checked (config.json is not read again);
a directory is still read; a Bundle without config.json is refused before conmon runs."""

from __future__ import annotations

from typing import Any

import pytest

from podkit.errors import InvalidArgumentError
from podkit.runtime import Bundle, conmon
from podkit.runtime.resource_check import UnavailableResourceError

from ._conmon_env import Env, conmon_pids_for

pytestmark = pytest.mark.integration


def _checked(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    seen: list[Any] = []
    real = conmon.check_bundle_resources

    def check(spec: Any) -> None:
        seen.append(spec)
        real(spec)

    monkeypatch.setattr(conmon, "check_bundle_resources", check)
    return seen


def test_a_bundle_object_is_checked_from_its_spec(env: Env,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    cid = env.new_id("obj")
    built = Bundle.load(env.bundle(cid, ["sleep", "30"]))
    seen = _checked(monkeypatch)
    with monkeypatch.context() as mp:  # only for the create (crun's delete reads the bundle)
        mp.setattr(Bundle, "load", classmethod(lambda cls, d: pytest.fail("read again")))
        record = env.conmon.run(cid, built)
    assert seen == [built.spec]
    assert record.pid > 0 and env.runc.state(cid).status == "running"
    env.conmon.delete(cid, force=True)


def test_a_directory_is_read_and_checked(env: Env, monkeypatch: pytest.MonkeyPatch) -> None:
    cid = env.new_id("dir")
    path = env.bundle(cid, ["sleep", "30"])
    seen = _checked(monkeypatch)
    env.conmon.run(cid, path)
    assert [str(s) for s in seen] == [str(path.absolute())]
    env.conmon.delete(cid, force=True)


def test_a_refused_bundle_spec_starts_nothing(env: Env, monkeypatch: pytest.MonkeyPatch) -> None:
    cid = env.new_id("refused")
    built = Bundle.load(env.bundle(cid, ["sleep", "30"]))

    def refuse(spec: Any) -> None:
        raise UnavailableResourceError("no such controller here", [])

    monkeypatch.setattr(conmon, "check_bundle_resources", refuse)
    with pytest.raises(UnavailableResourceError, match="no such controller"):
        env.conmon.create(cid, built)
    assert not env.conmon.container_dir(cid).exists()
    assert conmon_pids_for(cid) == []


def test_a_bundle_without_config_is_refused(env: Env) -> None:
    cid = env.new_id("noconf")
    built = Bundle.load(env.bundle(cid, ["true"]))
    (built.path / "config.json").unlink()
    with pytest.raises(InvalidArgumentError, match=r"no config\.json"):
        env.conmon.create(cid, built)
    assert not env.conmon.container_dir(cid).exists()
