"""The examples in the README and docs/: the Python ones parse and every podkit name they import
or use through an imported podkit module exists, so a rename cannot silently break the guide;
the rules of which blocks tests/test_docs_run.py runs (tests/docs/blocks.py) hold, and the
fixture list names blocks that exist and run."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

from docs.blocks import Block, all_blocks, page_blocks
from docs.fixtures import FIXTURES, for_page

ALL = all_blocks()
BLOCKS = [(b.id, b.code) for b in ALL if b.lang == "python"]


def _podkit_references(tree: ast.Module) -> list[tuple[str, str]]:
    """(module, attribute) pairs the example relies on: imported names and ``mod.attr`` uses."""
    refs: list[tuple[str, str]] = []
    aliases: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("podkit"):
            for a in node.names:
                refs.append((node.module, a.name))
                aliases[a.asname or a.name] = f"{node.module}.{a.name}"
        elif isinstance(node, ast.Import):
            for a in node.names:
                if a.name.startswith("podkit"):
                    aliases[a.asname or a.name.split(".")[0]] = (
                        a.name if a.asname else a.name.split(".")[0])
    for node in ast.walk(tree):
        if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
                and node.value.id in aliases):
            refs.append((aliases[node.value.id], node.attr))
    return refs


def test_the_guide_has_examples() -> None:
    assert len(BLOCKS) >= 20


@pytest.mark.parametrize(("where", "code"), BLOCKS, ids=[b[0] for b in BLOCKS])
def test_example_names_exist(where: str, code: str) -> None:
    tree = ast.parse(code, filename=where)
    missing = []
    for module, attr in _podkit_references(tree):
        try:
            target = importlib.import_module(module)
        except ModuleNotFoundError:  # ``from podkit import oci`` style: module is a package attr
            parent, _, child = module.rpartition(".")
            target = getattr(importlib.import_module(parent), child, None)
        if target is None or not hasattr(target, attr):
            try:
                importlib.import_module(f"{module}.{attr}")
            except ModuleNotFoundError:
                missing.append(f"{module}.{attr}")
    assert missing == [], f"{where} uses names podkit does not have: {missing}"


def _page(tmp_path: Path, text: str) -> list[Block]:
    (tmp_path / "docs").mkdir()
    page = tmp_path / "docs" / "p.md"
    page.write_text(text)
    import docs.blocks as blocks
    real = blocks.REPO
    blocks.REPO = tmp_path
    try:
        return page_blocks(page)
    finally:
        blocks.REPO = real


SAMPLE = """# Page

```python
print(1)
```

<!-- not run: serves until killed -->

```python
serve()
```

```sh
make demo   # runs a podkit-generated spec
```

```sh
export X=1
podkit pod ls
```

```console
$ podkit cdi list
vendor.com/gpu=0
...
$ echo done   # a comment
```

```
plain text
```
"""


def test_blocks_are_numbered_per_page_in_order(tmp_path: Path) -> None:
    blocks = _page(tmp_path, SAMPLE)
    assert [(b.id, b.lang) for b in blocks] == [
        ("docs/p.md#1", "python"), ("docs/p.md#2", "python"), ("docs/p.md#3", "sh"),
        ("docs/p.md#4", "sh"), ("docs/p.md#5", "console"), ("docs/p.md#6", "")]
    assert [b.line for b in blocks][:2] == [3, 9]


def test_which_blocks_run(tmp_path: Path) -> None:
    blocks = _page(tmp_path, SAMPLE)
    assert [b.runs for b in blocks] == [True, False, False, True, True, False]
    assert blocks[1].not_run == "serves until killed"
    # a word "podkit" in a comment is not a podkit command
    assert blocks[2].not_run is None and not blocks[2].runs


def test_console_blocks_run_their_prompts_only(tmp_path: Path) -> None:
    blocks = _page(tmp_path, SAMPLE)
    assert blocks[4].shell_script() == "podkit cdi list\necho done   # a comment\n"
    assert blocks[3].shell_script() == "export X=1\npodkit pod ls\n"
    assert blocks[4].expected_output() == ["vendor.com/gpu=0"]
    assert blocks[3].expected_output() == []


def test_a_not_run_marker_must_be_the_line_before_the_fence(tmp_path: Path) -> None:
    text = "<!-- not run: far away -->\n\nSome prose.\n\n```python\nx = 1\n```\n"
    [block] = _page(tmp_path, text)
    assert block.not_run is None and block.runs


def test_every_block_not_run_says_why() -> None:
    assert [b.id for b in ALL if b.not_run is not None and not b.not_run.strip()] == []


def test_fixtures_name_blocks_that_run() -> None:
    """A stale block number in tests/docs/fixtures.py fails here, not as a missing file later."""
    by_id = {b.id: b for b in ALL}
    stale = [(f.name, bid) for f in FIXTURES for bid in f.needed_by
             if bid not in by_id or not by_id[bid].runs]
    assert stale == []


def test_fixtures_are_made_only_for_the_pages_that_name_them() -> None:
    assert [f.name for f in for_page("docs/netns.md")] == []
    assert [f.name for f in for_page("docs/cni.md")] == ["netns /run/netns/abc"]
    assert "CNI list /etc/cni/net.d/10-pk-bridge.conflist (docs/cni.md#1)" in [
        f.name for f in for_page("README.md")]


def test_an_example_script_is_one_block_that_runs_as_a_file(tmp_path: Path) -> None:
    import docs.blocks as blocks
    (tmp_path / "docs" / "ci").mkdir(parents=True)
    script = tmp_path / "docs" / "ci" / "job.sh"
    script.write_text("#!/bin/sh\nset -eu\npodkit pod ls\n")
    (tmp_path / "docs" / "ci" / "README.md").write_text("# ci\n\n```sh\nsh job.sh\n```\n")
    real = blocks.REPO
    blocks.REPO = tmp_path
    try:
        assert blocks.pages()[-2:] == [tmp_path / "docs/ci/README.md", script]
        [block] = page_blocks(script)
        [readme] = page_blocks(tmp_path / "docs" / "ci" / "README.md")
    finally:
        blocks.REPO = real
    assert (block.id, block.lang, block.script, block.runs) == ("docs/ci/job.sh#1", "sh", True,
                                                                True)
    assert block.shell_script() == script.read_text()
    assert not readme.runs and not readme.script


def test_the_ci_example_is_a_page_that_runs() -> None:
    assert [b.id for b in ALL if b.script] == ["docs/ci/ci.sh#1"]
    assert all(b.runs for b in ALL if b.script)
