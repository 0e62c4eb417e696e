"""Every example of README.md and docs/*.md runs as printed (issue 15), against the real parts.

Each page runs once, in ``tests/docs/runner.py``: its own net, mount and PID namespaces, the
fixtures its examples name made at the printed paths (``tests/docs/fixtures.py``, one list),
the blocks in page order in one interpreter. Each block is a test id (``README.md#3``: the third
fenced block of README.md).

The convention (``tests/docs/blocks.py``; docs/architecture.md, "Docs examples"): every
```python block runs; a ```sh or ```console block runs when it starts a ``podkit`` command (a
console block's other lines are output it must print); a block that cannot run has
``<!-- not run: <reason> -->`` as the last line before its fence. What a block expects to
exist is a row of ``tests/docs/fixtures.py``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from functools import cache
from pathlib import Path

import pytest

from docs.blocks import REPO, Block, all_blocks
from docs.runner import RESULTS
from support import require_binary, require_isolated, require_root

pytestmark = pytest.mark.integration

RUN = [b for b in all_blocks() if b.runs]
PAGE_TIMEOUT = 240


@cache
def run_page(page: str, block_timeout: int = 0) -> tuple[dict[str, str | None], str]:
    """Run every runnable block of ``page``; ({block id: error or None}, the runner's output)."""
    env = dict(os.environ, PODKIT_DOCS_BLOCK_TIMEOUT=str(block_timeout)) if block_timeout else None
    cmd = ["unshare", "--net", "--mount", "--pid", "--fork", "--kill-child", "--mount-proc",
           "--propagation", "private", "--", sys.executable, str(REPO / "tests/docs/runner.py"),
           page]
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=PAGE_TIMEOUT,
                             stdin=subprocess.DEVNULL, env=env)
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
    ends = [i for i in (output.find("\n=== ", start + 1), output.find("\n" + RESULTS, start))
            if i > 0]
    return output[start:min(ends) if ends else None][-4000:]


PAGES = sorted({b.page for b in RUN})


@pytest.mark.parametrize("page", PAGES)
def test_page_leaves_no_cgroup(page: str) -> None:
    """The containers a page's examples started are gone with their cgroups (the runner
    force-deletes what the examples leave; a cgroup that survives that is a leak)."""
    require_root()
    require_isolated()
    results, output = run_page(page)
    if results.get(page + "#cleanup"):
        pytest.fail(f"{page}: {results[page + '#cleanup']}\n{output[-3000:]}", pytrace=False)


def test_runnable_blocks_exist() -> None:
    assert len(RUN) >= 15, [b.id for b in RUN]


def test_not_run_blocks_give_a_reason() -> None:
    assert [b.id for b in all_blocks() if b.not_run is not None and not b.not_run] == []


@pytest.mark.parametrize("block", RUN, ids=[b.id for b in RUN])
def test_example_runs(block: Block) -> None:
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


FAILING_PAGE = """# A page whose second and fourth examples are wrong

```python
x = 41
```

```python
raise ValueError(f"boom {x}")
```

```python
print(x + 1)
```

```console
$ podkit --help >/dev/null; echo printed
printed
$ echo other
not printed
```

```sh
podkit no-such-command
```

```python
import time
time.sleep(3600)
```

```python
print("after the stuck one")
```
"""


def test_a_failing_example_is_reported_with_its_id_and_later_ones_still_run(
        tmp_path: Path) -> None:
    """The runner's own check: each wrong block fails under its id, naming the line or the
    output it lacked, a stuck one after its time limit; a good block after a bad one still
    passes."""
    require_root()
    require_isolated()
    require_binary("unshare")
    page = tmp_path / "p.md"
    page.write_text(FAILING_PAGE)
    results, output = run_page(str(page), block_timeout=15)
    name = str(page)
    assert results[f"{name}#1"] is None and results[f"{name}#3"] is None, output
    assert f'File "<{name}#2>", line 1' in results[f"{name}#2"]
    assert "ValueError: boom 41" in results[f"{name}#2"]
    assert "did not print ['not printed']" in results[f"{name}#4"]
    assert "exit status 2" in results[f"{name}#5"]
    assert _block_output(output, f"{name}#3").splitlines()[1:] == ["42"]
    assert "TimeoutError: the block ran longer than 15 s" in results[f"{name}#6"]
    assert results[f"{name}#7"] is None
