"""Parsers of runc/crun output (state, list, ps, ps table, events/stats, version), recorded."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest

from podkit.errors import InvalidArgumentError
from podkit.runtime import runc as rc
from podkit.runtime.base import ExitStatus, RuntimeState, parse_timestamp, signal_number
from podkit.runtime.errors import OCIRuntimeError

DATA = Path(__file__).parent / "data"


def read(name: str) -> str:
    return (DATA / name).read_text()


@pytest.mark.parametrize("rt", ["runc", "crun"])
@pytest.mark.parametrize("status", ["created", "running", "paused", "stopped"])
def test_state_both_shapes(rt: str, status: str) -> None:
    st = rc.parse_state(read(f"{rt}-state-{status}.json"))
    assert st.id == f"pk-rt-rec-{rt}"
    assert st.status == status
    assert st.bundle.startswith("/tmp/pk-rt-rec.")
    assert st.created is not None and st.created.tzinfo is not None
    if status == "stopped":
        assert st.pid == 0
    else:
        assert st.pid > 0
    if rt == "runc":
        assert st.rootfs.endswith("/rootfs") and st.rootfs.startswith("/")
        assert st.oci_version == "1.0.2-dev"
    else:
        assert st.rootfs == "rootfs"  # crun reports the raw config value
        assert st.extra == {"systemd-scope": ""}
        assert st.owner == "root"


def test_timestamps_ns_and_us() -> None:
    runc_ts = parse_timestamp("2026-12-02T10:09:20.687110362Z")
    crun_ts = parse_timestamp("2026-12-02T10:09:21.193155Z")
    assert runc_ts == dt.datetime(2026, 12, 2, 10, 9, 20, 687110, tzinfo=dt.UTC)
    assert crun_ts == dt.datetime(2026, 12, 2, 10, 9, 21, 193155, tzinfo=dt.UTC)
    assert parse_timestamp("2026-12-02T10:09:20Z") == dt.datetime(
        2026, 12, 2, 10, 9, 20, tzinfo=dt.UTC
    )
    assert parse_timestamp("") is None
    assert parse_timestamp("garbage") is None


@pytest.mark.parametrize("rt", ["runc", "crun"])
def test_list_empty_null_and_brackets(rt: str) -> None:
    assert rc.parse_list(read(f"{rt}-list-empty.json")) == []


def test_list_empty_text_is_raw_null() -> None:
    assert read("runc-list-empty.json").strip() == "null"
    assert rc.parse_list("") == []


@pytest.mark.parametrize("rt", ["runc", "crun"])
def test_list_shapes(rt: str) -> None:
    (st,) = rc.parse_list(read(f"{rt}-list.json"))
    assert st.id == f"pk-rt-rec-{rt}"
    assert st.status == "running"
    assert st.pid > 0
    assert st.rootfs == ("" if rt == "crun" else st.rootfs)


def test_list_not_array() -> None:
    with pytest.raises(OCIRuntimeError, match="not a JSON array"):
        rc.parse_list('{"id": "x"}')


def test_state_garbage() -> None:
    with pytest.raises(OCIRuntimeError, match="cannot parse state"):
        rc.parse_state("not json")
    with pytest.raises(InvalidArgumentError, match="pid must be an integer"):
        RuntimeState.from_dict({"id": "a", "status": "running", "pid": "1"})
    with pytest.raises(InvalidArgumentError, match="'id'"):
        RuntimeState.from_dict({"status": "running"})


@pytest.mark.parametrize("rt", ["runc", "crun"])
def test_ps_json(rt: str) -> None:
    pids = rc.parse_ps(read(f"{rt}-ps.json"))
    assert len(pids) == 1 and pids[0] > 0


def test_ps_null_and_bad() -> None:
    assert rc.parse_ps("null") == []
    with pytest.raises(OCIRuntimeError, match="array of PIDs"):
        rc.parse_ps('["1"]')


def test_top_runc_table() -> None:
    top = rc.parse_top(read("runc-ps-table.txt"))
    assert top.headers == ["UID", "PID", "PPID", "C", "STIME", "TTY", "TIME", "CMD"]
    (row,) = top.processes
    assert row[0] == "root" and row[-1] == "sleep 3600"


def test_top_crun_table_has_only_pids() -> None:
    top = rc.parse_top(read("crun-ps-table.txt"))
    assert top.headers == ["PID"]
    assert len(top.processes) == 1


def test_top_skips_dash_pid_rows() -> None:
    top = rc.parse_top("UID PID CMD\nroot - thread\nroot 5 sh -c x\n")
    assert top.processes == [["root", "5", "sh -c x"]]


def test_stats_event() -> None:
    ev = rc.parse_event(read("runc-stats.json").strip())
    assert ev.type == "stats" and ev.id == "pk-rt-rec-runc"
    assert ev.stats is not None
    s = ev.stats
    assert s.cpu.total > 0 and len(s.cpu.percpu) == 2
    assert s.memory.usage.usage > 0 and s.memory.usage.limit > 0
    assert s.pids_current == 1
    assert "cpuset" in s.raw and "intel_rdt" in s.raw  # unmodelled sections kept


def test_oom_event() -> None:
    ev = rc.parse_event('{"type":"oom","id":"pkoom"}')
    assert ev.type == "oom" and ev.id == "pkoom" and ev.stats is None


@pytest.mark.parametrize(
    ("rt", "version", "spec"), [("runc", "1.1.5+ds1", "1.0.2-dev"), ("crun", "1.8.1", "1.0.0")]
)
def test_version(rt: str, version: str, spec: str) -> None:
    v = rc.parse_version(read(f"{rt}-version.txt"))
    assert (v.name, v.version, v.spec) == (rt, version, spec)
    assert v.commit


def test_version_garbage() -> None:
    with pytest.raises(OCIRuntimeError, match="cannot parse runtime version"):
        rc.parse_version("hello\n")


def test_features_runc_recorded() -> None:
    from podkit import oci

    f = oci.Features.from_json(read("runc-features.json"))
    assert f.oci_version_max == "1.0.2-dev"
    assert f.hooks is not None and "createRuntime" in f.hooks


def test_exit_status_from_wait_status() -> None:
    assert ExitStatus.from_wait_status(3 << 8).exit_code == 3
    killed = ExitStatus.from_wait_status(9)
    assert (killed.exit_code, killed.signal, killed.signal_name) == (137, 9, "SIGKILL")
    assert ExitStatus.from_wait_status(0).signal is None


def test_signal_numbers() -> None:
    import signal

    assert signal_number("KILL") == 9
    assert signal_number("SIGTERM") == 15
    assert signal_number("9") == signal_number(9) == 9
    assert signal_number(" sigrtmin+3 ") == signal.SIGRTMIN + 3
    assert signal_number("SIGRTMAX-2") == signal.SIGRTMAX - 2
    for bad in ("NOPE", "SIGRTMIN+x", ""):
        with pytest.raises(InvalidArgumentError, match="unknown signal"):
            signal_number(bad)
