"""Issue 42 item 12: a huge output under a short --host-timeout. The run's parse already had the host's
deadline and a size cap; the bundle's readers (the postmortem draft, the history) parsed the bundle's copy
again with neither, so most of a minute went by after the verdict. Each bound is checked with a watchdog
(a thread join with a limit), never a timing assert."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from nightowl.engine.parse_budget import bounded_input
from nightowl.engine.parse_memo import ParsedOutputs
from nightowl.engine.readback import ReadBackTimedOut, read_as_parsed, read_back
from nightowl.engine.runner import parse_output
from tests.engine.test_parse_budget import run_with_watchdog
from tests.postmortem.bundles import make_bundle


def finishes(target: Any, seconds: float = 30.0) -> Any:
    return run_with_watchdog(target, seconds, "a reader of the bundle ran past its budget")


def spin(text: str) -> Any:
    while True:
        pass


def test_a_reader_parses_the_same_head_and_tail_the_run_did(tmp_path: Path) -> None:
    path = tmp_path / "kernel-log.out"
    text = "".join(f"line {n:05d}\n" for n in range(5000))
    path.write_text(text)
    seen: list[str] = []
    read_back("kernel-log", lambda text: seen.append(text) or {}, path, reader=lambda p: read_as_parsed(p, 1000))
    assert seen == [bounded_input(text, 1000)[0]]  # exactly what the runner's parser is handed
    assert len(seen[0].encode()) <= 1000
    assert seen[0].startswith("line 00000\n") and seen[0].endswith("line 04999\n")


def test_a_reader_gets_the_runs_own_result_for_a_cut_output(tmp_path: Path) -> None:
    path = tmp_path / "kernel-log.out"
    text = "".join(f"line {n:05d}\n" for n in range(5000))  # past the 1,000-byte cap below: cut to head and tail
    path.write_text(text)
    kept = bounded_input(text, 1000)[0]
    assert kept != text
    parsed = ParsedOutputs({"kernel-log"})
    parsed.remember("kernel-log", kept, {"from": "the run"})
    # never parsed again (a parse would spin until the 5 s budget and raise, not hang the suite)
    found = read_back("kernel-log", spin, path, seconds=5, reader=lambda p: read_as_parsed(p, 1000), kept=parsed)
    assert found == {"from": "the run"}


def test_a_read_back_past_its_budget_is_named_not_a_hang(tmp_path: Path) -> None:
    path = tmp_path / "kernel-log.out"
    path.write_text("NVRM: Xid (PCI:0000:3b:00): 79, GPU has fallen off the bus.\n")

    def attempt() -> str:
        try:
            read_back("kernel-log", spin, path, seconds=0.3)
        except ReadBackTimedOut as exc:
            return str(exc)
        return "returned"

    assert finishes(attempt) == "parsing kernel-log.out again took more than 0.3 s"
    assert read_back("kernel-log", lambda text: {"parsed": True}, path, seconds=5) == {"parsed": True}


def test_the_draft_says_which_output_it_could_not_read_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from nightowl.postmortem import bundle_reader, render_bundle

    bundle = make_bundle(tmp_path, ["xid79-fallen-off-bus"])
    monkeypatch.setattr(bundle_reader, "DRAFT_READ_SECONDS", 0.5)
    import nightowl.collectors as collectors  # looked up when the draft parses: patch the lookup itself

    original = collectors.get_collector

    class Slow:
        def __init__(self, kind: str) -> None:
            self.inner = original(kind)
            self.parse = spin if kind == "kernel-log" else self.inner.parse

    monkeypatch.setattr(collectors, "get_collector", lambda kind: Slow(kind))
    markdown = finishes(lambda: render_bundle(bundle))
    lesson = next(line for line in markdown.splitlines() if "could not read again" in line)
    # the timeline's placing ran out of the draft's one budget; the facts' parse then had nothing left
    assert "hosts/xid79-fallen-off-bus/kernel-log.out: events from line " in lesson
    assert "are not placed in the timeline (out of time)" in lesson
    assert "hosts/xid79-fallen-off-bus/kernel-log.out: no time was left to parse kernel-log.out again" in lesson


def test_a_citation_of_a_whole_file_copies_its_two_ends_into_the_html() -> None:
    from nightowl.postmortem.citations import Cite
    from nightowl.postmortem.render import MAX_CITED_SPAN, cited_lines

    wide = Cite("E5", "hosts/h/kernel-log.out", "kernel-log.out", "0" * 64, 1, 555_533, "E5", "E5-L1")
    last = 10 + MAX_CITED_SPAN - 1
    narrow = Cite("E6", "hosts/h/nvidia-smi.out", "nvidia-smi.out", "0" * 64, 10, last, "E6", "E6-L10")
    assert cited_lines([wide, narrow]) == {"E5": {1, 555_533}, "E6": set(range(10, 10 + MAX_CITED_SPAN))}


class _SlowCoverage:
    """A collector whose parse is quick and whose coverage never ends (a busy machine's worst case)."""

    kind = "metrics"

    def parse(self, text: str) -> dict[str, Any]:
        return {"chars": len(text)}

    def facts(self, parsed: dict[str, Any]) -> dict[str, Any]:
        return parsed

    def assess(self, text: str, facts: dict[str, Any]) -> dict[str, Any]:
        return spin(text)


def test_the_coverage_counts_against_the_parse_deadline() -> None:
    facts, error = finishes(lambda: parse_output(_SlowCoverage(), "x 1\n", seconds=0.3))  # type: ignore[arg-type]
    assert error is None and facts["chars"] == 4
    assert any(w.startswith("coverage not measured: ParseBudgetExceeded") for w in facts["warnings"])


def test_the_historys_parse_of_a_bundle_output_has_the_same_deadline(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from nightowl.engine import readback
    from nightowl.history import extract

    path = tmp_path / "kernel-log.out"
    path.write_text("NVRM: Xid (PCI:0000:3b:00): 79, GPU has fallen off the bus.\n")
    monkeypatch.setattr(readback, "READBACK_SECONDS", 0.3)

    def attempt() -> str:
        try:
            extract._parsed("kernel-log", spin, path)
        except ReadBackTimedOut as exc:
            return str(exc)
        return "returned"

    assert finishes(attempt) == "parsing kernel-log.out again took more than 0.3 s"
