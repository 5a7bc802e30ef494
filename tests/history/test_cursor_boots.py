"""`kernel-log-boots` read once per boot list (issue 46): while `journalctl --list-boots` shows the same earlier
boots, a read fetches the list alone and the earlier boots' sections are carried, with a full read's facts."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nightowl.collectors import get_collector
from nightowl.engine.incremental import joined
from nightowl.paths import data_dir

RECORDED = sorted(data_dir("fixtures").glob("**/kernel-log-boots.out"))
COLLECTOR = get_collector("kernel-log-boots")
READER = COLLECTOR.cursor
FULL = ("sh", "-c", "script", "kernel-log-boots", "2")
LIST = ("journalctl", "--list-boots", "--no-pager")


def facts(text: str) -> dict[str, object]:
    return COLLECTOR.facts(COLLECTOR.parse(text))  # type: ignore[no-any-return]


def listing(text: str) -> str:
    """What `journalctl --list-boots` prints of the same node: the lines before the first section."""
    head = text.split("\n-- nightowl previous boot ", 1)[0]
    return head if head.endswith("\n") else head + "\n"


def test_there_are_recordings() -> None:
    assert len(RECORDED) >= 2


@pytest.mark.parametrize("path", RECORDED, ids=lambda p: p.parent.name)
def test_the_list_alone_and_the_carried_sections_give_the_full_reads_facts(path: Path) -> None:
    text = path.read_text()
    first = READER.read(FULL, text, None)
    if first.state is None:
        pytest.skip("no current boot listed: nothing to carry")
    again = READER.read(LIST, listing(text), first.state)
    assert again.gap is None
    assert facts(joined(READER, READER.keep(text), again.body)) == facts(text)
    # carried on: the second read's text keeps the same sections
    assert READER.keep(joined(READER, READER.keep(text), again.body)) == READER.keep(text)


def test_another_boot_list_is_a_full_read() -> None:
    path = next(p for p in RECORDED if " -1 " in p.read_text())
    text = path.read_text()
    first = READER.read(FULL, text, None)
    rebooted = listing(text).replace(" -1 ", " -2 ").replace("  0 ", " -1 ")
    assert READER.read(LIST, rebooted, first.state).gap is not None
    assert READER.commands(first.state, {"previous_boots": 2}) == [(LIST, {})]
    assert READER.commands(first.state, {"previous_boots": 5}) == []  # another count asked: a full read


def _moved(text: str, seconds: int, junk: str | None, row: str = "0") -> str:
    """The same node's list later: boot ``row``'s last entry at ``seconds`` past midnight (the current boot's moves
    with its log; an earlier one's only where the journal says otherwise now), maybe with a line that is no list
    row (``junk``)."""
    rows = listing(text).splitlines(keepends=True)
    stamp = f"{seconds // 3600 % 24:02d}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"
    rows = [re.sub(r"\d\d:\d\d:\d\d( \w+)?\s*$", rf"{stamp}\1\n", r) if r.split()[:1] == [row] else r for r in rows]
    return "".join(rows) + (f"{junk}\n" if junk else "")


@settings(max_examples=60, deadline=None)
@given(
    path=st.sampled_from(RECORDED),
    seconds=st.integers(0, 86399),
    junk=st.none() | st.sampled_from(["Warning: journal has been rotated", "-- No entries --x", "  "]),
    row=st.sampled_from(["0", "-1"]),
)
def test_a_fresh_list_refreshes_the_carried_facts_as_a_full_parse_would(
    path: Path, seconds: int, junk: str, row: str
) -> None:
    """What the engine does of a quiet read (engine/incremental.py ``_known_run``): the last parse's facts with
    what the fresh list alone changes (``refresh``) are the facts of a full parse of the list and the sections."""
    text = path.read_text()
    first = READER.read(FULL, text, None)
    if first.state is None:
        return
    fresh = _moved(text, seconds, junk, row)
    again = READER.read(LIST, fresh, first.state)
    if again.gap is not None:  # a junk line that reads as a boot row: another list, a full read
        return
    carried = READER.keep(text)
    assert READER.keep(joined(READER, carried, again.body)) == carried  # a quiet list keeps nothing
    refreshed = {**facts(text), **READER.refresh(facts(text), facts(again.body))}
    assert refreshed == facts(joined(READER, carried, again.body))


def test_a_list_that_holds_a_section_is_not_quiet() -> None:
    path = next(p for p in RECORDED if "-- nightowl previous boot -1 --" in p.read_text())
    assert not READER.quiet(path.read_text())
