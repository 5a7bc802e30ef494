"""The gpu-history collector reads a host's runs that needed action and its last five, not every run the store
holds (a sweep every few minutes adds hundreds a day a host): its facts are those of all the runs."""

from __future__ import annotations

import tempfile
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from nightowl.collectors.gpu.gpu_history import _runs_facts
from nightowl.history import host_history, store

ACTIONS = st.sampled_from(["none", "none", "none", "reset-gpu", "drain", None])


def _write(path: Path, runs: list[tuple[str | None, int | None]], other: int) -> list[dict[str, object]]:
    """The runs (action, minute started: None, or the same minute twice, as a store may hold), in the order
    ``ORDER BY started, rowid`` reads them back (SQLite sorts NULL first)."""
    conn = store.connect(path)
    rows = []
    for number, (action, minute) in enumerate(runs):
        started = None if minute is None else 1000.0 + 60 * minute
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


@settings(max_examples=40, deadline=None)
@given(runs=st.lists(st.tuples(ACTIONS, st.none() | st.integers(0, 20)), max_size=30), other=st.integers(0, 3))
def test_the_runs_read_give_the_facts_of_every_run(runs: list[tuple[str | None, int | None]], other: int) -> None:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "history.db"
        every = _write(path, runs, other)
        read = host_history("gpu-1", path)["runs"]
        assert _runs_facts({"runs": read}) == _runs_facts({"runs": every})
        assert len(read) <= 5 + sum(1 for action, _ in runs if action not in (None, "none"))
