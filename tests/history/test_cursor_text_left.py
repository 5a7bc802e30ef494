"""A quiet read leaves its carried text in the store (issue 46): where the saved state says the text ends settled
(``SETTLED``) and holds the last parse's facts and the bundle that holds the text, a read whose new lines are quiet
reads the position alone; a read with news reads the text too, and both give a full read's verdict."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from nightowl.engine.incremental import HELD, PARSED, PARSED_BY, SETTLED
from nightowl.history import cursors
from tests.history.cursor_standins import Journal, record_loads
from tests.history.test_cursor_read import BOOT, STORE, XID13, XID79, carried, kernel_log, node, sweep

__all__ = ["node"]  # the fixture, used by name

KINDS = ("kernel-log", "kernel-log-boots")


def quiet_lines(start: int) -> list[str]:
    return [f"2024-06-01T12:{start:02d}:{n:02d}+0000 node kernel: usb 2-{n}: new device" for n in range(3)]


@pytest.fixture
def loads(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, bool]]:
    """(kind, whether its text was read) of every position a sweep loads."""
    return record_loads(monkeypatch)


def test_a_quiet_read_leaves_the_text_in_the_store_and_news_reads_it(node: Path, loads: list[tuple[str, bool]]) -> None:
    journal = Journal(node / "journal.json")
    journal.add(*BOOT, XID79)
    sweep(node)  # full
    journal.add(*quiet_lines(0))
    sweep(node)  # incremental: its text copied into no bundle yet, so read (the next cites it: HELD)
    for kind in KINDS:
        saved = cursors.load(node / STORE, "node", kind, text=False)
        assert saved is not None and saved.state[SETTLED] is True and PARSED in saved.state and saved.state[HELD]
    loads.clear()
    journal.add(*quiet_lines(1))
    third = sweep(node)
    assert sorted(load for load in loads if load[0] in KINDS) == [(kind, False) for kind in KINDS]  # positions alone
    assert carried(third)["read"] == "incremental" and carried(third)["carried_in"] is True
    assert kernel_log(third)["xid_codes"] == [79]
    boots = third.runs[0].collections["kernel-log-boots"].facts
    last = journal.seq  # the list's last entry moved with the journal: the fresh list's facts, not the last parse's
    listed = f"Sat 2024-06-01 12:{last // 60:02d}:{last % 60:02d} UTC"
    assert boots is not None and boots["boots"][0]["last_entry"] == listed
    loads.clear()
    journal.add(XID13)  # news: the text is read, and the new Xid is in the verdict
    fourth = sweep(node)
    assert ("kernel-log", True) in loads
    assert kernel_log(fourth)["xid_codes"] == [13, 79]


def _two_sweeps(node: Path) -> Journal:
    """A full read, then one whose text is copied into its bundle: the next quiet read cites it (HELD)."""
    journal = Journal(node / "journal.json")
    journal.add(*BOOT, XID79)
    sweep(node)
    journal.add(*quiet_lines(0))
    sweep(node)
    journal.add(*quiet_lines(1))
    return journal


def test_a_fresh_list_that_fails_to_parse_is_an_error_never_the_last_facts(node: Path) -> None:
    from nightowl.collectors import get_collector

    _two_sweeps(node)
    collector = get_collector("kernel-log-boots")
    real_parse = collector.parse

    def broken(text: str) -> Any:
        raise ValueError("a parser bug")

    object.__setattr__(collector, "parse", broken)  # a frozen dataclass
    try:
        third = sweep(node)
    finally:
        object.__setattr__(collector, "parse", real_parse)
    boots = third.runs[0].collections["kernel-log-boots"]
    assert boots.status == "error" and "a parser bug" in str(boots.reason)


def test_facts_another_release_parsed_are_never_taken(
    node: Path, loads: list[tuple[str, bool]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """An upgrade's parser reads the carried text again (a quiet read), and the cheap readers read in full."""
    import nightowl

    _two_sweeps(node)
    loads.clear()
    monkeypatch.setattr(nightowl, "__version__", "an-upgrade")
    third = sweep(node)
    assert ("kernel-log", True) in loads and ("kernel-log-boots", True) in loads  # parsed again, with their text
    assert kernel_log(third)["xid_codes"] == [79] and carried(third)["read"] == "incremental"
    for kind in KINDS:  # and saved as this release's: the next quiet read takes them
        saved = cursors.load(node / STORE, "node", kind, text=False)
        assert saved is not None and saved.state[PARSED_BY] == "an-upgrade"


def test_an_upgrade_works_out_settled_again_not_from_the_earlier_release(
    node: Path, loads: list[tuple[str, bool]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The earlier release's ``SETTLED`` is its reader's word: the upgrade, which reads the text again, saves its
    own reader's, even where the text carries on unchanged."""
    import json
    import sqlite3

    import nightowl

    _two_sweeps(node)
    with sqlite3.connect(node / STORE) as conn:  # the earlier release said otherwise of the same text
        (state,) = conn.execute("SELECT state FROM cursors WHERE host = 'node' AND kind = 'kernel-log'").fetchone()
        conn.execute(
            "UPDATE cursors SET state = ? WHERE host = 'node' AND kind = 'kernel-log'",
            (json.dumps({**json.loads(state), SETTLED: False}),),
        )
    monkeypatch.setattr(nightowl, "__version__", "an-upgrade")
    sweep(node)
    saved = cursors.load(node / STORE, "node", "kernel-log", text=False)
    assert saved is not None and saved.state[PARSED_BY] == "an-upgrade" and saved.state[SETTLED] is True
