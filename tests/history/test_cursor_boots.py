"""`kernel-log-boots` read once per boot list (issue 46): while `journalctl --list-boots` shows the same earlier
boots, a read fetches the list alone and the earlier boots' sections are carried, with a full read's facts."""

from __future__ import annotations

from pathlib import Path

import pytest

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
