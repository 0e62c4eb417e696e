#!/usr/bin/env python3
"""Build the HTML API reference from podkit's docstrings with pdoc (``make docs``).

One page per package face (``podkit.oci``, ``podkit.sandbox``, ...: the public modules directly
under ``src/podkit``, their ``__all__`` and docstrings); private modules, the pods internals
behind ``podkit.sandbox``/``podkit.container`` and the generated CRI protobuf modules are left
out. Strict: any warning pdoc gives (an annotation it cannot resolve, a module it cannot import)
fails the build, so the reference cannot rot quietly. docs/reference.md says why pdoc.

    python scripts/api_docs.py [--out build/docs]
"""

from __future__ import annotations

import argparse
import shutil
import sys
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# pdoc's module specs: the package, then ``!regex`` exclusions matched against module names.
MODULES = ("podkit", r"!podkit\._", r"!podkit\.pods", r"!podkit\.cri\.api_pb2")


def build(out: Path) -> list[str]:
    """Write the reference into ``out`` (emptied first); the warnings pdoc gave, one per line."""
    import pdoc
    import pdoc.render

    from podkit.cli import _version

    if out.exists():
        shutil.rmtree(out)
    pdoc.render.configure(docformat="restructuredtext", footer_text=f"podkit {_version()}",
                          show_source=False)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        pdoc.pdoc(*MODULES, output_directory=out)
    return [f"{w.category.__name__}: {w.message}" for w in caught]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "build" / "docs",
                        help="output directory (default: build/docs)")
    args = parser.parse_args(argv)
    problems = build(args.out)
    for line in problems:
        print(line, file=sys.stderr)
    if problems:
        print(f"api docs: {len(problems)} warning(s) from pdoc: failing (strict)", file=sys.stderr)
        return 1
    print(f"api docs: {args.out / 'index.html'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
