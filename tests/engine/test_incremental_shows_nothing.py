"""A cheap-first read asks the collector whether a full output shows nothing through the engine's one guarded
check (engine/output_status.shows_nothing), as the runner's ordinary path does: a ``shows_nothing`` that raises
(it parses: nvidia-smi's) leaves the output to the parse, which records what went wrong, and never ends the read."""

from __future__ import annotations

import time
from typing import Any

from nightowl.engine import incremental
from nightowl.engine.runner import _PARTS, RunOptions
from nightowl.transports.base import CommandResult


class _Collector:
    kind = "standin"
    namespace = "standin"
    timeout = 5.0

    def __init__(self, nothing: Any) -> None:
        self.shows_nothing = nothing

    def parse(self, text: str) -> dict[str, Any]:
        return {"lines": text.splitlines()}

    def facts(self, parsed: dict[str, Any]) -> dict[str, Any]:
        return dict(parsed)


class _Reader:
    applies_shows_nothing = True


def _parsed_run(nothing: Any) -> Any:
    read = incremental._Read(None, _Collector(nothing), _Reader(), None, RunOptions(), _PARTS, None)  # type: ignore[arg-type]
    result = CommandResult(("standin",), 0, "gpu 0 fine\n", "", time.time(), 0.01)
    return read.parsed_run(result, result.stdout, None)


def _broken(text: str) -> bool:
    raise ValueError("the parser behind shows_nothing failed")


def test_a_shows_nothing_that_raises_leaves_the_output_to_the_parse() -> None:
    run = _parsed_run(_broken)
    assert run.status == "ok" and run.facts["lines"] == ["gpu 0 fine"]


def test_an_output_that_shows_nothing_is_no_data() -> None:
    run = _parsed_run(lambda text: True)
    assert run.status == "no_data" and "printed nothing to read (gpu 0 fine)" in run.reason
