"""docs/api-snapshot.txt is the public API as the code has it (issue 23): regenerated here and
compared, so a change to a public name or signature fails until the snapshot is refreshed in
the same change, where review sees it as a diff."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from api_surface import REPO, SCRIPT, snapshot_script

pytest.importorskip("grpc")  # podkit.cri.api_pb2_grpc is public: the grpc extra is needed

script = snapshot_script()


def test_the_snapshot_is_up_to_date() -> None:
    stored = script.SNAPSHOT.read_text() if script.SNAPSHOT.exists() else ""
    fresh = script.snapshot()
    if stored != fresh:
        pytest.fail("the public API differs from docs/api-snapshot.txt:\n"
                    f"{script.diff(stored, fresh)}\nIf the change is meant, refresh it with: "
                    f"{script.REFRESH}, and add a CHANGELOG line.", pytrace=False)


def test_the_snapshot_does_not_depend_on_the_process() -> None:
    """Another hash seed, another working directory, the extras imported first and in another
    order, every attrs class's types resolved (as cattrs or a test may do): the same text (set
    reprs, lazy names, import order and resolved annotations cannot leak into it)."""
    code = ("import grpc, yaml, jsonschema, podkit.cri.streaming, podkit.kube, podkit.cri\n"
            "import contextlib, importlib, importlib.util, inspect, sys, attrs\n"
            f"spec = importlib.util.spec_from_file_location('snap', {str(SCRIPT)!r})\n"
            "mod = importlib.util.module_from_spec(spec); spec.loader.exec_module(mod)\n"
            "for m in mod.public_modules():\n"
            "    pub = importlib.import_module(m)\n"
            "    for v in (getattr(pub, n) for n in mod._exported(pub)):\n"
            "        if inspect.isclass(v) and attrs.has(v):\n"
            "            with contextlib.suppress(Exception):\n"
            "                attrs.resolve_types(v)\n"
            "sys.stdout.write(mod.snapshot())\n")
    env = {**os.environ, "PYTHONHASHSEED": "12345"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, cwd="/", env=env).stdout
    assert out == script.snapshot()


def test_the_snapshot_names_no_memory_address_or_checkout_path() -> None:
    text = script.snapshot()
    assert " at 0x" not in text
    assert str(REPO) not in text


def test_a_changed_signature_is_a_diff() -> None:
    before = script.snapshot(["podkit.errors"])
    after = before.replace("class NotFoundError", "class NotFound")
    out = script.diff(before, after)
    assert "-class NotFoundError" in out and "+class NotFound" in out
