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
    assert ran == ["podkit-alongside"]


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
