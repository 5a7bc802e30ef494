"""The watchdogs can fail: a call past its deadline fails the test, even one stuck inside the C regex engine."""

from __future__ import annotations

import re
import time

import pytest

from tests.hostile.watchdog import Hung, finishes_within, watchdog


def test_a_call_past_the_deadline_fails() -> None:
    started = time.monotonic()
    with pytest.raises(Hung):
        finishes_within(0.5, time.sleep, 30)
    assert time.monotonic() - started < 10


def test_a_backtracking_regex_is_stopped_where_a_signal_cannot_reach() -> None:
    catastrophic = re.compile(r"(a+)+$")  # 2^40 ways to fail on this text: never returns in C
    with pytest.raises(Hung):
        finishes_within(1.0, catastrophic.search, "a" * 40 + "b")


def test_the_child_s_error_fails_the_test_and_a_quick_call_passes() -> None:
    finishes_within(10.0, len, "fine")
    with pytest.raises(AssertionError, match="ValueError: bad"):
        finishes_within(10.0, _raise, "bad")


def test_the_signal_watchdog_stops_python_code() -> None:
    with pytest.raises(Hung), watchdog(1):
        while True:
            time.sleep(0.01)


def _raise(message: str) -> None:
    raise ValueError(message)
