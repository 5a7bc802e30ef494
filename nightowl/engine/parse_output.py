"""One output parsed into facts: the parser and the collector's facts, its coverage, what was cut, under a
deadline; a parser bug is a recorded error, never a traceback. Every path that judges an output comes here
(engine/runner.py's attempts, engine/incremental.py's reads, engine/job.py's merged members), and a repeating
sweep's memo of texts it parsed before (engine/same_text.py) is asked first.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from nightowl.engine import same_text
from nightowl.engine.parse_budget import ParseBudgetExceeded, bounded_input, within


def parse_output(
    collector: Any, text: str, seconds: float | None = None, cut_bytes: int = 0, kept: Any = None
) -> tuple[dict[str, Any], str | None]:
    """Parse and derive facts; a parser bug becomes a recorded error, never a traceback.

    The parser sees at most PARSE_INPUT_CAP bytes (head and tail), and with ``seconds`` it is stopped
    once they are spent (a recorded error). ``cut_bytes`` (what the transport cut) and the parse's own
    cut land in the ``truncated`` facts. ``kept`` (the run's ParsedOutputs) keeps the parse for the bundle's readers."""
    text, parse_cut = bounded_input(text)
    key, known = same_text.recalled(collector, text, cut_bytes, kept)  # a repeating sweep: as this text gave before
    if known is not None:
        return known, None
    ends = None if seconds is None else time.monotonic() + seconds

    def bounded(step: Callable[[], dict[str, Any]]) -> dict[str, Any]:
        return step() if ends is None else within(ends - time.monotonic(), step)

    parsed: list[Any] = []

    def parse(part: str) -> Any:
        parsed.append(
            collector.parse(part) if kept is None else kept.parse_and_keep(collector.kind, collector.parse, part)
        )
        return parsed[-1]

    try:
        facts = bounded(lambda: collector.facts(parse(text)))
        error = None
    except (Exception, ParseBudgetExceeded) as exc:  # noqa: BLE001 - odd output is evidence, not a crash
        error = f"{collector.kind} parser failed: {type(exc).__name__}: {exc}"
        facts = {"kind": collector.kind, "warnings": [error]}
    assess = getattr(collector, "assess", None)
    clean = error is None
    if assess is not None and error is None:
        try:  # the coverage counts against the same deadline: a busy machine must not stretch it
            facts.update(bounded(lambda: assess(text, facts)))
        except (Exception, ParseBudgetExceeded) as exc:  # noqa: BLE001 - a coverage bug is recorded, never a crash
            facts.setdefault("warnings", []).append(f"coverage not measured: {type(exc).__name__}: {exc}")
            clean = False
    mark_cut(facts, cut_bytes + parse_cut)
    if clean and len(parsed) == 1:
        same_text.keep(key, parsed[0], facts, len(text))
    return facts, error


def mark_cut(facts: dict[str, Any], cut_bytes: int) -> None:
    """Say in the facts whether the output was cut at the transport's cap, so a rule or a summary can
    tell "no Xid in the log" from "no Xid in what was kept of it"."""
    facts["truncated"] = cut_bytes > 0
    facts["truncated_bytes"] = cut_bytes
