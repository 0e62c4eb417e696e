"""Alongside: one call on a helper thread, waited for and its error re-raised by the caller."""

from __future__ import annotations

import threading

import pytest

from podkit.runtime.alongside import Alongside


def test_the_call_runs_on_another_thread_once() -> None:
    ran: list[str] = []
    gate = threading.Event()

    def fn() -> None:
        gate.wait(5)
        ran.append(threading.current_thread().name)

    a = Alongside(fn)
    a.begin()
    a.begin()
    assert ran == []  # still waiting for the gate: begin() did not block
    gate.set()
    a.result()
    [name] = ran
    assert name.startswith("podkit-alongside") and name != threading.current_thread().name


def test_its_error_is_raised_by_result() -> None:
    def fn() -> None:
        raise KeyError("boom")

    a = Alongside(fn)
    a.begin()
    a.wait()  # waits without raising
    with pytest.raises(KeyError, match="boom"):
        a.result()


def test_a_call_never_begun_runs_in_result_and_not_in_wait() -> None:
    ran: list[str] = []
    a = Alongside(lambda: ran.append(threading.current_thread().name))
    a.wait()
    assert ran == []
    a.result()
    assert ran == [threading.current_thread().name]


def test_with_every_helper_busy_the_call_runs_in_result(monkeypatch: pytest.MonkeyPatch) -> None:
    from podkit.runtime import alongside

    gate = threading.Event()
    busy = [Alongside(lambda: gate.wait(5)) for _ in range(alongside.WORKERS)]
    for a in busy:
        a.begin()
    try:
        ran: list[str] = []
        extra = Alongside(lambda: ran.append(threading.current_thread().name))
        extra.begin()
        assert ran == []
        extra.result()
        assert ran == [threading.current_thread().name]
    finally:
        gate.set()
        for a in busy:
            a.result()
    again: list[str] = []
    later = Alongside(lambda: again.append(threading.current_thread().name))
    later.begin()
    later.result()
    assert again[0].startswith("podkit-alongside")  # the helpers are free again
