"""Fixes the ninth field set called for in the engine-log reader (issue "Never cry wolf"): vLLM V0's
AsyncEngineDeadError (vllm-project/vllm#5822, behind a log collector's "date time.ms " stamps) and a traceback
ending on an exception with no message (asyncio's TimeoutError in run_engine_loop, vllm-project/vllm#5060) were
"cannot judge"."""

from __future__ import annotations

import pytest

from nightowl.collectors.normalise import normalise
from tests.helpers import facts_of

DEAD = (
    '  File "/usr/local/lib/python3.10/dist-packages/vllm/engine/async_llm_engine.py", line 839, in check_health\n'
    '    raise AsyncEngineDeadError("Background loop is stopped.")\n'
    "vllm.engine.async_llm_engine.AsyncEngineDeadError: Background loop is stopped.\n"
)
TIMEOUT = (
    '  File "/opt/conda/lib/python3.10/asyncio/tasks.py", line 458, in wait_for\n'
    "    raise exceptions.TimeoutError() from exc\n"
    "asyncio.exceptions.TimeoutError\n"
)


@pytest.mark.parametrize("stamp", ["", "2024-06-25 12:27:29.905 ", "2024-06-25 12:27:29,905 "])
def test_v0s_async_engine_dead_error_is_an_engine_death(stamp: str) -> None:
    text = "".join(stamp + line + "\n" for line in DEAD.splitlines())
    assert "engine-dead" in facts_of("engine-log", text)["error_kinds"]


def test_a_collector_stamp_on_every_line_is_unwrapped() -> None:
    text = "".join("2024-06-25 12:27:29.905 " + line + "\n" for line in DEAD.splitlines())
    unwrapped = normalise(text, "engine-log")
    assert unwrapped.families == ("launcher-prefix",)
    assert unwrapped.text.splitlines() == DEAD.splitlines()


def test_an_exception_line_without_a_message_is_an_error_the_log_names() -> None:
    assert facts_of("engine-log", TIMEOUT)["error_kinds"] == ["unclassified-exception"]


@pytest.mark.parametrize("line", ["    raise exceptions.TimeoutError() from exc", "Retrying after a TimeoutError"])
def test_a_frame_or_a_sentence_naming_an_exception_is_not_one(line: str) -> None:
    assert facts_of("engine-log", line + "\n")["error_kinds"] == []
