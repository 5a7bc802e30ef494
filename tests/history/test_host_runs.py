"""The gpu-history collector reads a host's last five runs and a count of those that needed action, not every run the
store holds (a sweep every few minutes adds hundreds a day a host): its facts are those of all the runs."""

from __future__ import annotations

import sqlite3
import tempfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nightowl.collectors.gpu.gpu_history import _runs_facts
from nightowl.history import host_history, store

ACTIONS = st.sampled_from(["none", "none", "none", "reset-gpu", "drain", None])


def _write(path: Path, runs: list[tuple[str | None, float | None]], other: int) -> list[dict[str, object]]:
    """The runs (action, minute started: None, or the same minute twice, as a store may hold; a float is the
    start itself), in the order ``ORDER BY started, rowid`` reads them back (SQLite sorts NULL first)."""
    conn = store.connect(path)
    rows = []
    for number, (action, minute) in enumerate(runs):
        started = minute if minute is None or isinstance(minute, float) else 1000.0 + 60 * minute
        row = (f"b{number}", "gpu-1", f"s{number}", "node-health", started, "boot", "ok", "v", "info",
               action, "[]", 0.0)  # fmt: skip
        conn.execute("INSERT INTO runs VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", row)
        rows.append(dict(zip(("bundle_id", "host", "bundle_sha256", "runbook", "started", "boot_id", "status",
                              "verdict_id", "severity", "action", "gpus", "recorded"), row, strict=True)))  # fmt: skip
    for number in range(other):  # another host's runs: never read for this one
        conn.execute("INSERT INTO runs (bundle_id, host, started, action, recorded) VALUES (?, 'gpu-2', ?, 'drain', 0)",
                     (f"o{number}", 5000.0 + number))  # fmt: skip
    conn.close()
    return sorted(rows, key=lambda r: (r["started"] is not None, r["started"] or 0.0))  # stable: rowid order


def _facts_of_every_run(every: list[dict[str, object]]) -> dict[str, object]:
    """The facts as the collector gives them, from every run of the host (oldest first): the last five verdicts,
    and the mean of the gaps between the starts of the runs that needed action."""
    incidents = sorted(float(r["started"]) for r in every if r["action"] not in (None, "none") and r["started"])  # type: ignore[arg-type]
    gaps = [b - a for a, b in zip(incidents, incidents[1:], strict=False)]
    keys = ("bundle_id", "bundle_sha256", "started", "verdict_id", "action")
    return {
        "last_verdicts": [{k: r[k] for k in keys} for r in every[-5:]],
        "mean_seconds_between_incidents": sum(gaps) / len(gaps) if gaps else None,
    }


# A start: a minute of the bench's day, none, 0 (no start: never an incident's), or a fractional epoch time
STARTS = st.none() | st.integers(0, 20) | st.just(0.0) | st.floats(1.7e9, 1.8e9)


@settings(max_examples=80, deadline=None)
@given(runs=st.lists(st.tuples(ACTIONS, STARTS), max_size=30), other=st.integers(0, 3))
def test_the_runs_read_give_the_facts_of_every_run(runs: list[tuple[str | None, float | None]], other: int) -> None:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "history.db"
        every = _write(path, runs, other)
        read = host_history("gpu-1", path)
        facts, expected = _runs_facts(read), _facts_of_every_run(every)
        assert facts["last_verdicts"] == expected["last_verdicts"]
        # the span over the count is the mean of the gaps (to the last bit where the starts cross a power of 2)
        assert facts["mean_seconds_between_incidents"] == pytest.approx(expected["mean_seconds_between_incidents"])
        assert len(read["runs"]) == min(5, len(runs))


def test_a_host_that_needed_action_for_weeks_reads_five_runs_and_one_count(tmp_path: Path) -> None:
    path = tmp_path / "history.db"
    _write(path, [("none", 0)] + [("drain", minute) for minute in range(1, 400)], 2)
    read = host_history("gpu-1", path)
    assert len(read["runs"]) == 5 and read["incidents"] == {"count": 399, "first": 1060.0, "last": 1000.0 + 60 * 399}
    assert _runs_facts(read)["mean_seconds_between_incidents"] == 60.0


def _plan(path: Path, sql: str) -> str:
    """The query's plan, on a connection of its own (one kept from before a schema change plans an EXPLAIN as it
    did then; the query itself is planned again)."""
    conn = sqlite3.connect(path)
    try:
        return " | ".join(row[3] for row in conn.execute("EXPLAIN QUERY PLAN " + sql, ("gpu-1",)))
    finally:
        conn.close()


def test_the_runs_read_goes_through_indexes_not_every_run_of_the_host(tmp_path: Path) -> None:
    """A sweep every few minutes adds hundreds of runs a day a host, and each round reads this: the count of the
    runs that needed action from the partial index alone, the last five from the host's by time; neither reads
    each of the host's runs (what the read did before: 2.3 ms at 10,000 runs)."""
    from nightowl.history import _INCIDENTS, _LAST_RUNS

    path = tmp_path / "history.db"
    _write(path, [("none", n) for n in range(50)] + [("drain", 51)], 0)
    counted, last = _plan(path, _INCIDENTS), _plan(path, _LAST_RUNS)  # SQLite before 3.36 says "SEARCH TABLE runs"
    assert "USING COVERING INDEX runs_acted (host=?)" in counted and " | " not in counted
    assert "USING COVERING INDEX runs_host (host=?)" in last and "SCAN runs" not in last and "SCAN TABLE" not in last


def test_a_store_made_before_the_index_gets_it_when_a_writer_opens_it(tmp_path: Path) -> None:
    """Same layout (an earlier release reads and writes it as before): the next writer makes the index."""
    path = tmp_path / "history.db"
    _write(path, [("none", 1), ("reset-gpu", 2)], 0)
    conn = sqlite3.connect(path)
    conn.execute("DROP INDEX runs_acted")  # a store an earlier release made
    conn.close()
    from nightowl.history import _INCIDENTS

    assert "runs_acted" not in _plan(path, _INCIDENTS)
    assert host_history("gpu-1", path)["incidents"] == {"count": 1, "first": 1120.0, "last": 1120.0}  # all the same
    store.connect(path).close()
    assert "runs_acted" in _plan(path, _INCIDENTS)


def test_no_store_path_is_history_off_not_an_empty_past() -> None:
    with pytest.raises(store.StoreError, match="history is off"):
        host_history("gpu-1", None)
