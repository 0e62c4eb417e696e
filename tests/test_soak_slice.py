"""The CI-sized slice of ``make soak`` (soak/): a kill matrix and a short server soak.

The kill matrix runs runc under conmon (the default), killing the managing process once at each
of the CI kill points of each pod operation (``soak.kill_matrix.CI_POINTS``), then recovering
in a new process: nothing may be left. The server soak holds 10 pods under a stream of
list/status calls for 20 s, then runs 30 pod cycles: open fds and threads stay flat, no call
fails, and nothing stays after every pod is removed and the server stopped.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from support import require_binary, require_isolated

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "soak"))

import kill_matrix
import server_soak

pytestmark = pytest.mark.integration


def _require() -> None:
    require_isolated()
    for binary in ("runc", "conmon", "/usr/lib/cni/bridge"):
        require_binary(binary)


def test_kill_matrix_runc_conmon_leaves_nothing_after_recover() -> None:
    _require()
    results = kill_matrix.run(["runc/conmon"], kill_matrix.OPS, trials=1, timed=0,
                              points_filter=kill_matrix.ci_points, log=lambda s: None)
    killed = [t for t in results if t.outcome != "missed"]
    # every operation's traced run, plus at least one kill per operation
    assert len(killed) >= 2 * len(kill_matrix.OPS)
    assert {t.op for t in killed if t.point.endswith(("before", "after"))} == set(
        kill_matrix.OPS)
    bad = [f"{t.op} at {t.point} ({t.outcome}): {'; '.join(t.leftovers) or t.detail}"
           for t in results if t.outcome not in ("held", "missed")]
    assert bad == []


def test_server_soak_fds_flat_and_nothing_left() -> None:
    _require()
    r = server_soak.soak(pods=10, hold=20.0, cycles=30, interval=1.0, log=lambda s: None)
    assert r.cycles == 30
    assert r.failed == []
    assert r.problems == [], server_soak.report(r)
    assert r.leftovers == []
