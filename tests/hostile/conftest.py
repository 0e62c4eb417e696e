"""The hostile-input corpus: layer tars, CRI requests, registry answers (issue 11).

Each probe is one parametrized case (``pytest tests/hostile -q -rA`` lists them); at the end
a table says per part how many probes were tried and how many held. The CRI part reuses the
server harness of tests/cri, the registry part the fake registry of tests/image.
"""

from __future__ import annotations

from collections import Counter

import pytest

from cri.fixtures import bridge, harness, image_layouts  # noqa: F401

_tried: Counter[str] = Counter()
_held: Counter[str] = Counter()
_failed: dict[str, list[str]] = {}


def _part(nodeid: str) -> str | None:
    """``layers`` for ``tests/hostile/test_layers.py::...``; None outside the corpus."""
    path = nodeid.split("::", 1)[0]
    if "hostile/test_" not in path:
        return None
    return path.rsplit("/test_", 1)[1].removesuffix(".py")


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    part = _part(report.nodeid)
    if part is None or report.skipped:
        return
    if report.when == "call":
        _tried[part] += 1
        if report.passed:
            _held[part] += 1
        else:
            _failed.setdefault(part, []).append(report.nodeid.rsplit("[", 1)[-1].rstrip("]"))


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if not _tried:
        return
    write = terminalreporter.write_line
    terminalreporter.section("hostile input corpus")
    write(f"{'part':<10} {'tried':>6} {'held':>6}")
    for part in sorted(_tried):
        write(f"{part:<10} {_tried[part]:>6} {_held[part]:>6}")
        for probe in _failed.get(part, []):
            write(f"    not held: {probe}")
