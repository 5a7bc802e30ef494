"""Incremental reads give a full read's facts (issue 46 item 2): for random splits of the recorded kernel logs
into successive reads, what each read carries (``keep_lines``) plus the last read's new lines parses into the
facts the whole log parses into. Splits fall anywhere, inside multi-line reports (AER, hung-task stacks) too."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nightowl.collectors import get_collector
from nightowl.collectors.gpu.kernel_log.cursor import KERNEL_LOG_CURSOR, keep_lines
from nightowl.paths import data_dir

LOGS = sorted(data_dir("fixtures").glob("**/kernel-log.out"))
# What the parse counts of the text it was given, not what the log says: the lines read and how many of them
# were recognised (an incremental parse reads the carried lines, not the whole log).
COUNTS_OF_THE_TEXT = ("lines_read", "coverage")
EXAMPLES = 400  # the closing note's count of random splits


@functools.cache
def _lines(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8", errors="surrogateescape").splitlines(keepends=True)


@functools.cache
def _full_facts(path: Path) -> dict[str, Any]:
    return _facts("".join(_lines(path)))


def _facts(text: str) -> dict[str, Any]:
    collector = get_collector("kernel-log")
    facts = collector.facts(collector.parse(text))
    return {name: value for name, value in facts.items() if name not in COUNTS_OF_THE_TEXT}


def incremental_facts(lines: list[str], cuts: list[int]) -> dict[str, Any]:
    """The facts of the last of successive reads ending at ``cuts``: each read parses what the reads before
    it carried plus its own lines, and carries ``keep`` of that on."""
    bounds = [0, *sorted(set(cuts)), len(lines)]
    carried = ""
    for start, end in zip(bounds[:-2], bounds[1:-1], strict=True):
        carried = KERNEL_LOG_CURSOR.keep(carried + "".join(lines[start:end]))
    return _facts(carried + "".join(lines[bounds[-2] :]))


def test_there_are_real_logs_to_split() -> None:
    assert len(LOGS) >= 100


@settings(max_examples=EXAMPLES)
@given(st.data())
def test_random_splits_give_the_full_reads_facts(data: st.DataObject) -> None:
    path = data.draw(st.sampled_from(LOGS), label="log")
    lines = _lines(path)
    cuts = data.draw(st.lists(st.integers(0, len(lines)), max_size=8), label="cuts")
    assert incremental_facts(lines, cuts) == _full_facts(path), path


def _report_lines(path: Path) -> list[int]:
    """The lines of every multi-line report: a hinted line and the lines right after it that carry it on."""
    lines = _lines(path)
    return [n for n, line in enumerate(lines) if "AER" in line or "state:D" in line or line[:1].isspace()]


MULTI_LINE = [p for p in LOGS if len(_report_lines(p)) > 1]


@pytest.mark.parametrize("path", MULTI_LINE, ids=lambda p: p.parent.name)
def test_a_split_inside_each_multi_line_report_gives_the_full_reads_facts(path: Path) -> None:
    lines = _lines(path)
    for cut in _report_lines(path)[:200]:
        for at in (cut, cut + 1):
            assert incremental_facts(lines, [at]) == _full_facts(path), f"{path}: split at line {at}"


def test_carrying_composes() -> None:
    """What a read carries of ``carried + new`` is what it would carry of the whole log so far, so carried
    text never grows with reads that add nothing."""
    for path in LOGS[:40]:
        lines = _lines(path)
        half = len(lines) // 2
        once = keep_lines("".join(lines))
        assert keep_lines(keep_lines("".join(lines[:half])) + "".join(lines[half:])) == once, path
        assert keep_lines(once) == once


def test_a_quiet_log_carries_almost_nothing() -> None:
    quiet = "".join(f"[{n:6d}.000000] systemd[1]: Started session {n}.\n" for n in range(5000))
    assert keep_lines(quiet).count("\n") == 1  # the first line (a log with text is never read as blank)


def test_the_lines_kept_after_an_opener_follow_the_parsers_own_test() -> None:
    """cursor._after calls kernel_log.patterns.may_start_report (the parser's own test): the two agree on every line."""
    from nightowl.collectors.gpu.kernel_log import may_start_report
    from nightowl.collectors.gpu.kernel_log.cursor import REPORT_AFTER, _after

    for path in LOGS:
        for line in _lines(path):
            if "state:D" not in line and "blocked for more than" not in line:
                assert (_after(line) == REPORT_AFTER) == may_start_report(line), line


@functools.cache
def _quiet_lines(path: Path) -> tuple[str, ...]:
    """The log's own lines that hold no HINT (what a quiet hour of that node prints), and two the bench adds."""
    from nightowl.collectors.gpu.kernel_log.cursor import _HINT

    own = tuple(line for line in _lines(path) if line.strip() and _HINT.search(line) is None)
    return own[:200] + ("usb 1-1: new high-speed USB device number 7 using xhci_hcd\n", "\n")


def adds_nothing(carried: str, body: str) -> bool:
    """What the engine asks the reader before it takes the last parse's facts (engine/incremental.py ``_quiet_on``):
    ``carried`` is ``settled`` and ``body`` is ``quiet``; the property below holds that ``keep`` then keeps nothing."""
    return KERNEL_LOG_CURSOR.settled(carried) and KERNEL_LOG_CURSOR.quiet(body)


@settings(max_examples=EXAMPLES)
@given(st.data())
def test_a_read_that_adds_nothing_keeps_the_last_reads_facts(data: st.DataObject) -> None:
    """Issue 46: where the reader says new lines add nothing (``settled`` and ``quiet``), what it keeps of carried +
    new is the carried text, and the facts of carried + new are the facts of the log before them: the engine takes the
    stored facts of the last parse instead of parsing the same text again."""
    path = data.draw(st.sampled_from(LOGS), label="log")
    lines = _lines(path)
    cut = data.draw(st.integers(0, len(lines)), label="cut")
    before = "".join(lines[:cut])
    carried = KERNEL_LOG_CURSOR.keep(before)
    body = "".join(data.draw(st.lists(st.sampled_from(_quiet_lines(path)), max_size=6), label="new lines"))
    if not adds_nothing(carried, body):
        return
    assert KERNEL_LOG_CURSOR.keep(carried + body) == carried
    assert _facts(carried + body) == _facts(before), path


def test_a_report_cut_at_the_end_of_a_read_is_not_quiet() -> None:
    """The lines after a report's opener are kept with it: where the opener is near the end of what was carried,
    the next read's first lines are the report's, never "nothing"."""
    opener = "[  10.000000] INFO: task python3:4242 blocked for more than 120 seconds.\n"
    carried = KERNEL_LOG_CURSOR.keep("[   0.000000] Linux version 6.8.0\n" + opener)
    assert not adds_nothing(carried, "[  10.000001] Call Trace:\n")
    assert adds_nothing(carried + "".join(f"[  11.{n:06d}] x\n" for n in range(90)), "[ 20.0] y\n")


def test_a_log_pasted_after_its_prompt_keeps_its_own_first_line_too() -> None:
    """The first line with text of a pasted log may be the prompt that ran it ("# sudo dmesg --ctime"): kept with
    the log's own first line, so the facts of what is carried are the facts of the log so far, never "empty"."""
    before = "# sudo dmesg --ctime\n[Thu Jul 18 16:03:50 2024] Linux version 6.2.0-37-generic\n" + "".join(
        f"[Thu Jul 18 16:03:5{n} 2024] usb 1-{n}: new device\n" for n in range(5)
    )
    carried = KERNEL_LOG_CURSOR.keep(before)
    assert carried.splitlines()[:2] == before.splitlines()[:2]
    assert adds_nothing(carried, "[Thu Jul 18 16:04:00 2024] usb 1-9: new device\n")
    assert _facts(carried) == _facts(before)
    only_prompt = KERNEL_LOG_CURSOR.keep("$ journalctl -k\n")
    assert not adds_nothing(only_prompt, "[  1.0] usb 1-1: new device\n")
