"""The fenced code blocks of README.md and docs/*.md, numbered per page as a reader counts them.

Convention (also in docs/architecture.md, "Docs examples"):

- Every fenced block of a page is numbered from 1 in page order, whatever its language: the
  block ``README.md#3`` is the third fenced block of README.md.
- A ```python block runs, unless the last non-blank line before its fence is
  ``<!-- not run: <reason> -->``.
- A ```sh or ```console block runs (in ``sh -e``) when it starts a ``podkit`` command, unless
  marked the same way. In a console block the ``$ `` lines are the commands and every other
  line is output that must appear in what they print (``...`` stands for lines left out).
- Blocks of one page run in order in one Python interpreter and one working directory, as a
  reader pastes them: a block may use what an earlier block of its page made.
- An example directory (``docs/ci/``) holds files a reader copies as they are: each of its
  ``*.sh`` scripts is a page of one block (``docs/ci/ci.sh#1``) that runs as a file, ``sh -e
  docs/ci/ci.sh`` from a copy of the checkout's ``docs/ci``, so it finds the files beside it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
_FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.S | re.M)
_NOT_RUN = re.compile(r"^<!--\s*not run:\s*(.*?)\s*-->$")
_PODKIT_COMMAND = re.compile(r"(^|[;&|(]\s*|^\$ )podkit\s", re.M)
SHELL_LANGS = ("sh", "console")


@dataclass(frozen=True)
class Block:
    """One fenced block: where it is, its language and text, and why it is not run (if so)."""

    page: str          # "README.md", "docs/pods.md"
    number: int        # 1-based among the page's fenced blocks
    line: int          # line of the opening fence
    lang: str
    code: str
    not_run: str | None
    script: bool = False  # a whole example script (docs/ci/ci.sh), run as a file

    @property
    def id(self) -> str:
        return f"{self.page}#{self.number}"

    @property
    def runs(self) -> bool:
        """Whether the docs run test executes this block (see the module docstring)."""
        if self.not_run is not None:
            return False
        if self.lang == "python":
            return True
        return self.lang in SHELL_LANGS and bool(_PODKIT_COMMAND.search(self.code))

    def shell_script(self) -> str:
        """The commands of a sh/console block as ``sh -e`` runs them."""
        if self.lang == "sh":
            return self.code
        return "".join(line[2:] + "\n" for line in self.code.splitlines()
                       if line.startswith("$ "))

    def expected_output(self) -> list[str]:
        """The output lines a console block shows (whitespace runs as one space; a ``...`` line
        stands for output left out)."""
        if self.lang != "console":
            return []
        return [" ".join(line.split()) for line in self.code.splitlines()
                if line.strip() not in ("", "...") and not line.startswith("$ ")]


def pages() -> list[Path]:
    docs = REPO / "docs"
    return [REPO / "README.md", *sorted(docs.glob("*.md")), *sorted(docs.glob("*/*.md")),
            *sorted(docs.glob("*/*.sh"))]


def page_name(page: Path) -> str:
    """How test ids name a page: its path in the repository (else the path as given)."""
    return str(page.relative_to(REPO)) if page.is_relative_to(REPO) else str(page)


def page_blocks(page: Path) -> list[Block]:
    """The fenced blocks of one page, in order (an example script: the script)."""
    text = page.read_text()
    if page.suffix == ".sh":
        return [Block(page=page_name(page), number=1, line=1, lang="sh", code=text,
                      not_run=None, script=True)]
    found = []
    for number, m in enumerate(_FENCE.finditer(text), start=1):
        before = [ln.strip() for ln in text[:m.start()].splitlines() if ln.strip()]
        marker = _NOT_RUN.match(before[-1]) if before else None
        found.append(Block(page=page_name(page), number=number,
                           line=text[:m.start()].count("\n") + 1, lang=m.group(1),
                           code=m.group(2), not_run=marker.group(1) if marker else None))
    return found


def all_blocks() -> list[Block]:
    return [b for page in pages() for b in page_blocks(page)]


def find_block(page: str, contains: str) -> Block:
    """The first block of ``page`` whose text holds ``contains`` (fixtures made from examples)."""
    for b in page_blocks(REPO / page):
        if contains in b.code:
            return b
    raise LookupError(f"no block of {page} contains {contains!r}")
