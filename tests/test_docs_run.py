"""Every example of README.md and docs/*.md runs as printed (issue 15), against the real parts.

Each page runs once, in ``tests/docs/runner.py``: its own net, mount and PID namespaces, the
fixtures its examples name made at the printed paths (``tests/docs/fixtures.py``, one list),
the blocks in page order in one interpreter. Each block is a test id (``README.md#3``: the third
fenced block of README.md). Which blocks run, and how to mark one that cannot, is the convention
in ``tests/docs/blocks.py`` (and docs/architecture.md, "Docs examples").
"""

from __future__ import annotations

import json
import subprocess
import sys
from functools import cache

import pytest

from docs.blocks import REPO, all_blocks
from docs.runner import RESULTS
from support import require_binary, require_isolated, require_root

pytestmark = pytest.mark.integration

RUN = [b for b in all_blocks() if b.runs]
PAGE_TIMEOUT = 240


@cache
def run_page(page: str) -> tuple[dict[str, str | None], str]:
    """Run every runnable block of ``page``; ({block id: error or None}, the runner's output)."""
    cmd = ["unshare", "--net", "--mount", "--pid", "--fork", "--kill-child", "--mount-proc",
           "--propagation", "private", "--", sys.executable, str(REPO / "tests/docs/runner.py"),
           page]
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=PAGE_TIMEOUT,
                             stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired as e:
        text = (e.stdout or b"").decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
        return {}, f"{page}: the runner did not finish in {PAGE_TIMEOUT} s\n{text[-6000:]}"
    lines = out.stdout.splitlines()
    if not lines or not lines[-1].startswith(RESULTS):
        return {}, f"{page}: the runner failed (exit {out.returncode})\n{out.stdout[-6000:]}" \
                   f"\n{out.stderr[-6000:]}"
    return json.loads(lines[-1][len(RESULTS):]), out.stdout + out.stderr


def _block_output(output: str, block_id: str) -> str:
    start = output.find(f"=== {block_id}\n")
    if start < 0:
        return output[-4000:]
    end = output.find("\n=== ", start + 1)
    return output[start:end if end > 0 else None][-4000:]


def test_runnable_blocks_exist() -> None:
    assert len(RUN) >= 15, [b.id for b in RUN]


def test_not_run_blocks_give_a_reason() -> None:
    assert [b.id for b in all_blocks() if b.not_run is not None and not b.not_run] == []


@pytest.mark.parametrize("block", RUN, ids=[b.id for b in RUN])
def test_example_runs(block) -> None:  # type: ignore[no-untyped-def]
    require_root()
    require_isolated()
    for binary in ("unshare", "runc", "crun", "conmon", "docker-registry", "mount", "ip"):
        require_binary(binary)
    results, output = run_page(block.page)
    if block.id not in results:
        pytest.fail(f"{block.id} was not run:\n{output}", pytrace=False)
    if results[block.id] is not None:
        pytest.fail(f"{block.id} (line {block.line}) failed:\n{results[block.id]}\n"
                    f"--- output ---\n{_block_output(output, block.id)}", pytrace=False)
