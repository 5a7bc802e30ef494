"""A repeating sweep's memo of parsed outputs (nightowl/engine/same_text.py): the same host's same text is not
parsed again, its facts come as a fresh copy, and nothing is kept outside ``remembering`` or for another host,
another cut, or a parse that failed."""

from __future__ import annotations

from typing import Any

import pytest

from nightowl.engine import same_text
from nightowl.engine.parse_memo import ParsedOutputs
from nightowl.engine.parse_output import parse_output


class Counting:
    """A collector whose parse counts its calls (and fails on "boom")."""

    kind = "counting"

    def __init__(self) -> None:
        self.parses = 0

    def parse(self, text: str) -> dict[str, Any]:
        self.parses += 1
        if "boom" in text:
            raise ValueError("unreadable")
        return {"lines": text.splitlines()}

    def facts(self, parsed: dict[str, Any]) -> dict[str, Any]:
        return {"kind": self.kind, "count": len(parsed["lines"]), "lines": list(parsed["lines"])}


def parse_on(host: str | None, collector: Counting, text: str, cut: int = 0, kept: Any = None) -> dict[str, Any]:
    token = same_text.HOST.set(host)
    try:
        return parse_output(collector, text, None, cut, kept)[0]
    finally:
        same_text.HOST.reset(token)


def test_outside_a_repeating_sweep_every_text_is_parsed() -> None:
    collector = Counting()
    parse_on("gpu-1", collector, "a\nb")
    parse_on("gpu-1", collector, "a\nb")
    assert collector.parses == 2


def test_the_same_hosts_same_text_is_parsed_once_and_its_facts_are_a_fresh_copy() -> None:
    collector = Counting()
    with same_text.remembering() as memo:
        first = parse_on("gpu-1", collector, "a\nb")
        first["lines"].append("added by the run")  # the run adds to its facts
        second = parse_on("gpu-1", collector, "a\nb")
    assert collector.parses == 1 and (memo.hits, memo.misses) == (1, 1)
    assert second == {"kind": "counting", "count": 2, "lines": ["a", "b"], "truncated": False, "truncated_bytes": 0}
    assert same_text._active is None  # noqa: SLF001 - forgotten with the block
    parse_on("gpu-1", collector, "a\nb")
    assert collector.parses == 2


@pytest.mark.parametrize(
    "second",
    [("gpu-2", "a\nb", 0), ("gpu-1", "a\nc", 0), ("gpu-1", "a\nb", 10), (None, "a\nb", 0)],
    ids=["another host", "another text", "another cut", "no host"],
)
def test_anything_else_is_parsed_again(second: tuple[str | None, str, int]) -> None:
    collector = Counting()
    with same_text.remembering():
        parse_on("gpu-1", collector, "a\nb")
        parse_on(second[0], collector, second[1], second[2])
    assert collector.parses == 2


def test_a_parse_that_failed_is_not_kept() -> None:
    collector = Counting()
    with same_text.remembering():
        failed = parse_on("gpu-1", collector, "boom")
        parse_on("gpu-1", collector, "boom")
    assert collector.parses == 2 and "parser failed" in failed["warnings"][0]


def test_a_hit_hands_the_parse_result_to_the_runs_readers() -> None:
    collector = Counting()
    with same_text.remembering():
        parse_on("gpu-1", collector, "a\nb", kept=ParsedOutputs(["counting"]))
        readers = ParsedOutputs(["counting"])  # the next round's run
        parse_on("gpu-1", collector, "a\nb", kept=readers)
    assert collector.parses == 1
    assert readers.recall("counting", "a\nb") == {"lines": ["a", "b"]}


def test_one_slot_per_host_and_collector_the_newest_text_in_it() -> None:
    collector = Counting()
    with same_text.remembering():
        for text in ("1", "2", "1"):  # a text that changes every round replaces the last one
            parse_on("gpu-1", collector, text)
        parse_on("gpu-1", collector, "1")
    assert collector.parses == 3


def test_past_the_budget_the_least_recently_used_host_goes_first() -> None:
    collector = Counting()
    with same_text.remembering(budget=6):
        for host in ("gpu-1", "gpu-2", "gpu-3"):
            parse_on(host, collector, "abc")  # 9 characters kept in all: gpu-1's go
        parse_on("gpu-3", collector, "abc")
        parse_on("gpu-1", collector, "abc")
    assert collector.parses == 4
