"""Issue 30 item 7: parsing counts against the host's deadline and sees a bounded input. A watchdog
(not a timing assert) proves a parse that would never end comes back as a recorded parse error."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from nightowl.engine import parse_budget
from nightowl.engine.parse_budget import ParseBudgetExceeded, bounded_input, within
from nightowl.engine.runner import RunOptions, collect_on, parse_output


class _Endless:
    """A parser that never returns on its own (a hostile input's worst case)."""

    kind = "metrics"
    commands = (("printf", "x 1\\n"),)
    timeout = 0.5
    invasive = False

    @property
    def parse(self) -> Any:
        def spin(text: str) -> Any:
            while True:
                pass

        return spin

    @property
    def facts(self) -> Any:
        return lambda parsed: parsed


class _Echo(_Endless):
    @property
    def parse(self) -> Any:
        return lambda text: {"chars": len(text)}


def run_with_watchdog(target: Any, seconds: float = 30.0, hung: str = "the parse hung past its budget") -> Any:
    """Run ``target`` in a thread; fail saying ``hung`` (instead of hanging the suite) if it does not return."""
    box: dict[str, Any] = {}
    thread = threading.Thread(target=lambda: box.setdefault("value", target()), daemon=True)
    thread.start()
    thread.join(seconds)
    assert not thread.is_alive(), hung
    return box["value"]


def test_an_endless_parse_ends_as_a_recorded_parse_error() -> None:
    facts, error = run_with_watchdog(lambda: parse_output(_Endless(), "x 1\n", seconds=0.3))
    assert error == "metrics parser failed: ParseBudgetExceeded: parsing took more than 0.3 s (the host's deadline)"
    assert facts["warnings"] == [error]


def test_a_collection_whose_parse_outlives_the_deadline_is_an_error_not_a_hang() -> None:
    from nightowl.transports.local import LocalTransport

    class _Recorder:
        def record_command(self, *args: Any) -> None:
            return None

    run = run_with_watchdog(lambda: collect_on(LocalTransport(), _Endless(), _Recorder(), RunOptions()))
    assert run.status == "error" and "ParseBudgetExceeded" in (run.parse_error or "")


def test_no_time_left_is_a_parse_error_at_once() -> None:
    with pytest.raises(ParseBudgetExceeded):
        within(0, lambda: 1)


def test_a_parse_that_ends_in_time_leaves_nothing_pending_behind() -> None:
    assert within(0.2, lambda: 42) == 42
    time.sleep(0.4)  # past the budget: the withdrawn ticket must not raise here
    assert sum(range(100_000)) == 4_999_950_000


def test_a_parser_sees_at_most_the_cap_head_and_tail(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(parse_budget, "PARSE_INPUT_CAP", 1000)
    text = "".join(f"line {n:05d}\n" for n in range(1000))
    kept, cut = bounded_input(text, 1000)
    assert kept.startswith("line 00000\n") and kept.endswith("line 00999\n")
    assert cut == len(text) - len(kept) and len(kept) <= 1000
    assert bounded_input("short", 1000) == ("short", 0)


def test_the_parse_cut_is_counted_in_the_truncated_facts(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("nightowl.engine.parse_output.bounded_input", lambda text: bounded_input(text, 100))
    facts, error = parse_output(_Echo(), "y" * 50 + "\n" + "z" * 500 + "\n", seconds=5, cut_bytes=7)
    assert error is None and facts["truncated"] is True and facts["truncated_bytes"] > 7


def test_a_cardinality_explosion_is_cut_to_the_budget() -> None:
    from nightowl.collectors import get_collector

    series = (f'vllm:num_requests_running{{model_name="m",pod="p{n}"}} {n}\n' for n in range(400_000))
    text = "".join(series)  # about 20 MB: past the parse cap too
    facts, error = run_with_watchdog(lambda: parse_output(get_collector("metrics"), text, seconds=0.5))
    assert error is not None and "ParseBudgetExceeded" in error
    assert facts["truncated"] is True  # what the parser was handed was cut to the cap first
