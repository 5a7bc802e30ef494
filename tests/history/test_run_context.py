"""State handed in, not reached for (issue 44.3): a run reads and records the history store of the
``RunContext`` it is given, so two receivers or commands in one process, each with its own store, never see
each other's past, and the ``gpu-history`` collector reads only the readers its run hands it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from nightowl import history
from nightowl.collectors.gpu import gpu_history
from nightowl.engine.context import RunContext
from nightowl.history import store
from nightowl.library import runbooks
from nightowl.run import RunSettings, run_and_save
from nightowl.transports.replay import ReplayTransport
from tests.history.test_history import HOSTS, XID79, recorded_host


def _xid(host: Path, out: Path, context: RunContext) -> dict[str, Any]:
    result = run_and_save(
        runbooks.load("xid"),
        {"gpu-17": lambda: ReplayTransport(host, "gpu-17")},
        out,
        settings=RunSettings(drafts=False, status_update=False),
        context=context,
    )
    verdict: dict[str, Any] = result.hosts[0]["verdict"]
    return verdict


def _context(path: Path) -> RunContext:
    return RunContext(history=path, readers=history.readers(path))


def test_two_contexts_in_one_process_keep_their_own_history(tmp_path: Path) -> None:
    seen, fresh = tmp_path / "seen.sqlite3", tmp_path / "fresh.sqlite3"
    for day in ("Mon Apr  1 10:00:00 2024", "Wed Apr  3 11:30:00 2024"):  # two earlier incidents, in one store
        earlier = recorded_host(tmp_path / day[:3], "gpu-17", [f"[{day}] {XID79}"])
        _xid(earlier, tmp_path / "bundles", _context(seen))
    assert len(store.read(seen, "SELECT * FROM events WHERE code = 79")) == 2
    now = recorded_host(tmp_path / "Fri", "gpu-17", [f"[Fri Apr  5 21:29:39 2024] {XID79}"])
    assert _xid(now, tmp_path / "bundles", _context(seen))["action"] == "hardware-ticket"
    # the other store, in the same process, right after: its own past only (none), recorded there alone
    assert _xid(now, tmp_path / "bundles", _context(fresh))["action"] == "reboot-node"
    assert len(store.read(fresh, "SELECT * FROM runs")) == 1
    # no store handed in: nothing read, nothing recorded (no command's choice is kept where a run could reach it)
    assert not hasattr(history, "_chosen") and not hasattr(history, "activate")
    assert _xid(now, tmp_path / "bundles", RunContext())["action"] == "reboot-node"
    assert len(store.read(seen, "SELECT * FROM runs")) == 3


def test_the_collector_reads_only_the_readers_it_is_handed() -> None:
    asked: list[str] = []

    def store_reader(host: str) -> dict[str, Any]:
        asked.append(host)
        return {"events": [], "runs": [], "incidents": {"count": 0}}

    inputs: dict[str, Any] = {"kernel_log": {"events": []}, "hosts": {"gpu-17": {}}}
    assert gpu_history.derive(inputs, {})["store"] == "off"
    handed = gpu_history.derive({**inputs, "readers": {gpu_history.STORE_READER: store_reader}}, {})
    assert handed["store"] == "read" and asked == ["gpu-17"]


def test_the_runs_draft_cites_earlier_incidents_from_the_store_it_was_handed(tmp_path: Path) -> None:
    db = tmp_path / "handed.sqlite3"
    host = HOSTS / "xid79-fallen-off-bus"
    runs = [
        run_and_save(
            runbooks.load("xid"), {"gpu-17": lambda: ReplayTransport(host, "gpu-17")}, tmp_path, context=_context(db)
        )
        for _ in range(2)
    ]
    first, second = (result.bundle for result in runs)
    assert first is not None and second is not None
    before = (second / "postmortem.md").read_text().split("## Before this incident", 1)[1].split("\n## ", 1)[0]
    assert first.name in before and second.name not in before
