"""The census behind the private-files guarantee (``_exposure``) finds what it must."""

from __future__ import annotations

import os
from pathlib import Path

from _exposure import exposures

SECRET = "pk-secret-census"


def _tree(top: Path, modes: dict[str, int], files: dict[str, tuple[str, int]]) -> None:
    for rel, mode in modes.items():
        (top / rel).mkdir(parents=True, exist_ok=True)
        os.chmod(top / rel, mode)
    for rel, (text, mode) in files.items():
        (top / rel).write_text(text)
        os.chmod(top / rel, mode)


def test_a_private_bundle_under_passable_roots_is_fine(tmp_path: Path) -> None:
    _tree(tmp_path, {"root": 0o711, "root/containers": 0o711, "root/containers/c": 0o700,
                     "root/containers/c/bundle": 0o700, "logs": 0o755},
          {"root/containers/c/bundle/config.json": (SECRET, 0o600),
           "logs/0.log": (SECRET, 0o640), "logs/other": ("nothing", 0o644)})
    assert exposures([tmp_path], SECRET) == []


def test_a_readable_file_that_others_reach_is_found(tmp_path: Path) -> None:
    _tree(tmp_path, {"a": 0o755, "a/b": 0o711, "hidden": 0o700},
          {"a/b/env": (f"X={SECRET}", 0o644), "hidden/env": (SECRET, 0o644)})
    found = exposures([tmp_path], SECRET)
    assert found == [f"file {tmp_path}/a/b/env (0644) holds the secret and others can read it"]


def test_every_open_dir_above_a_bundle_is_found(tmp_path: Path) -> None:
    _tree(tmp_path, {"root": 0o755, "root/containers": 0o711, "root/containers/c": 0o711,
                     "root/containers/c/bundle": 0o700},
          {"root/containers/c/bundle/config.json": ("{}", 0o600)})
    found = exposures([tmp_path], SECRET)
    assert [f.split(" ")[1] for f in found] == [
        f"{tmp_path}/root", f"{tmp_path}/root/containers/c"]
